"""Secrets left out of a page that is made to be shared: ``fixos.records.redact`` (the
record's diffs of the hosts' files are redacted there, before they are written)."""

from __future__ import annotations

from ...records.redact import redact

__all__ = ["redact"]
