"""The pieces of ``benches/report.py`` (the driver that runs the suite and writes the page), one job
each: :mod:`.results` reads the raw JSON into groups and formats numbers, :mod:`.charts` draws the
PNG figures, :mod:`.tables` writes each section's Markdown tables, :mod:`.markdown` puts the page
together and :mod:`.targets` checks ``benches/targets.toml``.

They import ``interleaved`` (``benches/interleaved.py``) as a top-level module: ``benches/`` must be
on ``sys.path``, as ``report.py`` puts it.
"""
