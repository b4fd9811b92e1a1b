"""The cross-study report over every unlearning seed, on synthetic unlearning outputs (no models)."""

import json

import pytest

from paperflow.core.io import Stage, write_json
from paperflow.quantization import stages
from paperflow.quantization.cross_unlearning import evaluate_params_from_manifests, leak_at_k
from paperflow.quantization.report import cross_body, cross_claims

N = 8  # samples per prompt
KS = [1, 2, 4, 8]


def _metrics(path, cs, decoder="T1.0", judge="keyfact"):
    leak = {str(k): sum(leak_at_k(N, c, k) for c in cs) / len(cs) for k in KS}
    m = {"leak": {decoder: {judge: {"n": N, "leak": leak, "ci": {}, "c": cs}}},
         "summary": {"forget_greedy_acc": 0.1, "retain_greedy_acc": 0.9}}
    with Stage("test.metrics", config={"n_samples": N}, outputs=[path]):
        write_json(path, m)
    return path


def _qdir(path, agree):
    path.mkdir(parents=True)
    with Stage("test.q", config={}, outputs=[path]) as st:
        st.metrics.update(bin_agreement_with_original=agree, rel_update_vs_original=0.01)
    return path


@pytest.fixture
def two_seeds(tmp_path):
    """FP and W8/W4-quantized metrics of `full` and `npo` for unlearning seeds 0 and 1 (10 prompts)."""
    keys, before, after, qdirs = [], [], [], []
    fp = {"full": [8] * 10, "npo": [0, 0, 1, 2, 3, 0, 0, 4, 1, 0]}
    for seed in (0, 1):
        for model in ("full", "npo"):
            for scheme, bump in (("rtn_w8", 0), ("rtn_w4", 2 + seed)):
                keys.append([seed, model, scheme])
                b = tmp_path / "ul" / f"seed{seed}" / f"{model}.json"
                if not b.exists():
                    b.parent.mkdir(parents=True, exist_ok=True)
                    _metrics(b, [min(N, c + seed) for c in fp[model]])
                before.append(b)
                d = tmp_path / "q" / f"seed{seed}" / f"{model}__{scheme}"
                d.mkdir(parents=True)
                after.append(_metrics(d / "metrics.json", [min(N, c + seed + bump) for c in fp[model]]))
                qdirs.append(_qdir(tmp_path / "qd" / f"seed{seed}" / f"{model}__{scheme}", 0.95 - 0.01 * seed))
    return keys, before, after, qdirs


def test_ul_report_reports_every_seed(two_seeds, tmp_path, monkeypatch):
    keys, before, after, qdirs = two_seeds
    from paperflow.core.config import load_config

    q = load_config("config/config.yaml")["quantization"]
    params = {"keys": keys, "decoder": "T1.0", "judge": "keyfact",
              "claims": {k: q["claims"][k] for k in ("ul_w8_unchanged", "ul_w4_recovers")}}
    out = stages.ul_report(params, before=before, after=after, qdirs=qdirs, out=tmp_path / "x.json",
                           figure=tmp_path / "x.png")
    assert out["seeds"] == [0, 1] and (tmp_path / "x.png").is_file()
    rows = {(r["model"], r["scheme"]): r for r in out["rows"]}
    npo4 = rows[("npo", "rtn_w4")]
    assert npo4["seeds"] == [0, 1] and len(npo4["leak_fp"]) == 2 and len(npo4["delta_pairs"]) == 2 * 10
    assert npo4["leak_fp"][0] != npo4["leak_fp"][1]  # seed 1 is read, not a copy of seed 0
    assert npo4["leak_q0"] == rows[("full", "rtn_w4")]["leak_q"]
    assert npo4["bin_agreement_mean_se"]["se"] is not None
    text = cross_body(out)
    assert "2 unlearning seeds [0, 1], mean ± s.e. over seeds" in text and "(2 seeds)" in text
    verdicts = {c.claim.split(" ")[0]: c for c in cross_claims(out, params["claims"])}
    assert verdicts["RTN-W8"].verdict == "held" and "2 unlearning seeds × 10 forget prompts" in verdicts["RTN-W8"].sample
    assert verdicts["RTN-W4"].verdict == "held"  # +2 and +3 leaking samples on every prompt
    assert json.loads((tmp_path / "x.json").read_text())["rows"]


def test_ul_report_rejects_a_changed_estimator(two_seeds, tmp_path):
    keys, before, after, qdirs = two_seeds
    m = json.loads(after[0].read_text())
    m["leak"]["T1.0"]["keyfact"]["leak"]["8"] += 0.1  # file's leak@k no longer the mean of the counts
    after[0].write_text(json.dumps(m))
    with pytest.raises(ValueError, match="estimator"):
        stages.ul_report({"keys": keys, "decoder": "T1.0", "judge": "keyfact", "claims": {}}, before=before,
                         after=after, qdirs=qdirs, out=tmp_path / "x.json", figure=tmp_path / "x.png")


def test_ul_eval_params_are_the_pipelines_own(tmp_path):
    s, m = tmp_path / "s.jsonl", tmp_path / "m.json"
    with Stage("unlearning.sample", config={"model": "npo", "eval_seed": 7, "n_samples": 8}, outputs=[s]):
        s.write_text("")
    with Stage("unlearning.judge", config={"judges": ["keyfact"], "ks": [1, 8]}, outputs=[m]):
        m.write_text("{}")
    p = evaluate_params_from_manifests(s, m, "npo__rtn_w4")
    assert p == {"sample": {"model": "npo__rtn_w4", "eval_seed": 7, "n_samples": 8},
                 "judge": {"judges": ["keyfact"], "ks": [1, 8]}}
