import numpy as np
import pytest


@pytest.fixture(scope="session")
def fs5():
    from paperflow.fmri.geometry import load_fsaverage5

    return load_fsaverage5()


@pytest.fixture(scope="session")
def grid8():
    """nilearn's MNI152 grid at 8 mm (small, fast)."""
    from paperflow.fmri.geometry import mni_grid

    return mni_grid(8)


@pytest.fixture(scope="session")
def flat8(fs5, grid8):
    from paperflow.fmri.geometry import build_flat

    aff, shape, _ = grid8
    return build_flat(fs5, 4.8, 8, "volume", aff, shape)


@pytest.fixture
def rng():
    return np.random.default_rng(0)
