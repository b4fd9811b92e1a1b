"""DocVQA-style data: annotation JSON + per-page OCR JSON, a generator that writes them, and the loader.

On disk (the same layout for our synthetic pages and for staged DocVQA / BoundingDocs files):

    <root>/<split>.json      {"dataset_name", "dataset_split", "dataset_version", "data": [record, ...]}
        record = {"questionId": int, "question": str, "docId": str|int, "image": "documents/<stem>.png",
                  "answers": [str, ...], "evidence_bbox": [x0, y0, x1, y1]}   (page-normalised xyxy, as
                  in BoundingDocs; DocVQA proper has no box — such records are refused by this study);
                  DocVQA's other record fields (OPTIONAL_FIELDS) are allowed, any other key is refused
    <root>/documents/<stem>.png   the page image (must exist; the synthetic pages are grey block renderings)
    <root>/ocr/<stem>.json   Microsoft Read / DocVQA OCR: {"recognitionResults": [{"page": 1, "width": W,
                  "height": H, "unit": "pixel", "lines": [{"boundingBox": [8 numbers], "text": str,
                  "words": [{"boundingBox": [8 numbers], "text": str}, ...]}, ...]}]}

`load_split` reads both and validates every record, naming the file and the record on any error.
`featurise` turns pages into the tensors the models read: one token per OCR line (reading order) and
the map from grid cells to lines.
"""

from __future__ import annotations

import json
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from paperflow.core.io import atomic_path, write_json
from paperflow.core.seeding import stream

CELL_PX = 8  # pixels per grid cell in the synthetic pages (a 32-cell page is 256 × 256 px)
REQUIRED_FIELDS = ("questionId", "question", "docId", "image", "answers", "evidence_bbox")
# DocVQA (SP-DocVQA v1.0) record fields this study does not use but accepts
OPTIONAL_FIELDS = frozenset({"question_types", "ucsf_document_id", "ucsf_document_page_no", "data_split",
                             "answer_type", "page_ids", "answer_page_idx"})


class DataError(ValueError):
    """A malformed annotation or OCR file; the message names the file and the record."""


# ---- page model ------------------------------------------------------------------------------------

@dataclass
class Word:
    text: str
    box: tuple[float, float, float, float]  # page-normalised xyxy


@dataclass
class Line:
    text: str
    box: tuple[float, float, float, float]
    words: list[Word] = field(default_factory=list)


@dataclass
class QA:
    qid: int
    question: str
    doc: str
    image: str
    answers: list[str]
    bbox: tuple[float, float, float, float]
    lines: list[Line]


def _quad(box: Sequence[float], w: float, h: float) -> list[float]:
    x0, y0, x1, y1 = box
    X0, Y0, X1, Y1 = x0 * w, y0 * h, x1 * w, y1 * h
    return [round(v, 2) for v in (X0, Y0, X1, Y0, X1, Y1, X0, Y1)]


def _unquad(q: Sequence[float], w: float, h: float) -> tuple[float, float, float, float]:
    xs, ys = q[0::2], q[1::2]
    return (min(xs) / w, min(ys) / h, max(xs) / w, max(ys) / h)


# ---- generator ---------------------------------------------------------------------------------------

def _vocab(rng: np.random.Generator, n: int, length: int) -> list[str]:
    letters = np.array(list(string.ascii_lowercase))
    out: set[str] = set()
    while len(out) < n:
        out.add("".join(rng.choice(letters, size=length)))
    return sorted(out)


def _value(rng: np.random.Generator) -> str:
    chars = np.array(list(string.ascii_uppercase + string.digits))
    return "".join(rng.choice(chars, size=5))


def _edit(rng: np.random.Generator, s: str, n_edits: int) -> str:
    chars = string.ascii_uppercase + string.digits
    out = list(s)
    for i in rng.choice(len(out), size=n_edits, replace=False):
        out[i] = rng.choice([c for c in chars if c != out[i]])
    return "".join(out)


