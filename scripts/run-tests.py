#!/usr/bin/env python3
"""Runs the workspace's Rust tests: each test in a process of its own, several at once, each
under a deadline, each in its own temporary directories, torn down after it by the shared
teardown (crates/testkit/src/teardown.rs).

    scripts/run-tests.py [--profile ci] [--jobs N] [--deadline 120] [FILTER...]

FILTER keeps the tests whose `package/target::test` name contains it. A test past its deadline
is torn down (its FUSE connections aborted, its processes killed -9, its mounts detached) and
fails, naming itself; the run goes on. After every test, whatever it left under its
directories is torn down and reported. The run ends with the failures, the time per test
binary and the slowest tests; `--save-times` records the times (scripts/test-times.json) so
that the next run starts the longest tests first.

Why not `cargo test`: it runs test binaries one after another with no deadline, so one hung
test hangs the suite; cargo-nextest does what this does, but compiling it costs minutes on a
fresh 2-core machine.
"""

import argparse
import ctypes
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TIMES = ROOT / "scripts" / "test-times.json"

# Tests that load the machine on their own (races sized for 2 cores, timed trials): they run
# with this many slots of the --jobs budget, so fewer others run beside them.
WEIGHTS = [
    (re.compile(r"^tierwise-fs/concurrent::"), 99),
    (re.compile(r"^tierwise/serve_throttled::"), 2),
    (re.compile(r"^tierwise-calibrate/targets::"), 99),
]


_libc = ctypes.CDLL(None, use_errno=True)


def die_with_runner():
    """In the child before exec: SIGKILL when the runner dies (PR_SET_PDEATHSIG), so a killed
    run leaves no test process behind (daemons that detach are the teardown's)."""
    _libc.prctl(1, signal.SIGKILL, 0, 0, 0)


def weight(name, jobs):
    for pattern, w in WEIGHTS:
        if pattern.search(name):
            return min(w, jobs)
    return 1


def build(profile):
    """Compiles the test binaries; returns [(label, executable, package dir)]."""
    cmd = ["cargo", "test", "--workspace", "--profile", profile, "--locked", "--no-run",
           "--message-format=json-render-diagnostics"]
    out = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    if out.returncode != 0:
        sys.exit(f"error: `{' '.join(cmd)}` failed")
    bins = []
    for line in out.stdout.splitlines():
        try:
            m = json.loads(line)
        except json.JSONDecodeError:
            continue
        if m.get("reason") != "compiler-artifact" or not m.get("profile", {}).get("test") or not m.get("executable"):
            continue
        manifest = Path(m["manifest_path"])
        pkg_name = tomllib.loads(manifest.read_text())["package"]["name"]
        target = m["target"]
        kind = target["kind"][0]
        label = f"{pkg_name}/{target['name'] if kind in ('test', 'bench', 'example') else kind + ':' + target['name']}"
        bins.append((label, m["executable"], str(manifest.parent), pkg_name))
    return bins


def list_tests(exe, cwd, ignored):
    out = subprocess.run([exe, "--list", "--format", "terse"] + (["--ignored"] if ignored else []), cwd=cwd, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, timeout=60)
    return [l[: -len(": test")] for l in out.stdout.splitlines() if l.endswith(": test")]


def teardown(tool, dirs, check=False):
    args = [tool] + (["--check"] if check else []) + [str(d) for d in dirs]
    try:
        r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
        return r.returncode, r.stdout.strip()
    except subprocess.TimeoutExpired:
        return 1, "the teardown itself took over 60 s"


