"""This process's memory and what is left for it, portably: ``resource`` exists on Unix only (KiB
on Linux, bytes on macOS); on Windows psutil is used when installed, else a figure is unknown
(None)."""

from __future__ import annotations

import ctypes
import sys


def peak_rss_mb(children: bool = False) -> float | None:
    """Peak resident set size in MB (2**20 bytes) of this process (or of its finished children),
    or None where the platform does not say."""
    try:
        import resource
    except ImportError:  # Windows
        if children:
            return None
        try:
            import psutil
        except ImportError:
            return None
        info = psutil.Process().memory_info()
        return getattr(info, "peak_wset", info.rss) / 2**20
    usage = resource.getrusage(resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF).ru_maxrss
    return usage / 2**20 if sys.platform == "darwin" else usage / 1024.0


def status_mb(field: str) -> float | None:
    """A memory field of /proc/self/status (``VmRSS``, ``VmHWM``, ...) in MB; None off Linux."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


def reset_peak() -> bool:
    """Reset this process's peak-RSS mark (Linux ``clear_refs`` 5), so that ``VmHWM`` measures
    from now on; False where unsupported."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation: the system's (Linux MemAvailable) plus what
    this process has freed and its allocator keeps for reuse (:func:`heap_free_bytes`), or None if
    unknown."""
    import os

    system = None
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    system = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    if system is None:
        try:
            system = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
            return None
    return system + heap_free_bytes()


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                     "fsmblks", "uordblks", "fordblks", "keepcost")]


def heap_free_bytes() -> int:
    """Bytes this process has freed that its C allocator keeps for reuse rather than handing back
    to the system (glibc's ``mallinfo2``: the main heap's free chunks), which the system's figure
    does not count: the command keeps all it frees (:mod:`privmarg.cli.allocator`). 0 where
    unknown (not glibc 2.33+)."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        info = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        return 0
    info.argtypes, info.restype = [], _MallInfo2
    return int(info().fordblks)
