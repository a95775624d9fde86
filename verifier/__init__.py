"""Checks of a repaired host, built on testinfra, and the reward they add up to."""

from verifier.base import CHECKS, Check, HostAccess, Probe
from verifier.verify import Baseline, snapshot, verify

__all__ = ["CHECKS", "Baseline", "Check", "HostAccess", "Probe", "snapshot", "verify"]
