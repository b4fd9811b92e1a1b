"""Cross-study: weight-only quantization of the unlearning study's checkpoints (unlearning spec §12).

Consumes only the unlearning study's output files (save_pretrained dirs, TOFU data dir, judged
metrics). Schemes are data-free round-to-nearest weight quantizers applied to every decoder linear
(embeddings, norms and lm_head stay FP): `rtn_w8` (per-channel symmetric int8), `rtn_w4` (symmetric
int4, groups of 128 input columns), `rtn_ternary` (BitNet absmean per row). The quantized model is
exported as a plain *dense* save_pretrained dir (dequantized weights) so that
`paperflow unlearning evaluate` reruns greedy + leak@k on it unchanged. TWLA schemes need calibration
text and are not wired here (see README).
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

from typing import Any

import torch

# scheme -> (bits, input-column group; None = the whole row); bits None = ternary (BitNet absmean per row)
SCHEMES: dict[str, tuple[int | None, int | None]] = {"rtn_w8": (8, None), "rtn_w4": (4, 128), "rtn_ternary": (None, None)}
_TOK_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt",
              "chat_template.jinja")


def rtn_codes(W: torch.Tensor, scheme: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(integer codes, dequantized weight) of one weight matrix."""
    if scheme not in SCHEMES:
        raise ValueError(f"unknown scheme {scheme!r}; known: {', '.join(SCHEMES)}")
    bits, group = SCHEMES[scheme]
    if bits is None:
        alpha = W.abs().mean(dim=1, keepdim=True).clamp(min=1e-8)
        t = torch.round(torch.clamp(W / alpha, -1, 1))
        return t.to(torch.int8), alpha * t
    g = group or W.shape[1]
    qmax = 2 ** (bits - 1) - 1
    m, n = W.shape
    ng = math.ceil(n / g)
    Wp = torch.nn.functional.pad(W, (0, ng * g - n)).reshape(m, ng, g)
    s = (Wp.abs().amax(dim=2, keepdim=True) / qmax).clamp(min=1e-8)
    q = torch.clamp(torch.round(Wp / s), -qmax - 1, qmax)
    return q.reshape(m, -1)[:, :n].to(torch.int8), (q * s).reshape(m, -1)[:, :n]


def _linears(model) -> dict[str, torch.nn.Linear]:
    out = {}
    for name, mod in model.model.layers.named_modules():
        if isinstance(mod, torch.nn.Linear):
            out[f"model.layers.{name}"] = mod
    return out


@torch.no_grad()
def quantize_checkpoint(model_dir: str | Path, original_dir: str | Path, scheme: str, out_dir: str | Path) -> dict:
    """Quantize `model_dir`, save the dense dequantized model to `out_dir`; returns bin agreement with
    the identically quantized original, relative update size, and relative quantization error."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    orig = AutoModelForCausalLM.from_pretrained(original_dir, dtype=torch.float32).eval()
    lin_u, lin_0 = _linears(model), _linears(orig)
    same = total = 0
    d2 = n2 = e2 = 0.0
    for name, lin in lin_u.items():
        W, W0 = lin.weight.data, lin_0[name].weight.data
        cu, Wq = rtn_codes(W, scheme)
        c0, _ = rtn_codes(W0, scheme)
        same += int((cu == c0).sum())
        total += cu.numel()
        d2 += float(((W - W0) ** 2).sum())
        n2 += float((W0**2).sum())
        e2 += float(((W - Wq) ** 2).sum())
        lin.weight.data = Wq.contiguous()
    model.save_pretrained(out_dir, safe_serialization=True)
    for f in _TOK_FILES:
        if (Path(model_dir) / f).is_file():
            shutil.copy(Path(model_dir) / f, Path(out_dir) / f)
    return {"scheme": scheme, "bin_agreement_with_original": same / total, "rel_update_vs_original": math.sqrt(d2 / n2),
            "rel_quant_error": math.sqrt(e2 / sum(float((lin.weight.data ** 2).sum()) for lin in lin_u.values())),
            "n_linear_weights": total}


def evaluate_params_from_manifests(ref_samples: str | Path, ref_metrics: str | Path, model_name: str) -> dict[str, Any]:
    """`paperflow unlearning evaluate --params`: the sampling parameters recorded in the manifest of the
    unlearning pipeline's samples of the FP model and the judging parameters of its judged metrics, with
    the model renamed (`npo__rtn_w4`). Same eval seed, same decoders, same prompts: the quantized model's
    leak counts pair prompt by prompt with the FP model's."""
    from paperflow.core.io import read_manifest

    sample = dict(read_manifest(ref_samples)["config"])
    judge = dict(read_manifest(ref_metrics)["config"])
    sample["model"] = model_name
    return {"sample": sample, "judge": judge}


