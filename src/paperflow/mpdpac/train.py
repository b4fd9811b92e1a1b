"""Masked-diffusion training of the tiny backbone (LLaDA SFT-style loss).

Per sequence t ~ U(0, 1), p = (1 − ε)t + ε; every answer token (EOS padding included) is replaced by MASK
with probability p; the loss is the cross-entropy on masked answer tokens weighted by 1/p, summed and
divided by the answer length, averaged over the batch. The visual prefix and SEP are never masked.
Resumable: the whole state is saved every `ckpt_every` steps with `core.checkpoint`; a rerun continues
from it and ends with the same weights as an uninterrupted run (tests/mpdpac/test_train.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger("paperflow.mpdpac.train")
EPS = 1e-3


def draw_t(B: int, gen: Any, sampler: str = "uniform") -> Any:
    """B masking ratios in [0, 1): i.i.d. uniform, or stratified (one uniform offset, then t_i = (u + i/B) mod 1:
    exactly one t in each interval [k/B, (k+1)/B), each t still marginally U(0, 1))."""
    import torch

    if sampler == "stratified":
        return (torch.rand(1, generator=gen) + torch.arange(B) / B) % 1.0
    if sampler == "uniform":
        return torch.rand(B, generator=gen)
    raise ValueError(f"unknown t_sampler {sampler!r} (uniform, stratified)")


def batch_indices(step: int, bs: int, n: int, easy: np.ndarray, curriculum_steps: int,
                  rng: np.random.Generator) -> np.ndarray:
    """Training scenes for one step: before `curriculum_steps`, drawn only from `easy` (the scenes with few
    objects); afterwards from all n. With curriculum_steps 0 this is the plain uniform draw."""
    if step < curriculum_steps and len(easy):
        return easy[rng.integers(0, len(easy), size=bs)]
    return rng.integers(0, n, size=bs)


def mdm_loss(model: Any, visual: Any, answer: Any, length: Any, special: Mapping[str, int], gen: Any,
             eos_weight: float = 1.0, t_sampler: str = "uniform") -> Any:
    """One batch's masked-diffusion loss. answer: [B, Lmax] (EOS beyond `length`), length: [B].
    eos_weight: weight of the EOS (padding) targets' terms, 1 = the LLaDA SFT form; below 1 keeps the
    padding from dominating the loss (issue 17: with 1 the tiny backbone never learns to read the image).
    t_sampler: "uniform" draws t i.i.d. per sequence; "stratified" draws one offset and spreads the batch's t
    evenly over (0, 1) (t_i = (u + i/B) mod 1, the low-discrepancy sampler of MDLM): each t is still U(0, 1),
    so the 1/p-weighted objective is unchanged, only its batch variance is lower."""
    import torch
    import torch.nn.functional as F

    B, Lmax = answer.shape
    Lb = int(length.max())
    ans = answer[:, :Lb]
    inside = torch.arange(Lb)[None, :] < length[:, None]
    t = draw_t(B, gen, t_sampler)
    p = (1 - EPS) * t + EPS
    m = (torch.rand(B, Lb, generator=gen) < p[:, None]) & inside
    noisy = torch.where(m, special["mask"], ans)
    sep = torch.full((B, 1), special["sep"], dtype=torch.long)
    dev = next(model.parameters()).device
    ids = torch.cat([visual, sep, noisy], dim=1).to(dev)
    ans, m, p, length = ans.to(dev), m.to(dev), p.to(dev), length.to(dev)
    logits = model(ids)[:, visual.shape[1] + 1:]
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ans.reshape(-1), reduction="none").view(B, Lb)
    w = torch.where(ans == special["eos"], float(eos_weight), 1.0)
    per_seq = (ce * w * m / p[:, None]).sum(dim=1) / length.float()
    return per_seq.mean()


def train_model(p: Mapping[str, Any], data_path: str | Path, out: str | Path, ckpt_dir: str | Path | None = None,
                stop_after: int | None = None, on_step: Callable[[int, Any], None] | None = None
                ) -> dict[str, Any] | None:
    """Train; write final weights to `out` (safetensors). Returns metrics (None when stopped by
    `stop_after`: the job then ends after its checkpoint, as a killed job would, and writes no weights).
    on_step(done, model), when given, runs after every optimiser step (bench/mpdpac_grounding.py scores the
    validation split there; it must leave the model in training mode and draw from no training RNG)."""
    import torch

    from paperflow.core.checkpoint import has_checkpoint, load_training_state, save_training_state, save_weights
    from paperflow.core.schedule import lambda_lr
    from paperflow.core.seeding import seed_everything
    from paperflow.mpdpac.data import load_scenes
    from paperflow.mpdpac.model import TinyMDM, model_config

    seed = int(p["seed"])
    seed_everything(seed)
    tr = load_scenes(data_path, "train")
    special = tr.meta["special"]
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")  # fp32 on either (tiny models)
    model = TinyMDM(model_config(len(tr.vocab), p["model"])).to(dev)
    steps, bs = int(p["steps"]), int(p["batch_size"])
    opt = torch.optim.AdamW(model.parameters(), lr=float(p["lr"]), weight_decay=float(p["weight_decay"]),
                            betas=(0.9, 0.98))
    # lr_floor 0: cosine decay to 0 after the warm-up; 1: constant lr after the warm-up (the tiny tier)
    sched = lambda_lr(opt, steps, float(p["warmup"]), float(p.get("lr_floor", 0.0)))
    gen = torch.Generator().manual_seed(seed)
    np_rng = np.random.default_rng(seed)
    start, losses = 0, []
    if ckpt_dir is not None and has_checkpoint(ckpt_dir):
        st = load_training_state(ckpt_dir, model=model, optimizer=opt, scheduler=sched, np_rng=np_rng)
        start, losses = st["step"], list(st["extra"]["losses"])
        gen.set_state(torch.tensor(st["extra"]["gen_state"], dtype=torch.uint8))
        log.info("resumed from %s at step %d", ckpt_dir, start)
    visual = torch.from_numpy(tr.visual)
    answer = torch.from_numpy(tr.answer)
    length = torch.from_numpy(tr.length)
    cur_steps = int(p.get("curriculum_steps") or 0)  # first steps: only scenes with ≤ curriculum_objects objects
    easy = np.flatnonzero(tr.n_objects <= int(p.get("curriculum_objects") or 2))
    every = int(p["ckpt_every"])
    t0 = time.perf_counter()
    model.train()
    for step in range(start, steps):
        idx = torch.from_numpy(batch_indices(step, bs, len(tr), easy, cur_steps, np_rng))
        loss = mdm_loss(model, visual[idx], answer[idx], length[idx], special, gen, float(p["eos_weight"]),
                        str(p.get("t_sampler", "uniform")))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), float(p["grad_clip"]))
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        if on_step is not None:
            on_step(step + 1, model)
        if (step + 1) % max(1, steps // 10) == 0:
            log.info("step %d/%d loss %.4f (%.1fs)", step + 1, steps, float(np.mean(losses[-20:])),
                     time.perf_counter() - t0)
        done = step + 1
        if ckpt_dir is not None and (done % every == 0 or (stop_after is not None and done == stop_after)):
            save_training_state(ckpt_dir, model=model, optimizer=opt, step=done, scheduler=sched, np_rng=np_rng,
                                extra={"losses": losses, "gen_state": gen.get_state().tolist()})
        if stop_after is not None and done >= stop_after and done < steps:
            return None
    save_weights(out, model, metadata={"vocab_size": str(len(tr.vocab))})
    tail = losses[-max(1, len(losses) // 10):]
    return {"final_loss": float(np.mean(tail)), "steps": steps, "train_s": time.perf_counter() - t0,
            "loss_curve": [float(np.mean(losses[i:i + 20])) for i in range(0, len(losses), 20)]}


def load_model(p: Mapping[str, Any], weights: str | Path, vocab_size: int) -> Any:
    from paperflow.core.checkpoint import load_weights
    from paperflow.mpdpac.model import TinyMDM, model_config

    import torch

    model = TinyMDM(model_config(vocab_size, p))
    load_weights(weights, model)
    model.to("cuda" if torch.cuda.is_available() else "cpu")
    model.eval()
    return model
