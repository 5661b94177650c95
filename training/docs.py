"""Stage 7: Debian manuals translated page by page (DocBook/po4a HTML), aligned as the Handbook is, into work/docs.*."""

import time
from pathlib import Path

from training.common import WORK, write_lines
from training.handbook import align_html

# package pair: (English pages, the Spanish page beside each, from its English path)
DOCS = {
    "debian-reference": ("/usr/share/debian-reference/*.en.html", lambda p: p.with_name(p.name[:-8] + ".es.html")),
    "maint-guide": (
        "/usr/share/doc/maint-guide/html/*.en.html",
        lambda p: Path("/usr/share/doc/maint-guide-es/html") / (p.name[:-8] + ".es.html"),
    ),
    "aptitude-doc": ("/usr/share/doc/aptitude/html/en/*.html", lambda p: p.parent.parent / "es" / p.name),
    "debian-edu-doc": (
        "/usr/share/doc/debian-edu-doc-en/*-manual.html",
        lambda p: Path("/usr/share/doc/debian-edu-doc-es") / p.name,
    ),
    "freedombox-doc": ("/usr/share/freedombox/manual/en/*.html", lambda p: p.parent.parent / "es" / p.name),
}


def main() -> None:
    """Align every page that has its Spanish translation, deduplicate by English, write work/docs.{en,es}."""
    start = time.time()
    unique: dict[str, str] = {}
    for name, (pattern, spanish) in DOCS.items():
        before = len(unique)
        for en_path in sorted(Path("/").glob(pattern.lstrip("/"))):
            if spanish(en_path).exists():
                unique.update(align_html(en_path, spanish(en_path)))
        print(f"{name:18s} {len(unique) - before} pairs")
    write_lines(WORK / "docs.en", list(unique))
    write_lines(WORK / "docs.es", list(unique.values()))
    print(f"total {len(unique)} pairs ({time.time() - start:.0f}s)")


if __name__ == "__main__":
    main()
