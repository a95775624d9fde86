"""``python -m fixos.cli``: the command line without the console script."""

import sys

from .main import main

sys.exit(main())
