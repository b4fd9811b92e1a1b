"""Restricted unpickling of Bridge raw pickles (`obs_dict.pkl`, `policy_out.pkl`).

Raw pickles come from outside the project, so `pickle.load` could run arbitrary code. This loader
resolves globals only through an explicit allow-list table (numpy arrays/dtypes/scalars in both the
numpy 1.x `numpy.core.*` and numpy 2.x `numpy._core.*` spellings, `_codecs.encode`, and a few
builtins). Nothing named in the pickle is ever imported. Every other global raises
`UnpicklingError` before any object is built. After loading, the structure is validated (types,
depth, leaf dtypes, required keys and shapes, file size).
"""

from __future__ import annotations

import _codecs
import io
import pickle
from pathlib import Path
from typing import Any

import numpy as np

MAX_BYTES = 64 * 1024 * 1024
MAX_DEPTH = 4


def _np_attr(*names: str) -> Any:
    import importlib

    for modname in ("numpy._core.multiarray", "numpy.core.multiarray", "numpy._core.numeric", "numpy.core.numeric"):
        for name in names:
            try:
                return getattr(importlib.import_module(modname), name)
            except (ImportError, AttributeError):
                continue
    raise ImportError(names)


_RECONSTRUCT = _np_attr("_reconstruct")
_SCALAR = _np_attr("scalar")


def _frombuffer_fn() -> Any:
    import importlib

    for modname in ("numpy._core.numeric", "numpy.core.numeric"):
        try:
            return getattr(importlib.import_module(modname), "_frombuffer")
        except (ImportError, AttributeError):
            continue
    return None


_FROMBUFFER = _frombuffer_fn()

# (module, name) as written in the pickle -> the object it resolves to. Fixed objects only.
ALLOWED: dict[tuple[str, str], Any] = {
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("numpy.core.multiarray", "_reconstruct"): _RECONSTRUCT,
    ("numpy._core.multiarray", "_reconstruct"): _RECONSTRUCT,
    ("numpy.core.multiarray", "scalar"): _SCALAR,
    ("numpy._core.multiarray", "scalar"): _SCALAR,
    ("_codecs", "encode"): _codecs.encode,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("builtins", "complex"): complex,
    ("builtins", "slice"): slice,
    # python 2 pickles name builtins `__builtin__`
    ("__builtin__", "set"): set,
    ("__builtin__", "frozenset"): frozenset,
    ("__builtin__", "complex"): complex,
    ("__builtin__", "slice"): slice,
}
if _FROMBUFFER is not None:
    ALLOWED[("numpy.core.numeric", "_frombuffer")] = _FROMBUFFER
    ALLOWED[("numpy._core.numeric", "_frombuffer")] = _FROMBUFFER


class UnsafePickleError(pickle.UnpicklingError):
    """A pickle named a global outside the allow-list, or its content failed validation."""


class _Restricted(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:  # noqa: D401
        try:
            return ALLOWED[(module, name)]
        except KeyError:
            raise UnsafePickleError(f"global '{module}.{name}' is not allowed in a Bridge pickle") from None


def _loads(data: bytes, encoding: str) -> Any:
    return _Restricted(io.BytesIO(data), encoding=encoding).load()


def restricted_loads(data: bytes, source: str = "<bytes>") -> Any:
    """Unpickle `data` through the allow-list; retry with latin1 on UnicodeDecodeError (py2 files)."""
    if len(data) > MAX_BYTES:
        raise UnsafePickleError(f"{source}: {len(data)} bytes exceeds the {MAX_BYTES}-byte limit")
    try:
        try:
            return _loads(data, "ASCII")
        except UnicodeDecodeError:
            return _loads(data, "latin1")
    except UnsafePickleError as e:
        raise UnsafePickleError(f"{source}: {e}") from None
    except Exception as e:  # truncated or corrupt stream
        raise UnsafePickleError(f"{source}: could not unpickle ({type(e).__name__}: {e})") from None


def _check_leaves(obj: Any, source: str, depth: int = 0) -> None:
    if depth > MAX_DEPTH:
        raise UnsafePickleError(f"{source}: nesting deeper than {MAX_DEPTH}")
    if isinstance(obj, dict):
        for k, v in obj.items():
            if not isinstance(k, (str, int)):
                raise UnsafePickleError(f"{source}: dict key of type {type(k).__name__}")
            _check_leaves(v, source, depth + 1)
    elif isinstance(obj, (list, tuple, set, frozenset)):
        for v in obj:
            _check_leaves(v, source, depth + 1)
    elif isinstance(obj, np.ndarray):
        if obj.dtype.kind == "O":
            if not all(isinstance(x, (str, int, float, bool, np.generic)) for x in obj.ravel()):
                raise UnsafePickleError(f"{source}: object array with non-scalar elements")
        elif obj.dtype.kind not in "biufU":
            raise UnsafePickleError(f"{source}: array of dtype {obj.dtype} not allowed")
    elif isinstance(obj, (np.generic, bool, int, float, complex, str, bytes)) or obj is None:
        return
    else:
        raise UnsafePickleError(f"{source}: leaf of type {type(obj).__name__} not allowed")


def load_pickle(path: str | Path) -> Any:
    path = Path(path)
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise UnsafePickleError(f"{path}: {size} bytes exceeds the {MAX_BYTES}-byte limit")
    obj = restricted_loads(path.read_bytes(), str(path))
    _check_leaves(obj, str(path))
    return obj


def load_obs_dict(path: str | Path) -> dict[str, np.ndarray]:
    """`obs_dict.pkl`: dict with `full_state (N,7)` and `time_stamp (N,)` (others ignored)."""
    obj = load_pickle(path)
    if not isinstance(obj, dict):
        raise UnsafePickleError(f"{path}: obs_dict must be a dict, got {type(obj).__name__}")
    for key in ("full_state", "time_stamp"):
        if key not in obj:
            raise UnsafePickleError(f"{path}: obs_dict lacks '{key}'")
    fs = np.asarray(obj["full_state"])
    ts = np.asarray(obj["time_stamp"])
    if fs.ndim != 2 or fs.shape[1] != 7 or fs.dtype.kind not in "biuf":
        raise UnsafePickleError(f"{path}: full_state has shape {fs.shape} dtype {fs.dtype}, want (N,7) numeric")
    if ts.ndim != 1 or ts.dtype.kind not in "biuf":
        raise UnsafePickleError(f"{path}: time_stamp has shape {ts.shape}, want (N,)")
    return {"full_state": fs.astype(np.float64), "time_stamp": ts.astype(np.float64)}


def load_policy_out(path: str | Path) -> np.ndarray:
    """`policy_out.pkl`: list of per-step dicts with `actions (7,)`, or (older files) of (7,) arrays.

    Returns the (T,7) float64 action array.
    """
    obj = load_pickle(path)
    if not isinstance(obj, list):
        raise UnsafePickleError(f"{path}: policy_out must be a list, got {type(obj).__name__}")
    acts = []
    for i, step in enumerate(obj):
        a = step.get("actions") if isinstance(step, dict) else step
        if a is None:
            raise UnsafePickleError(f"{path}: step {i} has no 'actions'")
        a = np.asarray(a)
        if a.shape != (7,) or a.dtype.kind not in "biuf":
            raise UnsafePickleError(f"{path}: step {i} action has shape {a.shape} dtype {a.dtype}, want (7,)")
        acts.append(a.astype(np.float64))
    return np.stack(acts) if acts else np.zeros((0, 7))