def leak_at_k(n: int, c: int, k: int) -> float:
    """Unbiased leak@k of one prompt with c of n samples leaking: 1 − C(n−c, k)/C(n, k) (the estimator
    the unlearning study reports; `curve_of` checks that the means agree with its metrics files)."""
    if n - c < k:
        return 1.0
    p = 1.0
    for j in range(k):
        p *= (n - c - j) / (n - j)
    return 1.0 - p


def curve_of(metrics: dict[str, Any], decoder: str, judge: str, path: str | Path = "") -> dict[str, Any]:
    """{n, ks, leak (k -> mean), per_prompt (kmax -> list), c} of one metrics file of the unlearning study."""
    try:
        m = metrics["leak"][decoder][judge]
    except KeyError:
        raise KeyError(f"{path}: no leak curve for decoder {decoder!r}, judge {judge!r} "
                       f"(quantization.cross_unlearning.decoder/judge)") from None
    ks = sorted(int(k) for k in m["leak"])
    n, cs = int(m["n"]), [int(c) for c in m["c"]]
    per = [leak_at_k(n, c, ks[-1]) for c in cs]
    mean = sum(per) / len(per) if per else float("nan")
    if per and abs(mean - float(m["leak"][str(ks[-1])])) > 1e-9:
        raise ValueError(f"{path}: leak@{ks[-1]} from the per-prompt counts ({mean}) differs from the file's "
                         f"({m['leak'][str(ks[-1])]}): the leak@k estimator changed")
    return {"n": n, "ks": ks, "leak": {k: float(m["leak"][str(k)]) for k in ks}, "per_prompt": per, "c": cs}


def recovery(leak_qu: float, leak_u: float, leak_q0: float) -> float | None:
    """ρ_k = (leak(Qθu) − leak(θu)) / (leak(Qθ0) − leak(θu)), only where the denominator > 0.05."""
    den = leak_q0 - leak_u
    return None if den <= 0.05 else (leak_qu - leak_u) / den


