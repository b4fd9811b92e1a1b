"""LARA training stages resume from their safetensors checkpoints: stopped after N steps and rerun, they
end with the same weights as an uninterrupted run (CPU, tiny sizes), also across the S2 -> S3 boundary."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from paperflow.core.checkpoint import has_checkpoint, load_weights
from paperflow.robopolicy import stages
from paperflow.robotics.api import simulate_dataset

NET = {"width": 16, "blocks": 3, "heads": 2, "lam_width": 16, "lam_layers": 1, "lam_queries": 2, "lam_embed": 4,
       "lam_codes": 4, "beta": 0.25}
COMMON = {"horizon": 3, "batch_size": 4, "lr": 1e-3, "weight_decay": 1e-5, "warmup": 0.3, "log_every": 1,
          "ckpt_every": 0, "net": NET, "s1_steps": 5, "image_size": 32}
TRAIN = {**COMMON, "variant": "lara", "tasks_a": ["push"], "tasks_b": ["lift"], "s2_steps": 3, "s3_steps": 3,
         "s3_demos": 2, "w_align": 0.01, "w_lam": 0.01}


@pytest.fixture(scope="module")
def mv(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("rp_resume") / "mv"
    sim = {"seed": 7, "n_sessions": 4, "episodes_per_session": 2, "max_steps": 8, "legacy_fraction": 0.0,
           "legacy_policy_out_fraction": 0.0, "permute_topics": False,
           "render": {"width": 48, "height": 36, "views": [0], "distractor_strength": 0.0, "templates": ["push", "lift"]}}
    simulate_dataset(out, sim, {"image_size": 32, "resize_mode": "squash", "require_views": [0]})
    return out


def _equal(a: Path, b: Path) -> bool:
    x, y = load_weights(a), load_weights(b)
    return x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)


@pytest.fixture(scope="module")
def lam_dir(mv, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("rp_lam") / "lam"
    stages.lam_pretrain(COMMON, data=mv, seed=0, out=out)
    return out


def test_lam_pretrain_resume_equals_uninterrupted(mv, lam_dir, tmp_path):
    part = tmp_path / "lam"
    assert stages.lam_pretrain(COMMON, data=mv, seed=0, out=part, stop_after=2) is None
    assert not part.exists() and has_checkpoint(Path(str(part) + ".resume"))
    stages.lam_pretrain(COMMON, data=mv, seed=0, out=part)
    assert _equal(lam_dir / "lam.safetensors", part / "lam.safetensors")
    assert (lam_dir / "log.json").read_text() == (part / "log.json").read_text()


@pytest.mark.parametrize("stop", [2, 3, 4])  # inside S2, at the S2/S3 boundary, inside S3
def test_train_resume_equals_uninterrupted(mv, lam_dir, tmp_path, stop):
    full = tmp_path / "full"
    stages.train(TRAIN, data=mv, lam=lam_dir, seed=0, out=full)
    part = tmp_path / "part"
    assert stages.train(TRAIN, data=mv, lam=lam_dir, seed=0, out=part, stop_after=stop) is None
    assert not part.exists()
    stages.train(TRAIN, data=mv, lam=lam_dir, seed=0, out=part)
    for f in ("vla.safetensors", "lam.safetensors"):
        assert _equal(full / f, part / f), f
    assert (full / "log.json").read_text() == (part / "log.json").read_text()
    assert not Path(str(part) + ".resume").exists()


def test_checkpoint_of_another_job_is_discarded(mv, lam_dir, tmp_path):
    """A checkpoint written for another seed is not resumed from: the result equals a fresh run."""
    part = tmp_path / "lam"
    assert stages.lam_pretrain(COMMON, data=mv, seed=1, out=part, stop_after=2) is None
    stages.lam_pretrain(COMMON, data=mv, seed=0, out=part)
    assert _equal(lam_dir / "lam.safetensors", part / "lam.safetensors")
