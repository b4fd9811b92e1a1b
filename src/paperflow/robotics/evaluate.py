"""Action-centricity of a trained LAM's latents (spec c.4, [recon]).

Pairs: clips (o_t, o_t+k) of train (stride 1: PCA, probe and BA fit), val (stride 1: BA early
stopping) and test (stride `eval_stride`: every estimate reported). z = the quantised latent z_q of
slot 0 (also slot 1 and the mean over slots), PCA to <= `pca_dim` dims fitted on train; a = the net
motion sum_{tau=t}^{t+k-1} a_rel[tau, 0:6], z-scored with train statistics.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from paperflow.robotics import mi
from paperflow.robotics.data import clips, load_episodes

EVAL_SLOTS = [0, 1]


def latents(model: Any, sp: Any, c: dict[str, np.ndarray], bs: int = 256) -> dict[str, np.ndarray]:
    """z_q (n, V, Q*d_z, float64), codes (n, V, Q), reconstruction losses for each clip.

    z_q is read from the codebook (the code vectors themselves), not from the straight-through output
    h + sg(c - h): in float32 that differs from c by rounding that depends on h, so two clips with the
    same codes would get different z_q, and the estimators (which standardise every dimension) would read
    the pre-quantisation latent through the rounding -- a collapsed one-code LAM then shows KSG > 0."""
    import torch

    from paperflow.robotics.model import rec_loss
    from paperflow.robotics.train import features

    feats = features(model, sp.images)
    book = model.vq.codebook.detach().double()
    zs, codes, rs, rc = [], [], [], []
    with torch.no_grad():
        for i in range(0, len(c["i0"]), bs):
            f0, f1 = feats[c["i0"][i:i + bs]], feats[c["i1"][i:i + bs]]
            zz, cc = [], []
            for v in range(f0.shape[1]):
                z, _, _, code = model.encode(f0[:, v], f1[:, v])
                zz.append(z)
                cc.append(code)
            zs.append(book[torch.stack(cc, 1)].flatten(2).numpy())
            codes.append(torch.stack(cc, 1).numpy())
            rs.append(rec_loss(model.decode(f0[:, 0], zz[0]), f1[:, 0]).numpy())
            rc.append(rec_loss(model.decode(f0[:, 0], zz[1]), f1[:, 0]).numpy() if len(zz) > 1 else rs[-1])
    if not zs:
        return {"z": np.zeros((0, 2, 1)), "codes": np.zeros((0, 2, 1), int), "rec_self": np.zeros(0),
                "rec_cross": np.zeros(0)}
    return {"z": np.concatenate(zs), "codes": np.concatenate(codes), "rec_self": np.concatenate(rs),
            "rec_cross": np.concatenate(rc)}


def _pca(train: np.ndarray, dim: int) -> Any:
    from sklearn.decomposition import PCA

    return PCA(n_components=min(dim, train.shape[1], len(train)), random_state=0).fit(train)


def project(pca: Any, x: np.ndarray) -> np.ndarray:
    """`pca.transform(x)` with equal input rows mapped to bitwise-equal outputs. A matrix product can round
    equal rows differently (BLAS blocks rows), and the estimators standardise every dimension, which would
    blow that rounding up into a spurious variable: a latent with one code would no longer be constant."""
    x = np.asarray(x, np.float64)
    if len(x) == 0:
        return np.zeros((0, int(pca.n_components_)))
    uniq, inv = np.unique(x, axis=0, return_inverse=True)
    return pca.transform(uniq)[np.asarray(inv).ravel()]


def evaluate_lam(model_dir: str | Path, mv_dir: str | Path, p: dict[str, Any], seed: int) -> dict[str, Any]:
    from paperflow.robotics.train import load_lam

    model, meta = load_lam(model_dir)
    k = meta["frame_gap"]
    sets = {}
    for split, stride in (("train", 1), ("val", 1), ("test", p["eval_stride"])):
        sp = load_episodes(mv_dir, split, EVAL_SLOTS)
        c = clips(sp, k, stride)
        # only pairs where both evaluated views are usable
        ok = c["mask"].all(1)
        c = {kk: v[ok] for kk, v in c.items()}
        c["action6"] = c["action6"][:, list(p.get("action_dims", range(6)))]  # the probed action dims
        lat = latents(model, sp, c)
        tasks = np.array([sp.tasks[e] for e in c["episode"]]) if len(c["episode"]) else np.array([], str)
        sets[split] = {**c, **lat, "task": tasks}
    tr, va, te = sets["train"], sets["val"], sets["test"]
    a_ref = tr["action6"]
    A = {s: mi.standardize(sets[s]["action6"], a_ref) for s in sets}
    out: dict[str, Any] = {"n_pairs": {s: int(len(sets[s]["action6"])) for s in sets},
                           "n_test_episodes": int(len(np.unique(te["episode"]))),
                           "test_rec_self": float(te["rec_self"].mean()), "test_rec_cross": float(te["rec_cross"].mean())}
    kn = p["k_nn"]
    reps = {"slot0": lambda s: sets[s]["z"][:, 0], "slot1": lambda s: sets[s]["z"][:, 1],
            "mean": lambda s: sets[s]["z"].mean(1)}
    for name, get in reps.items():
        pca = _pca(get("train"), p["pca_dim"])
        Z = {s: project(pca, get(s)) for s in sets}
        r: dict[str, Any] = {"pca_dim": int(pca.n_components_)}
        r["ksg"] = mi.ksg_mi(Z["test"], A["test"], k=kn, seed=seed)
        r["ksg_ci95"] = mi.bootstrap_episodes(lambda idx: mi.ksg_mi(Z["test"][idx], A["test"][idx], k=kn, seed=seed),
                                              te["episode"], p["n_boot"], seed)
        rng = np.random.default_rng(seed)
        g = te["gripper"][:, None] + rng.uniform(-0.05, 0.05, (len(te["gripper"]), 1))
        r["ksg_with_gripper"] = mi.ksg_mi(Z["test"], np.hstack([A["test"], g]), k=kn, seed=seed)
        # translation only (dims 0-2): in the simulator rotations are barely visible (only yaw, via the fingers)
        r["ksg_xyz"] = mi.ksg_mi(Z["test"], A["test"][:, :3], k=kn, seed=seed)
        probe = mi.ridge_probe(mi.standardize(get("train"), get("train")), A["train"], tr["episode"],
                               {"test": (mi.standardize(get("test"), get("train")), A["test"])})
        r["probe_alpha"], r["probe_nmse"], r["probe_nmse_pooled"] = probe["alpha"], probe["test"]["nmse"], probe["test"]["nmse_pooled"]
        r["probe_nmse_per_dim"] = probe["test"].get("nmse_per_dim", [])  # in the order of `action_dims`
        px = mi.ridge_probe(mi.standardize(get("train"), get("train")), A["train"][:, :3], tr["episode"],
                            {"test": (mi.standardize(get("test"), get("train")), A["test"][:, :3])})
        r["probe_nmse_xyz"] = px["test"]["nmse"]
        if name in ("slot0", "mean"):
            r["ba"] = mi.ba_bound(Z["train"], A["train"], Z["val"], A["val"], Z["test"], A["test"], seed=seed, k=kn)
        if name == "slot0":
            code_t = te["codes"][:, 0]
            r["mixed_codes"], r["mixed_codes_n"] = mi.mixed_mi(code_t, A["test"], k=kn, seed=seed)
            r["mixed_per_position"] = [mi.mixed_mi(code_t[:, q], A["test"], k=kn, seed=seed)[0]
                                       for q in range(code_t.shape[1])]
            r["codes_used"] = int(len(np.unique(np.concatenate([sets[s]["codes"][:, 0].ravel() for s in sets]))))
            # OOD probe: fit on train clips of the source tasks, test on test clips of the target tasks
            src = np.isin(tr["task"], p["ood_source_tasks"])
            tgt = np.isin(te["task"], p["ood_target_tasks"])
            ind = np.isin(te["task"], p["ood_source_tasks"])
            if src.sum() > 10 and len(np.unique(tr["episode"][src])) >= 2:
                zs_tr = mi.standardize(get("train")[src], get("train")[src])
                a_src = tr["action6"][src]
                zt = mi.standardize(get("test"), get("train")[src])
                ood = mi.ridge_probe(zs_tr, mi.standardize(a_src, a_src), tr["episode"][src], {
                    "ood": (zt[tgt], mi.standardize(te["action6"][tgt], te["action6"][tgt]) if tgt.sum() > 1 else te["action6"][tgt]),
                    "in_dist": (zt[ind], mi.standardize(te["action6"][ind], a_src))})
                r["ood_probe"] = {"nmse_ood": ood["ood"]["nmse"], "n_ood": ood["ood"]["n"],
                                  "nmse_in_dist": ood["in_dist"]["nmse"], "n_in_dist": ood["in_dist"]["n"],
                                  "alpha": ood["alpha"]}
            else:
                r["ood_probe"] = {"nmse_ood": float("nan"), "n_ood": int(tgt.sum()), "nmse_in_dist": float("nan"),
                                  "n_in_dist": int(ind.sum()), "alpha": None}
        out[name] = r
    return out
