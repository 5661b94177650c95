"""The two-way corpus's casing variants: what people type, with the translation they expect."""

import random

from training.corpus import variants


def test_a_short_pair_gets_its_lowercase_form_and_others():
    got = variants("Good morning, Maria.", "Buenos días, María.", "es", random.Random(1), 5)
    assert got[0] == ("good morning, maria", "buenos días, maría")
    assert ("GOOD MORNING, MARIA.", "BUENOS DÍAS, MARÍA.") in got and (
        "Good Morning, Maria.",
        "Buenos días, María.",
    ) in got


def test_a_spanish_source_is_also_typed_without_inverted_marks_and_accents():
    got = dict(variants("¿Cómo estás?", "How are you?", "en", random.Random(1), 6))
    assert got["Cómo estás?"] == "How are you?" and got["como estas"] == "how are you?"
