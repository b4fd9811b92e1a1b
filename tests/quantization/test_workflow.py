"""The quantization part of the shared smoke run (`smk_run`: config/test.yaml, tiny pipeline-trained
Llama; cross-study on the unlearning smoke run's models). No workflow run of its own."""

import json
from pathlib import Path

import pytest

from paperflow.core.config import load_config
from paperflow.core.io import read_manifest
from paperflow.core.verdict import OUTCOMES
from paperflow.unlearning import paths as ul_paths

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cfg():
    return load_config(REPO / "config" / "test.yaml")


@pytest.mark.workflow
def test_outputs_and_manifests(smk_run, cfg):
    res = smk_run / "results/quantization"
    for f in ("summary.md", "metrics.json", "ppl.png", "sens.json"):
        assert (res / f).is_file()
    man = read_manifest(res / "summary.md")
    assert man["study"] == "quantization" and man["metrics"]["claims"]
    for c in man["metrics"]["claims"]:
        assert c["verdict"] in OUTCOMES and c["sample"] and c["reason"] and c["paper"]
    metrics = json.loads((res / "metrics.json").read_text())
    assert {f"{r['method']}/{r['act']}" for r in metrics["runs"]} == set(cfg["quantization"]["runs"])
    assert all(r["ppl"] > 1 for r in metrics["runs"])
    assert metrics["kotms"]["max_orth_err"] < 1e-5
    summary = (res / "summary.md").read_text()
    assert "calibration seed" in summary and "paired test windows" in summary


@pytest.mark.workflow
def test_packed_model_and_bit_allocation(smk_run):
    qdir = smk_run / "models/quantization/s0/twla"
    assert {"quantized.safetensors", "quant.json", "memory.json", "config.json"} <= {p.name for p in qdir.iterdir()}
    wman = read_manifest(qdir)
    assert wman["metrics"]["val_check_nll_packed"] == wman["metrics"]["val_check_nll_fake"]
    assert wman["metrics"]["err_stage2_sum"] <= wman["metrics"]["err_stage1_sum"]
    sens = json.loads((smk_run / "results/quantization/sens.json").read_text())
    assert sens["split"] == "valid" and sens["n_evals"] == 1 + 3 * 2 + 9 * 1  # L = 2 blocks
    ev = json.loads((smk_run / "results/quantization/s0/eval/twla/a4mp.json").read_text())
    assert ev["budget_used"] <= ev["budget"] == 4 * 2
    assert set(ev["block_bits"]) <= {2, 4, 6, 8}
    assert ev["split"] == "test" and ev["test"]["windows"] == len(ev["test"]["window_nll"]) == 8
    mem = ev["memory"]
    assert 2.0 < mem["bpw_linear"] < 16
    assert mem["file_bytes"] == (qdir / "quantized.safetensors").stat().st_size


@pytest.mark.workflow
def test_unlearning_paths_agree_with_the_unlearning_rules(smk_run, cfg):
    """Every path of paperflow.unlearning.paths is a file or dir the unlearning rules wrote."""
    u = cfg["unlearning"]
    models = ["full", "retain", *u["methods"], *[f"rule_{b}" for b in u["rule"]["bases"]]]
    models += [f"control_{b}" for b in u["rule"]["bases"]] if u["rule"]["control"] else []
    expected = [ul_paths.data_dir(cfg), ul_paths.tokenizer_dir(cfg), *ul_paths.report_paths(cfg).values()]
    for seed in u["seeds"]:
        for m in models:
            expected += [ul_paths.model_dir(cfg, m, seed), ul_paths.samples_path(cfg, m, seed),
                         ul_paths.metrics_path(cfg, m, seed)]
    missing = [p for p in expected if not (smk_run / p).exists()]
    assert not missing, missing
    assert (smk_run / ul_paths.model_dir(cfg, "npo", u["seeds"][0])).is_dir()


@pytest.mark.workflow
def test_cross_study_outputs(smk_run, cfg):
    x = cfg["quantization"]["cross_unlearning"]
    out = json.loads((smk_run / "results/quantization/unlearning_leak.json").read_text())
    assert {(r["model"], r["scheme"]) for r in out["rows"]} == {(m, s) for m in x["models"] for s in x["schemes"]}
    for r in out["rows"]:
        assert r["seeds"] == x["seeds"] and len(r["delta_pairs"]) == len(x["seeds"]) * r["n_prompts"]
    # the quantized model was sampled with the FP model's own parameters (same eval seed, same prompts)
    run = ul_paths.run_name(cfg)
    fp = read_manifest(smk_run / ul_paths.samples_path(cfg, "npo", 0))["config"]
    q = read_manifest(smk_run / f"results/quantization/unlearning/{run}/seed0/npo__rtn_w8/samples.jsonl")["config"]
    assert q == {**fp, "model": "npo__rtn_w8"}
    claims = read_manifest(smk_run / "results/quantization/summary.md")["metrics"]["claims"]
    assert any(c["claim"].startswith("RTN-W8") for c in claims) and any(c["claim"].startswith("RTN-W4") for c in claims)


@pytest.mark.workflow
def test_report_by_hand_from_the_config_matches_the_rule(smk_run, cfg, tmp_path):
    """`paperflow quantization report --config` plans the same parameters as the rule's --params."""
    from paperflow.core.cli import main
    from paperflow.quantization.plan import eval_targets

    res = smk_run / "results/quantization"
    evals = [str(smk_run / e) for e in eval_targets(cfg)]
    argv = ["quantization", "report", "--config", str(REPO / "config/test.yaml"), "--results", str(tmp_path),
            "--evals", *evals, "--sens", str(res / "sens.json"),
            "--kotms-log", str(smk_run / "models/quantization/kotms_log.json"), "--cross", str(res / "unlearning_leak.json")]
    assert main(argv) == 0  # the generated CLI, in process
    assert read_manifest(tmp_path / "metrics.json")["config"] == read_manifest(res / "metrics.json")["config"]
    assert json.loads((tmp_path / "metrics.json").read_text()) == json.loads((res / "metrics.json").read_text())
