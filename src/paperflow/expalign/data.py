"""Data: a synthetic colour x shape x size generator that writes COCO-format JSON + a uint8 image array,
and the one loader that reads it — and real COCO / LVIS annotation files — into training arrays.

COCO JSON written by :func:`generate` (LVIS-compatible where LVIS has a field for it):
- ``images``: ``id``, ``file_name``, ``width``, ``height``, ``array_index`` (row of the image array),
  ``pos_phrases`` / ``neg_phrases`` (phrases present / verified absent in the image);
- ``categories``: ``id``, ``name`` (the phrase, e.g. "small red circle"), ``colour``, ``shape``, ``size``,
  ``frequency`` ("r" for the held-out rare colour x shape combinations, "f" otherwise, as in LVIS);
- ``annotations``: ``id``, ``image_id``, ``category_id``, ``bbox`` [x, y, w, h], ``area``,
  ``segmentation`` (COCO RLE from ``pycocotools.mask.encode``), ``iscrowd`` 0.

Real files: COCO (negatives = every category not annotated, COCO is exhaustive), LVIS (negatives =
``neg_category_ids``; categories neither positive nor negative are ignored by the losses, "federated").
Images come from the array (``array_index``) or, for real data, ``<image_dir>/<file_name>``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 40, 40), "green": (40, 190, 60), "blue": (50, 70, 230),
    "yellow": (230, 220, 40), "magenta": (210, 50, 210), "cyan": (40, 210, 220),
}
SHAPES = ("circle", "square", "triangle", "diamond", "cross")
SIZES = ("small", "large")
FILLER = "there is a {} in the picture"
PLAIN = "{}"
PROMPT_STYLES = {"plain": PLAIN, "filler": FILLER}


class DataError(ValueError):
    """A malformed annotation file; the message names the offending record."""


# --- vocabulary ---------------------------------------------------------------------------------------

def vocabulary(colours: Sequence[str], shapes: Sequence[str], sizes: Sequence[str]) -> list[dict[str, str]]:
    """Every size x colour x shape phrase, in a fixed order."""
    return [{"name": f"{sz} {c} {s}", "colour": c, "shape": s, "size": sz}
            for c in colours for s in shapes for sz in sizes]


def rare_combos(colours: Sequence[str], shapes: Sequence[str], frac: float, seed: int) -> set[tuple[str, str]]:
    """The held-out colour x shape combinations (never positive in training). Each colour and each shape
    keeps at least one seen combination, so every attribute word is seen in training."""
    combos = [(c, s) for c in colours for s in shapes]
    n_rare = int(round(frac * len(combos)))
    rng = np.random.default_rng([seed, 7])
    for _ in range(1000):
        pick = {combos[i] for i in rng.choice(len(combos), size=n_rare, replace=False)}
        seen = [x for x in combos if x not in pick]
        if {c for c, _ in seen} == set(colours) and {s for _, s in seen} == set(shapes):
            return pick
    raise ValueError("cannot hold out that many combinations and keep every attribute seen")


# --- rendering ---------------------------------------------------------------------------------------

def shape_mask(shape: str, cx: float, cy: float, r: float, H: int, W: int) -> np.ndarray:
    yy, xx = np.mgrid[0:H, 0:W].astype(float) + 0.5
    dx, dy = xx - cx, yy - cy
    if shape == "circle":
        m = dx * dx + dy * dy <= r * r
    elif shape == "square":
        m = (np.abs(dx) <= r * 0.85) & (np.abs(dy) <= r * 0.85)
    elif shape == "diamond":
        m = np.abs(dx) + np.abs(dy) <= r
    elif shape == "triangle":
        m = (dy <= r * 0.8) & (dy >= -r) & (np.abs(dx) <= (dy + r) * 0.6)
    elif shape == "cross":
        m = ((np.abs(dx) <= r * 0.3) & (np.abs(dy) <= r)) | ((np.abs(dy) <= r * 0.3) & (np.abs(dx) <= r))
    else:
        raise ValueError(f"unknown shape {shape!r}")
    return m


@dataclass
class SynthCfg:
    n_train: int = 3000
    n_val: int = 500
    n_test: int = 600
    image_size: int = 32
    max_objects: int = 3
    colours: list[str] = field(default_factory=lambda: list(COLOURS))
    shapes: list[str] = field(default_factory=lambda: list(SHAPES))
    sizes: list[str] = field(default_factory=lambda: list(SIZES))
    radius: dict[str, list[float]] = field(default_factory=lambda: {"small": [3.5, 4.5], "large": [7.0, 9.0]})
    rare_frac: float = 0.2
    colour_jitter: int = 20
    noise: float = 12.0
    seed: int = 0

    @classmethod
    def from_params(cls, p: Mapping[str, Any]) -> "SynthCfg":
        return cls(**{k: v for k, v in p.items() if k in cls.__dataclass_fields__})


def _rle(mask: np.ndarray) -> dict[str, Any]:
    from pycocotools import mask as mask_utils

    r = mask_utils.encode(np.asfortranarray(mask.astype(np.uint8)))
    r["counts"] = r["counts"].decode("ascii")
    return r


def render_split(cfg: SynthCfg, split: str, n: int) -> tuple[dict[str, Any], np.ndarray]:
    """One split as (COCO dict, uint8 image array [n, S, S, 3]). Train images never contain a rare
    combination; test images draw every combination uniformly."""
    S = cfg.image_size
    vocab = vocabulary(cfg.colours, cfg.shapes, cfg.sizes)
    rare = rare_combos(cfg.colours, cfg.shapes, cfg.rare_frac, cfg.seed)
    cats = [{"id": i + 1, **v, "frequency": "r" if (v["colour"], v["shape"]) in rare else "f"}
            for i, v in enumerate(vocab)]
    allowed = [c for c in cats if split != "train" or c["frequency"] == "f"]
    by_name = {c["name"]: c for c in cats}
    rng = np.random.default_rng([cfg.seed, 1 if split == "train" else 2])
    imgs = np.empty((n, S, S, 3), np.uint8)
    images, anns = [], []
    for i in range(n):
        bg = rng.integers(90, 150, size=3)
        canvas = np.clip(bg[None, None, :] + rng.normal(0, cfg.noise, (S, S, 3)), 0, 255)
        occupied = np.zeros((S, S), bool)
        k = int(rng.integers(1, cfg.max_objects + 1))
        present: list[str] = []
        for _ in range(k):
            for _try in range(30):
                c = allowed[int(rng.integers(len(allowed)))]
                if c["name"] in present:
                    continue
                lo, hi = cfg.radius[c["size"]]
                r = float(rng.uniform(lo, hi))
                cx, cy = rng.uniform(r, S - r, size=2)
                m = shape_mask(c["shape"], cx, cy, r, S, S)
                grown = np.zeros_like(m)
                ys, xs = np.nonzero(m)
                if ys.size == 0:
                    continue
                grown[max(ys.min() - 1, 0):ys.max() + 2, max(xs.min() - 1, 0):xs.max() + 2] = True
                if (grown & occupied).any():
                    continue
                occupied |= grown
                col = np.clip(np.array(COLOURS[c["colour"]]) + rng.integers(-cfg.colour_jitter, cfg.colour_jitter + 1, 3),
                              0, 255)
                canvas[m] = col
                x0, y0, x1, y1 = xs.min(), ys.min(), xs.max() + 1, ys.max() + 1
                anns.append({"id": len(anns) + 1, "image_id": i + 1, "category_id": c["id"],
                             "bbox": [float(x0), float(y0), float(x1 - x0), float(y1 - y0)],
                             "area": float(m.sum()), "segmentation": _rle(m), "iscrowd": 0})
                present.append(c["name"])
                break
        imgs[i] = canvas.astype(np.uint8)
        neg = [c["name"] for c in cats if c["name"] not in present]
        images.append({"id": i + 1, "file_name": f"{split}_{i:06d}.png", "width": S, "height": S,
                       "array_index": i, "pos_phrases": present, "neg_phrases": neg})
    assert all(p in by_name for im in images for p in im["pos_phrases"])
    coco = {"info": {"description": f"expalign synthetic {split} split", "version": "1"},
            "images": images, "annotations": anns, "categories": cats}
    return coco, imgs


def subset(coco: Mapping[str, Any], imgs: np.ndarray, lo: int, hi: int, split: str) -> tuple[dict[str, Any], np.ndarray]:
    """Images lo..hi-1 of a rendered split as a COCO split of their own (ids, file names, array rows and
    annotation ids renumbered from 1 / 0)."""
    keep = coco["images"][lo:hi]
    new_id = {int(im["id"]): j + 1 for j, im in enumerate(keep)}
    images = [{**im, "id": new_id[int(im["id"])], "file_name": f"{split}_{j:06d}.png", "array_index": j}
              for j, im in enumerate(keep)]
    anns = [a for a in coco["annotations"] if int(a["image_id"]) in new_id]
    anns = [{**a, "id": j + 1, "image_id": new_id[int(a["image_id"])]} for j, a in enumerate(anns)]
    out = {"info": {**coco["info"], "description": f"expalign synthetic {split} split"},
           "images": images, "annotations": anns, "categories": coco["categories"]}
    return out, np.ascontiguousarray(imgs[lo:hi])


def generate(cfg: SynthCfg, outdir: Path) -> dict[str, Path]:
    """Write annotations_<split>.json and images_<split>.npy for train, val and test (atomically).
    The validation split is held out from the training stream: the generator renders n_train + n_val
    training images (rare combinations never positive) and writes the last n_val as `val`, so the
    training images do not depend on n_val. Test draws every combination (its own stream)."""
    from paperflow.core.io import atomic_path, write_json

    outdir = Path(outdir)
    coco_tr, imgs_tr = render_split(cfg, "train", cfg.n_train + cfg.n_val)
    coco_te, imgs_te = render_split(cfg, "test", cfg.n_test)
    parts = {"train": subset(coco_tr, imgs_tr, 0, cfg.n_train, "train"),
             "val": subset(coco_tr, imgs_tr, cfg.n_train, cfg.n_train + cfg.n_val, "val"),
             "test": (coco_te, imgs_te)}
    out: dict[str, Path] = {}
    for split, (coco, imgs) in parts.items():
        write_json(outdir / f"annotations_{split}.json", coco)
        with atomic_path(outdir / f"images_{split}.npy") as tmp:
            with open(tmp, "wb") as f:
                np.save(f, imgs)
        out[split] = outdir / f"annotations_{split}.json"
    return out


# --- the loader ---------------------------------------------------------------------------------------

@dataclass
class Split:
    """A loaded split at the training resolution.

    images  uint8 [N, S, S, 3]; pos, neg bool [N, P] (prompt p is present / verified absent);
    inst_image int64 [M] (row of its image), inst_cat int64 [M] (prompt index), inst_box float32 [M, 4]
    (x, y, w, h in pixels of the S x S image), inst_mask uint8 [M, S, S]; image_ids int64 [N] (COCO ids).
    """

    images: np.ndarray
    pos: np.ndarray
    neg: np.ndarray
    inst_image: np.ndarray
    inst_cat: np.ndarray
    inst_box: np.ndarray
    inst_mask: np.ndarray
    image_ids: np.ndarray

    def arrays(self) -> dict[str, np.ndarray]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def phrase_of(cat: Mapping[str, Any]) -> str:
    """The prompt text of a category: its name, with LVIS underscores as spaces."""
    return str(cat["name"]).replace("_", " ").strip()


def _read_image(img: Mapping[str, Any], array: np.ndarray | None, image_dir: Path | None, where: str) -> np.ndarray:
    if array is not None:
        idx = img.get("array_index")
        if idx is None or not (0 <= int(idx) < len(array)):
            raise DataError(f"{where}: image id {img['id']} ({img.get('file_name')}) is missing from the image "
                            f"array (array_index {idx}, array has {len(array)} images)")
        return np.asarray(array[int(idx)])
    assert image_dir is not None
    p = image_dir / str(img.get("file_name", ""))
    if not p.is_file():
        raise DataError(f"{where}: image id {img['id']}: file {p} does not exist")
    from PIL import Image

    with Image.open(p) as im:
        return np.asarray(im.convert("RGB"))


def _resize(a: np.ndarray, S: int, nearest: bool = False) -> np.ndarray:
    if a.shape[0] == S and a.shape[1] == S:
        return a
    from PIL import Image

    im = Image.fromarray(a)
    return np.asarray(im.resize((S, S), Image.NEAREST if nearest else Image.BILINEAR))


def load_coco(ann_path: Path, *, images: Path, image_size: int, phrases: Sequence[str] | None = None,
              max_images: int | None = None) -> tuple[Split, list[dict[str, Any]]]:
    """Validate and read one COCO/LVIS-style split. `images` is a .npy array (synthetic) or a directory of
    image files. `phrases` fixes the prompt order (train and test share the vocabulary); by default the
    file's categories in order. Every record is checked before anything is returned; an error names it."""
    import json

    from pycocotools import mask as mask_utils

    ann_path = Path(ann_path)
    where = ann_path.name
    try:
        d = json.loads(ann_path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise DataError(f"{ann_path}: not a readable JSON annotation file ({e})") from e
    for key in ("images", "annotations", "categories"):
        if key not in d:
            raise DataError(f"{where}: no '{key}' list (not a COCO-format file)")
    cats = {int(c["id"]): c for c in d["categories"]}
    names = [phrase_of(c) for c in d["categories"]]
    vocab = list(phrases) if phrases is not None else names
    pidx = {p: i for i, p in enumerate(vocab)}
    cat_p: dict[int, int] = {}
    for cid, c in cats.items():
        if phrase_of(c) in pidx:
            cat_p[cid] = pidx[phrase_of(c)]
    imgs = list(d["images"])
    if max_images is not None:
        imgs = imgs[:max_images]
    img_row = {int(im["id"]): i for i, im in enumerate(imgs)}
    all_img_ids = {int(im["id"]) for im in d["images"]}
    array = None
    image_dir = None
    images = Path(images)
    if images.suffix == ".npy":
        if not images.is_file():
            raise DataError(f"{where}: image array {images} does not exist")
        array = np.load(images, mmap_mode="r", allow_pickle=False)
    else:
        image_dir = images
    # annotation checks first (cheap, and before any image is read)
    by_img: dict[int, list[dict[str, Any]]] = {}
    for a in d["annotations"]:
        aid, iid, cid = a.get("id"), int(a["image_id"]), int(a["category_id"])
        if iid not in all_img_ids:
            raise DataError(f"{where}: annotation id {aid} refers to image id {iid}, which is not in 'images'")
        if cid not in cats:
            raise DataError(f"{where}: annotation id {aid} (image id {iid}) has unknown category_id {cid}")
        if iid not in img_row:
            continue
        im = imgs[img_row[iid]]
        x, y, w, h = (float(v) for v in a["bbox"])
        W_, H_ = float(im["width"]), float(im["height"])
        tol = 1e-3
        if w <= 0 or h <= 0 or x < -tol or y < -tol or x + w > W_ + tol or y + h > H_ + tol:
            raise DataError(f"{where}: annotation id {aid} (image id {iid}): bbox {a['bbox']} lies outside the "
                            f"{int(W_)}x{int(H_)} image or is empty")
        by_img.setdefault(iid, []).append(a)
    S = image_size
    P = len(vocab)
    N = len(imgs)
    out_imgs = np.empty((N, S, S, 3), np.uint8)
    pos = np.zeros((N, P), bool)
    neg = np.zeros((N, P), bool)
    ii, ic, ib, im_ = [], [], [], []
    name_to_p = {n: pidx[n] for n in vocab}
    lvis_style = any("neg_category_ids" in im for im in imgs)
    for r, img in enumerate(imgs):
        a_img = _read_image(img, array, image_dir, where)
        if a_img.ndim != 3 or a_img.shape[2] != 3:
            raise DataError(f"{where}: image id {img['id']} has shape {a_img.shape}, expected H x W x 3")
        H0, W0 = a_img.shape[:2]
        if (H0, W0) != (int(img["height"]), int(img["width"])):
            raise DataError(f"{where}: image id {img['id']} is {W0}x{H0} but the record says "
                            f"{img['width']}x{img['height']}")
        out_imgs[r] = _resize(a_img.astype(np.uint8), S)
        sx, sy = S / W0, S / H0
        for a in by_img.get(int(img["id"]), []):
            cid = int(a["category_id"])
            if cid not in cat_p:
                continue
            p = cat_p[cid]
            pos[r, p] = True
            seg = a.get("segmentation")
            if isinstance(seg, dict):
                rle = dict(seg)
                if isinstance(rle.get("counts"), list):
                    rle = mask_utils.frPyObjects(rle, H0, W0)
                m = mask_utils.decode(rle)
            elif isinstance(seg, list) and seg:
                m = mask_utils.decode(mask_utils.merge(mask_utils.frPyObjects(seg, H0, W0)))
            else:  # no mask: the box
                m = np.zeros((H0, W0), np.uint8)
                x, y, w, h = a["bbox"]
                m[int(y):int(np.ceil(y + h)), int(x):int(np.ceil(x + w))] = 1
            x, y, w, h = (float(v) for v in a["bbox"])
            ii.append(r)
            ic.append(p)
            ib.append([x * sx, y * sy, w * sx, h * sy])
            im_.append(_resize((m * 255).astype(np.uint8), S, nearest=True) > 127)
        if "pos_phrases" in img or "neg_phrases" in img:
            for ph in img.get("pos_phrases", []):
                if ph not in name_to_p:
                    raise DataError(f"{where}: image id {img['id']}: positive phrase {ph!r} is not a category")
                pos[r, name_to_p[ph]] = True
            for ph in img.get("neg_phrases", []):
                if ph not in name_to_p:
                    raise DataError(f"{where}: image id {img['id']}: negative phrase {ph!r} is not a category")
                neg[r, name_to_p[ph]] = True
        elif lvis_style:
            for cid in img.get("neg_category_ids", []):
                if int(cid) not in cats:
                    raise DataError(f"{where}: image id {img['id']} lists unknown neg_category_id {cid}")
                if int(cid) in cat_p:
                    neg[r, cat_p[int(cid)]] = True
        else:  # COCO: exhaustive labels
            neg[r] = ~pos[r]
        if (pos[r] & neg[r]).any():
            bad = [vocab[j] for j in np.nonzero(pos[r] & neg[r])[0]]
            raise DataError(f"{where}: image id {img['id']}: phrases {bad} are both positive and negative")
    split = Split(
        images=out_imgs, pos=pos, neg=neg,
        inst_image=np.asarray(ii, np.int64), inst_cat=np.asarray(ic, np.int64),
        inst_box=np.asarray(ib, np.float32).reshape(-1, 4),
        inst_mask=(np.stack(im_) if im_ else np.zeros((0, S, S), bool)).astype(np.uint8),
        image_ids=np.asarray([int(im["id"]) for im in imgs], np.int64))
    cat_list = [{"phrase": vocab[i], "frequency": "f", "index": i} for i in range(P)]
    for c in d["categories"]:
        if phrase_of(c) in pidx:
            e = cat_list[pidx[phrase_of(c)]]
            e.update({k: c[k] for k in ("colour", "shape", "size") if k in c})
            e["frequency"] = str(c.get("frequency", "f"))
    return split, cat_list


def shared_images(json_a: Path, images_a: Path, json_b: Path, images_b: Path) -> list[str]:
    """File names two splits share when they read the same image source (a val split that overlaps test
    would leak test images into model selection). Different sources share nothing by construction."""
    import json

    if Path(images_a).resolve() != Path(images_b).resolve():
        return []
    def key(im: Mapping[str, Any]) -> str | None:  # LVIS records may carry only coco_url
        f = im.get("file_name") or str(im.get("coco_url") or "").rsplit("/", 1)[-1]
        return str(f) if f else None

    names = [{key(im) for im in json.loads(Path(p).read_text())["images"]} - {None} for p in (json_a, json_b)]
    return sorted(names[0] & names[1])


def save_split(path: Path, split: Split) -> None:
    from safetensors.numpy import save_file

    from paperflow.core.io import atomic_path

    with atomic_path(path) as tmp:
        save_file({k: np.ascontiguousarray(v) for k, v in split.arrays().items()}, str(tmp))


def read_split(path: Path) -> Split:
    from safetensors.numpy import load_file

    d = load_file(str(path))
    return Split(**{k: d[k] for k in Split.__dataclass_fields__})
