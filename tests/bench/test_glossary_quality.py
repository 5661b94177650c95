"""The glossary quality metrics (bench/glossary_quality.py) flag the ways a forced term spoils a sentence (the
built-in model's failures of issue 42, by hand), pass the references, and the hand-written sets parse and hold
together."""

import json

import pytest

from bench import glossary_quality as gq
from bench.glossary_quality import (
    Row,
    after_end,
    appended,
    broken_words,
    determiner_disagrees,
    replaced_beside,
    replaced_kept,
    whole_word,
    window_overlap,
)

# (English, reference, term, the decoder's output with the term, its plain output): issue 42's table
FAILURES = [
    ("My boss is on holiday.", "Mi jefa está de vacaciones.", "boss=jefa=jefe=f",
     "Mi jefe está a las vacaciones. jefas.", "Mi jefe está a las vacaciones."),
    ("I left my wallet in the taxi.", "Dejé mi billetera en el taxi.", "wallet=billetera=cartera=f",
     "Dejó mi cartera billetera en el taxi.", "Dejó mi cartera en el taxi."),
    ("Put the keys on the shelf.", "Pon las llaves en la repisa.", "shelf=repisa=estante/balda=f",
     "Pone repisa las teclas en la balda.", "Pone las teclas en la balda."),
    ("The bathroom is upstairs.", "El sanitario está arriba.", "bathroom=sanitario=baño=m",
     "El baño está sanitarios.", "El baño está arriba."),
    ("The picture is on the wall.", "La foto está en la pared.", "picture=foto=cuadro=f",
     "El foto está en la cartera.", "El cuadro está en la pared."),
    ("The kitchen has a big window.", "La cocina tiene un ventanal grande.", "window=ventanal=ventana=m",
     "La cocina tiene una ventanal grande.", "La cocina tiene una ventana grande."),
    ("She lost her umbrella on the bus.", "Perdió su sombrilla en el autobús.", "umbrella=sombrilla=paraguas=f",
     "Perdió su sombrilla en los autobúss.", "Perdió su paraguas en el autobús."),
]  # fmt: skip


def failure_rows() -> list[Row]:
    return [Row("test", en, ref, (gq.parse_term(t),)) for en, ref, t, _, _ in FAILURES]


# --- whole words


@pytest.mark.parametrize(
    ("output", "target", "expected"),
    [
        ("Perdió su sombrilla en los autobúss.", "autobús", False),
        ("Perdió su sombrilla en el autobús.", "autobús", True),
        ("Mi jefe está a las vacaciones. jefas.", "jefa", False),
        ("El baño está sanitarios.", "sanitario", False),
        ("jefa", "jefa", True),
        ("(jefa)", "jefa", True),
        ("foto2 está aquí", "foto", False),
        ("la subjefa llegó", "jefa", False),
        ("Guárdalo en el disco duro.", "disco duro", True),
        ("Guárdalo en el disco  duro.", "disco duro", True),
        ("Guárdalo en el discoduro.", "disco duro", False),
        ("Fichero guardado.", "fichero", False),
    ],
)
def test_whole_word(output, target, expected):
    """No letter or digit right before or after the target; case-sensitive unless asked."""
    assert whole_word(output, target) is expected


def test_whole_word_ignoring_case():
    assert whole_word("Fichero guardado.", "fichero", ignore_case=True)
    assert not whole_word("Ficheros guardados.", "fichero", ignore_case=True)


# --- after the end, appended


def test_after_end_flags_a_term_past_the_sentence():
    assert after_end("Mi jefe está a las vacaciones. jefas.", "jefa", "My boss is on holiday.")
    assert after_end("Mi jefe está de vacaciones. Jefa.", "jefa")
    assert after_end("¿Pode tengo un vaso de vino roja? copa?", "copa", "Can I have a glass of red wine?")
    assert after_end("La manta es muy blanda… cobertor", "cobertor")


