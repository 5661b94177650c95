"""Schemathesis hooks for test_schema_fuzz: half of the generated bodies ask for the served pair (en->es)."""

from __future__ import annotations

import schemathesis
from hypothesis import strategies as st


@schemathesis.hook
def flatmap_body(context, body):
    """Random bodies mostly name unknown languages (400); this lets half of them reach the model."""
    if isinstance(body, dict):
        return st.booleans().map(lambda served: {**body, "source": "en", "target": "es"} if served else body)
    return st.just(body)
