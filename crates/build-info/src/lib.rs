//! Which build of tierwise this is. Results record it, and sweeps key their stored results by
//! it, so a result computed by other code is never taken for this code's.

/// The crate version (the same for every commit between releases: not enough to tell builds
/// apart).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// SHA-256 (hex) of every source file that makes the binaries, with its path.
pub const SOURCES_SHA256: &str = env!("TIERWISE_SOURCES_SHA256");

/// The git commit the sources were built from, empty outside a git checkout.
pub const GIT_COMMIT: &str = env!("TIERWISE_GIT_COMMIT");

/// Whether the checkout had uncommitted changes to the sources.
pub const GIT_MODIFIED: bool = const_str_eq(env!("TIERWISE_GIT_MODIFIED"), "true");

const fn const_str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The short form results carry: `0.1.0+src.1a2b3c4d5e6f (commit 0123456789ab, modified)`.
/// The source hash decides identity; the commit says where to find the code.
pub fn describe() -> String {
    let src = &SOURCES_SHA256[..SOURCES_SHA256.len().min(12)];
    let commit = match (GIT_COMMIT.get(..12), GIT_MODIFIED) {
        (Some(c), true) => format!(" (commit {c}, modified)"),
        (Some(c), false) => format!(" (commit {c})"),
        (None, _) => " (no git commit)".to_string(),
    };
    format!("{VERSION}+src.{src}{commit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stamp_names_the_sources_hash() {
        assert_eq!(SOURCES_SHA256.len(), 64);
        assert!(SOURCES_SHA256.bytes().all(|b| b.is_ascii_hexdigit()));
        let d = describe();
        assert!(d.starts_with(&format!("{VERSION}+src.{}", &SOURCES_SHA256[..12])), "{d}");
    }
}
