//! The built-in device presets (`presets.toml`, from the seed papers) and user overrides: a
//! TOML file of the same layout is merged field by field over them, so `[hdd.wd5000aaks]
//! rpm = 5400` changes one number and `[ssd.mine] ...` adds a device. Unknown fields are errors.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{HddSpec, RamSpec, SsdSpec};

const BUILTIN: &str = include_str!("presets.toml");

/// Problems with presets or their overrides.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PresetError {
    /// The TOML does not parse or has unknown fields.
    #[error("{source_name}: {message}")]
    Parse {
        /// Where the TOML came from.
        source_name: String,
        /// What is wrong.
        message: String,
    },
    /// A preset name that does not exist.
    #[error("unknown {kind} preset `{name}`; available: {}", available.join(", "))]
    Unknown {
        /// hdd, ssd or ram.
        kind: &'static str,
        /// The name asked for.
        name: String,
        /// The names that exist.
        available: Vec<String>,
    },
    /// A preset with impossible numbers.
    #[error("{kind} preset `{name}`: {message}")]
    Invalid {
        /// hdd, ssd or ram.
        kind: &'static str,
        /// The preset.
        name: String,
        /// What is wrong.
        message: String,
    },
}

/// All presets.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Presets {
    /// Hard disks.
    #[serde(default)]
    pub hdd: BTreeMap<String, HddSpec>,
    /// SSDs.
    #[serde(default)]
    pub ssd: BTreeMap<String, SsdSpec>,
    /// Memories.
    #[serde(default)]
    pub ram: BTreeMap<String, RamSpec>,
}

