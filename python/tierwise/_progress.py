"""Progress bars (tqdm) for long jobs: on when stderr is a terminal or the code runs in a
Jupyter kernel (tqdm.auto draws a notebook widget there), off otherwise, unless forced with
``progress=True`` or ``progress=False``. A callable is called instead of a bar."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

ProgressArg = bool | Callable[..., Any] | None


def in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel (whose stderr is no terminal, yet shows bars)."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:  # noqa: BLE001 - an IPython without a shell is no notebook
        return False
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def enabled(progress: ProgressArg) -> bool:
    """Whether to draw a bar."""
    if progress is None:
        return sys.stderr.isatty() or in_notebook()
    return progress is True


@contextlib.contextmanager
def _bar(
    progress: ProgressArg, label: str, total: int | None, unit: str, update: Callable[[Any], Callable[..., None]]
) -> Iterator[Callable[..., None] | None]:
    """The callback the native module calls: the user's callable, a tqdm bar's `update(bar)`,
    or none."""
    if callable(progress) and progress is not True:
        yield progress
        return
    if not enabled(progress):
        yield None
        return
    from tqdm.auto import tqdm

    bar = tqdm(total=total, desc=label, unit=unit, unit_scale=unit == "req", leave=False, file=sys.stderr)
    try:
        yield update(bar)
    finally:
        bar.close()


def records_bar(progress: ProgressArg, label: str) -> contextlib.AbstractContextManager[Callable[..., None] | None]:
    """A callback `cb(records)` for a single simulation."""

    def update(bar: Any) -> Callable[[int], None]:
        return lambda records: bar.update(records - bar.n)

    return _bar(progress, label, None, "req", update)


def runs_bar(progress: ProgressArg, label: str, total: int) -> contextlib.AbstractContextManager[Callable[..., None] | None]:
    """A callback `cb(label, runs_done)` for a set of simulations."""

    def update(bar: Any) -> Callable[[str, int], None]:
        def cb(run: str, done: int) -> None:
            bar.total = max(bar.total or 0, done)
            bar.set_postfix_str(run, refresh=False)
            bar.update(done - bar.n)

        return cb

    return _bar(progress, label, total, "run", update)


def steps_bar(progress: ProgressArg, label: str) -> contextlib.AbstractContextManager[Callable[..., None] | None]:
    """A callback `cb(label, done, total)` for a reproduction."""

    def update(bar: Any) -> Callable[[str, int, int], None]:
        def cb(run: str, done: int, total: int) -> None:
            bar.total = total
            bar.set_postfix_str(run, refresh=False)
            bar.update(done - bar.n)

        return cb

    return _bar(progress, label, None, "run", update)
