"""Run the benchmark suite and write ``docs/benchmarks.md``: ``python benches/report.py [options]``
is ``python -m rlcore.bench [options]`` (see ``rlcore/bench.py``; the benchmarks live in
``python/rlcore/_benches/`` so that an installed package carries them)."""

from rlcore.bench import main

if __name__ == "__main__":
    raise SystemExit(main())