fn merge(base: &mut toml::Value, over: toml::Value) {
    match (base, over) {
        (toml::Value::Table(b), toml::Value::Table(o)) => {
            for (k, v) in o {
                match b.get_mut(&k) {
                    Some(existing) => merge(existing, v),
                    None => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (b, o) => *b = o,
    }
}

impl Presets {
    /// The built-in presets.
    pub fn builtin() -> Presets {
        Presets::with_overrides("", "").unwrap_or_default()
    }

    /// The built-in presets with `text` (TOML, from `source_name`) merged over them.
    pub fn with_overrides(text: &str, source_name: &str) -> Result<Presets, PresetError> {
        let perr = |name: &str, e: String| PresetError::Parse { source_name: name.to_string(), message: e };
        let mut base: toml::Value = toml::from_str(BUILTIN).map_err(|e| perr("built-in presets", e.to_string()))?;
        if !text.trim().is_empty() {
            let over: toml::Value = toml::from_str(text).map_err(|e| perr(source_name, e.to_string()))?;
            merge(&mut base, over);
        }
        let p: Presets = base.try_into().map_err(|e: toml::de::Error| perr(source_name, e.to_string()))?;
        for (n, h) in &p.hdd {
            h.validate().map_err(|m| PresetError::Invalid { kind: "hdd", name: n.clone(), message: m })?;
        }
        for (n, s) in &p.ssd {
            s.validate().map_err(|m| PresetError::Invalid { kind: "ssd", name: n.clone(), message: m })?;
        }
        Ok(p)
    }

    /// An HDD preset by name, with fields changed after a colon: `NAME:FIELD=VALUE,...`
    /// (`wd5000aaks:write_cache=off`, `wd5000aaks:rpm=5400,readahead_kb=0`; `on`/`off` are
    /// booleans), validated as a `--devices` file's would be.
    pub fn hdd(&self, name: &str) -> Result<HddSpec, PresetError> {
        let (base, knobs) = name.split_once(':').unwrap_or((name, ""));
        let spec = self.hdd.get(base).ok_or_else(|| PresetError::Unknown {
            kind: "hdd",
            name: base.into(),
            available: self.hdd.keys().cloned().collect(),
        })?;
        with_knobs("hdd", name, spec, knobs, HddSpec::validate)
    }

    /// An SSD preset by name, with fields changed after a colon as for [`Presets::hdd`]
    /// (`vertex3:gc=fresh`, `vertex3:nand_capacity=300GiB`).
    pub fn ssd(&self, name: &str) -> Result<SsdSpec, PresetError> {
        let (base, knobs) = name.split_once(':').unwrap_or((name, ""));
        let spec = self.ssd.get(base).ok_or_else(|| PresetError::Unknown {
            kind: "ssd",
            name: base.into(),
            available: self.ssd.keys().cloned().collect(),
        })?;
        with_knobs("ssd", name, spec, knobs, SsdSpec::validate)
    }

    /// A RAM preset by name.
    pub fn ram(&self, name: &str) -> Result<&RamSpec, PresetError> {
        self.ram.get(name).ok_or_else(|| PresetError::Unknown {
            kind: "ram",
            name: name.into(),
            available: self.ram.keys().cloned().collect(),
        })
    }

    /// Picks one device of each kind.
    ///
    /// `hdd` may name an SSD preset as `ssd:NAME`: a flash device in the slow level's place
    /// (the disk under a served device's HDD image when that disk is flash, as `tierwise
    /// calibrate` finds a virtual machine's disk). It keeps the slow level's queue and counters,
    /// serves with the SSD model's latency and IOPS ceiling, and never spins down.
    pub fn set(&self, hdd: &str, ssd: &str, ram: &str) -> Result<DeviceSet, PresetError> {
        let (hdd_spec, hdd_flash) = match hdd.strip_prefix("ssd:") {
            Some(flash) => {
                let f = self.ssd(flash)?.clone();
                // The slow level's HDD fields that still matter: capacity (where volumes lie),
                // power and price, from the flash device; the rest is never used.
                let mut h = Presets::builtin().hdd("wd5000aaks").unwrap_or_else(|_| unreachable_set().hdd);
                h.description = format!("flash in the HDD's place: {}", f.description);
                h.capacity = f.capacity.clone();
                h.active_w = f.active_w;
                h.idle_w = f.idle_w;
                h.standby_w = f.idle_w;
                h.usd_per_gb = f.usd_per_gb;
                (h, Some(f))
            }
            None => (self.hdd(hdd)?, None),
        };
        Ok(DeviceSet {
            hdd_name: hdd.into(),
            ssd_name: ssd.into(),
            ram_name: ram.into(),
            hdd: hdd_spec,
            ssd: self.ssd(ssd)?.clone(),
            ram: self.ram(ram)?.clone(),
            hdd_flash,
            io_align: 0,
        })
    }
}

/// The devices of one simulated system.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceSet {
    /// HDD preset name.
    pub hdd_name: String,
    /// SSD preset name.
    pub ssd_name: String,
    /// RAM preset name.
    pub ram_name: String,
    /// HDD parameters.
    pub hdd: HddSpec,
    /// SSD parameters.
    pub ssd: SsdSpec,
    /// RAM parameters.
    pub ram: RamSpec,
    /// A flash device in the HDD's place (`--hdd ssd:NAME`): the slow level is timed by this
    /// SSD model instead of `hdd`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hdd_flash: Option<SsdSpec>,
    /// The front end's direct-I/O unit in bytes (0: none): both devices see every request
    /// rounded out to it, partial writes read first (`serve --direct` uses 4096).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub io_align: u64,
}

/// `spec` with the fields `knobs` names (`FIELD=VALUE,...`) changed, then validated.
fn with_knobs<T: Clone + Serialize + serde::de::DeserializeOwned>(
    kind: &'static str,
    name: &str,
    spec: &T,
    knobs: &str,
    validate: fn(&T) -> Result<u64, String>,
) -> Result<T, PresetError> {
    if knobs.is_empty() {
        return Ok(spec.clone());
    }
    let invalid = |message: String| PresetError::Invalid { kind, name: name.into(), message };
    let mut value = toml::Value::try_from(spec).map_err(|e| invalid(e.to_string()))?;
    let table = value.as_table_mut().ok_or_else(|| invalid("not a table".into()))?;
    for knob in knobs.split(',') {
        let (key, text) = knob
            .split_once('=')
            .ok_or_else(|| invalid(format!("`{knob}`: expected FIELD=VALUE (e.g. write_cache=off)")))?;
        let v = match text {
            "on" => toml::Value::Boolean(true),
            "off" => toml::Value::Boolean(false),
            _ => toml::from_str::<toml::Table>(&format!("v = {text}"))
                .ok()
                .and_then(|mut t| t.remove("v"))
                .unwrap_or_else(|| toml::Value::String(text.into())),
        };
        table.insert(key.into(), v);
    }
    let spec: T = value.try_into().map_err(|e: toml::de::Error| invalid(e.message().to_string()))?;
    validate(&spec).map_err(invalid)?;
    Ok(spec)
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl DeviceSet {
    /// The presets' names, for reports.
    pub fn label(&self) -> String {
        let mut label = format!("hdd {}, ssd {}, ram {}", self.hdd_name, self.ssd_name, self.ram_name);
        if self.io_align > 1 {
            label.push_str(&format!(", direct I/O in {}-byte units", self.io_align));
        }
        label
    }
}

impl Default for DeviceSet {
    fn default() -> Self {
        let p = Presets::builtin();
        p.set("wd5000aaks", "vertex3", "ddr3").unwrap_or_else(|_| unreachable_set())
    }
}

fn unreachable_set() -> DeviceSet {
    // The built-in presets are checked by a unit test; this keeps `default` total.
    DeviceSet {
        hdd_name: String::new(),
        ssd_name: String::new(),
        ram_name: String::new(),
        hdd: HddSpec {
            description: String::new(),
            capacity: "500GB".into(),
            rpm: 7200.0,
            read_mb_s: 126.0,
            write_mb_s: 126.0,
            inner_rate_ratio: 0.5,
            random_read_iops: 112.0,
            random_write_iops: 91.0,
            track_to_track_ms: 0.8,
            readahead_kb: 512.0,
            ncq_depth: 32,
            read_segments: 16,
            write_cache: true,
            write_cache_kb: 8_192.0,
            active_w: 6.0,
            idle_w: 5.4,
            standby_w: 0.97,
            spin_up_s: 7.0,
            spin_up_w: 15.0,
            spin_down_after_s: 5.0,
            usd_per_gb: 0.068,
        },
        ssd: SsdSpec {
            description: String::new(),
            capacity: "240GB".into(),
            read_mb_s: 550.0,
            write_mb_s: 500.0,
            read_iops: 35000.0,
            write_iops: 75000.0,
            read_latency_us: 90.0,
            write_latency_us: 60.0,
            active_w: 2.85,
            idle_w: 0.55,
            usd_per_gb: 1.76,
            endurance_gb: crate::ssd::GREENDM_ENDURANCE_GB,
            queue_curve: crate::ssd::QueueCurve::Knee,
            nand_capacity: Some("256GiB".into()),
            gc: crate::ssd::GcMode::Steady,
            pe_cycles: 3_000.0,
        },
        ram: RamSpec { description: String::new(), latency_ns: 100.0, mb_s: 10000.0, usd_per_gb: 10.0 },
        hdd_flash: None,
        io_align: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DevOp, Device, Hdd, Model, Ssd};
    use tierwise_core::Nanos;

    #[test]
    fn builtin_presets_parse_and_validate() {
        let p = Presets::with_overrides("", "").unwrap();
        assert!(p.hdd.contains_key("wd5000aaks") && p.ssd.contains_key("vertex3") && p.ram.contains_key("ddr3"));
        assert_eq!(DeviceSet::default().hdd_name, "wd5000aaks");
    }

    #[test]
    fn overrides_merge_field_by_field_and_typos_are_errors() {
        let p = Presets::with_overrides("[hdd.wd5000aaks]\nrpm = 5400\n[ssd.mine]\ncapacity='1GB'\nread_mb_s=1\nwrite_mb_s=1\nread_iops=1\nwrite_iops=1\nread_latency_us=1\nwrite_latency_us=1\nactive_w=1\nidle_w=1\nusd_per_gb=1\n", "x.toml").unwrap();
        assert_eq!(p.hdd["wd5000aaks"].rpm, 5400.0);
        assert_eq!(p.hdd["wd5000aaks"].read_mb_s, 126.0);
        assert!(p.ssd.contains_key("mine"));
        let e = Presets::with_overrides("[hdd.wd5000aaks]\nrmp = 5400\n", "x.toml").unwrap_err().to_string();
        assert!(e.contains("x.toml") && e.contains("rmp"), "{e}");
        let e =
            Presets::with_overrides("[hdd.wd5000aaks]\nrandom_read_iops = 100000\n", "x.toml").unwrap_err().to_string();
        assert!(e.contains("random_read_iops"), "{e}");
        let e = Presets::builtin().hdd("wd500").unwrap_err().to_string();
        assert!(e.contains("wd5000aaks"), "{e}");
    }

    /// The HDD model reproduces the preset's random 4 KiB IOPS (its calibration, media timings:
    /// write cache off) and streams sequential requests at the media rate.
    #[test]
    fn hdd_model_matches_its_calibration() {
        let spec = Presets::builtin().hdd("wd5000aaks:write_cache=off").unwrap();
        for (op, want) in [(DevOp::Read, 112.0), (DevOp::Write, 91.0)] {
            let mut hdd = Hdd::new(&spec).unwrap();
            let cap = hdd.capacity();
            let mut s = 12345u64;
            let n = 20_000;
            let mut total = 0u64;
            for _ in 0..n {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let addr = ((s >> 11) % (cap / 4096)) * 4096;
                total += hdd.service(Nanos(total), op, addr, 4096).occupancy.0;
            }
            let iops = n as f64 / (total as f64 / 1e9);
            assert!((iops / want - 1.0).abs() < 0.03, "{op:?}: {iops:.1} IOPS, preset {want}");
        }
        let mut hdd = Hdd::new(&spec).unwrap();
        let first = hdd.service(Nanos::ZERO, DevOp::Read, 0, 1 << 20).occupancy;
        let t = hdd.service(first, DevOp::Read, 1 << 20, 126 << 20).occupancy;
        assert!((t.as_secs_f64() - (126u64 << 20) as f64 / 126e6).abs() < 0.001, "sequential at media rate: {t}");
        // Near the hub the same stream runs at half the rate (zoned recording).
        let inner = hdd.capacity() - (200 << 20);
        let first = hdd.service(Nanos::ZERO, DevOp::Read, inner, 1 << 20).occupancy;
        let t = hdd.service(first, DevOp::Read, inner + (1 << 20), 63 << 20).occupancy;
        assert!((t.as_secs_f64() - (63u64 << 20) as f64 / 63e6).abs() < 0.001, "inner zone at half the rate: {t}");
    }

    #[test]
    fn ssd_knobs_after_the_preset_name_change_its_fields() {
        let p = Presets::builtin();
        let s = p.ssd("vertex3:gc=fresh,nand_capacity=300GiB").unwrap();
        assert_eq!((s.gc, s.nand_capacity.as_deref()), (crate::GcMode::Fresh, Some("300GiB")));
        let e = p.ssd("vertex3:gc=sometimes").unwrap_err().to_string();
        assert!(e.contains("steady") && e.contains("measured"), "{e}");
        let e = p.ssd("vertex3:nand_capacity=100GB").unwrap_err().to_string();
        assert!(e.contains("nand_capacity"), "{e}");
    }

    /// A short forward skip costs the time for the gap to pass under the head, not a random
    /// access; a write arriving late waits for its sector to come round; the read-ahead buffer
    /// serves a read just past the previous one once the drive has had time to read it.
    #[test]
    fn hdd_short_skips_rotation_and_read_ahead() {
        let spec = Presets::builtin().hdd("wd5000aaks:write_cache=off").unwrap();
        let mut hdd = Hdd::new(&spec).unwrap();
        let track = hdd.track_bytes();
        assert!((track as f64 - 126e6 * 60.0 / 7200.0).abs() < 1.0, "{track}");
        let a = hdd.service(Nanos::ZERO, DevOp::Write, 40 << 30, 4096).occupancy;
        let skip = hdd.service(a, DevOp::Write, (40 << 30) + 8192, 4096).occupancy;
        let expect = (4096.0 + 4096.0) / 126e6;
        assert!((skip.as_secs_f64() - expect).abs() < 2e-6, "4 KiB gap + 4 KiB transfer: {skip}");
        // The same write 1 ms late: the sector has passed, it waits most of a rotation.
        let t = a.saturating_add(skip);
        let late = hdd.service(t.saturating_add(Nanos::from_millis(1)), DevOp::Write, (40 << 30) + 12288, 4096);
        assert!(late.occupancy.as_secs_f64() > 0.006, "waits for the platter: {}", late.occupancy);
        let mut hdd = Hdd::new(&spec).unwrap();
        let r = hdd.service(Nanos::ZERO, DevOp::Read, 1 << 30, 4096).occupancy;
        let ahead = hdd.service(r.saturating_add(Nanos::from_millis(2)), DevOp::Read, (1 << 30) + 65536, 4096);
        assert!(ahead.occupancy < Nanos::from_micros(200), "read-ahead hit: {}", ahead.occupancy);
    }

    #[test]
    fn ssd_model_has_iops_and_bandwidth_ceilings() {
        let spec = Presets::builtin().ssd("vertex3").unwrap().clone();
        let mut d = Device::new(Box::new(Ssd::new(&spec).unwrap()), None);
        let mut last = Nanos::ZERO;
        for i in 0..35_000u64 {
            last = d.submit(Nanos::ZERO, DevOp::Read, i * 4096, 4096);
        }
        assert!((last.as_secs_f64() - 1.0).abs() < 0.01, "35,000 random reads take about 1 s: {last}");
        let mut d = Device::new(Box::new(Ssd::new(&spec).unwrap()), None);
        let t = d.submit(Nanos::ZERO, DevOp::Write, 0, 500_000_000);
        assert!((t.as_secs_f64() - 1.0).abs() < 0.01, "500 MB written in about 1 s: {t}");
    }

    #[test]
    fn spin_down_counts_cycles_and_energy() {
        let spec = Presets::builtin().hdd("wd5000aaks").unwrap().clone();
        let mut d = Device::new(Box::new(Hdd::new(&spec).unwrap()), Some(Nanos::from_secs(5)));
        let a = d.submit(Nanos::ZERO, DevOp::Read, 0, 4096);
        // 3 s later: still spinning.
        let b = d.submit(Nanos::from_secs(3), DevOp::Read, 4096, 4096);
        assert!(b.0 - 3_000_000_000 < 1_000_000, "no spin-up");
        // 20 s later: spun down after 5 s, spins up for 7 s.
        let c = d.submit(Nanos::from_secs(23), DevOp::Read, 8192, 4096);
        assert!(c.as_secs_f64() >= 30.0, "pays the spin-up: {c}");
        let st = d.finish(Nanos::from_secs(100));
        assert_eq!(st.spin_ups, 1);
        assert_eq!(st.spin_downs, 2, "once in the gap, once in the idle tail");
        let standby = st.standby_ns as f64 / 1e9;
        assert!((standby - (15.0 + 65.0)).abs() < 0.1, "{standby}");
        let expect = 80.0 * 0.97 + 7.0 * 15.0 + (100.0 - 80.0 - 7.0) * 5.4;
        assert!((st.energy_j - expect).abs() < 0.5, "{} vs {expect}", st.energy_j);
        let _ = a;
    }
}
