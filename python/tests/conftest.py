"""Shared fixtures: the repository, its bundled traces and the CLI binary the API is checked
against."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TRACES = REPO / "data" / "traces"
MSR = TRACES / "msr_hm_0.excerpt1000.csv"
SYSTOR = TRACES / "systor17_vdi.sample1000.csv.gz"
TPCC = TRACES / "tpcc_unverified.mqsim_ascii.trace"


@pytest.fixture(scope="session")
def cli() -> Path:
    """The `tierwise` binary of this checkout (TIERWISE_BIN overrides)."""
    p = Path(os.environ.get("TIERWISE_BIN", REPO / "target" / "ci" / "tierwise"))
    if not p.exists():
        pytest.fail(f"{p} not built: run `cargo build --profile ci -p tierwise` (or set TIERWISE_BIN)")
    return p


def run_cli(cli: Path, *args: str, cwd: Path | None = None) -> str:
    r = subprocess.run([os.fspath(cli), "-q", *args], capture_output=True, text=True, cwd=cwd or REPO, timeout=600)
    assert r.returncode == 0, f"tierwise {' '.join(args)} failed:\n{r.stderr}"
    return r.stdout


# What two runs of the same job may differ in: wall-clock time, and the engine's heap size
# (the file simulator's hash maps are randomly seeded, so their capacity varies by a few KiB).
VARYING = {"wall_s", "engine_memory_bytes"}


def without_wall(v):
    """A result without the fields two runs of the same job may differ in."""
    if isinstance(v, dict):
        return {k: without_wall(x) for k, x in v.items() if k not in VARYING}
    if isinstance(v, list):
        return [without_wall(x) for x in v]
    return v


def load(p: Path):
    return json.loads(p.read_text())


def need(module: str):
    """Imports `module` for a test that needs it: a missing one fails the test (the README's test
    command installs the extras), unless TIERWISE_ALLOW_SKIP=1 lets a developer skip it."""
    if os.environ.get("TIERWISE_ALLOW_SKIP") == "1":
        return pytest.importorskip(module)
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        pytest.fail(f"{module} is needed: pip install './python[dask,polars,test]' (scripts/test-all.sh does): {e}")


@pytest.fixture(scope="session")
def browser() -> str:
    """A headless Chromium (Debian's chromium-headless-shell or chromium)."""
    for name in (os.environ.get("TIERWISE_BROWSER"), "chromium-headless-shell", "chromium", "chromium-browser"):
        if name and shutil.which(name):
            return shutil.which(name)  # type: ignore[return-value]
    pytest.fail("no headless Chromium: apt-get install chromium-headless-shell (scripts/test-all.sh does)")
