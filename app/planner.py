"""A translation request planned for the engine, whatever API dialect asked (LibreTranslate's /translate and
/translate_file today): the route to a model (source "auto" detected), the decoding parameters over the checkpoint's
defaults within the server's limits, and the texts cut into units. Knows nothing of HTTP."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import partial

from app.cache import cache_key
from app.errors import ApiError
from app.glossaries.agreement import NEUTRAL, SOURCES, TABLES, Agreeing
from app.glossaries.apply import GlossaryUse, union
from app.glossaries.entries import Entry
from app.glossaries.lexicon import lexicon
from app.glossaries.plurals import Plurals
from app.glossaries.records import Terms
from app.job import Job
from app.layout import Layout
from app.protect import find_spans, split_layout
from app.schemas import Parameters
from app.service import Route, Service
from app.settings import Settings
from app.text import SKIP_TAGS, html_layout, plain_layout
from model.loading.description import Description
from model.runner.params import DecodeParams


@dataclass(frozen=True)
class Ask:
    """What a client asks for, in no dialect's words (its fields already validated)."""

    source: str  # a language code, or "auto"
    target: str
    parameters: Parameters = field(default_factory=Parameters)  # decoding options (None: the model's default)
    alternatives: int = 0  # translations wanted besides the best one
    format: str = "text"  # "text", "html" or "xml" (markup kept, text nodes translated)
    placeholders: bool = False  # keep printf, brace and ICU placeholders exactly
    glossary: Terms | None = None  # the user's terms (inline and/or stored)
    ignore_tags: frozenset[str] = frozenset()  # markup: elements whose text stays untranslated (besides SKIP_TAGS)

    @property
    def markup(self) -> bool:
        """The texts are markup: text nodes are translated, tags kept."""
        return self.format in ("html", "xml")


@dataclass
class Plan:
    """A checked request on its way to the engine: the route, the decoding parameters, the texts cut into units."""

    ask: Ask
    route: Route
    params: DecodeParams
    prefix: list[int]  # language tokens before every unit
    layouts: list[Layout] = field(default_factory=list)
    glossary: GlossaryUse | None = None
    matched: list[list[Entry]] = field(default_factory=list)  # per text: the glossary entries it matches

    def job(self, layouts: list[Layout], settings: Settings, stream: bool = False) -> Job:
        """The engine job for these layouts (some of `self.layouts`, or a document's)."""
        entry, detected = self.route.entry, self.route.detected
        unit_params = self.unit_params if self.glossary is not None else None
        agreed = self.glossary.agreed if self.glossary is not None else None
        casing = entry.checkpoint.casing.get(self.route.source, "")
        return Job(entry, layouts, self.params, settings.max_input_tokens, stream, self.prefix, detected, unit_params,
                   agreed, casing)  # fmt: skip

    def unit_params(self, unit: str) -> DecodeParams:
        """A unit's decoding parameters: the plan's, constrained by the glossary's targets the unit matches."""
        if self.glossary is None:
            return self.params
        constraints, chars = self.glossary.constraints(unit)
        spans = self.route.entry.checkpoint.tokenizer.source_spans(unit, chars, lead=1)
        spans = tuple(tuple(k + len(self.prefix) for k in span) for span in spans)
        params = self.params.constrained(constraints, most=self.glossary.max_constraints + 1, spans=spans)
        return replace(params, agreement=self.glossary.agreement(unit), source_prefix=len(self.prefix))

    def keep(self, text: str) -> list[tuple[int, int]]:
        """Spans of a text kept as they are by the glossary (do-not-translate entries), if any."""
        return self.glossary.verbatim(text) if self.glossary else []

    def glossary_report(self, index: int, output: str) -> list[dict]:
        """details.glossary of text `index`: its matched entries, each applied or not in `output`."""
        return self.glossary.report(self.matched[index], output)

    def cache_keys(self, texts: list[str]) -> list[str]:
        """Each text's translation cache key: the model, the route and everything asked that changes the answer."""
        card, ask = self.route.entry.card, self.ask
        options = {
            "format": ask.format,
            "split": ask.parameters.split_sentences,
            "alternatives": ask.alternatives,
            "placeholders": ask.placeholders,
            "ignore_tags": sorted(ask.ignore_tags),
        }
        if ask.markup:
            options["inline"] = "aligned"  # inline tags put back by alignment (not what an older server cached)
        source = self.route.source
        keys = []
        for i, text in enumerate(texts):
            if self.glossary is not None and self.matched[i]:  # the entries it matches, every unit's constraints
                units = self.layouts[i].units
                options = {**options, "glossary": [self.matched[i], [self.unit_params(u).constraints for u in units]]}
            keys.append(cache_key(card.name, card.version, source, ask.target, options, self.params, text))
        return keys


