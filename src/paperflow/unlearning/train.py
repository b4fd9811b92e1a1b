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
import math
from collections.abc import Sequence
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


def finetune(model, tok, rows: Sequence[dict], p: dict[str, Any], rng: np.random.Generator) -> list[dict]:
    """AdamW on answer-token CE, warmup 5% then cosine to 10% of lr. Returns the per-step log."""
    import torch

    acc = _accelerator()
    opt = torch.optim.AdamW(model.parameters(), lr=p["lr"], weight_decay=p["weight_decay"])
    steps, warm = p["steps"], max(1, int(0.05 * p["steps"]))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, s / steps)))))
    model, opt = acc.prepare(model, opt)
    items = [encode_pair(tok, r["question"], r["answer"]) for r in rows]
    model.train()
    logs = []
    for step in progress(range(steps), "finetune"):
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
                  log_prefix: dict | None = None) -> tuple[list[dict], int]:
    """Run up to n_steps of method.loss; `check(step) -> (stop: bool, info)` every p['check_every'].

    Returns (log, steps_done)."""
    import torch

    acc = _accelerator()
    opt = torch.optim.AdamW([q for q in model.parameters() if q.requires_grad], lr=p["lr"], weight_decay=0.0)
    model, opt = acc.prepare(model, opt)
    place_ref(method, model)
    logs: list[dict] = []
    done = 0
    model.train()
    for step in progress(range(1, n_steps + 1), "unlearn"):
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