def test_after_end_passes_a_term_inside_the_sentence():
    assert not after_end("Mi jefa está de vacaciones.", "jefa", "My boss is on holiday.")
    assert not after_end("Mi jefa está de vacaciones. Hola.", "jefa")  # another sentence, not the term
    assert not after_end("Mi jefa cobra 3.5 euros más.", "euros")  # no whitespace after the point
    assert not after_end("El baño es limpio y espacioso sanitario.", "sanitario")  # no mark: see appended


def test_after_end_allows_the_sources_sentences():
    out = "Abre el fichero. Luego cierra la carpeta."
    assert not after_end(out, "carpeta", "Open the file. Then close the folder.")
    assert after_end(out, "carpeta", "Open the file and close the folder.")


def test_appended():
    """The plain output with the term stuck on its end, with or without a sentence mark in between."""
    assert appended("Mi jefe está a las vacaciones. jefa.", "jefa", "Mi jefe está a las vacaciones.")
    assert appended("Venido a mi oficina después de la reunión despacho.", "despacho",
                    "Venido a mi oficina después de la reunión.")  # fmt: skip
    assert not appended("Mi jefa está de vacaciones.", "jefa", "Mi jefe está de vacaciones.")
    assert not appended("Dejó mi cartera billetera en el taxi.", "billetera", "Dejó mi cartera en el taxi.")
    assert not appended("Mi jefe está de vacaciones. Hola.", "jefa", "Mi jefe está de vacaciones.")
    assert not appended("Mi jefe se ha ido de viaje, jefa.", "jefa", "Mi jefe está de vacaciones.")


# --- replaced words


def test_replaced_beside():
    assert replaced_beside("Dejó mi cartera billetera en el taxi.", "billetera", "cartera")
    assert replaced_beside("Dejó mi billetera cartera en el taxi.", "billetera", ("cartera",))
    assert replaced_beside("Dejó mi Cartera o billetera en el taxi.", "billetera", "cartera")  # 2 words away
    assert not replaced_beside("Dejó la cartera y la billetera en el taxi.", "billetera", "cartera")  # 3 away
    # an abbreviation's word holds the term: no occurrence of it, so it is left beside it (caught: "universidad" was
    # taken for one)
    assert replaced_beside("Mi uni universidad está lejos.", "uni", "universidad")
    assert replaced_kept("Estudia en la universidad.", "uni", "universidad")
    assert not replaced_beside("Pone repisa las teclas en la balda.", "repisa", "estante/balda")
    assert replaced_beside("Pone las llaves en la balda repisa.", "repisa", "estante/balda")
    assert not replaced_beside("Dejó mi cartera billetera en el taxi.", "billetera", "-")
    assert not replaced_beside("Dejó mi carteras billetera.", "billetera", "cartera")  # not the whole word
    # a replaced word inside the target is the target, not the plain word left beside it
    assert not replaced_beside("Haz una copia de seguridad.", "copia de seguridad", "copia")


def test_the_untranslated_source_counts_as_replaced():
    row = Row("test", "Put the cheese back in the fridge.", "Vuelve a meter el queso en la nevera.",
              (gq.parse_term("fridge=nevera=refrigerador/frigorífico=f"),))  # fmt: skip
    plain = "Puesto el queso atrás en la fridge."
    s = gq.evaluate([row], ["Puesto el queso atrás en la fridge nevera."], [plain])["sentences"][0]
    assert s["beside"] and s["kept"] and s["appended"]
    brand = gq.parse_term("Firefox=Firefox=-=-")
    assert brand.leftovers == () and row.terms[0].leftovers == ("refrigerador", "frigorífico", "fridge")


def test_replaced_kept():
    assert replaced_kept("Pone repisa las teclas en la balda.", "repisa", "estante/balda")
    assert replaced_kept("El baño está sanitarios.", "sanitario", "baño")
    assert not replaced_kept("Pon las llaves en la repisa.", "repisa", "estante/balda")
    assert not replaced_kept("Pon las llaves en la repisa.", "repisa", "-")
    assert not replaced_kept("Haz una copia de seguridad.", "copia de seguridad", "copia")


