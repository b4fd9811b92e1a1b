"""Scratch sweep (issue 16 item 4): which task/data knobs bring LARA's no-alignment baseline (dit_only)
into a 30-80% closed-loop success band. dit_only only, 1 seed, evaluated on VALIDATION episodes
(env seed 5*10**5, 5 tasks from task list seed 2*10**6 + 3, 6 episodes each), never on the reported evaluation
episodes (env seed 10**6 + seed, task list seed 10**6 + 1). Appends one JSON line per run to
/tmp/lara_sweep/sweep.jsonl (datasets cached there by a digest of the data parameters). `close_xy_z`: per episode,
at the first closing command, [xy miss, height above the object top, object x, y, EEF x, y] (m).
Keys starting with "_" are the sweep's own: _val_tasks, _val_eps, _slot (feed camera slot k instead of 0),
_tokens8 (scratch architecture probe: 8x8 image tokens instead of 4x4; not a task/data knob).
Overrides are not schema-checked (simulator keys such as n_objects / grasp_xy go under sim.render).

Usage: PYTHONPATH=src OMP_NUM_THREADS=1 python bench/lara_baseline_sweep.py TAG '{"s3_steps": 600}'
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np


def deep(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = deep(a[k], v) if isinstance(v, dict) and isinstance(a.get(k), dict) else v
    return out


SLOT = [0]


class Diag:
    """Wraps a policy; records the EEF-to-object offset when the gripper is first commanded closed."""

    def __init__(self, pol):
        self.pol, self.rec, self.env = pol, [], None

    def bind(self, env):
        self.env = env

    def reset(self, instruction):
        self.first = None
        self.rec.append(None)
        self.pol.reset(instruction)

    def act(self, obs):
        if SLOT[0]:
            obs = {**obs, "images": {0: obs["images"][SLOT[0]]}}
        a = self.pol.act(obs)
        w = self.env.world
        if a[6] < 0.5 and self.rec[-1] is None:
            o = w.objs[w.task.obj]
            self.rec[-1] = (float(np.linalg.norm(w.p[:2] - o.pos[:2])), float(w.p[2] - (o.pos[2] + o.size / 2)),
                            *map(float, o.pos[:2]), *map(float, w.p[:2]))
        return a


def main(tag: str, over: dict, root: str = "/tmp/lara_sweep") -> None:
    from paperflow.core.config import load_config
    from paperflow.core.seeding import seed_everything
    from paperflow.robopolicy import lara, plan
    from paperflow.robotics.api import evaluate_policy, read_stats, simulate_dataset, task_list

    cfg = load_config("config/config.yaml")["robopolicy"]
    val = {k: over.pop(k) for k in list(over) if k.startswith("_")}
    slot = int(val.get("_slot", 0))
    SLOT[0] = slot
    if slot:  # scratch: read / feed camera slot `slot` where lara reads slot 0
        import paperflow.robopolicy.lara as L

        orig = L.load_split

        class _DS:
            def __init__(self, ds):
                self.ds, self.features = ds, ds.features

            def __len__(self):
                return len(self.ds)

            def __getitem__(self, i):
                ep = dict(self.ds[i])
                im = np.asarray(ep["images"])
                ep["images"] = im[:, [slot]]
                ep["has_view"] = np.asarray(ep["has_view"])[[slot]]
                return ep

        L.load_split = lambda d, split: _DS(orig(d, split))
    cfg = {**cfg, "lara": deep(cfg["lara"], over)}
    dp = plan.data_params(cfg)
    ddir = Path(root) / ("data_" + hashlib.sha1(json.dumps(dp, sort_keys=True).encode()).hexdigest()[:10])
    t0 = time.time()
    if not ddir.exists():
        simulate_dataset(ddir, dp["sim"], dp["extract"])
    t_data = time.time() - t0
    prm = plan.eval_params(cfg, "dit_only")
    seed = 0
    seed_everything(seed)
    stats = read_stats(ddir)
    q = {**prm, "stats": stats}
    vla = lara.make_vla(prm)
    if val.get("_tokens8"):  # scratch architecture probe: 8x8 image tokens (last conv stride 1), not in lara.py
        import torch

        d = prm["net"]["width"]
        vla.cnn = torch.nn.Sequential(torch.nn.Conv2d(3, 32, 4, 2, 1), torch.nn.GELU(), torch.nn.Conv2d(32, 64, 4, 2, 1),
                                      torch.nn.GELU(), torch.nn.Conv2d(64, d, 3, 1, 1), torch.nn.AdaptiveAvgPool2d(8))
        vla.pos = torch.nn.Parameter(torch.randn(2 + 64 + prm["horizon"], d) * 0.02)
    da = lara.load_demos(ddir, "train", stats, prm["tasks_a"])
    db = lara.load_demos(ddir, "train", stats, prm["tasks_b"], prm["s3_demos"])
    rows: list = []
    t0 = time.process_time()
    lara.train_joint(vla, None, da, q, prm["s2_steps"], seed, "S2", rows)
    lara.train_joint(vla, None, db, q, prm["s3_steps"], seed, "S3", rows)
    t_train = time.process_time() - t0
    vla.eval()
    ev = prm["eval"]
    pol = Diag(lara.VLAPolicy(vla, stats, prm["image_size"], prm["resize_mode"], prm["euler_steps"], 0, seed))
    scfg = lara.sim_config(prm["render"], prm["templates"])
    scfg.max_steps = ev["max_steps"]
    n_val_tasks = int(val.get("_val_tasks", 5))
    tasks = task_list(scfg, n_val_tasks, 2 * 10**6 + 3)
    t0 = time.process_time()
    r = evaluate_policy(pol, scfg, int(val.get("_val_eps", 6)), ev["max_steps"], [5 * 10**5], tasks=tasks)
    t_eval = time.process_time() - t0
    n = len(tasks) * int(val.get("_val_eps", 6))
    k = int(round(r["success_rate"] * n))
    out = {"tag": tag, "over": over, "val_success": f"{k}/{n}", "rate": k / n, "wilson": lara.wilson(k, n),
           "mean_steps": r["mean_steps"], "n_a": len(da.lengths), "n_b": len(db.lengths),
           "close_xy_z": [None if r is None else [round(x, 3) for x in r] for r in pol.rec],
           "final_loss": rows[-1]["loss"] if rows else None,
           "t_data_wall": round(t_data, 1), "t_train_cpu": round(t_train, 1), "t_eval_cpu": round(t_eval, 1),
           "eval_cpu_per_episode": round(t_eval / n, 3)}
    print(json.dumps(out))
    with open(Path(root) / "sweep.jsonl", "a") as fh:
        fh.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    from paperflow.core.cli import setup_threads

    setup_threads()
    Path("/tmp/lara_sweep").mkdir(exist_ok=True)
    over = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
    main(sys.argv[1], {k: v for k, v in over.items()})
