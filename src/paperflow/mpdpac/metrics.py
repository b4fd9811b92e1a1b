"""Caption metrics. A decoded answer is read up to its first EOS; an object is a colour word followed by a
shape word (commas and stray tokens are skipped).

- duplicate-object rate: (predicted objects − distinct predicted objects) / predicted objects, pooled;
- seq-rep-2 (per answer, then averaged): 1 − distinct bigrams / bigrams; distinct-2: distinct bigrams /
  bigrams over the whole set of answers (both as in ErikZ719/CoTA eval/repeat_metrics.py, on tokens);
- object precision / recall / F1, micro-averaged: matches are the multiset intersection with the scene.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from paperflow.mpdpac.data import Vocab


def truncate(tokens: Sequence[int], eos: int) -> list[int]:
    out = []
    for t in tokens:
        if t == eos:
            break
        out.append(int(t))
    return out


def parse_objects(tokens: Sequence[int], voc: Vocab) -> list[tuple[int, int]]:
    objs = []
    for a, b in zip(tokens[:-1], tokens[1:]):
        ka, kb = voc.word_kind(a), voc.word_kind(b)
        if ka[0] == "colour" and kb[0] == "shape":
            objs.append((ka[1], kb[1]))
    return objs


def item_stats(answers: np.ndarray, objects: np.ndarray, n_objects: np.ndarray, voc: Vocab) -> dict[str, np.ndarray]:
    """Per-item counts: n_pred, n_dup, n_tp, n_true, seq_rep2, n_tokens (before EOS)."""
    n = answers.shape[0]
    out = {k: np.zeros(n, np.float64) for k in ("n_pred", "n_dup", "n_tp", "n_true", "seq_rep2", "n_tokens")}
    for i in range(n):
        toks = truncate(answers[i].tolist(), voc.eos)
        pred = parse_objects(toks, voc)
        true = [tuple(int(v) for v in objects[i, j]) for j in range(int(n_objects[i]))]
        out["n_pred"][i] = len(pred)
        out["n_dup"][i] = len(pred) - len(set(pred))
        out["n_tp"][i] = sum((Counter(pred) & Counter(true)).values())
        out["n_true"][i] = len(true)
        big = list(zip(toks[:-1], toks[1:]))
        out["seq_rep2"][i] = 1.0 - len(set(big)) / len(big) if big else 0.0
        out["n_tokens"][i] = len(toks)
    return out


def distinct2(answers: np.ndarray, eos: int) -> float:
    allb: list[tuple[int, int]] = []
    for row in answers:
        toks = truncate(row.tolist(), eos)
        allb += list(zip(toks[:-1], toks[1:]))
    return len(set(allb)) / len(allb) if allb else 0.0


def ratio(num: np.ndarray, den: np.ndarray) -> float:
    d = float(np.sum(den))
    return float(np.sum(num)) / d if d > 0 else 0.0


def dup_rate(s: dict[str, np.ndarray]) -> float:
    return ratio(s["n_dup"], s["n_pred"])


def prf(s: dict[str, np.ndarray]) -> tuple[float, float, float]:
    p, r = ratio(s["n_tp"], s["n_pred"]), ratio(s["n_tp"], s["n_true"])
    return p, r, (2 * p * r / (p + r) if p + r > 0 else 0.0)


def f1_of(tp: np.ndarray, pred: np.ndarray, true: np.ndarray) -> float:
    p, r = ratio(tp, pred), ratio(tp, true)
    return 2 * p * r / (p + r) if p + r > 0 else 0.0
