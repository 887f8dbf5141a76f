"""``python3 -m fencegate``: see :mod:`fencegate.cli`."""

import sys

from .cli import main

sys.exit(main())