# --- determiners


@pytest.mark.parametrize(
    ("output", "target", "gender", "expected"),
    [
        ("El foto está en la cartera.", "foto", "f", True),
        ("La foto está en la pared.", "foto", "f", False),
        ("La cocina tiene una ventanal grande.", "ventanal", "m", True),
        ("La cocina tiene un ventanal grande.", "ventanal", "m", False),
        ("Cierra la ventana del ventanal.", "ventanal", "m", False),
        ("Vuelve al foto.", "foto", "f", True),
        ("Mira mi foto.", "foto", "f", False),
        ("Mira mis foto.", "foto", "f", True),
        ("Sus sombrillas son rojas.", "sombrillas", "fp", False),
        ("La sombrillas son rojas.", "sombrillas", "fp", True),
        ("Los sombrillas son rojas.", "sombrillas", "fp", True),
        ("Esta ficheros.", "ficheros", "mp", True),
        ("Estos ficheros.", "ficheros", "mp", False),
        ("Entra en el cuenta de usuario.", "cuenta de usuario", "f", True),
        ("Dejó mi cartera billetera en el taxi.", "billetera", "f", False),
        ("Abre el Firefox.", "Firefox", "-", False),
        ("Dijo el: foto.", "foto", "f", False),  # not right before it
        ("La foto y el foto.", "foto", "f", True),  # any occurrence
        ("Quiero hablar al gerente.", "gerente", "c", False),  # a common-gender noun: either article
        ("La gerente aprobó.", "gerente", "c", False),
        ("Los gerente aprobó.", "gerente", "c", True),  # but the number still counts
    ],
)
def test_determiner_disagrees(output, target, gender, expected):
    assert determiner_disagrees(output, target, gender) is expected


# --- broken words, window overlap


def test_broken_words():
    assert broken_words("Perdió su sombrilla en los autobúss.", "Perdió su sombrilla en el autobús.") == ["autobúss"]
    assert broken_words("El baño está sanitarios.", "El sanitario está arriba.") == ["sanitarios"]
    assert broken_words("Perdió su sombrilla en el autobús.", "Perdió su sombrilla en el autobús.") == []
    # the plain output's own inflections are the model's, not the term's
    ref, plain = "Mi bolso pesa demasiado.", "Mi bolso es demasiado pesado."
    assert broken_words("Mi bolso es demasiado pesado.", ref, plain) == []
    assert broken_words("Mi bolso es demasiado pesado.", ref) == ["pesado"]
    assert broken_words("Mi bolso es pesadísimo.", ref) == []  # more than 2 letters: another word
    assert broken_words("El autobús y los autobúses.", "El autobús.") == []  # the word itself is there too
    # a word cut by the term next to it
    ref = "Le dio un obsequio por su aniversario."
    assert broken_words("Dio su regalo para su aniver obsequio.", ref, "", ["obsequio"]) == ["aniver"]
    assert broken_words("Dio su regalo para su aniver.", ref, "", ["obsequio"]) == []  # not beside the term
    ref = "Las carpetas compartidas contigo aparecen en esta lista."
    assert broken_words("Car carpetas compartidas con que aparecen.", ref, "", ["carpetas"]) == ["car"]
    assert broken_words("Las carpetas compartidas.", ref, "", ["carpetas"]) == []


