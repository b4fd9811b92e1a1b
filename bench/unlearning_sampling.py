"""Benchmark: shared-prefix batched sampling vs one-sample-at-a-time generation (run by hand).

    OMP_NUM_THREADS=1 python bench/unlearning_sampling.py [--model DIR] [--n 64] [--prompts 4]

Without --model: the tiny tier's default architecture (4x128 Llama-style, word-level tokenizer trained
on generated TOFU-schema data; random weights, so every sample runs to max_new_tokens — a fair,
worst-case comparison). With --model: any save_pretrained dir (e.g. models/smollm2-135m-instruct).
Prints JSON: samples/s for (a) shared prefix (prefill once, cache expanded to n rows), (b) HF
generate with num_return_sequences=n (prefills n copies), (c) one generate call per sample; speedups.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", type=Path, default=None)
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--baseline-prompts", type=int, default=1, help="prompts for the slow one-at-a-time baseline")
    a = ap.parse_args()
    import torch

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    from paperflow.unlearning.data import generate_tofu, load_tofu
    from paperflow.unlearning.model import build_tiny, encode_prompt, load_model, load_tokenizer, prompt_text, train_tokenizer
    from paperflow.unlearning.sampling import Decoder, sample_one_at_a_time, sample_shared_prefix

    td = Path(tempfile.mkdtemp())
    generate_tofu(td / "data", 40, 10, 4, seed=0)
    rows, _ = load_tofu(td / "data", "forget10", qa_per_author=10)
    if a.model is None:
        full, _ = load_tofu(td / "data", "full", qa_per_author=10)
        train_tokenizer([prompt_text(r["question"]) for r in full] + [r["answer"] for r in full], td / "tok")
        tok = load_tokenizer(td / "tok")
        torch.manual_seed(0)
        model = build_tiny({"hidden_size": 128, "num_layers": 4, "num_heads": 4, "intermediate_size": 384,
                            "max_position": 64}, tok).eval()
        name = "tiny 4x128 (random init)"
    else:
        tok, model, name = load_tokenizer(a.model), load_model(a.model), str(a.model)
    dec = Decoder("T1.0", 1.0, 1.0, 50)
    prompts = [encode_prompt(tok, r["question"]) for r in rows[: a.prompts]]
    eos = tok.eos_token_id if a.model is not None else -1  # tiny: never stop early (fixed work per sample)
    args = (a.max_new_tokens, eos, tok.pad_token_id)

    def timed(fn):
        t0 = time.perf_counter()
        out = fn()
        return time.perf_counter() - t0, sum(len(c) for o in out for c in o), sum(len(o) for o in out)

    res = {"model": name, "n": a.n, "max_new_tokens": a.max_new_tokens, "threads": torch.get_num_threads()}
    t, toks, ns = timed(lambda: sample_shared_prefix(model, prompts, a.n, dec, *args, seed=0, prompts_per_batch=len(prompts)))
    res["shared_prefix"] = {"prompts": len(prompts), "s": round(t, 3), "samples_per_s": round(ns / t, 2),
                            "tokens_per_s": round(toks / t, 1)}

    def hf_nrs():
        out = []
        with torch.no_grad():
            for p in prompts:
                x = torch.tensor([p])
                g = model.generate(x, attention_mask=torch.ones_like(x), do_sample=True, temperature=1.0, top_p=1.0,
                                   top_k=50, max_new_tokens=a.max_new_tokens, min_new_tokens=a.max_new_tokens,
                                   num_return_sequences=a.n, pad_token_id=tok.pad_token_id)
                out.append([s[x.shape[1]:].tolist() for s in g])
        return out

    t, toks, ns = timed(hf_nrs)
    res["hf_num_return_sequences"] = {"prompts": len(prompts), "s": round(t, 3), "samples_per_s": round(ns / t, 2),
                                      "tokens_per_s": round(toks / t, 1)}
    base_prompts = prompts[: a.baseline_prompts]
    t, toks, ns = timed(lambda: sample_one_at_a_time(model, base_prompts, a.n, dec, *args, seed=0))
    res["one_at_a_time"] = {"prompts": len(base_prompts), "s": round(t, 3), "samples_per_s": round(ns / t, 2),
                            "tokens_per_s": round(toks / t, 1)}
    sp = res["shared_prefix"]["samples_per_s"]
    res["speedup_vs_one_at_a_time"] = round(sp / res["one_at_a_time"]["samples_per_s"], 1)
    res["speedup_vs_hf_num_return_sequences"] = round(sp / res["hf_num_return_sequences"]["samples_per_s"], 2)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
