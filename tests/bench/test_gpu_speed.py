"""The GPU benchmark's one command runs, at tiny shapes, on whatever device this machine has; its plan and targets."""

import json

from bench import gpu_speed
from bench.gpu_speed import beam_of


def tables(text: str) -> list[list[dict[str, str]]]:
    """Every markdown table in `text`, as rows of {column: cell}."""
    found, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("|") and i + 1 < len(lines) and lines[i + 1].startswith("|---"):
            head, rows = [c.strip() for c in line.strip("|").split("|")], []
            for row in lines[i + 2 :]:
                if not row.startswith("|"):
                    break
                rows.append(dict(zip(head, (c.strip() for c in row.strip("|").split("|")), strict=True)))
            found.append(rows)
    return found


def table(text: str, column: str) -> list[dict[str, str]]:
    """The one table of `text` that has `column`."""
    (rows,) = [t for t in tables(text) if t and column in t[0]]
    return rows


def check_numbers(text: str, result: dict) -> None:
    """The section's numbers are the JSON's, computed here again: tokens/s and ratios per cell, the step against its
    bounds per row count, and the batch-1 latency target."""
    main, cells = result["main"], {(c["mode"], c["batch"]): c["tps"] for c in result["cells"]}
    tps_rows = {(r["mode"], int(r["batch"])): r for r in table(text, "mode")}
    assert set(tps_rows) == set(cells)
    for (mode, batch), tps in cells.items():
        row = tps_rows[mode, batch]
        assert row["rows"] == str(batch * beam_of(mode))
        assert {n: row[n] for n in tps} == {n: f"{v:,.0f}" for n, v in tps.items()}
        for other in (n for n in tps if n.startswith("ours seq ")):
            assert row[f"{main} / {other}"] == f"{tps[main] / tps[other]:.2f}x"
    card, steps = result["card"], {str(s["rows"]): s for s in result["steps"]}
    for row in table(text, "x roofline"):
        s = steps[row["rows"]]
        memory, compute = s["bytes"] / card["bandwidth"], s["flops"] / card["flop_rate"]
        assert row["memory bound (us)"] == f"{memory * 1e6:.1f}" and row["compute bound (us)"] == f"{compute * 1e6:.1f}"
        assert row["x roofline"] == f"{s['step_s'] / max(memory, compute):.2f}"
    goals = {r["target"]: (r["measured"], r["met"]) for r in table(text, "target")}
    ms = 1000 / cells["greedy", 1][main]
    assert goals[f"{main} greedy batch 1 ms per token <= 1.5"] == (f"{ms:,.2f}", "yes" if ms <= 1.5 else "**no**")


TINY = ["--batch-sizes", "1,4", "--beams", "1,2", "--sentences", "4", "--batch1-sentences", "2", "--new-tokens", "3"]


def test_gpu_benchmark_runs_at_a_tiny_size(tmp_path, capsys):
    """Every engine generates the forced number of tokens (the benchmark checks it); the tables, the section in the
    doc and the JSON hold every cell, greedy at the rows the beams reached, and the roofline at each row count."""
    doc, out = tmp_path / "benchmarks.md", tmp_path / "out"
    assert gpu_speed.main([*TINY, "--shape", "tiny", "--compare-overlap", "--doc", str(doc), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "| greedy | 4 | 4 |" in text and "| beam 2 | 4 | 8 |" in text and "| greedy | 8 | 8 |" in text
    assert "ours seq fp16" in text  # the overlap scheduler's engine beside the sequential one
    assert "## GPU decoding: tiny Marian shape (bench/gpu_speed.py)" in doc.read_text()
    assert (out / "gpu_speed-tiny.md").read_text().strip() in doc.read_text()
    result = json.loads((out / "gpu_speed-tiny.json").read_text())
    assert [s["rows"] for s in result["steps"]] == [1, 2, 4, 8]
    assert all(s["step_s"] > 0 and s["kernels"] > 0 and s["x_roofline"] > 0 for s in result["steps"])
    assert result["steps"][2]["wall_s greedy"] > 0 and result["steps"][3]["wall_s beam 2"] > 0
    assert {(c["mode"], c["batch"]) for c in result["cells"]} == {
        ("greedy", 1), ("greedy", 4), ("beam 2", 1), ("beam 2", 4), ("greedy", 2), ("greedy", 8)
    }  # fmt: skip
    assert result["startup"]["ours fp16"]["load_s"] > 0 and result["card"]["bandwidth"] > 0
    check_numbers(text, result)


def test_an_nllb_shape_goes_through_the_project_loader(tmp_path, capsys):
    """The NLLB builder's checkpoint loads in ours and in `transformers`, both generate the forced tokens."""
    argv = ["--shape", "tiny-nllb", "--batch-sizes", "2", "--beams", "1", "--sentences", "2", "--new-tokens", "2"]
    assert gpu_speed.main([*argv, "--ours", "fp32", "--hf", "fp32", "--no-write", "--workdir", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "| greedy | 2 | 2 |" in text and "ours fp32 / HF fp32" in text and "pre-LN" in text
    assert "ours fp32 / HF fp16, greedy batch 64 >= 5 | not measured" in text
    assert (tmp_path / "tiny-nllb" / "sentencepiece.bpe.model").exists()


def test_past_the_budget_cells_are_skipped_and_listed(capsys):
    """--budget 0: no cell runs, the section says which were skipped."""
    assert gpu_speed.main([*TINY, "--shape", "tiny", "--budget", "0", "--hf", "", "--no-write"]) == 0
    text = capsys.readouterr().out
    assert "Skipped (past --budget 0 s): greedy batch 1, greedy batch 4, beam 2 batch 1, beam 2 batch 4" in text


def test_beam_cells_bring_greedy_at_their_rows():
    """Beam 4 at 32, 64, 256 needs greedy at 128 and 1024 rows (256 is measured anyway), ours only."""
    args = gpu_speed.parse_args(["--shape", "opus", "--batch-sizes", "32,64,256"])
    extra = [cell for cell in gpu_speed.plan(args) if cell[2]]
    assert extra == [(1, 128, True), (1, 1024, True)]


def test_targets_say_met_or_not():
    """Beam 4 at 32 rows: 20x transformers fp32 (met), 2x fp16 (not met), 0.95x greedy at 128 rows (met); start-up
    60 s (met); a cell the run lacks: not measured."""
    cells = [
        {"mode": "beam 4", "batch": 32, "tps": {"ours fp16": 2000.0, "HF fp32": 100.0, "HF fp16": 1000.0}},
        {"mode": "greedy", "batch": 128, "tps": {"ours fp16": 8421.0}},
    ]
    startup = {"ours fp16": {"load_s": 10.0, "capture_s": 50.0, "graphs": 114}}
    result = {"family": "marian", "main": "ours fp16", "cells": cells, "steps": [], "busy": {}, "startup": startup}
    goals = {t: (v, ok) for t, v, ok in gpu_speed.targets(result)}
    assert goals["ours fp16 / HF fp32, beam 4 batch 32 >= 10"] == ("20.00", "yes")
    assert goals["ours fp16 / HF fp16, beam 4 batch 32 >= 5"] == ("2.00", "**no**")
    assert goals["beam 4 batch 32 row-tokens/s / greedy at 128 rows >= 0.9"] == ("0.95", "yes")
    assert goals["ours fp16 step at 64 rows (us) <= 250"] == ("not measured", "-")
    assert goals["ours fp16 start-up: load + capture of every graph size (s) <= 90"] == ("60.00", "yes")
