"""Small shared fixtures: a scenes file and a tiny untrained backbone (seconds)."""

from __future__ import annotations

import pytest

SMALL = {"grid": 3, "n_colours": 3, "n_shapes": 3, "min_objects": 1, "max_objects": 3, "len_min": 9, "len_max": 12,
         "fixed_length": None, "n_train": 40, "n_test": 12}
MODEL = {"d_model": 16, "n_heads": 2, "n_layers": 3, "rope_base": 10000.0}


@pytest.fixture(scope="module")
def scenes(tmp_path_factory):
    from paperflow.mpdpac.data import write_scenes

    path = tmp_path_factory.mktemp("mpdpac") / "scenes.npz"
    write_scenes(SMALL, path, seed=0)
    return path


@pytest.fixture(scope="module")
def tiny_model():
    import torch

    from paperflow.mpdpac.data import Vocab
    from paperflow.mpdpac.model import TinyMDM, model_config

    torch.manual_seed(0)
    m = TinyMDM(model_config(len(Vocab(3, 3)), MODEL))
    m.eval()
    return m
