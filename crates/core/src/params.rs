//! Policy specs (`name:key=value,key=value`), typed knob parsing and the errors that name the
//! knob and its allowed range. Knobs are spelled in kebab-case everywhere (CLI and files).
//!
//! Validation happens once, when an architecture or collector is built from its spec; the hot
//! path never re-checks.

use std::fmt;

use crate::Nanos;

/// Describes one knob, for `--list` output and error messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamSpec {
    /// kebab-case name.
    pub name: &'static str,
    /// Default value as written on the command line.
    pub default: &'static str,
    /// One line of help, including the allowed range.
    pub help: &'static str,
}

/// A configuration problem. Every variant names the item at fault and what is allowed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A policy, collector or preset name that does not exist.
    #[error("unknown {kind} `{name}`; valid {kind}s: {}", allowed.join(", "))]
    UnknownName {
        /// "architecture", "collector", ...
        kind: &'static str,
        /// What was asked for.
        name: String,
        /// What exists.
        allowed: Vec<String>,
    },
    /// A knob that the named policy does not have.
    #[error("`{owner}` has no parameter `{key}`; its parameters: {}", if allowed.is_empty() { "(none)".to_string() } else { allowed.join(", ") })]
    UnknownParam {
        /// The policy whose spec contained it.
        owner: String,
        /// The unknown key.
        key: String,
        /// Keys the policy accepts.
        allowed: Vec<String>,
    },
    /// A value that does not parse or is outside its range.
    #[error("`{owner}`: invalid value `{value}` for `{key}`: expected {expected}")]
    InvalidValue {
        /// The policy.
        owner: String,
        /// The knob.
        key: String,
        /// What was given.
        value: String,
        /// The allowed form or range.
        expected: String,
    },
    /// A combination of knobs that cannot work together.
    #[error("`{owner}`: {message}")]
    Inconsistent {
        /// The policy.
        owner: String,
        /// What is wrong and what is allowed.
        message: String,
    },
    /// A malformed spec string.
    #[error("malformed policy spec `{spec}`: {reason}")]
    Malformed {
        /// The spec.
        spec: String,
        /// Why.
        reason: String,
    },
}

/// The key/value pairs of a spec, with bookkeeping of which keys were consumed so that unknown
/// ones are reported.
///
/// A getter without a default (`u64`, `size`, ...) takes the knob's documented default, the
/// one its [`ParamSpec`] declares (what `tierwise list` prints), so every default is written
/// once; the `_or` getters take a default computed by the caller, for knobs whose documented
/// default is a description such as "(the block size)".
#[derive(Clone, Debug, Default)]
pub struct Params {
    owner: String,
    pairs: Vec<(String, String)>,
    used: Vec<bool>,
    declared: Vec<ParamSpec>,
}

impl Params {
    /// Parses `name` or `name:k=v,k=v`. Returns the name and its parameters.
    pub fn parse(spec: &str) -> Result<(String, Params), ConfigError> {
        let spec = spec.trim();
        let (name, rest) = match spec.split_once(':') {
            Some((n, r)) => (n.trim(), r.trim()),
            None => (spec, ""),
        };
        if name.is_empty() {
            return Err(ConfigError::Malformed { spec: spec.to_string(), reason: "empty name".into() });
        }
        let mut params = Params::new(name);
        if !rest.is_empty() {
            for part in rest.split(',') {
                let part = part.trim();
                if part.is_empty() {
                    continue;
                }
                let Some((k, v)) = part.split_once('=') else {
                    return Err(ConfigError::Malformed {
                        spec: spec.to_string(),
                        reason: format!("`{part}` is not key=value"),
                    });
                };
                params.insert(k.trim(), v.trim());
            }
        }
        Ok((name.to_string(), params))
    }

    /// Empty parameters owned by `owner` (used in error messages).
    pub fn new(owner: &str) -> Params {
        Params { owner: owner.to_string(), pairs: Vec::new(), used: Vec::new(), declared: Vec::new() }
    }

    /// Adds or replaces a pair.
    pub fn insert(&mut self, key: &str, value: &str) {
        let key = key.replace('_', "-");
        if let Some(i) = self.pairs.iter().position(|(k, _)| *k == key) {
            self.pairs[i].1 = value.to_string();
        } else {
            self.pairs.push((key, value.to_string()));
            self.used.push(false);
        }
    }

    /// The pairs given, in order.
    pub fn pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.pairs.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The owner name.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// Renames the owner (used when a nested component reads its knobs).
    pub fn set_owner(&mut self, owner: &str) {
        self.owner = owner.to_string();
    }

    /// Whether a key was given.
    pub fn has(&self, key: &str) -> bool {
        self.pairs.iter().any(|(k, _)| k == key)
    }

