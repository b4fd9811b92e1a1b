"""MAE pretraining (accelerate; resumable from `ckpt/` — `paperflow.core.checkpoint`, safetensors + JSON;
best weights by validation loss in `best.safetensors`) and embedding extraction."""

from __future__ import annotations

import json
import logging
import shutil
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
             out_dir: Path, progress=lambda it, desc, total=None: it, stop_after: int | None = None) -> dict[str, Any]:
    """Train for p['steps'] steps. Writes into out_dir: `ckpt/` (the resume point, core.checkpoint:
    safetensors + JSON, after every evaluation), `best.safetensors` (weights with the lowest validation
    loss; the job's parameters in its metadata) and `log.jsonl`.

    A rerun resumes from `ckpt/` when it was written with the same parameters (else starts over).
    `stop_after` ends the loop after that many steps (after the checkpoint of that evaluation): a
    simulated interruption for the resume test."""
    import torch
    from accelerate import Accelerator

    from paperflow.core.checkpoint import has_checkpoint, load_training_state, save_training_state, save_weights
    from paperflow.core.io import atomic_path
    from paperflow.core.schedule import lambda_lr
    from paperflow.core.seeding import seed_everything, stream
    from paperflow.fmri.model import param_groups

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
    sched = lambda_lr(opt, steps, max(1, int(p["warmup_frac"] * steps)))
    model, opt, sched = acc.prepare(model, opt, sched)
    T = p["clip_frames"]
    # fixed validation clips and masks
    vrng = stream(p["seed"], "val")
    val_x = torch.from_numpy(sample_clips(val_runs, proj, p["val_clips"], T, vrng)) if val_runs else None
    g = torch.Generator().manual_seed(p["seed"] + 1)
    val_vis = acc.unwrap_model(model).sample_visible(p["val_clips"], g).cpu() if val_runs else None
    # best_so_far.* sits beside ckpt/ (not a rule output, so Snakemake does not delete it before a rerun
    # that resumes); it is copied to best.safetensors when the run ends.
    ckpt, best_so_far = out_dir / "ckpt", out_dir / "best_so_far.safetensors"
    meta = {"params": json.dumps(dict(p), sort_keys=True)}

    def evaluate() -> float:
        model.eval()
        with torch.no_grad():
            losses = [acc.unwrap_model(model)(val_x[i:i + 64].to(acc.device), vis=val_vis[i:i + 64].to(acc.device))[0].item()
                      * len(val_x[i:i + 64]) for i in range(0, len(val_x), 64)]
        model.train()
        return float(np.sum(losses) / len(val_x))

    start, best, history, init_val = 0, float("inf"), [], None
    resumed = False
    if has_checkpoint(ckpt):
        if _checkpoint_extra(ckpt).get("params") == meta["params"]:
            st = load_training_state(ckpt, model=acc.unwrap_model(model), optimizer=opt, scheduler=sched)
            ex = st["extra"]
            start, best, history, init_val = st["step"], ex["best"], ex["history"], ex["val_loss_init"]
            if ex.get("scaler") is not None and getattr(acc, "scaler", None) is not None:  # fp16 loss scale (CUDA)
                acc.scaler.load_state_dict(ex["scaler"])
            resumed = True
            log.info("resumed from %s at step %d", ckpt, start)
        else:  # left by a job with other parameters: not this run's resume point
            log.warning("%s was written with other parameters; starting from step 0", ckpt)
    if not resumed and val_x is not None:
        init_val = evaluate()  # the validation loss before any step (no RNG drawn: fixed clips and masks)

    def save_state(step: int) -> None:
        extra = {"params": meta["params"], "best": best, "history": history, "val_loss_init": init_val}
        if getattr(acc, "scaler", None) is not None:  # fp16 GradScaler on CUDA; absent on CPU
            extra["scaler"] = acc.scaler.state_dict()
        save_training_state(ckpt, model=acc.unwrap_model(model), optimizer=opt, scheduler=sched, step=step, extra=extra)

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
                    save_weights(best_so_far, acc.unwrap_model(model), {**meta, "step": str(done)})
            history.append(rec)
            log.info("%s", json.dumps(rec))
            save_state(done)
            if stop_after is not None and done >= stop_after:  # simulated interruption: ckpt/ is the resume point
                break
    if val_x is None or not best_so_far.exists():
        save_weights(best_so_far, acc.unwrap_model(model), {**meta, "step": str(steps)})
    with atomic_path(out_dir / "best.safetensors") as tmp:
        shutil.copyfile(best_so_far, tmp)
    with open(out_dir / "log.jsonl", "w") as fh:
        for rec in history:
            fh.write(json.dumps(rec) + "\n")
    return {"best_val_loss": best, "history": history, "initial_loss": history[0]["train_loss"] if history else None,
            "val_loss_init": init_val}


def _checkpoint_extra(ckpt: Path) -> dict[str, Any]:
    from paperflow.core.checkpoint import STATE_FILE

    return json.loads((ckpt / STATE_FILE).read_text()).get("extra", {})


def load_params(weights: Path) -> dict[str, Any]:
    """The job parameters stored in a `best.safetensors` written by :func:`pretrain`."""
    from safetensors import safe_open

    with safe_open(str(weights), framework="pt") as f:
        return json.loads(f.metadata()["params"])


def load_model(proj: Projector, ckpt: Path | None, p: dict[str, Any], device: Any = None):
    """The encoder from a checkpoint, or randomly initialized (seeded) when ckpt is None; in eval mode
    on `device` (default: CUDA when available, else the CPU). Built and loaded on the CPU first, so
    the random init is the same whichever device it ends on."""
    import torch

    from paperflow.core.accel import cuda_available
    from paperflow.core.checkpoint import load_weights
    from paperflow.core.seeding import seed_everything

    seed_everything(p["seed"])
    model = build_model(proj, p)
    if ckpt is not None:
        load_weights(ckpt, model)
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
