"""Runs the quantization rules on config/test.yaml (tiny pipeline-trained Llama) in a temp dir."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def qrun(tmp_path_factory):
    d = tmp_path_factory.mktemp("qwf")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PAPERFLOW_PROGRESS": "0"}
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(d),
           "--configfile", str(REPO / "config/test.yaml"), "--cores", "2",
           "results/quantization/summary.md", "results/quantization/metrics.json", "results/quantization/ppl.png",
           "--quiet", "all"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return d


@pytest.mark.workflow
def test_outputs_and_manifests(qrun):
    res = qrun / "results/quantization"
    for f in ("summary.md", "metrics.json", "ppl.png", "sens.json"):
        assert (res / f).is_file()
    man = json.loads((res / "summary.md.manifest.json").read_text())
    assert man["study"] == "quantization" and man["metrics"]["claims"]
    verdicts = {c["verdict"] for c in man["metrics"]["claims"]}
    assert verdicts <= {"held", "did not hold", "partly", "not testable at this scale"}
    metrics = json.loads((res / "metrics.json").read_text())
    assert {f"{r['method']}/{r['act']}" for r in metrics["runs"]} == {"fp/a16", "twla/a16", "twla/a4mp"}
    assert all(r["ppl"] > 1 for r in metrics["runs"])
    assert metrics["kotms"]["max_orth_err"] < 1e-5


@pytest.mark.workflow
def test_packed_model_and_bit_allocation(qrun):
    qdir = qrun / "models/quantization/s0/twla"
    assert {"quantized.safetensors", "quant.json", "memory.json", "config.json"} <= {p.name for p in qdir.iterdir()}
    wman = json.loads((qrun / "models/quantization/s0/twla.manifest.json").read_text())
    assert wman["metrics"]["val_check_nll_packed"] == wman["metrics"]["val_check_nll_fake"]
    assert wman["metrics"]["err_stage2_sum"] <= wman["metrics"]["err_stage1_sum"]
    sens = json.loads((qrun / "results/quantization/sens.json").read_text())
    assert sens["split"] == "valid" and sens["n_evals"] == 1 + 3 * 2 + 9 * 1  # L = 2 blocks
    ev = json.loads((qrun / "results/quantization/s0/eval/twla/a4mp.json").read_text())
    assert ev["budget_used"] <= ev["budget"] == 4 * 2
    assert set(ev["block_bits"]) <= {2, 4, 6, 8}
    assert ev["split"] == "test" and ev["test"]["windows"] == 8
    mem = ev["memory"]
    assert 2.0 < mem["bpw_linear"] < 16
