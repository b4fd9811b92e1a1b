"""Training: stop after N steps, rerun, and end with exactly the uninterrupted run's weights."""

from __future__ import annotations

import pytest
import torch

from tests.expalign.conftest import fake_text


def _params(arm):
    import yaml

    from paperflow.core.config import validate_config

    cfg = validate_config({"expalign": {"enabled": True, "train": {"steps": 6, "batch_size": 8, "ckpt_every": 2},
                                        "model": {"dim": 16, "width": 8}}})["expalign"]
    from paperflow.expalign import plan

    assert yaml  # schema defaults fill every key the stage reads
    return plan.train_params(cfg, arm, 0)


@pytest.mark.parametrize("arm", ["D", "F"])  # GACO (masks) and box term (boxes) on top of the expectation head
def test_resume_after_stop_gives_identical_weights(splits, tmp_path, arm):
    from safetensors.numpy import save_file

    from paperflow.core.checkpoint import load_weights
    from paperflow.expalign.data import save_split
    from paperflow.expalign.stages import ckpt_dir_for, train

    tr, _, _ = splits
    data = tmp_path / "train.safetensors"
    save_split(data, tr)
    t = fake_text(tr.pos.shape[1])
    text = tmp_path / "text.safetensors"
    save_file({f"plain.{k}": v for k, v in t.items()}, str(text))
    p = _params(arm)
    ref = tmp_path / "ref" / "model.safetensors"
    train(p, data=data, text=text, out=ref)
    out = tmp_path / "res" / "model.safetensors"
    with pytest.raises(RuntimeError, match="stopped after 3 steps"):
        train(p, data=data, text=text, out=out, stop_after=3)
    assert not out.exists() and ckpt_dir_for(out, p).is_dir()  # only the checkpoint
    m = train(p, data=data, text=text, out=out)
    assert m["resumed_from"] == 3 and not ckpt_dir_for(out, p).exists()
    a, b = load_weights(ref), load_weights(out)
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
