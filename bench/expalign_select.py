"""Select expalign's CPU-budget training knobs on the VALIDATION split (run by hand; numbers go in
src/paperflow/expalign/README.md, the choice into the schema's `expalign.train` defaults).

    snakemake --cores 2 data/expalign/synth/val.safetensors data/expalign/synth/text.safetensors \\
        --configfile config/config.yaml <overlay enabling only expalign>
    OMP_NUM_THREADS=1 python bench/expalign_select.py [--config config/config.yaml] [--data data/expalign/synth]

The grid, arms and seed are `expalign.selection` of the validated config; the logic is
`paperflow.expalign.select.run`, which never reads the test split. Writes the full grid as JSON (--out).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from paperflow.core.config import load_config
from paperflow.core.io import write_json
from paperflow.expalign import select


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="config/config.yaml")
    ap.add_argument("--data", default=None, help="prepared data directory (default: <data_dir>/expalign/<name>)")
    ap.add_argument("--out", default="results/expalign/selection.json")
    a = ap.parse_args()
    full = load_config(a.config)
    cfg = full["expalign"]
    data = Path(a.data or f"{full.get('data_dir', 'data')}/expalign/{cfg['data']['name']}")
    t, c = time.perf_counter(), time.process_time()
    res = select.run(cfg, data, progress=lambda s: print(s, flush=True))
    res["wall_s"], res["cpu_s"] = round(time.perf_counter() - t, 1), round(time.process_time() - c, 1)
    write_json(Path(a.out), res)
    arms = list(cfg["selection"]["arms"])
    print(f"\n{res['metric']}; {res['n_val']} val images ({res['val_pairs']} pointing pairs)")
    print("| steps | lr | " + " | ".join(f"val pointing {x}" for x in arms) + " | mean | train CPU s (sum) |")
    print("|---|---|" + "---|" * (len(arms) + 2))
    for r in res["cells"]:
        mark = " **(chosen)**" if r["cell"] == res["choice"] else ""
        print(f"| {r['cell']['steps']} | {r['cell']['lr']:g} | " + " | ".join(f"{r['val_pointing'][x]:.3f}" for x in arms)
              + f" | {r['score']:.3f}{mark} | {sum(r['train_cpu_s'].values()):.1f} |")
    print(f"\nchoice: {json.dumps(res['choice'])}; wall {res['wall_s']} s, CPU {res['cpu_s']} s")


if __name__ == "__main__":
    main()
