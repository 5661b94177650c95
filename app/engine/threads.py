"""How the engine core runs on the CPU: its intra-op threads (the CPUs this process is given, not the host's, fewer
while other processes take them), how they wait, and the pages its large tensors take."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path

WAIT_POLICY = "OMP_WAIT_POLICY"  # read by OpenMP (libgomp, libiomp) when it loads, before torch is imported
SPIN_COUNT, SPINS = "GOMP_SPINCOUNT", 10_000  # libgomp's turns of spinning before a waiting thread sleeps (300k unset)
HUGE_PAGES = "THP_MEM_ALLOC_ENABLE"  # torch's CPU allocator: madvise(MADV_HUGEPAGE) on blocks of 2 MiB and more
PERIOD = 2.0  # seconds of busy time over which `CpuShare` measures the others' share of the CPUs
HYSTERESIS = 0.2  # CPUs: a thread comes back once the others' share is this far below where it went (no flapping)
HZ = os.sysconf("SC_CLK_TCK")  # /proc's clock ticks per second
AFFINITY = "usable CPUs (affinity)"
PROC = Path("/proc")
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
    return usable, AFFINITY


def brief_spins(environ: dict[str, str] | None = None) -> str:
    """Make the OpenMP threads of the processes started after this call spin briefly (SPINS turns) at the end of a
    parallel region before they sleep, unless the operator set a wait policy or a spin count: a decode step's hundreds
    of small parallel regions follow each other within microseconds, and a sleeping thread is woken late for each
    (built-in model, 2 free cores, 64 texts greedy: 2,792 tokens/s passive, 4,033 spinning briefly, 3,255 at 1 thread;
    NLLB-600M int8 16 texts greedy: 248 -> 318). Where other processes take the cores, `CpuShare` drops to one thread,
    which never waits. Returns the setting in force."""
    env = os.environ if environ is None else environ
    if WAIT_POLICY in env:
        return f"{WAIT_POLICY}={env[WAIT_POLICY]}"
    return f"{SPIN_COUNT}={env.setdefault(SPIN_COUNT, str(SPINS))}"


def huge_pages(environ: dict[str, str] | None = None) -> str:
    """Have torch's CPU allocator ask for transparent huge pages for blocks of 2 MiB and more (THP_MEM_ALLOC_ENABLE,
    read when it first allocates) in the processes started after this call, unless the operator set it: a decode
    step streams every weight once, and 2 MiB pages spare it the TLB misses of 4 KiB ones (NLLB-600M's shape, float32,
    one text, 2 threads: 2-4% faster in three paired runs; the same RSS). Returns the setting in force."""
    env = os.environ if environ is None else environ
    return f"{HUGE_PAGES}={env.setdefault(HUGE_PAGES, '1')}"


def core_environment() -> list[str]:
    """Set what the engine cores inherit from the process that starts them (`brief_spins`, `huge_pages`), for the
    launcher and for a benchmark that runs as a core; the settings in force."""
    return [brief_spins(), huge_pages()]


class CpuShare:
    """The core's intra-op threads follow the share of its CPUs other processes leave it. Over each PERIOD of busy
    time (rounds back to back), the CPU time the machine spent on those CPUs less the core's own is the others'; the
    core runs `most` threads less one per core's worth the others took (at least one), and all again once they stop.
    A parallel region ends when its last thread does, so a thread that waits for a core the others hold stalls the
    whole step (built-in model, 64 texts greedy beside one busy process on 2 cores: 2 threads 594-1,225 tokens/s, 1
    thread 3,366)."""

    def __init__(self, most: int, cpus: set[int], read: Callable[[set[int]], tuple[float, float]] | None = None):
        self.most, self.threads, self.cpus = most, most, cpus
        self.read = read or cpu_seconds
        self.start: tuple[float, float, float] | None = None  # (time, the CPUs' busy seconds, the core's) at its start
        self.others = 0.0  # the others' share at the last window's end, in CPUs

    def idle(self) -> None:
        """The core has nothing to run: the window restarts at its next busy round (others working while it idles
        take nothing from it)."""
        self.start = None

    def busy(self, now: float) -> int | None:
        """A round ran at `now`: the new thread count when a full window says it changes, else None."""
        if self.start is None:
            self.start = (now, *self.read(self.cpus))
            return None
        if now - self.start[0] < PERIOD:
            return None
        busy, own = self.read(self.cpus)
        self.others = max(0.0, (busy - self.start[1]) - (own - self.start[2])) / (now - self.start[0])  # in CPUs
        self.start = (now, busy, own)
        fewer = max(1, self.most - math.floor(self.others + 0.5))  # one less per CPU's worth, rounded
        more = max(1, self.most - math.floor(self.others + 0.5 + HYSTERESIS))  # back up only well clear of it
        threads = fewer if fewer < self.threads else max(more, self.threads)
        if threads == self.threads:
            return None
        self.threads = threads
        return threads


def cpu_share(threads: int, why: str, device_type: str) -> CpuShare | None:
    """The share the core's threads follow, where they are the CPUs it may run on (not the operator's count, not a
    container's quota: the others' time on a host's CPUs says nothing of a quota), it decodes on the CPU and /proc
    tells the CPUs' time."""
    cpus = os.sched_getaffinity(0)
    if device_type != "cpu" or why != AFFINITY or not threads == len(cpus) > 1:
        return None
    try:
        cpu_seconds(cpus)
    except (OSError, ValueError, IndexError):  # no /proc to read (or not Linux's): the threads stay as they are
        return None
    return CpuShare(threads, cpus)


def cpu_seconds(cpus: set[int], stat: Path = PROC / "stat", own: Path = PROC / "self/stat") -> tuple[float, float]:
    """Busy seconds of these CPUs since boot (every state but idle and iowait) and this process's CPU seconds."""
    busy = 0
    for line in stat.read_text().splitlines():
        name, *ticks = line.split()
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus:
            busy += sum(map(int, ticks[:8])) - int(ticks[3]) - int(ticks[4])  # user..steal, less idle and iowait
    fields = own.read_text().rsplit(")", 1)[1].split()  # past "pid (comm)": fields 3 on, utime and stime 14 and 15
    return busy / HZ, (int(fields[11]) + int(fields[12])) / HZ
