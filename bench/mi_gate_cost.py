"""Where mi_gate's tiny default spends its CPU (run by hand; numbers go in src/paperflow/mi_gate/README.md).

    OMP_NUM_THREADS=1 python bench/mi_gate_cost.py [--config config/config.yaml]

Times, in one process with the validated config's `mi_gate` section: data generation, the captioner, one
cross-fitted LSMI estimate, building the test conditions, one downstream seed (training + every test
condition) with and without the re-estimate. Wall and CPU seconds; the job count comes from the plan.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from paperflow.core.config import load_config


def clock(label: str, fn, rows: list) -> object:  # noqa: ANN001
    t, c = time.perf_counter(), time.process_time()
    out = fn()
    rows.append((label, time.perf_counter() - t, time.process_time() - c))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="config/config.yaml")
    cfg = load_config(ap.parse_args().config)["mi_gate"]
    rows: list = []
    clock("import torch", lambda: __import__("torch"), rows)
    from paperflow.mi_gate import estimator as E
    from paperflow.mi_gate import plan
    from paperflow.mi_gate.data import embed_texts, generate, load_dataset, write_dataset
    from paperflow.mi_gate.model import train_captioner
    from paperflow.mi_gate.train import run_seed, test_inputs

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "synth"
        clock("data: generate + write", lambda: write_dataset(out, *generate(plan.data_params(cfg))), rows)
        ds = clock("data: load", lambda: load_dataset(out / "data.json", out / "image_features.npy"), rows)
    tr = ds["train"]
    cap = clock("captioner", lambda: train_captioner(tr.image, tr.colour, tr.shape, cfg["captioner"]), rows)
    xt = embed_texts(tr.text, int(cfg["text"]["dim"]), int(cfg["text"]["hash_seed"]))
    clock("LSMI estimate (cross-fitted)", lambda: E.lsmi_crossfit(tr.image, xt, tr.y, cfg["estimator"], 0), rows)
    from paperflow.mi_gate.train import run_gate

    _, gate = clock("gate stage work (captioner + LSMI + selection)", lambda: run_gate(ds, plan.gate_params(cfg)), rows)
    p = plan.train_params(cfg, "gated_t0.25", "s0")
    tests = clock("test conditions (T0/T1)", lambda: test_inputs(ds["test"], cap, p), rows)
    clock("one seed with re-estimate", lambda: run_seed("gated", 0.25, 0, ds, gate, tests, p), rows)
    p2 = dict(p, eval=dict(p["eval"], reestimate=False))
    clock("one seed without re-estimate", lambda: run_seed("gated", 0.25, 0, ds, gate, tests, p2), rows)
    print(f"jobs: 1 data + 1 gate + {len(plan.runs(cfg))} train + aggregate/figures/summary; "
          f"{len(plan.variants(cfg))} arm × τ variants × {cfg['seeds']} seeds")
    print("| step | wall s | CPU s |\n|---|---|---|")
    for label, w, c in rows:
        print(f"| {label} | {w:.2f} | {c:.2f} |")


if __name__ == "__main__":
    main()
