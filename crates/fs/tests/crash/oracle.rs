//! What a POSIX file system with ext4 `data=ordered` semantics guarantees after a crash, as
//! checks on the view a remount gives:
//! - `kill -9` (every call the daemon made reached the tier file systems): the view is exactly
//!   the model after the operations acknowledged, or after the one in flight too — every
//!   operation is atomic and nothing acknowledged is lost.
//! - A power cut: what was synced is there (a file fsynced holds its content; the names of a
//!   directory fsynced are there, or gone); a rename is atomic (the new name holds the old
//!   content or the new, never nothing, and the file is never at both names); link counts are
//!   right; every file holds a content it had at some point; nothing tierwise keeps for
//!   itself shows.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::tree::{Seen, View};
use super::workload::Op;

/// The model: the reference directory's view before any operation and after each.
pub struct History {
    pub ops: Vec<Op>,
    /// `states[i]`: after `i` operations.
    pub states: Vec<View>,
}

/// The names an operation touches (so that what was durable about them before may change).
fn touches(op: Op, p: &Path) -> bool {
    let under = |x: &str| p.starts_with(x) || Path::new(x).starts_with(p);
    match op {
        Op::Create(f)
        | Op::Overwrite(f)
        | Op::Append(f)
        | Op::Sparse(f)
        | Op::Truncate(f, _)
        | Op::Unlink(f)
        | Op::Mkdir(f)
        | Op::Rmdir(f)
        | Op::Setxattr(f) => under(f),
        Op::Symlink(s, _) => under(s),
        Op::Rename(a, b) | Op::Link(a, b) => under(a) || under(b),
        Op::Fsync(_) | Op::Fdatasync(_) | Op::Fsyncdir(_) | Op::Read(_) => false,
    }
}

fn content(v: &View, p: &Path) -> Option<Vec<u8>> {
    match v.names.get(p) {
        Some(Seen::File { content, .. }) => Some(content.clone()),
        _ => None,
    }
}

fn kind(s: &Seen) -> &'static str {
    match s {
        Seen::File { .. } => "file",
        Seen::Dir { .. } => "dir",
        Seen::Symlink { .. } => "symlink",
    }
}

/// The first difference between two views, for messages.
pub fn diff(got: &View, want: &View) -> String {
    for (p, w) in &want.names {
        match got.names.get(p) {
            None => return format!("{} is missing (want a {})", p.display(), kind(w)),
            Some(g) if g != w => {
                return match (g, w) {
                    (Seen::File { content: a, nlink: na, .. }, Seen::File { content: b, nlink: nb, .. }) => format!(
                        "{} differs: {} bytes (nlink {na}), want {} bytes (nlink {nb}){}",
                        p.display(),
                        a.len(),
                        b.len(),
                        if a == b { " (same bytes; mode or attributes differ)" } else { "" }
                    ),
                    _ => format!("{} is a {}, want a {}", p.display(), kind(g), kind(w)),
                };
            }
            _ => {}
        }
    }
    for p in got.names.keys() {
        if !want.names.contains_key(p) {
            return format!("{} is there and should not be", p.display());
        }
    }
    if got.links != want.links {
        return format!("hard links {:?}, want {:?}", got.links, want.links);
    }
    "equal".into()
}

/// Checks that hold after any crash (`done` operations acknowledged, `upto` begun; `power`: a
/// power cut rather than a kill).
fn sane(view: &View, hist: &History, done: usize, upto: usize, power: bool) -> Result<(), String> {
    for (p, s) in &view.names {
        if p.iter().any(|c| c.to_string_lossy().starts_with(".tierwise-")) {
            return Err(format!("a reserved name shows: {}", p.display()));
        }
        if let Seen::File { nlink, .. } = s {
            let group = view.links.iter().find(|g| g.contains(p)).map_or(1, BTreeSet::len) as u64;
            if *nlink != group {
                return Err(format!("{} reports {nlink} links and has {group} names", p.display()));
            }
        }
    }
    let history: BTreeSet<&Vec<u8>> = hist.states[..=upto].iter().flat_map(|s| s.contents().map(|(_, c)| c)).collect();
    for (p, c) in view.contents() {
        // A write in flight may be torn; so may any write after a power cut that it was not
        // synced for (ext4 keeps what reached the disk of an unsynced write).
        let torn_here = if power { (0..upto).any(|j| torn(hist, j, c)) } else { upto > done && torn(hist, done, c) };
        if !c.is_empty() && !history.contains(c) && !torn_here {
            return Err(format!("{} holds {} bytes it never held", p.display(), c.len()));
        }
    }
    Ok(())
}

