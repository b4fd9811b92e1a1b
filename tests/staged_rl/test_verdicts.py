"""Claim logic on synthetic metrics: held / did not hold / not testable for every claim (pytest -k verdict)."""

from __future__ import annotations

import numpy as np

from paperflow.staged_rl.report import LABELS, claims

from .conftest import default_section

CLAIMS = ["Staged RL (P→T→V) beats", "Most of the base", "P→T→V has a lower perception-error", "The stage order",
          "Targeted perception data", "Stage-1 perception RL beats caption-SFT", "Fewer `<look>` tokens",
          "Staged responses are shorter"]


def ev(acc: float, share: float = 0.5, looks: float = 0.2, tokens: float = 7.0, n: int = 100, rng=None) -> dict:
    correct = (rng.random(n) < acc).astype(int)
    wrong = int(n - correct.sum())
    e = {"acc": acc, "tokens": tokens, "look_rate": looks, "correct": correct.tolist()}
    vis = {**e, "n_wrong": wrong, "n_wrong_perception": int(round(share * wrong)), "perception_error_share": share}
    return {"perc": dict(e), "text": dict(e), "vis": vis}


def metrics(acc: dict[str, list[float]], share: dict[str, float] | None = None,
            looks: dict[str, float] | None = None, tokens: dict[str, float] | None = None) -> dict:
    rng = np.random.default_rng(0)
    share, looks, tokens = share or {}, looks or {}, tokens or {}
    arms = {}
    for arm in LABELS:
        seeds = {}
        for s, a in enumerate(acc.get(arm, acc["default"])):
            n_st = 1 if arm in ("base", "v_only") else 3
            e = ev(a + 0.01 * s, share.get(arm, 0.5), looks.get(arm, 0.2), tokens.get(arm, 7.0), rng=rng)
            seeds[str(s)] = {"stages": [{"stage": str(i), "updates": 1, "eval": e} for i in range(n_st)],
                             "seconds": 1.0}
        arms[arm] = {"seeds": seeds}
    return {"arms": arms, "base": {}, "n_test": 100, "chance_vis": 1 / 13, "backend": "grpo_lite"}


def verdict(m: dict, prefix: str) -> str:
    cl = claims(m, default_section())
    assert len(cl) == len(CLAIMS)
    (c,) = [c for c in cl if c.claim.startswith(prefix)]
    return c.verdict


GOOD = {"default": [0.4, 0.42, 0.41], "p_t_v": [0.6, 0.62, 0.61], "merged": [0.5, 0.505, 0.51]}
BAD = {"default": [0.7, 0.72, 0.71], "p_t_v": [0.6, 0.62, 0.61], "merged": [0.7, 0.75, 0.72]}
ONE = {k: v[:1] for k, v in GOOD.items()}


def test_verdict_staged_beats_merged():
    assert verdict(metrics(GOOD), CLAIMS[0]) == "held"
    assert verdict(metrics(BAD), CLAIMS[0]) == "did not hold"
    assert verdict(metrics(ONE), CLAIMS[0]) == "not testable at this scale"
    at_chance = {"default": [0.05] * 3, "p_t_v": [0.3, 0.3, 0.3]}
    assert verdict(metrics(at_chance), CLAIMS[0]) == "not testable at this scale"
    cl = claims(metrics(BAD), default_section())[0]
    assert "inverted" in cl.measured


def test_verdict_base_perception_errors():
    assert verdict(metrics(GOOD, share={"base": 0.9}), CLAIMS[1]) == "held"
    assert verdict(metrics(GOOD, share={"base": 0.1}), CLAIMS[1]) == "did not hold"
    assert verdict(metrics({"default": [0.95]}, share={"base": 0.0}), CLAIMS[1]) == "not testable at this scale"


def test_verdict_fewer_perception_errors():
    assert verdict(metrics(GOOD, share={"p_t_v": 0.3, "merged": 0.8}), CLAIMS[2]) == "held"
    assert verdict(metrics(GOOD, share={"p_t_v": 0.9, "merged": 0.5}), CLAIMS[2]) == "did not hold"
    assert verdict(metrics(ONE), CLAIMS[2]) == "not testable at this scale"


def test_verdict_order_filter_and_caption_sft():
    for c in CLAIMS[3:6]:
        assert verdict(metrics(GOOD), c) == "held"
        assert verdict(metrics(BAD), c) == "did not hold"
        assert verdict(metrics(ONE), c) == "not testable at this scale"


def test_verdict_looks_and_length_proxies():
    assert verdict(metrics(GOOD, looks={"p_t_v": 0.0, "base": 0.5}), CLAIMS[6]) == "held"
    assert verdict(metrics(GOOD, looks={"p_t_v": 0.9, "base": 0.1}), CLAIMS[6]) == "did not hold"
    assert verdict(metrics(ONE), CLAIMS[6]) == "not testable at this scale"
    assert verdict(metrics(GOOD, looks={"p_t_v": 0.0, "base": 0.0}), CLAIMS[6]) == "not testable at this scale"
    assert verdict(metrics(GOOD, tokens={"p_t_v": 6.0, "merged": 8.0}), CLAIMS[7]) == "held"
    assert verdict(metrics(GOOD, tokens={"p_t_v": 9.0, "merged": 7.0}), CLAIMS[7]) == "did not hold"
    assert verdict(metrics(ONE), CLAIMS[7]) == "not testable at this scale"
