"""Codes and Hamming-ranking mAP@all (spec §5).

Codes are sign(z) with sign(0) = +1, stored packed (`np.packbits(b > 0)`, L/8 bytes per item).
Ranking: Hamming distance, ties broken by database index (stable sort). Relevance: at least one
shared label. AP_q = (1/R_q) Σ_{relevant ranks r} Prec@r; mean over queries with R_q > 0.
"""

from __future__ import annotations

import numpy as np

_POP = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)


def to_bits(o: np.ndarray) -> np.ndarray:
    """Packed codes from real outputs: bit = 1 where o >= 0 (sign(0) = +1)."""
    return np.packbits(np.asarray(o) >= 0, axis=1)


def unpack_pm1(packed: np.ndarray, bits: int) -> np.ndarray:
    return np.unpackbits(packed, axis=1, count=bits).astype(np.int32) * 2 - 1


def hamming(q_packed: np.ndarray, db_packed: np.ndarray, bits: int) -> np.ndarray:
    """(nq, ndb) Hamming distances via ±1 inner products: d = (L − b_q·b_d) / 2.

    The products run in float32 (BLAS; exact: |b_q·b_d| ≤ L ≪ 2^24) and the distances come back as the
    smallest unsigned integer type that holds L, so that the stable sort in `map_at_all` is numpy's radix sort."""
    bq = unpack_pm1(q_packed, bits).astype(np.float32)
    bd = unpack_pm1(db_packed, bits).astype(np.float32)
    return ((bits - bq @ bd.T) / 2).astype(np.uint8 if bits <= 255 else np.uint16)


def map_at_all(q_packed: np.ndarray, db_packed: np.ndarray, q_labels: np.ndarray, db_labels: np.ndarray,
               bits: int) -> float:
    """Vectorised mAP@all (ranking: Hamming distance, ties by database index; relevance: a shared label)."""
    D = hamming(q_packed, db_packed, bits)
    order = np.argsort(D, axis=1, kind="stable")
    # label overlap in float32 BLAS (exact: counts <= K); > 0 = at least one shared label
    rel = (q_labels.astype(np.float32) @ db_labels.astype(np.float32).T) > 0
    rel_sorted = np.take_along_axis(rel, order, axis=1)
    R = rel_sorted.sum(1)
    cum = np.cumsum(rel_sorted, axis=1, dtype=np.int32)
    ranks = np.arange(1, rel.shape[1] + 1)[None, :]
    ap_num = (rel_sorted * cum / ranks).sum(1)
    ok = R > 0
    if not ok.any():
        return float("nan")
    return float(np.mean(ap_num[ok] / R[ok]))


def map_at_all_slow(q_packed: np.ndarray, db_packed: np.ndarray, q_labels: np.ndarray, db_labels: np.ndarray) -> float:
    """Direct reference: popcount of XOR per pair, python sort on (distance, index), one pass."""
    aps = []
    for i in range(q_packed.shape[0]):
        dists = []
        for j in range(db_packed.shape[0]):
            d = int(sum(int(_POP[a ^ b]) for a, b in zip(q_packed[i].tolist(), db_packed[j].tolist())))
            dists.append((d, j))
        dists.sort()
        hits, prec_sum = 0, 0.0
        for r, (_, j) in enumerate(dists, start=1):
            if any(int(a) and int(b) for a, b in zip(q_labels[i], db_labels[j])):
                hits += 1
                prec_sum += hits / r
        if hits:
            aps.append(prec_sum / hits)
    return float(np.mean(aps)) if aps else float("nan")


def both_directions(codes: dict[str, np.ndarray], q_labels: np.ndarray, db_labels: np.ndarray, bits: int) -> dict[str, float]:
    """I2T: image queries vs text database; T2I: text queries vs image database."""
    i2t = map_at_all(codes["q_img"], codes["db_txt"], q_labels, db_labels, bits)
    t2i = map_at_all(codes["q_txt"], codes["db_img"], q_labels, db_labels, bits)
    return {"i2t": i2t, "t2i": t2i, "mean": (i2t + t2i) / 2}


def random_code_map(q_labels: np.ndarray, db_labels: np.ndarray, bits: int, draws: int, seed: int) -> dict[str, object]:
    """The chance level of mAP@all on this query/database, measured: `draws` seeded draws of uniform random
    L-bit codes for the query and the database side, ranked and scored exactly like a model's codes
    (same tie rule, same relevance). Returns the per-draw values, their mean and max."""
    rng = np.random.default_rng(seed)
    nq, nd = q_labels.shape[0], db_labels.shape[0]
    vals = []
    for _ in range(draws):
        q = np.packbits(rng.random((nq, bits)) < 0.5, axis=1)
        d = np.packbits(rng.random((nd, bits)) < 0.5, axis=1)
        vals.append(map_at_all(q, d, q_labels, db_labels, bits))
    return {"bits": bits, "draws": draws, "seed": seed, "per_draw": vals, "mean": float(np.mean(vals)),
            "max": float(np.max(vals)), "n_query": int(nq), "n_database": int(nd),
            "label_prior": float(((q_labels.astype(np.int32) @ db_labels.astype(np.int32).T) > 0).mean())}