def build_cross_report(out_json: str | Path, out_png: str | Path, keys: list[tuple[int, str, str]],
                       before: list[str | Path], after: list[str | Path], qdirs: list[str | Path], decoder: str,
                       judge: str) -> dict:
    """Rows per (model, scheme) over every unlearning seed in `keys` (before/after/qdirs are in the order
    of keys): per-seed leak@k of the FP and the quantized model, their mean ± s.e. over seeds, the
    per-(seed, prompt) differences the claims are judged on, bin agreement and ρ_k. Writes the table
    (json) and leak@k curves before/after (mean over seeds)."""
    from paperflow.core.io import read_json, read_manifest, write_json
    from paperflow.core.plotting import save_figure, subplots
    from paperflow.core.stats import mean_se

    cells: dict[tuple[str, str], dict[int, dict[str, Any]]] = {}
    for (seed, model, scheme), b, a, q in zip(keys, before, after, qdirs):
        fp, qm = read_json(b), read_json(a)
        cf, cq = curve_of(fp, decoder, judge, b), curve_of(qm, decoder, judge, a)
        if cf["n"] != cq["n"] or len(cf["c"]) != len(cq["c"]):
            raise ValueError(f"{a}: {len(cq['c'])} prompts x {cq['n']} samples, but the FP metrics {b} have "
                             f"{len(cf['c'])} x {cf['n']}: not the same evaluation")
        st = read_manifest(q)["metrics"]
        cells.setdefault((model, scheme), {})[seed] = {
            "fp": cf, "q": cq, "greedy_forget_q": qm["summary"].get("forget_greedy_acc"),
            "greedy_retain_q": qm["summary"].get("retain_greedy_acc"),
            "bin_agreement": st["bin_agreement_with_original"], "rel_update": st["rel_update_vs_original"]}

    def ms(xs: list[float]) -> dict[str, Any]:
        m, se = mean_se(xs)
        return {"mean": m, "se": se}

    rows = []
    for (model, scheme), by_seed in sorted(cells.items()):
        seeds = sorted(by_seed)
        kmax = by_seed[seeds[0]]["fp"]["ks"][-1]
        q0 = cells.get(("full", scheme), {})
        row: dict[str, Any] = {
            "model": model, "scheme": scheme, "k": kmax, "seeds": seeds,
            "n_prompts": len(by_seed[seeds[0]]["fp"]["c"]), "n_samples": by_seed[seeds[0]]["fp"]["n"],
            "leak_fp": [by_seed[s]["fp"]["leak"][kmax] for s in seeds],
            "leak_q": [by_seed[s]["q"]["leak"][kmax] for s in seeds],
            "leak1_fp": [by_seed[s]["fp"]["leak"][1] for s in seeds],
            "leak1_q": [by_seed[s]["q"]["leak"][1] for s in seeds],
            "leak_q0": [q0[s]["q"]["leak"][kmax] for s in seeds] if all(s in q0 for s in seeds) else None,
            "greedy_forget_q": [by_seed[s]["greedy_forget_q"] for s in seeds],
            "greedy_retain_q": [by_seed[s]["greedy_retain_q"] for s in seeds],
            "bin_agreement": [by_seed[s]["bin_agreement"] for s in seeds],
            "rel_update": [by_seed[s]["rel_update"] for s in seeds],
            # the claims' paired unit: (seed, forget prompt), leak@kmax quantized − FP
            "delta_pairs": [round(q - f, 12) for s in seeds
                            for f, q in zip(by_seed[s]["fp"]["per_prompt"], by_seed[s]["q"]["per_prompt"])],
        }
        for key in ("leak_fp", "leak_q", "leak1_fp", "leak1_q", "bin_agreement"):
            row[f"{key}_mean_se"] = ms(row[key])
        if row["leak_q0"] is not None and model != "full":
            rho = [recovery(q, f, z) for q, f, z in zip(row["leak_q"], row["leak_fp"], row["leak_q0"])]
            row["recovery"] = rho
        rows.append(row)
    out = {"decoder": decoder, "judge": judge, "seeds": sorted({s for s, _, _ in keys}), "rows": rows}
    write_json(out_json, out)

    models = sorted({r["model"] for r in rows})
    fig, axes = subplots(1, len(models), w=3.6, h=3.0)
    for ax, model in zip(axes[0], models):
        first = True
        for (m, scheme), by_seed in sorted(cells.items()):
            if m != model:
                continue
            seeds = sorted(by_seed)
            ks = by_seed[seeds[0]]["fp"]["ks"]
            if first:
                ax.plot(ks, [sum(by_seed[s]["fp"]["leak"][k] for s in seeds) / len(seeds) for k in ks], "k-o", ms=3,
                        label="FP")
                first = False
            ax.plot(ks, [sum(by_seed[s]["q"]["leak"][k] for s in seeds) / len(seeds) for k in ks], "-o", ms=3,
                    label=scheme)
        ax.set_xscale("log", base=2)
        ax.set_title(f"{model} ({len(out['seeds'])} seed{'s' if len(out['seeds']) > 1 else ''})")
        ax.set_xlabel("k")
        ax.set_ylim(-0.02, 1.02)
    axes[0][0].set_ylabel(f"leak@k ({decoder}, {judge}; mean over seeds)")
    axes[0][0].legend(fontsize=7)
    save_figure(fig, out_png)
    return out
