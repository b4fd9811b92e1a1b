"""Metrics of one trained model on the test split, each for seen and rare phrases (category
``frequency`` "r" = a colour x shape combination never positive in training):

- pointing accuracy: argmax_r S_p(r) lands on a grid cell that overlaps an object of phrase p
  (with its chance level: the mean share of such cells);
- box AP@0.5: boxes of the connected components of the upsampled map thresholded at
  min + t (max - min), for each image's top-scoring phrases, scored by the component's peak; AP per
  category from pycocotools COCOeval (iouThrs = [0.5]), averaged over seen / rare categories;
- phrase mAP: image-level AP of the pooled score per phrase (sklearn), averaged over seen / rare;
- attribute-swap probe: P(pooled score of a present phrase > that of an absent phrase differing in
  colour only / shape only);
- GACO diagnostics on positive pairs: within-object peak contrast (max_in S - mean_in S) / std_map S and
  in/out contrast (mean_in S - mean_out S) / std_map S.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from paperflow.expalign.data import Split
from paperflow.expalign.losses import pooled_logits


@torch.no_grad()
def score_maps(model: Any, split: Split, txt: Mapping[str, torch.Tensor], batch: int = 200) -> torch.Tensor:
    model.eval()
    imgs = torch.from_numpy(split.images)
    return torch.cat([model(imgs[i:i + batch], txt) for i in range(0, len(imgs), batch)])


def cell_overlap(split: Split, H: int, W: int) -> torch.Tensor:
    """[M, H, W] bool: cells touching each instance's mask."""
    if len(split.inst_mask) == 0:
        return torch.zeros(0, H, W, dtype=torch.bool)
    return F.adaptive_max_pool2d(torch.from_numpy(split.inst_mask).float()[:, None], (H, W))[:, 0] > 0


def _split_mean(x: np.ndarray, rare: np.ndarray) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for name, sel in (("seen", ~rare), ("rare", rare), ("all", np.ones_like(rare))):
        out[name] = float(x[sel].mean()) if sel.any() else None
        out[f"n_{name}"] = int(sel.sum())  # type: ignore[assignment]
    return out


def pointing(S: torch.Tensor, split: Split, rare_p: np.ndarray) -> dict[str, Any]:
    N, P, H, W = S.shape
    ov = cell_overlap(split, H, W)
    # union of the phrase's instances in the image
    key = split.inst_image * P + split.inst_cat
    uniq, inv = np.unique(key, return_inverse=True)
    union = torch.zeros(len(uniq), H, W, dtype=torch.bool)
    union.index_put_((torch.from_numpy(inv),), ov, accumulate=True)
    b, p = uniq // P, uniq % P
    am = S[torch.from_numpy(b), torch.from_numpy(p)].flatten(1).argmax(1)
    hit = union.flatten(1)[torch.arange(len(uniq)), am].numpy().astype(float)
    chance = union.flatten(1).float().mean(1).numpy()
    r = rare_p[p]
    return {"acc": _split_mean(hit, r), "chance": _split_mean(chance, r)}


def phrase_map(scores: np.ndarray, split: Split, rare_p: np.ndarray) -> dict[str, Any]:
    from sklearn.metrics import average_precision_score

    aps = np.full(scores.shape[1], np.nan)
    prev = np.full(scores.shape[1], np.nan)
    for p in range(scores.shape[1]):
        valid = split.pos[:, p] | split.neg[:, p]
        y = split.pos[valid, p]
        if y.any() and (~y).any() and np.isfinite(scores[valid, p]).all():
            aps[p] = average_precision_score(y, scores[valid, p])
            prev[p] = y.mean()
    ok = ~np.isnan(aps)
    return {"map": _split_mean(aps[ok], rare_p[ok]), "chance": _split_mean(prev[ok], rare_p[ok]),
            "per_phrase": [None if np.isnan(a) else float(a) for a in aps]}


def swap_pairs(cats: Sequence[Mapping[str, Any]]) -> dict[str, list[tuple[int, int]]]:
    """(p, q) index pairs where q differs from p in exactly one attribute (colour or shape)."""
    out: dict[str, list[tuple[int, int]]] = {"colour": [], "shape": []}
    if not all("colour" in c and "shape" in c for c in cats):
        return out
    for i, a in enumerate(cats):
        for j, b in enumerate(cats):
            if a.get("size") != b.get("size") or i == j:
                continue
            if a["shape"] == b["shape"] and a["colour"] != b["colour"]:
                out["colour"].append((i, j))
            elif a["colour"] == b["colour"] and a["shape"] != b["shape"]:
                out["shape"].append((i, j))
    return out


def attribute_swap(scores: np.ndarray, split: Split, cats: Sequence[Mapping[str, Any]],
                   rare_p: np.ndarray) -> dict[str, Any]:
    res: dict[str, Any] = {}
    wins_all: list[np.ndarray] = []
    rare_all: list[np.ndarray] = []
    for kind, pairs in swap_pairs(cats).items():
        if not pairs:
            res[kind] = None
            continue
        pa = np.array(pairs)
        ok = split.pos[:, pa[:, 0]] & split.neg[:, pa[:, 1]]  # [N, n_pairs]
        n_i, k = np.nonzero(ok)
        wins = (scores[n_i, pa[k, 0]] > scores[n_i, pa[k, 1]]).astype(float)
        r = rare_p[pa[k, 0]]
        res[kind] = _split_mean(wins, r)
        wins_all.append(wins)
        rare_all.append(r)
    res["both"] = _split_mean(np.concatenate(wins_all), np.concatenate(rare_all)) if wins_all else None
    return res