/// Where operation `op` writes, for a file of `size` bytes before it: (offset, length).
fn write_range(op: Op, size: usize) -> Option<(&'static str, usize, usize)> {
    match op {
        Op::Overwrite(f) => Some((f, 1000, 3000)),
        Op::Append(f) => Some((f, size, 2000)),
        Op::Sparse(f) => Some((f, size + 20_000, 100)),
        _ => None,
    }
}

/// Whether `c` is what the write in flight (operation `done`) may leave at its file: the old
/// content with a prefix of the new bytes written. The kernel sends one write(2) as several
/// FUSE requests (an append that starts mid-page: the rest of that page first), so a crash of
/// the daemon between two of them tears the write, as a power cut can on any file system.
/// (Wherever the file is now: a later rename may have moved it, or its directory.)
fn torn(hist: &History, done: usize, c: &[u8]) -> bool {
    let Some(&op) = hist.ops.get(done) else { return false };
    let Some((f, _, _)) = write_range(op, 0) else { return false };
    let (Some(old), Some(new)) =
        (content(&hist.states[done], Path::new(f)), content(&hist.states[done + 1], Path::new(f)))
    else {
        return false;
    };
    let Some((_, off, len)) = write_range(op, old.len()) else { return false };
    if c == old.as_slice() {
        return true;
    }
    // The new bytes up to `off + k`, then the old ones.
    let common = c.iter().zip(&new).take_while(|(a, b)| a == b).count();
    (1..=len).any(|k| {
        let cut = off + k;
        cut <= common && c.len() == old.len().max(cut) && c.get(cut..) == old.get(cut..).or(Some(&[]))
    })
}

/// Whether `p` is untouched by the operations `from..upto`.
fn untouched(hist: &History, p: &Path, from: usize, upto: usize) -> bool {
    hist.ops[from..upto].iter().all(|&op| !touches(op, p))
}

/// A kill -9 after `done` operations (and maybe during the next).
pub fn check_kill(view: &View, hist: &History, done: usize, in_flight: bool) -> Result<(), String> {
    sane(view, hist, done, (done + usize::from(in_flight)).min(hist.ops.len()), false)?;
    if *view == hist.states[done] || (in_flight && *view == hist.states[done + 1]) {
        return Ok(());
    }
    if in_flight {
        // A write torn between two of its requests: the rest as after it.
        let mut v = view.clone();
        for (p, s) in v.names.iter_mut() {
            if let Seen::File { content, .. } = s
                && torn(hist, done, content)
                && let Some(new) = super::oracle::content(&hist.states[done + 1], p)
            {
                *content = new;
            }
        }
        if v == hist.states[done + 1] {
            return Ok(());
        }
    }
    let next = if in_flight {
        format!("; against after {} ops: {}", done + 1, diff(view, &hist.states[done + 1]))
    } else {
        String::new()
    };
    Err(format!("the view is not the state after {done} ops: {}{next}", diff(view, &hist.states[done])))
}

