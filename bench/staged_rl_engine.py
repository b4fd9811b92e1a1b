"""One TRL GRPO step vs one grpo_lite update on staged_rl's D_vis (run by hand; numbers in the study README).

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 python bench/staged_rl_engine.py [--config config/config.yaml] [--steps 5]

Also the image path (`trl.vlm`): the same stage on a random tiny LLaVA with the scene as pixels, EasyR1-layout
files written and read back, the boxed reward (its seconds per step include writing/reading the stage file and
the Trainer set-up, amortised over `--steps`).

Same G and prompts per update (the config's rl section) for both. grpo_lite: the study's small causal policy
(model section), sampling + one clipped-surrogate step with the k3 KL. TRL: `paperflow.nn.trl_grpo` on a random
tiny_llama (trl section) over the word vocabulary, the image as visual words, the reference model built from the
stage's initial weights. Reports seconds per update (median of `--steps` after one warm-up step each);
the TRL number includes its Trainer set-up amortised over `--steps` steps.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from paperflow.core.config import load_config


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="config/config.yaml")
    ap.add_argument("--steps", type=int, default=5)
    a = ap.parse_args()
    import torch

    from paperflow.core.seeding import stream
    from paperflow.staged_rl import plan
    from paperflow.staged_rl.data import write_world
    from paperflow.staged_rl.model import build_policy
    from paperflow.staged_rl.train import load_sets, rl_stage
    from paperflow.staged_rl.trl_backend import run_arm_trl

    cfg = load_config(a.config)["staged_rl"]
    p = {**plan.base_params(cfg, 0), **plan.arms_params(cfg, 0, 0)}
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        world = Path(tmp) / "world"
        write_world(world, {**cfg["data"], "n_warmup": 50, "n_perc_pool": 50})
        protos = __import__("paperflow.staged_rl.data", fromlist=["load_world"]).load_world(world)["protos"]
        sets = load_sets(world, {"keep": [0]}, p, 0)
        net = build_policy(p, protos.shape[1])
        times = []
        for i in range(a.steps + 1):
            t = time.perf_counter()
            rl_stage(net, [(sets["vis"], 1.0)], 1, p, protos, stream(0, "b", i), torch.Generator().manual_seed(i))
            times.append(time.perf_counter() - t)
        out["grpo_lite_s_per_update"] = statistics.median(times[1:])
        trl_p = {**p, "split": [0, 0, a.steps], "backend": "trl"}
        trl_p["trl"] = {**trl_p["trl"], "n_test": 1}
        r = run_arm_trl("v_only", world, {"keep": [0]}, trl_p, 0)
        out["trl_s_per_step"] = r["stages"][0]["seconds_per_step"]
        vlm_p = {**trl_p, "kl_beta": p["kl_beta"],
                 "trl": {**trl_p["trl"], "vlm": True, "data_files": {}, "format_prompt": None, "format_weight": 0.1}}
        r = run_arm_trl("v_only", world, {"keep": [0]}, vlm_p, 0)
        out["trl_vlm_s_per_step"] = r["stages"][0]["seconds_per_step"]
        out["trl_steps"] = a.steps
    out["G"], out["prompts_per_update"] = p["group_size"], p["prompts_per_update"]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