    /// The raw value of a key, without marking it consumed.
    pub fn peek(&self, key: &str) -> Option<&str> {
        self.pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// The raw value of a key, marking it consumed.
    pub fn take_raw(&mut self, key: &str) -> Option<String> {
        let i = self.pairs.iter().position(|(k, _)| k == key)?;
        self.used[i] = true;
        Some(self.pairs[i].1.clone())
    }

    fn invalid(&self, key: &str, value: &str, expected: impl Into<String>) -> ConfigError {
        ConfigError::InvalidValue {
            owner: self.owner.clone(),
            key: key.to_string(),
            value: value.to_string(),
            expected: expected.into(),
        }
    }

    /// Declares knobs and their documented defaults (the registry does, before building).
    pub fn declare(&mut self, specs: &[ParamSpec]) {
        for spec in specs {
            if !self.declared.iter().any(|d| d.name == spec.name) {
                self.declared.push(*spec);
            }
        }
    }

    /// The value given for `key`, else its documented default.
    fn given_or_documented(&mut self, key: &str) -> Result<String, ConfigError> {
        if let Some(raw) = self.take_raw(key) {
            return Ok(raw);
        }
        match self.declared.iter().find(|d| d.name == key) {
            Some(d) if !d.default.is_empty() && !d.default.starts_with('(') => Ok(d.default.to_string()),
            _ => Err(self.inconsistent(format!(
                "knob `{key}` has no documented default to fall back on (a bug: declare its ParamSpec \
                 with a value, or read it with a computed default)"
            ))),
        }
    }

    /// An unsigned integer in `[min, max]`, by default its documented one.
    pub fn u64(&mut self, key: &str, min: u64, max: u64) -> Result<u64, ConfigError> {
        let raw = self.given_or_documented(key)?;
        self.parse_u64(key, &raw, min, max)
    }

    /// An unsigned integer in `[min, max]`, by default `default`.
    pub fn u64_or(&mut self, key: &str, default: u64, min: u64, max: u64) -> Result<u64, ConfigError> {
        match self.take_raw(key) {
            Some(raw) => self.parse_u64(key, &raw, min, max),
            None => Ok(default),
        }
    }

    fn parse_u64(&self, key: &str, raw: &str, min: u64, max: u64) -> Result<u64, ConfigError> {
        let v: u64 = raw.parse().map_err(|_| self.invalid(key, raw, format!("an integer in {min}..={max}")))?;
        if v < min || v > max {
            return Err(self.invalid(key, raw, format!("an integer in {min}..={max}")));
        }
        Ok(v)
    }

    /// A float in `[min, max]`, by default its documented one.
    pub fn f64(&mut self, key: &str, min: f64, max: f64) -> Result<f64, ConfigError> {
        let raw = self.given_or_documented(key)?;
        let v: f64 = raw.parse().map_err(|_| self.invalid(key, &raw, format!("a number in {min}..={max}")))?;
        if !(v >= min && v <= max) {
            return Err(self.invalid(key, &raw, format!("a number in {min}..={max}")));
        }
        Ok(v)
    }

    /// A percentage written as `50` or `50%`, in `[min, max]`, returned as a fraction 0..=1; by
    /// default its documented one.
    pub fn percent(&mut self, key: &str, min: f64, max: f64) -> Result<f64, ConfigError> {
        let raw = self.given_or_documented(key)?;
        self.parse_percent(key, &raw, min, max)
    }

    /// A percentage as [`Params::percent`], by default `default_pct` (in percent).
    pub fn percent_or(&mut self, key: &str, default_pct: f64, min: f64, max: f64) -> Result<f64, ConfigError> {
        match self.take_raw(key) {
            Some(raw) => self.parse_percent(key, &raw, min, max),
            None => Ok(default_pct / 100.0),
        }
    }

    fn parse_percent(&self, key: &str, raw: &str, min: f64, max: f64) -> Result<f64, ConfigError> {
        let t = raw.trim_end_matches('%');
        let v: f64 = t.parse().map_err(|_| self.invalid(key, raw, format!("a percentage in {min}..={max}")))?;
        if !(v >= min && v <= max) {
            return Err(self.invalid(key, raw, format!("a percentage in {min}..={max}")));
        }
        Ok(v / 100.0)
    }

    /// A high/low pair of percentages (write-back watermarks): `high` in 1..=100, `low` in
    /// 0..=100 and below `high`; returned as fractions (high, low), by default the documented ones.
    pub fn watermarks(&mut self, high: &str, low: &str) -> Result<(f64, f64), ConfigError> {
        let h = self.percent(high, 1.0, 100.0)?;
        let l = self.percent(low, 0.0, 100.0)?;
        self.ordered_watermarks((high, h), (low, l))
    }

    /// Watermarks as [`Params::watermarks`], by default the given percentages.
    pub fn watermarks_or(&mut self, high: (&str, f64), low: (&str, f64)) -> Result<(f64, f64), ConfigError> {
        let h = self.percent_or(high.0, high.1, 1.0, 100.0)?;
        let l = self.percent_or(low.0, low.1, 0.0, 100.0)?;
        self.ordered_watermarks((high.0, h), (low.0, l))
    }

    fn ordered_watermarks(&self, high: (&str, f64), low: (&str, f64)) -> Result<(f64, f64), ConfigError> {
        if low.1 >= high.1 {
            return Err(self.inconsistent(format!(
                "{} ({:.0}%) must be below {} ({:.0}%)",
                low.0,
                low.1 * 100.0,
                high.0,
                high.1 * 100.0
            )));
        }
        Ok((high.1, low.1))
    }

    /// A byte size (`4096`, `4k`, `64MiB`, `1GB`) in `[min, max]`, by default its documented one.
    pub fn size(&mut self, key: &str, min: u64, max: u64) -> Result<u64, ConfigError> {
        let raw = self.given_or_documented(key)?;
        self.parse_size_in(key, &raw, min, max)
    }

    /// A byte size as [`Params::size`], by default `default`.
    pub fn size_or(&mut self, key: &str, default: u64, min: u64, max: u64) -> Result<u64, ConfigError> {
        match self.take_raw(key) {
            Some(raw) => self.parse_size_in(key, &raw, min, max),
            None => Ok(default),
        }
    }

    fn parse_size_in(&self, key: &str, raw: &str, min: u64, max: u64) -> Result<u64, ConfigError> {
        let v = parse_size(raw).map_err(|e| self.invalid(key, raw, e))?;
        if v < min || v > max {
            return Err(self.invalid(key, raw, format!("a size in {min}..={max} bytes")));
        }
        Ok(v)
    }

    /// A duration (`5s`, `200ms`, `24h`; a bare number is seconds) in `[min, max]`, by default
    /// its documented one.
    pub fn duration(&mut self, key: &str, min: Nanos, max: Nanos) -> Result<Nanos, ConfigError> {
        let raw = self.given_or_documented(key)?;
        self.parse_duration_in(key, &raw, min, max)
    }

    /// A duration as [`Params::duration`], by default `default`.
    pub fn duration_or(&mut self, key: &str, default: Nanos, min: Nanos, max: Nanos) -> Result<Nanos, ConfigError> {
        match self.take_raw(key) {
            Some(raw) => self.parse_duration_in(key, &raw, min, max),
            None => Ok(default),
        }
    }

    fn parse_duration_in(&self, key: &str, raw: &str, min: Nanos, max: Nanos) -> Result<Nanos, ConfigError> {
        let v = parse_duration(raw).map_err(|e| self.invalid(key, raw, e))?;
        if v < min || v > max {
            return Err(self.invalid(key, raw, format!("a duration in {min}..={max}")));
        }
        Ok(v)
    }

    /// A boolean (`true/false/yes/no/on/off/1/0`), by default its documented one.
    pub fn bool(&mut self, key: &str) -> Result<bool, ConfigError> {
        let raw = self.given_or_documented(key)?;
        match raw.to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" | "1" => Ok(true),
            "false" | "no" | "off" | "0" => Ok(false),
            _ => Err(self.invalid(key, &raw, "true or false")),
        }
    }

