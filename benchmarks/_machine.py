"""What every benchmark report says about the machine it ran on (imported by the scripts beside it)."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any


def cpu_name() -> str:
    """The CPU model from /proc/cpuinfo, or what ``platform`` knows where that file is missing."""
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.is_file() else []
    names = (line.split(":", 1)[1].strip() for line in lines if line.startswith("model name"))
    return next(names, platform.processor())


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages: other work on the machine skews the timings."""
    return [round(x, 2) for x in os.getloadavg()]


def machine(**extra: Any) -> dict[str, Any]:
    """CPU, cores, Python, platform, the JVM options an OpenSearch node is given beyond its own (the
    default JIT unless set: the tests set C1 alone) and load at the start, plus the script's own ``extra``
    fields."""
    return {
        "cpu": cpu_name(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "opensearch_java_opts": os.environ.get("OPENSEARCH_JAVA_OPTS", ""),
        **extra,
        "load_average_at_start": load_average(),
    }
