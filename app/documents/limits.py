"""Hostile files: zip bombs and XML entity expansion are refused before anything is parsed."""

from __future__ import annotations

import io
import zipfile

from lxml import etree

from app.errors import ApiError
from app.settings import Settings

XML_SUFFIXES = (".xml", ".rels", ".xhtml", ".html", ".htm", ".opf", ".ncx", ".svg")


def refuse_entities(data: bytes, where: str = "file") -> None:
    """422 for XML that declares entities (billion laughs, external entities): no format here needs them."""
    if b"<!ENTITY" in data:
        raise ApiError(422, "validation", f"{where}: XML entity declarations are not accepted (entity expansion)")


def xml_parser() -> etree.XMLParser:
    """lxml's parser with entities unresolved and no network (a second guard behind refuse_entities)."""
    return etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False, remove_blank_text=False)


def open_zip(data: bytes, settings: Settings, kind: str) -> zipfile.ZipFile:
    """The archive of a zip-based format, once its entry count, uncompressed size and XML entries pass the limits."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        entries = archive.infolist()
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise ApiError(422, "validation", f"file: not a valid {kind} file (zip: {exc})") from None
    if len(entries) > settings.max_zip_entries:
        msg = f"file: {len(entries)} zip entries exceeds max_zip_entries={settings.max_zip_entries}"
        raise ApiError(413, "payload_too_large", msg)
    size = sum(e.file_size for e in entries)
    if size > settings.max_unzipped_bytes:
        msg = f"file: {size} bytes uncompressed exceeds max_unzipped_bytes={settings.max_unzipped_bytes}"
        raise ApiError(413, "payload_too_large", msg)
    try:
        for entry in entries:
            if entry.filename.lower().endswith(XML_SUFFIXES):
                refuse_entities(archive.read(entry), f"file: {entry.filename}")
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        raise ApiError(422, "validation", f"file: not a valid {kind} file (zip: {exc})") from None
    return archive
