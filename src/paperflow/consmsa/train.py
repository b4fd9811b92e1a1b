"""Training and evaluation of one ConsMSA variant, and test-time pruning controls of the keep = 1.0 model."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from paperflow.consmsa.data import LENGTH_KEYS, MODALITIES, ROLES
from paperflow.consmsa.plan import CONTROLS
from paperflow.consmsa.metrics import regression_metrics
from paperflow.consmsa.model import (ConsMSA, Forward, ModelConfig, ScoreConfig, anchor_loss, auroc,
                                     consistency_loss)
from paperflow.core.checkpoint import has_checkpoint, load_training_state, save_training_state
from paperflow.core.seeding import seed_everything, stream

log = logging.getLogger(__name__)


Tensors = dict[str, torch.Tensor]


def to_tensors(split: Mapping[str, np.ndarray]) -> tuple[Tensors, Tensors, torch.Tensor]:
    """Features, masks (1 = real token; text is taken as full length) and labels of one split."""
    x = {m: torch.from_numpy(np.ascontiguousarray(split[m])) for m in MODALITIES}
    mask = {}
    for m in MODALITIES:
        N, T = x[m].shape[:2]
        ln = torch.from_numpy(split[LENGTH_KEYS[m]]) if m in LENGTH_KEYS else torch.full((N,), T)
        ln = ln.clamp_min(1)  # an empty sequence keeps one (zero) token so every modality has one
        mask[m] = (torch.arange(T)[None] < ln[:, None]).float()
    return x, mask, torch.from_numpy(split["regression_labels"]).float()


def build(p: Mapping[str, Any], input_dims: Mapping[str, int]) -> ConsMSA:
    sc = ScoreConfig(combine=p["combine"], relevance=p["relevance"], summary=p["summary"], source=p["source"])
    return ConsMSA(ModelConfig(input_dims=dict(input_dims), d_model=int(p["d_model"]), n_heads=int(p["n_heads"]),
                               enc_layers=int(p["enc_layers"]), fusion_layers=int(p["fusion_layers"]),
                               n_bins=int(p["n_bins"]), score=sc))


def _sub(d: Mapping[str, torch.Tensor], idx: torch.Tensor) -> dict[str, torch.Tensor]:
    return {k: v[idx] for k, v in d.items()}


def train_variant(p: Mapping[str, Any], train: Mapping[str, np.ndarray], seed: int, ckpt_dir: Path | None = None,
                  stop_after: int | None = None) -> tuple[ConsMSA | None, list[dict[str, float]]]:
    """AdamW for p['epochs'] epochs; loss L1 + λ_c L_cons (p['cons']) + λ_u Σ_m CE(q̄^m, bin(y)).
    Resumable from `ckpt_dir` (checkpoint every p['ckpt_every'] epochs); `stop_after` (tests) stops after
    that many epochs and returns (None, log)."""
    seed_everything(seed)
    x, mask, y = to_tensors(train)
    net = build(p, {m: x[m].shape[-1] for m in MODALITIES})
    opt = torch.optim.AdamW(net.parameters(), lr=float(p["lr"]), weight_decay=float(p["weight_decay"]))
    n, bs = y.shape[0], min(int(p["batch_size"]), y.shape[0])
    start = 0
    if ckpt_dir is not None and has_checkpoint(ckpt_dir):
        start = load_training_state(ckpt_dir, model=net, optimizer=opt)["step"]
        log.info("resumed %s at epoch %d", p["variant"], start)
    history: list[dict[str, float]] = []
    for epoch in range(start, int(p["epochs"])):
        net.train()
        order = torch.from_numpy(stream(seed, "epoch", epoch).permutation(n))
        tot = {"loss": 0.0, "l1": 0.0, "cons": 0.0, "anchor": 0.0}
        nb = 0
        for j in range(0, n - bs + 1, bs):
            idx = order[j:j + bs]
            f = net(_sub(x, idx), _sub(mask, idx), reweight=bool(p["reweight"]), tau=float(p["tau"]),
                    keep=float(p["keep"]))
            l1 = (f.pred - y[idx]).abs().mean()
            la = anchor_loss(f, y[idx], int(p["n_bins"]))
            lc = consistency_loss(f, _sub(mask, idx))
            loss = l1 + float(p["lambda_u"]) * la + (float(p["lambda_c"]) * lc if p["cons"] else 0.0)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), float(p["grad_clip"]))
            opt.step()
            for k, v in (("loss", loss), ("l1", l1), ("cons", lc), ("anchor", la)):
                tot[k] += float(v.detach())
            nb += 1
        history.append({"epoch": epoch, **{k: v / max(nb, 1) for k, v in tot.items()}})
        log.info("%s s%d epoch %d %s", p["variant"], seed, epoch, history[-1])
        if ckpt_dir is not None and p["ckpt_every"] and (epoch + 1) % int(p["ckpt_every"]) == 0 \
                and epoch + 1 < int(p["epochs"]):
            save_training_state(ckpt_dir, model=net, optimizer=opt, step=epoch + 1)
        if stop_after is not None and epoch + 1 >= stop_after:
            return None, history
    return net, history


@torch.no_grad()
def run_split(net: ConsMSA, p: Mapping[str, Any], split: Mapping[str, np.ndarray], *, keep: float | None = None,
              control: str | None = None, seed: int = 0, batch: int = 500) -> dict[str, Any]:
    """Predictions, per-token scores and kept indices on one split. `control` (keep < 1 only) replaces the
    pruning score: random, norm (‖h_i‖), cls_attn (fusion [CLS] attention of the unpruned pass), relevance,
    i2cs, full (s, the model's own score)."""
    net.eval()
    x, mask, y = to_tensors(split)
    keep = float(p["keep"]) if keep is None else keep
    preds: list[torch.Tensor] = []
    out: dict[str, list[torch.Tensor]] = {f"{k}.{m}": [] for k in ("i2cs", "s", "kept") for m in MODALITIES}
    gen = torch.Generator().manual_seed(int(stream(seed, "control").integers(2**31)))
    for j in range(0, y.shape[0], batch):
        xb = {m: v[j:j + batch] for m, v in x.items()}
        mb = {m: v[j:j + batch] for m, v in mask.items()}
        prune_by = None
        if control is not None and keep < 1.0:
            full: Forward = net(xb, mb, reweight=bool(p["reweight"]), tau=float(p["tau"]), keep=1.0,
                                want_attn=control == "cls_attn")
            if control == "random":
                prune_by = {m: torch.rand(mb[m].shape, generator=gen) for m in MODALITIES}
            elif control == "norm":
                prune_by = {m: full.h[m].norm(dim=-1) for m in MODALITIES}
            elif control == "cls_attn":
                prune_by = full.cls_attn
            elif control == "relevance":
                prune_by = full.rel
            elif control == "i2cs":
                prune_by = full.i2cs
            elif control == "full":
                prune_by = full.s
            else:
                raise ValueError(f"unknown control '{control}' (one of {CONTROLS})")
        f = net(xb, mb, reweight=bool(p["reweight"]), tau=float(p["tau"]), keep=keep, prune_by=prune_by)
        preds.append(f.pred)
        for m in MODALITIES:
            out[f"i2cs.{m}"].append(f.i2cs[m])
            out[f"s.{m}"].append(f.s[m])
            out[f"kept.{m}"].append(f.kept[m] if f.kept is not None else torch.empty(0))
    res: dict[str, Any] = {"pred": torch.cat(preds).numpy(), "y": y.numpy()}
    for k, v in out.items():
        res[k] = torch.cat(v).numpy() if v[0].numel() else None
    return res


def probes(res: Mapping[str, Any], roles: Mapping[str, np.ndarray] | None) -> dict[str, float]:
    """Precision of kept tokens (informative + redundant count as correct), AUROC of I²CS for informative
    vs conflicting and informative vs redundant tokens, pooled over modalities. Synthetic data only."""
    if roles is None:
        return {}
    out: dict[str, float] = {}
    good = (ROLES["informative"], ROLES["redundant"])
    if res.get("kept.text") is not None:
        hits = tot = 0
        for m in MODALITIES:
            r = np.take_along_axis(roles[m], res[f"kept.{m}"], axis=1)
            hits += int(np.isin(r, good).sum())
            tot += r.size
        out["kept_precision"] = hits / tot
    sc = {m: torch.from_numpy(res[f"i2cs.{m}"]) for m in MODALITIES}
    rl = {m: torch.from_numpy(roles[m].astype(np.int64)) for m in MODALITIES}

    def pool(role: str) -> torch.Tensor:
        return torch.cat([sc[m][rl[m] == ROLES[role]] for m in MODALITIES])

    out["auroc_conflict"] = auroc(pool("informative"), pool("conflicting"))
    out["auroc_redundant"] = auroc(pool("informative"), pool("redundant"))
    out["auroc_neutral"] = auroc(pool("informative"), pool("neutral"))
    return out


def evaluate(net: ConsMSA, p: Mapping[str, Any], splits: Mapping[str, Mapping[str, np.ndarray]],
             roles: Mapping[str, Mapping[str, np.ndarray]] | None, seed: int) -> dict[str, Any]:
    """valid and test metrics of the trained variant; for the keep = 1.0 reference model also the test-time
    pruning controls at every p['control_keeps'] ratio (evaluation only, the same network)."""
    kind = p["metric_kind"]
    out: dict[str, Any] = {"splits": {}, "controls": {}}
    for s in ("valid", "test"):
        r = run_split(net, p, splits[s], seed=seed)
        out["splits"][s] = {**regression_metrics(r["pred"], r["y"], kind),
                            **probes(r, roles.get(s) if roles else None)}
        if s == "test":
            out["test_pred"] = r["pred"].tolist()
            out["test_y"] = r["y"].tolist()
    if p["controls"]:
        for keep in p["control_keeps"]:
            for c in CONTROLS:
                r = run_split(net, p, splits["test"], keep=float(keep), control=c, seed=seed)
                out["controls"][f"{c}@{float(keep):g}"] = {
                    **regression_metrics(r["pred"], r["y"], kind),
                    **probes(r, roles.get("test") if roles else None), "abs_err": np.abs(r["pred"] - r["y"]).tolist()}
    return out
