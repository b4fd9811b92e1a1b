"""Helpers for the cluster tests: a private copy of the working tree to run Snakemake/DVC in."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent


def copy_tree(dst: Path) -> Path:
    """Tracked + untracked (not ignored) files of the checkout, as they are on disk."""
    dst.mkdir(parents=True, exist_ok=True)
    out = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=REPO, capture_output=True,
                         check=True).stdout.decode()
    for rel in filter(None, out.split("\0")):
        src = REPO / rel
        if not src.is_file():
            continue
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst / rel)
    return dst


def env(**extra: str) -> dict[str, str]:
    e = dict(os.environ)
    e["PATH"] = f"{VENV_BIN}{os.pathsep}{e.get('PATH', '')}"
    e.update({"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PAPERFLOW_PROGRESS": "0", "DVC_NO_ANALYTICS": "1"})
    e.update(extra)
    return e


@pytest.fixture
def repo_copy(tmp_path: Path) -> Path:
    return copy_tree(tmp_path / "repo")
