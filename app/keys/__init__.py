"""API keys and per-key limits (LibreTranslate's semantics): a key store (SQLite or Redis), the admission check every
limited route runs, and the `python -m app keys` command."""
