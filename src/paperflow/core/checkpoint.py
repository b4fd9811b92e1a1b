"""The one checkpoint scheme for every training stage: safetensors + JSON, never pickle.

A checkpoint is a directory written atomically (temp dir, then rename):

    <dir>/model.safetensors      model state_dict (tensors only)
    <dir>/optimizer.safetensors  optimizer state tensors, flattened as "state.<param>.<key>"
    <dir>/rng.safetensors        torch CPU RNG state (+ CUDA when present)
    <dir>/state.json             step, optimizer scalars/param groups, scheduler state, numpy RNG, extra

`save_training_state` is called every N steps; `load_training_state` restores everything so the rerun
continues on the same path: a resumed run ends with the same weights as an uninterrupted one (tests).
Final weights are written with :func:`save_weights` (safetensors) and read with :func:`load_weights`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from paperflow.core.io import atomic_path

STATE_FILE = "state.json"


def _to_cpu(t: Any) -> Any:
    return t.detach().to("cpu").contiguous()


def canonical_safetensors_header(path: str | Path) -> bool:
    """Sort the `__metadata__` keys of a safetensors header in place, so equal tensors + metadata give
    equal bytes.

    safetensors' writer keeps the metadata in a hash map, so its key order (and the file's bytes and
    digest) changes from process to process although every tensor and value is the same: a rerun
    looked like a changed checkpoint to DVC and to our manifests. Only the header's JSON text is
    rewritten (a permutation of the same pairs: same length, same padding, tensor offsets unchanged).
    Left untouched (returns False) if there is no metadata, it is already sorted, or re-serializing the
    parsed header does not reproduce the file's header byte for byte (a writer we do not know)."""
    with open(path, "r+b") as f:
        n = int.from_bytes(f.read(8), "little")
        raw = f.read(n)
        text = raw.rstrip(b" ")
        header = json.loads(text)

        def dump(h: dict) -> bytes:
            return json.dumps(h, separators=(",", ":"), ensure_ascii=False).encode()

        meta = header.get("__metadata__")
        if not meta or dump(header) != text:
            return False
        header["__metadata__"] = dict(sorted(meta.items()))
        new = dump(header)
        if new == text or len(new) != len(text):
            return False
        f.seek(8)
        f.write(new)
    return True


def save_safetensors(tensors: Mapping[str, Any], path: str | Path, metadata: Mapping[str, str] | None = None) -> None:
    """`safetensors.torch.save_file` (torch tensors) or `safetensors.numpy.save_file` (numpy arrays) with a
    canonical header (:func:`canonical_safetensors_header`); not atomic by itself (use `atomic_path`)."""
    first = next(iter(tensors.values()), None)
    if isinstance(first, np.ndarray):
        from safetensors.numpy import save_file
    else:
        from safetensors.torch import save_file
    save_file(dict(tensors), str(path), metadata=dict(metadata or {}))
    if metadata:
        canonical_safetensors_header(path)


def save_weights(path: str | Path, model_or_state: Any, metadata: Mapping[str, str] | None = None) -> Path:
    """Write a model's state_dict (or a dict of tensors) as one safetensors file, atomically.
    Tied/shared tensors are cloned so safetensors accepts them."""
    sd = model_or_state.state_dict() if hasattr(model_or_state, "state_dict") else model_or_state
    seen: dict[int, str] = {}
    out = {}
    for k, v in sd.items():
        v = _to_cpu(v)
        ptr = v.untyped_storage().data_ptr() if v.numel() else id(v)
        out[k] = v.clone() if ptr in seen else v
        seen.setdefault(ptr, k)
    with atomic_path(path) as tmp:
        save_safetensors(out, tmp, metadata)
    return Path(path)


def load_weights(path: str | Path, model: Any | None = None, strict: bool = True) -> dict[str, Any]:
    """Read a safetensors state dict; load it into `model` when given. Returns the tensors."""
    from safetensors.torch import load_file

    sd = load_file(str(path), device="cpu")
    if model is not None:
        model.load_state_dict(sd, strict=strict)
    return sd


