"""The run page's only style sheet and script, inlined into every page: a page must open
from ``file://`` on a machine with no network, so nothing is fetched from anywhere.

The script sorts a table when its header is clicked and hides the rows that do not hold
every word typed in the filter box; both choices survive the page's reload while a run
goes on (sessionStorage, per page). It reads the page, never writes markup: the data it
sorts was escaped when the page was written."""

from __future__ import annotations

import base64
import hashlib

CSS = """
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1f2328;
  margin: 1.5rem auto; max-width: 1280px; padding: 0 1rem; background: #fff; }
h1 { font-size: 1.45rem; margin-bottom: .2rem; }
h2 { font-size: 1.15rem; margin-top: 2rem; border-bottom: 1px solid #d0d7de; padding-bottom: .2rem; }
h3 { font-size: 1rem; margin-top: 1.2rem; }
a { color: #0969da; }
table { border-collapse: collapse; margin: .5rem 0 1rem; }
th, td { border: 1px solid #d0d7de; padding: .25rem .55rem; text-align: left; vertical-align: top; }
th { background: #f6f8fa; font-weight: 600; }
table.sortable th { cursor: pointer; user-select: none; }
table.sortable th:hover { background: #eaeef2; }
th[aria-sort="ascending"]::after { content: " \\25B2"; }
th[aria-sort="descending"]::after { content: " \\25BC"; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.pass { color: #116329; }
.partial { color: #9a6700; }
.fail { color: #b00020; font-weight: 600; }
tr.fail { background: #ffebe9; }
.invalid { color: #8250df; }
.running { color: #0969da; font-style: italic; }
.muted, .small { color: #59636e; }
.small { font-size: .85em; }
.tag { display: inline-block; border: 1px solid #d0d7de; border-radius: 1em; padding: 0 .5em;
  font-size: .85em; margin-right: .3em; }
pre { background: #f6f8fa; border: 1px solid #d8dee4; border-radius: 4px; padding: .5rem .7rem;
  white-space: pre-wrap; word-break: break-word; max-height: 36rem; overflow: auto; margin: .3rem 0; }
.step { border-left: 3px solid #d0d7de; padding: .1rem 0 .1rem .7rem; margin: .9rem 0; }
.step.nonzero { border-left-color: #b00020; }
.cmd { font-family: ui-monospace, "SFMono-Regular", Menlo, monospace; font-weight: 600; }
details > summary { cursor: pointer; color: #0969da; }
#filter { font: inherit; padding: .3rem .5rem; width: 22rem; max-width: 100%;
  border: 1px solid #afb8c1; border-radius: 4px; }
.better { background: #dafbe1; color: #116329; font-weight: 600; }
.worse { background: #ffebe9; color: #b00020; font-weight: 600; }
img.plot { max-width: 100%; border: 1px solid #d0d7de; margin: .4rem 0; }
pre.diff .add { color: #116329; background: #dafbe1; }
pre.diff .del { color: #b00020; background: #ffebe9; }
pre.diff .hunk { color: #8250df; }
pre.diff .head { color: #59636e; font-weight: 600; }
tr.agent td:first-child { font-weight: 600; }
details.disk { margin: .6rem 0; }
.banner { background: #ddf4ff; border: 1px solid #54aeff; padding: .4rem .7rem; border-radius: 4px; }
"""

JS = """
(function () {
  "use strict";
  var store = window.sessionStorage, here = "fixos:" + location.pathname;
  function remember(what, value) { try { store.setItem(here + ":" + what, value); } catch (e) {} }
  function recall(what) { try { return store.getItem(here + ":" + what); } catch (e) { return null; } }

  function key(cell) {
    var text = cell ? cell.getAttribute("data-sort") : "";
    if (text === null) { text = cell.textContent.trim(); }
    var n = Number(text);
    return text !== "" && isFinite(n) ? { n: n } : { s: text.toLowerCase() };
  }
  function empty(k) { return "s" in k && k.s === ""; }
  function order(a, b, descending) {  // numbers before text; empty cells last either way
    if (empty(a) || empty(b)) { return empty(a) === empty(b) ? 0 : empty(a) ? 1 : -1; }
    var c;
    if ("n" in a && "n" in b) { c = a.n - b.n; }
    else if ("n" in a || "n" in b) { c = "n" in a ? -1 : 1; }
    else { c = a.s === b.s ? 0 : a.s < b.s ? -1 : 1; }
    return descending ? -c : c;
  }
  function sortBy(th, direction) {
    var table = th.closest("table"), body = table.tBodies[0];
    var column = Array.prototype.indexOf.call(th.parentNode.children, th);
    if (!direction) {
      direction = th.getAttribute("aria-sort") === "ascending" ? "descending" : "ascending";
    }
    table.querySelectorAll("th[aria-sort]").forEach(function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", direction);
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (r1, r2) {
      return order(key(r1.cells[column]), key(r2.cells[column]), direction === "descending");
    });
    rows.forEach(function (row) { body.appendChild(row); });
    remember("sort:" + table.id, column + ":" + direction);
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    var heads = table.tHead ? table.tHead.rows[0].cells : [];
    Array.prototype.forEach.call(heads, function (th) {
      th.tabIndex = 0;
      th.title = "sort by this column";
      th.addEventListener("click", function () { sortBy(th); });
      th.addEventListener("keydown", function (e) { if (e.key === "Enter") { sortBy(th); } });
    });
    var saved = (recall("sort:" + table.id) || "").split(":");
    if (saved.length === 2 && heads[Number(saved[0])]) { sortBy(heads[Number(saved[0])], saved[1]); }
  });

  var box = document.getElementById("filter"), shown = document.getElementById("shown");
  function filter() {
    var words = box.value.toLowerCase().split(/\\s+/).filter(Boolean), visible = 0, all = 0;
    document.querySelectorAll("table.filterable > tbody > tr").forEach(function (row) {
      var text = row.textContent.toLowerCase();
      row.hidden = !words.every(function (w) { return text.indexOf(w) >= 0; });
      all += 1;
      if (!row.hidden) { visible += 1; }
    });
    if (shown) { shown.textContent = words.length ? visible + " of " + all + " rows" : ""; }
    remember("filter", box.value);
  }
  if (box) {
    box.value = recall("filter") || "";
    box.addEventListener("input", filter);
    filter();
  }
})();
"""


def _digest(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


CSP = (
    "default-src 'none'; img-src data:; "
    f"style-src {_digest(CSS)}; script-src {_digest(JS)}; base-uri 'none'; form-action 'none'"
)
"""The page's own policy: only its style sheet and script (by hash) run, images only from
data: URIs. Agent output is escaped before it lands in the page; if that ever failed, an
injected <script> or ``onerror=`` would still not run, and nothing could be fetched."""
