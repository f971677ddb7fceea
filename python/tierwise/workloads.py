"""Seeded synthetic workloads for sweeps: ``zipf:requests=…,objects=…,alpha=…`` in a sweep's
traces. Each replicate is the same workload drawn with its own seed (``seed``, ``seed + 1``, …),
written once under the results directory and then treated as any trace (its key is its content).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from tierwise import _native

# `tierwise trace gen`'s defaults.
ZIPF_DEFAULTS: dict[str, Any] = {
    "requests": 1_000_000,
    "objects": 100_000,
    "alpha": 1.0,
    "size": 4096,
    "write_fraction": 0.0,
    "rate": 100.0,
}
_TYPES = {"requests": int, "objects": int, "alpha": float, "size": int, "write_fraction": float, "rate": float}


def is_synthetic(entry: str | os.PathLike[str]) -> bool:
    """Whether a sweep's trace entry names a synthetic workload rather than a file."""
    return isinstance(entry, str) and entry.startswith("zipf:")


def parse(entry: str) -> dict[str, Any]:
    """The parameters of ``zipf:k=v,…`` over `tierwise trace gen`'s defaults; an unknown or
    malformed parameter raises :class:`SpecError` naming it."""
    params = dict(ZIPF_DEFAULTS)
    body = entry.split(":", 1)[1]
    for part in filter(None, body.split(",")):
        k, sep, v = part.partition("=")
        k = k.strip().replace("-", "_")
        if not sep or k not in _TYPES:
            raise _native.SpecError(
                f"workload `{entry}`: `{part}` is not one of {', '.join(f'{n}=…' for n in _TYPES)}"
            )
        try:
            params[k] = _TYPES[k](v.strip())
        except ValueError:
            raise _native.SpecError(f"workload `{entry}`: {k}={v} is not a {_TYPES[k].__name__}") from None
    return params


def materialize(entry: str, seed: int, directory: Path) -> Path:
    """Writes replicate `seed` of workload `entry` under `directory` (once: the same seed writes
    the same bytes) and returns its path."""
    params = parse(entry)
    tag = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:12]
    path = directory / f"zipf-{tag}-seed{seed}.mqsim_ascii.trace"
    if not path.exists():
        directory.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        _native.gen_zipf(json.dumps({**params, "seed": seed}), os.fspath(tmp))
        os.replace(tmp, path)
    return path
