"""Shared helpers for the benchmark scripts: timing of whole commands and a machine description."""

from __future__ import annotations

import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from datetime import date


def tcalc_command() -> list[str]:
    """The installed `tcalc` next to this interpreter, else `python -m transformer_calc`."""
    exe = shutil.which("tcalc", path=os.path.dirname(sys.executable)) or shutil.which("tcalc")
    return [exe] if exe else [sys.executable, "-m", "transformer_calc"]


def time_command(argv: list[str], repeats: int = 21) -> tuple[float, float]:
    """(median, min) wall seconds of a whole process, output discarded; one warm-up run first."""
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), min(samples)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(line.split(":", 1)[1].strip() for line in fh if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"{date.today().isoformat()}, {os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, "
        f"load average {load:.2f}"
    )
