"""The Python API against the CLI: the same job gives the same JSON, errors carry the Rust
message, and the interpreter is free while a simulation runs."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

import tierwise
from conftest import MSR, REPO, SYSTOR, TPCC, TRACES, load, need, run_cli, without_wall


def test_sim_equals_the_cli_json(cli: Path, tmp_path: Path) -> None:
    for trace, arch, ssd, extra in [
        (MSR, "cache:mode=write-back,collector=arc", "10%", {"timing": "closed:32"}),
        (SYSTOR, "greendm-tiering", "25%", {}),
        (TPCC, "dm-cache-smq-like", "4MiB", {"timing": "none"}),
    ]:
        out = tmp_path / "sim.json"
        flags = [f"--{k.replace('_', '-')}={v}" for k, v in extra.items()]
        run_cli(cli, "sim", str(trace), "--arch", arch, "--ssd", ssd, *flags, "--json", str(out))
        df = tierwise.sim(trace, arch, ssd, **extra)
        assert len(df) == 1
        assert without_wall(df.attrs["tierwise"]) == without_wall(load(out))
        assert df.loc[0, "arch"] == arch
        assert df.loc[0, "iops"] == pytest.approx(load(out)["iops"])


def test_compare_equals_the_cli_json(cli: Path, tmp_path: Path) -> None:
    archs = ["cache:mode=write-back", "greendm-tiering", "linear"]
    run_cli(cli, "compare", str(MSR), *[f"--arch={a}" for a in archs], "--ssd", "10%,25%", "--out", str(tmp_path))
    df = tierwise.compare(MSR, archs=archs, ssd=["10%", "25%"])
    raw = df.attrs["tierwise"]
    assert without_wall(raw["throughput"]) == without_wall(load(tmp_path / "compare.json"))
    assert without_wall(raw["latency"]) == without_wall(load(tmp_path / "compare-latency.json"))
    # hdd-only is added as the baseline, as the CLI does; one row per table, size and spec.
    assert set(df["table"]) == {"throughput", "latency"}
    assert len(df) == 2 * 2 * 4
    assert df.attrs["verdicts"][0].startswith("SSD 10%")


def test_a_sampled_arc_curve_equals_the_cli_and_states_its_error(cli: Path, tmp_path: Path) -> None:
    cloud = TRACES / "cloudphysics_libcachesim.sample.vscsi.gz"
    args = ["--collector", "arc", "--sample", "0.05", "--seed", "3", "--exact-error", "--points", "10"]
    run_cli(cli, "mrc", str(cloud), *args, "--out", str(tmp_path))
    m = tierwise.mrc(cloud, points=10, collector="arc", sample=0.05, seed=3, exact_error=True)
    raw = m.attrs["tierwise"]
    assert raw == load(tmp_path / "mrc.json")
    assert raw["collector"] == "arc" and raw["sampling"]["rate"] == 0.05 and raw["sampling"]["seed"] == 3
    assert 0 < raw["error"]["mean_abs"] <= raw["error"]["max_abs"] < 0.05


def test_mrc_and_trace_stat_equal_the_cli(cli: Path, tmp_path: Path) -> None:
    run_cli(cli, "mrc", str(SYSTOR), "--points", "12", "--out", str(tmp_path))
    m = tierwise.mrc(SYSTOR, points=12)
    assert m.attrs["tierwise"] == load(tmp_path / "mrc.json")
    assert list(m.columns) == ["size_bytes", "misses", "miss_ratio"]
    assert m["miss_ratio"].is_monotonic_decreasing
    # Belady's MIN beside it: the same sizes, never more misses.
    b = tierwise.mrc(SYSTOR, points=12, belady=True)
    assert list(b.columns) == ["size_bytes", "misses", "miss_ratio", "belady_miss_ratio", "belady_misses"]
    assert (b["belady_misses"] <= b["misses"]).all() and (b["belady_misses"] < b["misses"]).any()
    import json

    stat = json.loads(run_cli(cli, "trace", "stat", str(MSR), "--json"))
    assert tierwise.trace_stat(MSR) == stat


def test_reproduce_equals_the_cli(cli: Path, tmp_path: Path) -> None:
    run_cli(cli, "reproduce", "hycache", "--scale", "0.05", "--out", str(tmp_path))
    r = tierwise.reproduce("hycache", scale=0.05, traces=TRACES)
    assert without_wall(r.raw) == without_wall(load(tmp_path / "reproduce-hycache.json"))
    assert list(r.findings.columns) == [
        "claim", "paper", "ours", "held", "verdict", "paper_effect", "our_effect", "ratio"
    ]
    # A size-of-effect claim carries the paper's effect, ours and their ratio.
    gr = tierwise.reproduce("greendm", scale=0.02, traces=TRACES)
    g = gr.findings
    # Its Web-search figure draws caching beside tiering, as the paper's does.
    web = next(c for c in gr.raw["charts"] if c["file"] == "greendm-websearch-iops.png")
    labels = [s[0] for s in web["series"]]
    assert {"tiering MCML=16", "caching MCML=16", "Mylinear"} <= set(labels), labels
    # The paper's points are drawn beside ours, on the PT values it printed.
    assert [p[1][0][0] for p in web["paper"]] == [1.0, 4.0], web["paper"]
    sized = g.dropna(subset=["ratio"])
    assert len(sized) >= 6 and set(g["verdict"]) <= {"held", "direction-only", "not-held"}
    assert (sized["ratio"] == sized["our_effect"] / sized["paper_effect"]).all()
    assert len(r.runs) == len(r.raw["runs"]) and r.tables
    # Tables come back with numbers as numbers, a shared unit in the column name.
    for title, t in r.tables.items():
        assert any(t[c].dtype == float for c in t.columns), f"{title}: no number column"
    fig11 = next(t for title, t in r.tables.items() if "Figure 11" in title)
    assert fig11["LRU speed-up (x)"].dtype == float and fig11["workload"].dtype != float


def test_reproduction_tables_parse_numbers_and_keep_text() -> None:
    from tierwise._api import _numeric_table

    t = _numeric_table(
        ["name", "n", "share", "gain", "mixed"],
        [["a", "1,234", "12.5 %", "+58 %", "3x"], ["b", "\u2013", "7%", "-4 %", "n/a"]],
    )
    assert list(t.columns) == ["name", "n", "share (%)", "gain (%)", "mixed"]
    assert t["n"].iloc[0] == 1234.0 and t["n"].isna().iloc[1]
    assert list(t["gain (%)"]) == [58.0, -4.0] and t["mixed"].tolist() == ["3x", "n/a"]


def test_architectures_are_the_registry(cli: Path) -> None:
    archs = tierwise.list_architectures()
    listed = run_cli(cli, "list", "architectures")
    for name in archs["name"]:
        assert f"  {name} " in listed
    cache = archs.set_index("name").loc["cache"]
    assert cache["knobs"]["mode"] == "write-through"  # the registry's default
    assert "lru" in set(tierwise.list_collectors()["name"])


def test_errors_carry_the_rust_message(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("128166372003061629,hm,0,Read,3064,4096,1\n128166372003061630,hm,0,Reed,1,2,3\n")
    with pytest.raises(tierwise.TraceError, match=r"bad\.csv:2: field `Type`"):
        tierwise.sim(bad, "cache", "10%", format="msr")
    with pytest.raises(tierwise.TraceError, match="nope.csv"):
        tierwise.sim(tmp_path / "nope.csv", "cache", "10%")
    with pytest.raises(tierwise.SpecError, match="invalid value `bogus` for `mode`"):
        tierwise.sim(MSR, "cache:mode=bogus", "10%")
    with pytest.raises(tierwise.SpecError, match="unknown option `timingz`"):
        tierwise.sim(MSR, "cache", "10%", timingz="none")
    with pytest.raises(tierwise.SpecError, match="SSD size"):
        tierwise.compare(MSR, archs=["cache"], ssd=["-5%"])
    with pytest.raises(tierwise.SpecError, match="unknown reproduction target"):
        tierwise.reproduce("nosuchpaper")
    assert issubclass(tierwise.TraceError, tierwise.TierwiseError)


def test_the_interpreter_runs_while_simulating() -> None:
    """The GIL is released: a Python thread keeps counting while two simulations run."""
    trace = TRACES / "arc_OLTP.lis.zst"
    ticks = 0
    done = threading.Event()

    def count() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            time.sleep(0.001)

    t = threading.Thread(target=count)
    t.start()
    started = time.perf_counter()
    sims = [threading.Thread(target=tierwise.sim, args=(trace, "cache:collector=arc", "10%"), kwargs={"timing": "none"}) for _ in range(2)]
    for s in sims:
        s.start()
    for s in sims:
        s.join()
    elapsed = time.perf_counter() - started
    done.set()
    t.join()
    # With the GIL held, the counter would stall for the whole run.
    assert ticks > elapsed / 0.001 * 0.3, (ticks, elapsed)


def test_progress_reaches_a_callable() -> None:
    seen: list[int] = []
    tierwise.sim(TRACES / "arc_OLTP.lis.zst", "cache", "10%", timing="none", progress=seen.append)
    assert seen and seen == sorted(seen) and seen[-1] >= 900_000
    runs: list[tuple[str, int]] = []
    tierwise.compare(MSR, archs=["cache"], ssd=["10%"], timing="none", progress=lambda label, n: runs.append((label, n)))
    assert runs == [("cache @ 10%", 1)]


def test_polars_frames() -> None:
    pl = need("polars")
    df = tierwise.sim(MSR, "cache", "10%", timing="none", frame="polars")
    assert isinstance(df, pl.DataFrame) and df.shape[0] == 1
    assert isinstance(tierwise.sim(MSR, "cache", "10%", timing="none"), pd.DataFrame)


def test_the_ten_line_example_reproduces_greendm(tmp_path: Path) -> None:
    import runpy

    ns = runpy.run_path(str(REPO / "examples" / "reproduce_greendm.py"), run_name="example")
    r = ns["run"](scale=0.05, out=str(tmp_path))
    assert r.target == "greendm" and len(r.findings) > 0
    assert (tmp_path / "reproduce-greendm.json").exists() and list(tmp_path.glob("*.png"))


def test_progress_bars_show_in_a_jupyter_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    from tierwise import _progress

    assert not _progress.enabled(None), "pytest's stderr is no terminal"

    class ZMQInteractiveShell:  # the kernel's shell class, by name
        pass

    fake = types.ModuleType("IPython")
    fake.get_ipython = lambda: ZMQInteractiveShell()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "IPython", fake)
    assert _progress.enabled(None) and not _progress.enabled(False)
    fake.get_ipython = lambda: None  # type: ignore[attr-defined]
    assert not _progress.enabled(None), "IPython imported outside a kernel"
