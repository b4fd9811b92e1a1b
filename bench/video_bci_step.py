"""Benchmark (run by hand): one grpo_lite update vs one TRL GRPOTrainer step at the tiny default's shape.

    OMP_NUM_THREADS=1 PYTHONPATH=src python bench/video_bci_step.py [--steps 5] [--items 32] [--G 8]

Both backends see the same items (tiny default data generator) with the dus_pts utility:
- grpo_lite: the integrator (2 layers, d = 64) — forward on `items` items, G samples each, rewards, backward, Adam;
- trl: `paperflow.nn.trl_grpo` on the random tiny Llama (hidden 32, 2 layers) with the word-level tokenizer,
  `items` prompts × G completions of ≤ 8 tokens per step (generation, rewards, loss, Adam).
Reports seconds per update/step (the mean over `steps`, after one warm-up) and the TRL trainer's construction
time. Results are recorded in src/paperflow/video_bci/README.md.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from paperflow.core.config import load_config
from paperflow.video_bci.data import make_split


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--items", type=int, default=32)
    ap.add_argument("--G", type=int, default=8)
    a = ap.parse_args()
    sec = load_config(Path(__file__).resolve().parents[1] / "config" / "config.yaml")["video_bci"]
    data = {**sec["data"], "n_train": 400, "n_val": 40, "n_test": 40}
    tr, va = make_split(data, "train", 400), make_split(data, "val", 40)
    p = {**sec["model"], **sec["rl"], "group_size": a.G, "items_per_update": a.items, "eval_every": 10**9}
    from paperflow.video_bci.train import train_arm

    train_arm("dus_pts", tr, va, {**p, "updates": 1}, 0)  # warm-up
    t0 = time.perf_counter()
    _, _, timing = train_arm("dus_pts", tr, va, {**p, "updates": a.steps}, 0)
    lite = (time.perf_counter() - t0) / a.steps  # includes the final validation pass (40 items)
    from paperflow.video_bci import trl_backend

    t0 = time.perf_counter()
    trl_backend.train_arm_trl("dus_pts", tr, {**p, "trl_prompts_per_step": 1}, 0, Path(tempfile.mkdtemp()), steps=1)
    one = time.perf_counter() - t0
    t0 = time.perf_counter()
    _, _, log = trl_backend.train_arm_trl("dus_pts", tr, {**p, "trl_prompts_per_step": a.items}, 0,
                                          Path(tempfile.mkdtemp()), steps=a.steps)
    total = time.perf_counter() - t0
    step = sum(h["step_time"] for h in log) / len(log)
    print(json.dumps({"items": a.items, "G": a.G, "steps": a.steps,
                      "grpo_lite_update_s": round(timing["update_seconds"], 4), "grpo_lite_update_s_incl_eval": round(lite, 4),
                      "trl_step_s": round(step, 4), "trl_wall_per_step_incl_setup_s": round(total / a.steps, 4),
                      "trl_setup_plus_1_small_step_s": round(one, 3)}, indent=1))


if __name__ == "__main__":
    main()
