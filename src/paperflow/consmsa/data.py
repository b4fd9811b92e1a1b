"""Data: the MMSA feature-pickle layout, a synthetic generator with token roles, and a restricted loader.

Layout (thuiar/MMSA `data_loader.py`): a pickle of ``{split: {key: value}}`` with splits ``train``,
``valid``, ``test`` and keys ``text``, ``audio``, ``vision`` (float32 (N, T, d)), ``regression_labels``
(float32 (N,)), ``id`` and ``raw_text`` (object arrays of str, (N,)), ``audio_lengths`` and
``vision_lengths`` (int64 (N,)). Synthetic data only: a safetensors sidecar ``roles.safetensors`` holds
``<split>.<modality>`` uint8 (N, T) token roles (ROLES below).

Pickles are read through :class:`RestrictedUnpickler`, which resolves only the globals numpy needs to
rebuild arrays; any other global (``os.system``, ``builtins.eval``, ...) raises :class:`UnsafePickleError`
before anything is called.
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

SPLITS = ("train", "valid", "test")
MODALITIES = ("text", "audio", "vision")
LENGTH_KEYS = {"audio": "audio_lengths", "vision": "vision_lengths"}
ROLES = {"neutral": 0, "informative": 1, "redundant": 2, "conflicting": 3}
REQUIRED = ("text", "audio", "vision", "regression_labels", "id", "raw_text", "audio_lengths", "vision_lengths")

# (module, name) pairs numpy's array pickling uses (numpy 1.x names under numpy.core, 2.x under numpy._core)
ALLOWED_GLOBALS = frozenset(
    (mod, name)
    for core in ("numpy.core", "numpy._core")
    for mod, name in ((f"{core}.multiarray", "_reconstruct"), (f"{core}.multiarray", "scalar"),
                      (f"{core}.numeric", "_frombuffer"))
) | {("numpy", "ndarray"), ("numpy", "dtype"),
     ("_codecs", "encode")}  # protocol-2 pickles write array bytes as _codecs.encode(str, 'latin1'): a pure function


class UnsafePickleError(pickle.UnpicklingError):
    """A pickle named a global outside the numpy allow-list."""


class RestrictedUnpickler(pickle.Unpickler):
    """Unpickler that reconstructs numpy arrays and plain containers only."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in ALLOWED_GLOBALS:
            return super().find_class(module, name)
        raise UnsafePickleError(
            f"refusing to load pickle: it names the global {module}.{name}; only numpy array reconstruction "
            f"({', '.join(sorted(f'{m}.{n}' for m, n in ALLOWED_GLOBALS))}) is allowed")


def load_pickle(path: str | Path) -> Any:
    with open(path, "rb") as fh:
        return RestrictedUnpickler(io.BytesIO(fh.read())).load()


def validate(data: Mapping[str, Any], path: str | Path = "<data>") -> dict[str, dict[str, np.ndarray]]:
    """Check the MMSA layout; return float32 features, float32 labels and int64 lengths per split."""
    out: dict[str, dict[str, np.ndarray]] = {}
    for s in SPLITS:
        if s not in data:
            raise ValueError(f"{path}: split '{s}' missing (has {sorted(data)})")
        d = data[s]
        missing = [k for k in REQUIRED if k not in d]
        if missing:
            raise ValueError(f"{path}: split '{s}' lacks keys {missing}")
        y = np.asarray(d["regression_labels"], np.float32).reshape(-1)
        n = y.shape[0]
        row: dict[str, np.ndarray] = {"regression_labels": y}
        for m in MODALITIES:
            x = np.asarray(d[m], np.float32)
            if x.ndim != 3 or x.shape[0] != n:
                raise ValueError(f"{path}: {s}.{m} must be (N={n}, T, d), got {x.shape}")
            row[m] = x
        for m, k in LENGTH_KEYS.items():
            ln = np.asarray(d[k]).astype(np.int64).reshape(-1)
            if ln.shape[0] != n or (ln < 0).any() or (ln > row[m].shape[1]).any():
                raise ValueError(f"{path}: {s}.{k} must be N={n} lengths in [0, {row[m].shape[1]}]")
            row[k] = ln
        row["id"] = np.asarray(d["id"]).reshape(-1)
        row["raw_text"] = np.asarray(d["raw_text"]).reshape(-1)
        out[s] = row
    return out


def load_mmsa(path: str | Path) -> dict[str, dict[str, np.ndarray]]:
    """Load and validate an MMSA feature pickle through the restricted unpickler."""
    return validate(load_pickle(path), path)


def load_roles(path: str | Path) -> dict[str, dict[str, np.ndarray]]:
    from safetensors.numpy import load_file

    flat = load_file(str(path))
    out: dict[str, dict[str, np.ndarray]] = {}
    for k, v in flat.items():
        s, m = k.split(".")
        out.setdefault(s, {})[m] = v
    return out


