"""Decode the test scenes under every arm of one decoding condition and measure them.

A condition fixes the answer length L, tokens per step, the block length and the visual-prefix length
(BG-padded to `visual_len`, the MRS arm). An arm fixes the MPS prior (none / paper / random-subspace
control / calibrated ablation) with its λ, and the MRS scaling (β, or an off-spec s_max). Every arm sees
the same items, so differences between arms are paired by item.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger("paperflow.mpdpac.evaluate")


def _nanmean(a: np.ndarray, axis: Any = None) -> Any:
    with warnings.catch_warnings():  # all-NaN rows (no masked slot left) give NaN, not a warning
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(a, axis=axis)


def _clean(x: Any) -> Any:
    """NaN → None for JSON."""
    a = np.asarray(x, dtype=float)
    return [None if not np.isfinite(v) else round(float(v), 6) for v in a.ravel()] if a.ndim else (
        None if not np.isfinite(a) else float(a))


def calibration_states(model: Any, visual: Any, cond: Mapping[str, Any], special: Mapping[str, int]) -> Any:
    """Final states of the masked answer slots at step 0 (training scenes): the calibrated prior's input."""
    import torch

    from paperflow.mpdpac.model import build_inputs

    ids, start = build_inputs(visual, int(cond["answer_len"]), special["sep"], special["mask"], special["bg"],
                              cond.get("visual_len"))
    with torch.no_grad():
        h = model.states(ids).layer_states[-1][:, start:]
    return h.reshape(-1, h.shape[-1])


def shuffled_visual(visual: Any) -> Any:
    """The grounding control's input: item i gets the visual tokens of item i + 1 (the last gets the first's),
    a derangement whenever there are ≥ 2 items, so no caption is decoded from its own scene."""
    import torch

    return torch.roll(visual, shifts=-1, dims=0)


