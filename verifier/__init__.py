"""Checks of a repaired host, built on testinfra, and the reward they add up to.

``judge`` is the entry point: it judges a set of hosts, healthy, broken or after the agent.
"""

from .base import CHECKS, Check, HostAccess, Probe
from .verify import Baseline, CheckEntry, Judgement, Moment, judge

__all__ = [
    "CHECKS",
    "Baseline",
    "Check",
    "CheckEntry",
    "HostAccess",
    "Judgement",
    "Moment",
    "Probe",
    "judge",
]
