"""The ``rlcore`` command line: parsing and one module per command, on top of the library (nothing
in the library imports this package)."""

from rlcore.cli.main import main

__all__ = ["main"]
