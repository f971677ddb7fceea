//! libCacheSim-style CSV traces with a column spec, e.g.
//! `csv:time-col=2,obj-id-col=5,obj-size-col=4,op-col=3,has-header=true,time-unit=us,id-unit=sector`
//! (the CloudPhysics CSV sample). Columns are 1-based, as in libCacheSim. Without `id-unit` the
//! trace is an object trace (id + size); with `id-unit=sector` or `byte` the id is an address
//! and the trace is a block trace. Ops: `r`, `read`, `get`, SCSI `28`/`88`/`a8`/`08` are reads;
//! `w`, `write`, `set`, `2a`/`8a`/`aa`/`0a` writes. Non-numeric ids are hashed (FNV-1a) when
//! `obj-id-is-num=false`.

use tierwise_core::ConfigError;
use tierwise_core::params::{ParamSpec, Params};

use super::parse::{Split, decimal_to_ns, trim, u64_dec};
use super::{IoOp, LineFormat, Lines, TraceError, TraceRecord};

/// The knobs of the csv format.
pub const PARAMS: &[ParamSpec] = &[
    ParamSpec { name: "obj-id-col", default: "(required)", help: "1-based column of the object id or address" },
    ParamSpec { name: "time-col", default: "0 (none)", help: "1-based column of the timestamp" },
    ParamSpec { name: "obj-size-col", default: "0 (size 1)", help: "1-based column of the size in bytes" },
    ParamSpec { name: "op-col", default: "0 (all reads)", help: "1-based column of the operation" },
    ParamSpec { name: "has-header", default: "false", help: "skip the first line" },
    ParamSpec { name: "delimiter", default: ",", help: "field separator: one character, or `tab` / `space`" },
    ParamSpec { name: "time-unit", default: "s", help: "s, ms, us or ns" },
    ParamSpec {
        name: "id-unit",
        default: "object",
        help: "object (object trace), sector or byte (block trace address)",
    },
    ParamSpec { name: "obj-id-is-num", default: "true", help: "false: hash non-numeric ids" },
];

/// A validated column spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CsvSpec {
    /// 0-based column indexes (`usize::MAX` = absent).
    pub time_col: usize,
    /// Object id / address column.
    pub id_col: usize,
    /// Size column.
    pub size_col: usize,
    /// Operation column.
    pub op_col: usize,
    /// Skip the first line.
    pub has_header: bool,
    /// Field separator (`b' '` splits on runs of blanks).
    pub delimiter: u8,
    /// Nanoseconds per time unit.
    pub time_unit_ns: u64,
    /// Bytes per id unit for block traces; 0 for object traces.
    pub id_unit_bytes: u64,
    /// Ids are integers.
    pub id_is_num: bool,
}

impl CsvSpec {
    /// Parses the knobs in `p` (owner `csv`).
    pub fn from_params(p: &mut Params) -> Result<CsvSpec, ConfigError> {
        p.declare(PARAMS);
        const NONE: usize = usize::MAX;
        let col = |v: u64| if v == 0 { NONE } else { (v - 1) as usize };
        if !p.has("obj-id-col") {
            return Err(p.inconsistent("obj-id-col is required (1-based column of the object id)"));
        }
        let id_col = col(p.u64_or("obj-id-col", 1, 1, 1024)?);
        let time_col = col(p.u64_or("time-col", 0, 0, 1024)?);
        let size_col = col(p.u64_or("obj-size-col", 0, 0, 1024)?);
        let op_col = col(p.u64_or("op-col", 0, 0, 1024)?);
        let has_header = p.bool("has-header")?;
        let delimiter = match p.string("delimiter")?.as_str() {
            "tab" | "\\t" => b'\t',
            "space" | " " => b' ',
            d if d.len() == 1 => d.as_bytes()[0],
            d => {
                return Err(ConfigError::InvalidValue {
                    owner: "csv".into(),
                    key: "delimiter".into(),
                    value: d.into(),
                    expected: "one character, `tab` or `space`".into(),
                });
            }
        };
        let time_unit_ns = [1_000_000_000, 1_000_000, 1_000, 1][p.choice("time-unit", &["s", "ms", "us", "ns"])?];
        let id_unit_bytes = [0, 512, 1][p.choice("id-unit", &["object", "sector", "byte"])?];
        let id_is_num = p.bool("obj-id-is-num")?;
        p.finish(&[PARAMS])?;
        Ok(CsvSpec {
            time_col,
            id_col,
            size_col,
            op_col,
            has_header,
            delimiter,
            time_unit_ns,
            id_unit_bytes,
            id_is_num,
        })
    }

