"""Training of one arm x seed: every image is scored against the whole phrase vocabulary (P prompts);
loss = lambda_mp * top-K multi-positive (or mean-pooled, arm E) + lambda_box * box in/out (arm F)
+ lambda_geo * GACO (arm D). Labels used: image-level phrases (all arms), boxes (F), masks (D).

Resumable: every `ckpt_every` steps the state (model, optimizer, torch + numpy RNGs, step) is saved with
`paperflow.core.checkpoint`; a rerun resumes from it and ends with the same weights as an uninterrupted
run (tests/expalign/test_train.py). Batches are drawn from `core.seeding.stream(seed, "batches")`, the same
stream for every arm, so arms are paired by seed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from paperflow.expalign import losses
from paperflow.expalign.data import Split
from paperflow.expalign.model import GroundingNet

log = logging.getLogger("paperflow.expalign.train")


def text_tensors(t: Mapping[str, np.ndarray]) -> dict[str, torch.Tensor]:
    return {"tokens": torch.from_numpy(np.ascontiguousarray(t["tokens"])),
            "mask": torch.from_numpy(np.ascontiguousarray(t["mask"])).bool(),
            "sentence": torch.from_numpy(np.ascontiguousarray(t["sentence"]))}


def build_model(params: Mapping[str, Any], text_dim: int) -> GroundingNet:
    return GroundingNet(params["model"], params["arm"]["head"], text_dim)


def object_cells(split: Split, P: int, H: int, W: int) -> torch.Tensor:
    """[N, P, H, W] bool: grid cells of every positive prompt's objects (GACO's M)."""
    g = losses.grid_masks(torch.from_numpy(split.inst_mask), H, W)
    M = torch.zeros(len(split.images), P, H, W, dtype=torch.bool)
    if len(g):
        M[torch.from_numpy(split.inst_image), torch.from_numpy(split.inst_cat)] |= g
    return M


def train(params: Mapping[str, Any], split: Split, text: Mapping[str, np.ndarray], *, ckpt_dir: Path | None,
          stop_after: int | None = None) -> tuple[GroundingNet | None, dict[str, Any]]:
    """Returns (model, log); (None, log) when `stop_after` steps ran (the checkpoint holds the state)."""
    from paperflow.core.checkpoint import has_checkpoint, load_training_state, save_training_state
    from paperflow.core.seeding import seed_everything, stream

    arm, tr = params["arm"], params["train"]
    seed = int(params["seed"])
    seed_everything(seed)
    txt = text_tensors(text)
    model = build_model(params, txt["tokens"].shape[-1])
    opt = torch.optim.AdamW(model.parameters(), lr=float(tr["lr"]), weight_decay=float(tr["weight_decay"]))
    steps = int(tr["steps"])
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / max(1, int(tr["warmup"]))) * 0.5 * (1 + np.cos(np.pi * min(s, steps) / steps)))
    rng = stream(seed, "batches")
    start = 0
    hist: list[dict[str, float]] = []
    if ckpt_dir is not None and has_checkpoint(ckpt_dir):
        st = load_training_state(ckpt_dir, model=model, optimizer=opt, scheduler=sched, np_rng=rng)
        start, hist = st["step"], list(st["extra"].get("hist", []))
        log.info("resumed at step %d from %s", start, ckpt_dir)
    images = torch.from_numpy(split.images)
    pos = torch.from_numpy(split.pos)
    valid = pos | torch.from_numpy(split.neg)
    P = pos.shape[1]
    S_img = split.images.shape[1]
    H = W = int(params["model"]["grid"])
    M_all = object_cells(split, P, H, W) if arm["gaco"] else None
    inst_image = torch.from_numpy(split.inst_image)
    inst_cat = torch.from_numpy(split.inst_cat)
    inst_box = torch.from_numpy(split.inst_box)
    N = len(images)
    bs = int(tr["batch_size"])
    t0 = time.time()
    model.train()
    for step in range(start, steps):
        idx = torch.from_numpy(rng.choice(N, size=min(bs, N), replace=False))
        S = model(images[idx], txt)
        l_mp = losses.topk_multi_positive(S, pos[idx], valid[idx], rho=float(arm["rho"]),
                                          temperature=float(tr["temperature"]), pooling=arm["pooling"])
        loss = float(tr["lambda_mp"]) * l_mp
        parts = {"mp": l_mp.item()}
        if arm["box"]:
            row = torch.full((N,), -1, dtype=torch.long)
            row[idx] = torch.arange(len(idx))
            sel = row[inst_image] >= 0
            l_box = losses.box_in_out(S, row[inst_image[sel]], inst_cat[sel], inst_box[sel], image_size=S_img,
                                      margin=float(tr["box_margin"]))
            loss = loss + float(tr["lambda_box"]) * l_box
            parts["box"] = l_box.item()
        if arm["gaco"]:
            assert M_all is not None
            l_geo = losses.gaco(S, M_all[idx], clip=float(tr["adv_clip"]), detach_advantage=bool(arm["detach_advantage"]))
            loss = loss + float(tr["lambda_geo"]) * l_geo
            parts["geo"] = l_geo.item()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if tr["grad_clip"]:
            torch.nn.utils.clip_grad_norm_(model.parameters(), float(tr["grad_clip"]))
        opt.step()
        sched.step()
        done = step + 1
        if done % max(1, steps // 10) == 0 or done == steps:
            hist.append({"step": done, "loss": loss.item(), **parts})
            log.info("step %d/%d loss %.4f %s", done, steps, loss.item(), parts)
        if ckpt_dir is not None and done < steps and (done % int(tr["ckpt_every"]) == 0 or done == stop_after):
            save_training_state(ckpt_dir, model=model, optimizer=opt, step=done, scheduler=sched, np_rng=rng,
                                extra={"hist": hist})
        if stop_after is not None and done >= stop_after and done < steps:
            return None, {"stopped_at": done, "hist": hist}
    model.eval()
    return model, {"hist": hist, "train_s": time.time() - t0, "steps": steps}