def test_window_overlap():
    ref = "La foto está en la pared."
    assert window_overlap(ref, ref, "foto") == [1.0]
    assert window_overlap("El foto está en la cartera.", ref, "foto") == [pytest.approx(2 / 3)]
    assert window_overlap("El cuadro está en la pared.", ref, "foto") == [0.0]
    assert window_overlap("Pone repisa las teclas en la balda.", "Pon las llaves en la repisa.", "repisa") == [0.0]
    twice = "Mi jefa habla con su jefa todas las mañanas."
    assert window_overlap("Mi jefa habla con su jefe todas las mañanas.", twice, "jefa") == [1.0, 0.0]
    assert window_overlap("Foto", "Foto", "foto") == []  # nothing around it: left out


# --- the corpus


def test_the_failures_are_each_flagged():
    """Every output of the issue's table is caught by a metric: a missing term or a flag."""
    result = gq.evaluate(failure_rows(), [f[3] for f in FAILURES], [f[4] for f in FAILURES])
    flags = ("after_end", "appended", "beside", "kept", "determiner", "broken", "chrf_drop")
    for s in result["sentences"]:
        assert not s["all_exact"] or any(s[k] for k in flags), s["english"]
    by = {s["english"]: s for s in result["sentences"]}
    assert by["My boss is on holiday."]["after_end"] and by["My boss is on holiday."]["appended"]
    assert not by["My boss is on holiday."]["all_exact"]
    assert by["I left my wallet in the taxi."]["beside"]
    assert by["Put the keys on the shelf."]["kept"] and not by["Put the keys on the shelf."]["beside"]
    assert by["The bathroom is upstairs."]["broken"] == ["sanitarios"]
    assert by["The picture is on the wall."]["determiner"]
    assert by["The kitchen has a big window."]["determiner"]
    assert by["She lost her umbrella on the bus."]["broken"] == ["autobúss"]
    assert result["clean"] == 0.0
    assert result["term_exact"] == pytest.approx(100 * 5 / 7)  # jefas, sanitarios are not whole
    assert result["whole_word"] == pytest.approx(100 * 5 / 7)
    assert result["after_end"] == pytest.approx(100 / 7)
    assert result["replaced_beside"] == pytest.approx(100 * 2 / 7)  # cartera billetera; baño está sanitarios
    assert result["determiner"] == pytest.approx(100 * 2 / 7)
    assert result["broken_words"] == pytest.approx(100 * 3 / 7)  # jefas, sanitarios, autobúss


def test_the_references_score_full_marks():
    rows = gq.read(gq.EVAL, "test")
    refs = [r.reference for r in rows]
    result = gq.evaluate(rows, refs, refs)
    assert result["term_exact"] == result["plain_term_exact"] == result["whole_word"] == 100.0
    assert result["chrf"] == pytest.approx(100.0) and result["window_overlap"] == 100.0
    assert result["clean"] == 100.0
    for key in ("after_end", "appended", "replaced_beside", "replaced_kept", "determiner", "broken_words",
                "chrf_drop"):  # fmt: skip
        assert result[key] == 0.0, key


def test_a_term_needed_twice_counts_twice():
    row = Row("test", "My boss talks to her boss every morning.", "Mi jefa habla con su jefa todas las mañanas.",
              (gq.parse_term("boss=jefa=jefe=f"),))  # fmt: skip
    once = gq.evaluate([row], ["Mi jefa habla con su jefe todas las mañanas."], [row.reference])
    assert once["terms_n"] == 2 and once["term_exact"] == 50.0


def test_chrf_drop_and_the_plain_rate():
    row = failure_rows()[4]
    worse = gq.evaluate([row], ["Foto."], [row.reference])
    assert worse["chrf_drop"] == 100.0 and worse["plain_term_exact"] == 100.0
    assert worse["chrf"] < worse["chrf_plain"]
    near = gq.evaluate([row], ["La foto está en la pared"], [row.reference])
    assert 0 < near["chrf_plain"] - near["chrf"] < gq.CHRF_DROP and near["chrf_drop"] == 0.0
    with pytest.raises(ValueError):
        gq.evaluate([row], [], [])


