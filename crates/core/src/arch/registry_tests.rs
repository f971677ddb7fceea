//! The registry against behaviour: what each architecture declares (its capabilities, its
//! knobs' documented defaults) is what it does.

use super::tests::OBJ;
use crate::collector::COLLECTORS;
use crate::{Clock, Engine, ManualClock, Nanos, ObjectId, Request, Setup, build_arch};

/// The copies an architecture declares in the registry are the copies it keeps: a single-copy
/// architecture never holds an object on both tiers, a cache never holds the only copy of a
/// clean object on the SSD, and each baseline keeps everything on its device.
#[test]
fn declared_capabilities_match_the_placements_kept() {
    use super::{Copies, CostClass};
    for a in super::ARCHITECTURES.iter().filter(|a| a.caps.runs_on_blocks()) {
        let clock = ManualClock::new();
        let setup = Setup { fast_capacity: 16 * OBJ, slow_capacity: 0, object_size: OBJ };
        let mut e =
            Engine::new(build_arch(a.name, &setup).unwrap_or_else(|err| panic!("{}: {err}", a.name)), clock.clone());
        e.set_instant(true);
        let mut on_fast_seen = false;
        for round in 0..200u64 {
            for i in 0..24u64 {
                // Hot objects 0..8 every round, the rest now and then; a write in ten.
                if i >= 8 && (round + i) % 5 != 0 {
                    continue;
                }
                clock.advance(Nanos::from_secs(1));
                while e.next_deadline().is_some_and(|d| d <= clock.now()) {
                    e.tick();
                }
                let req = if (round + i) % 10 == 0 {
                    Request::write(ObjectId(i), 0, OBJ)
                } else {
                    Request::read(ObjectId(i), 0, OBJ)
                };
                let served = e.access(&req);
                // A block front end holds RAM copies only as the architecture declares: none,
                // or only of objects being moved.
                let ram = served.keep_in_ram || served.touches.contains(crate::Level::Ram);
                match a.caps.ram_level {
                    super::RamLevel::None => assert!(!ram, "{} declares no RAM level but answered {served:?}", a.name),
                    super::RamLevel::MoveCopies => assert!(
                        !served.keep_in_ram && (!ram || e.placement(req.obj).moving),
                        "{} declares RAM copies during moves only, but answered {served:?} for {:?}",
                        a.name,
                        e.placement(req.obj)
                    ),
                    super::RamLevel::Cache | super::RamLevel::WriteBuffer => {}
                }
                for obj in 0..24u64 {
                    let p = e.placement(ObjectId(obj));
                    if p.moving {
                        continue;
                    }
                    // HCA and the L2ARC-like cache hold hot objects in their RAM level first (64 MiB
                    // by default: all of these).
                    on_fast_seen |= p.on_fast || p.in_ram;
                    let both = p.on_fast && p.on_slow;
                    match (a.caps.copies, a.caps.cost) {
                        (_, CostClass::SsdOnly) => assert!(p.on_fast && !p.on_slow, "{}: {obj} {p:?}", a.name),
                        (_, CostClass::HddOnly) => assert!(p.on_slow && !p.on_fast, "{}: {obj} {p:?}", a.name),
                        (Copies::One, _) => assert!(!both, "{} declares one copy: object {obj} {p:?}", a.name),
                        (Copies::SsdCopies, _) => assert!(
                            p.on_slow || p.dirty || !p.on_fast,
                            "{} declares SSD copies: object {obj} only on the SSD and clean {p:?}",
                            a.name
                        ),
                        (Copies::PerVolume, _) => {}
                    }
                }
            }
        }
        if a.caps.copies == Copies::SsdCopies {
            // A cache copies hot objects (tiering may wait for its period: static tiering's is 24 h).
            assert!(on_fast_seen, "{}: nothing ever reached the SSD", a.name);
        }
    }
}

