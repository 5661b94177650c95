"""The engine core's thread count: OMP_NUM_THREADS, else the usable CPUs capped by the container's quota."""

import os

import pytest

from app.engine.threads import (
    AFFINITY,
    CpuShare,
    brief_spins,
    cgroup_cpus,
    core_threads,
    cpu_seconds,
    cpu_share,
    huge_pages,
)


def test_omp_num_threads_wins(tmp_path):
    assert core_threads({"OMP_NUM_THREADS": "3"}, tmp_path / "none") == (3, "OMP_NUM_THREADS")


def test_a_cgroup_quota_caps_the_usable_cpus(tmp_path):
    quota = tmp_path / "cpu.max"
    quota.write_text("150000 100000\n")
    assert cgroup_cpus(quota) == 2
    usable = len(os.sched_getaffinity(0))
    quota.write_text("50000 100000\n")
    threads, why = core_threads({}, quota)
    assert threads == 1 and ("quota" in why or usable == 1)
    quota.write_text("max 100000\n")
    assert cgroup_cpus(quota) is None and core_threads({}, quota) == (usable, AFFINITY)


def test_openmp_threads_spin_briefly_unless_set():
    """The launcher makes the cores' OpenMP threads spin briefly before they sleep (a step's parallel regions follow
    each other within microseconds); an operator's own policy or spin count wins."""
    env: dict[str, str] = {}
    assert brief_spins(env) == "GOMP_SPINCOUNT=10000" and env == {"GOMP_SPINCOUNT": "10000"}
    env = {"OMP_WAIT_POLICY": "PASSIVE"}
    assert brief_spins(env) == "OMP_WAIT_POLICY=PASSIVE" and env == {"OMP_WAIT_POLICY": "PASSIVE"}
    env = {"GOMP_SPINCOUNT": "0"}
    assert brief_spins(env) == "GOMP_SPINCOUNT=0" and env == {"GOMP_SPINCOUNT": "0"}
    env = {}
    assert huge_pages(env) == "THP_MEM_ALLOC_ENABLE=1" and huge_pages({"THP_MEM_ALLOC_ENABLE": "0"}).endswith("=0")


class Machine:
    """CPU seconds as /proc would count them: the core's own and the others', at `cores` each per busy second."""

    def __init__(self) -> None:
        self.busy = self.own = 0.0

    def run(self, seconds: float, ours: float, others: float) -> None:
        self.own += seconds * ours
        self.busy += seconds * (ours + others)

    def read(self, cpus: set[int]) -> tuple[float, float]:
        return self.busy, self.own


def test_threads_follow_the_share_other_processes_leave():
    # catches: a core that keeps 2 spinning threads beside a busy process (594-1,225 tokens/s against 3,366 at 1),
    # one that stays at 1 thread once the CPUs are free again, or one that counts what others did while it idled
    m, clock = Machine(), [0.0]
    share = CpuShare(2, {0, 1}, m.read)

    def rounds(seconds: float, others: float) -> list[int]:
        changes = []
        for _ in range(round(seconds / 0.1)):
            changes.append(share.busy(clock[0]))
            m.run(0.1, ours=share.threads, others=others if share.threads == 1 else others * 0.7)
            clock[0] += 0.1
        return [c for c in changes if c is not None]

    assert rounds(5, others=0) == []  # quiet
    share.idle()  # the core idles while another process works: not counted
    m.run(10, ours=0, others=2)
    clock[0] += 10
    assert rounds(5, others=0) == [] and share.threads == 2
    assert rounds(5, others=1) == [1]  # another process takes a core
    assert rounds(5, others=0.4) == []  # and nearly stops: no thread back yet (no flapping around half a CPU)
    assert rounds(5, others=0.1) == [2]  # and stops


def test_cpu_seconds_reads_proc(tmp_path):
    busy, own = cpu_seconds(os.sched_getaffinity(0))
    assert busy > 0 and 0 < own
    assert cpu_share(2, "OMP_NUM_THREADS", "cpu") is None  # the operator's count is kept
    assert cpu_share(2, AFFINITY, "cuda") is None
    with pytest.raises(OSError):
        cpu_seconds({0}, tmp_path / "no-stat")
