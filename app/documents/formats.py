"""The formats /translate_file takes, by file extension: how each is opened and its media type."""

from __future__ import annotations

import zipfile
from collections.abc import Callable

from lxml import etree

from app.documents import Document
from app.documents.l10n import Gettext, Xliff
from app.documents.markup import Epub, HtmlFile
from app.documents.odf import OpenDocument
from app.documents.office import PowerPoint, Word
from app.documents.plain import SubRip, TextFile
from app.errors import ApiError
from app.settings import Settings

OOXML = "application/vnd.openxmlformats-officedocument"
Opener = Callable[[bytes, Settings, str], Document]  # data, settings, target language

FORMATS: dict[str, tuple[Opener, str]] = {
    "txt": (lambda d, s, t: TextFile(d), "text/plain; charset=utf-8"),
    "html": (lambda d, s, t: HtmlFile(d), "text/html; charset=utf-8"),
    "htm": (lambda d, s, t: HtmlFile(d), "text/html; charset=utf-8"),
    "srt": (lambda d, s, t: SubRip(d), "application/x-subrip"),
    "docx": (lambda d, s, t: Word(d, s), f"{OOXML}.wordprocessingml.document"),
    "pptx": (lambda d, s, t: PowerPoint(d, s), f"{OOXML}.presentationml.presentation"),
    "odt": (lambda d, s, t: OpenDocument(d, s, "odt"), "application/vnd.oasis.opendocument.text"),
    "odp": (lambda d, s, t: OpenDocument(d, s, "odp"), "application/vnd.oasis.opendocument.presentation"),
    "epub": (lambda d, s, t: Epub(d, s), "application/epub+zip"),
    "po": (lambda d, s, t: Gettext(d, t), "text/x-gettext-translation"),
    "pot": (lambda d, s, t: Gettext(d, t), "text/x-gettext-translation"),
    "xlf": (lambda d, s, t: Xliff(d, t), "application/xliff+xml"),
    "xliff": (lambda d, s, t: Xliff(d, t), "application/xliff+xml"),
}  # fmt: skip
DECLINED = {
    "pdf": "pdf is not translated: the readers with a licence this project can ship (pypdf, pdfminer.six) extract "
    "text but cannot write it back into the page layout; convert it to docx or odt first",
    "doc": "legacy binary Word files are not read: save as docx",
    "ppt": "legacy binary PowerPoint files are not read: save as pptx",
}


def extension(filename: str) -> str:
    """The lower-case extension of a file name ("" when it has none)."""
    return filename.rsplit(".", 1)[-1].lower() if "." in filename else ""


def open_document(filename: str, data: bytes, settings: Settings, target: str) -> tuple[Document, str]:
    """The opened document and its media type; 415 for formats not taken, 422 for files their library rejects."""
    ext = extension(filename)
    if ext in DECLINED:
        raise ApiError(415, "unsupported_media_type", f"file: {DECLINED[ext]}")
    if ext not in FORMATS:
        names = ", ".join(sorted(FORMATS))
        raise ApiError(415, "unsupported_media_type", f"file: .{ext or '(none)'} is not supported; send one of {names}")
    opener, media_type = FORMATS[ext]
    try:
        return opener(data, settings, target), media_type
    except ApiError:
        raise
    except (ValueError, LookupError, OSError, AttributeError, zipfile.BadZipFile, etree.LxmlError) as exc:
        raise ApiError(422, "validation", f"file: not a valid {ext} file ({type(exc).__name__}: {exc})") from None
