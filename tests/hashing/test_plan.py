"""Run planning: training seeds are paired with noise seeds."""

from paperflow.core.config import validate_config
from paperflow.hashing import plan


def _cfg(seeds, base=0):
    cfg = validate_config({"hashing": {"enabled": True, "noise": {"seeds": seeds}, "grid": {"train_seed": base}}})
    return cfg["hashing"]


def test_train_seed_paired_with_noise_seed():
    cfg = _cfg([10, 11, 12], base=5)
    assert [plan.train_seed_for(cfg, s) for s in (10, 11, 12)] == [5, 6, 7]
    assert plan.train_seed_for(cfg, 99) == 5  # a hand-run noise seed outside the list
    runs = plan.runs(cfg)
    assert runs and all(r["train_seed"] == 5 + [10, 11, 12].index(r["seed"]) for r in runs)
    # the clean (r = 0) runs of one method differ in training seed, so they are distinct replicates
    clean = {r["train_seed"] for r in runs if r["rate"] in ("0", "0.0") and r["method"] == "plain"}
    assert len(clean) == 3
    p = plan.train_params(cfg, next(iter(cfg["datasets"])), "plain", 16, "sym", "0.4", 11)
    assert p["train_seed"] == 6
