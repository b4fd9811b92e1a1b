"""LAM training (MVP-LAM or single-view baseline) on the extracted dataset.

Frozen stem features are computed once for every frame; each step samples clips, computes the
`lam_loss` of the chosen mode, and updates with AdamW through accelerate. Batch indices depend on
(seed, step) only; the resumable state (model, optimizer, scheduler, torch RNG, the dead-code-reset
generator and the log rows) is written with `paperflow.core.checkpoint` (safetensors + JSON) to
`resume_dir` every `ckpt_every` steps, so a resumed run ends with the same weights as an uninterrupted
one (tests/robotics/test_resume.py). Final weights: `model.safetensors`.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from paperflow.core.progress import progress
from paperflow.core.seeding import seed_everything, stream

log = logging.getLogger(__name__)

MODES = {"mvp": ("mvp", [0, 1]), "single": ("single", [0, 1]), "single0": ("single", [0])}


def model_config(p: dict[str, Any]) -> Any:
    from paperflow.robotics.model import LAMConfig

    return LAMConfig(**p["lam"])


def features(model: Any, images: np.ndarray, batch: int = 256) -> Any:
    """Frozen stem features of (F, V, S, S, 3) uint8 frames -> (F, V, P, C) float32 tensor."""
    import torch

    F_, V = images.shape[:2]
    out = []
    with torch.no_grad():
        flat = torch.from_numpy(images.reshape(F_ * V, *images.shape[2:]))
        for i in range(0, len(flat), batch):
            out.append(model.stem(flat[i:i + batch]))
    x = torch.cat(out) if out else torch.zeros(0, model.cfg.grid**2, model.cfg.feat_channels)
    return x.view(F_, V, *x.shape[1:])


def train_lam(mv_dir: str | Path, out: str | Path, p: dict[str, Any], seed: int, *,
              resume_dir: str | Path | None = None, stop_after: int | None = None) -> dict[str, Any] | None:
    """Train one LAM into `out` (model.safetensors, config.json, log.csv). With `resume_dir`, resume
    from a checkpoint there and write one every `ckpt_every` steps; `stop_after`: checkpoint after
    that many steps and return None (nothing written to `out`)."""
    import torch

    from paperflow.core.checkpoint import has_checkpoint, load_training_state, save_training_state, save_weights
    from paperflow.core.config import config_hash
    from paperflow.core.io import file_digest
    from paperflow.robotics.data import clips, load_episodes
    from paperflow.robotics.model import LAM, lam_loss

    seed_everything(seed)
    mode, slots = MODES[p["model"]]
    cfg = model_config(p)
    model = LAM(cfg)
    tr = load_episodes(mv_dir, "train", slots)
    va = load_episodes(mv_dir, "val", slots)
    k = p["frame_gap"]
    ctr, cva = clips(tr, k), clips(va, k)
    if len(ctr["i0"]) == 0:
        raise RuntimeError(f"no training clips in {mv_dir} (frame_gap {k})")
    ftr, fva = features(model, tr.images), features(model, va.images)
    log.info("train clips %d, val clips %d, features %s", len(ctr["i0"]), len(cva["i0"]), tuple(ftr.shape))
    opt = torch.optim.AdamW([q for q in model.parameters() if q.requires_grad], lr=p["lr"],
                            weight_decay=p["weight_decay"], betas=(0.9, 0.999))
    from paperflow.core.accel import make_accelerator

    acc = make_accelerator()
    model, opt = acc.prepare(model, opt)
    ftr, fva = ftr.to(acc.device), fva.to(acc.device)
    from paperflow.core.schedule import lambda_lr

    steps, bs, warm = p["steps"], p["batch_size"], max(1, int(0.05 * p["steps"]))
    # linear warm-up over `warm` steps, then cosine to 0 (core.schedule.warmup_cosine)
    sched = lambda_lr(opt, steps, warm)
    gen = torch.Generator().manual_seed(seed)
    rows: list[dict[str, Any]] = []
    start = 0
    # the job a checkpoint belongs to: parameters, seed and the data (its train statistics' digest)
    job = config_hash({"params": dict(p), "seed": seed, "data": file_digest(Path(mv_dir) / "stats.json")})
    if resume_dir is not None and has_checkpoint(resume_dir):
        if _checkpoint_job(resume_dir) != job:  # another job's state (parameters, seed or data changed)
            log.warning("ignoring the checkpoint in %s: written by a job with other parameters", resume_dir)
            shutil.rmtree(resume_dir, ignore_errors=True)
        else:
            st = load_training_state(resume_dir, model=acc.unwrap_model(model), optimizer=opt, scheduler=sched)
            start = st["step"]
            rows = list(st["extra"]["rows"])
            gen.set_state(torch.tensor(st["extra"]["gen_state"], dtype=torch.uint8))
            log.info("resumed from step %d (%s)", start, resume_dir)

    def checkpoint(step_done: int) -> None:
        save_training_state(resume_dir, model=acc.unwrap_model(model), optimizer=opt, scheduler=sched,  # type: ignore[arg-type]
                            step=step_done, extra={"rows": rows, "gen_state": gen.get_state().tolist(), "job": job})

    model.train()
    for step in progress(range(start, steps), desc=f"lam {p['model']} seed {seed}", total=steps - start):
        idx = stream(seed, "batch", step).integers(0, len(ctr["i0"]), bs)
        f0, f1 = ftr[ctr["i0"][idx]], ftr[ctr["i1"][idx]]
        mask = torch.from_numpy(ctr["mask"][idx].astype(np.float32)).to(acc.device)
        with acc.autocast():
            loss, logs = lam_loss(model, f0, f1, mask, mode)
        opt.zero_grad()
        acc.backward(loss)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if (step + 1) % p["reset_every"] == 0:
            logs["dead_codes_reset"] = acc.unwrap_model(model).vq.reset_dead(gen)
        if step % p["log_every"] == 0 or step == steps - 1:
            rows.append({"step": step, **logs})
            log.info("step %d %s", step, json.dumps(logs))
        if resume_dir is not None and step + 1 < steps:
            if stop_after is not None and step + 1 >= stop_after:
                checkpoint(step + 1)
                return None
            if p["ckpt_every"] and (step + 1) % p["ckpt_every"] == 0:
                checkpoint(step + 1)
    model = acc.unwrap_model(model).cpu().float()
    model.eval()
    val = evaluate_loss(model, fva.cpu(), cva, mode, bs)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    save_weights(out / "model.safetensors", model)
    (out / "config.json").write_text(json.dumps({"lam": cfg.to_dict(), "mode": mode, "slots": slots,
                                                 "model": p["model"], "frame_gap": k}, indent=1))
    keys = sorted({k_ for r in rows for k_ in r})
    lines = [",".join(keys)] + [",".join(str(r.get(k_, "")) for k_ in keys) for r in rows]
    (out / "log.csv").write_text("\n".join(lines) + "\n")
    if resume_dir is not None:
        shutil.rmtree(resume_dir, ignore_errors=True)
    return {"final_train_loss": rows[-1]["loss"] if rows else float("nan"), **{f"val_{k_}": v for k_, v in val.items()},
            "train_clips": int(len(ctr["i0"])), "steps": steps}


def _checkpoint_job(ckpt_dir: str | Path) -> str | None:
    from paperflow.core.checkpoint import STATE_FILE

    return json.loads((Path(ckpt_dir) / STATE_FILE).read_text()).get("extra", {}).get("job")


def evaluate_loss(model: Any, feats: Any, c: dict[str, np.ndarray], mode: str, bs: int) -> dict[str, float]:
    import torch

    from paperflow.robotics.model import lam_loss

    if len(c["i0"]) == 0:
        return {"loss": float("nan")}
    tot: dict[str, float] = {}
    n = 0
    with torch.no_grad():
        for i in range(0, len(c["i0"]), bs):
            sl = slice(i, i + bs)
            mask = torch.from_numpy(c["mask"][sl].astype(np.float32))
            _, logs = lam_loss(model, feats[c["i0"][sl]], feats[c["i1"][sl]], mask, mode)
            m = len(c["i0"][sl])
            for k_, v in logs.items():
                tot[k_] = tot.get(k_, 0.0) + v * m
            n += m
    return {k_: v / n for k_, v in tot.items()}


def load_lam(model_dir: str | Path) -> tuple[Any, dict[str, Any]]:
    from paperflow.core.checkpoint import load_weights
    from paperflow.robotics.model import LAM, LAMConfig

    meta = json.loads((Path(model_dir) / "config.json").read_text())
    model = LAM(LAMConfig(**meta["lam"]))
    load_weights(Path(model_dir) / "model.safetensors", model)
    model.eval()
    return model, meta