@dataclass
class _Block:
    x: int
    y: int
    w: int
    h: int
    section: int
    words: list[str]
    header: bool = False


def _place(rng: np.random.Generator, blocks: list[_Block], band: tuple[int, int], w: int, h: int, grid: int,
           section: int, words: list[str], tries: int = 200) -> _Block | None:
    y_lo, y_hi = band
    for _ in range(tries):
        if y_hi - h < y_lo:
            return None
        x = int(rng.integers(0, grid - w + 1))
        y = int(rng.integers(y_lo, y_hi - h + 1))
        ok = all(x + w + 1 <= b.x or b.x + b.w + 1 <= x or y + h <= b.y or b.y + b.h <= y for b in blocks)
        if ok:
            return _Block(x, y, w, h, section, words)
    return None


def _layout_words(b: _Block, grid: int) -> list[Word]:
    """Words in reading order over the block's rows, equal widths."""
    per_row = int(np.ceil(len(b.words) / b.h))
    out = []
    for i, t in enumerate(b.words):
        r, c = divmod(i, per_row)
        n_in_row = min(per_row, len(b.words) - r * per_row)
        ww = b.w / n_in_row
        x0, x1 = b.x + c * ww, b.x + (c + 1) * ww
        out.append(Word(t, (x0 / grid, (b.y + r) / grid, x1 / grid, (b.y + r + 1) / grid)))
    return out


def generate_page(rng: np.random.Generator, cfg: Mapping[str, Any], vocab: Sequence[str], headers: Sequence[str],
                  ood: bool) -> tuple[list[_Block], int, list[str], str, list[int]]:
    """One page: blocks (headers first per section), the evidence block index, the question's key words,
    the gold value and the distractor indices."""
    grid = int(cfg["grid"])
    n_sec = int(rng.integers(cfg["sections"][0], cfg["sections"][1] + 1))
    bands = np.linspace(0, grid, n_sec + 1).astype(int)
    sec_headers = list(rng.choice(headers, size=n_sec, replace=False))
    blocks: list[_Block] = []
    for s in range(n_sec):
        hb = _Block(1, int(bands[s]), 4, 1, s, [sec_headers[s]], header=True)
        blocks.append(hb)
    n_blocks = int(rng.integers(cfg["blocks"][0], cfg["blocks"][1] + 1))
    # the evidence block first (its size differs out of distribution), then the rest
    ev_sec = int(rng.integers(0, n_sec))
    sizes = [(2, 1) if ood else (int(rng.integers(3, 9)), int(rng.integers(1, 3)))]
    secs = [ev_sec]
    for _ in range(n_blocks - 1):
        sizes.append((int(rng.integers(3, 9)), int(rng.integers(1, 3))))
        secs.append(int(rng.integers(0, n_sec)))
    content: list[int] = []
    for (w, h), s in zip(sizes, secs):
        keys = list(rng.choice(vocab, size=3, replace=False))
        b = _place(rng, blocks, (int(bands[s]) + 2, int(bands[s + 1])), w, h, grid, s, keys + [_value(rng)])
        if b is not None:
            blocks.append(b)
            content.append(len(blocks) - 1)
    ev = content[0]
    qkeys = [str(k) for k in rng.choice(blocks[ev].words[:3], size=2, replace=False)]
    gold = blocks[ev].words[3]
    lo, hi = cfg["distractors_ood"] if ood else cfg["distractors"]
    n_dis = int(rng.integers(lo, hi + 1))
    others = content[1:]
    dis: list[int] = []
    for _ in range(min(n_dis, len(others))):
        cand_other = [i for i in others if blocks[i].section != ev_sec and i not in dis]
        cand_same = [i for i in others if blocks[i].section == ev_sec and i not in dis]
        pool = cand_other if cand_other and (rng.random() < cfg["distractor_other_section"] or not cand_same) \
            else cand_same
        if not pool:
            break
        dis.append(int(rng.choice(pool)))
    for i in dis:
        w3 = blocks[i].words
        pos = rng.choice(3, size=2, replace=False)
        w3[pos[0]], w3[pos[1]] = qkeys[0], qkeys[1]
        w3[3] = _edit(rng, gold, int(rng.integers(1, 3)))
    header = blocks[ev_sec].words[0]
    return blocks, ev, qkeys + [header], gold, dis


