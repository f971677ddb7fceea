"""The self-contained HTML report (``tierwise report``): provenance, tables, inline SVG charts
and the data as CSV, from compare, sweep, mrc, sim and reproduce results."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tierwise import _native

Result = Any  # a path, a DataFrame returned by this package, or a Reproduction


def _result_files(r: Any, i: int, tmp: Path) -> list[str]:
    """The result files behind `r`: its path, or the raw result a DataFrame of this package
    (or a Reproduction) carries, written under `tmp`."""
    if isinstance(r, str | os.PathLike):
        return [os.fspath(r)]
    raw = getattr(r, "raw", None)  # a Reproduction
    attrs = getattr(r, "attrs", None)
    if raw is None and isinstance(attrs, dict):
        if "out" in attrs and "sweep" in attrs:
            return [attrs["out"]]  # a sweep's results directory (its sweep.json)
        raw = attrs.get("tierwise")
    if not isinstance(raw, dict):
        raise TypeError(
            f"result {i}: a {type(r).__name__} without a tierwise result; report() takes paths, the "
            "pandas DataFrames tierwise.sim/compare/mrc/sweep return (polars frames carry no attrs: "
            "pass the result files), or a Reproduction"
        )
    # compare: its throughput and latency tables are one comparison file each.
    parts = [(k, raw[k]) for k in ("throughput", "latency") if raw.get(k)] if "throughput" in raw else [("", raw)]
    files = []
    for k, part in parts:
        p = tmp / f"result{i}{'-' + k if k else ''}.json"
        p.write_text(json.dumps(part))
        files.append(os.fspath(p))
    return files


def report(
    results: Sequence[Result],
    out: str | os.PathLike[str] = "report.html",
    *,
    title: str | None = None,
) -> Path:
    """Writes one HTML file (no network, no scripts) from results: paths to the JSON files
    ``compare``, ``mrc``, ``sim --json`` and ``reproduce`` write and to sweep directories (their
    ``sweep.json``), or the DataFrames ``tierwise.sim``, ``compare``, ``mrc`` and ``sweep``
    return and ``Reproduction`` objects. Returns the path written."""
    with tempfile.TemporaryDirectory(prefix="tierwise-report-") as d:
        paths = [p for i, r in enumerate(results) for p in _result_files(r, i, Path(d))]
        _native.report(paths, os.fspath(out), title)
    return Path(out)
