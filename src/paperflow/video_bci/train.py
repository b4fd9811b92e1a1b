"""Arms (a)–(h) with the grpo_lite backend (`paperflow.nn.grpo`), and the metrics every backend shares.

Arms: majority (a, no training), direct (b, no hypotheses, r_acc), racc (c), dus (d), dus_bonus (d′: DUS in bonus mode), pts (e), dus_pts (f),
resampled (g: r_acc on a 50/50 easy/hard train mix, AggLM-style), entropy_weighted (h: r_acc·(1 + λ₁Ĥ)).
Every trained arm of a seed starts from the same initial weights and (except (g)) sees the same batches.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from paperflow.core.seeding import stream
from paperflow.video_bci.data import prior_stats
from paperflow.video_bci.rewards import jaccard

TRAINED = ("direct", "racc", "dus", "dus_bonus", "pts", "dus_pts", "resampled", "entropy_weighted")
ARMS = ("majority",) + TRAINED


def metrics(ans: np.ndarray, trace: np.ndarray, d: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """Accuracy, minority recovery (majority wrong, y among the priors), absent recovery (y in no prior),
    majority retention (majority right), trace IoU with the decisive frames; per-item correctness."""
    y = d["y"].astype(int)
    correct = (np.asarray(ans) == y).astype(float)
    maj_right = d["majority"] == y
    absent = d["absent"].astype(bool)
    minority = ~maj_right & ~absent
    iou = jaccard(trace, d["decisive"])

    def sub(mask: np.ndarray) -> float:
        return float(correct[mask].mean()) if mask.any() else float("nan")

    return {"acc": float(correct.mean()), "minority_recovery": sub(minority), "absent_recovery": sub(absent),
            "majority_retention": sub(maj_right), "trace_iou": float(iou.mean()),
            "acc_easy": sub(d["hard"] == 0), "acc_hard": sub(d["hard"] == 1),
            "n": {"all": int(len(y)), "minority": int(minority.sum()), "absent": int(absent.sum()),
                  "majority_right": int(maj_right.sum())},
            "correct": correct.astype(int).tolist(), "iou": np.round(iou, 4).tolist()}


def majority_vote(d: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Arm (a): the priors' mode (ties broken at random in the data); its trace: the first prior holding it."""
    maj = d["majority"].astype(int)
    first = (d["prior_ans"] == maj[:, None]).argmax(axis=1)
    return maj, d["prior_trace"][np.arange(len(maj)), first]


def updates_to_frac(curve: list[tuple[int, float]], frac: float = 0.9) -> int:
    """First evaluated update whose validation accuracy reaches `frac` × the final one."""
    final = curve[-1][1]
    return int(next(step for step, acc in curve if acc >= frac * final))


def _item(d: Mapping[str, np.ndarray], st: Mapping[str, np.ndarray], idx: np.ndarray) -> dict[str, np.ndarray]:
    return {"y": d["y"][idx].astype(int), "p_hat": st["p_hat"][idx], "H_hat": st["H_hat"][idx],
            "majority": st["majority"][idx], "prior_ans": d["prior_ans"][idx].astype(int),
            "prior_trace": d["prior_trace"][idx]}


