//! `tierwise list`: architectures, collectors, formats and device presets.

use anyhow::{Result, bail};
use tierwise_core::arch::ARCHITECTURES;
use tierwise_core::collector::COLLECTORS;
use tierwise_sim::device::Presets;
use tierwise_sim::trace::FORMATS;

pub(crate) fn cmd_list(what: Option<&str>) -> Result<()> {
    let all = what.is_none();
    let w = what.unwrap_or("");
    let known = ["architectures", "collectors", "formats", "devices"];
    if !all && !known.iter().any(|k| k.starts_with(w)) {
        bail!("unknown list `{w}`: expected one of {}", known.join(", "));
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
            println!("  {:<16} v{}  {}", c.name, c.version, c.help);
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
