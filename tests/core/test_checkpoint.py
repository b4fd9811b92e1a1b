"""The one checkpoint scheme: safetensors + JSON, resumable to the same weights as an uninterrupted run."""

from __future__ import annotations

import numpy as np
import torch

from paperflow.core.checkpoint import (has_checkpoint, load_training_state, load_weights, save_training_state,
                                       save_weights)
from paperflow.core.schedule import lambda_lr, warmup_cosine


def _train(ckpt, total=12, stop_after=None, every=3):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Dropout(0.2), torch.nn.Linear(8, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = lambda_lr(opt, total, 0.25)
    rng = np.random.default_rng(1)
    start = 0
    if has_checkpoint(ckpt):
        start = load_training_state(ckpt, model=model, optimizer=opt, scheduler=sched, np_rng=rng)["step"]
    for step in range(start, total):
        x = torch.as_tensor(rng.normal(size=(16, 4)), dtype=torch.float32)
        loss = (model(x) - x.sum(1, keepdim=True)).pow(2).mean()  # dropout draws from torch's RNG
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if (step + 1) % every == 0:
            save_training_state(ckpt, model=model, optimizer=opt, step=step + 1, scheduler=sched, np_rng=rng)
        if stop_after is not None and step + 1 == stop_after:
            return None
    return model


def test_resume_gives_identical_weights(tmp_path):
    ref = _train(tmp_path / "a")
    assert _train(tmp_path / "b", stop_after=6) is None
    assert has_checkpoint(tmp_path / "b")
    resumed = _train(tmp_path / "b")
    for (k, v), (_, w) in zip(ref.state_dict().items(), resumed.state_dict().items()):
        assert torch.equal(v, w), k


def test_checkpoint_files_are_not_pickles(tmp_path):
    _train(tmp_path / "c", total=3, every=3)
    names = sorted(p.name for p in (tmp_path / "c").iterdir())
    assert names == ["model.safetensors", "optimizer.safetensors", "rng.safetensors", "state.json"]


def test_weights_roundtrip_with_tied_tensors(tmp_path):
    emb = torch.nn.Embedding(5, 3)
    head = torch.nn.Linear(3, 5, bias=False)
    head.weight = emb.weight  # tied
    m = torch.nn.ModuleDict({"emb": emb, "head": head})
    save_weights(tmp_path / "w.safetensors", m)
    m2 = torch.nn.ModuleDict({"emb": torch.nn.Embedding(5, 3), "head": torch.nn.Linear(3, 5, bias=False)})
    load_weights(tmp_path / "w.safetensors", m2)
    assert torch.equal(m2["emb"].weight, emb.weight) and torch.equal(m2["head"].weight, emb.weight)


def test_warmup_cosine_shape():
    assert warmup_cosine(0, 100, 10) == 0.1
    assert warmup_cosine(9, 100, 10) == 1.0
    assert warmup_cosine(100, 100, 10) == 0.0
    assert warmup_cosine(100, 100, 0.1, floor=0.1) == 0.1
    vals = [warmup_cosine(s, 100, 10) for s in range(10, 101)]
    assert all(a >= b for a, b in zip(vals, vals[1:]))


def test_job_dir_keeps_finished_units_and_drops_other_parameters(tmp_path) -> None:
    from paperflow.core.checkpoint import finished_unit, keep_unit, stamp_job_dir

    job = tmp_path / "job_ckpt"
    assert stamp_job_dir(job, {"lr": 0.1, "arms": ("a", "b")}) is False
    (job / "b").mkdir()
    (job / "b" / "state.json").write_text("{}")  # unit b's training state, mid-run
    keep_unit(job, "a", {"acc": 0.5})
    assert finished_unit(job, "a") == {"acc": 0.5} and finished_unit(job, "b") is None
    assert finished_unit(None, "a") is None
    keep_unit(job, "b", {"acc": 0.7})
    assert not (job / "b").exists() and finished_unit(job, "b") == {"acc": 0.7}
    # same parameters (tuples read back as lists): everything kept
    assert stamp_job_dir(job, {"lr": 0.1, "arms": ["a", "b"]}) is False
    assert finished_unit(job, "a") == {"acc": 0.5}
    # other parameters: nothing of the old run survives
    assert stamp_job_dir(job, {"lr": 0.2, "arms": ["a", "b"]}) is True
    assert finished_unit(job, "a") is None and finished_unit(job, "b") is None
    # a folder without a stamp is not trusted either
    (job / "params.json").unlink()
    keep_unit(job, "a", {"acc": 0.1})
    assert stamp_job_dir(job, {"lr": 0.2}) is True and finished_unit(job, "a") is None


def test_safetensors_metadata_order_never_changes_the_bytes(tmp_path):
    """safetensors keeps `__metadata__` in a hash map: without the canonical header, equal tensors and
    metadata gave other bytes in another process (seen as changed checkpoints between two runs)."""
    import subprocess
    import sys

    import torch
    from safetensors import safe_open

    from paperflow.core.checkpoint import canonical_safetensors_header, load_weights, save_weights

    code = ("import sys, torch; from paperflow.core.checkpoint import save_weights; "
            "meta = dict(zip(sys.argv[2::2], sys.argv[3::2])); "
            "save_weights(sys.argv[1], {'w': torch.arange(6.0).reshape(2, 3), 'b': torch.ones(3)}, meta)")
    keys = [f"key{i}" for i in range(12)]
    paths = []
    for n, order in enumerate((keys, keys[::-1], keys[3:] + keys[:3])):
        p = tmp_path / f"w{n}.safetensors"
        argv = [x for k in order for x in (k, f"value of {k}\n")]
        subprocess.run([sys.executable, "-c", code, str(p), *argv], check=True)
        paths.append(p)
    blobs = [p.read_bytes() for p in paths]
    assert blobs[0] == blobs[1] == blobs[2]
    with safe_open(str(paths[0]), "pt") as f:
        assert f.metadata() == {k: f"value of {k}\n" for k in keys}
    sd = load_weights(paths[0])
    assert torch.equal(sd["w"], torch.arange(6.0).reshape(2, 3)) and torch.equal(sd["b"], torch.ones(3))
    # already canonical, or no metadata: untouched
    assert canonical_safetensors_header(paths[0]) is False
    bare = tmp_path / "bare.safetensors"
    save_weights(bare, {"w": torch.zeros(2)})
    before = bare.read_bytes()
    assert canonical_safetensors_header(bare) is False and bare.read_bytes() == before


def test_canonical_header_leaves_a_header_it_cannot_reproduce_alone(tmp_path):
    import json

    p = tmp_path / "odd.safetensors"
    header = b'{"__metadata__": {"b": "1", "a": "2"}, "w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}'
    header += b" " * (-len(header) % 8)
    p.write_bytes(len(header).to_bytes(8, "little") + header + b"\x00\x00\x80\x3f")
    before = p.read_bytes()
    from paperflow.core.checkpoint import canonical_safetensors_header

    assert canonical_safetensors_header(p) is False and p.read_bytes() == before
    assert json.loads(header)["__metadata__"] == {"b": "1", "a": "2"}