def train_arm(arm: str, train: Mapping[str, np.ndarray], val: Mapping[str, np.ndarray], p: Mapping[str, Any],
              seed: int, ckpt: Path | None = None,
              stop_after: int | None = None) -> tuple[Any, list[tuple[int, float]], dict[str, Any]]:
    """grpo_lite on one arm; returns the net, the validation curve [(update, acc)] and timing.

    With `ckpt`, the training state (weights, Adam, the sampling generator, the batch streams, the curve) is
    saved every `ckpt_every` updates through core.checkpoint and a rerun resumes from it; `stop_after` ends
    the loop early after saving (tests: an interrupted run)."""
    import torch

    from paperflow.core.checkpoint import has_checkpoint, load_training_state, save_training_state

    from paperflow.nn.grpo import group_advantages, grpo_loss
    from paperflow.video_bci.model import Integrator, predict, sample, token_logps, tokens
    from paperflow.video_bci.rewards import utility

    with_hyps = arm != "direct"
    T = train["frames"].shape[1]
    torch.manual_seed(seed)  # the same initial weights for every arm of a seed (paired)
    net = Integrator(T, p)
    opt = torch.optim.Adam(net.parameters(), lr=float(p["lr"]))
    gen = torch.Generator().manual_seed(seed)
    st = prior_stats(train)
    n = len(train["y"])
    hard = np.flatnonzero(train["hard"] == 1)
    easy = np.flatnonzero(train["hard"] == 0)
    batch_rng = stream(seed, "batches")
    mix_rng = stream(seed, "resampled")
    G, B, updates, every = int(p["group_size"]), int(p["items_per_update"]), int(p["updates"]), int(p["eval_every"])
    curve: list[tuple[int, float]] = []
    start = 1
    if ckpt is not None and has_checkpoint(ckpt):
        state = load_training_state(ckpt, model=net, optimizer=opt, np_rng=batch_rng)
        ex = state["extra"]
        mix_rng.bit_generator.state = ex["mix_rng"]
        gen.set_state(torch.tensor(ex["gen"], dtype=torch.uint8))
        curve = [(int(a), float(b)) for a, b in ex["curve"]]
        start = int(state["step"]) + 1
    every_ckpt = int(p.get("ckpt_every", 0))
    t0 = time.perf_counter()
    for step in range(start, updates + 1):
        idx = batch_rng.integers(0, n, size=B)
        if arm == "resampled":  # AggLM-style: a balanced easy/hard mix (same batch size)
            is_hard = mix_rng.random(B) < float(p["resample_hard_frac"])
            idx = np.where(is_hard, hard[mix_rng.integers(0, len(hard), B)], easy[mix_rng.integers(0, len(easy), B)])
        ans_logits, tr_logits = net(tokens(train, idx, with_hyps))
        ans, trace = sample(ans_logits.detach(), tr_logits.detach(), G, gen)
        u = utility("racc" if arm == "direct" else arm, ans.numpy(), trace.numpy(), _item(train, st, idx), p)
        adv = group_advantages(torch.as_tensor(u, dtype=torch.float32)).reshape(-1)
        lp = token_logps(ans_logits, tr_logits, ans, trace)
        loss = grpo_loss(lp, lp.detach(), adv, clip_eps=float(p["clip_eps"]))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), float(p["grad_clip"]))
        opt.step()
        if step % every == 0 or step == updates:
            a, _ = predict(net, val, with_hyps)
            curve.append((step, float((a == val["y"]).mean())))
        if ckpt is not None and ((every_ckpt and step % every_ckpt == 0) or step == stop_after):
            save_training_state(ckpt, model=net, optimizer=opt, step=step, np_rng=batch_rng,
                                extra={"mix_rng": mix_rng.bit_generator.state, "gen": gen.get_state().tolist(),
                                       "curve": curve})
        if stop_after is not None and step >= stop_after:
            break
    return net, curve, {"train_seconds": time.perf_counter() - t0,
                        "update_seconds": (time.perf_counter() - t0) / updates}


def run_arms(arms: list[str], p: Mapping[str, Any], splits: Mapping[str, Mapping[str, np.ndarray]],
             seed: int, ckpt: Path | None = None) -> dict[str, Any]:
    """Train (grpo_lite) and evaluate each arm on the test split; per-arm metrics and curves.

    With `ckpt` (a directory), a finished arm's result is kept as `<ckpt>/<arm>.json` and an unfinished arm's
    training state under `<ckpt>/<arm>/`, so a rerun of an interrupted job redoes neither."""
    from paperflow.core.checkpoint import finished_unit, keep_unit, stamp_job_dir
    from paperflow.video_bci.model import predict

    out: dict[str, Any] = {}
    test = splits["test"]
    if ckpt is not None:  # state left by a run with other parameters is never resumed
        stamp_job_dir(ckpt, {"params": dict(p), "seed": int(seed)})
    for arm in arms:
        kept = finished_unit(ckpt, arm)
        if kept is not None:
            out[arm] = kept
            continue
        if arm == "majority":
            a, tr = majority_vote(test)
            out[arm] = {**metrics(a, tr, test), "curve": [], "updates_to_90": 0, "train_seconds": 0.0}
            continue
        net, curve, timing = train_arm(arm, splits["train"], splits["val"], p, seed,
                                       ckpt / arm if ckpt is not None else None)
        a, tr = predict(net, test, arm != "direct")
        out[arm] = {**metrics(a, tr, test), "curve": curve, "updates_to_90": updates_to_frac(curve),
                    "final_val_acc": curve[-1][1], **timing}
        keep_unit(ckpt, arm, out[arm])
    return out
