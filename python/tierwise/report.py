"""The self-contained HTML report (``tierwise report``): provenance, tables, inline SVG charts
and the data as CSV, from compare, sweep, mrc, sim and reproduce results."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from tierwise import _native


def report(
    results: Sequence[str | os.PathLike[str]],
    out: str | os.PathLike[str] = "report.html",
    *,
    title: str | None = None,
) -> Path:
    """Writes one HTML file (no network, no scripts) from result files or directories: the
    JSON files ``compare``, ``mrc``, ``sim --json`` and ``reproduce`` write, and sweep
    directories (their ``sweep.json``). Returns the path written."""
    paths = [os.fspath(p) for p in results]
    _native.report(paths, os.fspath(out), title)
    return Path(out)
