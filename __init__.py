"""The repository's top-level folders are the subpackages of one installed namespace, ``fixos``
(pyproject.toml's package-dir map: ``stack/`` is ``fixos.stack``, ``episodes/`` is
``fixos.episodes``). This file is never imported: it marks the checkout as their parent
for whoever reads imports as folders, so ``from ..stack.hosts import LiveHost`` in
``injector/process.py`` leads to ``stack/hosts.py``, as it does for Python through the map.
The public API is ``fixos/__init__.py``.
"""