def plan(service: Service, ask: Ask, texts: list[str]) -> Plan:
    """Check readiness and the texts; route (source "auto": the texts' language); cut every text into units."""
    service.require_ready()
    if not texts:
        raise ApiError(422, "validation", "q: must not be empty")
    if len(texts) > service.settings.max_items:
        raise ApiError(422, "validation", f"q: {len(texts)} texts exceeds max_items={service.settings.max_items}")
    for i, text in enumerate(texts):
        if not text.strip():
            raise ApiError(422, "validation", f"q[{i}]: must not be empty")
    planned = plan_route(service, ask, texts)
    skip = SKIP_TAGS | ask.ignore_tags
    cut = partial(html_layout, skip=skip, inline=True) if ask.markup else plain_layout
    spells, source = planned.route.entry.checkpoint.tokenizer.spells, planned.route.source
    keep = lambda text: union(find_spans(text, spells, placeholders=ask.placeholders), planned.keep(text))  # noqa: E731
    # what the vocabulary cannot spell (placeholders, if asked; the glossary's do-not-translate terms) stays as it is
    cuts = [cut(t, ask.parameters.split_sentences, source) for t in texts]
    use = planned.glossary
    matched = [list(dict.fromkeys(e for u in c.units for e in use.matched(u))) for c in cuts] if use else []
    return replace(planned, layouts=[split_layout(c, keep) for c in cuts], matched=matched)


def plan_route(service: Service, ask: Ask, sample: list[str]) -> Plan:
    """The route (source "auto": the language of `sample`), decoding parameters and prefix; no text cut yet."""
    route = service.route(ask.source, ask.target, sample)
    desc = route.entry.checkpoint
    params = decode_params(ask, service.settings, desc)
    prefix = desc.languages.prefix(route.source, ask.target)
    use = glossary_use(ask, route.source, params, service.settings, desc, prefix) if ask.glossary else None
    return Plan(ask, route, params, prefix, glossary=use)


def glossary_use(
    ask: Ask, source: str, params: DecodeParams, settings: Settings, desc: Description, prefix: list[int]
) -> GlossaryUse:
    """The request's glossary compiled for its route (source ids start with `prefix`); 422 for a stored glossary of
    another language pair, or with sampling (constraints need greedy or beam search)."""
    terms = ask.glossary
    if terms.pair is not None and terms.pair != (source, ask.target):
        raise ApiError(422, "validation", f"glossary_id: glossary {terms.glossary_id!r} is for {terms.pair[0]}->"
                       f"{terms.pair[1]}, the request translates {source}->{ask.target}")  # fmt: skip
    if params.sampling:
        raise ApiError(422, "validation", "glossary: works with greedy and beam search, not with sampling")
    tok = desc.tokenizer
    lead = () if params.forced_bos_id is None else (params.forced_bos_id,)
    encode = lambda text: [*prefix, *tok.encode(text)]  # noqa: E731
    sources = SOURCES.get(source, NEUTRAL)
    agreeing, analyser = None, lexicon(ask.target)
    if ask.target in TABLES:
        agreeing = Agreeing(ask.target, sources, encode, tok.encode_target, lead, analyser)
    return GlossaryUse(terms.entries, tok.encode_target, settings.max_beam_size - 1, tok.spells, params.max_new_tokens,
                       agreeing, Plurals.of(source, ask.target, analyser, lexicon(source)))  # fmt: skip


def _given(value, default):
    """The request's value when it set one, else the model's default."""
    return default if value is None else value


def decode_params(ask: Ask, settings: Settings, desc: Description) -> DecodeParams:
    """DecodeParams from the asked options over the checkpoint's defaults, enforcing the server's limits (422 naming
    field and limit)."""
    p, d = ask.parameters, desc.defaults
    n = ask.alternatives + 1
    default_beam = 1 if p.sampling else min(d.beam_size, settings.max_beam_size)  # sampling: no beam default
    beam = max(_given(p.beam_size, default_beam), n)
    if beam > settings.max_beam_size:
        name = "parameters.beam_size" if (p.beam_size or 0) >= n else "alternatives"
        raise ApiError(422, "validation", f"{name}: needs {beam} beams, over max_beam_size={settings.max_beam_size}")
    if p.sampling and beam > 1:
        raise ApiError(
            422, "validation", "parameters: sampling (temperature/top_k/top_p) needs beam_size=1 and alternatives=0"
        )
    limit = min(settings.max_new_tokens, desc.config.max_positions - 1)
    max_new = p.max_new_tokens or min(d.max_new_tokens or settings.default_max_new_tokens, limit)
    if max_new > limit:
        raise ApiError(422, "validation", f"parameters.max_new_tokens: {max_new} exceeds the limit of {limit}")
    min_new = _given(p.min_new_tokens, min(d.min_new_tokens, max_new))
    if min_new > max_new:
        raise ApiError(422, "validation", f"parameters.min_new_tokens: {min_new} exceeds max_new_tokens={max_new}")
    return DecodeParams(
        beam_size=beam,
        num_hypotheses=beam if n > 1 else 1,  # every beam: alternatives are picked distinct from these
        max_new_tokens=max_new,
        min_new_tokens=min_new,
        length_penalty=_given(p.length_penalty, d.length_penalty),
        repetition_penalty=_given(p.repetition_penalty, d.repetition_penalty),
        no_repeat_ngram_size=_given(p.no_repeat_ngram_size, d.no_repeat_ngram_size),
        sampling=p.sampling,
        temperature=p.temperature or 1.0,
        top_k=p.top_k or 0,
        top_p=p.top_p or 1.0,
        seed=p.seed,
        return_scores=p.return_scores,
        confidence=settings.confidence,
        early_stopping=d.early_stopping,
        forced_bos_id=desc.languages.forced_bos(ask.target),
        forced_eos=d.forced_eos,
        bad_words_ids=d.bad_words_ids,
    )
