"""Diagnostic (run by hand): can the LAM's decoder use the action at all in the steps we can afford?

    OMP_NUM_THREADS=1 python bench/robotics_lam_oracle.py DATA [--steps 300] [--lr 3e-3] [--residual]
        [--grid 4] [--d-model 64] [--frame-gap 3] [--seeds 0] [--modes oracle,zero,lam] [--json OUT]
        [--readout] [--pixels RES] [--oracle-axes 0,1,2]

DATA is an extracted robotics dataset (`data/robotics/mv` of a pipeline run, or any `paperflow robotics
extract` output). For each mode the LAM of `paperflow.robotics.model` (frozen stem, same decoder) is
trained on self-view reconstruction of slots 0 and 1 (one slot drawn per sample, as the single-view LAM
treats views) and scored by the validation reconstruction loss per slot:

- `oracle`: the decoder's latent is a learned linear map of the *true* window motion (xyz, z-scored) —
  the best an encoder could hand it (`--oracle-axes`: only some axes, to see which motion the decoder can use);
- `zero`: the same with the motion zeroed — the decoder predicts o_t+k from o_t alone;
- `lam`: the real encoder and VQ (the single-view LAM); also its latent's ridge-probe NMSE and KSG on
  validation clips (slot 0 and 1, PCA 16 fitted on train, xyz target).

If `oracle` does not beat `zero`, no encoder can make the latent action-centric at this step count: the
decoder has not learned to use motion. If `oracle` beats `zero` but `lam` sits at `zero`, the encoder or
the quantiser is the bottleneck. `--readout` adds, for the `lam` mode's slot 0, the probe's NMSE per axis,
probes on the whole z_q, on the one-hot code tuple and on the pre-quantisation latent h, and the raw-pixel
probe per axis on the same clips (`_readouts`). `--pixels RES` swaps the frozen stem for spec c.2's `pixels`
e(.) (raw patches as tokens and target). Validation split only (never test). Results: src/paperflow/robotics/README.md.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np


def _pixel_stem(grid: int, res: int) -> Any:
    """Spec c.2's `pixels` alternative for e(.): frames area-averaged to res x res, cut into grid x grid patches,
    each patch's raw pixels (in [-1, 1]) one token; the LAM's trainable input projection is the patch
    embedding and the decoder's target is the future frame's raw patches (never a trainable e)."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class PixelPatches(nn.Module):
        @torch.no_grad()
        def forward(self, img: Any) -> Any:
            x = img.permute(0, 3, 1, 2).float() / 127.5 - 1.0
            if x.shape[-1] != res:
                x = F.adaptive_avg_pool2d(x, res)
            q = res // grid
            x = x.reshape(len(x), 3, grid, q, grid, q).permute(0, 2, 4, 3, 5, 1)
            return x.reshape(len(x), grid * grid, q * q * 3)

    return PixelPatches()