    /// The spec for the CloudPhysics CSV (`version,time,op,size,lbn`).
    pub fn cloudphysics() -> CsvSpec {
        CsvSpec {
            time_col: 1,
            id_col: 4,
            size_col: 3,
            op_col: 2,
            has_header: true,
            delimiter: b',',
            time_unit_ns: 1_000,
            id_unit_bytes: 512,
            id_is_num: true,
        }
    }
}

/// The csv format with its column spec.
pub struct Csv {
    spec: CsvSpec,
    fields: Vec<(usize, usize)>,
}

impl Csv {
    /// Columns as in `spec`.
    pub fn new(spec: CsvSpec) -> Csv {
        Csv { spec, fields: Vec::with_capacity(16) }
    }
}

fn fnv1a(s: &[u8]) -> u64 {
    s.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

fn parse_op(s: &[u8]) -> Option<IoOp> {
    let s = trim(s);
    let lower: &[u8] = &s.to_ascii_lowercase();
    match lower {
        b"r" | b"read" | b"get" | b"gets" | b"28" | b"88" | b"a8" | b"08" | b"0x28" | b"0x88" | b"0xa8" | b"0x08" => {
            Some(IoOp::Read)
        }
        b"w" | b"write" | b"set" | b"2a" | b"8a" | b"aa" | b"0a" | b"0x2a" | b"0x8a" | b"0xaa" | b"0x0a" => {
            Some(IoOp::Write)
        }
        _ => None,
    }
}

impl LineFormat for Csv {
    fn parse(&mut self, l: &Lines) -> Result<Option<TraceRecord>, TraceError> {
        let spec = self.spec;
        if spec.has_header && l.line_no() == 1 {
            return Ok(None);
        }
        let line = l.current();
        self.fields.clear();
        let base = line.as_ptr() as usize;
        let mut push = |f: &[u8]| {
            let start = f.as_ptr() as usize - base;
            self.fields.push((start, start + f.len()));
        };
        if spec.delimiter == b' ' {
            super::parse::Words::new(line).for_each(&mut push);
        } else {
            Split::new(line, spec.delimiter).for_each(&mut push);
        }
        let fields = &self.fields;
        let get = |c: usize| fields.get(c).map(|&(a, b)| &line[a..b]);
        let id = match get(spec.id_col) {
            Some(raw) => match u64_dec(raw) {
                Some(v) => v,
                None if !spec.id_is_num && !trim(raw).is_empty() => fnv1a(trim(raw)),
                None => {
                    return Err(l.error("obj-id", "expected an integer id (set obj-id-is-num=false to hash strings)"));
                }
            },
            None => return Err(l.error("obj-id", format!("missing column {}", spec.id_col + 1))),
        };
        let optional = |col: usize| if col == usize::MAX { None } else { Some(get(col)) };
        let size = match optional(spec.size_col) {
            None => 1,
            Some(raw) => l.field(raw, "obj-size", u64_dec, "expected a byte count")?,
        };
        let time_ns = match optional(spec.time_col) {
            None => 0,
            Some(raw) => {
                l.field(raw, "time", |t| decimal_to_ns(t, spec.time_unit_ns), "expected a non-negative number")?
            }
        };
        let op = match optional(spec.op_col) {
            None => IoOp::Read,
            Some(raw) => l.field(raw, "op", parse_op, "expected r/w, read/write, get/set or a SCSI opcode")?,
        };
        let offset = if spec.id_unit_bytes == 0 {
            0
        } else {
            id.checked_mul(spec.id_unit_bytes).ok_or_else(|| l.error("obj-id", "address too large"))?
        };
        Ok(Some(TraceRecord { time_ns, op, volume: 0, offset, len: size, key: id }))
    }
}
