"""The simulator's jobs as Python functions returning DataFrames."""

from __future__ import annotations

import json
import re
import math
import os
from pathlib import Path
from typing import Any, Literal, Sequence

import pandas as pd

from tierwise import _native
from tierwise._progress import ProgressArg, records_bar, runs_bar, steps_bar

Frame = Literal["pandas", "polars"]
PathLike = str | os.PathLike[str]


def _trace_options(format: str | None, skip_bad_lines: bool) -> dict[str, Any]:
    return {"format": format, "skip_bad_lines": skip_bad_lines}


def _frame(df: pd.DataFrame, frame: Frame) -> Any:
    if frame == "pandas":
        return df
    if frame == "polars":
        import polars as pl  # optional extra: pip install './python[polars]'

        return pl.from_pandas(df)
    raise _native.SpecError(f"frame={frame!r}: expected 'pandas' or 'polars'")


def report_row(report: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """One flat row from a SimReport: nested fields become dotted columns (``latency.p99_us``)."""
    row = dict(extra)
    flat = pd.json_normalize(report, sep=".").iloc[0].to_dict()
    row.update(flat)
    return row


def sim(
    trace: PathLike,
    arch: str,
    ssd: str,
    *,
    format: str | None = None,
    skip_bad_lines: bool = False,
    ram_cache: str = "64MiB",
    no_dirs: bool = False,
    measure_from: str = "auto",
    progress: ProgressArg = None,
    frame: Frame = "pandas",
    **model: Any,
) -> Any:
    """One architecture at one SSD size (``tierwise sim``); a one-row DataFrame.

    ``measure_from``: the warm-up (``--measure-from``). Block traces: ``"auto"`` (none), a
    request index or a share such as ``"20%"``; file traces: ``"auto"`` (after the setup
    phase) or an operation index.

    ``model`` takes the CLI's model options by their long names with ``_`` for ``-``:
    ``objects``, ``timing``, ``hdd``, ``ssd_model``, ``ram``, ``devices``, ``hdd_queue``,
    ``spin_down``, ``read_weight``, ``flush``, ``max_requests``, ``max_time``, ``check_every``,
    ``io_align``.
    An unknown name raises :class:`SpecError` naming it.
    """
    job = {
        "trace": os.fspath(trace),
        "arch": arch,
        "ssd": ssd,
        "trace_options": _trace_options(format, skip_bad_lines),
        "model": model,
        "ram_cache": ram_cache,
        "no_dirs": no_dirs,
        "measure_from": measure_from,
    }
    with records_bar(progress, f"{arch} @ {ssd}") as cb:
        out = json.loads(_native.sim(json.dumps(job), cb))
    df = pd.DataFrame([report_row(out["report"], size_label=out["size_label"], size_fraction=out["size_fraction"])])
    df.attrs["tierwise"] = out["report"]
    return _frame(df, frame)


def compare(
    trace: PathLike,
    archs: Sequence[str] = (),
    ssd: Sequence[str] = ("5%", "10%", "25%", "50%"),
    *,
    format: str | None = None,
    skip_bad_lines: bool = False,
    threads: int = 0,
    allow_oversize: bool = False,
    progress: ProgressArg = None,
    frame: Frame = "pandas",
    **model: Any,
) -> Any:
    """Architectures × SSD sizes on one trace (``tierwise compare``).

    One row per (table, SSD size, architecture). With ``timing="auto"`` (the default) the
    ``table`` column is ``throughput`` (closed loop, 32 outstanding) or ``latency`` (open loop
    at a load HDD-only carries), as the CLI prints them. ``df.attrs["tierwise"]`` holds the
    raw outcome (``throughput`` equals the CLI's compare.json, ``latency`` its
    compare-latency.json) and ``df.attrs["verdicts"]`` the verdict per size.
    """
    if isinstance(archs, str) or isinstance(ssd, str):
        raise _native.SpecError("archs and ssd take lists of strings, e.g. ssd=['10%', '25%']")
    job = {
        "trace": os.fspath(trace),
        "archs": list(archs),
        "ssd": list(ssd),
        "trace_options": _trace_options(format, skip_bad_lines),
        "model": model,
        "threads": threads,
        "allow_oversize": allow_oversize,
    }
    tables = 2 if model.get("timing", "auto") == "auto" else 1
    total = (len(archs) + 1 if archs else 10) * len(ssd) * tables
    with runs_bar(progress, f"compare {Path(trace).name}", total) as cb:
        out = json.loads(_native.compare(json.dumps(job), cb))
    rows = []
    for table in ("throughput", "latency"):
        c = out.get(table)
        if not c:
            continue
        for r in c["rows"]:
            rows.append(
                report_row(r["report"], table=table, size_label=r["size_label"], size_fraction=r["size_fraction"])
            )
    df = pd.DataFrame(rows)
    df.attrs["tierwise"] = out
    df.attrs["verdicts"] = out["verdicts"]
    return _frame(df, frame)


def mrc(
    trace: PathLike,
    *,
    sizes: Sequence[str] = (),
    points: int = 64,
    objects: str = "blocks:4KiB",
    format: str | None = None,
    skip_bad_lines: bool = False,
    collector: str = "lru",
    sample: float = 1.0,
    seed: int = 1,
    exact_error: bool = False,
    belady: bool = False,
    progress: ProgressArg = None,
    frame: Frame = "pandas",
) -> Any:
    """A miss-ratio curve (``tierwise mrc``): size_bytes, miss_ratio, misses. LRU in one pass,
    any other ``collector`` by one simulation per size; ``sample`` < 1 computes it on a SHARDS
    spatial sample of that share of the objects (drawn with ``seed``), and ``exact_error`` also
    computes the exact curve and puts the sample's error in ``df.attrs["tierwise"]["error"]``.
    ``belady`` adds ``belady_miss_ratio`` and ``belady_misses``: Belady's MIN (the offline
    optimum for objects of one size) at the same sizes on the same accesses."""
    job = {
        "trace": os.fspath(trace),
        "trace_options": _trace_options(format, skip_bad_lines),
        "objects": objects,
        "sizes": list(sizes),
        "points": points,
        "collector": collector,
        "sample": sample,
        "seed": seed,
        "exact_error": exact_error,
        "belady": belady,
    }
    with records_bar(progress, f"mrc {Path(trace).name}") as cb:
        out = json.loads(_native.mrc(json.dumps(job), cb))
    df = pd.DataFrame(out["mrc"]["points"])
    if out["mrc"].get("belady"):
        opt = pd.DataFrame(out["mrc"]["belady"])
        df["belady_miss_ratio"] = opt["miss_ratio"].to_numpy()
        df["belady_misses"] = opt["misses"].to_numpy()
    df.attrs["tierwise"] = out["mrc"]
    df.attrs["objects"] = out["objects"]
    return _frame(df, frame)


def trace_stat(
    trace: PathLike,
    *,
    objects: str = "blocks:4KiB",
    format: str | None = None,
    skip_bad_lines: bool = False,
    analysis: bool = True,
    progress: ProgressArg = None,
) -> dict[str, Any]:
    """A trace's statistics (``tierwise trace stat --json``): requests, reads, footprint,
    duration, request-size histogram, alignment and, unless ``analysis=False``
    (``--brief``), ``"analysis"``: popularity (rank-frequency, top shares, Zipf exponent),
    reuse-time and stack-distance histograms, the op × size mix and the per-volume breakdown."""
    job = {
        "trace": os.fspath(trace),
        "trace_options": _trace_options(format, skip_bad_lines),
        "objects": objects,
        "analysis": analysis,
    }
    with records_bar(progress, f"reading {Path(trace).name}") as cb:
        out = json.loads(_native.trace_stat(json.dumps(job), cb))
    stats: dict[str, Any] = out["stats"]
    return stats


def _finding_row(f: dict[str, Any]) -> dict[str, Any]:
    """One finding as a row: for a size-of-effect claim, the pair furthest from the paper's
    (the one that decides the verdict) as numbers and their ratio; NaN for order claims."""
    effects = f.get("effects") or []
    nan = float("nan")

    def distance(pair: list[float]) -> float:
        p, o = pair
        return abs(math.log(o / p)) if p and o / p > 0 else math.inf

    p, o = max(effects, key=distance) if effects else (nan, nan)
    return {
        "claim": f["claim"],
        "paper": f["paper"],
        "ours": f["ours"],
        "held": f["held"],
        "verdict": f.get("verdict", "held" if f["held"] else "not-held"),
        "paper_effect": p,
        "our_effect": o,
        "ratio": o / p if effects and p else nan,
    }


_NUMBER = re.compile(r"^[+-]?(\d[\d,]*\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def _cell_number(cell: str) -> tuple[float, str] | None:
    """A table cell as (number, unit suffix: "", "%" or "x"), or None when it is text."""
    c = cell.strip().replace("\u2009", "").replace("\u00a0", "")
    unit = ""
    if c.endswith("%") or c.endswith("x") or c.endswith("\u00d7"):
        unit = "%" if c.endswith("%") else "x"
        c = c[:-1].strip()
    if not _NUMBER.match(c):
        return None
    return float(c.replace(",", "")), unit


def _numeric_table(headers: list[str], rows: list[list[str]]) -> pd.DataFrame:
    """A reproduction table with its number columns as numbers: a column whose every cell is a
    number (or "–"/empty for none) becomes float; a shared "%" or "x" suffix moves into the
    column name (``LRU/LFU (%)``, ``LRU speed-up (x)``). Text columns stay text."""
    names, columns = [], []
    for i, h in enumerate(headers):
        cells = [r[i] for r in rows]
        parsed = [None if c.strip() in ("", "\u2013", "-") else _cell_number(c) for c in cells]
        units = {p[1] for p in parsed if p is not None}
        numeric = (
            bool(rows)
            and len(units) == 1
            and all(p is not None or c.strip() in ("", "\u2013", "-") for c, p in zip(cells, parsed))
        )
        if not numeric:
            names.append(h)
            columns.append(cells)
            continue
        unit = units.pop()
        names.append(h if not unit or unit in h else f"{h} ({unit})")
        columns.append([float("nan") if p is None else p[0] for p in parsed])
    df = pd.DataFrame({i: col for i, col in enumerate(columns)}) if rows else pd.DataFrame(columns=range(len(names)))
    df.columns = names
    return df


class Reproduction:
    """A seed paper's experiments beside its numbers (``tierwise reproduce``)."""

    def __init__(self, raw: dict[str, Any]):
        self.raw = raw
        self.target: str = raw["target"]
        self.paper: str = raw["paper"]
        self.findings = pd.DataFrame(
            [_finding_row(f) for f in raw["findings"]],
            columns=["claim", "paper", "ours", "held", "verdict", "paper_effect", "our_effect", "ratio"],
        )
        self.runs = pd.DataFrame(
            [report_row(r["report"], workload=r["workload"], label=r["label"], ssd_fraction=r["ssd_fraction"])
             for r in raw["runs"]]
        )
        self.tables = {t["title"]: _numeric_table(t["headers"], t["rows"]) for t in raw["tables"]}

    @property
    def held(self) -> int:
        """Claims our numbers show."""
        return int(self.findings["held"].sum())

    def __repr__(self) -> str:
        return f"<Reproduction {self.target}: {self.held}/{len(self.findings)} claims held, {len(self.runs)} runs>"

    def _repr_html_(self) -> str:
        return f"<h4>{self.paper}</h4>" + self.findings.to_html(index=False)


def reproduce(
    target: str,
    *,
    scale: float = 1.0,
    traces: PathLike | None = None,
    seed: int = 42,
    threads: int = 0,
    out: PathLike | None = None,
    progress: ProgressArg = None,
) -> Reproduction:
    """Runs a seed paper's experiments (greendm, otf-ast, hca, loris, hycache).

    ``traces`` is the directory of the bundled traces (default: ``data/traces`` under the current
    directory). With ``out``, the CLI's files (JSON, CSV, PNG charts) are written there too.
    """
    tdir = Path(traces) if traces is not None else Path.cwd() / "data" / "traces"
    job = {"target": target, "scale": scale, "traces": os.fspath(tdir), "seed": seed, "threads": threads}
    with steps_bar(progress, f"reproduce {target}") as cb:
        raw = json.loads(_native.reproduce(json.dumps(job), os.fspath(out) if out is not None else None, cb))
    return Reproduction(raw)


def _catalogue() -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = json.loads(_native.catalogue())
    return entries


def list_architectures() -> pd.DataFrame:
    """Every architecture: name, version, help, capabilities and its knobs ({name: default})."""
    rows = [
        {
            "name": e["name"],
            "version": e["version"],
            "help": e["help"],
            "capabilities": e["capabilities"],
            "knobs": {k["name"]: k["default"] for k in e["knobs"]},
            "knob_help": {k["name"]: k["help"] for k in e["knobs"]},
        }
        for e in _catalogue()
        if e["kind"] == "architecture"
    ]
    return pd.DataFrame(rows)


def list_collectors() -> pd.DataFrame:
    """Every collector (``collector=NAME`` inside an architecture spec) with its knobs."""
    rows = [
        {"name": e["name"], "version": e["version"], "help": e["help"], "knobs": {k["name"]: k["default"] for k in e["knobs"]}}
        for e in _catalogue()
        if e["kind"] == "collector"
    ]
    return pd.DataFrame(rows)
