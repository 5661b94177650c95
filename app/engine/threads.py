"""How many intra-op threads the engine core runs: the CPUs this process is given, not the host's."""

from __future__ import annotations

import math
import os
from pathlib import Path

WAIT_POLICY = "OMP_WAIT_POLICY"  # read by OpenMP (libgomp, libiomp) when it loads, before torch is imported
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


def passive_waits(environ: dict[str, str] | None = None) -> str:
    """Set OpenMP's wait policy for the processes started after this call to PASSIVE unless set (a thread waiting at
    the end of a parallel region sleeps instead of spinning): on a CPU shared with other work, a spinning thread takes
    the core its peer needs, and each of a step's hundreds of small parallel regions waits for a time slice (NLLB-600M
    shape, int8, beam 4 x 16, 2 threads beside other load: 8.0 s spinning, 2.3 s passive, 2.3 s at 1 thread).
    Returns the policy in force."""
    env = os.environ if environ is None else environ
    return env.setdefault(WAIT_POLICY, "PASSIVE")
