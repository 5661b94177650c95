"""Sections written on a GPU machine go into the docs with one command."""

from bench.report import main


def test_sections_of_files_replace_their_namesakes(tmp_path):
    """A section of the same heading is replaced in place, a new one appended, the rest kept."""
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\n## A (x.py)\n\nold a\n\n## B\n\nkept b\n", encoding="utf-8")
    new = tmp_path / "gpu.md"
    new.write_text("# Benchmarks\n\n## A (x.py)\n\nnew a\n\n### detail\n\nmore a\n\n## C\n\nnew c\n", encoding="utf-8")
    assert main([str(doc), str(new)]) == 0
    text = doc.read_text(encoding="utf-8")
    assert text == "# Benchmarks\n\n## A (x.py)\n\nnew a\n\n### detail\n\nmore a\n\n## B\n\nkept b\n\n## C\n\nnew c\n"
