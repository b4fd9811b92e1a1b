"""Process-level memory allocator settings for stages that churn through large numpy temporaries.

glibc's malloc serves every request above a dynamic threshold (128 KiB at start) with a fresh `mmap` and
returns it to the kernel on `free`, so a stage that allocates and frees arrays of tens of MB in a loop
(the fmri prep of one run after another, the embedding of batch after batch) page-faults every page of
every temporary again: on the tiny fmri default that was 1.9 M minor faults and 17 s of system time in
one prep job (issue 24). `retain_freed_memory` raises the mmap threshold to glibc's maximum (32 MiB on
64-bit) and keeps freed memory in the heap for reuse. It changes where memory comes from, never a value
computed. Elsewhere than glibc (macOS, musl) it does nothing and says so.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger(__name__)

# mallopt parameters (glibc <malloc.h>)
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
MMAP_THRESHOLD_MAX = 32 * 1024 * 1024  # glibc's cap on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX)


def retain_freed_memory(trim_threshold: int = 4 * 1024**3, top_pad: int = 256 * 1024**2) -> bool:
    """Tell glibc malloc to serve allocations up to 32 MiB from the heap and to keep up to
    `trim_threshold` bytes of freed memory for reuse. Returns True when every setting was accepted."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        log.debug("no glibc mallopt here: allocator settings unchanged")
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    ok = [mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX), mallopt(M_TRIM_THRESHOLD, min(trim_threshold, 2**31 - 1)),
          mallopt(M_TOP_PAD, min(top_pad, 2**31 - 1))]
    return all(r == 1 for r in ok)