/// Every knob's documented default (what `tierwise list` prints) is the value the code uses:
/// an architecture built with no knobs equals one built with every knob set to its documented
/// default. Catches defaults written in two places that drift apart.
#[test]
fn documented_defaults_are_the_defaults_used() {
    // An SSD large enough that no default is capped by its size (GreenDM's LT and HT are, on
    // SSDs of fewer than 512 extents: their help says so).
    let setup = Setup { fast_capacity: 1 << 30, slow_capacity: 0, object_size: OBJ };
    let file_setup = Setup { fast_capacity: 1 << 30, slow_capacity: 0, object_size: 0 };
    let mut drifted = Vec::new();
    for a in super::ARCHITECTURES {
        // Block architectures with an extent knob run on objects of that size, as front ends
        // split requests (`extent_size_of`).
        let extent_setup = Setup { object_size: super::extent_size_of(a.name).unwrap_or(OBJ), ..setup };
        let setup = if a.caps.granularity == super::Granularity::File { &file_setup } else { &extent_setup };
        let base = match build_arch(a.name, setup) {
            Ok(arch) => format!("{arch:?}"),
            Err(_) => continue, // needs a knob without a default (type-aware's volumes)
        };
        let knobs: Vec<String> = a
            .params
            .iter()
            .chain(a.extra_params)
            // Descriptive defaults ("(the block size)") are not values.
            .filter(|p| !p.default.is_empty() && !p.default.starts_with('(') && p.name != "collector")
            .map(|p| format!("{}={}", p.name, p.default))
            .collect();
        if knobs.is_empty() {
            continue;
        }
        let spec = format!("{}:{}", a.name, knobs.join(","));
        match build_arch(&spec, setup) {
            Ok(arch) if format!("{arch:?}") == base => {}
            Ok(_) => drifted.push(format!("{}: built differently with its documented defaults ({spec})", a.name)),
            Err(e) => drifted.push(format!("{}: its documented defaults are rejected: {e}", a.name)),
        }
    }
    // The same for every collector's knobs, inside the generic cache.
    for c in COLLECTORS {
        let knobs: Vec<String> = c
            .params
            .iter()
            .filter(|p| !p.default.is_empty() && !p.default.starts_with('('))
            .map(|p| format!("{}={}", p.name, p.default))
            .collect();
        if knobs.is_empty() {
            continue;
        }
        let plain = format!("cache:collector={}", c.name);
        let spec = format!("{plain},{}", knobs.join(","));
        let built = |s: &str| build_arch(s, &setup).map(|a| format!("{a:?}"));
        match (built(&plain), built(&spec)) {
            (Ok(a), Ok(b)) if a == b => {}
            (Ok(_), Ok(_)) => {
                drifted.push(format!("collector {}: built differently with its documented defaults", c.name))
            }
            (_, Err(e)) | (Err(e), _) => drifted.push(format!("collector {}: {e}", c.name)),
        }
    }
    assert!(drifted.is_empty(), "{}", drifted.join("\n"));
}

/// A full spec fills in every documented default, builds the same architecture as the spec it
/// came from, and two spellings of one policy compare equal.
#[test]
fn full_specs_name_every_knob_and_build_the_same() {
    // Small SSDs too: a default that follows the SSD's size must not be recorded as a literal
    // (a served greendm-tiering device on 2 MiB recorded lt=64 and could not start again).
    for fast_capacity in [1 << 30, 2 << 20, 8 << 20] {
        let setup = Setup { fast_capacity, slow_capacity: 0, object_size: OBJ };
        let file_setup = Setup { fast_capacity, slow_capacity: 0, object_size: 0 };
        for a in super::ARCHITECTURES {
            let extent_setup = Setup { object_size: super::extent_size_of(a.name).unwrap_or(OBJ), ..setup };
            let setup = if a.caps.granularity == super::Granularity::File { &file_setup } else { &extent_setup };
            let Ok(base) = build_arch(a.name, setup).map(|x| format!("{x:?}")) else { continue };
            let full = super::full_spec(a.name).expect("a full spec");
            assert_eq!(
                build_arch(&full, setup).map(|x| format!("{x:?}")).map_err(|e| e.to_string()),
                Ok(base),
                "{full} on {fast_capacity} bytes of SSD"
            );
            assert_eq!(super::full_spec(&full).ok(), Some(full.clone()), "a full spec is its own full spec");
        }
    }
    assert!(super::same_policy("cache:mode=write-back", "cache:collector=lru,mode=write-back"));
    assert!(!super::same_policy("cache:mode=write-back", "cache:mode=write-through"));
    assert!(super::full_spec("file-write-back").unwrap().contains("dirty-high="));
}

/// Each architecture declares which object sizes it places; an extent knob's size is read
/// through the declaration, not a list of knob names, and every architecture that refuses
/// variable-size objects says so in its capabilities.
#[test]
fn object_sizes_are_declared_and_extent_sizes_read_from_them() {
    use super::{ArchSpec, ObjectSizes};
    let es = |s: &str| ArchSpec::parse(s).ok().and_then(|a| a.extent_size());
    assert_eq!(es("greendm-tiering"), Some(64 << 10));
    assert_eq!(es("greendm-caching:es=16KiB"), Some(16 << 10));
    assert_eq!(es("otf-ast:sub-lun=1MiB"), Some(1 << 20));
    assert_eq!(es("bcache-like"), None);
    assert_eq!(ArchSpec::parse("greendm-tiering:es=16KiB").map(|a| a.object_size_for(4096)).ok(), Some(16 << 10));
    assert!(ArchSpec::parse("nope").is_err_and(|e| e.to_string().contains("bcache-like")));
    let file_setup = Setup { fast_capacity: 1 << 30, slow_capacity: 0, object_size: 0 };
    for a in super::ARCHITECTURES {
        let variable_ok = build_arch(a.name, &file_setup).is_ok();
        let block_setup = Setup { object_size: super::extent_size_of(a.name).unwrap_or(4096), ..file_setup };
        if !variable_ok && build_arch(a.name, &block_setup).is_err() {
            continue; // needs knobs to build at all (type-aware's volumes)
        }
        assert_eq!(variable_ok, a.caps.takes_variable_objects(), "{}: builds with variable objects", a.name);
        if let ObjectSizes::Extent(knob) = a.caps.objects {
            assert!(
                a.params.iter().chain(a.extra_params).any(|p| p.name == knob),
                "{}: documents its extent knob {knob}",
                a.name
            );
        }
    }
}
