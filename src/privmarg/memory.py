"""Peak memory of this process, portably: ``resource`` exists on Unix only (KiB on Linux, bytes on
macOS); on Windows psutil is used when installed, else the figure is unknown (None)."""

from __future__ import annotations

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
