"""Hostile files: zip bombs and XML that declares or references entities are refused before a format reads them;
every XML the server reads goes through one hardened lxml parser, in whatever encoding it declares."""

from __future__ import annotations

import io
import zipfile

from lxml import etree

from app.errors import ApiError
from app.settings import Settings

XML_SUFFIXES = (".xml", ".rels", ".opf")  # zip entries an XML parser reads (XHTML pages take the HTML path)


def xml_parser() -> etree.XMLParser:
    """lxml's parser with nothing expanded or fetched: entities unresolved, no DTD loaded, no network, no huge trees."""
    return etree.XMLParser(resolve_entities=False, load_dtd=False, no_network=True, huge_tree=False)


def parse_xml(data: bytes, where: str = "file") -> etree._Element:
    """The root of an XML document (UTF-8, -16 or -32, as its byte-order mark or declaration says); 422 when it is
    malformed, or declares or references entities (billion laughs, external entities): no format here needs them."""
    try:
        root = etree.fromstring(data, xml_parser())
    except etree.XMLSyntaxError as exc:
        raise ApiError(422, "validation", f"{where}: not valid XML ({exc})") from None
    dtd = root.getroottree().docinfo.internalDTD
    declared = dtd is not None and any(True for _ in dtd.iterentities())
    if declared or any(True for _ in root.iter(etree.Entity)):
        raise ApiError(422, "validation", f"{where}: XML entities are not accepted (entity expansion)")
    return root


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
            if entry.filename.lower().endswith(XML_SUFFIXES) and entry.file_size:  # (LibreOffice writes empty ones)
                parse_xml(archive.read(entry), f"file: {entry.filename}")
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        raise ApiError(422, "validation", f"file: not a valid {kind} file (zip: {exc})") from None
    return archive
