"""Localisation files mark for review only what the model was unsure of: at threshold 1 every machine translation is
below it (.po fuzzy, XLIFF 1.2 needs-review-translation, 2.0 initial + subState), at 0 none is (translated); each says
its confidence; the files stay valid (msgfmt --check, the XLIFF schemas of tests/documents/schemas); a threshold
outside [0, 1] is a 422 naming it. Mutations caught: the state or flag set whatever the confidence (one of the two
thresholds fails), the note put where the schema forbids it, fuzzy entries compiled by msgfmt."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import polib
import pytest
from lxml import etree

from tests.documents import build
from tests.documents.client import translate_file, upload

SCHEMAS = Path(__file__).resolve().parent / "schemas"
RATED = re.compile(r"machine translation confidence: (0\.\d\d|1\.00)")


@pytest.mark.skipif(shutil.which("msgfmt") is None, reason="needs gettext's msgfmt")
@pytest.mark.parametrize("threshold", [0.0, 1.0])
def test_po_low_confidence_entries_are_fuzzy_and_msgfmt_leaves_them_out(builtin, tmp_path, threshold):
    data = translate_file(builtin.url, "a.po", build.gettext(), confidence_threshold=str(threshold))
    po = polib.pofile(data.decode())
    machine = [e for e in po if RATED.search(e.tcomment or "")]
    assert len(machine) >= 2  # the plain entry and the plural one at least
    assert all(("fuzzy" in e.flags) == (threshold == 1.0) for e in machine)
    path = tmp_path / "a.po"
    path.write_bytes(data)
    mo = tmp_path / "a.mo"
    run = subprocess.run(["msgfmt", "--check", "-o", str(mo), str(path)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    compiled = {e.msgid for e in polib.mofile(str(mo))}
    assert all((e.msgid in compiled) == (threshold == 0.0) for e in machine)  # fuzzy ones are not compiled


@pytest.mark.parametrize("version", ["1.2", "2.0"])
@pytest.mark.parametrize("threshold", [0.0, 1.0])
def test_xliff_review_states_follow_the_threshold_and_validate(builtin, version, threshold):
    source = build.XLIFF12 if version == "1.2" else build.XLIFF20
    out = translate_file(builtin.url, "a.xlf", source.encode(), confidence_threshold=str(threshold))
    root = etree.fromstring(out)
    schema = etree.XMLSchema(etree.parse(str(SCHEMAS / f"xliff{version.replace('.', '')}.xsd")))
    assert schema.validate(root), schema.error_log
    ns = {"x": root.nsmap[None]}
    low = threshold == 1.0
    if version == "1.2":
        units = [u for u in root.iterfind(".//x:trans-unit", ns) if u.find("x:target", ns) is not None]
        assert {u.find("x:target", ns).get("state") for u in units} == {
            "needs-review-translation" if low else "translated"
        }
    else:
        units = [u for u in root.iterfind(".//x:unit", ns) if u.find(".//x:target", ns) is not None]
        segments = [u.find("x:segment", ns) for u in units]
        assert {(s.get("state"), s.get("subState")) for s in segments} == {
            ("initial", "mt-server:needs-review") if low else ("translated", None)
        }
    assert len(units) == 3
    for unit in units:
        assert [bool(RATED.fullmatch(n.text.split(" (")[0])) for n in unit.iterfind(".//x:note", ns)] == [True]


def test_file_threshold_outside_0_1_is_a_422_naming_it(builtin):
    for bad in ("1.5", "-0.1", "high"):
        r = upload(builtin.url, "a.po", build.gettext(), confidence_threshold=bad)
        assert r.status_code == 422 and "confidence_threshold" in r.json()["error"], r.text
