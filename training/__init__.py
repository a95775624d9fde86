"""Adapters for trainers (TRL's environment_factory)."""
