"""Checks of a repaired host, built on testinfra, and the reward they add up to."""

from fixos.verifier.base import CHECKS, Check, HostAccess, Probe
from fixos.verifier.verify import Baseline, refine, snapshot, verify

__all__ = ["CHECKS", "Baseline", "Check", "HostAccess", "Probe", "refine", "snapshot", "verify"]
