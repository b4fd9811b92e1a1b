"""Distributed training through accelerate: a real training stage run with `accelerate launch
--num_processes 2` (torch.distributed over gloo, CPU) gives the same checkpoint metrics as the
single-process run. The stage is started exactly as rules start training stages:
`python -m paperflow.core.accel launch --procs N -- <stage command>`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cluster.conftest import env


def _probe(tmp_path: Path, procs: int) -> tuple[dict, dict]:
    out = tmp_path / f"p{procs}" / "probe.safetensors"
    cmd = [sys.executable, "-m", "paperflow.core.accel", "launch", "--procs", str(procs), "--",
           sys.executable, "-m", "paperflow.core.accel", "probe", "--out", str(out), "--epochs", "3"]
    r = subprocess.run(cmd, env=env(), capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    if procs > 1:
        assert "accelerate.commands.launch --multi_gpu --num_processes 2" in r.stderr
    from safetensors.torch import load_file

    manifest = json.loads(Path(str(out) + ".manifest.json").read_text())
    return manifest, load_file(str(out))


def test_two_process_gloo_training_matches_single_process(tmp_path: Path):
    m1, w1 = _probe(tmp_path, 1)
    m2, w2 = _probe(tmp_path, 2)
    a, b = m1["metrics"], m2["metrics"]
    assert a["num_processes"] == 1 and a["distributed_type"] == "DistributedType.NO"
    assert b["num_processes"] == 2 and b["distributed_type"] == "DistributedType.MULTI_CPU"
    assert b["backend"] == "gloo"
    # it really trained: loss fell and the classifier is far above chance (4 classes)
    assert a["train_loss"][-1] < 0.5 * a["train_loss"][0] and a["test_acc"] > 0.9
    # same global batches, gradients all-reduced: same model up to float summation order
    assert b["train_loss"] == pytest.approx(a["train_loss"], rel=1e-4, abs=1e-5)
    assert b["test_loss"] == pytest.approx(a["test_loss"], rel=1e-4, abs=1e-5)
    assert b["test_acc"] == pytest.approx(a["test_acc"], abs=2e-3)
    assert w1.keys() == w2.keys()
    for k in w1:
        assert (w1[k] - w2[k]).abs().max().item() < 1e-4, k
    # the manifest records the run like every other stage output
    assert m2["stage"] == "core.accel.probe" and m2["output_sha256"]


def test_launch_single_process_is_the_command_itself():
    from paperflow.core.accel import launch_argv

    assert launch_argv(0, ["paperflow", "x", "train"]) == ["paperflow", "x", "train"]
    assert launch_argv(1, ["paperflow", "x", "train"]) == ["paperflow", "x", "train"]
    argv = launch_argv(4, ["paperflow", "hashing", "train", "--out", "w.npz"], port=29999, mixed_precision="bf16")
    i = argv.index("--num_processes")
    assert argv[i + 1] == "4" and "--multi_gpu" in argv and argv[argv.index("--mixed_precision") + 1] == "bf16"
    assert argv[-4:] == ["hashing", "train", "--out", "w.npz"] and argv[-5].endswith("paperflow")
    m = launch_argv(2, [sys.executable, "-m", "paperflow.core.accel", "probe"], port=29999)
    assert m[-3:] == ["-m", "paperflow.core.accel", "probe"] and "--main_process_port" in m


def test_hashing_train_rule_two_processes(repo_copy: Path):
    """The hashing study's real training rule, with the job's resources asking for 2 GPUs
    (`--set-resources hashing_train:gpu=2`): the rule's `paperflow.core.accel launch --procs
    {resources.gpu}` runs `paperflow hashing train` on 2 gloo processes; the checkpoint's metrics
    stay close to the single-process run. Not identical: the study's loader batches per process
    (no split_batches), so 2 processes take half as many steps of a twice-as-large global batch."""
    target = "models/hashing/synth/rfcmh-L16-sym0.5-s10/weights.npz"
    base = ["snakemake", target, "--cores", "2", "--configfile", "config/test.yaml", "--quiet"]
    r = subprocess.run(base, cwd=repo_copy, env=env(), capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    m1 = json.loads((repo_copy / (target + ".manifest.json")).read_text())["metrics"]
    r = subprocess.run(base + ["--forcerun", "hashing_train", "--set-resources", "hashing_train:gpu=2"],
                       cwd=repo_copy, env=env(), capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    m2 = json.loads((repo_copy / (target + ".manifest.json")).read_text())["metrics"]
    log = (repo_copy / "logs/hashing/train/synth/rfcmh-L16-sym0.5-s10.log").read_text()
    assert "accelerate.commands.launch --multi_gpu --num_processes 2" in log
    assert m1["n_processes"] == 1 and m2["n_processes"] == 2
    assert m1["epochs_run"] == m2["epochs_run"]
    for sel in ("noisy_val", "clean_val", "last"):
        assert m2["selected"][sel]["val_score"] == pytest.approx(m1["selected"][sel]["val_score"], abs=0.01), sel
