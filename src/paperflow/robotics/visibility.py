"""Action-visibility check (issue 16 item 2): can the action be read from the extracted frames at all?

A cheap diagnostic run on the extracted dataset before any LAM is judged. For clips (o_t, o_t+k) of the
LAM's frame gap, ridge probes (alpha by 5-fold CV grouped by episode on train, as in c.4) predict the
window's summed motion a = sum a_rel[t:t+k, 0:6] (z-scored with train statistics) on held-out test
episodes from
- `raw`: the frames themselves, area-downsampled to `raw_size`², as [o_t, o_t+k − o_t] (pixels / 255);
- `stem`: the frozen seeded random conv stem the LAMs use (same channels, grid and seed), as
  [f(o_t), f(o_t+k) − f(o_t)]
(features standardised and reduced to `pca_dim` principal components fitted on train)
for slot 0 and slot 1. The best test NMSE (per-dimension mean of 1 − R²; chance = 1) gets an
episode-bootstrap 95% interval and is judged against the declared `action_check.visible_nmse`: if even
these linear read-outs cannot predict the action, no LAM trained on the frames can be expected to
carry it, and the MVP-LAM comparison says nothing about action-centricity.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from paperflow.core.stats import Estimate
from paperflow.core.verdict import Thresholds, Verdict, judge
from paperflow.robotics import mi
from paperflow.robotics.data import clips, load_episodes

SLOTS = [0, 1]


def _downsample(images: np.ndarray, size: int) -> np.ndarray:
    """(F, S, S, 3) uint8 -> (F, size*size*3) float32 in [0, 1], by area averaging (S divisible by size,
    else the nearest smaller multiple is cropped)."""
    F_, S = images.shape[:2]
    f = max(1, S // size)
    s = S // f
    x = images[:, :s * f, :s * f].astype(np.float32).reshape(F_, s, f, s, f, 3).mean((2, 4)) / 255.0
    return x.reshape(F_, -1)


def _stem_features(images: np.ndarray, stem_cfg: Mapping[str, Any], batch: int = 256) -> np.ndarray:
    import torch

    from paperflow.robotics.model import FrozenStem, LAMConfig

    cfg = LAMConfig(image_size=int(images.shape[1]), feat_channels=int(stem_cfg["feat_channels"]),
                    grid=int(stem_cfg["grid"]), stem_seed=int(stem_cfg["stem_seed"]))
    stem = FrozenStem(cfg)
    out = []
    with torch.no_grad():
        for i in range(0, len(images), batch):
            out.append(stem(torch.from_numpy(np.ascontiguousarray(images[i:i + batch]))).flatten(1).numpy())
    return np.concatenate(out) if out else np.zeros((0, cfg.grid**2 * cfg.feat_channels), np.float32)


def nmse_with_ci(pred: np.ndarray, a: np.ndarray, groups: np.ndarray, n_boot: int, seed: int) -> Estimate:
    """Test NMSE (per-dimension mean of 1 − R²) with a 95% interval over episode resamples (with
    replacement: the probe is fixed, so duplicated points do not bias the NMSE)."""
    value = mi.nmse(pred, a)[0]
    ug = np.unique(groups)
    members = {g: np.nonzero(groups == g)[0] for g in ug}
    rng = np.random.default_rng(seed)
    vals = []
    for _ in range(n_boot):
        idx = np.concatenate([members[g] for g in rng.choice(ug, len(ug), replace=True)])
        if len(idx) > 2:
            vals.append(mi.nmse(pred[idx], a[idx])[0])
    if len(vals) < 2:
        return Estimate(float(value), n=int(len(ug)))
    lo, hi = np.percentile(vals, [2.5, 97.5])
    return Estimate(float(value), float(lo), float(hi), n=int(len(ug)))


def _probe(X_tr: np.ndarray, A_tr: np.ndarray, g_tr: np.ndarray, X_te: np.ndarray, A_te: np.ndarray,
           g_te: np.ndarray, n_boot: int, seed: int, pca_dim: int) -> dict[str, Any]:
    from sklearn.decomposition import PCA
    from sklearn.linear_model import Ridge

    mu, sd = X_tr.mean(0), X_tr.std(0) + 1e-6
    Xtr, Xte = (X_tr - mu) / sd, (X_te - mu) / sd
    if Xtr.shape[1] > pca_dim:  # PCA on train keeps the grouped-CV ridge cheap (thousands of raw dims)
        pca = PCA(n_components=min(pca_dim, len(Xtr)), svd_solver="randomized", random_state=seed).fit(Xtr)
        Xtr, Xte = pca.transform(Xtr), pca.transform(Xte)
    res = mi.ridge_probe(Xtr, A_tr, g_tr, {"test": (Xte, A_te)}, alphas=(1, 10, 100, 1000, 1e4, 1e5))
    pred = Ridge(alpha=res["alpha"]).fit(Xtr, A_tr).predict(Xte)
    est = nmse_with_ci(pred, A_te, g_te, n_boot, seed)
    xyz = mi.nmse(pred[:, :3], A_te[:, :3])[0]  # the first three probed dims (x, y, z by default)
    return {"nmse": est.value, "ci95": [est.lo, est.hi], "n_episodes": est.n, "alpha": res["alpha"],
            "nmse_pooled": res["test"]["nmse_pooled"], "nmse_xyz": float(xyz)}


def action_visibility(mv_dir: str, p: Mapping[str, Any], seed: int = 0) -> dict[str, Any]:
    """Probe NMSE of the action from raw-frame and frozen-stem features, per slot (see module doc)."""
    k, size = int(p["frame_gap"]), int(p["raw_size"])
    sets: dict[str, Any] = {}
    for split, stride in (("train", 1), ("test", int(p["eval_stride"]))):
        sp = load_episodes(mv_dir, split, SLOTS)
        c = clips(sp, k, stride)
        ok = c["mask"].all(1)
        c = {kk: v[ok] for kk, v in c.items()}
        c["action6"] = c["action6"][:, list(p.get("action_dims", range(6)))]
        sets[split] = (sp, c)
    (sp_tr, c_tr), (sp_te, c_te) = sets["train"], sets["test"]
    out: dict[str, Any] = {"frame_gap": k, "n_pairs": {"train": int(len(c_tr["i0"])), "test": int(len(c_te["i0"]))},
                           "n_test_episodes": int(len(np.unique(c_te["episode"]))), "probes": {}}
    if len(c_tr["i0"]) < 10 or len(np.unique(c_tr["episode"])) < 2 or len(c_te["i0"]) < 3:
        out["best"] = None
        return out
    A_tr = mi.standardize(c_tr["action6"], c_tr["action6"])
    A_te = mi.standardize(c_te["action6"], c_tr["action6"])
    for v, slot in enumerate(SLOTS):
        feats = {"raw": lambda sp: _downsample(sp.images[:, v], size),
                 "stem": lambda sp: _stem_features(sp.images[:, v], p["stem"])}
        for name, fn in feats.items():
            F_tr, F_te = fn(sp_tr), fn(sp_te)

            def pair(F: np.ndarray, c: dict[str, np.ndarray]) -> np.ndarray:
                return np.hstack([F[c["i0"]], F[c["i1"]] - F[c["i0"]]])

            out["probes"][f"{name}_slot{slot}"] = _probe(pair(F_tr, c_tr), A_tr, c_tr["episode"], pair(F_te, c_te),
                                                         A_te, c_te["episode"], int(p["n_boot"]), seed,
                                                         int(p["pca_dim"]))
    best = min(out["probes"], key=lambda n: out["probes"][n]["nmse"])
    out["best"] = best
    return out


def visibility_verdict(vis: Mapping[str, Any], rule_cfg: Mapping[str, Any]) -> tuple[Estimate, Verdict]:
    """Judge the best probe's NMSE (with its episode-bootstrap CI) against `visible_nmse` (direction less).

    Not testable with fewer than `min_pairs` test pairs or `min_episodes` test episodes. "held": the
    action is visible (the CI lies below `visible_nmse`); "did not hold": the CI lies at or above it;
    `invisible(...)` says when the best probe is at chance (NMSE within `margin` of 1)."""
    rule = Thresholds(threshold=float(rule_cfg["visible_nmse"]), direction="less",
                      min_n=int(rule_cfg["min_episodes"]))
    best = vis.get("best")
    if not best:
        return Estimate(float("nan"), n=0), Verdict("not testable at this scale", "too few clips to fit a probe")
    b = vis["probes"][best]
    lo, hi = b["ci95"]
    est = Estimate(float(b["nmse"]), lo, hi, n=int(b["n_episodes"]))
    untestable = None
    if vis["n_pairs"]["test"] < int(rule_cfg["min_pairs"]):
        untestable = f"{vis['n_pairs']['test']} test pairs, below the declared minimum {rule_cfg['min_pairs']}"
    return est, judge(est, rule, untestable=untestable, what=f"best raw/stem probe NMSE ({best})")


def invisible(vis: Mapping[str, Any], rule_cfg: Mapping[str, Any]) -> bool:
    """True when even the best raw/stem probe is at chance (NMSE within `margin` of 1)."""
    best = vis.get("best")
    return bool(best) and vis["probes"][best]["nmse"] >= 1.0 - float(rule_cfg["margin"])
