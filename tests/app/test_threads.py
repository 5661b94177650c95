"""The engine core's thread count: OMP_NUM_THREADS, else the usable CPUs capped by the container's quota."""

import os

from app.engine.threads import cgroup_cpus, core_threads, passive_waits


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
    assert cgroup_cpus(quota) is None and core_threads({}, quota) == (usable, "usable CPUs (affinity)")


def test_openmp_waits_passive_unless_set():
    """The launcher makes the cores' OpenMP threads sleep at the end of a parallel region (a spinning thread takes the
    core its peer needs on a shared CPU); an operator's own setting wins."""
    env: dict[str, str] = {}
    assert passive_waits(env) == "PASSIVE" and env == {"OMP_WAIT_POLICY": "PASSIVE"}
    env = {"OMP_WAIT_POLICY": "ACTIVE"}
    assert passive_waits(env) == "ACTIVE" and env == {"OMP_WAIT_POLICY": "ACTIVE"}
