"""DeepL's request fields at the edge: POST /v2/translate (JSON or form, `text` repeated) and POST /v2/document."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

Formality = Literal["default", "more", "less", "prefer_more", "prefer_less"]


def tag_list(value: object) -> object:
    """Tags as a list: DeepL takes a comma-separated string, a list, or a repeated field."""
    if isinstance(value, str):
        value = [value]
    if isinstance(value, list):
        return [t.strip().lower() for v in value if isinstance(v, str) for t in v.split(",") if t.strip()]
    return value


class TranslateText(BaseModel):
    """POST /v2/translate (required `text` and `target_lang` are checked before, in DeepL's words)."""

    model_config = ConfigDict(extra="ignore")

    text: list[str] = Field(description="texts to translate (a form repeats the field)")
    target_lang: str = Field(description="DeepL code: ES, DE, EN-GB, PT-BR, ZH-HANT, ... (any case)")
    source_lang: str | None = Field(None, description="omitted: detected among the sources served into target_lang")
    split_sentences: Literal["0", "1", "nonewlines"] = Field(
        "1", description="0: each text is one unit; 1 and nonewlines: cut into sentences (sentencex) translated apart"
    )
    preserve_formatting: bool = Field(False, description="accepted: the server never re-cases or re-punctuates")
    formality: Formality = Field("default", description="accepted and validated; the served models cannot honour it")
    glossary_id: str | None = None
    tag_handling: Literal["html", "xml"] | None = Field(None, description="translate text nodes, keep the markup")
    ignore_tags: list[str] = Field(default_factory=list, description="elements whose text is kept untranslated")
    splitting_tags: list[str] = Field(default_factory=list, description="accepted: every tag splits text here")
    non_splitting_tags: list[str] = Field(default_factory=list, description="accepted: every tag splits text here")
    outline_detection: bool = Field(True, description="accepted: tags always split (as outline_detection=0 does)")
    context: str | None = Field(None, description="accepted, not translated, not billed: it does not change the output")
    show_billed_characters: bool = False

    @field_validator("text", mode="before")
    @classmethod
    def _texts(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value

    @field_validator("split_sentences", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        return str(value).lower() if isinstance(value, (int, bool, str)) and not isinstance(value, bool) else value

    _tags = field_validator("ignore_tags", "splitting_tags", "non_splitting_tags", mode="before")(tag_list)


class TranslateDocument(BaseModel):
    """POST /v2/document's fields besides `file`."""

    model_config = ConfigDict(extra="ignore")

    target_lang: str
    source_lang: str | None = None
    output_format: str | None = Field(None, description="the input's own format only (no conversion)")
    formality: Formality = "default"
    glossary_id: str | None = None


class CreateGlossary(BaseModel):
    """POST /v2/glossaries (JSON or form; required fields are checked before, in DeepL's words)."""

    model_config = ConfigDict(extra="ignore")

    name: str = Field(min_length=1, max_length=256)
    source_lang: str = Field(max_length=16, description="DeepL code of the source terms (any case)")
    target_lang: str = Field(max_length=16, description="DeepL code of the target terms (any case)")
    entries: str = Field(description="TSV (source<TAB>target per line) or CSV (source,target per row)")
    entries_format: Literal["tsv", "csv"] = "tsv"
