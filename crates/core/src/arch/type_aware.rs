//! Loris's type-aware policy: one file-level architecture per volume (a directory subtree), all
//! sharing one SSD and one collector, e.g. `/web` on-demand caching and `/files` Dynamic Hot-DST.
//!
//! Spec: `type-aware:volumes=/web=on-demand-caching;/files=dynamic-hot-dst,default=dynamic-hot-dst`.
//! The front end maps each path to a volume with [`file_volumes`]: volume `i + 1` is the `i`-th
//! listed prefix (the longest match wins; prefixes may not overlap), volume 0 everything else.

use super::file_common::{FileArch, FileArchKind, FilePolicy};
use crate::params::{ConfigError, ParamSpec, Params};

/// Marker for the type-aware architecture.
#[derive(Debug)]
pub struct TypeAwareKind;

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "volumes",
        default: "",
        help: "PREFIX=ARCH;PREFIX=ARCH... (a file-level architecture per directory prefix)",
    },
    ParamSpec { name: "default", default: "dynamic-hot-dst", help: "architecture for paths outside every volume" },
];

/// The file-level policies a volume may have: every registered one that runs per volume.
pub fn volume_policies() -> impl Iterator<Item = &'static FilePolicy> {
    super::ARCHITECTURES.iter().filter_map(|a| a.file_policy).filter(|p| p.per_volume)
}

fn mode_named(p: &Params, name: &str) -> Result<&'static FilePolicy, ConfigError> {
    volume_policies().find(|m| m.name == name).ok_or_else(|| {
        let allowed: Vec<&str> = volume_policies().map(|m| m.name).collect();
        p.inconsistent(format!("unknown volume architecture `{name}`; allowed: {}", allowed.join(", ")))
    })
}

/// Parses the `volumes` knob into (prefix, architecture name) pairs, checking that every prefix
/// is an absolute directory path and that no two overlap.
pub fn parse_volumes(p: &Params, spec: &str) -> Result<Vec<(String, String)>, ConfigError> {
    let mut out: Vec<(String, String)> = Vec::new();
    for part in spec.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        let Some((prefix, arch)) = part.split_once('=') else {
            return Err(p.inconsistent(format!("volume `{part}` is not PREFIX=ARCH")));
        };
        let prefix = prefix.trim().trim_end_matches('/');
        if !prefix.starts_with('/') || prefix.split('/').skip(1).any(|c| c.is_empty() || c == "." || c == "..") {
            return Err(p.inconsistent(format!(
                "volume prefix `{prefix}` must be an absolute directory path like /web (not the root)"
            )));
        }
        for (other, _) in &out {
            let nested = |a: &str, b: &str| a == b || a.starts_with(&format!("{b}/"));
            if nested(prefix, other) || nested(other, prefix) {
                return Err(p.inconsistent(format!("volume prefix `{prefix}` overlaps `{other}`")));
            }
        }
        if out.len() >= super::file_common::MAX_VOLUMES {
            return Err(p.inconsistent(format!("at most {} volumes", super::file_common::MAX_VOLUMES)));
        }
        out.push((prefix.to_string(), arch.trim().to_string()));
    }
    Ok(out)
}

impl FileArchKind for TypeAwareKind {
    const NAME: &'static str = "type-aware";
    const VERSION: u32 = 1;
    const HELP: &'static str = "file (Loris): a file-level architecture per volume (directory prefix), one shared SSD";
    const PARAMS: &'static [ParamSpec] = PARAMS;
    /// Copies or not, passthrough or not: per volume, from the architectures it names.
    const CAPS: crate::arch::Capabilities = crate::arch::Capabilities {
        copies: crate::arch::Copies::PerVolume,
        per_io_bytes: true,
        passthrough: false,
        ..crate::arch::Capabilities::FILE_TIERING
    };
    fn modes(p: &mut Params) -> Result<Vec<&'static FilePolicy>, ConfigError> {
        let default = p.string("default")?;
        let volumes = p.string_or("volumes", "");
        let mut modes = vec![mode_named(p, &default)?];
        let parsed = parse_volumes(p, &volumes)?;
        if parsed.is_empty() {
            return Err(p.inconsistent("type-aware needs volumes=PREFIX=ARCH;PREFIX=ARCH..."));
        }
        for (_, arch) in &parsed {
            modes.push(mode_named(p, arch)?);
        }
        Ok(modes)
    }
}

/// The type-aware architecture.
pub type TypeAware = FileArch<TypeAwareKind>;

/// The volume prefixes a file-level spec defines, in volume order starting at volume 1 (empty for
/// architectures without volumes). Front ends give a path the volume of the longest prefix it is
/// under.
pub fn file_volumes(spec: &str) -> Result<Vec<String>, ConfigError> {
    let (name, p) = Params::parse(spec)?;
    if name != TypeAwareKind::NAME {
        return Ok(Vec::new());
    }
    let volumes = p.peek("volumes").unwrap_or("").to_string();
    Ok(parse_volumes(&p, &volumes)?.into_iter().map(|(prefix, _)| prefix).collect())
}

/// The architecture of each volume of a file-level spec, in volume order: volume 0 (every path
/// outside the prefixes) first, then one per prefix of [`file_volumes`]. A spec without volumes
/// has one volume, its own architecture.
pub fn volume_archs(spec: &str) -> Result<Vec<String>, ConfigError> {
    let (name, p) = Params::parse(spec)?;
    if name != TypeAwareKind::NAME {
        return Ok(vec![name.to_string()]);
    }
    let default = p.peek("default").unwrap_or("dynamic-hot-dst").to_string();
    let volumes = p.peek("volumes").unwrap_or("").to_string();
    let mut out = vec![default];
    out.extend(parse_volumes(&p, &volumes)?.into_iter().map(|(_, arch)| arch));
    Ok(out)
}

/// The volume of `path` given the prefixes from [`file_volumes`]: 0 outside every prefix.
pub fn volume_of(prefixes: &[String], path: &str) -> u16 {
    for (i, p) in prefixes.iter().enumerate() {
        if path == p || (path.starts_with(p.as_str()) && path.as_bytes().get(p.len()) == Some(&b'/')) {
            return u16::try_from(i + 1).unwrap_or(u16::MAX);
        }
    }
    0
}
