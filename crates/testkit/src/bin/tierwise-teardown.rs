//! The shared test teardown for scripts and the test runner (`tierwise_testkit::teardown`).
//!
//! ```text
//! tierwise-teardown [--check] [--mount MNT]... [--pid PID]... [DIR]...
//! ```
//! Without `--check`: aborts, kills, unmounts and detaches what the directories, mounts and
//! processes hold, printing what it did; exits 1 when a step failed or missed its deadline.
//! With `--check`: changes nothing, prints what is left, exits 1 when anything is.

use std::path::PathBuf;
use std::process::ExitCode;

use tierwise_testkit::teardown::{Targets, leftovers, teardown};

fn main() -> ExitCode {
    let mut targets = Targets::default();
    let mut check = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--check" => check = true,
            "--mount" | "--pid" => {
                let Some(v) = args.next() else {
                    eprintln!("tierwise-teardown: {a} needs a value");
                    return ExitCode::from(2);
                };
                if a == "--mount" {
                    targets.mounts.push(PathBuf::from(v));
                } else if let Ok(pid) = v.parse() {
                    targets.pids.push(pid);
                } else {
                    eprintln!("tierwise-teardown: --pid takes a process id, not {v:?}");
                    return ExitCode::from(2);
                }
            }
            "-h" | "--help" => {
                println!("usage: tierwise-teardown [--check] [--mount MNT]... [--pid PID]... [DIR]...");
                return ExitCode::SUCCESS;
            }
            s if s.starts_with('-') => {
                eprintln!("tierwise-teardown: unknown option {s} (allowed: --check, --mount MNT, --pid PID)");
                return ExitCode::from(2);
            }
            _ => targets.dirs.push(PathBuf::from(a)),
        }
    }
    if check {
        let left = leftovers(&targets);
        print!("{left}");
        return if left.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE };
    }
    let report = teardown(&targets);
    print!("{report}");
    if report.problems.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}
