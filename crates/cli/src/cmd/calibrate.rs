//! `tierwise calibrate`: measure a device, fit a preset, check the model against it.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use tierwise_calibrate::{Kind, Options, calibrate, report};
use tierwise_core::params::parse_size;

use crate::write_file;

#[derive(Args)]
pub(crate) struct CalibrateArgs {
    /// A directory (a scratch file of --size is made there, filled and removed), or an existing
    /// file or block device (read tests only, unless --overwrite).
    pub(crate) target: PathBuf,
    /// Bytes to measure over: the scratch file's size (default 4GiB), or the first bytes of a
    /// file or device (default: all of it). An HDD's random IOPS depend on it: calibrate over
    /// the span the data will occupy.
    #[arg(long, value_parser = parse_size)]
    pub(crate) size: Option<u64>,
    /// Also measure writes on an existing file or device. DESTROYS ITS DATA.
    #[arg(long)]
    pub(crate) overwrite: bool,
    /// Seconds per test.
    #[arg(long, default_value_t = 3.0)]
    pub(crate) seconds: f64,
    /// Queue depths of the random tests (threads with one request each, as fio's psync).
    #[arg(long, value_delimiter = ',', default_value = "1,4,32")]
    pub(crate) depths: Vec<u32>,
    /// The preset's kind: hdd or ssd (default: from the QD1 random read time; 1 ms or more
    /// is a hard disk).
    #[arg(long, value_parser = Kind::parse)]
    pub(crate) kind: Option<Kind>,
    /// Spindle speed of an HDD preset (default: the base preset's).
    #[arg(long)]
    pub(crate) rpm: Option<f64>,
    /// The preset to take what is not measured from (power, price, read-ahead, NCQ, endurance):
    /// an HDD preset for kind hdd, an SSD preset for kind ssd (default wd5000aaks / vertex3).
    #[arg(long)]
    pub(crate) base: Option<String>,
    /// TOML file merged over the built-in presets (for --base).
    #[arg(long)]
    pub(crate) devices: Option<PathBuf>,
    /// The new preset's name.
    #[arg(long, default_value = "calibrated")]
    pub(crate) name: String,
    /// Write the preset here (a --devices file); default: printed after the report.
    #[arg(long, short)]
    pub(crate) out: Option<PathBuf>,
    /// Write the whole calibration (measurements, preset, model checks) as JSON.
    #[arg(long)]
    pub(crate) json: Option<PathBuf>,
}

pub(crate) fn cmd_calibrate(a: CalibrateArgs, bars: &crate::progress::Bars) -> Result<()> {
    let mut o = Options {
        size: a.size,
        overwrite: a.overwrite,
        seconds: a.seconds,
        depths: a.depths,
        kind: a.kind,
        rpm: a.rpm,
        name: a.name,
        ..Options::default()
    };
    o.presets = tierwise_sim::jobs::load_presets(a.devices.as_deref())?;
    if let Some(b) = a.base {
        // The base names the kind's preset; which kind is known only after measuring when
        // --kind is not given, so a name is taken for whichever kind it exists as.
        if o.presets.hdd.contains_key(&b) {
            o.base_hdd = b.clone();
        }
        if o.presets.ssd.contains_key(&b) {
            o.base_ssd = b.clone();
        }
        if !o.presets.hdd.contains_key(&b) && !o.presets.ssd.contains_key(&b) {
            anyhow::bail!("--base {b}: no HDD or SSD preset of that name (`tierwise list devices`)");
        }
    }
    let quiet = bars.quiet();
    let cal = calibrate(&a.target, &o, &mut |s| {
        if !quiet {
            eprintln!("calibrate: {s}");
        }
    })?;
    print!("{}", report::render(&cal));
    let preset = cal.preset_toml()?;
    match &a.out {
        Some(p) => {
            write_file(p, preset.as_bytes())?;
            let flag = if cal.kind == Kind::Hdd { "--hdd" } else { "--ssd-model" };
            println!("\npreset written to {} (use: --devices {} {flag} {})", p.display(), p.display(), cal.name);
        }
        None => print!("\n{preset}"),
    }
    if let Some(p) = &a.json {
        write_file(p, serde_json::to_string_pretty(&cal)?.as_bytes())?;
    }
    Ok(())
}
