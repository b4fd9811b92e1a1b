"""Progress bars for long loops. Output goes to stderr, which rules redirect into their log."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

from tqdm.auto import tqdm

T = TypeVar("T")


def progress(it: Iterable[T], desc: str, total: int | None = None, every_s: float = 5.0) -> Iterator[T]:
    """tqdm over `it`; updates at most every `every_s` seconds when not on a terminal (log files).

    PAPERFLOW_PROGRESS=0 disables it.
    """
    disable = os.environ.get("PAPERFLOW_PROGRESS", "1") == "0"
    mininterval = 0.2 if sys.stderr.isatty() else every_s
    yield from tqdm(it, desc=desc, total=total, mininterval=mininterval, disable=disable, file=sys.stderr,
                    dynamic_ncols=True)
