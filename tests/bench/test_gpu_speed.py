"""The GPU benchmark's one command runs, at a tiny size, on whatever device this machine has."""

from bench import gpu_speed


def test_gpu_benchmark_runs_at_a_tiny_size(capsys):
    """Every engine generates the forced number of tokens (the benchmark checks it) and the table is printed."""
    argv = ["--tiny", "--batch-sizes", "1,4", "--beams", "1,2", "--sentences", "4", "--batch1-sentences", "2"]
    assert gpu_speed.main([*argv, "--new-tokens", "3", "--compare-overlap"]) == 0
    out = capsys.readouterr().out
    assert "| greedy | 4 |" in out and "| beam 2 | 4 |" in out and "ours fp16 greedy batch 1" in out
    assert "ours seq fp16" in out  # the overlap scheduler's engine beside the sequential one