def concentration(S: torch.Tensor, split: Split, rare_p: np.ndarray) -> dict[str, Any]:
    N, P, H, W = S.shape
    from paperflow.expalign.losses import grid_masks

    g = grid_masks(torch.from_numpy(split.inst_mask), H, W).flatten(1).float()
    maps = S[torch.from_numpy(split.inst_image), torch.from_numpy(split.inst_cat)].flatten(1)
    sd = maps.std(1) + 1e-6
    n_in = g.sum(1)
    mean_in = (maps * g).sum(1) / n_in.clamp(min=1)
    max_in = maps.masked_fill(g == 0, float("-inf")).amax(1)
    mean_out = (maps * (1 - g)).sum(1) / (g.shape[1] - n_in).clamp(min=1)
    peak = ((max_in - mean_in) / sd).numpy()
    inout = ((mean_in - mean_out) / sd).numpy()
    r = rare_p[split.inst_cat]
    multi = n_in.numpy() >= 2
    return {"within_peak": _split_mean(peak[multi], r[multi]), "in_out": _split_mean(inout, r)}


def box_ap(S: torch.Tensor, scores: np.ndarray, split: Split, rare_p: np.ndarray, *, threshold: float,
           phrases_per_image: int) -> dict[str, Any]:
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval
    from scipy import ndimage

    N, P, H, W = S.shape
    size = split.images.shape[1]
    gt = {"images": [{"id": int(i) + 1, "width": size, "height": size} for i in range(N)],
          "categories": [{"id": p + 1, "name": str(p)} for p in range(P)],
          "annotations": [{"id": k + 1, "image_id": int(split.inst_image[k]) + 1,
                           "category_id": int(split.inst_cat[k]) + 1, "bbox": [float(v) for v in split.inst_box[k]],
                           "area": float(split.inst_mask[k].sum()), "iscrowd": 0}
                          for k in range(len(split.inst_cat))]}
    # federated (LVIS-style) labels: boxes are only proposed for phrases verified present or absent in an
    # image (COCOeval itself has no notion of unverified categories; the synthetic labels are exhaustive)
    dets = []
    top = np.argsort(-scores, axis=1)[:, :phrases_per_image]
    up = F.interpolate(S, size=(size, size), mode="bilinear", align_corners=False)
    for i in range(N):
        for p in top[i]:
            if not (split.pos[i, p] or split.neg[i, p]):
                continue
            m = up[i, p].numpy()
            lo, hi = m.min(), m.max()
            if hi <= lo:
                continue
            lab, n = ndimage.label(m >= lo + threshold * (hi - lo))
            for c, sl in enumerate(ndimage.find_objects(lab), start=1):
                ys, xs = sl
                peak = float(m[sl][lab[sl] == c].max())
                dets.append({"image_id": i + 1, "category_id": int(p) + 1,
                             "bbox": [float(xs.start), float(ys.start), float(xs.stop - xs.start),
                                      float(ys.stop - ys.start)], "score": peak})
    if not dets or not gt["annotations"]:
        return {"ap50": {"seen": None, "rare": None, "all": None}, "n_dets": len(dets)}
    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO()
        coco.dataset = gt
        coco.createIndex()
        cd = coco.loadRes(dets)
        ev = COCOeval(coco, cd, iouType="bbox")
        ev.params.iouThrs = np.array([0.5])
        ev.params.maxDets = [100]
        ev.params.areaRng = [ev.params.areaRng[0]]
        ev.params.areaRngLbl = ["all"]
        ev.evaluate()
        ev.accumulate()
    prec = ev.eval["precision"][0, :, :, 0, 0]  # [R, K]
    ap = np.array([prec[:, k][prec[:, k] > -1].mean() if (prec[:, k] > -1).any() else np.nan
                   for k in range(prec.shape[1])])
    cat_ids = ev.params.catIds
    rare_k = np.array([rare_p[c - 1] for c in cat_ids])
    ok = ~np.isnan(ap)
    return {"ap50": _split_mean(ap[ok], rare_k[ok]), "n_dets": len(dets)}


def evaluate(model: Any, split: Split, txt: Mapping[str, torch.Tensor], cats: Sequence[Mapping[str, Any]], *,
             rho: float, pooling: str, box_threshold: float, phrases_per_image: int,
             n_examples: int = 0) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    rare_p = np.array([c.get("frequency") == "r" for c in cats])
    S = score_maps(model, split, txt)
    scores = pooled_logits(S, rho, pooling).numpy()
    m = {
        "pointing": pointing(S, split, rare_p),
        "phrase_map": phrase_map(scores, split, rare_p),
        "attribute_swap": attribute_swap(scores, split, cats, rare_p),
        "concentration": concentration(S, split, rare_p),
        "box": box_ap(S, scores, split, rare_p, threshold=box_threshold, phrases_per_image=phrases_per_image),
        "n_test_images": int(len(split.images)), "n_rare_phrases": int(rare_p.sum()),
    }
    ex: dict[str, np.ndarray] = {}
    if n_examples:
        ex = {"S": S[:n_examples].numpy().astype(np.float32), "images": split.images[:n_examples],
              "pos": split.pos[:n_examples]}
        head = getattr(model, "head", None)
        if head is not None and getattr(head, "pool", None) == "expect":
            w, mask = model.text(txt)
            with torch.no_grad():
                x = model.encoder(model.prep(torch.from_numpy(split.images[:n_examples])))
                ex["token_weights"] = head.token_weights(x, w, mask).numpy()
    return m, ex
