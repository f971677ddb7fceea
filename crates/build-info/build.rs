//! Computes the build stamp: a SHA-256 of every file that decides what the binaries compute
//! (each workspace crate's `Cargo.toml` and `src/`, `Cargo.lock`), and the git commit when the
//! sources are a git checkout. The hash is of contents, not of the commit, so uncommitted
//! changes and builds from a tarball get their own stamp too.

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => files_under(&p, out),
            Ok(t) if t.is_file() => out.push(p),
            _ => {}
        }
    }
}

fn git(root: &Path, args: &[&str]) -> Option<String> {
    let o = Command::new("git").arg("-C").arg(root).args(args).output().ok()?;
    o.status.success().then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let root = manifest.join("../..");
    let mut members: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .map(|d| d.flatten().map(|e| e.path()).filter(|p| p.join("Cargo.toml").is_file()).collect())
        .unwrap_or_default();
    members.push(root.join("python"));
    let mut files = vec![root.join("Cargo.lock"), root.join("Cargo.toml")];
    for m in &members {
        files.push(m.join("Cargo.toml"));
        files_under(&m.join("src"), &mut files);
        println!("cargo::rerun-if-changed={}", m.join("src").display());
        println!("cargo::rerun-if-changed={}", m.join("Cargo.toml").display());
    }
    println!("cargo::rerun-if-changed={}", root.join("Cargo.lock").display());
    let mut named: Vec<(String, PathBuf)> = files
        .into_iter()
        .filter(|p| p.is_file())
        .map(|p| (p.strip_prefix(&root).unwrap_or(&p).to_string_lossy().replace('\\', "/"), p))
        .collect();
    named.sort();
    let mut h = Sha256::new();
    for (name, path) in &named {
        let Ok(bytes) = std::fs::read(path) else { continue };
        h.update(name.as_bytes());
        h.update([0]);
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(&bytes);
    }
    let sources: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    println!("cargo::rustc-env=TIERWISE_SOURCES_SHA256={sources}");
    println!("cargo::rustc-env=TIERWISE_SOURCE_FILES={}", named.len());

    let commit = git(&root, &["rev-parse", "HEAD"]).unwrap_or_default();
    let modified = !commit.is_empty()
        && git(&root, &["status", "--porcelain", "--untracked-files=no", "--", "crates", "python", "Cargo.lock"])
            .is_some_and(|s| !s.is_empty());
    println!("cargo::rustc-env=TIERWISE_GIT_COMMIT={commit}");
    println!("cargo::rustc-env=TIERWISE_GIT_MODIFIED={modified}");
    if let Some(git_dir) = git(&root, &["rev-parse", "--absolute-git-dir"]) {
        // The commit changes on commit and checkout even when no source does.
        println!("cargo::rerun-if-changed={git_dir}/HEAD");
        println!("cargo::rerun-if-changed={git_dir}/index");
    }
}
