"""Probes: FC features, subject-level splits without leakage, selection on validation only."""

import warnings
from pathlib import Path

import numpy as np
import pytest

from paperflow.fmri.evaluate import fc_features, probe, subject_splits


def test_fc_features_are_the_correlation_upper_triangle(rng):
    ts = rng.standard_normal((50, 7))
    f = fc_features(ts)
    assert f.shape == (21,)
    assert np.allclose(f, np.corrcoef(ts.T)[np.triu_indices(7, 1)])


def test_subject_splits_are_disjoint_and_stratified():
    subj = np.repeat([f"s{i}" for i in range(30)], 2)
    y = np.repeat(np.arange(30) % 2, 2)
    for tr, va, te in subject_splits(subj, y, (4 / 6, 1 / 6, 1 / 6), 5, 0):
        assert not (set(tr) & set(va)) and not (set(tr) & set(te)) and not (set(va) & set(te))
        assert len(tr) + len(va) + len(te) == 30
        lab = {f"s{i}": i % 2 for i in range(30)}
        assert {lab[s] for s in te} == {0, 1} and {lab[s] for s in va} == {0, 1}


def test_probe_finds_signal_and_reports_chance_on_noise(rng):
    n = 120
    subj = np.array([f"s{i // 2}" for i in range(n)])
    y = np.array([(i // 2) % 3 for i in range(n)])
    Cs = list(np.logspace(-3, 3, 4))
    splits = subject_splits(subj, None, (4 / 6, 1 / 6, 1 / 6), 4, 0)
    X = rng.standard_normal((n, 20))
    X[:, :3] += 3 * np.eye(3)[y]
    good = probe(X, y, subj, splits, Cs, 200, False, 50, 0, "logistic")
    assert good["mean"] > 0.9 and good["n_splits"] == 4 and good["fixed_split_boot_std"] >= 0
    noise = probe(rng.standard_normal((n, 20)), y, subj, splits, Cs, 200, False, 0, 0, "ridge")
    assert noise["mean"] < 0.6


def test_balanced_accuracy_equals_sklearn(rng):
    from sklearn.metrics import balanced_accuracy_score

    from paperflow.fmri.evaluate import _balanced_acc

    for k in (2, 3, 6):
        y = rng.integers(0, k, 40)
        p = rng.integers(0, k + 1, 40)  # includes a class absent from y (sklearn skips it after a warning)
        y[:k] = np.arange(k)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert _balanced_acc(y, p) == balanced_accuracy_score(y, p)


def _old_probe(X, y, subjects, splits, Cs, max_iter, balanced, n_boot, seed, kind):
    """The probe before issue 24: one validated sklearn pipeline per C, sklearn's balanced accuracy."""
    from sklearn.metrics import balanced_accuracy_score

    from paperflow.fmri.evaluate import _make

    def score(a, b):
        return float(balanced_accuracy_score(a, b)) if balanced else float((a == b).mean())

    scores, boot = [], None
    for i, (tr, va, te) in enumerate(splits):
        mtr, mva, mte = (np.isin(subjects, s) for s in (tr, va, te))
        best, best_c = -1.0, Cs[0]
        for C in Cs:
            s = score(y[mva], _make(kind, C, max_iter).fit(X[mtr], y[mtr]).predict(X[mva]))
            if s > best:
                best, best_c = s, C
        m = _make(kind, best_c, max_iter).fit(np.concatenate([X[mtr], X[mva]]), np.concatenate([y[mtr], y[mva]]))
        p = m.predict(X[mte])
        scores.append(score(y[mte], p))
        if i == 0:
            r = np.random.default_rng([seed, 11])
            vals = []
            for _ in range(n_boot):
                idx = np.concatenate([r.choice(np.flatnonzero(y[mte] == c), (y[mte] == c).sum()) for c in np.unique(y[mte])])
                vals.append(score(y[mte][idx], p[idx]))
            boot = float(np.std(vals))
    return scores, boot


@pytest.mark.parametrize("kind,balanced", [("logistic", True), ("ridge", False)])
def test_probe_equals_the_validated_sklearn_path(rng, kind, balanced):
    """The fast probe (scaler fitted once per split, no sklearn input validation, numpy balanced
    accuracy) gives the old per-C pipeline's numbers (to 1e-8; in practice bit for bit)."""
    n = 72
    subj = np.array([f"s{i // 2}" for i in range(n)])
    y = np.array([(i // 2) % 3 for i in range(n)])
    X = rng.standard_normal((n, 40)).astype(np.float32)
    X[:, :3] += 0.8 * np.eye(3, dtype=np.float32)[y]
    Cs = list(np.logspace(-3, 3, 4))
    splits = subject_splits(subj, y, (4 / 6, 1 / 6, 1 / 6), 3, 0)
    new = probe(X, y, subj, splits, Cs, 200, balanced, 30, 0, kind)
    old_scores, old_boot = _old_probe(X, y, subj, splits, Cs, 200, balanced, 30, 0, kind)
    assert np.allclose(new["scores"], old_scores, rtol=0, atol=1e-8)
    assert abs(new["fixed_split_boot_std"] - old_boot) <= 1e-8


def _part(tag, rows, settings):
    return {"tag": tag, "settings": settings, "result": {"tasks": {"state6": dict(rows), "trait_group": {}, "trait_age": {}},
                                                          **({"chance": {"state6": 1 / 6}} if tag == "baselines" else {})}}


def test_evaluate_merges_probe_parts_and_rejects_stale_or_missing_ones(tmp_path):
    """fmri evaluate = the baselines part + one part per tag, each probed with the evaluate's settings."""
    import json

    from paperflow.fmri import stages
    from paperflow.fmri.benchmarks import merge_probes

    settings = {"seed": 0, "state_splits": 2, "trait_splits": 3, "bootstrap": 5, "n_Cs": 2, "max_iter": 50}
    params = {**settings, "tags": ["flat-s0"]}
    row = {"mean": 0.5, "std": 0.1}
    files = {}
    for tag, rows in (("baselines", {"FC (parcel clip)": row}), ("flat-s0", {"MAE flat-s0": {**row, "mean": 0.7}})):
        files[tag] = tmp_path / f"{tag}.json"
        files[tag].write_text(json.dumps(_part(tag, rows, settings)))
    out = tmp_path / "metrics.json"
    res = stages.evaluate(params, parts=list(files.values()), out=out)
    assert set(res["tasks"]["state6"]) == {"FC (parcel clip)", "MAE flat-s0"}
    assert res["tasks"]["state6"]["MAE flat-s0"]["mean"] == 0.7 and res["chance"]["state6"] == 1 / 6
    assert json.loads(out.read_text()) == res
    with pytest.raises(SystemExit, match="parts"):  # a tag's part is missing
        stages.evaluate({**params, "tags": ["flat-s0", "parcel-s0"]}, parts=list(files.values()), out=out)
    stale = tmp_path / "stale" / "flat-s0.json"
    stale.parent.mkdir()
    stale.write_text(json.dumps(_part("flat-s0", {"MAE flat-s0": row}, {**settings, "trait_splits": 100})))
    with pytest.raises(SystemExit, match="probed with"):
        stages.evaluate(params, parts=[files["baselines"], stale], out=out)
    with pytest.raises(ValueError, match="twice"):
        merge_probes(_part("baselines", {"a": row}, settings)["result"], [_part("x", {"a": row}, settings)["result"]])


def test_probe_parts_are_the_baselines_and_every_embed_tag():
    from paperflow.core.config import load_config
    from paperflow.fmri import plan

    cfg = load_config(Path(__file__).resolve().parents[2] / "config" / "test.yaml")["fmri"]
    assert plan.probe_tags(cfg) == ["baselines", *plan.embed_tags(cfg)]
    assert plan.probe_params(cfg, "flat-rand") == {**cfg["eval"], "tag": "flat-rand"}
    with pytest.raises(ValueError, match="unknown probe part"):
        plan.probe_params(cfg, "volume-s9")
    assert plan.job_priority(cfg, "probe", tag="volume-s0") > plan.job_priority(cfg, "probe", tag="baselines") > 0
