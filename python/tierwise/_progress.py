"""Progress bars (tqdm) for long jobs: on when stderr is a terminal, off otherwise, unless
forced with ``progress=True`` or ``progress=False``. A callable is called instead of a bar."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

ProgressArg = bool | Callable[..., Any] | None


def enabled(progress: ProgressArg) -> bool:
    """Whether to draw a bar."""
    if progress is None:
        return sys.stderr.isatty()
    return progress is True


def _bar(label: str, total: int | None, unit: str) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=label, unit=unit, unit_scale=unit == "req", leave=False, file=sys.stderr)


@contextlib.contextmanager
def records_bar(progress: ProgressArg, label: str) -> Iterator[Callable[[int], None] | None]:
    """A callback `cb(records)` for a single simulation."""
    if callable(progress) and progress is not True:
        yield progress
        return
    if not enabled(progress):
        yield None
        return
    bar = _bar(label, None, "req")

    def cb(records: int) -> None:
        bar.update(records - bar.n)

    try:
        yield cb
    finally:
        bar.close()


@contextlib.contextmanager
def runs_bar(progress: ProgressArg, label: str, total: int) -> Iterator[Callable[[str, int], None] | None]:
    """A callback `cb(label, runs_done)` for a set of simulations."""
    if callable(progress) and progress is not True:
        yield progress
        return
    if not enabled(progress):
        yield None
        return
    bar = _bar(label, total, "run")

    def cb(run: str, done: int) -> None:
        if done > (bar.total or 0):
            bar.total = done
        bar.set_postfix_str(run, refresh=False)
        bar.update(done - bar.n)

    try:
        yield cb
    finally:
        bar.close()


@contextlib.contextmanager
def steps_bar(progress: ProgressArg, label: str) -> Iterator[Callable[[str, int, int], None] | None]:
    """A callback `cb(label, done, total)` for a reproduction."""
    if callable(progress) and progress is not True:
        yield progress
        return
    if not enabled(progress):
        yield None
        return
    bar = _bar(label, None, "run")

    def cb(run: str, done: int, total: int) -> None:
        bar.total = total
        bar.set_postfix_str(run, refresh=False)
        bar.update(done - bar.n)

    try:
        yield cb
    finally:
        bar.close()