    /// One of a fixed set of words, by default its documented one; returns its index in `choices`.
    pub fn choice(&mut self, key: &str, choices: &[&str]) -> Result<usize, ConfigError> {
        let raw = self.given_or_documented(key)?;
        choices
            .iter()
            .position(|c| c.eq_ignore_ascii_case(&raw))
            .ok_or_else(|| self.invalid(key, &raw, format!("one of {}", choices.join(", "))))
    }

    /// A free-form string, by default its documented one.
    pub fn string(&mut self, key: &str) -> Result<String, ConfigError> {
        self.given_or_documented(key)
    }

    /// A free-form string, by default `default`.
    pub fn string_or(&mut self, key: &str, default: &str) -> String {
        self.take_raw(key).unwrap_or_else(|| default.to_string())
    }

    /// Errors on the first key nobody consumed, listing `allowed`.
    pub fn finish(&self, allowed: &[&[ParamSpec]]) -> Result<(), ConfigError> {
        for (i, (k, _)) in self.pairs.iter().enumerate() {
            if !self.used[i] {
                return Err(ConfigError::UnknownParam {
                    owner: self.owner.clone(),
                    key: k.clone(),
                    allowed: allowed.iter().flat_map(|s| s.iter()).map(|p| p.name.to_string()).collect(),
                });
            }
        }
        Ok(())
    }

