"""Evaluation: sampling (greedy + n samples per forget prompt per decoder) and judging (labels,
c_i per prompt, leak@k with bootstrap CI, greedy accuracy / ROUGE-L recall on forget and retain).

Sampling and judging are separate so a new judge can re-score stored generations.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from paperflow.core.progress import progress
from paperflow.core.seeding import stream
from paperflow.unlearning.data import load_split_checked
from paperflow.unlearning.judge import make_judge
from paperflow.unlearning.leak import bootstrap_ci, leak_curve
from paperflow.unlearning.model import encode_prompt
from paperflow.unlearning.sampling import GREEDY, Decoder, sample_shared_prefix


def _subset(rows: list[dict], limit: int | None) -> list[dict]:
    if limit is None or limit >= len(rows):
        return rows
    idx = np.linspace(0, len(rows) - 1, limit).round().astype(int)
    return [rows[i] for i in idx]


def sample_model(model, tok, data_dir: str | Path, p: dict[str, Any]) -> list[dict[str, Any]]:
    """Records: one per (split, decoder, prompt) with prompt, gold, key facts, seed and responses."""
    forget = _subset(load_split_checked(data_dir, p["forget_split"], p["qa_per_author"]), p["forget_max"])
    retain = _subset(load_split_checked(data_dir, p["retain_split"], p["qa_per_author"]), p["retain_max"])
    records = []
    plans = [("forget", forget, GREEDY, 1), ("retain", retain, GREEDY, 1)]
    plans += [("forget", forget, Decoder.from_dict(d), p["n_samples"]) for d in p["decoders"]]
    for di, (split, rows, dec, n) in enumerate(progress(plans, "sample")):
        field = p["prompt_field"]
        prompts = [encode_prompt(tok, r[field]) for r in rows]
        seed = p["eval_seed"] * 1000 + di
        outs = sample_shared_prefix(model, prompts, n, dec, p["max_new_tokens"], tok.eos_token_id, tok.pad_token_id,
                                    seed=seed, prompts_per_batch=p["greedy_batch"] if dec.greedy else p["prompts_per_batch"])
        for i, (r, conts) in enumerate(zip(rows, outs)):
            records.append({
                "split": split, "decoder": dec.name, "decoding": dec.__dict__, "idx": i,
                "author_id": r["author_id"], "prompt": r[field], "answer": r["answer"],
                "key_facts": r.get("key_facts"), "seed": seed,
                "responses": [tok.decode(c, skip_special_tokens=True).strip() for c in conts],
            })
    return records


def judge_samples(records: list[dict[str, Any]], p: dict[str, Any], seed: int) -> tuple[dict, list[dict]]:
    """(metrics, judged records) for every judge in p['judges'].

    metrics["labels"][split][decoder][judge] keeps what an independent re-check needs, per prompt
    (`idx`, the record's position) and per response: the judge's 0/1 `labels` and its `scores`
    (e.g. rougeL_recall, keyfact / entail), each a list of per-prompt lists in response order."""
    metrics: dict[str, Any] = {"greedy": {}, "leak": {}, "ks": p["ks"], "n_samples": p["n_samples"], "labels": {}}
    judged = []
    judges = {}
    for name in p["judges"]:
        try:
            judges[name] = make_judge(name, **p["judge_kw"])
        except (ValueError, KeyError) as e:
            metrics.setdefault("skipped_judges", {})[name] = str(e)
    by_key: dict[tuple[str, str], list[dict]] = {}
    for rec in records:
        by_key.setdefault((rec["split"], rec["decoder"]), []).append(rec)
    for (split, dec), recs in sorted(by_key.items()):
        for jname, judge in judges.items():
            if jname == "keyfact" and any(r["key_facts"] is None for r in recs):
                metrics.setdefault("skipped_judges", {})[jname] = "no key_facts in data"
                continue
            cs, groups, rouge = [], [], []
            kept: dict[str, Any] = {"idx": [], "labels": [], "scores": {}}
            for r in recs:
                labs, scores = zip(*(judge(resp, r) for resp in r["responses"])) if r["responses"] else ((), ())
                kept["idx"].append(r["idx"])
                kept["labels"].append([int(x) for x in labs])
                for sc in scores:
                    for name in sc:
                        kept["scores"].setdefault(name, [[] for _ in kept["idx"][:-1]])
                for name, lst in kept["scores"].items():
                    lst.append([float(sc.get(name, float("nan"))) for sc in scores])
                metrics["labels"].setdefault(split, {}).setdefault(dec, {})[jname] = kept
                cs.append(int(sum(labs)))
                groups.append(r["author_id"])
                rouge.append(float(np.mean([s["rougeL_recall"] for s in scores])) if scores else 0.0)
                judged.append({"split": split, "decoder": dec, "judge": jname, "idx": r["idx"],
                               "labels": list(labs), "scores": list(scores)})
            if dec == "greedy":
                metrics["greedy"].setdefault(split, {})[jname] = {
                    "acc": float(np.mean(cs)), "rougeL_recall": float(np.mean(rouge)), "n": len(cs)}
                continue
            n = len(recs[0]["responses"])
            ks = [k for k in p["ks"] if k <= n]
            # tiny forget sets have few authors: resample prompts when authors < 10
            boot_groups = groups if len(set(groups)) >= 10 else list(range(len(groups)))
            ci = bootstrap_ci(cs, boot_groups, n, ks, p["bootstrap"], stream(seed, "boot", dec, jname))
            metrics["leak"].setdefault(dec, {})[jname] = {
                "n": n, "leak": {str(k): v for k, v in leak_curve(cs, n, ks).items()},
                "ci": {str(k): v for k, v in ci.items()}, "c": cs,
                "bootstrap_unit": "author" if boot_groups is groups else "prompt",
                "mean_rougeL_recall": float(np.mean(rouge))}
    acc_j = p["accuracy_judge"] if p["accuracy_judge"] in judges else next(iter(judges), None)
    g = metrics["greedy"]
    metrics["summary"] = {
        "accuracy_judge": acc_j,
        "forget_greedy_acc": g.get("forget", {}).get(acc_j, {}).get("acc"),
        "retain_greedy_acc": g.get("retain", {}).get(acc_j, {}).get("acc"),
        "forget_greedy_rougeL": g.get("forget", {}).get(acc_j, {}).get("rougeL_recall"),
        "retain_greedy_rougeL": g.get("retain", {}).get(acc_j, {}).get("rougeL_recall"),
    }
    return metrics, judged


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
