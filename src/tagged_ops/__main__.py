"""``python -m tagged_ops``: what this torch offers, and a live self-check."""

import sys

from ._selfcheck import main

sys.exit(main())
