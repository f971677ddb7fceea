//! `tierwise list`: architectures, collectors, formats and device presets.

use anyhow::{Result, bail};
use serde_json::json;
use tierwise_core::arch::ARCHITECTURES;
use tierwise_core::collector::COLLECTORS;
use tierwise_sim::device::Presets;
use tierwise_sim::trace::FORMATS;

pub(crate) fn cmd_list(what: Option<&str>, json: bool, markdown: bool) -> Result<()> {
    let all = what.is_none();
    let w = what.unwrap_or("");
    let known = ["architectures", "collectors", "formats", "devices"];
    if !all && !known.iter().any(|k| k.starts_with(w)) {
        bail!("unknown list `{w}`: expected one of {}", known.join(", "));
    }
    if markdown {
        if what.is_some_and(|w| !"collectors".starts_with(w)) {
            bail!("--markdown prints the collectors only: use `tierwise list collectors --markdown`");
        }
        print!("{}", collectors_markdown());
        return Ok(());
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&registries_json(|k| all || k.starts_with(w)))?);
        return Ok(());
    }
    if all || "architectures".starts_with(w) {
        println!("Architectures (--arch NAME[:knob=value,...]):");
        for a in ARCHITECTURES {
            println!("  {:<18} v{}  {}", a.name, a.version, a.help);
            println!("      {:<21} {}", "capabilities", a.caps.describe());
            for p in a.params.iter().chain(a.extra_params) {
                println!("      {:<21} default {:<14} {}", p.name, p.default, p.help);
            }
            if a.uses_collector && !a.params.iter().chain(a.extra_params).any(|p| p.name == "collector") {
                println!(
                    "      {:<21} default {:<14} any collector below, with its knobs",
                    "collector", a.default_collector
                );
            }
        }
        println!();
    }
    if all || "collectors".starts_with(w) {
        println!("Collectors (collector=NAME inside an architecture spec):");
        for c in COLLECTORS {
            let aliases =
                if c.aliases.is_empty() { String::new() } else { format!(" (also {})", c.aliases.join(", ")) };
            println!("  {:<16} v{}  {}{aliases}", c.name, c.version, c.help);
            for p in c.params {
                println!("      {:<21} default {:<14} {}", p.name, p.default, p.help);
            }
        }
        println!();
    }
    if all || "formats".starts_with(w) {
        println!("Trace formats (--format NAME; gzip and zstd are read transparently):");
        for f in FORMATS {
            println!("  {:<16} {}", f.name, f.help);
        }
        println!();
    }
    if all || "devices".starts_with(w) {
        let p = Presets::builtin();
        println!("Device presets (--hdd, --ssd-model, --ram; override with --devices FILE.toml):");
        for (n, d) in &p.hdd {
            println!("  hdd {:<12} {}", n, d.description);
        }
        for (n, d) in &p.ssd {
            println!("  ssd {:<12} {}", n, d.description);
        }
        for (n, d) in &p.ram {
            println!("  ram {:<12} {}", n, d.description);
        }
    }
    Ok(())
}

fn params_json(params: &[tierwise_core::params::ParamSpec]) -> serde_json::Value {
    params.iter().map(|p| json!({"name": p.name, "default": p.default, "help": p.help})).collect()
}

/// The registries as data, for scripts (the libCacheSim differential test reads the collectors
/// and their references from here).
fn registries_json(wanted: impl Fn(&str) -> bool) -> serde_json::Value {
    let mut out = serde_json::Map::new();
    if wanted("architectures") {
        let v: Vec<_> = ARCHITECTURES
            .iter()
            .map(|a| {
                json!({
                    "name": a.name, "version": a.version, "help": a.help,
                    "params": params_json(&a.params.iter().chain(a.extra_params).copied().collect::<Vec<_>>()),
                    "collector": a.uses_collector.then_some(a.default_collector),
                })
            })
            .collect();
        out.insert("architectures".into(), v.into());
    }
    if wanted("collectors") {
        let v: Vec<_> = COLLECTORS
            .iter()
            .map(|c| {
                json!({
                    "name": c.name, "aliases": c.aliases, "version": c.version, "help": c.help,
                    "params": params_json(c.params), "min_objects": c.min_objects,
                    "libcachesim": c.libcachesim, "reference": c.reference.as_str(),
                })
            })
            .collect();
        out.insert("collectors".into(), v.into());
    }
    if wanted("formats") {
        let v: Vec<_> = FORMATS.iter().map(|f| json!({"name": f.name, "help": f.help})).collect();
        out.insert("formats".into(), v.into());
    }
    if wanted("devices") {
        let p = Presets::builtin();
        let d = |kind: &str, n: &String, desc: &str| json!({"kind": kind, "name": n, "description": desc});
        let mut v: Vec<_> = p.hdd.iter().map(|(n, x)| d("hdd", n, &x.description)).collect();
        v.extend(p.ssd.iter().map(|(n, x)| d("ssd", n, &x.description)));
        v.extend(p.ram.iter().map(|(n, x)| d("ram", n, &x.description)));
        out.insert("devices".into(), v.into());
    }
    out.into()
}

/// The collectors table of docs/COLLECTORS.md (a test checks that file holds exactly this).
pub(crate) fn collectors_markdown() -> String {
    use std::fmt::Write as _;
    let mut out = String::from(
        "| collector | also | knobs (default) | libCacheSim reference | what it does |\n|---|---|---|---|---|\n",
    );
    for c in COLLECTORS {
        let knobs: Vec<String> = c.params.iter().map(|p| format!("`{}={}`", p.name, p.default)).collect();
        let reference = match c.libcachesim {
            Some(cls) => format!("`{cls}`, {}", c.reference.as_str()),
            None => "none".into(),
        };
        let aliases: Vec<String> = c.aliases.iter().map(|a| format!("`{a}`")).collect();
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} | {} |",
            c.name,
            aliases.join(", "),
            knobs.join(", "),
            reference,
            c.help.replace('|', "\\|")
        );
    }
    out
}
