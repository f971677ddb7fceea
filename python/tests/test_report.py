"""The HTML report opened in a real headless Chromium: a screenshot that is not blank, and a
DOM that holds every table and chart the results call for."""

from __future__ import annotations

import re
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

import tierwise
from conftest import MSR, SYSTOR, TPCC, run_cli


def png_pixels(path: Path) -> tuple[int, int, list[bytes]]:
    """Decodes an 8-bit RGB/RGBA PNG (what Chromium writes) into rows of pixel bytes."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6), (depth, colour)
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, rows


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory, cli: Path) -> Path:
    d = tmp_path_factory.mktemp("results")
    run_cli(cli, "compare", str(MSR), "--arch=cache:mode=write-back", "--arch=greendm-tiering", "--ssd", "10%,25%", "--out", str(d / "compare"))
    run_cli(cli, "mrc", str(SYSTOR), "--points", "16", "--out", str(d / "mrc"))
    run_cli(cli, "reproduce", "hycache", "--scale", "0.05", "--out", str(d / "repro"))
    run_cli(cli, "sim", str(TPCC), "--arch", "bcache-like", "--ssd", "10%", "--json", str(d / "sim.json"))
    tierwise.sweep([MSR, TPCC], ["cache", "dm-cache-smq-like"], ["10%", "25%"], out=d / "sweep", executor="processes", model={"timing": "closed:32"})
    out = d / "report.html"
    tierwise.report([d / "compare", d / "mrc" / "mrc.json", d / "repro" / "reproduce-hycache.json", d / "sim.json", d / "sweep"], out, title="Workbench test")
    return out


def test_the_report_is_self_contained(report: Path) -> None:
    html = report.read_text()
    assert "<script" not in html and "<link" not in html and "@import" not in html
    # The only URL is the SVG namespace (an identifier, never fetched).
    assert set(re.findall(r"https?://[^\s\"']+", html)) <= {"http://www.w3.org/2000/svg"}
    assert 'name="viewport"' in html


def test_chromium_renders_every_table_and_chart(report: Path, browser: str, tmp_path: Path) -> None:
    flags = [browser, "--no-sandbox", "--headless", "--disable-gpu", "--hide-scrollbars"]
    dom = subprocess.run(flags + ["--dump-dom", report.as_uri()], capture_output=True, text=True, timeout=120).stdout
    sections = re.findall(r'<section id="([^"]+)"><h2>([^<]+)</h2>', dom)
    titles = [t for _, t in sections]
    assert titles[0] == "Provenance"
    assert sum(t.startswith("Comparison") for t in titles) == 2  # compare.json and compare-latency.json
    assert sum(t.startswith("Sweep") for t in titles) == 2  # one per trace
    assert any(t.startswith("Miss-ratio curve") for t in titles)
    assert any(t.startswith("Reproduction — HyCache") for t in titles)
    assert any(t.startswith("Simulation — bcache-like") for t in titles)
    by_section = {sid: dom.split(f'<section id="{sid}">')[1].split("</section>")[0] for sid, _ in sections}
    for sid, title in sections:
        body = by_section[sid]
        assert "<table" in body, f"{title}: no table"
        charts = body.count("<svg")
        if title.startswith(("Comparison", "Sweep")):
            closed = "closed(32)" in body
            # throughput (closed loop), p50/p95/p99, reads from SSD, SSD writes, energy, and cost
            # per IOPS only in closed loop (open loop's IOPS is the offered load)
            assert charts == (8 if closed else 6), (title, charts)
            assert "download=" in body and "data:text/csv;base64," in body
        elif title.startswith("Miss-ratio"):
            assert charts == 1
        elif title.startswith("Reproduction"):
            assert charts == 2 and ("held" in body)
        elif title.startswith("Trace"):
            # reuse distance, popularity, op × size
            assert charts == 3 and "Zipf exponent" in body, title
    assert {"Trace — msr_hm_0.excerpt1000.csv", "Trace — tpcc_unverified.mqsim_ascii.trace"} <= set(titles)
    for needle in ["Traces", "Architectures and knobs", "device presets", "hdd wd5000aaks", "seed 42", "msr_hm_0.excerpt1000.csv"]:
        assert needle in by_section["provenance"], needle
    # Every series of a chart has a legend entry: the compare chart names both architectures.
    assert "greendm-tiering" in dom and "cache:mode=write-back" in dom


@pytest.mark.parametrize("width", [1280, 390])
def test_the_screenshot_is_not_blank(report: Path, browser: str, tmp_path: Path, width: int) -> None:
    shot = tmp_path / f"shot-{width}.png"
    subprocess.run(
        [browser, "--no-sandbox", "--headless", "--disable-gpu", "--hide-scrollbars", f"--window-size={width},2400", f"--screenshot={shot}", report.as_uri()],
        capture_output=True,
        timeout=120,
        check=True,
    )
    w, h, rows = png_pixels(shot)
    assert (w, h) == (width, 2400)
    bpp = len(rows[0]) // w
    pixels = [r[i : i + 3] for r in rows[::8] for i in range(0, len(r), bpp * 4)]
    ink = sum(p != b"\xff\xff\xff" for p in pixels) / len(pixels)
    colours = len(set(pixels))
    assert ink > 0.03 and colours > 20, (ink, colours)


def test_the_report_takes_the_packages_dataframes(tmp_path: Path) -> None:
    c = tierwise.compare(MSR, archs=["cache:mode=write-back"], ssd=["10%"], timing="closed:8")
    s = tierwise.sim(TPCC, "bcache-like", "10%")
    m = tierwise.mrc(SYSTOR, points=8)
    sw = tierwise.sweep([MSR], ["cache"], ["10%"], out=tmp_path / "sweep", executor="processes", progress=False)
    out = tierwise.report([c, s, m, sw], tmp_path / "r.html")
    page = out.read_text()
    for section in ["Comparison — msr_hm_0", "Simulation — bcache-like", "Miss-ratio curve — systor17", "Sweep — msr_hm_0"]:
        assert section in page, section
    with pytest.raises(TypeError, match="result 1: a dict without a tierwise result"):
        tierwise.report([c, {"x": 1}], tmp_path / "r2.html")
