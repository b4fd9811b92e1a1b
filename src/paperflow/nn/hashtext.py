"""Hashed text embeddings: a fixed random unit vector per word, derived from a stable hash (crc32) of
the word and a seed — no vocabulary, no training, identical across runs and machines. Studies that need
cheap word features (synthetic documents, captions) share this one implementation."""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from functools import lru_cache

import numpy as np

STOPWORDS = frozenset({"what", "is", "the", "of", "in", "a", "an", "which", "for", "to", "on", "at", "and"})


def normalise(word: str) -> str:
    return "".join(ch for ch in word.lower() if ch.isalnum())


@lru_cache(maxsize=65536)
def _vec(word: str, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng([seed, zlib.crc32(word.encode("utf-8"))])
    v = rng.standard_normal(dim).astype(np.float32)
    v /= np.linalg.norm(v) + 1e-12
    v.setflags(write=False)
    return v


def embed_word(word: str, dim: int = 16, seed: int = 0) -> np.ndarray:
    """The unit vector of one word (lower-cased, punctuation stripped)."""
    return _vec(normalise(word), dim, seed)


def embed_words(words: Iterable[str], dim: int = 16, seed: int = 0, drop_stopwords: bool = False) -> np.ndarray:
    """Mean embedding of the words (zeros if none remain)."""
    keep = [normalise(w) for w in words]
    keep = [w for w in keep if w and not (drop_stopwords and w in STOPWORDS)]
    if not keep:
        return np.zeros(dim, dtype=np.float32)
    return np.mean([_vec(w, dim, seed) for w in keep], axis=0).astype(np.float32)
