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


def test_full_grid_config_covers_the_issue_grid():
    """config/hashing_grid.yaml (run by hand) plans every code length x noise rate x seed of the issue."""
    from pathlib import Path

    from paperflow.core.config import load_config

    cfg = load_config(Path(__file__).resolve().parents[2] / "config" / "hashing_grid.yaml")["hashing"]
    runs = plan.runs(cfg)
    main = [r for r in runs if r["method"] != "rfcmh_paper"]
    assert {r["bits"] for r in main} == {16, 32, 64, 128}
    assert {float(r["rate"]) for r in main if r["mode"] == "sym"} == {0.0, 0.2, 0.4, 0.6, 0.8}
    cells = {(r["method"], r["bits"], r["mode"], r["rate"]) for r in main}
    assert len(main) == 3 * len(cells) == 3 * 4 * 4 * 6  # 4 methods x 4 lengths x 6 settings, 3 seeds each


def test_jobs_group_a_noise_settings_seeds_and_paper_scale_keeps_one_run_per_job():
    """The tiny default trains a noise setting's seeds in one job (35 jobs for 105 runs); config/paper.yaml
    keeps one GPU job per run; both plan every run exactly once, and the score jobs cover every run."""
    from pathlib import Path

    from paperflow.core.config import load_config

    root = Path(__file__).resolve().parents[2]
    tiny = load_config(root / "config" / "config.yaml")["hashing"]
    jobs = plan.train_jobs(tiny)
    assert len(plan.runs(tiny)) == 105 and len(jobs) == 35 and all(j["seeds"] == [10, 11, 12] for j in jobs)
    p = plan.train_job_params(tiny, "synth", "rfcmh", 64, "sym", "0.4")
    assert [c["seed"] for c in p["cells"]] == [10, 11, 12] and [c["train_seed"] for c in p["cells"]] == [0, 1, 2]
    assert p["cells"][1] == plan.train_params(tiny, "synth", "rfcmh", 64, "sym", "0.4", 11)  # a run's own params
    assert plan.train_job_params(tiny, "synth", "rfcmh", 64, "sym", "0.4", "11")["cells"] == [p["cells"][1]]
    assert plan.train_record_paths(tiny, "r", "synth", "sym", "0.4", None, "val") == [
        f"r/hashing/noise/synth/val-sym-r0.4-s{s}.npz" for s in (1010, 1011, 1012)]
    runs_by_eval = [r for ds, b in plan.eval_bits(tiny) for r in plan.eval_runs(tiny, ds, b)]
    assert sorted(runs_by_eval) == sorted(r["run"] for r in plan.runs(tiny))
    names = plan.noise_names(tiny)
    assert [r["name"] for r in plan.noise_params(tiny, "synth")["records"]] == sorted(names) and len(names) == 24

    paper = load_config(root / "config" / "paper.yaml")["hashing"]
    pj = plan.train_jobs(paper)
    assert len(pj) == len(plan.runs(paper)) and all(len(j["seeds"]) == 1 for j in pj)
