"""Diagnostic (run by hand; README "Diagnostic"): does the score find the planted cues when q is computed
from each token's own projection (`score.source: projected`) instead of the encoder output (the spec's
h_i, the default)? Trains full_k1 and full_k0.1 at the tiny default for the given seeds with each source
and prints kept-token precision and MAE of test-time pruning at keep 0.1 (s, random, I²CS), and AUROC.

    OMP_NUM_THREADS=1 PYTHONPATH=src python bench/consmsa_source.py [--seeds 0]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from paperflow.consmsa import plan
from paperflow.consmsa.data import generate
from paperflow.consmsa.train import evaluate, train_variant
from paperflow.core.config import load_config


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    a = ap.parse_args()
    cfg = load_config(Path(__file__).resolve().parents[1] / "config" / "config.yaml")["consmsa"]
    data, roles = generate(plan.data_params(cfg), int(cfg["data"]["synthetic"]["seed"]))
    for source in ("encoded", "projected"):
        for seed in a.seeds:
            p = {**plan.variant_params(cfg, plan.REFERENCE, seed), "source": source, "control_keeps": [0.1]}
            net, _ = train_variant(p, data["train"], seed)
            ev = evaluate(net, p, data, roles, seed)
            c = ev["controls"]
            print(f"{source:9s} s{seed} full_k1 MAE {ev['splits']['test']['mae']:.3f} AUROC(conflict) "
                  f"{ev['splits']['test']['auroc_conflict']:.3f} | keep 0.1 test-time: "
                  + ", ".join(f"{k.split('@')[0]} MAE {c[k]['mae']:.3f} prec {c[k]['kept_precision']:.3f}"
                              for k in ("full@0.1", "random@0.1", "i2cs@0.1")))


if __name__ == "__main__":
    main()