# ---- synthetic generator (spec §4.4) -------------------------------------------------------------------

def _modality_tokens(rng: np.random.Generator, y: np.ndarray, v: np.ndarray, T: int, p: Mapping[str, Any]
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Tokens (N, T, d) and roles (N, T) of one modality with sentiment direction v (unit, (d,))."""
    N, d = y.shape[0], v.shape[0]
    sig_inf = float(p["informative_noise"]) / np.sqrt(d)
    x = rng.normal(0.0, float(p["neutral_scale"]) / np.sqrt(d), size=(N, T, d))
    roles = np.zeros((N, T), np.uint8)
    lo_i, hi_i = p["informative_frac"]
    lo_r, hi_r = p["redundant_frac"]
    lo_c, hi_c = p["conflict_tokens"]
    for n in range(N):
        perm = rng.permutation(T)
        k_inf = max(1, int(round(rng.uniform(lo_i, hi_i) * T)))
        k_red = int(round(rng.uniform(lo_r, hi_r) * T))
        k_con = int(rng.integers(lo_c, hi_c + 1)) if rng.random() < float(p["conflict_prob"]) else 0
        k_con = min(k_con, max(0, k_inf - 1))  # conflicting tokens are always a minority of the cues
        inf, red = perm[:k_inf], perm[k_inf:k_inf + k_red]
        con = perm[k_inf + k_red:k_inf + k_red + k_con]
        x[n, inf] = y[n] * v + rng.normal(0.0, sig_inf, size=(k_inf, d))
        if k_red:
            src = rng.choice(inf, size=k_red)
            x[n, red] = x[n, src] + rng.normal(0.0, float(p["redundant_noise"]) / np.sqrt(d), size=(k_red, d))
        if k_con:
            x[n, con] = -y[n] * v + rng.normal(0.0, sig_inf, size=(k_con, d))
        roles[n, inf], roles[n, red], roles[n, con] = ROLES["informative"], ROLES["redundant"], ROLES["conflicting"]
    return x.astype(np.float32), roles


def generate(p: Mapping[str, Any], seed: int) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, np.ndarray]]]:
    """The MMSA-layout dict and the role arrays. Every modality has its own sentiment direction."""
    from paperflow.core.seeding import stream

    d = int(p["dim"])
    dirs = {}
    for m in MODALITIES:
        v = stream(seed, "dir", m).normal(size=d)
        dirs[m] = v / np.linalg.norm(v)
    sizes = {"train": int(p["n_train"]), "valid": int(p["n_valid"]), "test": int(p["n_test"])}
    data: dict[str, dict[str, Any]] = {}
    roles: dict[str, dict[str, np.ndarray]] = {}
    for s, N in sizes.items():
        rng = stream(seed, "split", s)
        y = rng.uniform(-3.0, 3.0, size=N).astype(np.float32)
        row: dict[str, Any] = {"regression_labels": y,
                               "id": np.array([f"synth_{s}_{i:05d}" for i in range(N)], dtype=object),
                               "raw_text": np.array([f"synthetic utterance {i}" for i in range(N)], dtype=object)}
        roles[s] = {}
        for m in MODALITIES:
            x, r = _modality_tokens(rng, y, dirs[m], int(p["seq_len"][m]), p)
            row[m], roles[s][m] = x, r
        row["audio_lengths"] = np.full(N, row["audio"].shape[1], np.int64)
        row["vision_lengths"] = np.full(N, row["vision"].shape[1], np.int64)
        data[s] = row
    return data, roles


def write_synthetic(out: Path, p: Mapping[str, Any], seed: int) -> dict[str, int]:
    """Write ``<out>/synthetic.pkl`` (MMSA layout) and ``<out>/roles.safetensors``; read the pickle back
    through the same restricted loader real data uses, so a layout error fails here."""
    from safetensors.numpy import save_file

    from paperflow.core.io import atomic_path

    data, roles = generate(p, seed)
    with atomic_path(out) as tmp:
        tmp.mkdir(parents=True)
        with open(tmp / "synthetic.pkl", "wb") as fh:
            pickle.dump(data, fh, protocol=4)
        save_file({f"{s}.{m}": np.ascontiguousarray(r) for s, rr in roles.items() for m, r in rr.items()},
                  str(tmp / "roles.safetensors"))
        back = load_mmsa(tmp / "synthetic.pkl")
        for s in SPLITS:
            for m in MODALITIES:
                if not np.array_equal(back[s][m], data[s][m]):
                    raise AssertionError(f"synthetic pickle does not round-trip: {s}.{m}")
    return {s: int(len(data[s]["regression_labels"])) for s in SPLITS}
