"""Replicates into means with confidence intervals (Student's t over the replicates)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

# The per-run figures a paper reports, where present: throughput, the miss ratio, reads served
# by each level, response times.
METRICS = (
    "iops",
    "miss_ratio",
    "read_hit.ram",
    "read_hit.ssd",
    "read_hit.hdd",
    "latency.mean_us",
    "latency.p99_us",
)
GROUP = ("workload", "spec", "ssd", "size_label", "knobs")


def t_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float, float]:
    """Mean, standard deviation and the two-sided `confidence` interval of the mean (Student's
    t with n − 1 degrees of freedom). With one value the interval is NaN: nothing to estimate
    the spread from."""
    from scipy import stats as st

    xs = [float(v) for v in values if v == v]  # NaN: a metric the run did not measure
    n = len(xs)
    if n == 0:
        return (math.nan, math.nan, math.nan, math.nan)
    mean = sum(xs) / n
    if n == 1:
        return (mean, math.nan, math.nan, math.nan)
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    half = float(st.t.ppf((1 + confidence) / 2, n - 1)) * sd / math.sqrt(n)
    return (mean, sd, mean - half, mean + half)


def summarize(
    df: pd.DataFrame, metrics: Sequence[str] | None = None, confidence: float = 0.95
) -> pd.DataFrame:
    """One row per (workload, spec, size, knobs) over its replicates: ``n`` and, for every
    metric, ``METRIC.mean``, ``.std``, ``.ci_low``, ``.ci_high`` (the `confidence` interval of
    the mean). `metrics` defaults to :data:`METRICS` (those present); ``miss_ratio`` is
    requests with a piece served by the HDD over all requests."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence {confidence}: expected within (0, 1)")
    df = df.copy()
    if "miss_ratio" not in df and {"request_hits", "request_misses"} <= set(df.columns):
        total = df["request_hits"] + df["request_misses"]
        df["miss_ratio"] = (df["request_misses"] / total.where(total > 0)).astype(float)
    if "workload" not in df:
        df["workload"] = df.get("trace_file", df.get("trace"))
    wanted = [m for m in (metrics or METRICS) if m in df.columns]
    keys = [k for k in GROUP if k in df.columns]
    rows = []
    for group, part in df.groupby(keys, sort=False, dropna=False):
        row = dict(zip(keys, group if isinstance(group, tuple) else (group,)))
        row["size_fraction"] = float(part["size_fraction"].iloc[0]) if "size_fraction" in part else math.nan
        row["n"] = len(part)
        for m in wanted:
            mean, sd, lo, hi = t_interval(part[m].tolist(), confidence)
            row.update({f"{m}.mean": mean, f"{m}.std": sd, f"{m}.ci_low": lo, f"{m}.ci_high": hi})
        rows.append(row)
    out = pd.DataFrame(rows)
    out.attrs["confidence"] = confidence
    return out
