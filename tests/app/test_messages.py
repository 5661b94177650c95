"""The wire between fronts and the engine core: a glossary's agreement table travels once per job, and every unit gets
its own parameters back as they were sent."""

from app.engine.messages import Submit, WireUnit, encode, to_core
from model.runner.params import Agreement, DecodeParams, Probe, Word

WORDS = tuple(Word((i,), (i % 4,), ((i,), (i + 1,), (), (i + 2,))) for i in range(200))
OPENERS = ((5,), (6,), (7,), (8,))


def _params(term: int, words=WORDS) -> DecodeParams:
    probe = Probe(((1, 2),), ((3, term),) * 4, (0.0, 1.0, 0.0, 0.0))
    return DecodeParams(beam_size=4, constraints=((term,),), agreement=Agreement((probe,), words, OPENERS))


def test_a_jobs_agreement_table_travels_once():
    # catches: the table left out of the units it came from (no agreement in the core), a unit given another route's
    # table, the table sent with every unit again (64 units of a glossary POST were 6 MB)
    other = tuple(Word((i,), (0,), ((i,), (), (), ())) for i in range(3))
    units = [WireUnit(i, [4, 5, i], _params(10 + i)) for i in range(8)]
    units += [WireUnit(8, [4, 5], None), WireUnit(9, [4], _params(30, other))]
    plain = DecodeParams(beam_size=2)
    got = to_core.decode(encode(Submit.of(1, plain, units, False, 0.0)))
    assert [got.unit_params(u) for u in got.units] == [u.params or plain for u in units]
    inline = len(encode(Submit(1, plain, units, False, 0.0)))
    assert len(encode(Submit.of(1, plain, units, False, 0.0))) < inline / 4
