"""``python -m rheo.cli``: the ``rheo`` command."""

import sys

from rheo.cli import main

sys.exit(main())
