"""``python -m circuitviz``: see cli.py."""

import sys

from .entry.cli import main

sys.exit(main())
