"""Glossaries, in no API dialect's words: entries parsed from what clients send (TSV, CSV, an object, pairs) and
checked against the server's limits, stored per owner (SQLite or Redis, where keys are kept), and matched on source
texts (case-insensitive after Unicode normalisation, on word boundaries, leftmost-longest)."""
