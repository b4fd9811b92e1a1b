"""Pluggable zero-shot evaluator (paper scale; optional dependency `lm-eval`, spec §9).

Evaluators are registered by name; `lm_eval` wraps an already-built (fake-quantized) torch model in
lm-eval's HFLM and runs the listed tasks. lm-eval is imported only here, at call time; it is not a
dependency of paperflow (install `lm-eval==0.4.9` on the cluster). Records acc and acc_norm per task
and the spec's headline metric (acc_norm for hellaswag and arc_*, acc elsewhere)."""

from __future__ import annotations

from typing import Any

from paperflow.core.registry import Registry

EVALUATORS: Registry = Registry("zero-shot evaluator")
NORM_TASKS = ("hellaswag", "arc_easy", "arc_challenge")


def headline(task: str, res: dict[str, Any]) -> float | None:
    key = "acc_norm" if task in NORM_TASKS else "acc"
    for k, v in res.items():
        if k.split(",")[0] == key:
            return float(v)
    return None


@EVALUATORS.register("lm_eval")
def lm_eval_tasks(model, tokenizer, tasks: list[str], batch_size: int = 32, limit: int | None = None) -> dict:
    try:
        import lm_eval
        from lm_eval.models.huggingface import HFLM
    except ImportError as e:  # pragma: no cover - optional dependency
        raise RuntimeError("zero-shot evaluation needs the optional dependency lm-eval (pip install lm-eval==0.4.9)") from e
    lm = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=batch_size)
    out = lm_eval.simple_evaluate(model=lm, tasks=tasks, num_fewshot=0, batch_size=batch_size, limit=limit)
    per_task = {}
    for task in tasks:
        res = out["results"].get(task, {})
        per_task[task] = {"acc": next((float(v) for k, v in res.items() if k.split(",")[0] == "acc"), None),
                          "acc_norm": next((float(v) for k, v in res.items() if k.split(",")[0] == "acc_norm"), None),
                          "headline": headline(task, res)}
    vals = [v["headline"] for v in per_task.values() if v["headline"] is not None]
    return {"tasks": per_task, "avg": sum(vals) / len(vals) if vals else None, "version": getattr(lm_eval, "__version__", "?")}