def _render(path: Path, blocks: Sequence[_Block], grid: int) -> None:
    """A grey rendering of the page (headers darker): the image the annotation names."""
    from PIL import Image

    img = np.full((grid * CELL_PX, grid * CELL_PX), 255, np.uint8)
    for b in blocks:
        img[b.y * CELL_PX + 1:(b.y + b.h) * CELL_PX - 1, b.x * CELL_PX + 1:(b.x + b.w) * CELL_PX - 1] = \
            60 if b.header else 170
    Image.fromarray(img, mode="L").save(path, optimize=False, compress_level=1)


def write_synthetic(root: str | Path, cfg: Mapping[str, Any], seed: int) -> dict[str, int]:
    """Write train/val/test_id/test_ood annotation JSON + one OCR JSON per page under `root` (atomic)."""
    root = Path(root)
    rng_v = stream(seed, "vocab")
    vocab = _vocab(rng_v, int(cfg["vocab_size"]), 4)
    headers = _vocab(rng_v, int(cfg["n_headers"]), 6)
    grid = int(cfg["grid"])
    px = grid * CELL_PX
    counts = {}
    with atomic_path(root) as tmp:
        (tmp / "ocr").mkdir(parents=True)
        (tmp / "documents").mkdir()
        qid = 0
        for split, n, ood in (("train", cfg["n_train"], False), ("val", cfg["n_val"], False),
                              ("test_id", cfg["n_test"], False), ("test_ood", cfg["n_test"], True)):
            rng = stream(seed, "pages", split)
            records = []
            for i in range(int(n)):
                blocks, ev, qwords, gold, _ = generate_page(rng, cfg, vocab, headers, ood)
                stem = f"{split}_{i:05d}"
                lines = []
                for b in blocks:
                    words = _layout_words(b, grid)
                    box = (b.x / grid, b.y / grid, (b.x + b.w) / grid, (b.y + b.h) / grid)
                    lines.append({"boundingBox": _quad(box, px, px), "text": " ".join(b.words),
                                  "words": [{"boundingBox": _quad(w.box, px, px), "text": w.text} for w in words]})
                ocr = {"status": "Succeeded", "recognitionResults": [
                    {"page": 1, "clockwiseOrientation": 0.0, "width": px, "height": px, "unit": "pixel",
                     "lines": lines}]}
                (tmp / "ocr" / f"{stem}.json").write_text(json.dumps(ocr))
                _render(tmp / "documents" / f"{stem}.png", blocks, grid)
                b = blocks[ev]
                records.append({
                    "questionId": qid, "question": f"what is the {qwords[0]} {qwords[1]} of {qwords[2]}?",
                    "docId": stem, "image": f"documents/{stem}.png", "answers": [gold],
                    "evidence_bbox": [b.x / grid, b.y / grid, (b.x + b.w) / grid, (b.y + b.h) / grid],
                })
                qid += 1
            (tmp / f"{split}.json").write_text(json.dumps({
                "dataset_name": "paperflow-docloc-synth", "dataset_split": split, "dataset_version": "1.0",
                "data": records}))
            counts[split] = len(records)
    return counts


# ---- loader (real and synthetic) -------------------------------------------------------------------------

def _fail(path: Path, where: str, msg: str) -> DataError:
    return DataError(f"{path}: {where}: {msg}")


def _read_json(path: Path) -> Any:
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise DataError(f"{path}: not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") from None


