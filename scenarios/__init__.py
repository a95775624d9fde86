"""Scenario definitions (the YAML files beside this one), their schema and the catalogue loader."""
