"""The command's memory allocator: freed blocks kept in the process for the next allocation, and
no huge pages asked for them.

A fit allocates tables the size of its model again and again (every refit of an adaptive run makes
new ones), and glibc hands a big block (past a threshold it raises up to 32 MB) straight back to the
operating system when it is freed, so the next table of that size pays a page fault for every page
it touches again. Keeping freed memory for reuse (no ``mmap`` for big blocks, no trimming of the
heap) saves those faults. The peak can be somewhat higher, as a freed block in the heap's middle
is kept rather than handed back (up to 15% measured, benchmarks/history/public-data.md, session
36); memory checks count what is kept as available (:func:`privmarg.memory.heap_free_bytes`).

numpy asks the kernel to back every array of 4 MB or more with huge pages (``madvise``). Where the
kernel compacts memory on demand for such requests (``transparent_hugepage/defrag`` set to
``madvise``, Linux's default since 4.6), a page fault in that memory can stall while the kernel
compacts; with freed blocks kept in the heap, the advice also outlives the array it was given for
(numpy issue 31590; measured in benchmarks/history/public-data.md, session 37). So the command
turns the advice off, unless the user set ``NUMPY_MADVISE_HUGEPAGE`` themselves.

Both are set only for the command line, which runs one job and exits, never on ``import privmarg``
(a library must not change its host's allocator). The freed memory is kept on Linux with glibc only,
the huge-page advice turned off on Linux only (numpy gives it nowhere else).
"""

from __future__ import annotations

import ctypes
import os
import sys

# mallopt's parameter numbers (glibc's malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
#: freed memory at the heap's top kept up to this many bytes (glibc's largest setting)
KEEP_BYTES = 2**31 - 1


def keep_freed_memory() -> bool:
    """Ask glibc's allocator to serve every block from its heap and never trim it; False where the
    C library has no ``mallopt`` or refuses (not Linux, not glibc)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own C library
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return mallopt(M_MMAP_MAX, 0) == 1 and mallopt(M_TRIM_THRESHOLD, KEEP_BYTES) == 1


def skip_hugepage_advice() -> bool:
    """Stop numpy from advising huge pages for its big arrays (the kernel then backs them as it
    does any memory); False off Linux, where the user chose with ``NUMPY_MADVISE_HUGEPAGE`` (their
    choice stands), or where numpy has no such switch."""
    if not sys.platform.startswith("linux") or "NUMPY_MADVISE_HUGEPAGE" in os.environ:
        return False
    try:
        from numpy._core import multiarray
    except ImportError:  # numpy < 1.26.2 (no numpy._core)
        from numpy.core import multiarray
    switch = getattr(multiarray, "_set_madvise_hugepage", None)  # numpy's own switch, since 1.19
    if switch is None:
        return False
    switch(False)
    return True
