"""The backbone training stage resumes: stopped after N steps and rerun, it ends with weights equal
(torch.equal) to an uninterrupted run's; a checkpoint written under other parameters is never resumed."""

from __future__ import annotations

import pytest
import torch

from paperflow.core.checkpoint import load_weights
from paperflow.piaa import data as D
from paperflow.piaa import stages

GEN = {"seed": 1, "n_train": 24, "n_test": 4, "image_size": 8, "patch_size": 4, "max_objects": 2,
       "max_area_patches": 4, "area_alpha": 1.0, "context_corr": 0.7}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("piaa_train")
    D.generate(GEN, root / "raw")
    stages.prepare({"image_size": 8, "patch_size": 4, "image_ext": ".png", "max_objects": 2, "source_size": 8},
                   out=root / "prep", raw=root / "raw")
    stages.text({"encoder": "hashtext", "hash_dim": 16, "template": "a photo of a {}"}, data=root / "prep",
                out=root / "text.safetensors")
    return root


def params(steps=6):
    return {"seed": 0, "vit": {"image_size": 8, "patch_size": 4, "d_model": 16, "n_heads": 2, "n_layers": 1,
                               "embed_dim": 8},
            "train": {"steps": steps, "batch_size": 8, "lr": 3e-3, "weight_decay": 0.0, "warmup": 0.1,
                      "ckpt_every": 2, "flip": True}}


def test_stop_and_resume_is_bit_identical(inputs, tmp_path):
    kw = {"data": inputs / "prep", "text": inputs / "text.safetensors"}
    stages.train(params(), **kw, out=tmp_path / "full", ckpt=tmp_path / "ck_full")
    with pytest.raises(SystemExit, match="stopped after 3 steps"):
        stages.train(params(), **kw, out=tmp_path / "res", ckpt=tmp_path / "ck_res", stop_after=3)
    assert not (tmp_path / "res").exists()
    info = stages.train(params(), **kw, out=tmp_path / "res", ckpt=tmp_path / "ck_res")
    assert info["resumed_from"] == 3
    a = load_weights(tmp_path / "full" / "model.safetensors")
    b = load_weights(tmp_path / "res" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    # other parameters under the same --ckpt: a fresh run, not a resume of the old state
    info2 = stages.train(params(steps=4), **kw, out=tmp_path / "other", ckpt=tmp_path / "ck_res")
    assert info2["resumed_from"] == 0
