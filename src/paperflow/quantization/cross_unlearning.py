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

import torch

SCHEMES = ("rtn_w8", "rtn_w4", "rtn_ternary")
_TOK_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt",
              "chat_template.jinja")


def rtn_codes(W: torch.Tensor, scheme: str, group: int = 128) -> tuple[torch.Tensor, torch.Tensor]:
    """(integer codes, dequantized weight) of one weight matrix."""
    if scheme == "rtn_ternary":
        alpha = W.abs().mean(dim=1, keepdim=True).clamp(min=1e-8)
        t = torch.round(torch.clamp(W / alpha, -1, 1))
        return t.to(torch.int8), alpha * t
    bits, g = {"rtn_w8": (8, W.shape[1]), "rtn_w4": (4, group)}[scheme]
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


def leak_at(metrics: dict, decoder: str, judge: str, k: int) -> float:
    return float(metrics["leak"][decoder][judge]["leak"][str(k)])


def recovery(leak_qu: float, leak_u: float, leak_q0: float) -> float | None:
    """ρ_k = (leak(Qθu) − leak(θu)) / (leak(Qθ0) − leak(θu)), only where the denominator > 0.05."""
    den = leak_q0 - leak_u
    return None if den <= 0.05 else (leak_qu - leak_u) / den


def build_cross_report(out_json: str | Path, out_png: str | Path, before: dict[str, str], after: dict[str, str],
                       qstats: dict[str, str], decoder: str, judge: str) -> dict:
    """before: {model: metrics.json of the unlearning pipeline}; after/qstats: {model__scheme: eval
    metrics.json / quantize manifest}. Writes a table (json) and leak@k curves before/after."""
    from paperflow.core.io import read_json, read_manifest, write_json
    from paperflow.core.plotting import save_figure, subplots

    B = {m: read_json(p) for m, p in before.items()}
    A = {k: read_json(p) for k, p in after.items()}
    rows = []
    for key, met in sorted(A.items()):
        model, scheme = key.split("__")
        ks = sorted(int(k) for k in met["leak"][decoder][judge]["leak"])
        kmax = ks[-1]
        st = read_manifest(qstats[key])["metrics"]
        row = {"model": model, "scheme": scheme, "k": kmax,
               "leak_fp": leak_at(B[model], decoder, judge, kmax) if model in B else None,
               "leak_q": leak_at(met, decoder, judge, kmax), "leak1_q": leak_at(met, decoder, judge, 1),
               "leak1_fp": leak_at(B[model], decoder, judge, 1) if model in B else None,
               "greedy_forget_q": met["summary"].get("forget_greedy_acc"),
               "greedy_retain_q": met["summary"].get("retain_greedy_acc"),
               "bin_agreement": st["bin_agreement_with_original"], "rel_update": st["rel_update_vs_original"]}
        q0 = A.get(f"full__{scheme}")
        if q0 is not None and row["leak_fp"] is not None and model != "full":
            row["recovery"] = recovery(row["leak_q"], row["leak_fp"], leak_at(q0, decoder, judge, kmax))
        rows.append(row)
    out = {"decoder": decoder, "judge": judge, "rows": rows}
    write_json(out_json, out)
    models = sorted({r["model"] for r in rows})
    fig, axes = subplots(1, len(models), w=3.6, h=3.0)
    for ax, model in zip(axes[0], models):
        if model in B:
            c = B[model]["leak"][decoder][judge]["leak"]
            ks = sorted(int(k) for k in c)
            ax.plot(ks, [c[str(k)] for k in ks], "k-o", ms=3, label="FP")
        for key, met in sorted(A.items()):
            if key.split("__")[0] != model:
                continue
            c = met["leak"][decoder][judge]["leak"]
            ks = sorted(int(k) for k in c)
            ax.plot(ks, [c[str(k)] for k in ks], "-o", ms=3, label=key.split("__")[1])
        ax.set_xscale("log", base=2)
        ax.set_title(model)
        ax.set_xlabel("k")
        ax.set_ylim(-0.02, 1.02)
    axes[0][0].set_ylabel(f"leak@k ({decoder}, {judge})")
    axes[0][0].legend(fontsize=7)
    save_figure(fig, out_png)
    return out
