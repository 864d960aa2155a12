"""``python -m rlcore.cli``: the ``rlcore`` command."""

import sys

from rlcore.cli.main import main

sys.exit(main())
