"""Deprecated: the benchmark suite and its report moved out of the package into the source
repository's ``benches/`` (``benches/report.py``, run by ``make bench``) in 0.2; removed in 0.3.

``python -m rlcore.bench`` still runs the report from a source checkout, with a warning."""

import runpy
import sys
import warnings
from pathlib import Path

if __name__ == "__main__":
    report = Path(__file__).resolve().parents[2] / "benches" / "report.py"
    if not report.is_file():
        sys.exit(
            "rlcore: the benchmark suite lives in the source repository since 0.2: clone it and run "
            "`make bench` (or `python benches/report.py`)"
        )
    warnings.warn("`python -m rlcore.bench` is deprecated: run `make bench`", DeprecationWarning, stacklevel=1)
    sys.argv[0] = str(report)
    runpy.run_path(str(report), run_name="__main__")
