"""Atomic output writing and provenance manifests.

Every output is written to a temporary file in the same directory and renamed into place, so a
killed job never leaves a file that looks finished. Every stage writes `<output>.manifest.json`
next to its main output (config hash, seed, package versions, input digests, wall time, metrics).

An output and its manifest are one unit. A manifest is not a declared Snakemake output, so when a job
is killed Snakemake deletes the output but not the manifest beside it. Hence:

* `Stage.__enter__` deletes the manifests of its outputs before the stage writes anything, so a
  manifest on disk was always written after the output it describes (a job killed between writing
  its output and its manifest leaves an output without a manifest, and Snakemake reruns it);
* the manifest records the output's sha256, byte count and file count, and `read_manifest` checks
  them (`StaleManifestError` when the output changed or is gone): sizes always, the digest for
  outputs up to `VERIFY_DIGEST_MAX_BYTES` (larger ones, e.g. checkpoints, are compared by size).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from paperflow.core.config import config_hash

MANIFEST_SUFFIX = ".manifest.json"
VERIFY_DIGEST_MAX_BYTES = 64 * 1024 * 1024
_TRACKED_PACKAGES = ("paperflow", "numpy", "scipy", "torch", "transformers", "datasets", "snakemake",
                     "scikit-learn", "nibabel", "nilearn", "accelerate", "safetensors", "tokenizers")


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temp path beside `path`; on success rename it to `path`, on error delete it.

    Works for files and directories (the temp path does not exist yet when yielded).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)) / path.name
    try:
        yield tmp
        if not tmp.exists():
            raise FileNotFoundError(f"stage did not write {path}")
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        os.replace(tmp, path)
    finally:
        shutil.rmtree(tmp.parent, ignore_errors=True)


def write_text(path: str | Path, text: str) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return Path(path)


def _json_default(o: Any) -> Any:
    try:
        import numpy as np

        if isinstance(o, np.generic):
            return o.item()
        if isinstance(o, np.ndarray):
            return o.tolist()
    except ImportError:  # pragma: no cover
        pass
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def write_json(path: str | Path, obj: Any) -> Path:
    return write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n")


def read_json(path: str | Path) -> Any:
    return json.loads(Path(path).read_text())


# files Snakemake itself adds to directory outputs after a job ends: not part of what a stage wrote
SNAKEMAKE_MARKERS = frozenset({".snakemake_timestamp"})


def _files(path: Path) -> list[Path]:
    if not path.is_dir():
        return [path]
    return sorted(p for p in path.rglob("*") if p.is_file() and p.name not in SNAKEMAKE_MARKERS)


def file_digest(path: str | Path) -> str:
    """sha256 of a file, or of a directory's files (names + contents, sorted; Snakemake's markers excluded)."""
    path = Path(path)
    h = hashlib.sha256()
    files = _files(path)
    for f in files:
        if path.is_dir():
            h.update(str(f.relative_to(path)).encode())
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def output_size(path: str | Path) -> tuple[int, int]:
    """(bytes, files) of a file or of a directory's files."""
    files = _files(Path(path))
    return sum(f.stat().st_size for f in files), len(files)


class StaleManifestError(RuntimeError):
    """A manifest does not describe the output beside it (the output changed, or is gone)."""


def package_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in _TRACKED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


@functools.lru_cache(maxsize=1)
def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_info() -> dict[str, str]:
    """The CPU a job ran on. Float results of the same code and seed can differ between CPUs (torch picks
    its kernels by instruction set: `torch_cpu_capability`, e.g. AVX2 vs AVX512), and at tiny scale such
    differences can move a verdict (unlearning README, 6 December), so every manifest records it. torch is
    consulted only if the stage already imported it."""
    out = {"machine": platform.machine(), "cpu": _cpu_model(), "cpu_count": str(os.cpu_count() or 0)}
    torch = sys.modules.get("torch")
    if torch is not None:
        with contextlib.suppress(AttributeError):  # a torch too old to report its kernel level
            out["torch_cpu_capability"] = str(torch.backends.cpu.get_cpu_capability())
    return out


def manifest_path(output: str | Path) -> Path:
    return Path(str(output) + MANIFEST_SUFFIX)


@dataclass
class Stage:
    """One run of a stage: collects metrics and writes the manifest(s) when it succeeds.

    >>> with Stage("bandits.simulate", config=cfg, seed=3, inputs=[], outputs=[out]) as st:
    ...     write_json(out, result); st.metrics["final_regret"] = 12.0
    """

    name: str
    config: Mapping[str, Any]
    outputs: Sequence[str | Path]
    inputs: Sequence[str | Path] = ()
    seed: int | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    _t0: float = 0.0

    def __enter__(self) -> "Stage":
        self._t0 = time.perf_counter()
        for out in self.outputs:  # an old manifest must never sit beside a new (or deleted) output
            manifest_path(out).unlink(missing_ok=True)
        self._input_digests = {str(p): file_digest(p) for p in self.inputs}
        return self

    def __exit__(self, exc_type, exc, tb) -> None:  # type: ignore[no-untyped-def]
        if exc_type is not None:
            return
        wall = time.perf_counter() - self._t0
        for out in self.outputs:
            if not Path(out).exists():
                raise FileNotFoundError(f"stage {self.name} did not write its output {out}")
            manifest = {
                "stage": self.name,
                "output": str(out),
                "output_sha256": file_digest(out),
                "output_bytes": output_size(out)[0],
                "output_files": output_size(out)[1],
                "config_hash": config_hash(dict(self.config)),
                "config": dict(self.config),
                "seed": self.seed,
                "inputs": self._input_digests,
                "packages": package_versions(),
                "host": machine_info(),
                "argv": sys.argv,
                "wall_time_s": round(wall, 4),
                "metrics": self.metrics,
                **self.extra,
            }
            write_json(manifest_path(out), manifest)


def verify_manifest(output: str | Path, manifest: Mapping[str, Any], *, digest: bool | None = None) -> None:
    """Raise StaleManifestError unless `manifest` describes `output` as it is on disk.

    digest: None (default) compares the sha256 when the output is at most VERIFY_DIGEST_MAX_BYTES,
    True always, False never (sizes only)."""
    output = Path(output)
    where = f"{manifest_path(output)} does not describe {output}"
    if not output.exists():
        raise StaleManifestError(f"{where}: the output is missing (a killed or partial run?)")
    nbytes, nfiles = output_size(output)
    if "output_bytes" in manifest and (manifest["output_bytes"], manifest.get("output_files", nfiles)) != (
            nbytes, nfiles):
        raise StaleManifestError(f"{where}: size {nbytes} B in {nfiles} file(s), manifest says "
                                 f"{manifest['output_bytes']} B in {manifest.get('output_files')}; rerun its job")
    if digest is None:
        digest = nbytes <= VERIFY_DIGEST_MAX_BYTES
    if digest and "output_sha256" in manifest and manifest["output_sha256"] != file_digest(output):
        raise StaleManifestError(f"{where}: the output's sha256 differs from the manifest's; rerun its job")


def read_manifest(output: str | Path, *, verify: bool = True) -> dict[str, Any]:
    """The manifest of `output`, checked against the output on disk (see `verify_manifest`)."""
    manifest = read_json(manifest_path(output))
    if verify:
        verify_manifest(output, manifest)
    return manifest
