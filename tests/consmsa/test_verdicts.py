"""Every consmsa claim on synthetic metrics: held, did not hold, not testable (and inconclusive)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from paperflow.consmsa import report
from paperflow.core.config import load_config

N = 200


@pytest.fixture(scope="module")
def cfg() -> dict[str, Any]:
    from pathlib import Path

    c = load_config(Path(__file__).resolve().parents[2] / "config" / "config.yaml")["consmsa"]
    c["claims"]["bootstrap"]["n_boot"] = 300
    return c


def _entry(err: np.ndarray, controls: dict[str, np.ndarray] | None = None, **test: float) -> dict[str, Any]:
    return {"splits": {"test": {"mae": float(err.mean()), **test}, "valid": {}}, "test_abs_err": err.tolist(),
            "controls": {k: {"mae": float(v.mean()), "abs_err": v.tolist()} for k, v in (controls or {}).items()},
            "final": None, "keep": 1.0}


def metrics(seeds: int = 3, *, keep10: float = 0.0, random_gap: float = 0.2, rel_gap: float = 0.2,
            cons_gap: float = 0.0, auroc_c: float = 0.8, auroc_r: float = 0.5, noise: float = 0.05) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    base = np.abs(rng.normal(0.5, 0.3, N))
    v: dict[str, Any] = {k: {"seeds": {}} for k in ("base", "cons", "full_k1", "full_k0.1")}
    for s in range(seeds):
        e = lambda shift: np.abs(base + shift + rng.normal(0, noise, N))  # noqa: E731
        ctl = {"full@0.1": e(0.1), "random@0.1": e(0.1 + random_gap), "relevance@0.1": e(0.1 + rel_gap)}
        v["full_k1"]["seeds"][str(s)] = _entry(e(0.0), ctl, auroc_conflict=auroc_c + 0.01 * s,
                                               auroc_redundant=auroc_r + 0.01 * (s - 1))
        v["full_k0.1"]["seeds"][str(s)] = _entry(e(keep10))
        v["base"]["seeds"][str(s)] = _entry(e(0.0))
        v["cons"]["seeds"][str(s)] = _entry(e(cons_gap))
    return {"variants": v}


def verdicts(m: dict[str, Any], cfg: dict[str, Any]) -> dict[str, str]:
    names = ["keep10", "random", "relevance", "conflict", "cons", "redundant", "sota"]
    return dict(zip(names, (c.verdict for c in report.claims(m, cfg))))


def test_all_expected_outcomes_hold(cfg):
    v = verdicts(metrics(), cfg)
    assert v == {"keep10": "held", "random": "held", "relevance": "held", "conflict": "held", "cons": "held",
                 "redundant": "held", "sota": "not testable at this scale"}


def test_every_claim_can_fail(cfg):
    v = verdicts(metrics(keep10=0.4, random_gap=-0.2, rel_gap=-0.2, cons_gap=0.3, auroc_c=0.4, auroc_r=0.8), cfg)
    assert all(v[k] == "did not hold" for k in ("keep10", "random", "relevance", "conflict", "cons", "redundant")), v


def test_one_seed_is_not_testable(cfg):
    v = verdicts(metrics(seeds=1), cfg)
    assert set(v.values()) == {"not testable at this scale"}


def test_a_control_not_run_is_not_testable(cfg):
    m = metrics()
    for e in m["variants"]["full_k1"]["seeds"].values():
        del e["controls"]["random@0.1"]
    del m["variants"]["cons"]
    v = verdicts(m, cfg)
    assert v["random"] == v["cons"] == "not testable at this scale" and v["relevance"] == "held"


def test_an_effect_at_the_threshold_is_inconclusive(cfg):
    v = verdicts(metrics(keep10=0.1, noise=0.3), cfg)
    assert v["keep10"] == "inconclusive"


def test_summary_text(tmp_path, cfg):
    m = metrics()
    for s, e in m["variants"]["full_k1"]["seeds"].items():
        e["splits"]["test"]["kept_precision"] = 0.5 + 0.01 * int(s)
    report.write(m, cfg, tmp_path / "summary.md", [])
    text = (tmp_path / "summary.md").read_text()
    assert "reconstruction" in text and "by construction" in text and "(1 seed" not in text
    assert "| random |" in text and "| full_k0.1 |" in text