def run(data: Path, mode: str, steps: int, lr: float, residual: bool, grid: int, d_model: int, k: int,
        seed: int, batch: int = 32, readout: bool = False, pixels: int = 0,
        oracle_axes: tuple[int, ...] = (0, 1, 2)) -> dict[str, Any]:
    import torch
    import torch.nn as nn

    from paperflow.core.schedule import lambda_lr
    from paperflow.robotics import mi
    from paperflow.robotics.data import clips, load_episodes
    from paperflow.robotics.evaluate import _pca, latents, project
    from paperflow.robotics.model import LAM, LAMConfig, rec_loss
    from paperflow.robotics.train import features

    torch.manual_seed(seed)
    cfg = LAMConfig(grid=grid, d_model=d_model, residual=residual)
    if pixels:
        cfg.feat_channels = 3 * (pixels // grid) ** 2
    model = LAM(cfg)
    if pixels:
        model.stem = _pixel_stem(grid, pixels)
    slots = [0, 1]
    tr, va = load_episodes(data, "train", slots), load_episodes(data, "val", slots)
    ctr, cva = clips(tr, k), clips(va, k)
    ftr, fva = features(model, tr.images), features(model, va.images)
    mu, sd = ctr["action6"][:, :3].mean(0), ctr["action6"][:, :3].std(0) + 1e-9
    orc = nn.Linear(3, cfg.n_queries * cfg.d_z)
    keep = torch.tensor([1.0 if ax in oracle_axes else 0.0 for ax in range(3)])
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
        act = act * keep  # `oracle_axes`: the motion axes the oracle is shown (the rest zeroed)
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
    if mode == "oracle":
        out["oracle_axes"] = list(oracle_axes)
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
            Z = {key: project(pca, sets[key]["z"][:, s]) for key in sets}
            pr = mi.ridge_probe(mi.standardize(Z["train"], Z["train"]), A["train"], sets["train"]["episode"],
                                {"val": (mi.standardize(Z["val"], Z["train"]), A["val"])})
            out[f"probe_nmse_slot{s}"] = pr["val"]["nmse"]
            out[f"ksg_slot{s}"] = mi.ksg_mi(Z["val"], A["val"], k=4, seed=seed)
            out[f"codes_slot{s}"] = int(len(np.unique(sets["val"]["codes"][:, s])))
        if readout:
            out.update(_readouts(model, sets, A, (tr, va), (ctr, cva), ftr, fva))
        out["n_val_pairs"] = int(len(A["val"]))
    return out


def _readouts(model: Any, sets: dict[str, Any], A: dict[str, np.ndarray], splits: tuple[Any, Any],
              cl: tuple[dict[str, np.ndarray], dict[str, np.ndarray]], ftr: Any, fva: Any) -> dict[str, Any]:
    """Slot 0 only: how readable is the action from the latent, beyond the pipeline's PCA-16 ridge probe?

    - `probe_axis_slot0`: the PCA-16 ridge probe's NMSE per target axis (x, y, z);
    - `probe_full_slot0`: ridge on the whole z_q (no PCA);
    - `probe_onehot_slot0`: ridge on the one-hot code of each query token (spec c.4's representation (ii),
      the discrete code tuple, read linearly: 4 x 16 indicators);
    - `probe_h_slot0`: ridge on the pre-quantisation latent h (PCA-16), i.e. what the quantiser throws away.
    Every probe is fitted on train clips (alpha by grouped CV) and scored on validation clips.
    """
    import torch

    from paperflow.robotics import mi
    from paperflow.robotics.evaluate import _pca, project

    def probe(ztr: np.ndarray, zva: np.ndarray) -> dict[str, Any]:
        return mi.ridge_probe(mi.standardize(ztr, ztr), A["train"], sets["train"]["episode"],
                              {"val": (mi.standardize(zva, ztr), A["val"])})

    out: dict[str, Any] = {}
    pca = _pca(sets["train"]["z"][:, 0], 16)
    Z = {k: project(pca, sets[k]["z"][:, 0]) for k in sets}
    out["probe_axis_slot0"] = [round(e, 4) for e in probe(Z["train"], Z["val"])["val"]["nmse_per_dim"]]
    out["probe_full_slot0"] = probe(sets["train"]["z"][:, 0], sets["val"]["z"][:, 0])["val"]["nmse"]
    n_codes = int(model.vq.codebook.shape[0])

    def onehot(codes: np.ndarray) -> np.ndarray:
        return np.concatenate([np.eye(n_codes)[codes[:, q]] for q in range(codes.shape[1])], 1)

    out["probe_onehot_slot0"] = probe(onehot(sets["train"]["codes"][:, 0]), onehot(sets["val"]["codes"][:, 0]))[
        "val"]["nmse"]
    hs = {}
    for split, (c, f) in {"train": (cl[0], ftr), "val": (cl[1], fva)}.items():
        ok = c["mask"].all(1)
        i0, i1 = c["i0"][ok], c["i1"][ok]
        with torch.no_grad():
            hs[split] = np.concatenate([model.encode(f[i0[i:i + 256], 0], f[i1[i:i + 256], 0])[1].flatten(1).numpy()
                                        for i in range(0, len(i0), 256)])
    hp = _pca(hs["train"], 16)
    out["probe_h_slot0"] = probe(hp.transform(hs["train"]), hp.transform(hs["val"]))["val"]["nmse"]
    # the frames themselves, per axis: the action-check's raw probe ([o_t, o_t+k - o_t] at 16^2, standardised,
    # PCA 128 on train), here on the same train / validation clips as the latent probes above
    from paperflow.robotics.visibility import _downsample

    raw = {}
    for split, (sp, c) in {"train": (splits[0], cl[0]), "val": (splits[1], cl[1])}.items():
        ok = c["mask"].all(1)
        x = _downsample(sp.images[:, 0], 16)
        raw[split] = np.concatenate([x[c["i0"][ok]], x[c["i1"][ok]] - x[c["i0"][ok]]], 1)
    mu, sd = raw["train"].mean(0), raw["train"].std(0) + 1e-6
    rp = _pca((raw["train"] - mu) / sd, 128)
    Rtr, Rva = rp.transform((raw["train"] - mu) / sd), rp.transform((raw["val"] - mu) / sd)
    ra = mi.ridge_probe(Rtr, A["train"], sets["train"]["episode"], {"val": (Rva, A["val"])},
                        alphas=(1, 10, 100, 1000, 1e4, 1e5))["val"]
    out["raw_probe_slot0"] = ra["nmse"]
    out["raw_axis_slot0"] = [round(e, 4) for e in ra["nmse_per_dim"]]
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
    ap.add_argument("--readout", action="store_true", help="lam mode: also the readout probes of _readouts")
    ap.add_argument("--oracle-axes", default="0,1,2", help="motion axes (x=0, y=1, z=2) the oracle sees")
    ap.add_argument("--pixels", type=int, default=0, metavar="RES",
                    help="e(.) = raw pixel patches of frames pooled to RES^2 (spec c.2 `pixels`), not the frozen stem")
    a = ap.parse_args()
    rows = []
    for seed in (int(s) for s in a.seeds.split(",")):
        for mode in a.modes.split(","):
            r = run(a.data, mode, a.steps, a.lr, a.residual, a.grid, a.d_model, a.frame_gap, seed, readout=a.readout,
                    pixels=a.pixels, oracle_axes=tuple(int(x) for x in a.oracle_axes.split(",")))
            rows.append(r)
            print(json.dumps({key: round(val, 4) if isinstance(val, float) else val for key, val in r.items()}),
                  flush=True)
    if a.json:
        a.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(a).items()}, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