/// A power cut after `done` operations (and maybe during the next).
pub fn check_power(view: &View, hist: &History, done: usize, in_flight: bool) -> Result<(), String> {
    let upto = (done + usize::from(in_flight)).min(hist.ops.len());
    sane(view, hist, done, upto, true)?;
    // What the setup made durable, and each fsync and fsyncdir since: (op index, path, content
    // or None for "the name exists").
    let mut facts: Vec<(usize, PathBuf, Option<Vec<u8>>)> = Vec::new();
    for (p, s) in &hist.states[0].names {
        let c = match s {
            Seen::File { content, .. } => Some(content.clone()),
            _ => None,
        };
        facts.push((0, p.clone(), c));
    }
    for (j, &op) in hist.ops[..done].iter().enumerate() {
        match op {
            Op::Fsync(f) | Op::Fdatasync(f) => {
                if let Some(c) = content(&hist.states[j + 1], Path::new(f)) {
                    facts.push((j + 1, PathBuf::from(f), Some(c)));
                }
            }
            Op::Fsyncdir(d) => {
                for p in hist.states[j + 1].names.keys().filter(|p| p.parent() == Some(Path::new(d))) {
                    facts.push((j + 1, p.clone(), None));
                }
            }
            _ => {}
        }
    }
    for (from, p, want) in &facts {
        if !untouched(hist, p, *from, upto) {
            continue;
        }
        match (view.names.get(p), want) {
            (None, _) => return Err(format!("{} was durable (op {from}) and is gone", p.display())),
            (Some(Seen::File { content, .. }), Some(w)) if content != w => {
                return Err(format!(
                    "{} was synced with {} bytes (op {from}) and holds {}",
                    p.display(),
                    w.len(),
                    content.len()
                ));
            }
            _ => {}
        }
    }
    // Renames are atomic.
    for (j, &op) in hist.ops[..upto].iter().enumerate() {
        let Op::Rename(a, b) = op else { continue };
        let (a, b) = (Path::new(a), Path::new(b));
        let before = &hist.states[j];
        if !untouched(hist, a, j + 1, upto) || !untouched(hist, b, j + 1, upto) || j + 1 >= hist.states.len() {
            continue;
        }
        if hist.states[j + 1] == *before {
            continue; // it failed
        }
        let durable = |p: &Path| facts.iter().any(|(f, q, _)| *f <= j && q == p && untouched(hist, p, *f, j));
        match (content(before, a), content(before, b)) {
            (Some(src), old) => {
                let (at_a, at_b) = (content(view, a), content(view, b));
                if durable(b) && at_b.is_none() {
                    return Err(format!(
                        "rename {} -> {}: the target was durable and is gone",
                        a.display(),
                        b.display()
                    ));
                }
                // The target's own last content need not have been durable: after a power cut
                // it may hold what an earlier unsynced write of it left (torn) or an earlier
                // content, as the checks of every file allow — its old content, as far as the
                // disk had it, never a third file's.
                let unsynced_old = |got: &Vec<u8>| {
                    !durable(b)
                        && ((0..j).any(|k| torn(hist, k, got))
                            || hist.states[..=j].iter().any(|s| content(s, b).as_ref() == Some(got)))
                };
                if let Some(got) = &at_b
                    && Some(got) != old.as_ref()
                    && *got != src
                    && !unsynced_old(got)
                {
                    return Err(format!("rename {} -> {}: the target holds neither file", a.display(), b.display()));
                }
                if durable(a) && at_a.as_ref() != Some(&src) && at_b.as_ref() != Some(&src) {
                    return Err(format!("rename {} -> {}: the file is at neither name", a.display(), b.display()));
                }
                let linked = view.links.iter().any(|g| g.contains(a) && g.contains(b));
                if old.as_ref() != Some(&src) && at_a.as_ref() == Some(&src) && at_b.as_ref() == Some(&src) && !linked {
                    return Err(format!("rename {} -> {}: the file is at both names", a.display(), b.display()));
                }
            }
            (None, _) if matches!(before.names.get(a), Some(Seen::Dir { .. })) => {
                let (has_a, has_b) = (view.names.contains_key(a), view.names.contains_key(b));
                if has_a && has_b && !before.names.contains_key(b) {
                    return Err(format!("directory rename {} -> {}: both names are there", a.display(), b.display()));
                }
                if durable(a) && !has_a && !has_b {
                    return Err(format!("directory rename {} -> {}: neither name is there", a.display(), b.display()));
                }
                // The subtree moved whole: no entry of it under both names.
                for (p, _) in before.names.iter().filter(|(p, _)| p.starts_with(a) && *p != a) {
                    let moved = b.join(p.strip_prefix(a).unwrap_or(p));
                    if view.names.contains_key(p) && view.names.contains_key(&moved) {
                        return Err(format!("directory rename: {} is under both names", p.display()));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}