def tail(path, lines=60):
    try:
        text = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return "(no output)"
    return "\n".join(text[-lines:])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("filters", nargs="*")
    ap.add_argument("--profile", default="ci")
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("TIERWISE_TEST_JOBS", 2 * (os.cpu_count() or 2))))
    ap.add_argument("--deadline", type=float, default=float(os.environ.get("TIERWISE_TEST_DEADLINE", 120)))
    ap.add_argument("--root", default=os.environ.get("TIERWISE_TEST_ROOT", "/tmp/tierwise-tests"))
    ap.add_argument("--shm-root", default=os.environ.get("TIERWISE_TEST_SHM_ROOT", "/dev/shm/tierwise-tests"))
    ap.add_argument("--results", default=str(ROOT / "target" / "test-results.json"),
                    help="where each test's status and time go (JSON)")
    ap.add_argument("--ignored", action="store_true", help="run the ignored tests (only)")
    ap.add_argument("--save-times", action="store_true", help=f"record each test's time in {TIMES.relative_to(ROOT)}")
    args = ap.parse_args()

    t_build = time.monotonic()
    bins = build(args.profile)
    tool = ROOT / "target" / args.profile / "tierwise-teardown"
    if not tool.exists():
        subprocess.run(["cargo", "build", "--profile", args.profile, "--locked", "-q", "-p", "tierwise-testkit"], cwd=ROOT, check=True)
    tests = []
    for label, exe, cwd, pkg in bins:
        for name in list_tests(exe, cwd, args.ignored):
            full = f"{label}::{name}"
            if args.filters and not any(f in full for f in args.filters):
                continue
            tests.append({"name": full, "exe": exe, "test": name, "cwd": cwd, "pkg": pkg})
    build_s = time.monotonic() - t_build

    known = {}
    if TIMES.exists():
        known = json.loads(TIMES.read_text())
    # Longest first (known times; unknown ones count as 5 s), so the run does not end waiting on one.
    tests.sort(key=lambda t: -known.get(t["name"], 5.0))

    root, shm = Path(args.root), Path(args.shm_root)
    for d in (root, shm):
        if d.exists():
            code, said = teardown(tool, [d])
            if said:
                print(f"left by an earlier run, removed:\n{said}")
            shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    logs = root / "logs"
    logs.mkdir()

    print(f"{len(tests)} tests in {len(bins)} binaries, {args.jobs} at once, {args.deadline:.0f} s each at most", flush=True)
    pending = list(enumerate(tests))
    running = {}
    results = []
    free = args.jobs
    t0 = last_progress = time.monotonic()
    while pending or running:
        while pending:
            i, t = pending[0]
            w = weight(t["name"], args.jobs)
            if w > free:
                break
            pending.pop(0)
            dirs = [root / f"t{i}", shm / f"t{i}"]
            for d in dirs:
                d.mkdir()
            env = dict(os.environ, TMPDIR=str(dirs[0]), TIERWISE_TEST_SHM=str(dirs[1]), RUST_BACKTRACE="1",
                       CARGO_MANIFEST_DIR=t["cwd"], CARGO_PKG_NAME=t["pkg"], TIERWISE_TEST_DEADLINE=str(args.deadline))
            log = logs / f"t{i}.log"
            with open(log, "wb") as out:
                p = subprocess.Popen([t["exe"], "--exact", t["test"], "--nocapture", "--test-threads", "1"]
                                     + (["--ignored"] if args.ignored else []),
                                     cwd=t["cwd"], env=env, stdout=out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True,
                                     preexec_fn=die_with_runner)
            running[p.pid] = (p, t, dirs, log, time.monotonic(), w)
            free -= w
        time.sleep(0.05)
        now = time.monotonic()
        for pid, (p, t, dirs, log, start, w) in list(running.items()):
            code = p.poll()
            timed_out = code is None and now - start > args.deadline
            if code is None and not timed_out:
                continue
            notes = []
            if timed_out:
                # Abort its mounts first: a test stuck in a syscall on a dead mount cannot die before.
                _, said = teardown(tool, dirs)
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    notes.append("the test process did not die within 10 s of kill -9")
                if said:
                    notes.append("torn down at the deadline:\n" + said)
            else:
                # The test's own process group (helpers it did not wait for) dies with it.
                try:
                    os.killpg(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            # Whatever it left: a daemon still saving its state gets a moment to finish.
            for _ in range(40):
                if teardown(tool, dirs, check=True)[0] == 0:
                    break
                time.sleep(0.05)
            _, said = teardown(tool, dirs)
            if said:
                notes.append("left behind, torn down:\n" + said)
            for d in dirs:
                subprocess.run(["rm", "-rf", "--one-file-system", str(d)], timeout=120, check=False)
            secs = now - start
            status = "TIMEOUT" if timed_out else ("ok" if code == 0 else "FAILED")
            results.append({"name": t["name"], "status": status, "secs": round(secs, 2), "log": str(log), "notes": notes})
            del running[pid]
            free += w
            if status != "ok":
                what = f"past its {args.deadline:.0f} s deadline" if timed_out else f"exit {code}"
                print(f"{status} {t['name']} ({what}, {secs:.1f} s)\n{tail(log)}", flush=True)
            for n in notes:
                print(f"note on {t['name']}: {n}", flush=True)
        if now - last_progress > 30:
            last_progress = now
            names = ", ".join(sorted(r[1]["name"] for r in running.values()))[:300]
            print(f"[{now - t0:5.0f} s] {len(results)}/{len(tests)} done; running: {names}", flush=True)

    wall = time.monotonic() - t0
    by_bin = {}
    for r in results:
        b = r["name"].split("::")[0]
        by_bin[b] = by_bin.get(b, 0) + r["secs"]
    print("\ntest time per binary (sum of its tests' times, s):")
    for b, s in sorted(by_bin.items(), key=lambda x: -x[1]):
        print(f"  {s:8.1f}  {b}")
    print("\nslowest tests (s):")
    for r in sorted(results, key=lambda r: -r["secs"])[:15]:
        print(f"  {r['secs']:8.1f}  {r['name']}")
    bad = [r for r in results if r["status"] != "ok"]
    Path(args.results).parent.mkdir(parents=True, exist_ok=True)
    Path(args.results).write_text(json.dumps(results, indent=1))
    if args.save_times:
        known.update({r["name"]: r["secs"] for r in results if r["status"] == "ok"})
        TIMES.write_text(json.dumps(dict(sorted(known.items())), indent=0) + "\n")
    print(f"\n{len(results) - len(bad)} passed, {len(bad)} failed of {len(results)}; "
          f"build {build_s:.0f} s, tests {wall:.0f} s wall")
    for r in bad:
        print(f"  {r['status']}: {r['name']}  (log: {r['log']})")
    shutil.rmtree(shm, ignore_errors=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
