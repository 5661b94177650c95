"""How many intra-op threads the engine core runs: the CPUs this process is given, not the host's."""

from __future__ import annotations

import math
import os
from pathlib import Path

CPU_MAX = Path("/sys/fs/cgroup/cpu.max")  # cgroup v2 quota: "max 100000" or "200000 100000" (2 CPUs)


def cgroup_cpus(path: Path = CPU_MAX) -> int | None:
    """The container's CPU quota, rounded up (None without a quota)."""
    try:
        quota, period = path.read_text().split()[:2]
    except (OSError, ValueError):
        return None
    return None if quota == "max" else max(1, math.ceil(int(quota) / int(period)))


def core_threads(environ: dict[str, str] | None = None, quota_path: Path = CPU_MAX) -> tuple[int, str]:
    """The core's torch threads and why: OMP_NUM_THREADS when set, else the CPUs the process may run on (its
    affinity), capped by the container's CPU quota (torch's default counts the host's cores, which oversubscribes a
    container limited to fewer and makes the decode step's threads wait on each other)."""
    env = os.environ if environ is None else environ
    if env.get("OMP_NUM_THREADS", "").isdigit():
        return max(1, int(env["OMP_NUM_THREADS"])), "OMP_NUM_THREADS"
    usable = len(os.sched_getaffinity(0))
    quota = cgroup_cpus(quota_path)
    if quota is not None and quota < usable:
        return quota, f"cgroup CPU quota ({quota} of {usable} usable CPUs)"
    return usable, "usable CPUs (affinity)"
