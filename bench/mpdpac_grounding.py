"""Does the tiny mpdpac backbone ground objects? Train one recipe, score it on a VALIDATION split (issue 17).

The validation split is the last `--n_val` scenes of the *training* split of the default data (data seed 0);
the backbone is trained on the rest. The test split is never read. Grounding = object F1 on the own scene minus
F1 with another validation scene's visual tokens (the pipeline's shuffled-image control), and absolute F1 vs the
uniform-guess level (mean objects / 36 kinds ≈ 0.093). Vanilla decoding only (no MPS / MRS).

    PYTHONPATH=$PWD/src OMP_NUM_THREADS=1 .venv/bin/python bench/mpdpac_grounding.py --name base \
        --set train.steps=400 --out results/bench/mpdpac_grounding

`--set` takes dotted `section.key=value` overrides of the schema defaults (value parsed as YAML), plus the
bench-only data recipes `recipe.len_cap=N` (training answers padded to at most N tokens) and
`recipe.n_train=N` (use the first N training scenes). `--eval_every N` scores the validation split every N
steps as well (F1 own / shuffled; the training draws are unchanged), `--threads` sets torch's thread count.
The tiny tier's recipe (config/config.yaml) is
`--set model.n_layers=3 model.d_ff=128 train.steps=2000 train.lr_floor=1.0 --threads 2`.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml


def schema_defaults() -> dict:
    sch = yaml.safe_load(open(Path(__file__).resolve().parents[1] / "workflow/schemas/studies/mpdpac.schema.yaml"))

    def fill(node: dict) -> dict:
        out = {}
        for k, v in node.get("properties", {}).items():
            if v.get("type") == "object" and "properties" in v:
                out[k] = fill(v)
            elif "default" in v:
                out[k] = v["default"]
        return out

    return fill(sch)


def f1(tp: np.ndarray, pred: np.ndarray, true: np.ndarray) -> float:
    from paperflow.mpdpac.metrics import f1_of

    return f1_of(tp, pred, true)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--name", required=True)
    ap.add_argument("--set", nargs="*", default=[])
    ap.add_argument("--n_val", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="results/bench/mpdpac_grounding")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (the pipeline's train job uses 2)")
    ap.add_argument("--eval_every", type=int, default=0, help="also score the validation split every N steps")
    a = ap.parse_args()

    import torch

    torch.set_num_threads(a.threads)
    from paperflow.mpdpac.data import load_scenes, write_scenes
    from paperflow.mpdpac.decode import decode
    from paperflow.mpdpac.evaluate import shuffled_visual
    from paperflow.mpdpac.fixes import paper_prior
    from paperflow.mpdpac.metrics import item_stats
    from paperflow.mpdpac.train import load_model, train_model

    cfg = schema_defaults()
    recipe: dict = {}
    for kv in a.set:
        k, v = kv.split("=", 1)
        sec, key = k.split(".", 1)
        (recipe if sec == "recipe" else cfg[sec])[key] = yaml.safe_load(v)
    tmp = Path(tempfile.mkdtemp(prefix="mpdpac_ground_"))
    full = tmp / "scenes_full.npz"
    write_scenes(cfg["data"], full, int(cfg["data_seed"]))
    z = dict(np.load(full, allow_pickle=False))
    n_tr = z["train_visual"].shape[0] - a.n_val
    keys = ("visual", "answer", "length", "objects", "n_objects")
    val = {k: z[f"train_{k}"][n_tr:] for k in keys}
    tr = {k: z[f"train_{k}"][:n_tr] for k in keys}
    if recipe.get("n_train"):
        tr = {k: v[: int(recipe["n_train"])] for k, v in tr.items()}
    if recipe.get("len_cap"):
        tr["length"] = np.minimum(tr["length"], int(recipe["len_cap"]))
    split = {**{f"train_{k}": v for k, v in tr.items()}, **{f"test_{k}": v for k, v in val.items()},
             "vocab": z["vocab"], "meta": z["meta"]}
    path = tmp / "scenes.npz"
    np.savez(path, **split)

    te = load_scenes(path, "test")
    special = te.meta["special"]
    visual = torch.from_numpy(te.visual)
    chance = float(te.n_objects.mean()) / 36

    def score(model, n_boot: int) -> dict:
        """Vanilla decoding of the validation scenes, own image and shuffled image, at L20_t1 and L48_t4."""
        prior = paper_prior(model, 3)
        rng = np.random.default_rng(0)
        res = {}
        for cname, L, tps in (("L20_t1", 20, 1), ("L48_t4", 48, 4)):
            st = {}
            for arm, vis in (("own", visual), ("shuffled", shuffled_visual(visual))):
                with torch.no_grad():
                    d = decode(model, vis, answer_len=L, tokens_per_step=tps, block_len=0, special=special,
                               diag_prior=prior)
                st[arm] = item_stats(d.answer, te.objects, te.n_objects, te.vocab)
            fo = f1(st["own"]["n_tp"], st["own"]["n_pred"], st["own"]["n_true"])
            fs = f1(st["shuffled"]["n_tp"], st["shuffled"]["n_pred"], st["shuffled"]["n_true"])
            r = {"f1_own": round(fo, 4), "f1_shuffled": round(fs, 4), "diff": round(fo - fs, 4)}
            if n_boot:
                diffs = []
                n = len(te)
                for _ in range(n_boot):
                    i = rng.integers(0, n, n)
                    diffs.append(f1(st["own"]["n_tp"][i], st["own"]["n_pred"][i], st["own"]["n_true"][i])
                                 - f1(st["shuffled"]["n_tp"][i], st["shuffled"]["n_pred"][i],
                                      st["shuffled"]["n_true"][i]))
                lo, hi = np.percentile(diffs, [2.5, 97.5])
                r["ci"] = [round(float(lo), 4), round(float(hi), 4)]
                r["dup"] = round(float(st["own"]["n_dup"].sum() / max(1, st["own"]["n_pred"].sum())), 4)
                r["pred_per_item"] = round(float(st["own"]["n_pred"].mean()), 3)
            res[cname] = r
        return res

    curve: list[dict] = []
    eval_s = [0.0]

    def on_step(done: int, model) -> None:  # validation F1 along the way (decoding draws no training RNG)
        if a.eval_every and done % a.eval_every == 0 and done < int(cfg["train"]["steps"]):
            te0 = time.perf_counter()
            model.eval()
            c = score(model, 0)
            model.train()
            eval_s[0] += time.perf_counter() - te0
            curve.append({"step": done, **{k: [v["f1_own"], v["f1_shuffled"]] for k, v in c.items()}})
            print(f"{a.name} step {done}: " + " | ".join(f"{k} {v}" for k, v in curve[-1].items() if k != "step"),
                  flush=True)

    p = {**cfg["train"], "model": dict(cfg["model"]), "seed": a.seed}
    t0 = time.perf_counter()
    res = train_model(p, path, tmp / "model.safetensors", on_step=on_step)
    train_s = time.perf_counter() - t0 - eval_s[0]  # training alone (the validation scoring left out)
    model = load_model(cfg["model"], tmp / "model.safetensors", len(te.vocab))
    out = {"name": a.name, "set": a.set, "seed": a.seed, "n_val": a.n_val, "threads": a.threads,
           "train_s": round(train_s, 1), "final_loss": res["final_loss"], "loss_curve": res["loss_curve"],
           "chance": chance, "val_curve": curve, "conditions": score(model, 500)}
    out["total_s"] = round(time.perf_counter() - t0, 1)
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / f"{a.name}.json").write_text(json.dumps(out, indent=1))
    c = out["conditions"]
    print(f"{a.name}: train {train_s:.0f}s loss {res['final_loss']:.3f} | " + " | ".join(
        f"{k} F1 {v['f1_own']:.3f} vs shuf {v['f1_shuffled']:.3f} diff {v['diff']:+.3f} {v['ci']} dup {v['dup']:.2f}"
        for k, v in c.items()), flush=True)


if __name__ == "__main__":
    main()
