"""The ``fixos`` command line, runnable from a checkout as ``python runner.py``.

The installed console script calls the same ``fixos.cli.main``.
"""

import sys

from fixos.cli import main

if __name__ == "__main__":
    sys.exit(main())
