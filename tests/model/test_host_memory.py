"""The engine's host allocator: large temporaries come from the heap, and freed heap stays for reuse, instead of
being mapped and faulted in afresh every time (glibc; each case in a fresh process, as the setting is per process)."""

import os
import subprocess
import sys

import pytest

from model.runner.host_memory import ENV

PROBE = """
import ctypes, ctypes.util, sys, torch
from model.runner.host_memory import keep_freed_memory

FIELDS = "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"


class Info(ctypes.Structure):  # glibc's struct mallinfo2
    _fields_ = [(name, ctypes.c_size_t) for name in FIELDS.split()]

libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.mallinfo2.restype = Info
said = keep_freed_memory() if sys.argv[1] == "keep" else None
before = libc.mallinfo2()
x = torch.ones(4 << 20)  # 16 MiB
mapped = libc.mallinfo2().hblkhd - before.hblkhd  # bytes in blocks mapped on their own
del x
print(said, mapped >> 20, (libc.mallinfo2().arena - before.arena) >> 20)  # MiB
"""


def probe(mode: str, **env: str) -> list[str]:
    """What keep_freed_memory said in a fresh process; the MiB mapped on their own while a 16 MiB tensor lived, and
    the MiB the heap grew by, counted after it was freed."""
    environ = {k: v for k, v in os.environ.items() if k not in ENV} | env
    out = subprocess.run([sys.executable, "-c", PROBE, mode], env=environ, capture_output=True, text=True, check=True)
    return out.stdout.split()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_large_temporaries_come_from_a_heap_that_stays_for_reuse():
    said, mapped, heap = probe("keep")
    assert said == "True" and int(mapped) < 16 <= int(heap)  # from the heap, which keeps it after the free
    _, mapped, heap = probe("default")
    assert int(mapped) >= 16 and int(heap) < 16  # glibc's default: mapped on its own, unmapped when freed


def test_the_operators_malloc_settings_win():
    assert probe("keep", MALLOC_TRIM_THRESHOLD_="0")[0] == "False"
