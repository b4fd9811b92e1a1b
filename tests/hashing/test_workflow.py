"""The hashing part of the shared smoke run (`smk_run`: config/test.yaml, every study, run once)."""

import json

import numpy as np
import pytest

pytestmark = pytest.mark.workflow


def test_outputs_and_manifests(smk_run):
    res = smk_run / "results/hashing"
    man = json.loads((res / "summary.md.manifest.json").read_text())
    claims = man["metrics"]["claims"]
    assert {c["verdict"] for c in claims} <= {"held", "did not hold", "partly", "not testable at this scale",
                                              "inconclusive"}
    assert all(c["sample"] and c["paper"] for c in claims)
    metrics = json.loads((res / "metrics.json").read_text())
    rows = [r for r in metrics["runs_table"] if r["selection"] == "noisy_val"]
    assert {(r["method"], r["mode"], r["rate"]) for r in rows} == {
        (m, "sym", r) for m in ("plain", "rfcmh") for r in (0.0, 0.5)}
    for r in rows:
        assert 0.0 < r["i2t_mean"] <= 1.0 and 0.0 < r["t2i_mean"] <= 1.0
    # the chance level is measured on the same query/database, and one seed is never judged "held"
    ch = metrics["chance"]["synth"]["16"]
    assert 0.0 < ch["mean"] < 1.0 and len(ch["per_draw"]) >= 1
    assert not any(c["verdict"] == "held" and c["sample"].startswith("1 seed") for c in claims)
    assert "± 0.000" not in (res / "summary.md").read_text()
    assert (res / "map_vs_noise_synth_noisy_val.png").stat().st_size > 1000
    # every noise record is exact and reproducible (the noise stage verified it before writing its manifest)
    for side in (res / "noise/synth").glob("*.json"):
        if side.name.endswith(".manifest.json"):
            continue
        s = json.loads(side.read_text())
        assert s["n_changed"] == int(np.floor(s["n"] * s["requested_rate"] + 1e-9))
        assert (side.parent / (side.name + ".manifest.json")).exists()


def test_training_never_sees_test_splits(smk_run):
    runs = list((smk_run / "models/hashing/synth").glob("*/weights.npz.manifest.json"))
    assert len(runs) == 4
    for m in runs:
        inputs = json.loads(m.read_text())["inputs"]
        assert any(k.endswith("train.npz") for k in inputs) and any(k.endswith("val.npz") for k in inputs)
        assert not any(k.endswith(("query.npz", "database.npz")) for k in inputs), inputs
        assert sum("/noise/" in k for k in inputs) == 2  # labels only via the noise records
        assert not (m.parent / "ckpt").exists()  # the resumable state is removed once the weights exist
    # one score job per code length scores every run of it (and the weights it read are those of the runs)
    ev = json.loads((smk_run / "results/hashing/eval/synth/L16.json").read_text())
    assert [c["run"] for c in ev["cells"]] == sorted(m.parent.name for m in runs)
    for c in ev["cells"]:
        assert set(c["selections"]) == {"noisy_val", "clean_val", "last"}
        assert c["train_params"]["seed"] == 10 and c["run"].endswith("-s10")
    with np.load(smk_run / "results/hashing/codes/synth/L16.npz") as z:
        assert {k.split("/")[0] for k in z.files} == {c["run"] for c in ev["cells"]}
        assert z["rfcmh-L16-sym0.5-s10/noisy_val/q_img"].shape[1] * 8 == 16
