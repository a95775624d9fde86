"""The few pieces of HTML every page is built from. Everything that came from a run (an
agent's command and output, a check's detail, a scenario's id) goes through ``esc``:
secrets redacted, then escaped for text and attributes alike. Agent output is hostile; the
markup around it is only ever written here and in the section modules, never taken from a run."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from urllib.parse import quote

from .assets import CSP, CSS, JS
from .redact import redact

FOLD_LINES = 12
"""outputs longer than this many lines (or FOLD_CHARS characters) are folded in <details>."""
FOLD_CHARS = 1500


def esc(value: object) -> str:
    """``value`` as text safe in an element or a quoted attribute, its secrets redacted."""
    return html.escape(redact(str(value)), quote=True)


def href(*parts: str) -> str:
    """A relative link to a file of the run directory: each part percent-encoded and the
    whole led by ``./``, so a name with a colon is never read as a URL scheme."""
    return "./" + "/".join(quote(p, safe="") for p in parts)


def number(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def reward_class(reward: float | None) -> str:
    """How a reward looks: solved, partly, not at all, or not scored."""
    if reward is None:
        return "invalid"
    if reward >= 1.0:
        return "pass"
    return "partial" if reward > 0 else "fail"


def cell(content: str, *, sort: object = None, cls: str = "") -> str:
    """A table cell; ``content`` is markup already (escape first), ``sort`` its sort key."""
    attrs = f' class="{cls}"' if cls else ""
    if sort is not None:
        attrs += f' data-sort="{esc(sort)}"'
    return f"<td{attrs}>{content}</td>"


def table(
    table_id: str,
    heads: Sequence[str | tuple[str, str]],
    rows: Iterable[str],
    *,
    sortable: bool = True,
    filterable: bool = False,
) -> str:
    """A table with a head row (``heads``: a label, or (label, class)) and body ``rows``
    (each ``<tr>`` markup already); sortable by a click on a head, filtered by the filter box."""
    classes = " ".join(c for c, on in (("sortable", sortable), ("filterable", filterable)) if on)
    head = "".join(
        f'<th class="{esc(h[1])}">{esc(h[0])}</th>' if isinstance(h, tuple) else f"<th>{esc(h)}</th>"
        for h in heads
    )
    return (
        f'<table id="{esc(table_id)}" class="{classes}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def folded(text: str, what: str = "output") -> str:
    """Text in a <pre>; a long one folded in <details> that a click opens."""
    body = f"<pre>{esc(text)}</pre>"
    lines = text.count("\n") + 1
    if lines <= FOLD_LINES and len(text) <= FOLD_CHARS:
        return body
    return f"<details><summary>{esc(what)}: {lines} lines, {len(text)} characters</summary>{body}</details>"


def definitions(pairs: Iterable[tuple[str, str]]) -> str:
    """A two-column table of label and value (value is markup already)."""
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{v}</td></tr>" for k, v in pairs)
    return f'<table class="facts"><tbody>{rows}</tbody></table>'


def document(title: str, body: str, *, refresh_seconds: int | None = None) -> str:
    """A whole page: one style sheet and one script, both inline, under the page's own CSP."""
    refresh = f'<meta http-equiv="refresh" content="{refresh_seconds}">' if refresh_seconds else ""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">{refresh}'
        f"<title>{esc(title)}</title><style>{CSS}</style></head>\n"
        f"<body>\n{body}\n<script>{JS}</script></body></html>\n"
    )
