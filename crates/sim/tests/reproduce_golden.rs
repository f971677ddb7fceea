//! Golden outputs of `tierwise reproduce` at a small scale: the tables and findings are pinned so
//! that a change in behaviour shows up as a diff here, not as silent drift. To accept a change
//! on purpose, run with `TIERWISE_BLESS=1` and commit the updated files (say why in the commit).

use std::path::{Path, PathBuf};

use tierwise_sim::reproduce::{ReproOptions, reproduce};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn check(target: &str, scale: f64) {
    let opts = ReproOptions { scale, traces_dir: root().join("data/traces"), seed: 42, threads: 2 };
    let r = reproduce(target, &opts, &|_, _, _| {}).expect("the reproduction runs");
    let pinned = serde_json::json!({ "scale": scale, "tables": r.tables, "findings": r.findings });
    let got = serde_json::to_string_pretty(&pinned).expect("serialisable") + "\n";
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/golden/reproduce-{target}.json"));
    if std::env::var_os("TIERWISE_BLESS").is_some() {
        std::fs::write(&path, &got).expect("golden file written");
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with TIERWISE_BLESS=1 to create it)", path.display()));
    if got != want {
        let diff: Vec<String> = want
            .lines()
            .zip(got.lines())
            .enumerate()
            .filter(|(_, (a, b))| a != b)
            .take(20)
            .map(|(i, (a, b))| format!("line {}:\n  pinned: {a}\n  now:    {b}", i + 1))
            .collect();
        panic!(
            "reproduce {target} drifted from {} ({} vs {} lines); first differences:\n{}\n\
             If the change is intended, rerun with TIERWISE_BLESS=1 and commit the file.",
            path.display(),
            want.lines().count(),
            got.lines().count(),
            diff.join("\n")
        );
    }
}

#[test]
fn greendm_golden() {
    check("greendm", 0.02);
}

#[test]
fn otf_ast_golden() {
    check("otf-ast", 0.05);
}

#[test]
fn hca_golden() {
    check("hca", 0.02);
}

#[test]
fn loris_golden() {
    check("loris", 0.02);
}

#[test]
fn hycache_golden() {
    check("hycache", 0.02);
}

#[test]
fn unknown_targets_and_scales_are_refused() {
    let opts = ReproOptions { scale: 0.1, traces_dir: root().join("data/traces"), seed: 1, threads: 1 };
    let e = reproduce("nfs", &opts, &|_, _, _| {}).unwrap_err().to_string();
    assert!(e.contains("greendm, otf-ast, hca, loris, hycache"), "{e}");
    let bad = ReproOptions { scale: 0.0, ..opts };
    assert!(reproduce("greendm", &bad, &|_, _, _| {}).unwrap_err().to_string().contains("--scale"));
}
