"""Small synthetic data shared by the expalign unit tests (generated once per session, no MiniLM)."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="session")
def synth_dir(tmp_path_factory):
    from paperflow.expalign.data import SynthCfg, generate

    d = tmp_path_factory.mktemp("expalign_synth")
    generate(SynthCfg(n_train=64, n_val=16, n_test=32, seed=3), d)
    return d


@pytest.fixture(scope="session")
def splits(synth_dir):
    from paperflow.expalign.data import load_coco

    tr, cats = load_coco(synth_dir / "annotations_train.json", images=synth_dir / "images_train.npy", image_size=32)
    te, _ = load_coco(synth_dir / "annotations_test.json", images=synth_dir / "images_test.npy", image_size=32,
                      phrases=[c["phrase"] for c in cats])
    return tr, te, cats


def fake_text(P: int, L: int = 5, D: int = 24, seed: int = 0) -> dict[str, np.ndarray]:
    """Random token states with 3-5 real tokens per prompt (padding rows zero), like the MiniLM cache."""
    rng = np.random.default_rng(seed)
    n = rng.integers(3, L + 1, size=P)
    mask = (np.arange(L)[None, :] < n[:, None]).astype(np.uint8)
    tok = rng.normal(size=(P, L, D)).astype(np.float32) * mask[..., None]
    sent = (tok.sum(1) / mask.sum(1, keepdims=True)).astype(np.float32)
    return {"tokens": tok, "mask": mask, "sentence": sent}