    /// An inconsistency error owned by these parameters.
    pub fn inconsistent(&self, message: impl Into<String>) -> ConfigError {
        ConfigError::Inconsistent { owner: self.owner.clone(), message: message.into() }
    }
}

impl fmt::Display for Params {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.owner)?;
        for (i, (k, v)) in self.pairs.iter().enumerate() {
            f.write_str(if i == 0 { ":" } else { "," })?;
            write!(f, "{k}={v}")?;
        }
        Ok(())
    }
}

/// Parses a byte size. Suffixes: `k/m/g/t` and `KiB/MiB/GiB/TiB` are binary (fio's convention),
/// `KB/MB/GB/TB` decimal, `B` or none bytes. Fractions are allowed (`1.5GiB`).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let unit = unit.trim();
    let mult: f64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024.0 * 1024.0,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tib" => 1024.0f64.powi(4),
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        _ => {
            return Err(format!("a size like 4096, 4k, 64MiB or 1GB (unknown unit `{unit}`)"));
        }
    };
    let v: f64 = num.parse().map_err(|_| "a size like 4096, 4k, 64MiB or 1GB".to_string())?;
    let bytes = v * mult;
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
        return Err("a size that fits in 64 bits".to_string());
    }
    Ok(bytes.round() as u64)
}

/// Parses a duration: `ns`, `us`, `ms`, `s`, `m`, `h`, `d` suffixes; a bare number is seconds.
pub fn parse_duration(s: &str) -> Result<Nanos, String> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult: f64 = match unit.trim() {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "" | "s" => 1e9,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        "d" => 86400e9,
        u => {
            return Err(format!("a duration like 5s, 200ms or 24h (unknown unit `{u}`)"));
        }
    };
    let v: f64 = num.parse().map_err(|_| "a duration like 5s, 200ms or 24h".to_string())?;
    let ns = v * mult;
    if !ns.is_finite() || ns < 0.0 || ns > u64::MAX as f64 {
        return Err("a duration that fits in 64 bits of nanoseconds".to_string());
    }
    Ok(Nanos(ns.round() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_parsing_and_unknown_keys() {
        let (name, mut p) = Params::parse("cache:mode=write-back, collector=lfu,dirty_high=70").unwrap();
        assert_eq!(name, "cache");
        assert_eq!(p.choice("mode", &["read-only", "write-through", "write-back"]).unwrap(), 2);
        assert_eq!(p.string_or("collector", "lru"), "lfu");
        assert!(p.finish(&[]).is_err(), "dirty-high was not consumed");
        assert!((p.percent("dirty-high", 0.0, 100.0).unwrap() - 0.7).abs() < 1e-12);
        p.finish(&[]).unwrap();
    }

    /// A knob not given takes the default its spec documents; one without a documented value
    /// is refused by name (a bug to fix where the knob is read, never a silent zero).
    #[test]
    fn defaults_come_from_the_declared_specs() {
        const SPECS: &[ParamSpec] = &[
            ParamSpec { name: "count", default: "7", help: "" },
            ParamSpec { name: "grain", default: "(the block size)", help: "" },
            ParamSpec { name: "mode", default: "b", help: "" },
        ];
        let (_, mut p) = Params::parse("x").unwrap();
        p.declare(SPECS);
        assert_eq!(p.u64("count", 1, 64).unwrap(), 7);
        assert_eq!(p.choice("mode", &["a", "b"]).unwrap(), 1);
        assert!(p.size("grain", 1, 1 << 30).unwrap_err().to_string().contains("grain"));
        assert_eq!(p.size_or("grain", 4096, 1, 1 << 30).unwrap(), 4096);
        assert!(p.u64("undeclared", 0, 1).is_err());
    }

    #[test]
    fn errors_name_knob_and_range() {
        let (_, mut p) = Params::parse("x:count=0").unwrap();
        let e = p.u64_or("count", 1, 1, 64).unwrap_err().to_string();
        assert!(e.contains("count") && e.contains("1..=64"), "{e}");
        assert!(Params::parse("x:novalue").is_err());
        assert!(Params::parse(":a=1").is_err());
    }

    #[test]
    fn sizes_and_durations() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert_eq!(parse_size("64MiB").unwrap(), 64 << 20);
        assert_eq!(parse_size("1GB").unwrap(), 1_000_000_000);
        assert_eq!(parse_size("1.5GiB").unwrap(), 3 << 29);
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("-1").is_err());
        assert_eq!(parse_duration("5").unwrap(), Nanos::from_secs(5));
        assert_eq!(parse_duration("200ms").unwrap(), Nanos::from_millis(200));
        assert_eq!(parse_duration("24h").unwrap(), Nanos::from_secs(86400));
        assert!(parse_duration("5 fortnights").is_err());
    }
}
