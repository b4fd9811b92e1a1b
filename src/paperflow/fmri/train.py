"""MAE pretraining (accelerate; resumable from `last.pt`; best checkpoint by validation loss) and
embedding extraction."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np

from paperflow.fmri.geometry import Projector

log = logging.getLogger(__name__)


def build_model(proj: Projector, p: dict[str, Any]):
    from paperflow.fmri.model import MAE

    m = p["model"]
    return MAE(proj.n_patches, proj.patch_size, proj.valid_mask(), n_frames=p["clip_frames"], t_patch=m["t_patch"],
               dim=m["dim"], depth=m["depth"], heads=m["heads"], dec_dim=m["dec_dim"], dec_depth=m["dec_depth"],
               dec_heads=m["dec_heads"], mask_ratio=p["mask_ratio"])


def sample_clips(runs: list[np.ndarray], proj: Projector, n: int, T: int, rng: np.random.Generator) -> np.ndarray:
    """n random T-frame crops (transformed, patched): (n, T, P, S) float32."""
    from paperflow.fmri.model import transform_clip

    out = np.empty((n, T, proj.n_patches, proj.patch_size), dtype=np.float32)
    for i in range(n):
        r = runs[rng.integers(len(runs))]
        s = rng.integers(0, r.shape[0] - T + 1)
        out[i] = proj.to_patches(transform_clip(r[s:s + T]))
    return out


def pretrain(proj: Projector, train_runs: list[np.ndarray], val_runs: list[np.ndarray], p: dict[str, Any],
             out_dir: Path, progress=lambda it, desc, total=None: it) -> dict[str, Any]:
    """Train for p['steps'] steps; writes last.pt (resume point), best.pt, log.jsonl into out_dir."""
    import torch
    from accelerate import Accelerator

    from paperflow.core.seeding import seed_everything, stream
    from paperflow.fmri.model import lr_lambda, param_groups

    out_dir.mkdir(parents=True, exist_ok=True)
    seed_everything(p["seed"])
    # CUDA + fp16 autocast when a GPU is visible. Masks below are drawn with CPU generators and moved to
    # acc.device (MAE.sample_visible), so CPU runs keep their streams and GPU runs get the same masks.
    # The GPU path has not been run in this repository's tests (CPU only).
    acc = Accelerator(cpu=not torch.cuda.is_available(), mixed_precision="fp16" if torch.cuda.is_available() else "no")
    model = build_model(proj, p)
    bs, steps = p["batch_size"], p["steps"]
    lr = p["base_lr"] * bs / 256
    opt = torch.optim.AdamW(param_groups(model, p["weight_decay"]), lr=lr, betas=(0.9, 0.95))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(steps, max(1, int(p["warmup_frac"] * steps))))
    model, opt, sched = acc.prepare(model, opt, sched)
    T = p["clip_frames"]
    # fixed validation clips and masks
    vrng = stream(p["seed"], "val")
    val_x = torch.from_numpy(sample_clips(val_runs, proj, p["val_clips"], T, vrng)) if val_runs else None
    g = torch.Generator().manual_seed(p["seed"] + 1)
    val_vis = acc.unwrap_model(model).sample_visible(p["val_clips"], g).cpu() if val_runs else None
    start, best, history = 0, float("inf"), []
    last = out_dir / "last.pt"
    if last.exists() and p.get("resume", True):
        ck = torch.load(last, map_location="cpu", weights_only=False)
        acc.unwrap_model(model).load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        sched.load_state_dict(ck["sched"])
        start, best, history = ck["step"], ck["best"], ck["history"]
        if ck.get("scaler") is not None and getattr(acc, "scaler", None) is not None:  # fp16 loss scale (CUDA only)
            acc.scaler.load_state_dict(ck["scaler"])
        log.info("resumed from %s at step %d", last, start)

    def evaluate() -> float:
        model.eval()
        with torch.no_grad():
            losses = [acc.unwrap_model(model)(val_x[i:i + 64].to(acc.device), vis=val_vis[i:i + 64].to(acc.device))[0].item()
                      * len(val_x[i:i + 64]) for i in range(0, len(val_x), 64)]
        model.train()
        return float(np.sum(losses) / len(val_x))

    def save(path: Path, step: int) -> None:
        tmp = path.with_suffix(".tmp")
        ck = {"model": acc.unwrap_model(model).state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(),
              "step": step, "best": best, "history": history, "params": p}
        if getattr(acc, "scaler", None) is not None:  # fp16 GradScaler on CUDA; absent on CPU (checkpoint unchanged)
            ck["scaler"] = acc.scaler.state_dict()
        torch.save(ck, tmp)
        tmp.replace(path)

    model.train()
    run_loss = []
    for step in progress(range(start, steps), f"pretrain {proj.space}", total=steps - start):
        rng = stream(p["seed"], "batch", step)  # per-step stream: resume reproduces the same batches
        x = torch.from_numpy(sample_clips(train_runs, proj, bs, T, rng)).to(acc.device)
        gs = torch.Generator().manual_seed(int(rng.integers(2**31)))
        vis = acc.unwrap_model(model).sample_visible(bs, gs).to(acc.device)
        loss = model(x, vis=vis)[0]
        opt.zero_grad(set_to_none=True)
        acc.backward(loss)
        acc.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        run_loss.append(loss.item())
        done = step + 1
        if done % p["eval_every"] == 0 or done == steps:
            rec = {"step": done, "train_loss": float(np.mean(run_loss)), "lr": sched.get_last_lr()[0]}
            run_loss = []
            if val_x is not None:
                rec["val_loss"] = evaluate()
                if rec["val_loss"] < best:
                    best = rec["val_loss"]
                    save(out_dir / "best.pt", done)
            history.append(rec)
            log.info("%s", json.dumps(rec))
            save(last, done)
            if p.get("stop_after") == done:  # simulated interruption (tests): last.pt is the resume point
                break
    if val_x is None or not (out_dir / "best.pt").exists():
        save(out_dir / "best.pt", steps)
    with open(out_dir / "log.jsonl", "w") as fh:
        for rec in history:
            fh.write(json.dumps(rec) + "\n")
    return {"best_val_loss": best, "history": history, "initial_loss": history[0]["train_loss"] if history else None}


def load_model(proj: Projector, ckpt: Path | None, p: dict[str, Any], device: Any = None):
    """The encoder from a checkpoint, or randomly initialized (seeded) when ckpt is None; in eval mode
    on `device` (default: CUDA when available, else the CPU). Built and loaded on the CPU first, so
    the random init is the same whichever device it ends on."""
    import torch

    from paperflow.core.accel import cuda_available
    from paperflow.core.seeding import seed_everything

    seed_everything(p["seed"])
    model = build_model(proj, p)
    if ckpt is not None:
        model.load_state_dict(torch.load(ckpt, map_location="cpu", weights_only=False)["model"])
    return model.to(device if device is not None else ("cuda" if cuda_available() else "cpu")).eval()


def _model_device(model):
    return next(model.parameters()).device


def embed_runs(model, proj: Projector, runs: list[np.ndarray], T: int, batch: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """Unmasked encoder over non-overlapping T-frame windows (a shorter run is zero-padded);
    returns CLS (N, dim) and mean patch token (N, dim), both averaged over windows."""
    import torch

    from paperflow.fmri.model import transform_clip

    clips, owner = [], []
    for i, r in enumerate(runs):
        n = max(1, r.shape[0] // T)
        for w in range(n):
            c = r[w * T:(w + 1) * T]
            if c.shape[0] < T:
                c = np.concatenate([c, np.zeros((T - c.shape[0], c.shape[1]), c.dtype)])
            clips.append(proj.to_patches(transform_clip(c)))
            owner.append(i)
    owner = np.asarray(owner)
    cls_l, tok_l = [], []
    dev = _model_device(model)
    with torch.no_grad():
        for s in range(0, len(clips), batch):
            h = model.encode(torch.from_numpy(np.stack(clips[s:s + batch])).to(dev)).float().cpu()
            cls_l.append(h[:, 0].numpy())
            tok_l.append(h[:, 1:].mean(dim=1).numpy())
    cls_a, tok_a = np.concatenate(cls_l), np.concatenate(tok_l)
    cls_o = np.stack([cls_a[owner == i].mean(0) for i in range(len(runs))])
    tok_o = np.stack([tok_a[owner == i].mean(0) for i in range(len(runs))])
    return cls_o, tok_o


def embed_features(model, proj: Projector, state_dir: Path, trait_dir: Path, p: dict[str, Any], out: Path) -> dict[str, Any]:
    """Frozen features -> npz (float16): state clips (CLS, mean token, per-patch tokens averaged
    over time) and trait runs (CLS and mean token over all windows)."""
    import torch

    from paperflow.fmri.data import load_runs
    from paperflow.fmri.model import transform_clip

    T = p["clip_frames"]
    st_runs, st_ds = load_runs(state_dir, p["space"], "all")
    cls_l, tok_l, pat_l = [], [], []
    dev = _model_device(model)
    with torch.no_grad():
        for s in range(0, len(st_runs), 64):
            x = torch.from_numpy(np.stack([proj.to_patches(transform_clip(r[:T])) for r in st_runs[s:s + 64]]))
            h = model.encode(x.to(dev)).float().cpu()  # back on the CPU before numpy
            B = h.shape[0]
            toks = h[:, 1:].reshape(B, model.nt, -1, h.shape[-1])
            cls_l.append(h[:, 0].numpy())
            tok_l.append(toks.mean(dim=(1, 2)).numpy())
            pat_l.append(toks.mean(dim=1).reshape(B, -1).numpy())
    tr_runs, tr_ds = load_runs(trait_dir, p["space"], "all")
    t_cls, t_tok = embed_runs(model, proj, tr_runs, T)
    arrays = {"state_cls": np.concatenate(cls_l), "state_tok": np.concatenate(tok_l), "state_patch": np.concatenate(pat_l),
              "trait_cls": t_cls, "trait_tok": t_tok}
    with open(out, "wb") as fh:
        np.savez(fh, **{k: v.astype(np.float16) for k, v in arrays.items()},
                 state_y=np.asarray(st_ds["label"]), state_subject=np.asarray(st_ds["subject"]),
                 trait_subject=np.asarray(tr_ds["subject"]), trait_group=np.asarray(tr_ds["trait_group"]),
                 trait_age_bin=np.asarray(tr_ds["trait_age_bin"]))
    return {"n_state_clips": len(st_runs), "n_trait_runs": len(tr_runs), "dim": int(t_tok.shape[1])}
