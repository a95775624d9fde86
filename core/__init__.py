"""The base layer: errors, shared data models and the type registry. Imports nothing else of FixOS."""