def _split_optimizer(opt_sd: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    import torch

    tensors: dict[str, Any] = {}
    scalars: dict[str, Any] = {}
    for pid, st in opt_sd["state"].items():
        for k, v in st.items():
            if isinstance(v, torch.Tensor):
                tensors[f"state.{pid}.{k}"] = _to_cpu(v)
            else:
                scalars[f"{pid}.{k}"] = v
    return tensors, {"param_groups": opt_sd["param_groups"], "scalars": scalars}


def _join_optimizer(tensors: Mapping[str, Any], meta: Mapping[str, Any]) -> dict[str, Any]:
    state: dict[int, dict[str, Any]] = {}
    for name, v in tensors.items():
        _, pid, key = name.split(".", 2)
        state.setdefault(int(pid), {})[key] = v
    for name, v in meta["scalars"].items():
        pid, key = name.split(".", 1)
        state.setdefault(int(pid), {})[key] = v
    return {"state": state, "param_groups": meta["param_groups"]}


def save_training_state(ckpt_dir: str | Path, *, model: Any, optimizer: Any | None = None, step: int,
                        scheduler: Any | None = None, np_rng: np.random.Generator | None = None,
                        extra: Mapping[str, Any] | None = None) -> Path:
    """Write a resumable checkpoint directory atomically (replaces any older one at `ckpt_dir`)."""
    import torch
    from safetensors.torch import save_file

    ckpt_dir = Path(ckpt_dir)
    with atomic_path(ckpt_dir) as tmp:
        tmp.mkdir(parents=True)
        save_weights(tmp / "model.safetensors", model)
        meta: dict[str, Any] = {"step": int(step), "extra": dict(extra or {})}
        if optimizer is not None:
            tensors, ometa = _split_optimizer(optimizer.state_dict())
            save_file(tensors, str(tmp / "optimizer.safetensors"))
            meta["optimizer"] = ometa
        rng = {"torch_cpu": torch.get_rng_state()}
        if torch.cuda.is_available():
            for i, s in enumerate(torch.cuda.get_rng_state_all()):
                rng[f"torch_cuda_{i}"] = s
        save_file(rng, str(tmp / "rng.safetensors"))
        if scheduler is not None:
            meta["scheduler"] = scheduler.state_dict()
        if np_rng is not None:
            meta["np_rng"] = np_rng.bit_generator.state
        (tmp / STATE_FILE).write_text(json.dumps(meta, default=_json_default))
    return ckpt_dir


def _json_default(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serialisable in a checkpoint: {type(o).__name__}")


def has_checkpoint(ckpt_dir: str | Path) -> bool:
    return (Path(ckpt_dir) / STATE_FILE).is_file()


def load_training_state(ckpt_dir: str | Path, *, model: Any, optimizer: Any | None = None,
                        scheduler: Any | None = None, np_rng: np.random.Generator | None = None) -> dict[str, Any]:
    """Restore a checkpoint written by :func:`save_training_state`; returns {'step', 'extra'}."""
    import torch
    from safetensors.torch import load_file

    ckpt_dir = Path(ckpt_dir)
    meta = json.loads((ckpt_dir / STATE_FILE).read_text())
    load_weights(ckpt_dir / "model.safetensors", model)
    if optimizer is not None and "optimizer" in meta:
        tensors = load_file(str(ckpt_dir / "optimizer.safetensors"), device="cpu")
        optimizer.load_state_dict(_join_optimizer(tensors, meta["optimizer"]))
    rng = load_file(str(ckpt_dir / "rng.safetensors"))
    torch.set_rng_state(rng["torch_cpu"])
    cuda = [rng[k] for k in sorted(rng) if k.startswith("torch_cuda_")]
    if cuda and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(cuda)
    if scheduler is not None and "scheduler" in meta:
        scheduler.load_state_dict(meta["scheduler"])
    if np_rng is not None and "np_rng" in meta:
        np_rng.bit_generator.state = meta["np_rng"]
    return {"step": int(meta["step"]), "extra": meta.get("extra", {})}


# ---- a job of several units (arms, cells): keep finished units, drop state of other parameters --------

STAMP_FILE = "params.json"


def stamp_job_dir(ckpt_dir: str | Path, stamp: Mapping[str, Any]) -> bool:
    """Make `ckpt_dir` the resume folder of a job whose results depend on `stamp` (JSON-able).

    Whatever a run with another stamp left there (finished units, training state) is deleted first, so
    state saved under other parameters is never resumed. Returns True when something was dropped."""
    import shutil

    from paperflow.core.io import read_json, write_json

    ckpt_dir = Path(ckpt_dir)
    stamp = json.loads(json.dumps(stamp))  # tuples -> lists, as read back
    dropped = False
    if ckpt_dir.exists() and (not (ckpt_dir / STAMP_FILE).exists() or read_json(ckpt_dir / STAMP_FILE) != stamp):
        shutil.rmtree(ckpt_dir)
        dropped = True
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    write_json(ckpt_dir / STAMP_FILE, stamp)
    return dropped


def finished_unit(ckpt_dir: str | Path | None, name: str) -> Any | None:
    """The kept result of unit `name` of a stamped job folder, or None (not finished, or no folder)."""
    from paperflow.core.io import read_json

    if ckpt_dir is None or not (Path(ckpt_dir) / f"{name}.json").exists():
        return None
    return read_json(Path(ckpt_dir) / f"{name}.json")


def keep_unit(ckpt_dir: str | Path | None, name: str, result: Any) -> None:
    """Keep unit `name`'s result (atomic JSON) and delete its training state `<ckpt_dir>/<name>/`."""
    import shutil

    from paperflow.core.io import write_json

    if ckpt_dir is None:
        return
    write_json(Path(ckpt_dir) / f"{name}.json", result)
    shutil.rmtree(Path(ckpt_dir) / name, ignore_errors=True)
