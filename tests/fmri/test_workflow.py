"""The fmri study end to end on config/test.yaml (8 mm grid, tiny cohorts, 4-step MAE), read from the
shared `smk_run` workflow run (tests/conftest.py) — no private Snakemake run."""

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def check_fmri_outputs(wd: Path) -> None:
    """Every fmri output of the test config and its contract (also usable on a hand-made run dir)."""
    res = wd / "results" / "fmri"
    tier = res / "micro"
    # geometry: the three operators + their manifest
    geo = json.loads((tier / "geometry" / "geometry.json").read_text())
    assert geo["flat"]["D"] == 5044 and geo["flat"]["n_nonempty_patches"] == 106
    assert json.loads((tier / "geometry.manifest.json").read_text())["stage"] == "fmri.geometry"
    # prep: Arrow datasets per space, manifests with projection throughput and reconstruction check
    for cohort in ("pretrain", "state", "trait"):
        man = json.loads((wd / "data/fmri/micro/prep" / f"{cohort}.manifest.json").read_text())
        assert man["metrics"]["runs"] > 0 and man["metrics"]["frames_per_s"] > 0
        for space in ("flat", "parcel", "volume"):
            assert (wd / "data/fmri/micro/prep" / cohort / space / "dataset_dict.json").exists()
    # NIfTI runs are temp(): removed after prep
    assert not list((wd / "data/fmri/micro").rglob("*.nii.gz"))
    # checkpoints: safetensors + JSON only (core.checkpoint), no pickles
    run = wd / "models/fmri/micro/train/flat-s0"
    assert (run / "best.safetensors").exists() and (run / "ckpt" / "state.json").exists()
    assert not list((wd / "models/fmri").rglob("*.pt"))
    # evaluation: every probe and chance
    met = json.loads((tier / "eval" / "metrics.json").read_text())
    assert set(met["tasks"]) == {"state6", "trait_group", "trait_age"}
    assert met["chance"]["state6"] == pytest.approx(1 / 6)
    st = met["tasks"]["state6"]
    assert {"FC (parcel clip)", "MAE flat-s0", "MAE parcel-s0", "MAE volume-s0", "MAE flat-rand"} <= set(st)
    assert all(0.0 <= v["mean"] <= 1.0 and v["n_splits"] == 2 == len(v["scores"]) for v in st.values())
    assert met["tasks"]["trait_group"]["FC (parcel, whole run)"]["n_splits"] == 3
    # the table was probed in parts (baselines + one per embed tag) and merged: the same table as one process
    from paperflow.fmri.benchmarks import run_benchmarks

    parts = sorted(p.stem for p in (tier / "eval" / "parts").glob("*.json") if not p.name.endswith(".manifest.json"))
    assert parts == sorted(["baselines", "flat-s0", "parcel-s0", "volume-s0", "flat-rand"])
    settings = json.loads((tier / "eval" / "parts" / "baselines.json").read_text())["settings"]
    tags = ["flat-s0", "parcel-s0", "volume-s0", "flat-rand"]
    one = run_benchmarks(settings, [tier / "embed" / f"{t}.npz" for t in tags], wd / "data/fmri/micro/prep/state",
                         wd / "data/fmri/micro/prep/trait")
    assert json.loads(json.dumps(one)) == met
    # training results, scaling, figures, summary with its claims manifest
    result = json.loads((run / "result.json").read_text())
    assert result["history"][-1]["step"] == 4 and 0.5 < result["initial_loss"] < 1.5
    assert 0.5 < result["val_loss_init"] < 1.5
    fit = json.loads((tier / "scaling" / "fit.json").read_text())
    assert len(fit["loss"]) == 3 == len(fit["loss_init"]) and fit["loglog"]["n"] == 3
    assert (tier / "scaling" / "curve.png").stat().st_size > 1000
    for fig in ("flatmap_patterns.png", "probes.png", "reconstruction.png"):
        assert (tier / "figures" / fig).stat().st_size > 1000
    summary = (res / "summary.md").read_text()
    assert "FC" in summary and "chance" in summary
    claims = json.loads((res / "summary.md.manifest.json").read_text())["metrics"]["claims"]
    by = {c["claim"].split(":")[0].split(" (")[0]: c for c in claims}
    assert by["Projection"]["verdict"] == "held"
    # the test cohorts are below every declared minimum: the probe and scaling claims cannot be decided
    judged = [c for c in claims if c["claim"].startswith(("State decoding", "Flat ≥ parcel", "Pretraining helps",
                                                           "Traits (", "Data scaling"))]
    assert len(judged) == 6
    for c in judged:
        assert c["verdict"] == "not testable at this scale", c
    assert all(c["sample"] and c["reason"] and c["paper"] for c in claims)


@pytest.mark.workflow
def test_fmri_workflow_on_test_config(smk_run):
    check_fmri_outputs(smk_run)
