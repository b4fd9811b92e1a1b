"""Planning: which variants the `consmsa:` config asks for, how they are grouped into jobs, and exactly
which parameters each job depends on. Rules and the CLI call the same functions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CONTROLS = ("random", "norm", "cls_attn", "relevance", "i2cs", "full")  # test-time pruning scores
REFERENCE = "full_k1"  # (b) + (c) at keep = 1.0: the model the test-time pruning controls prune


def _k(keep: float) -> str:
    return f"k{float(keep):g}"


def variants(cfg: Mapping[str, Any]) -> list[str]:
    """(a) base, (b) cons, (c) reweight, (d) full_k<ρ> for ρ in {1.0} ∪ keeps, then score ablations
    <combine>_k<ρ> (full recipe, one score form changed) — in a fixed order."""
    out = [a for a in ("base", "cons", "reweight") if a in cfg["arms"]]
    if "full" in cfg["arms"]:
        out += [f"full_{_k(k)}" for k in [1.0, *cfg["keeps"]]]
    ab = cfg["ablations"]
    out += [f"{c}_{_k(ab['keep'])}" for c in ab["combines"]]
    return list(dict.fromkeys(out))


def parse(variant: str) -> dict[str, Any]:
    """'full_k0.1' → cons, reweight, keep 0.1, combine from the config; 'intra_k0.1' → combine 'intra'."""
    if variant in ("base", "cons", "reweight"):
        return {"cons": variant == "cons", "reweight": variant == "reweight", "keep": 1.0, "combine": None}
    head, k = variant.rsplit("_k", 1)
    return {"cons": True, "reweight": True, "keep": float(k), "combine": None if head == "full" else head}


def seeds(cfg: Mapping[str, Any]) -> list[int]:
    return list(range(int(cfg["seeds"])))


def groups(cfg: Mapping[str, Any]) -> list[list[str]]:
    """Variants several per job (`jobs.variants_per_job`): each job pays the torch start-up once."""
    v, n = variants(cfg), int(cfg["jobs"]["variants_per_job"])
    return [v[i:i + n] for i in range(0, len(v), n)]


def jobs(cfg: Mapping[str, Any]) -> list[tuple[str, int]]:
    return [(f"g{i}", s) for i in range(len(groups(cfg))) for s in seeds(cfg)]


def data_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    return dict(cfg["data"]["synthetic"])


def variant_params(cfg: Mapping[str, Any], variant: str, seed: int) -> dict[str, Any]:
    """Everything one (variant, seed) training + evaluation depends on — and nothing else."""
    v = parse(variant)
    score = dict(cfg["score"])
    if v["combine"] is not None:
        score["combine"] = v["combine"]
    controls = variant == REFERENCE and bool(cfg["controls"]["enabled"])
    return {"variant": variant, "seed": int(seed), "cons": v["cons"], "reweight": v["reweight"], "keep": v["keep"],
            **score, **dict(cfg["model"]), **dict(cfg["loss"]), **dict(cfg["train"]),
            "metric_kind": cfg["eval"]["metric_kind"], "controls": controls,
            "control_keeps": [float(k) for k in cfg["controls"]["keeps"]] if controls else []}


def train_params(cfg: Mapping[str, Any], group: str, seed: int) -> dict[str, Any]:
    """One job: the variants of group `g<i>` at one seed."""
    names = groups(cfg)[int(group.lstrip("g"))]
    return {"group": group, "seed": int(seed), "variants": {v: variant_params(cfg, v, seed) for v in names}}
