"""Training (resumable through core.checkpoint), inference and per-question evaluation of one arm."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from paperflow.core.checkpoint import has_checkpoint, load_training_state, save_training_state
from paperflow.core.progress import progress
from paperflow.core.schedule import lambda_lr
from paperflow.core.seeding import seed_everything, stream
from paperflow.docloc.evaluate import question_metrics
from paperflow.docloc.model import GAMMA_GRID, PotentialNet, build, densities, loss

log = logging.getLogger(__name__)


def device() -> torch.device:
    """CUDA when the job was given a GPU, else CPU (float32 network, float64 densities either way)."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def tensors(feats: Mapping[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return (torch.from_numpy(feats["tokens"]).float(), torch.from_numpy(feats["line_id"].astype(np.int64)),
            torch.from_numpy(feats["evidence"].astype(np.float32)))


def train_arm(arm: str, p: Mapping[str, Any], feats: Mapping[str, np.ndarray], seed: int, ckpt_dir: Path,
              stop_after: int | None = None) -> tuple[PotentialNet | None, list[dict[str, float]]]:
    """Train `arm` for p['steps'] AdamW steps on the train features; checkpoint every p['ckpt_every']
    steps (resumed from `ckpt_dir` when one is there); returns (net, loss log).
    `stop_after` (tests only) returns (None, log) after that many steps, leaving the checkpoint."""
    seed_everything(seed)
    tokens, line_id, mask = tensors(feats)
    dev = device()
    net = build(arm, tokens.shape[-1], p).to(dev)
    n = tokens.shape[0]
    bs = min(int(p["batch_size"]), n)
    steps_per_epoch = max(1, n // bs)
    total = int(p["steps"])
    opt = torch.optim.AdamW(net.parameters(), lr=p["lr"], weight_decay=p["weight_decay"])
    sched = lambda_lr(opt, total, p["warmup"])
    start = 0
    if has_checkpoint(ckpt_dir):
        start = load_training_state(ckpt_dir, model=net, optimizer=opt, scheduler=sched)["step"]
        log.info("resumed %s at step %d of %d", arm, start, total)
    history: list[dict[str, float]] = []
    order = np.empty(0, np.int64)
    # the batch order is a function of (seed, epoch) only, so a resumed run draws the same batches
    for step in progress(range(start, total), desc=f"docloc {arm} s{seed}", total=total - start):
        epoch, j = divmod(step, steps_per_epoch)
        if j == 0 or order.size == 0:
            order = stream(seed, "epoch", epoch).permutation(n)
        idx = torch.from_numpy(order[j * bs:(j + 1) * bs])
        total_loss, logs = loss(arm, net, tokens[idx].to(dev), line_id[idx].to(dev), mask[idx].to(dev), p)
        opt.zero_grad()
        total_loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), p["grad_clip"])
        opt.step()
        sched.step()
        if step % 25 == 0 or step == total - 1:
            history.append({"step": step, "loss": float(total_loss.detach()), **logs})
            log.info("%s s%d step %d loss %.4f", arm, seed, step, float(total_loss.detach()))
        if p["ckpt_every"] and (step + 1) % int(p["ckpt_every"]) == 0 and step + 1 < total:
            save_training_state(ckpt_dir, model=net, optimizer=opt, step=step + 1, scheduler=sched)
        if stop_after is not None and step + 1 >= stop_after:
            return None, history
    return net, history


@torch.no_grad()
def infer(arm: str, net: PotentialNet, p: Mapping[str, Any], feats: Mapping[str, np.ndarray],
          gamma: float = 1.0, batch: int = 100) -> list[np.ndarray]:
    """Stage densities: a list over stages of (N, H, W) float64 arrays (PoE: coarse, fine, fused)."""
    net.eval()
    tokens, line_id, _ = tensors(feats)
    dev = next(net.parameters()).device
    chunks: list[list[torch.Tensor]] = []
    for i in range(0, tokens.shape[0], batch):
        chunks.append([r.cpu() for r in densities(arm, net, tokens[i:i + batch].to(dev),
                                                  line_id[i:i + batch].to(dev), p, gamma)])
    return [torch.cat([c[k] for c in chunks]).numpy() for k in range(len(chunks[0]))]


def evaluate_split(rhos: Sequence[np.ndarray], feats: Mapping[str, np.ndarray],
                   values: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per-question metrics from the stage densities (the last one is the prediction)."""
    out = []
    for i in range(rhos[0].shape[0]):
        m = question_metrics([r[i] for r in rhos], feats["evidence"][i], feats["bbox"][i].tolist(),
                             feats["line_id"][i], values[i]["values"], values[i]["answers"])
        out.append({"qid": int(feats["qid"][i]), **m})
    return out


def choose_gamma(net: PotentialNet, p: Mapping[str, Any], val: Mapping[str, np.ndarray],
                 val_values: Sequence[Mapping[str, Any]]) -> tuple[float, dict[str, float]]:
    """PoE fusion exponent γ chosen on the validation split (mean acc@IoU 0.5, ties → smaller γ)."""
    scores = {}
    for g in GAMMA_GRID:
        res = evaluate_split(infer("poe", net, p, val, gamma=g), val, val_values)
        scores[str(g)] = float(np.mean([r["acc50"] for r in res]))
    best = max(GAMMA_GRID, key=lambda g: (scores[str(g)], -g))
    return best, scores