def _box(val: Any, path: Path, where: str) -> tuple[float, float, float, float]:
    if not (isinstance(val, list) and len(val) == 4 and all(isinstance(v, (int, float)) for v in val)):
        raise _fail(path, where, f"evidence_bbox must be 4 numbers [x0, y0, x1, y1], got {val!r}")
    x0, y0, x1, y1 = (float(v) for v in val)
    if not (0 <= x0 < x1 <= 1 and 0 <= y0 < y1 <= 1):
        raise _fail(path, where, f"evidence_bbox {val} is not a page-normalised box with x0 < x1, y0 < y1 in [0, 1]")
    return (x0, y0, x1, y1)


def read_ocr(path: Path) -> list[Line]:
    """Lines (with words) of page 1 of a Read-API OCR file, boxes page-normalised."""
    ocr = _read_json(path)
    try:
        page = ocr["recognitionResults"][0]
        w, h = float(page["width"]), float(page["height"])
        lines = []
        for j, ln in enumerate(page["lines"]):
            words = [Word(str(wd["text"]), _unquad(wd["boundingBox"], w, h)) for wd in ln["words"]]
            lines.append(Line(str(ln["text"]), _unquad(ln["boundingBox"], w, h), words))
    except (KeyError, IndexError, TypeError, ValueError) as e:
        raise DataError(f"{path}: not a Read-API OCR file (recognitionResults[0].lines[].words[]): {e!r}") from None
    return lines


def load_split(ann_path: str | Path, ocr_dir: str | Path, images_dir: str | Path | None = None) -> list[QA]:
    """Every record of a DocVQA-style annotation file with its page's OCR (lines in reading order: top to
    bottom, then left to right); errors name file and record. With `images_dir`, the image each record
    names (its file name, looked up there) must exist."""
    ann_path, ocr_dir = Path(ann_path), Path(ocr_dir)
    ann = _read_json(ann_path)
    if not isinstance(ann, dict) or not isinstance(ann.get("data"), list):
        raise DataError(f"{ann_path}: expected an object with a 'data' list of records")
    if not ann["data"]:
        raise DataError(f"{ann_path}: the 'data' list is empty")
    out = []
    for i, rec in enumerate(ann["data"]):
        where = f"record {i} (questionId {rec.get('questionId', '?') if isinstance(rec, dict) else '?'})"
        if not isinstance(rec, dict):
            raise _fail(ann_path, where, "not an object")
        for key in REQUIRED_FIELDS:
            if key not in rec:
                raise _fail(ann_path, where, f"missing field '{key}'")
        unknown = sorted(set(rec) - set(REQUIRED_FIELDS) - OPTIONAL_FIELDS)
        if unknown:
            raise _fail(ann_path, where, f"unknown field(s) {unknown} (known: {sorted(set(REQUIRED_FIELDS) | OPTIONAL_FIELDS)})")
        if not (isinstance(rec["answers"], list) and rec["answers"] and all(isinstance(a, str) for a in rec["answers"])):
            raise _fail(ann_path, where, "answers must be a non-empty list of strings")
        if not isinstance(rec["question"], str) or not rec["question"].strip():
            raise _fail(ann_path, where, "question must be a non-empty string")
        bbox = _box(rec["evidence_bbox"], ann_path, where)
        if images_dir is not None and not (Path(images_dir) / Path(str(rec["image"])).name).is_file():
            raise _fail(ann_path, where, f"image {rec['image']!r} not found in {images_dir}")
        ocr_path = ocr_dir / (Path(str(rec["image"])).stem + ".json")
        try:
            lines = read_ocr(ocr_path)
        except DataError as e:
            raise _fail(ann_path, where, str(e)) from None
        lines.sort(key=lambda ln: (round(ln.box[1], 6), ln.box[0]))
        out.append(QA(int(rec["questionId"]), rec["question"], str(rec["docId"]), str(rec["image"]),
                      list(rec["answers"]), bbox, lines))
    return out


# ---- features ----------------------------------------------------------------------------------------------

