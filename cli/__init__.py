"""The ``fixos`` command line."""

from ..core.deferred import defer

# before docker is imported: a command on a local engine never loads paramiko (core/deferred.py)
defer("paramiko")

from .main import entry, main  # noqa: E402

__all__ = ["entry", "main"]
