"""RULE — Robust Unlearning under LEak@k. **Reconstruction** [recon, spec §8]: the paper's objective,
sampling budget, weighting and schedule were not available. What is known [paper/artifacts]: RULE is
a short post-hoc stage on top of an already-unlearned checkpoint (NPO or GradDiff), saved as
checkpoints 0..3.

Reconstructed procedure (direct minimization of the model's own leak@k, driven by its sampled leaks):
    theta <- theta_base; pi_ref <- theta_base; Leaks <- {}
    for round r = 1..R:
        for x in forget training prompts (`question`):
            ys <- m samples from pi_theta(.|x) with the attack decoder (T=1, top-p 1, top-k 50)
            Leaks <- Leaks + {(x, y): judge(y, y*) = 1}
        S steps of  gamma * mean_{B_f ~ gold forget + Leaks} L_f^base + alpha * L_r(B_r)
        save checkpoint r
The push-down uses the base method's bounded forget loss (NPO) or GradDiff's ascent term, not the raw
score-function gradient. Weighting `uniform` (default) or `leak_at_k` (ablation): each item of prompt x
is drawn with weight k (1 - p_hat(x))^(k-1), p_hat = leaked fraction of the round's m samples.
The control (`sample: false`) runs the same R*S steps on gold forget pairs only.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from paperflow.core.registry import Registry
from paperflow.unlearning.judge import make_judge
from paperflow.unlearning.model import encode_prompt
from paperflow.unlearning.sampling import Decoder, sample_shared_prefix

log = logging.getLogger(__name__)
PROCEDURES: Registry[Any] = Registry("post-hoc unlearning procedure")


@PROCEDURES.register("rule")
def run_rule(model, tok, method, forget_rows: list[dict], forget_items: list, retain_items: list,
             p: dict[str, Any], rng: np.random.Generator, sample_seed: int, save_round, *,
             ckpt_dir: str | Path | None = None, key: str = "", stop_after: int | None = None) -> dict[str, Any] | None:
    """Run R rounds; `save_round(r, model, leaks)` persists checkpoint r. Returns logs and leak counts.

    With `ckpt_dir`, the state after each round (weights, numpy stream, leak pool, logs) is saved with
    `core.checkpoint` and a rerun of the same job (`key`) resumes at the next round (each round starts a
    fresh optimizer, so a round boundary is an exact resume point). `stop_after` (tests: a simulated
    kill) stops after that many rounds of this call and returns None."""
    from paperflow.core.checkpoint import save_training_state
    from paperflow.unlearning.train import _resume, unlearn_steps

    dec = Decoder.from_dict({"name": "attack", **p["attack_decoder"]})
    judge = make_judge(p["judge"], **p["judge_kw"])
    prompts = [encode_prompt(tok, r["question"]) for r in forget_rows]
    st: dict[str, Any] = {"leaks": [], "leak_items": [], "leak_prompt": [], "log": [], "rounds": []}
    first = 1
    got = _resume(ckpt_dir, key, model=model, np_rng=rng)
    if got is not None:
        st = got["extra"]["rule"]
        st["leak_items"] = [(list(ids), int(n)) for ids, n in st["leak_items"]]
        first = got["step"] + 1
    leaks, leak_items, leak_prompt = st["leaks"], st["leak_items"], st["leak_prompt"]
    for r in range(first, p["rounds"] + 1):
        p_hat = np.zeros(len(forget_rows))
        if p["sample"]:
            outs = sample_shared_prefix(model, prompts, p["samples_per_prompt"], dec, p["max_new_tokens"],
                                        tok.eos_token_id, tok.pad_token_id, seed=sample_seed + 7919 * r,
                                        prompts_per_batch=p["prompts_per_batch"])
            for i, (row, conts) in enumerate(zip(forget_rows, outs)):
                n_leak = 0
                for ids in conts:
                    text = tok.decode(ids, skip_special_tokens=True)
                    if judge(text, row)[0]:
                        n_leak += 1
                        leaks.append({"round": r, "prompt": i, "question": row["question"], "response": text})
                        leak_items.append((prompts[i] + list(ids) + [tok.eos_token_id], len(prompts[i])))
                        leak_prompt.append(i)
                p_hat[i] = n_leak / len(conts)
        items = forget_items + leak_items
        prompt_of = list(range(len(forget_items))) + leak_prompt
        weights = None
        if p["weighting"] == "leak_at_k" and leak_items:
            k = p["weight_k"]
            w_prompt = k * (1 - p_hat) ** (k - 1) + 1e-6
            weights = np.array([w_prompt[j] for j in prompt_of])
        round_log, _ = unlearn_steps(model, tok, method, items, retain_items, p, rng, p["steps_per_round"],
                                     forget_weights=weights, log_prefix={"round": r})
        st["log"] += round_log
        info = {"round": r, "sampled_leak_rate": float(p_hat.mean()) if p["sample"] else None,
                "leak_pool": len(leak_items)}
        st["rounds"].append(info)
        log.info("RULE round %d: %s", r, info)
        save_round(r, model, [x for x in leaks if x["round"] == r])
        if ckpt_dir is not None and r < p["rounds"]:
            save_training_state(ckpt_dir, model=model, step=r, np_rng=rng, extra={"job": key, "rule": st})
        if stop_after is not None and r - first + 1 >= stop_after and r < p["rounds"]:
            return None
    return {"log": st["log"], "rounds": st["rounds"], "leaks": leaks}
