"""The teacher's known systematic errors leave the distilled pairs; its right translations stay."""

from training.distill import mistaken


def test_the_teachers_known_errors_are_found_and_its_right_translations_kept():
    # catches: "world" the noun trained as "mundial" ("Hello world" -> "Hola mundial"), "muy mucho" kept, or a pair
    # that has the noun right dropped
    assert mistaken("A nicer world", "Un más bueno mundial") and mistaken("I like it very much.", "Me gusta muy mucho.")
    assert not mistaken("The world is big.", "El mundo es grande.")
    assert not mistaken("The world and its world cups", "El mundo y sus copas mundiales")