def cell_ranges(box: Sequence[float], grid: int) -> tuple[int, int, int, int]:
    """Grid rows/cols a normalised box covers: (r0, r1, c0, c1), half-open, at least one cell."""
    x0, y0, x1, y1 = box
    c0 = min(grid - 1, int(np.floor(x0 * grid + 1e-6)))
    c1 = max(c0 + 1, min(grid, int(np.ceil(x1 * grid - 1e-6))))
    r0 = min(grid - 1, int(np.floor(y0 * grid + 1e-6)))
    r1 = max(r0 + 1, min(grid, int(np.ceil(y1 * grid - 1e-6))))
    return r0, r1, c0, c1


def question_words(question: str, max_q: int) -> list[str]:
    """The question's content words (stop words dropped), at most `max_q`, in order."""
    from paperflow.nn.hashtext import STOPWORDS, normalise

    words = [normalise(w) for w in question.split()]
    return [w for w in words if w and w not in STOPWORDS][:max_q]


def token_dim(dim: int, max_q: int) -> int:
    return dim + 4 + max_q + 1


def featurise(qas: Sequence[QA], grid: int, dim: int, max_q: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Model inputs of N questions with at most L OCR lines each (L: the split's largest page):
    tokens (N, L, dim + 4 + max_q + 1) float32 — per line its mean hashed word embedding, its box
    (x0, y0, x1, y1), its lexical match with each question content word (max cosine over the line's
    words; 0 for absent question words) and a present flag (1; padding rows are all 0);
    line_id (N, G, G) int16 — the line covering each cell (−1: none; later lines win overlaps);
    evidence (N, G, G) uint8 — cells of evidence_bbox; bbox (N, 4) float32; qid (N,) int64;
    layout (2,) int64 — (dim, max_q), the token layout."""
    from paperflow.nn.hashtext import embed_word

    n = len(qas)
    L = max(1, max(len(qa.lines) for qa in qas))
    tokens = np.zeros((n, L, token_dim(dim, max_q)), np.float32)
    ev = np.zeros((n, grid, grid), np.uint8)
    line_id = np.full((n, grid, grid), -1, np.int16)
    for i, qa in enumerate(qas):
        qv = [embed_word(w, dim, seed) for w in question_words(qa.question, max_q)]
        for j, ln in enumerate(qa.lines):
            r0, r1, c0, c1 = cell_ranges(ln.box, grid)
            line_id[i, r0:r1, c0:c1] = j
            wv = np.stack([embed_word(w.text, dim, seed) for w in ln.words]) if ln.words else np.zeros((1, dim))
            tokens[i, j, :dim] = wv.mean(0)
            tokens[i, j, dim:dim + 4] = ln.box
            for k, v in enumerate(qv):
                tokens[i, j, dim + 4 + k] = float((wv @ v).max())
            tokens[i, j, -1] = 1.0
        r0, r1, c0, c1 = cell_ranges(qa.bbox, grid)
        ev[i, r0:r1, c0:c1] = 1
    return {"tokens": tokens, "evidence": ev, "line_id": line_id,
            "bbox": np.array([qa.bbox for qa in qas], np.float32).reshape(n, 4),
            "qid": np.array([qa.qid for qa in qas], np.int64), "layout": np.array([dim, max_q], np.int64)}


def line_values(qas: Sequence[QA]) -> list[dict[str, Any]]:
    """Per question: the answer candidates (each OCR line's last word) and the gold answers."""
    return [{"qid": qa.qid, "values": [ln.words[-1].text if ln.words else ln.text for ln in qa.lines],
             "answers": qa.answers} for qa in qas]


def save_features(path: str | Path, arrays: Mapping[str, np.ndarray]) -> None:
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            np.savez_compressed(fh, **arrays)


def load_features(path: str | Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def write_values(path: str | Path, values: list[dict[str, Any]]) -> None:
    write_json(path, values)
