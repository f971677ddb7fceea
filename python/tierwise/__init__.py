"""tierwise: hybrid SSD/HDD storage research from Python.

The functions here run the same Rust code as the ``tierwise`` command line (the native module
``tierwise._native``), with the same spec strings and defaults, and return pandas DataFrames
(or polars with ``frame="polars"``). The raw result, identical to the CLI's ``--json`` output,
is kept in ``df.attrs["tierwise"]``.

>>> import tierwise
>>> df = tierwise.compare("data/traces/msr-hm0-sample.csv.gz",
...                       archs=["cache:mode=write-back", "greendm-tiering"], ssd=["10%", "25%"])
"""

from __future__ import annotations

from tierwise._api import (
    Reproduction,
    compare,
    list_architectures,
    list_collectors,
    mrc,
    reproduce,
    sim,
    trace_stat,
)
from tierwise._native import RunError, SpecError, TierwiseError, TraceError
from tierwise._native import version as _native_version
from tierwise.report import report
from tierwise.sweep import SweepError, build_stamp, sweep

__version__: str = _native_version()

__all__ = [
    "Reproduction",
    "RunError",
    "SpecError",
    "SweepError",
    "TierwiseError",
    "TraceError",
    "__version__",
    "build_stamp",
    "compare",
    "list_architectures",
    "list_collectors",
    "mrc",
    "report",
    "reproduce",
    "sim",
    "sweep",
    "trace_stat",
]
