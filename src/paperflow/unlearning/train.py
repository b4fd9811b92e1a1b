"""Training loops: fine-tuning (original / retrain), greedy-calibrated unlearning, greedy checks.

All loops go through accelerate (device chosen by it: CUDA when visible, else CPU) and draw batches
from named numpy streams, so the same config + seed gives the same checkpoints on CPU. Batches,
greedy checks (sampling.py) and a method's frozen reference model follow the policy model's device;
the CUDA path is written for but not exercised by the tests here (CPU only).
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from paperflow.core.progress import progress
from paperflow.unlearning.judge import make_judge, rougeL_recall
from paperflow.unlearning.model import collate, encode_pair, encode_prompt, mean_ce, model_device, to_device
from paperflow.unlearning.sampling import GREEDY, sample_shared_prefix

log = logging.getLogger(__name__)


def _accelerator():
    from accelerate import Accelerator

    return Accelerator()


def greedy_answers(model, tok, questions: Sequence[str], max_new_tokens: int, batch: int = 32) -> list[str]:
    prompts = [encode_prompt(tok, q) for q in questions]
    outs = sample_shared_prefix(model, prompts, 1, GREEDY, max_new_tokens, tok.eos_token_id, tok.pad_token_id,
                                seed=0, prompts_per_batch=batch)
    return [tok.decode(o[0], skip_special_tokens=True) for o in outs]


def greedy_metrics(model, tok, rows: Sequence[dict], max_new_tokens: int, judge_name: str,
                   judge_kw: dict) -> dict[str, float]:
    """Greedy answer accuracy (the judge's label) and mean ROUGE-L recall on `question` prompts."""
    if not rows:
        return {"acc": float("nan"), "rougeL_recall": float("nan"), "n": 0}
    judge = make_judge(judge_name, **judge_kw)
    answers = greedy_answers(model, tok, [r["question"] for r in rows], max_new_tokens)
    labels = [judge(a, r)[0] for a, r in zip(answers, rows)]
    rouge = [rougeL_recall(a, r["answer"]) for a, r in zip(answers, rows)]
    return {"acc": float(np.mean(labels)), "rougeL_recall": float(np.mean(rouge)), "n": len(rows)}


def _resume(ckpt_dir, key: str, **state) -> dict | None:
    """Restore a checkpoint written for the same job (`key` = the job's parameter hash), else None."""
    from paperflow.core.checkpoint import has_checkpoint, load_training_state

    if ckpt_dir is None or not has_checkpoint(ckpt_dir):
        return None
    import json as _json

    meta = _json.loads((Path(ckpt_dir) / "state.json").read_text())
    if meta.get("extra", {}).get("job") != key:
        log.warning("ignoring checkpoint %s: written for other parameters", ckpt_dir)
        return None
    got = load_training_state(ckpt_dir, **state)
    log.info("resumed from %s at step %d", ckpt_dir, got["step"])
    return got


def finetune(model, tok, rows: Sequence[dict], p: dict[str, Any], rng: np.random.Generator, *,
             ckpt_dir: str | Path | None = None, key: str = "", stop_after: int | None = None) -> list[dict] | None:
    """AdamW on answer-token CE, warm-up 5 % then cosine to 10 % of lr (`core.schedule.warmup_cosine`).

    With `ckpt_dir`, a resumable checkpoint (`core.checkpoint`: weights, optimizer, scheduler, numpy
    stream, log) is written every `p['checkpoint_every']` steps and a rerun resumes from it; a resumed
    run ends with the same weights as an uninterrupted one. `stop_after` (tests: a simulated kill)
    checkpoints after that many steps and returns None. Returns the per-step log."""
    import torch

    from paperflow.core.checkpoint import save_training_state
    from paperflow.core.schedule import lambda_lr

    steps = p["steps"]
    opt = torch.optim.AdamW(model.parameters(), lr=p["lr"], weight_decay=p["weight_decay"])
    sched = lambda_lr(opt, steps, max(1, int(0.05 * steps)), floor=0.1)
    logs: list[dict] = []
    start = 0
    got = _resume(ckpt_dir, key, model=model, optimizer=opt, scheduler=sched, np_rng=rng)
    if got is not None:
        start, logs = got["step"], got["extra"]["log"]
    acc = _accelerator()
    model, opt = acc.prepare(model, opt)
    items = [encode_pair(tok, r["question"], r["answer"]) for r in rows]
    every = int(p.get("checkpoint_every") or 0)

    def save(step: int) -> None:
        if ckpt_dir is not None:
            save_training_state(ckpt_dir, model=model, optimizer=opt, step=step, scheduler=sched, np_rng=rng,
                                extra={"job": key, "log": logs})

    model.train()
    for step in progress(range(start, steps), "finetune"):
        idx = rng.choice(len(items), size=min(p["batch_size"], len(items)), replace=False)
        batch = to_device(collate([items[i] for i in idx], tok.pad_token_id), model_device(model))
        loss = mean_ce(model, batch)
        opt.zero_grad()
        acc.backward(loss)
        opt.step()
        sched.step()
        if step % 50 == 0 or step == steps - 1:
            logs.append({"step": step, "loss": float(loss.detach())})
            log.info("step %d loss %.4f", step, float(loss.detach()))
        done = step + 1
        if stop_after is not None and done - start >= stop_after and done < steps:
            save(done)
            model.eval()
            return None
        if every and done % every == 0 and done < steps:
            save(done)
    model.eval()
    return logs


def frozen_copy(model):
    ref = copy.deepcopy(model)
    ref.eval()
    for prm in ref.parameters():
        prm.requires_grad_(False)
    return ref


def place_ref(method, model) -> None:
    """Put the method's frozen reference model (NPO, RMU) on the policy model's device."""
    if getattr(method, "ref", None) is not None:
        method.ref.to(model_device(model))


def draw(rng: np.random.Generator, n_items: int, size: int, weights: np.ndarray | None = None) -> np.ndarray:
    size = min(size, n_items) if weights is None else size
    if weights is None:
        return rng.choice(n_items, size=size, replace=False)
    return rng.choice(n_items, size=size, replace=True, p=weights / weights.sum())


def unlearn_steps(model, tok, method, forget_items: list, retain_items: list, p: dict[str, Any],
                  rng: np.random.Generator, n_steps: int, check=None, forget_weights: np.ndarray | None = None,
                  log_prefix: dict | None = None, *, ckpt_dir: str | Path | None = None, key: str = "",
                  stop_after: int | None = None) -> tuple[list[dict], int] | None:
    """Run up to n_steps of method.loss; `check(step) -> (stop: bool, info)` every p['check_every'].

    With `ckpt_dir`: a resumable checkpoint every `p['checkpoint_every']` steps (at a greedy check, so
    the stopping rule sees the same states), resumed by a rerun of the same job (`key`). `stop_after`
    (tests) checkpoints after that many steps and returns None. Returns (log, steps_done)."""
    import torch

    from paperflow.core.checkpoint import save_training_state

    opt = torch.optim.AdamW([q for q in model.parameters() if q.requires_grad], lr=p["lr"], weight_decay=0.0)
    logs: list[dict] = []
    start = 0
    got = _resume(ckpt_dir, key, model=model, optimizer=opt, np_rng=rng)
    if got is not None:
        start, logs = got["step"], got["extra"]["log"]
    acc = _accelerator()
    model, opt = acc.prepare(model, opt)
    place_ref(method, model)
    every = int(p.get("checkpoint_every") or 0)

    def save(step: int) -> None:
        if ckpt_dir is not None:
            save_training_state(ckpt_dir, model=model, optimizer=opt, step=step, np_rng=rng,
                                extra={"job": key, "log": logs})

    done = start
    model.train()
    for step in progress(range(start + 1, n_steps + 1), "unlearn"):
        fi = draw(rng, len(forget_items), p["batch_forget"], forget_weights)
        ri = draw(rng, len(retain_items), p["batch_retain"])
        dev = model_device(model)
        fb = to_device(collate([forget_items[i] for i in fi], tok.pad_token_id), dev)
        rb = to_device(collate([retain_items[i] for i in ri], tok.pad_token_id), dev)
        loss, info = method.loss(model, fb, rb)
        opt.zero_grad()
        acc.backward(loss)
        opt.step()
        done = step
        rec = {"step": step, **(log_prefix or {}), **info}
        if check is not None and step % p["check_every"] == 0:
            model.eval()
            stop, cinfo = check(step)
            model.train()
            rec.update(cinfo)
            logs.append(rec)
            if stop:
                break
        elif step % 10 == 0:
            logs.append(rec)
        if stop_after is not None and step - start >= stop_after and step < n_steps:
            save(step)
            model.eval()
            return None
        if every and step % every == 0 and step < n_steps:
            save(step)
    model.eval()
    return logs, done


def greedy_stop_check(model, tok, forget_rows, target: float, max_new_tokens: int, judge_name: str, judge_kw: dict):
    """Greedy-calibrated stopping: stop at the first check where forget greedy accuracy <= target."""

    def check(step: int):
        m = greedy_metrics(model, tok, forget_rows, max_new_tokens, judge_name, judge_kw)
        log.info("step %d forget greedy acc %.3f (target %.3f)", step, m["acc"], target)
        return m["acc"] <= target, {"forget_greedy_acc": m["acc"], "forget_greedy_rougeL": m["rougeL_recall"]}

    return check


def encode_rows(tok, rows: Sequence[dict]) -> list[tuple[list[int], int]]:
    return [encode_pair(tok, r["question"], r["answer"]) for r in rows]


def jsonl(records: Sequence[dict]) -> str:
    return "".join(json.dumps(r, sort_keys=True) + "\n" for r in records)
