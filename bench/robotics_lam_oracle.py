"""Diagnostic (run by hand): can the LAM's decoder use the action at all in the steps we can afford?

    OMP_NUM_THREADS=1 python bench/robotics_lam_oracle.py DATA [--steps 300] [--lr 3e-3] [--residual]
        [--grid 4] [--d-model 64] [--frame-gap 3] [--seeds 0] [--modes oracle,zero,lam] [--json OUT]

DATA is an extracted robotics dataset (`data/robotics/mv` of a pipeline run, or any `paperflow robotics
extract` output). For each mode the LAM of `paperflow.robotics.model` (frozen stem, same decoder) is
trained on self-view reconstruction of slots 0 and 1 (one slot drawn per sample, as the single-view LAM
treats views) and scored by the validation reconstruction loss per slot:

- `oracle`: the decoder's latent is a learned linear map of the *true* window motion (xyz, z-scored) —
  the best an encoder could hand it;
- `zero`: the same with the motion zeroed — the decoder predicts o_t+k from o_t alone;
- `lam`: the real encoder and VQ (the single-view LAM); also its latent's ridge-probe NMSE and KSG on
  validation clips (slot 0 and 1, PCA 16 fitted on train, xyz target).

If `oracle` does not beat `zero`, no encoder can make the latent action-centric at this step count: the
decoder has not learned to use motion. If `oracle` beats `zero` but `lam` sits at `zero`, the encoder or
the quantiser is the bottleneck. Validation split only (never test). Results: src/paperflow/robotics/README.md.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np


def run(data: Path, mode: str, steps: int, lr: float, residual: bool, grid: int, d_model: int, k: int,
        seed: int, batch: int = 32) -> dict[str, Any]:
    import torch
    import torch.nn as nn

    from paperflow.core.schedule import lambda_lr
    from paperflow.robotics import mi
    from paperflow.robotics.data import clips, load_episodes
    from paperflow.robotics.evaluate import _pca, latents
    from paperflow.robotics.model import LAM, LAMConfig, rec_loss
    from paperflow.robotics.train import features

    torch.manual_seed(seed)
    cfg = LAMConfig(grid=grid, d_model=d_model, residual=residual)
    model = LAM(cfg)
    slots = [0, 1]
    tr, va = load_episodes(data, "train", slots), load_episodes(data, "val", slots)
    ctr, cva = clips(tr, k), clips(va, k)
    ftr, fva = features(model, tr.images), features(model, va.images)
    mu, sd = ctr["action6"][:, :3].mean(0), ctr["action6"][:, :3].std(0) + 1e-9
    orc = nn.Linear(3, cfg.n_queries * cfg.d_z)
    params = [p for p in model.parameters() if p.requires_grad] + (list(orc.parameters()) if mode != "lam" else [])
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=1e-4)
    sched = lambda_lr(opt, steps, max(1, steps // 20))
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)

    def latent(f0: Any, f1: Any, a6: np.ndarray) -> tuple[Any, Any]:
        if mode == "lam":
            z, _, vq, _ = model.encode(f0, f1)
            return z, vq
        act = torch.tensor((a6[:, :3] - mu) / sd, dtype=torch.float32) * (1.0 if mode == "oracle" else 0.0)
        return orc(act).view(len(a6), cfg.n_queries, cfg.d_z), torch.zeros(len(a6))

    t0 = time.time()
    for step in range(steps):
        idx = rng.integers(0, len(ctr["i0"]), batch)
        v = rng.choice(slots, batch)
        f0, f1 = ftr[ctr["i0"][idx], v], ftr[ctr["i1"][idx], v]
        z, vq = latent(f0, f1, ctr["action6"][idx])
        loss = (rec_loss(model.decode(f0, z), f1) + vq).mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        if mode == "lam" and (step + 1) % 25 == 0:
            model.vq.reset_dead(gen)
    out: dict[str, Any] = {"mode": mode, "seed": seed, "train_s": round(time.time() - t0, 1)}
    model.eval()
    with torch.no_grad():
        for s in slots:
            f0, f1 = fva[cva["i0"], s], fva[cva["i1"], s]
            z, _ = latent(f0, f1, cva["action6"])
            out[f"val_rec_slot{s}"] = float(rec_loss(model.decode(f0, z), f1).mean())
    if mode == "lam":
        sets = {}
        for split, sp, c in (("train", tr, ctr), ("val", va, cva)):
            ok = c["mask"].all(1)
            c = {key: val[ok] for key, val in c.items()}
            sets[split] = {**c, **latents(model, sp, c)}
        A = {s: mi.standardize(sets[s]["action6"][:, :3], sets["train"]["action6"][:, :3]) for s in sets}
        for s in slots:
            pca = _pca(sets["train"]["z"][:, s], 16)
            Z = {key: pca.transform(sets[key]["z"][:, s]) for key in sets}
            pr = mi.ridge_probe(mi.standardize(Z["train"], Z["train"]), A["train"], sets["train"]["episode"],
                                {"val": (mi.standardize(Z["val"], Z["train"]), A["val"])})
            out[f"probe_nmse_slot{s}"] = pr["val"]["nmse"]
            out[f"ksg_slot{s}"] = mi.ksg_mi(Z["val"], A["val"], k=4, seed=seed)
            out[f"codes_slot{s}"] = int(len(np.unique(sets["val"]["codes"][:, s])))
        out["n_val_pairs"] = int(len(A["val"]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", type=Path)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--residual", action="store_true")
    ap.add_argument("--grid", type=int, default=4)
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--frame-gap", type=int, default=3)
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--modes", default="oracle,zero,lam")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    rows = []
    for seed in (int(s) for s in a.seeds.split(",")):
        for mode in a.modes.split(","):
            r = run(a.data, mode, a.steps, a.lr, a.residual, a.grid, a.d_model, a.frame_gap, seed)
            rows.append(r)
            print(json.dumps({key: round(val, 4) if isinstance(val, float) else val for key, val in r.items()}),
                  flush=True)
    if a.json:
        a.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(a).items()}, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
