"""lam-train resumes from its safetensors checkpoint: stopped after N steps and rerun, it ends with the
same weights as an uninterrupted run (CPU, tiny sizes)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from paperflow.core.checkpoint import has_checkpoint, load_weights
from paperflow.robotics import stages
from paperflow.robotics.api import simulate_dataset
from tests.robotics.conftest import sim_params

NET = {"d_model": 16, "n_heads": 2, "n_layers": 1, "grid": 2, "feat_channels": 8, "d_z": 8, "n_codes": 8,
       "n_queries": 2, "beta": 0.25, "stem_seed": 1234, "image_size": 32}


@pytest.fixture(scope="module")
def mv(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("rob_resume") / "mv"
    simulate_dataset(out, sim_params(n_sessions=6, episodes_per_session=1, max_steps=6),
                     {"image_size": 32, "resize_mode": "squash", "require_views": [0, 1], "keep_single_view": False,
                      "drop_first_step": False})
    return out


def _params(model: str) -> stages.TrainParams:
    return {"model": model, "frame_gap": 1, "steps": 7, "batch_size": 4, "lr": 1e-3, "weight_decay": 1e-4,
            "reset_every": 2, "log_every": 1, "ckpt_every": 0, "lam": dict(NET)}


@pytest.mark.parametrize("model", ["mvp"])
def test_lam_train_resume_equals_uninterrupted(mv, tmp_path, model):
    p = _params(model)
    full = tmp_path / "full"
    assert stages.lam_train(p, data=mv, seed=0, out=full) is not None
    part = tmp_path / "part"
    assert stages.lam_train(p, data=mv, seed=0, out=part, stop_after=3) is None
    assert not part.exists() and has_checkpoint(Path(str(part) + ".resume"))
    assert stages.lam_train(p, data=mv, seed=0, out=part) is not None
    assert not Path(str(part) + ".resume").exists()  # removed once the final weights are written
    a, b = load_weights(full / "model.safetensors"), load_weights(part / "model.safetensors")
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert (full / "log.csv").read_text() == (part / "log.csv").read_text()
    # the stop landed after a dead-code reset (step 2): the reset generator's state was restored too
    assert "dead_codes_reset" in (full / "log.csv").read_text().splitlines()[0]


def test_checkpoint_of_another_job_is_discarded(mv, tmp_path):
    """A checkpoint written with other parameters is not resumed from (the rerun starts over)."""
    out = tmp_path / "m"
    other = dict(_params("mvp"), lr=5e-3)
    assert stages.lam_train(other, data=mv, seed=0, out=out, stop_after=3) is None
    stages.lam_train(_params("mvp"), data=mv, seed=0, out=out)
    ref = tmp_path / "ref"
    stages.lam_train(_params("mvp"), data=mv, seed=0, out=ref)
    a, b = load_weights(out / "model.safetensors"), load_weights(ref / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)