def test_the_exact_rate_is_case_sensitive():
    """A capital the reference has (the term begins the sentence) is needed for an exact term."""
    row = Row("test", "File saved in the Documents folder.", "Fichero guardado en la carpeta Documentos.",
              (gq.parse_term("File=Fichero=archivo=m"),))  # fmt: skip
    result = gq.evaluate([row], ["fichero guardado en la carpeta Documentos."], [row.reference])
    assert result["term_exact"] == 0.0 and result["term_any_case"] == 100.0 and result["whole_word"] == 100.0


def test_table_names_every_metric():
    result = gq.evaluate(failure_rows(), [f[3] for f in FAILURES], [f[4] for f in FAILURES])
    text = gq.table({"today": result, "again": result})
    assert text.count("\n") == len(gq.LABELS) + 2 and "| sentences / terms | 7 / 7 | 7 / 7 |" in text


# --- the sets


def test_the_sets_parse_and_hold_together():
    rows, check = gq.read(gq.EVAL), gq.read(gq.CHECK)
    assert gq.problems(rows) == [] and gq.problems(check) == []
    assert len(rows) >= 170 and len(gq.read(gq.EVAL, "test")) >= 75 and len(gq.read(gq.EVAL, "dev")) >= 75
    assert {r.split for r in rows} == {"dev", "test"}
    assert len(check) >= 60 and {r.split for r in check} == {"check"}
    assert not {r.english for r in rows} & {r.english for r in check}
    for row in rows + check:
        assert 1 <= len(row.terms) <= 3
        for t in row.terms:
            assert whole_word(row.reference, t.target) and whole_word(row.english, t.source, ignore_case=True)
            assert gq.count(row.reference, t.target) == row.needed(t) >= 1


@pytest.mark.parametrize("split", ["dev", "test"])
def test_each_half_covers_every_kind(split):
    """Both halves hold plural terms, gender changes, multi-word targets, do-not-translate names, terms that begin a
    sentence, terms needed twice and replaced words."""
    rows = gq.read(gq.EVAL, split)
    terms = [(r, t) for r in rows for t in r.terms]
    kinds = {
        "plural": [t for _, t in terms if t.gender in ("mp", "fp")],
        "multi-word": [t for _, t in terms if " " in t.target and " " in t.source],
        "brand": [t for _, t in terms if t.verbatim],
        "first in English": [t for r, t in terms if r.english.startswith(t.source) and not t.verbatim],
        "first in Spanish": [t for r, t in terms if r.reference.startswith(t.target) and not t.verbatim],
        "twice": [t for r, t in terms if r.needed(t) == 2],
        "replaced": [t for _, t in terms if t.replaced],
        "feminine replacing masculine": [t for _, t in terms if t.target in ("jefa", "foto", "repisa")],
        "masculine replacing feminine": [t for _, t in terms if t.target in ("ventanal", "coche", "fichero")],
    }
    for kind, found in kinds.items():
        assert len(found) >= 3, kind


def test_one_glossary_serves_each_set():
    for path in (gq.EVAL, gq.CHECK):
        rows = gq.read(path)
        entries = gq.glossary(rows)
        assert len({s.casefold() for s in entries}) == len(entries)
        for row in rows:
            for t in row.terms:
                source, target = row.entry(t)
                assert entries[next(s for s in entries if s.casefold() == source.casefold())] == target


def test_entry_lowers_a_sentence_initial_capital_only():
    row = gq.read(gq.EVAL)[0]
    start = Row("dev", "File saved in the Documents folder.", "Fichero guardado en la carpeta Documentos.", ())
    assert start.entry(gq.parse_term("File=Fichero=archivo=m")) == ("file", "fichero")
    assert start.entry(gq.parse_term("folder=carpeta=directorio=f")) == ("folder", "carpeta")
    assert row.entry(gq.parse_term("Firefox=Firefox=-=-")) == ("Firefox", "Firefox")
    assert Row("dev", "Firefox blocks trackers.", "", ()).entry(gq.parse_term("Firefox=Firefox=-=-")) == (
        "Firefox", "Firefox")  # fmt: skip