def run_condition(p: Mapping[str, Any], data_path: str | Path, weights: str | Path) -> dict[str, Any]:
    import torch

    from paperflow.mpdpac.data import load_scenes
    from paperflow.mpdpac.decode import decode
    from paperflow.mpdpac.fixes import calibrated_prior, mrs_scale, paper_prior, random_prior, rotary_scaled
    from paperflow.mpdpac.metrics import distinct2, dup_rate, item_stats, prf
    from paperflow.mpdpac.train import load_model

    torch.manual_seed(int(p["seed"]))
    te = load_scenes(data_path, "test").subset(int(p["n_eval"]))
    tr = load_scenes(data_path, "train").subset(int(p["n_calib"]))
    special = te.meta["special"]
    model = load_model(p["model"], weights, len(te.vocab))
    dev = next(model.parameters()).device
    cond = p["condition"]
    head_dim = int(p["model"]["d_model"]) // int(p["model"]["n_heads"])
    paper = paper_prior(model, int(p["k"]))
    priors = {"paper": paper, "random": random_prior(paper, 10_000 + int(p["seed"])),
              "calibrated": calibrated_prior(paper, calibration_states(model, torch.from_numpy(tr.visual).to(dev), cond,
                                                                       special))}
    visual = torch.from_numpy(te.visual).to(dev)
    toks = te.vocab.tokens
    out: dict[str, Any] = {"condition": dict(cond), "seed": int(p["seed"]), "n_items": len(te),
                           "prior": {"k": int(paper.U.shape[1]), "u": paper.u.tolist(),
                                     "cos_random_vs_paper_u": float(
                                         (priors["random"].U @ priors["random"].u) @ (paper.U @ paper.u)),
                                     "cos_calibrated_vs_paper_u": float(priors["calibrated"].u @ paper.u)},
                           "arms": {}}
    bs = int(p["batch_size"])
    for arm in p["arms"]:
        name = arm["name"]
        scale = None
        if arm.get("s_max") is not None or float(arm.get("beta", 0.0)) > 0:
            scale = mrs_scale(head_dim, float(arm.get("beta", 0.0)), float(p["mrs"]["eta"]), float(p["mrs"]["tau0"]),
                              p["mrs"]["shape"], arm.get("s_max"))
        prior = priors.get(arm.get("prior") or "", None)
        parts = []
        vis_arm = shuffled_visual(visual) if arm.get("shuffle") else visual
        with rotary_scaled(model, scale):
            for i in range(0, len(te), bs):
                parts.append(decode(model, vis_arm[i:i + bs], answer_len=int(cond["answer_len"]),
                                    tokens_per_step=int(cond["tokens_per_step"]), block_len=int(p["block_len"]),
                                    special=special, diag_prior=paper, mps_prior=prior,
                                    lam=float(arm.get("lam", 0.0)), visual_len=cond.get("visual_len"),
                                    attention=bool(p["attention"])))
        ans = np.concatenate([d.answer for d in parts])
        cos = np.concatenate([d.cos for d in parts])
        fac = np.concatenate([d.factor_nonzero for d in parts])
        st = item_stats(ans, te.objects, te.n_objects, te.vocab)
        P, R, F = prf(st)
        n_steps = cos.shape[1]
        late = slice(n_steps // 2, n_steps)
        res: dict[str, Any] = {
            "arm": dict(arm),
            "items": {k: v.tolist() for k, v in st.items()},
            "summary": {"dup_rate": dup_rate(st), "precision": P, "recall": R, "f1": F,
                        "seq_rep2": float(st["seq_rep2"].mean()), "distinct2": distinct2(ans, te.vocab.eos),
                        "mean_tokens": float(st["n_tokens"].mean()),
                        "factor_nonzero_share": _clean(_nanmean(fac)),
                        "cos_mean": _clean(_nanmean(cos)), "cos_positive_share": _clean(_nanmean(
                            np.where(np.isnan(cos), np.nan, (cos > 0).astype(float))))},
            "drift": {"cos_by_step": _clean(_nanmean(cos, axis=(0, 2))),
                      "cos_by_slot": _clean(_nanmean(cos, axis=(0, 1))),
                      "item_cos": _clean(_nanmean(cos, axis=(1, 2))),
                      "item_cos_late": _clean(_nanmean(cos[:, late], axis=(1, 2))),
                      "item_cos_first": _clean(_nanmean(cos[:, 0], axis=1))},
            "examples": [" ".join(toks[t] for t in ans[i]) for i in range(min(3, len(ans)))],
        }
        if parts[0].vis_attn is not None:
            vis = np.concatenate([d.vis_attn for d in parts])  # [B, n_layers, steps]
            obj = np.concatenate([d.obj_attn for d in parts])
            res["attention"] = {"visual_by_layer_step": vis.mean(axis=0).round(6).tolist(),
                                "object_by_layer_step": obj.mean(axis=0).round(6).tolist(),
                                "item_visual": vis.mean(axis=(1, 2)).tolist(),
                                "item_object": obj.mean(axis=(1, 2)).tolist()}
            if parts[0].dist_attn is not None:
                from paperflow.mpdpac.decode import distance_edges

                da = np.concatenate([d.dist_attn for d in parts])  # [B, n_layers, steps, bins]
                dm = np.concatenate([d.dist_mask_attn for d in parts])
                T = int(visual.shape[1]) + 1 + int(cond["answer_len"]) + max(
                    0, int(cond.get("visual_len") or 0) - int(visual.shape[1]))
                res["attention"]["by_distance"] = {
                    "bin_left_edges": distance_edges(T)[: da.shape[-1]],
                    "all_keys_by_layer": da.mean(axis=(0, 2)).round(6).tolist(),
                    "all_keys_by_step": da.mean(axis=(0, 1)).round(6).tolist(),
                    "masked_keys_by_layer": dm.mean(axis=(0, 2)).round(6).tolist(),
                    "masked_keys_by_step": dm.mean(axis=(0, 1)).round(6).tolist()}
        log.info("%s/%s: dup %.3f F1 %.3f seq-rep-2 %.3f cos %.3f factor>0 %s", cond.get("name"), name,
                 res["summary"]["dup_rate"], F, res["summary"]["seq_rep2"], res["summary"]["cos_mean"] or np.nan,
                 res["summary"]["factor_nonzero_share"])
        out["arms"][name] = res
    return out
