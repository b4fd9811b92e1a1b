"""Planning: which training runs the `docloc:` config asks for and exactly which parameters each job
depends on. Rules and the CLI call the same functions, so they can never disagree."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SPLITS = ("train", "val", "test_id", "test_ood")
MAIN = "main"


def variants(cfg: Mapping[str, Any]) -> list[str]:
    """Run names: every configured arm at the main (τ, K), then the sweep's `<arm>_t<τ>_K<K>` runs of the
    staged arms (the paper-scale grid of spec §6; τ does not change no-W2, so it is swept over K only)."""
    out = list(cfg["arms"])
    sw = cfg["sweep"]
    for K in sw["stages"]:
        if "now2" in sw["arms"]:
            out.append(f"now2_t0_K{int(K)}")
        for tau in sw["taus"]:
            out += [f"{a}_t{float(tau):g}_K{int(K)}" for a in sw["arms"] if a != "now2"]
    return list(dict.fromkeys(out))


def parse_variant(variant: str) -> tuple[str, float | None, int | None]:
    """'jko_b_t0.005_K2' → ('jko_b', 0.005, 2); 'jko_b' → ('jko_b', None, None)."""
    if "_t" in variant and "_K" in variant:
        head, k = variant.rsplit("_K", 1)
        arm, t = head.rsplit("_t", 1)
        return arm, float(t), int(k)
    return variant, None, None


def seeds(cfg: Mapping[str, Any]) -> list[int]:
    return list(range(int(cfg["seeds"])))


def runs(cfg: Mapping[str, Any]) -> list[tuple[str, int]]:
    return [(v, s) for v in variants(cfg) for s in seeds(cfg)]


def data_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The synthetic generator's parameters (spec §6)."""
    return dict(cfg["data"]["synthetic"])


def prep_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    d = cfg["data"]
    return {"source": d["source"], "splits": d["docvqa"]["splits"] if d["source"] == "docvqa" else None,
            "features": dict(cfg["features"])}


def train_params(cfg: Mapping[str, Any], variant: str, seed: int) -> dict[str, Any]:
    """Everything one (run, seed) training + evaluation job depends on — and nothing else."""
    arm, tau, K = parse_variant(variant)
    flow = dict(cfg["flow"])
    if tau is not None and tau > 0:
        flow["tau"] = tau
    if K is not None:
        flow["stages"] = K
    if arm != "jko_a":
        flow.pop("v_range")  # only the unrolled JKO step bounds its potential
    return {"variant": variant, "arm": arm, "seed": int(seed), **dict(cfg["model"]), **flow, **dict(cfg["train"]),
            "n_examples": int(cfg["figures"]["n_examples"])}


def mechanics_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    return dict(cfg["mechanics"])
