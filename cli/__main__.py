"""``python -m fixos.cli``: the command line without the console script."""

import sys

from fixos.cli.main import main

sys.exit(main())
