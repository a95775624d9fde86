"""Faults applied to live hosts: a registry of ``Fault`` types keyed by YAML ``type``."""

from .base import FAULTS, Fault, inject_all

__all__ = ["FAULTS", "Fault", "inject_all"]
