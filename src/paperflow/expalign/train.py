"""Training of one arm x seed: every image is scored against the whole phrase vocabulary (P prompts);
loss = lambda_mp * top-K multi-positive (or mean-pooled, arm E) + lambda_box * box in/out (arm F)
+ lambda_geo * GACO (arm D). Labels used: image-level phrases (all arms), boxes (F), masks (D).

Resumable: the loop is the shared `paperflow.nn.vision.fit`; every `ckpt_every` steps it saves the state
(model, optimizer, scheduler, torch RNG, loss history) with `paperflow.core.checkpoint`; a rerun resumes and
ends with the same weights as an uninterrupted run (tests/expalign/test_train.py). The batch of step t is
drawn from `core.seeding.stream(seed, "batches", t)`: the same batches for every arm, so arms are paired by
seed, and a resumed run needs no sampler state.
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
    """Returns (model, log); (None, log) when `stop_after` steps ran (the checkpoint holds the state).
    The loop is the shared `paperflow.nn.vision.fit` (AdamW, warm-up + cosine, core.checkpoint)."""
    from paperflow.core.seeding import seed_everything, stream
    from paperflow.nn.vision import fit

    arm, tr = params["arm"], params["train"]
    seed = int(params["seed"])
    seed_everything(seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")  # paper scale: one GPU per job
    txt = {k: v.to(device) for k, v in text_tensors(text).items()}
    model = build_model(params, txt["tokens"].shape[-1]).to(device)
    steps = int(tr["steps"])
    images = torch.from_numpy(split.images)
    pos = torch.from_numpy(split.pos)
    valid = pos | torch.from_numpy(split.neg)
    P = pos.shape[1]
    S_img = split.images.shape[1]
    with torch.no_grad():  # the encoder's grid (eval mode: BN statistics untouched)
        H, W = model.eval()(images[:1].to(device), txt).shape[-2:]
    M_all = object_cells(split, P, H, W) if arm["gaco"] else None
    inst_image = torch.from_numpy(split.inst_image)
    inst_cat = torch.from_numpy(split.inst_cat)
    inst_box = torch.from_numpy(split.inst_box)
    N = len(images)
    bs = min(int(tr["batch_size"]), N)
    hist: list[dict[str, float]] = []
    every = max(1, steps // 10)

    def loss_fn(step: int) -> torch.Tensor:
        idx = torch.from_numpy(stream(seed, "batches", step).choice(N, size=bs, replace=False))
        S = model(images[idx].to(device), txt)
        l_mp = losses.topk_multi_positive(S, pos[idx].to(device), valid[idx].to(device), rho=float(arm["rho"]),
                                          temperature=float(tr["temperature"]), pooling=arm["pooling"])
        loss = float(tr["lambda_mp"]) * l_mp
        parts = {"mp": l_mp.item()}
        if arm["box"]:
            row = torch.full((N,), -1, dtype=torch.long)
            row[idx] = torch.arange(len(idx))
            sel = row[inst_image] >= 0
            l_box = losses.box_in_out(S, row[inst_image[sel]].to(device), inst_cat[sel].to(device),
                                      inst_box[sel].to(device), image_size=S_img,
                                      margin=float(tr["box_margin"]))
            loss = loss + float(tr["lambda_box"]) * l_box
            parts["box"] = l_box.item()
        if arm["gaco"]:
            assert M_all is not None
            l_geo = losses.gaco(S, M_all[idx].to(device), clip=float(tr["adv_clip"]),
                                detach_advantage=bool(arm["detach_advantage"]))
            loss = loss + float(tr["lambda_geo"]) * l_geo
            parts["geo"] = l_geo.item()
        if (step + 1) % every == 0:
            hist.append({"step": step + 1, "loss": loss.item(), **parts})
        return loss

    t0 = time.time()
    res = fit(model, loss_fn, steps=steps, lr=float(tr["lr"]), weight_decay=float(tr["weight_decay"]),
              warmup=float(tr["warmup"]), grad_clip=float(tr["grad_clip"]) or None, ckpt_dir=ckpt_dir,
              ckpt_every=int(tr["ckpt_every"]), stop_after=stop_after, log=log.info, log_every=every)
    info = {"hist": hist, "losses_every": res.losses[every - 1::every], "steps": res.step,
            "resumed_from": res.resumed_from, "train_s": time.time() - t0}
    if res.step < steps:
        return None, info
    model.eval()
    return model.cpu(), info
