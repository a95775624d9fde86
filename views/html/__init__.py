"""The run page: a self-contained ``index.html`` at the top of every run directory and one per
episode beside its transcript, written as the run goes and at its end, plus the comparison of
two runs. No file they need is fetched: style, script and plots are inline, so a page opens
from ``file://`` on a machine without network (``fixos view RUN`` writes and serves them)."""

from .compare import Compared, Comparison, compare_runs, render_compare
from .episode import render_episode
from .live import LivePage, PageWriter
from .page import PAGE, EpisodePage, Running, RunPage, load_episode, load_run
from .redact import redact
from .run_table import render_run

__all__ = [
    "PAGE",
    "Compared",
    "Comparison",
    "EpisodePage",
    "LivePage",
    "PageWriter",
    "RunPage",
    "Running",
    "compare_runs",
    "load_episode",
    "load_run",
    "redact",
    "render_compare",
    "render_episode",
    "render_run",
]
