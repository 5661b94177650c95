"""Request and response bodies at the HTTP edge (LibreTranslate-compatible, extended)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Parameters(BaseModel):
    """Decoding options; any sampling field turns sampling on."""

    model_config = ConfigDict(extra="forbid")

    beam_size: int | None = Field(None, ge=1, description="1 = greedy; default: the model's (num_beams)")
    max_new_tokens: int | None = Field(None, ge=1)
    min_new_tokens: int | None = Field(None, ge=0)
    length_penalty: float | None = Field(None, ge=-10, le=10)
    repetition_penalty: float | None = Field(
        None, ge=0.01, le=100, description="bounded: tiny values overflow logits"
    )
    no_repeat_ngram_size: int | None = Field(None, ge=0, le=16)
    temperature: float | None = Field(None, ge=0.01, le=100, description="bounded: tiny values overflow logits")
    top_k: int | None = Field(None, ge=0)
    top_p: float | None = Field(None, gt=0, le=1)
    seed: int | None = Field(None, ge=0, le=2**63 - 1)
    return_scores: bool = False
    confidence_threshold: float | None = Field(
        None, ge=0, le=1, description="below it a sentence is low-confidence (details.low_confidence, the sentences' "
        "`low`); default: the server's confidence_threshold"
    )  # fmt: skip
    split_sentences: bool = Field(
        True, description="translate each sentence apart (sentencex, by the source language's rules), as DeepL and "
        "LibreTranslate do; false: each text is one unit"
    )  # fmt: skip

    @property
    def sampling(self) -> bool:
        """True when any sampling field is set."""
        return self.temperature is not None or self.top_k is not None or self.top_p is not None


class Texts(BaseModel):
    """A body whose `q` is one text or a list of texts."""

    model_config = ConfigDict(extra="ignore")

    q: str | list[str] = Field(description="text or list of texts")

    @property
    def texts(self) -> list[str]:
        """`q` as a list."""
        return [self.q] if isinstance(self.q, str) else self.q


class TranslateRequest(Texts):
    """POST /translate body (JSON or form)."""

    source: str = Field("auto", min_length=1, max_length=16)
    target: str = Field(min_length=1, max_length=16)
    format: Literal["text", "html"] = "text"
    alternatives: int = Field(0, ge=0)
    stream: bool = False
    api_key: str | None = None
    preserve_placeholders: bool = Field(
        False, description="keep printf (%s, %(name)s), brace ({0}, {name}) and ICU plural/select placeholders exactly"
    )
    parameters: Parameters = Field(default_factory=Parameters)
    glossary: dict[str, str] | list[list[str]] | str | None = Field(
        None, description='inline entries: {"source term": "target term"}, [[source, target], ...] or TSV text; over '
        "glossary_id's on the same source term; an entry whose target is its source is kept as it is"
    )  # fmt: skip
    glossary_id: str | None = Field(None, description="a stored glossary (POST /glossaries) of this language pair")


class GlossaryTerm(BaseModel):
    """A glossary entry a text matched, and whether its target appears in the translation (as written)."""

    source: str
    target: str
    applied: bool


class SentenceConfidence(BaseModel):
    """One sentence of a text split into several: its translation and its confidence."""

    text: str
    confidence: float
    low: bool = Field(description="below the confidence threshold")


class Details(BaseModel):
    """How one text was translated."""

    model: str
    input_tokens: int
    generated_tokens: int
    finish_reason: str
    score: float | None = None
    confidence: float | None = Field(
        None, ge=0, le=1, description="calibrated: among translations of confidence about c, a share of about c reach "
        "sentence chrF 40 on held-out references; a split text's is its sentences' mean weighted by source tokens; "
        "null when the server's confidence is off"
    )  # fmt: skip
    low_confidence: bool | None = Field(None, description="a sentence of the text is below the confidence threshold")
    sentences: list[SentenceConfidence] | None = Field(
        None, description="a text translated as several sentences: each one's translation and confidence"
    )
    queue_ms: float
    total_ms: float
    cached: bool = Field(False, description="answered from the translation cache (queue_ms and total_ms are 0)")
    glossary: list[GlossaryTerm] | None = Field(None, description="with a glossary: the entries the text matched")
    markup_fallbacks: int | None = Field(
        None, description="format html/xml with inline tags: tags not placed by the decoder's alignment"
    )


class TranslateResponse(BaseModel):
    """POST /translate answer; lists when `q` was a list."""

    translatedText: str | list[str]  # noqa: N815 (LibreTranslate's field name)
    alternatives: list[str] | list[list[str]] | None = None
    detectedLanguage: Detection | list[Detection] | None = None  # noqa: N815 (LibreTranslate's field name)
    details: Details | list[Details]


class ErrorBody(BaseModel):
    """Every error's body."""

    error: str
    error_type: str


class Detection(BaseModel):
    """One detected language: LibreTranslate's shape, confidence in percent."""

    language: str
    confidence: float


class DetectRequest(Texts):
    """POST /detect body (JSON or form)."""

    api_key: str | None = None
    all_languages: bool = Field(
        False, description="rank every language the detector knows, not only the source languages served"
    )


class Language(BaseModel):
    """GET /languages item."""

    code: str
    name: str
    targets: list[str]