def test_needed_leaves_out_longer_terms():
    terms = (gq.parse_term("living room=sala de estar=salón=f"), gq.parse_term("room=habitación=cuarto=f"))
    row = Row("dev", "The living room is the warmest room in the house.", "", terms)
    assert [row.needed(t) for t in row.terms] == [1, 1]


@pytest.mark.parametrize(
    ("line", "complaint"),
    [
        ("dev\tMy boss is on holiday.\tMi jefe está de vacaciones.\tboss=jefa=jefe=f", "0x in the reference"),
        ("dev\tMy chief is on holiday.\tMi jefa está de vacaciones.\tboss=jefa=jefe=f", "not in the English"),
        ("dev\tMy boss is on holiday.\tMi jefa, jefe, está aquí.\tboss=jefa=jefe=f", "replaced 'jefe'"),
        ("dev\tMy boss is on holiday.\tMi jefa está de vacaciones.\tboss=jefa=jefe=x", "gender 'x'"),
        ("dev\tMy boss is on holiday.\tMi jefa está de vacaciones.\tboss=jefa=jefe=f | boss=jefa=jefe=f | "
         "boss=jefa=jefe=f | boss=jefa=jefe=f", "4 terms"),
        ("dev\tMy boss.\tMi jefa.\tboss=jefa=jefe=f", "2 words"),
        ("train\tMy boss is on holiday.\tMi jefa está de vacaciones.\tboss=jefa=jefe=f", "split 'train'"),
        ("dev\tMy boss sold the car.\tMi jefa vendió el auto.\tboss=jefa=jefe=f", "matches ['boss', 'car']"),
        ("dev\tMy boss sold a car.\tMi jefa vendió un carro.\tboss=jefa=jefe=f | car=carro=auto=m",
         "elsewhere 'coche'"),
    ],
)
def test_problems_are_found(tmp_path, line, complaint):
    """A broken row of the set is reported, naming what is wrong."""
    path = tmp_path / "set.tsv"
    good = "dev\tWe rented a car at the airport.\tAlquilamos un coche en el aeropuerto.\tcar=coche=auto/carro=m"
    path.write_text(f"{gq.HEADER}\n{good}\n{line}\n", encoding="utf-8")
    found = gq.problems(gq.read(path))
    assert any(complaint in p for p in found), found


def test_the_command_line(tmp_path, capsys):
    """With no outputs it checks the sets; with a JSON of outputs it prints their table."""
    assert gq.main([]) == 0
    rows = gq.read(gq.CHECK)
    path = tmp_path / "out.json"
    refs = [r.reference for r in rows]
    path.write_text(json.dumps({"outputs": refs, "plain": refs}), encoding="utf-8")
    capsys.readouterr()
    assert gq.main([str(path), "--set", "check"]) == 0
    assert "| terms exact (whole words, as written) % | 100.0 |" in capsys.readouterr().out


def test_bench_glossary_quality_prints_the_table_and_samples(tmp_path, capsys, monkeypatch):
    """`python -m bench.glossary quality` scores what the decoder gave (here: the references and plain copies)."""
    from bench import glossary

    def fake(rows, beam, workdir, url=None):
        assert beam == 4 and workdir == tmp_path
        return [r.reference for r in rows], [r.english for r in rows]

    monkeypatch.setattr(glossary, "term_outputs", fake)
    assert glossary.main(["quality", "--beam", "4", "--set", "check", "--samples", "3",
                          "--workdir", str(tmp_path)]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "check/check, beam 4" in out and "| chrF with terms | 100.0 |" in out
    assert out.count("| ok |") == 3
    saved = json.loads((tmp_path / "quality-check-check-beam4.json").read_text(encoding="utf-8"))
    assert saved["outputs"][0] == gq.read(gq.CHECK)[0].reference
