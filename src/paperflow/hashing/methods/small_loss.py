"""`small_loss` [R] (the separation family, CMMQ / RSHNL-style sample selection, spec §4): `plain` for
`warmup` epochs; then at the start of each epoch a 2-component GMM on the min-max normalised per-pair
loss keeps the low-loss pairs; label losses use only those, the label-free intra loss all pairs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from paperflow.hashing.methods import Batch, Method, register
from paperflow.hashing.methods._common import SUPERVISED_KEYS, supervised


def _loss(b: Batch) -> Any:
    import torch

    from paperflow.hashing import model as M

    if b.epoch <= b.mp["warmup"]:
        return supervised(b)
    keep = b.clean_mask[b.idx]
    loss = b.mp["alpha"] * M.intra_code(b.z1, b.z2, b.mp["tau"], b.mp["q"])
    if int(keep.sum()) >= 2:
        c1, c2, yc = b.z1[keep], b.z2[keep], b.y[keep]
        ones = torch.ones(c1.shape[0], device=b.z1.device)
        loss = loss + M.label_loss(c1, c2, b.W, yc, b.mp["ce_temp"], b.multilabel) + M.margin(
            c1, c2, yc, ones, b.mp["gamma"], b.multilabel, normalize="weights")
    return loss


def _select(epoch: int, raw: Any, x_img: Any, x_txt: Any, y: Any, W: Any, mp: Mapping[str, Any], multilabel: bool,
            device: Any, changed: np.ndarray) -> tuple[Any, dict[str, Any]] | None:
    """Per-pair loss (eval mode) -> min-max -> 2-component GMM (seed 0) -> clean set (low-mean posterior
    > 0.5). Returns None during warm-up (keep the current mask)."""
    import torch
    from sklearn.mixture import GaussianMixture

    from paperflow.hashing import model as M

    if epoch <= mp["warmup"]:
        return None
    raw.eval()
    losses = []
    with torch.no_grad():
        for s in range(0, len(y), 1024):
            sl = slice(s, min(len(y), s + 1024))
            z1, z2 = raw(x_img[sl].to(device), x_txt[sl].to(device))
            losses.append(M.label_loss(z1, z2, W, y[sl].to(device), mp["ce_temp"], multilabel, reduce=False).cpu())
    ell = torch.cat(losses).numpy().astype(np.float64)
    ell = (ell - ell.min()) / max(ell.max() - ell.min(), 1e-12)
    gmm = GaussianMixture(n_components=2, random_state=0, max_iter=100, reg_covar=5e-4).fit(ell[:, None])
    post = gmm.predict_proba(ell[:, None])[:, int(np.argmin(gmm.means_.ravel()))]
    clean = post > 0.5
    diag = {"sl_clean_frac": float(clean.mean()),
            "sl_noisy_frac_in_clean": float(changed[clean].mean()) if clean.any() else None}
    return torch.from_numpy(clean), diag


METHOD = register(Method("small_loss", loss=_loss, before_epoch=_select, role="baseline", order=1,
                         config_keys={**SUPERVISED_KEYS, "warmup": "baselines.small_loss_warmup",
                                      "alpha": "baselines.small_loss_alpha", "tau": "rfcmh.tau", "q": "rfcmh.q"}))
