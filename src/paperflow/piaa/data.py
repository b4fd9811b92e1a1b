"""Multi-label data in the list form of akang-wang/PIAA (`imageset/*_labels.txt`): one line per image,
`<image_id> <label_id> <label_id> ...`, the image at `<img_root>/<image_id><ext>`. The same reader
serves VOC/COCO/NUS-WIDE lists and the synthetic scenes this module generates.

Synthetic scenes (`generate`): `image_size`² RGB images with 1..max_objects objects of distinct classes
(shape × colour), object areas long-tailed from 1 to 16 patches, larger objects drawn first, and a
background tint correlated with the largest object's class (context the [CLS] token can lean on). The
generator writes PNGs, `train_labels.txt`, `test_labels.txt`, `classes.txt` and a sidecar
`objects.jsonl` (per image: every object's class, bbox and visible pixel count) that only synthetic data
has: it gives the object-area terciles and the patch ownership used by the entanglement index.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from paperflow.core.io import atomic_path
from paperflow.core.seeding import stream

SHAPES = ("circle", "square", "triangle", "cross")
COLOURS = {"red": (220, 40, 40), "green": (40, 190, 60), "blue": (50, 80, 230)}
BACKGROUNDS = ((70, 70, 70), (150, 140, 100), (90, 130, 150), (140, 100, 140))  # context tints


def synthetic_classes() -> list[str]:
    """12 classes, 'red circle' ... 'blue cross' (class id = shape index * 3 + colour index)."""
    return [f"{c} {s}" for s in SHAPES for c in COLOURS]


class DataError(ValueError):
    """A record of an input list or sidecar is invalid; the message names the file, line and record."""


# ------------------------------------------------------------------------------------------- generator
def _shape_mask(shape: str, side: int) -> np.ndarray:
    yy, xx = np.mgrid[0:side, 0:side] + 0.5
    c = side / 2
    if shape == "circle":
        return (xx - c) ** 2 + (yy - c) ** 2 <= (side / 2) ** 2
    if shape == "square":
        return np.ones((side, side), bool)
    if shape == "triangle":  # apex at the top, base at the bottom
        return np.abs(xx - c) <= (yy / side) * (side / 2)
    if shape == "cross":
        w = max(1.0, side / 3)
        return (np.abs(xx - c) <= w / 2 + 0.25) | (np.abs(yy - c) <= w / 2 + 0.25)
    raise ValueError(shape)


def render_scene(rng: np.random.Generator, *, image_size: int, patch_size: int, max_objects: int,
                 max_area_patches: int, area_alpha: float, context_corr: float,
                 n_classes: int) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """One scene: uint8 [S, S, 3] and its objects [{class, bbox [x, y, w, h], area_px}]."""
    S = image_size
    n = int(rng.integers(1, max_objects + 1))
    classes = rng.choice(n_classes, size=n, replace=False)
    areas = np.arange(1, max_area_patches + 1, dtype=float)
    p = areas ** (-area_alpha)
    a = rng.choice(areas, size=n, p=p / p.sum())
    sides = np.clip(np.round(patch_size * np.sqrt(a)).astype(int), 2, S)
    order = np.argsort(-sides, kind="stable")  # large first, small on top
    ctx = int(classes[order[0]]) % len(BACKGROUNDS) if rng.random() < context_corr else int(
        rng.integers(len(BACKGROUNDS)))
    img = np.empty((S, S, 3), np.float32)
    img[:] = BACKGROUNDS[ctx]
    img += rng.normal(0, 8, size=img.shape)
    owner = np.full((S, S), -1, int)
    objs: list[dict[str, Any]] = []
    cols = list(COLOURS.values())
    for j, i in enumerate(order):
        c, side = int(classes[i]), int(sides[i])
        shape, colour = SHAPES[c // len(COLOURS)], cols[c % len(COLOURS)]
        m = _shape_mask(shape, side)
        cand = rng.integers(0, S - side + 1, size=(8, 2))  # the least-occluding of 8 random positions
        overlap = [int((owner[y:y + side, x:x + side][m] >= 0).sum()) for x, y in cand]
        x, y = (int(v) for v in cand[int(np.argmin(overlap))])
        rgb = np.clip(np.asarray(colour, float) + rng.normal(0, 15, 3), 0, 255)
        img[y:y + side, x:x + side][m] = rgb
        owner[y:y + side, x:x + side][m] = j
        objs.append({"class": c, "bbox": [x, y, side, side], "drawn_px": int(m.sum())})
    for j, o in enumerate(objs):
        o["area_px"] = int((owner == j).sum())
    # an object mostly hidden by later ones is not in the labels (nor in the objects list)
    objs = [{k: v for k, v in o.items() if k != "drawn_px"} for o in objs if o["area_px"] >= 0.3 * o["drawn_px"]]
    return np.clip(img, 0, 255).astype(np.uint8), objs


def generate(params: Mapping[str, Any], out: Path) -> dict[str, Any]:
    """Write the synthetic raw tree under `out` (atomically: a temp dir renamed at the end)."""
    from PIL import Image

    classes = synthetic_classes()
    stats: dict[str, Any] = {}
    with atomic_path(out) as tmp:
        (tmp / "images").mkdir(parents=True)
        (tmp / "classes.txt").write_text("\n".join(classes) + "\n")
        with open(tmp / "objects.jsonl", "w") as side:
            for split in ("train", "test"):
                rng = stream(int(params["seed"]), "piaa-synth", split)
                lines = []
                for k in range(int(params[f"n_{split}"])):
                    img, objs = render_scene(rng, image_size=params["image_size"], patch_size=params["patch_size"],
                                             max_objects=params["max_objects"],
                                             max_area_patches=params["max_area_patches"],
                                             area_alpha=params["area_alpha"], context_corr=params["context_corr"],
                                             n_classes=len(classes))
                    iid = f"{split}_{k:06d}"
                    Image.fromarray(img).save(tmp / "images" / f"{iid}.png")
                    lines.append(" ".join([iid] + [str(c) for c in sorted({o['class'] for o in objs})]))
                    side.write(json.dumps({"image_id": iid, "objects": objs}) + "\n")
                (tmp / f"{split}_labels.txt").write_text("\n".join(lines) + "\n")
                stats[f"n_{split}"] = len(lines)
    return stats


# ------------------------------------------------------------------------------------------------ loader
@dataclass
class Split:
    ids: list[str]
    images: np.ndarray  # uint8 [N, S, S, 3]
    labels: np.ndarray  # uint8 [N, C]


def read_classes(path: Path) -> list[str]:
    names = [ln.strip() for ln in Path(path).read_text().splitlines() if ln.strip()]
    if len(set(names)) != len(names):
        raise DataError(f"{path}: duplicate class names")
    return names


def read_list(list_file: Path, n_classes: int) -> tuple[list[str], np.ndarray]:
    """Parse a PIAA label list; a bad record raises DataError naming the file, line and record."""
    ids: list[str] = []
    rows: list[list[int]] = []
    seen: set[str] = set()
    for ln, line in enumerate(Path(list_file).read_text().splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        iid, labs = parts[0], parts[1:]
        if iid in seen:
            raise DataError(f"{list_file}:{ln}: image id {iid!r} listed twice")
        lab: list[int] = []
        for tok in labs:
            try:
                v = int(tok)
            except ValueError:
                raise DataError(f"{list_file}:{ln}: record {iid!r}: label {tok!r} is not an integer") from None
            if not 0 <= v < n_classes:
                raise DataError(f"{list_file}:{ln}: record {iid!r}: unknown label {v} (classes are 0..{n_classes - 1})")
            lab.append(v)
        seen.add(iid)
        ids.append(iid)
        rows.append(lab)
    if not ids:
        raise DataError(f"{list_file}: no records")
    y = np.zeros((len(ids), n_classes), np.uint8)
    for i, lab in enumerate(rows):
        y[i, lab] = 1
    return ids, y


def load_split(img_root: Path, list_file: Path, n_classes: int, *, image_size: int, ext: str) -> Split:
    """Read a list and its images (RGB, resized to image_size², bilinear); every image is checked to exist
    and decode before any output is written."""
    from PIL import Image, UnidentifiedImageError

    ids, y = read_list(list_file, n_classes)
    out = np.empty((len(ids), image_size, image_size, 3), np.uint8)
    for i, iid in enumerate(ids):
        p = Path(img_root) / f"{iid}{ext}"
        if not p.is_file():
            raise DataError(f"{list_file}: record {iid!r}: image {p} not found")
        try:
            with Image.open(p) as im:
                im = im.convert("RGB")
                if im.size != (image_size, image_size):
                    im = im.resize((image_size, image_size), Image.BILINEAR)
                out[i] = np.asarray(im)
        except (UnidentifiedImageError, OSError) as e:
            raise DataError(f"{list_file}: record {iid!r}: cannot read image {p}: {e}") from None
    return Split(ids, out, y)


def read_objects(path: Path, ids: Sequence[str], labels: np.ndarray, *, image_size: int, source_size: int,
                 patch_size: int, max_objects: int) -> dict[str, np.ndarray]:
    """Sidecar objects -> per image: `area` [N, C] (largest visible object of each positive class, in
    patches; 0 where absent), `patch_owner` [N, P] (index of the object covering most of each patch, −1 for
    background) and `object_class` [N, max_objects] (−1 padded). Checked against the labels."""
    recs: dict[str, list[dict[str, Any]]] = {}
    for ln, line in enumerate(Path(path).read_text().splitlines(), 1):
        if line.strip():
            r = json.loads(line)
            recs[r["image_id"]] = r["objects"]
    N, C = labels.shape
    g = image_size // patch_size
    scale = image_size / source_size
    area = np.zeros((N, C), np.float32)
    owner = np.full((N, g * g), -1, np.int16)
    ocls = np.full((N, max_objects), -1, np.int16)
    for i, iid in enumerate(ids):
        if iid not in recs:
            raise DataError(f"{path}: no objects record for image {iid!r}")
        objs = recs[iid]
        if len(objs) > max_objects:
            raise DataError(f"{path}: record {iid!r}: {len(objs)} objects > max_objects {max_objects}")
        cover = np.zeros((len(objs), g, g))
        for j, o in enumerate(objs):
            c = int(o["class"])
            if not 0 <= c < C or not labels[i, c]:
                raise DataError(f"{path}: record {iid!r}: object class {c} not among the image's labels")
            ocls[i, j] = c
            area[i, c] = max(area[i, c], o["area_px"] * scale**2 / patch_size**2)
            x, y, w, h = (v * scale for v in o["bbox"])
            for py in range(g):
                for px in range(g):
                    ox = max(0.0, min(x + w, (px + 1) * patch_size) - max(x, px * patch_size))
                    oy = max(0.0, min(y + h, (py + 1) * patch_size) - max(y, py * patch_size))
                    cover[j, py, px] = ox * oy / patch_size**2
        if len(objs):
            # objects are listed in drawing order: a later object occludes earlier ones
            best = np.full((g, g), -1)
            for j in range(len(objs)):
                best = np.where(cover[j] >= 0.5, j, best)
            owner[i] = best.reshape(-1)
        for c in np.flatnonzero(labels[i]):
            if area[i, c] <= 0:
                raise DataError(f"{path}: record {iid!r}: label {c} has no visible object")
    return {"area": area, "patch_owner": owner, "object_class": ocls}


def prepare(params: Mapping[str, Any], *, img_root: Path, train_list: Path, test_list: Path, classes_file: Path,
            objects: Path | None, out: Path) -> dict[str, Any]:
    """Read both splits through the loader and write one safetensors file (+ JSON meta) atomically."""
    from safetensors.numpy import save_file

    classes = read_classes(classes_file)
    C = len(classes)
    S, ext = int(params["image_size"]), str(params["image_ext"])
    tr = load_split(img_root, train_list, C, image_size=S, ext=ext)
    te = load_split(img_root, test_list, C, image_size=S, ext=ext)
    arrays = {"train_images": tr.images, "train_labels": tr.labels, "test_images": te.images,
              "test_labels": te.labels}
    if objects is not None:
        kw = dict(image_size=S, source_size=int(params.get("source_size") or S), patch_size=int(params["patch_size"]),
                  max_objects=int(params["max_objects"]))
        for name, split in (("train", tr), ("test", te)):
            for k, v in read_objects(objects, split.ids, split.labels, **kw).items():  # type: ignore[arg-type]
                arrays[f"{name}_{k}"] = v
    meta = {"classes": classes, "train_ids": tr.ids, "test_ids": te.ids, "has_objects": objects is not None,
            "image_size": S, "patch_size": int(params["patch_size"])}
    out = Path(out)
    with atomic_path(out) as tmp:
        tmp.mkdir(parents=True)
        save_file(arrays, str(tmp / "data.safetensors"))
        (tmp / "meta.json").write_text(json.dumps(meta))
    return {"n_train": len(tr.ids), "n_test": len(te.ids), "n_classes": C,
            "mean_labels_per_image": float(te.labels.sum(1).mean())}


def load_prepared(path: Path) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    from safetensors.numpy import load_file

    return load_file(str(Path(path) / "data.safetensors")), json.loads((Path(path) / "meta.json").read_text())


def captions(labels: np.ndarray, classes: Sequence[str]) -> list[str]:
    """Caption per image from its label set: 'a photo of a red circle and a blue cross' (label-id order)."""
    out = []
    for row in labels:
        names = [classes[c] for c in np.flatnonzero(row)]
        out.append("a photo of a " + " and a ".join(names))
    return out


def prompts(classes: Sequence[str], template: str = "a photo of a {}") -> list[str]:
    return [template.format(c) for c in classes]


