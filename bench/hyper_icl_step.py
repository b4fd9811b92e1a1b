"""Cost of one training step per hyper_icl arm, of the teacher's ICL forward, and parameters per arm (run by hand;
numbers go in src/paperflow/hyper_icl/README.md).

    OMP_NUM_THREADS=1 PYTHONPATH=src python bench/hyper_icl_step.py [--config config/config.yaml] [--steps 10 60]

In one process, with the validated config's `hyper_icl` section (model and adapter sizes, batch sizes as
configured; a small world is generated in a temporary folder, and the base model keeps its random init: a step's
cost does not depend on the weights):
- base: one pre-training step (batch `base.batch_size`, forward + backward + AdamW);
- teacher: its ICL forward with hidden states on one student batch (`adapter.adapter_batch` episodes of k demos +
  the query, no grad) — what a step would pay if the teacher ran online — and the one-off pass over every target
  training episode that the study does instead (`teacher_outputs`);
- every trainable arm: one student step (forward on `[BOS] vis_q QRY`, CE + KD (+ layer distance), backward, Adam),
  timed as (t(n2 steps) − t(n1 steps)) / (n2 − n1) with `train_student`, so the set-up (copying the base model,
  the standardiser) cancels; the median over `--repeats`;
- parameters per arm, counted on the built modules (`param_band`, which also enforces the 2× band).
Wall seconds (time.perf_counter) and CPU seconds (time.process_time).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def clock(fn: Callable[[], Any], reps: int = 1) -> tuple[float, float]:
    """Median wall and CPU seconds of `fn` over `reps` calls."""
    walls, cpus = [], []
    for _ in range(reps):
        t, c = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="config/config.yaml")
    ap.add_argument("--steps", type=int, nargs=2, default=(10, 60), metavar=("N1", "N2"))
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    from paperflow.core.config import load_config

    cfg = load_config(args.config)["hyper_icl"]
    import torch

    from paperflow.hyper_icl import plan
    from paperflow.hyper_icl.data import load_split, write_world
    from paperflow.hyper_icl.model import build_base
    from paperflow.hyper_icl.train import (ARMS, EVAL_ONLY, param_band, pretrain_loss, teacher_eval,
                                           teacher_outputs, to_t, train_student)

    torch.set_num_threads(1)
    n1, n2 = args.steps
    p = plan.arms_params(cfg, seed=0, chunk=0)
    p["arms"] = list(ARMS)  # every arm, whatever the config runs
    d = dict(plan.data_params(cfg))
    # a small world: the step cost depends on the batch, not on how many episodes exist
    d.update(n_pretrain=max(512, int(cfg["base"]["batch_size"])), n_pretrain_val=16,
             n_val=16, n_test=64, demo_draws=2)
    with tempfile.TemporaryDirectory() as tmp:
        write_world(Path(tmp) / "w", d)
        pre = load_split(Path(tmp) / "w", "pretrain")
        ep = load_split(Path(tmp) / "w", "T2_train")
        test = load_split(Path(tmp) / "w", "T2_test")
    torch.manual_seed(0)
    base = build_base(d["vis_dim"], p)
    rows: list[tuple[str, str, float, float]] = []

    # base pre-training step
    net = build_base(d["vis_dim"], p)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    bs = int(cfg["base"]["batch_size"])
    vis, lab = to_t(pre["vis"][:bs]), to_t(pre["label"][:bs])

    def base_step() -> None:
        loss = pretrain_loss(net, vis, lab)
        opt.zero_grad()
        loss.backward()
        opt.step()

    base_step()
    w, c = clock(base_step, 20)
    rows.append(("base pre-training step", f"batch {bs}", w, c))

    for prm in base.parameters():
        prm.requires_grad_(False)
    ab = int(p["adapter_batch"])
    batch = {k: v[:ab] for k, v in ep.items()}
    w, c = clock(lambda: teacher_outputs(base, batch, list(p["distill_layers"])), 20)
    k = ep["vis"].shape[1] - 1
    rows.append(("teacher ICL forward (+ hidden states), one student batch", f"{ab} episodes, {1 + 3 * k + 2} tokens",
                 w, c))
    w, c = clock(lambda: teacher_outputs(base, ep, list(p["distill_layers"])), 3)
    rows.append(("teacher pass over the target training episodes (once per target)", f"{len(ep['vis'])} episodes",
                 w, c))
    w, c = clock(lambda: teacher_eval(base, test), 3)
    n_eval = len(test["vis"]) * test["demo_vis"].shape[1]
    rows.append(("teacher evaluation, per test query and demo draw",
                 f"{len(test['vis'])} × {test['demo_vis'].shape[1]}", w / n_eval, c / n_eval))

    t_logits, t_hidden = teacher_outputs(base, ep, list(p["distill_layers"]))
    band = param_band(base, p)
    step_rows: list[tuple[str, int, float, float, float, float]] = []
    for arm in ARMS:
        if arm in EVAL_ONLY:
            continue
        per_w, per_c = [], []
        for _ in range(args.repeats):
            w1, c1 = clock(lambda: train_student(arm, base, {**p, "adapter_steps": n1}, ep, t_logits, t_hidden, 0))
            w2, c2 = clock(lambda: train_student(arm, base, {**p, "adapter_steps": n2}, ep, t_logits, t_hidden, 0))
            per_w.append((w2 - w1) / (n2 - n1))
            per_c.append((c2 - c1) / (n2 - n1))
        steps = int(cfg["adapter"]["adapter_steps"])
        sw, sc = statistics.median(per_w), statistics.median(per_c)
        step_rows.append((arm, band[arm]["n_params"], band[arm]["ratio"], sw, sc, sw * steps))

    print(f"hyper_icl step costs: d_model {p['d_model']}, {p['layers']} layers, {p['heads']} heads; "
          f"adapter batch {ab}; "
          f"torch threads {torch.get_num_threads()}; student step = median over {args.repeats} of "
          f"(t({n2}) − t({n1})) / {n2 - n1}")
    print("\n| step | size | wall ms | CPU ms |\n|---|---|---|---|")
    for label, size, w, c in rows:
        print(f"| {label} | {size} | {1e3 * w:.2f} | {1e3 * c:.2f} |")
    print(f"\n| arm | trainable params | ratio to (f) | wall ms / step | CPU ms / step | "
          f"× {cfg['adapter']['adapter_steps']} steps (s) |\n|---|---|---|---|---|---|")
    for arm, n, r, w, c, tot in step_rows:
        print(f"| {arm} | {n:,} | {r:.2f} | {1e3 * w:.2f} | {1e3 * c:.2f} | {tot:.2f} |")


if __name__ == "__main__":
    main()
