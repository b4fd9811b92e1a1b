"""Training of one run (method x code length x noise setting x seed) under accelerate.

Labels come only from noise records (`noise.read_noisy`); the clean training labels are never
read (split files are opened with `with_labels=False`). Per epoch the model is scored on the
validation split (mean of I2T and T2I mAP@all) under the *noisy* validation labels (`noisy_val`,
default) and, as a secondary paper-protocol row, the clean ones (`clean_val`); the best weights
for each rule and the last ones are exported as numpy arrays. Only the main process writes.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger("paperflow.hashing.train")


def lr_at(epoch: int, tr: Mapping[str, Any]) -> float:
    """Cosine annealing with warm restarts (0-based epoch); periods repeat the last one if needed."""
    periods, weights = list(tr["restart_periods"]), list(tr["restart_weights"])
    e, k = epoch, 0
    while True:
        T = periods[min(k, len(periods) - 1)]
        if e < T:
            break
        e -= T
        k += 1
    w = weights[min(k, len(weights) - 1)]
    return tr["eta_min"] + (w * tr["lr"] - tr["eta_min"]) * (1 + math.cos(math.pi * e / T)) / 2


def _auroc(score: np.ndarray, positive: np.ndarray) -> float | None:
    if positive.all() or not positive.any():
        return None
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(positive, score))


def train_run(p: Mapping[str, Any], train_path: str | Path, val_path: str | Path, rec_train: str | Path,
              rec_val: str | Path, out: str | Path, log_path: str | Path) -> dict[str, Any] | None:
    """Train one run; returns the metrics dict on the main process (None elsewhere)."""
    import torch
    from accelerate import Accelerator

    from paperflow.core.seeding import seed_everything
    from paperflow.hashing import model as M
    from paperflow.hashing.data import load_split
    from paperflow.hashing.evaluate import both_directions, to_bits
    from paperflow.hashing.noise import read_changed, read_noisy

    torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS", "1"))))
    acc = Accelerator(cpu=not torch.cuda.is_available())
    t0 = time.perf_counter()

    tr_split = load_split(train_path, with_labels=False)  # clean labels never loaded here
    va_split = load_split(val_path, with_labels=True)     # clean val labels: `clean_val` rule only
    y_train = read_noisy(rec_train)
    y_val_noisy = read_noisy(rec_val)
    changed_train = read_changed(rec_train)               # diagnostics only
    if y_train.shape[0] != tr_split["img"].shape[0] or y_val_noisy.shape[0] != va_split["img"].shape[0]:
        raise ValueError("noise record and split sizes differ")
    K = y_train.shape[1]
    ml = bool(p["multilabel"])
    tr = p["train"]
    method = p["method"]
    eps_grid = p.get("baselines", {}).get("label_smooth_eps", [0.0]) if method == "label_smooth" else [0.0]

    x_img = torch.from_numpy(tr_split["img"])
    x_txt = torch.from_numpy(tr_split["txt"])
    y_t = torch.from_numpy(y_train.astype(np.int64))
    v_img, v_txt = torch.from_numpy(va_split["img"]), torch.from_numpy(va_split["txt"])

    def encode_bits(net: Any, a: torch.Tensor, b: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        net.eval()
        with torch.no_grad():
            o1 = net.img(a.to(acc.device)).cpu().numpy()
            o2 = net.txt(b.to(acc.device)).cpu().numpy()
        return to_bits(o1), to_bits(o2)

    def score(net: Any) -> dict[str, float]:
        bi, bt = encode_bits(net, v_img, v_txt)
        codes = {"q_img": bi, "q_txt": bt, "db_img": bi, "db_txt": bt}
        nv = both_directions(codes, y_val_noisy, y_val_noisy, p["bits"])
        cv = both_directions(codes, va_split["labels"], va_split["labels"], p["bits"])
        return {"noisy_val": nv["mean"], "clean_val": cv["mean"], "noisy_val_i2t": nv["i2t"], "noisy_val_t2i": nv["t2i"]}

    def export(net: Any) -> dict[str, np.ndarray]:
        return {k: v.detach().cpu().numpy().copy() for k, v in net.state_dict().items()}

    candidates = []
    epoch_log: list[dict[str, Any]] = []
    for eps in eps_grid:
        seed_everything(int(p["train_seed"]))
        net = M.HashNet(x_img.shape[1], x_txt.shape[1], tr["hidden"], p["bits"], K, int(p["train_seed"]))
        wd = tr["weight_decay_paper"] if method == "rfcmh_paper" else tr["weight_decay"]
        opt = torch.optim.Adam(net.parameters(), lr=tr["lr"], betas=(0.9, 0.999), weight_decay=wd)
        ds = torch.utils.data.TensorDataset(x_img, x_txt, y_t, torch.arange(len(y_t)))
        gen = torch.Generator().manual_seed(int(p["train_seed"]))
        loader = torch.utils.data.DataLoader(ds, batch_size=tr["batch_size"], shuffle=True, drop_last=True,
                                             generator=gen)
        net, opt, loader = acc.prepare(net, opt, loader)
        raw = acc.unwrap_model(net)
        W = raw.W
        best: dict[str, tuple[float, int, dict[str, np.ndarray]]] = {}
        clean_mask = torch.ones(len(y_t), dtype=torch.bool)

        for epoch in range(1, tr["epochs"] + 1):
            for g in opt.param_groups:
                g["lr"] = lr_at(epoch - 1, tr)
            diag: dict[str, Any] = {}
            if method == "small_loss" and epoch > p["baselines"]["small_loss_warmup"]:
                clean_mask, diag = _small_loss_split(raw, x_img, x_txt, y_t, W, p, ml, acc.device, changed_train)
            raw.train()
            tot, nb = 0.0, 0
            for xb_i, xb_t, yb, idx in loader:
                z1, z2 = net(xb_i, xb_t)
                loss = _loss(method, epoch, z1, z2, yb, idx, W, p, ml, eps, clean_mask.to(yb.device))
                opt.zero_grad(set_to_none=True)
                acc.backward(loss)
                acc.clip_grad_norm_(net.parameters(), tr["clip"])
                opt.step()
                tot += float(loss.detach())
                nb += 1
            rec: dict[str, Any] = {"eps": eps, "epoch": epoch, "lr": opt.param_groups[0]["lr"],
                                   "loss": tot / max(nb, 1), **diag}
            if epoch % tr["eval_every"] == 0 or epoch == tr["epochs"]:
                s = score(raw)
                rec.update(s)
                for sel in ("noisy_val", "clean_val"):
                    if sel not in best or s[sel] > best[sel][0]:
                        best[sel] = (s[sel], epoch, export(raw))
                if method.startswith("rfcmh") and epoch > p["rfcmh"]["warmup_epochs"]:
                    w = _reliability_all(raw, x_img, x_txt, y_t, W, p, ml, acc.device)
                    rec["w_auroc_clean"] = _auroc(w, ~changed_train)
            epoch_log.append(rec)
            if acc.is_main_process:
                log.info(json.dumps(rec))
        best["last"] = (epoch_log[-1]["noisy_val"], tr["epochs"], export(raw))
        candidates.append((eps, best))
        acc.free_memory()

    # per selection rule: pick ε (label_smooth) and epoch on that rule's validation score;
    # `last` picks ε by the noisy-validation score at the final epoch.
    chosen: dict[str, dict[str, Any]] = {}
    for sel in p["train"]["selections"]:
        key = "noisy_val" if sel == "last" else sel
        eps, best = max(candidates, key=lambda c: c[1]["last" if sel == "last" else key][0])
        sc, ep, wts = best[sel]
        chosen[sel] = {"eps": eps, "epoch": ep, "val_score": sc, "weights": wts}
    metrics = {"selected": {s: {k: v for k, v in c.items() if k != "weights"} for s, c in chosen.items()},
               "train_wall_s": round(time.perf_counter() - t0, 3), "n_processes": acc.num_processes,
               "epochs_run": len(epoch_log)}
    auc = [r["w_auroc_clean"] for r in epoch_log if r.get("w_auroc_clean") is not None]
    if auc:
        metrics["w_auroc_clean_mean_after_warmup"] = float(np.mean(auc))
        metrics["w_auroc_clean_last"] = auc[-1]
    fr = [r for r in epoch_log if "sl_noisy_frac_in_clean" in r]
    if fr:
        metrics["small_loss_noisy_frac_in_clean_last"] = fr[-1]["sl_noisy_frac_in_clean"]
        metrics["small_loss_clean_frac_last"] = fr[-1]["sl_clean_frac"]

    acc.wait_for_everyone()
    if not acc.is_main_process:
        return None
    from paperflow.core.io import atomic_path, write_text

    arrays: dict[str, np.ndarray] = {}
    for sel, c in chosen.items():
        for k, v in c["weights"].items():
            arrays[f"{sel}/{k}"] = v
        arrays[f"{sel}/_epoch"] = np.array(c["epoch"])
    with atomic_path(out) as tmp:
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays)
    write_text(log_path, "".join(json.dumps(r, default=float) + "\n" for r in epoch_log))
    return metrics


def _loss(method: str, epoch: int, z1: Any, z2: Any, y: Any, idx: Any, W: Any, p: Mapping[str, Any], ml: bool,
          eps: float, clean_mask: Any) -> Any:
    import torch

    from paperflow.hashing import model as M

    if method in ("plain", "label_smooth") or (method == "small_loss" and epoch <= p["baselines"]["small_loss_warmup"]):
        b = p["baselines"]
        ones = torch.ones(z1.shape[0], device=z1.device)
        return (M.label_loss(z1, z2, W, y, b["ce_temp"], ml, eps=eps)
                + M.margin(z1, z2, y, ones, b["gamma"], ml, normalize="weights"))
    if method == "small_loss":
        b = p["baselines"]
        keep = clean_mask[idx]
        loss = b["small_loss_alpha"] * M.intra_code(z1, z2, b["tau"], b["q"])
        if int(keep.sum()) >= 2:
            c1, c2, yc = z1[keep], z2[keep], y[keep]
            ones = torch.ones(c1.shape[0], device=z1.device)
            loss = loss + M.label_loss(c1, c2, W, yc, b["ce_temp"], ml) + M.margin(c1, c2, yc, ones, b["gamma"], ml,
                                                                                   normalize="weights")
        return loss
    r = p["rfcmh"]
    if method == "rfcmh":
        a1 = M.admissibility_code(M.possibility_code(z1, W, r["proto_temp"], ml), y, r["kappa"], ml)
        a2 = M.admissibility_code(M.possibility_code(z2, W, r["proto_temp"], ml), y, r["kappa"], ml)
        intra = M.intra_code(z1, z2, r["tau"], r["q"])
        if epoch <= r["warmup_epochs"]:
            return M.warm_far(a1, a2, y) + r["alpha"] * intra
        w = M.reliability_code(a1, a2, y, r["tau_w"], ml)
        return (M.margin(z1, z2, y, w, r["gamma"], ml, normalize="weights") + r["alpha"] * intra
                + M.inter_code(z1, z2, y, r["gamma"], r["delta_shift"], ml))
    if method == "rfcmh_paper":
        a1 = M.admissibility_paper(M.possibility_paper(z1, W, r["proto_temp"]), y, r["kappa"], ml)
        a2 = M.admissibility_paper(M.possibility_paper(z2, W, r["proto_temp"]), y, r["kappa"], ml)
        intra = M.intra_paper(z1, z2, r["tau"], r["q"])
        if epoch <= r["warmup_epochs"]:
            return M.warm_far(a1, a2, y) + r["alpha"] * intra
        w = M.reliability_paper(a1, a2, y, r["delta_paper"], r["tau"], ml)
        return (M.margin(z1, z2, y, w, r["gamma"], ml, normalize="pairs")
                + r["alpha"] * (intra + M.inter_paper(z1, z2, r["gamma"], r["delta_shift"], r["tau"])))
    raise KeyError(f"unknown method {method!r}")


def _batches(n: int, bs: int):  # type: ignore[no-untyped-def]
    for s in range(0, n, bs):
        yield slice(s, min(n, s + bs))


def _small_loss_split(raw: Any, x_img: Any, x_txt: Any, y: Any, W: Any, p: Mapping[str, Any], ml: bool, device: Any,
                      changed: np.ndarray) -> tuple[Any, dict[str, Any]]:
    """Per-pair loss (eval mode) -> min-max -> 2-component GMM -> clean set (low-mean posterior > 0.5)."""
    import torch
    from sklearn.mixture import GaussianMixture

    from paperflow.hashing import model as M

    raw.eval()
    losses = []
    with torch.no_grad():
        for sl in _batches(len(y), 1024):
            z1, z2 = raw(x_img[sl].to(device), x_txt[sl].to(device))
            losses.append(M.label_loss(z1, z2, W, y[sl].to(device), p["baselines"]["ce_temp"], ml, reduce=False).cpu())
    ell = torch.cat(losses).numpy().astype(np.float64)
    ell = (ell - ell.min()) / max(ell.max() - ell.min(), 1e-12)
    gmm = GaussianMixture(n_components=2, random_state=0, max_iter=100, reg_covar=5e-4).fit(ell[:, None])
    post = gmm.predict_proba(ell[:, None])[:, int(np.argmin(gmm.means_.ravel()))]
    clean = post > 0.5
    diag = {"sl_clean_frac": float(clean.mean()),
            "sl_noisy_frac_in_clean": float(changed[clean].mean()) if clean.any() else None}
    return torch.from_numpy(clean), diag


def _reliability_all(raw: Any, x_img: Any, x_txt: Any, y: Any, W: Any, p: Mapping[str, Any], ml: bool,
                     device: Any) -> np.ndarray:
    """Reliability weights of every training pair (batches of the training batch size, index order)."""
    import torch

    from paperflow.hashing import model as M

    r = p["rfcmh"]
    raw.eval()
    out = []
    with torch.no_grad():
        for sl in _batches(len(y), p["train"]["batch_size"]):
            z1, z2 = raw(x_img[sl].to(device), x_txt[sl].to(device))
            yb = y[sl].to(device)
            if p["method"] == "rfcmh":
                a1 = M.admissibility_code(M.possibility_code(z1, W, r["proto_temp"], ml), yb, r["kappa"], ml)
                a2 = M.admissibility_code(M.possibility_code(z2, W, r["proto_temp"], ml), yb, r["kappa"], ml)
                w = M.reliability_code(a1, a2, yb, r["tau_w"], ml) if len(yb) > 1 else torch.full((len(yb),), 0.5)
            else:
                a1 = M.admissibility_paper(M.possibility_paper(z1, W, r["proto_temp"]), yb, r["kappa"], ml)
                a2 = M.admissibility_paper(M.possibility_paper(z2, W, r["proto_temp"]), yb, r["kappa"], ml)
                w = M.reliability_paper(a1, a2, yb, r["delta_paper"], r["tau"], ml)
            out.append(w.cpu())
    return torch.cat(out).numpy()
