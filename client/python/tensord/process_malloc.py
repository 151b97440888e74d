"""The client process's malloc, set for streams of large messages.

gRPC receives each message of a download (chunks of 1 MiB) into buffers it allocates on its own
threads and frees once Python has the bytes. With glibc's default thresholds those buffers come
from memory mapped fresh for them and handed back to the kernel when freed (a chunk above the
mmap threshold, or the top of a thread's heap above the trim threshold), so every chunk pays a
page fault per 4 KiB: about 100 faults per MiB downloaded, and most of the client's time on a
256 MiB get (0.35-0.7 GiB/s on a 2-core machine). With the mmap threshold at 32 MiB (the
ceiling of glibc's own adaptive threshold) and the trim threshold at 64 MiB (twice that, as
glibc's adaptive rule sets it), freed buffers are reused: 7-13 faults per MiB, 1.3-2.8 GiB/s.

Set once per process, at the first `tensord.connect`, on glibc only, and never where the
process chose for itself (a MALLOC_*_ variable or GLIBC_TUNABLES naming malloc).
TENSORD_CLIENT_MALLOC=default leaves glibc's defaults alone.
"""
from __future__ import annotations

import ctypes
import os
import sys
import threading

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 32 << 20
TRIM_THRESHOLD_BYTES = 64 << 20
_OWN_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_",
                 "MALLOC_MMAP_MAX_")

_lock = threading.Lock()
_state: str | None = None


def state() -> str | None:
    """What configure() did: "set", or why not ("asked", "process", "not glibc"); None before."""
    return _state


def configure() -> str:
    """Sets the thresholds (once per process); returns state()."""
    global _state
    with _lock:
        if _state is None:
            _state = _configure()
        return _state


def _configure() -> str:
    if os.environ.get("TENSORD_CLIENT_MALLOC", "") == "default":
        return "asked"
    if any(k in os.environ for k in _OWN_SETTINGS) or \
            "malloc" in os.environ.get("GLIBC_TUNABLES", ""):
        return "process"
    if not sys.platform.startswith("linux"):
        return "not glibc"
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 (present in glibc only)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return "not glibc"
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    if not (mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) and
            mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)):
        return "not glibc"
    return "set"
