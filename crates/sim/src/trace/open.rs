//! Opening a trace: transparent gzip/zstd, format detection from the name or the content, an
//! explicit `--format` spec overriding both.

use std::fs::File;
use std::io::{BufReader, Cursor, Read};
use std::path::Path;
use std::sync::Arc;

use tierwise_core::params::Params;

use super::arc_lis::ArcLis;
use super::binary::Records;
use super::blkparse::Blkparse;
use super::csv::{Csv, CsvSpec};
use super::fiu::Fiu;
use super::mqsim::Mqsim;
use super::msr::Msr;
use super::oracle_general::{OracleGeneralReader, RECORD_SIZE};
use super::parse::{Split, Words, trim, u64_dec};
use super::spc::Spc;
use super::systor::Systor;
use super::vscsi::{VscsiReader, detect_version};
use super::{FORMATS, FormatInfo, LineReader, Lines, Trace, TraceError, TraceReader, format_info};

/// How to open a trace.
#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    /// A format spec (`msr`, `csv:obj-id-col=2,...`, `blkparse:action=D`); detected when absent.
    pub format: Option<String>,
    /// Count and skip malformed lines instead of stopping at the first.
    pub skip_bad_lines: bool,
}

const HEAD: usize = 64 * 1024;

fn io_err(path: &str) -> impl Fn(std::io::Error) -> TraceError + '_ {
    move |source| TraceError::Io { path: path.to_string(), source }
}

/// Opens the file and undoes gzip/zstd compression (detected by magic number). Returns the
/// decompressed stream with its first bytes already read into `head`.
fn open_stream(path: &Path) -> Result<(Vec<u8>, Box<dyn Read + Send>), TraceError> {
    let name = path.display().to_string();
    let file = File::open(path).map_err(io_err(&name))?;
    decompress(&name, Box::new(file))
}

fn decompress(name: &str, mut file: Box<dyn Read + Send>) -> Result<(Vec<u8>, Box<dyn Read + Send>), TraceError> {
    let mut magic = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        let n = file.read(&mut magic[got..]).map_err(io_err(name))?;
        if n == 0 {
            break;
        }
        got += n;
    }
    let raw: Box<dyn Read + Send> = Box::new(Cursor::new(magic[..got].to_vec()).chain(file));
    let mut stream: Box<dyn Read + Send> = if got >= 2 && magic[..2] == [0x1f, 0x8b] {
        Box::new(flate2::read::MultiGzDecoder::new(BufReader::with_capacity(1 << 16, raw)))
    } else if got == 4 && magic == [0x28, 0xb5, 0x2f, 0xfd] {
        Box::new(zstd::stream::read::Decoder::new(raw).map_err(io_err(name))?)
    } else {
        raw
    };
    let mut head = Vec::with_capacity(HEAD);
    (&mut stream).take(HEAD as u64).read_to_end(&mut head).map_err(io_err(name))?;
    Ok((head, stream))
}

/// Opens a (possibly gzip- or zstd-compressed) text file as numbered lines.
pub fn open_lines(path: &Path) -> Result<super::Lines, TraceError> {
    let (head, rest) = open_stream(path)?;
    let reader = std::io::BufReader::with_capacity(1 << 16, Cursor::new(head).chain(rest));
    Ok(super::Lines::new(Box::new(reader), std::sync::Arc::from(path.display().to_string())))
}

/// The name without compression suffixes, lower-cased.
fn base_name(path: &Path) -> String {
    let mut n = path.file_name().map(|s| s.to_string_lossy().to_lowercase()).unwrap_or_default();
    for suffix in [".gz", ".zst", ".zstd"] {
        if let Some(stripped) = n.strip_suffix(suffix) {
            n = stripped.to_string();
        }
    }
    n
}

fn detect_by_name(name: &str) -> Option<&'static str> {
    if name.ends_with(".vscsi") {
        Some("vscsi")
    } else if name.contains("oraclegeneral") {
        Some("oracle-general")
    } else if name.ends_with(".lis") {
        Some("arc-lis")
    } else if name.ends_with(".spc") {
        Some("spc")
    } else if name.contains("blkparse") || name.ends_with(".blktrace.txt") {
        Some("blkparse")
    } else if name.contains("mqsim") {
        Some("mqsim")
    } else {
        None
    }
}

fn is_binary(head: &[u8]) -> bool {
    head.iter().take(4096).any(|&b| b == 0 || (b < 0x09) || (0x0e..0x20).contains(&b))
}

/// Guesses a text format from its first lines.
fn detect_text(head: &[u8]) -> Option<String> {
    let mut lines =
        head.split(|&b| b == b'\n').map(|l| l.strip_suffix(b"\r").unwrap_or(l)).filter(|l| !trim(l).is_empty());
    let first = lines.next()?;
    let lower = first.to_ascii_lowercase();
    if lower.starts_with(b"version,time,op,size,lbn") {
        return Some("cloudphysics-csv".into());
    }
    if lower.starts_with(b"timestamp,response,iotype") {
        return Some("systor".into());
    }
    // Judge on a data line (skip one header line if the first field is not numeric).
    let line =
        if first.first().is_some_and(u8::is_ascii_digit) || first.starts_with(b" ") { first } else { lines.next()? };
    let commas: Vec<&[u8]> = Split::new(line, b',').collect();
    if commas.len() >= 7 && (commas[3].eq_ignore_ascii_case(b"read") || commas[3].eq_ignore_ascii_case(b"write")) {
        return Some("msr".into());
    }
    if commas.len() >= 5 && matches!(trim(commas[3]), [b'r' | b'R' | b'w' | b'W']) && u64_dec(commas[1]).is_some() {
        return Some("spc".into());
    }
    let words: Vec<&[u8]> = Words::new(line).collect();
    // blkparse: `8,0  3  1  0.000000000  697  Q  W 223490 + 8 [fio]`; a comma-separated line of
    // numbers is one word too, so ask for the device's one comma and the fields after it.
    let device =
        |w: &&[u8]| w.iter().filter(|&&b| b == b',').count() == 1 && w.iter().all(|&b| b.is_ascii_digit() || b == b',');
    if words.len() >= 7 && words.first().is_some_and(device) {
        return Some("blkparse".into());
    }
    if words.len() >= 8 && matches!(words[5], [b'R' | b'r' | b'W' | b'w']) {
        return Some("fiu".into());
    }
    let numeric = words.iter().all(|w| u64_dec(w).is_some());
    if numeric && words.len() == 5 && matches!(words[4], b"0" | b"1") {
        return Some("mqsim".into());
    }
    if numeric && words.len() == 4 {
        return Some("arc-lis".into());
    }
    None
}

fn unknown_format(path: &str, why: &str) -> TraceError {
    TraceError::Format {
        path: path.to_string(),
        reason: format!(
            "{why}; name the format with --format, one of: {}",
            FORMATS.iter().map(|f| f.name).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// Opens `path` as a trace.
pub fn open_trace(path: &Path, opts: &OpenOptions) -> Result<Trace, TraceError> {
    let (head, stream) = open_stream(path)?;
    open_from(path, head, stream, opts)
}

/// Reads a trace held in memory, named `name` (the name drives format detection like a file
/// name). For fuzzing and tests.
pub fn open_bytes(name: &str, bytes: Vec<u8>, opts: &OpenOptions) -> Result<Trace, TraceError> {
    let (head, stream) = decompress(name, Box::new(Cursor::new(bytes)))?;
    open_from(Path::new(name), head, stream, opts)
}

fn open_from(
    path: &Path,
    head: Vec<u8>,
    stream: Box<dyn Read + Send>,
    opts: &OpenOptions,
) -> Result<Trace, TraceError> {
    let name = path.display().to_string();
    let spec = match &opts.format {
        Some(f) => f.clone(),
        None => match detect_by_name(&base_name(path)) {
            Some(f) => f.to_string(),
            None if head.is_empty() => return Err(unknown_format(&name, "the file is empty")),
            None if is_binary(&head) => {
                if detect_version(&head).is_some() {
                    "vscsi".into()
                } else if head.len() >= RECORD_SIZE {
                    "oracle-general".into()
                } else {
                    return Err(unknown_format(&name, "binary content of no known format"));
                }
            }
            None => detect_text(&head)
                .ok_or_else(|| unknown_format(&name, "cannot tell the format from the first lines"))?,
        },
    };
    let (fmt, mut params) =
        Params::parse(&spec).map_err(|e| TraceError::Format { path: name.clone(), reason: e.to_string() })?;
    let fmt = fmt.to_ascii_lowercase();
    let spec_err = |e: tierwise_core::ConfigError| TraceError::Format { path: name.clone(), reason: e.to_string() };
    let shared: Arc<str> = Arc::from(name.as_str());
    let stream: Box<dyn Read + Send> = Box::new(Cursor::new(head).chain(stream));
    let lines =
        |stream: Box<dyn Read + Send>| Lines::new(Box::new(BufReader::with_capacity(1 << 20, stream)), shared.clone());
    let (reader, info): (Box<dyn TraceReader>, FormatInfo) = match fmt.as_str() {
        "msr" => (Box::new(LineReader::new(lines(stream), Msr::default())), info("msr")),
        "spc" => (Box::new(LineReader::new(lines(stream), Spc)), info("spc")),
        "fiu" => (Box::new(LineReader::new(lines(stream), Fiu::default())), info("fiu")),
        "mqsim" => (Box::new(LineReader::new(lines(stream), Mqsim)), info("mqsim")),
        "arc-lis" => (Box::new(LineReader::new(lines(stream), ArcLis)), info("arc-lis")),
        "systor" => (Box::new(LineReader::new(lines(stream), Systor)), info("systor")),
        "blkparse" => {
            let action = params.string_or("action", "Q");
            params.finish(&[]).map_err(spec_err)?;
            (Box::new(LineReader::new(lines(stream), Blkparse::new(&action))), info("blkparse"))
        }
        "csv" | "cloudphysics-csv" => {
            let spec = if fmt == "csv" {
                CsvSpec::from_params(&mut params).map_err(spec_err)?
            } else {
                CsvSpec::cloudphysics()
            };
            let mut i = info("csv");
            i.object_trace = spec.id_unit_bytes == 0;
            i.has_time = spec.time_col != usize::MAX;
            (Box::new(LineReader::new(lines(stream), Csv::new(spec))), i)
        }
        "vscsi" => (Box::new(VscsiReader::new(Records::new(stream, 32, shared.clone()))?), info("vscsi")),
        "oracle-general" | "oraclegeneral" => (
            Box::new(OracleGeneralReader::new(Records::new(stream, RECORD_SIZE, shared.clone()))),
            info("oracle-general"),
        ),
        other => return Err(unknown_format(&name, &format!("unknown format `{other}`"))),
    };
    if !matches!(fmt.as_str(), "blkparse" | "csv") {
        params.finish(&[]).map_err(spec_err)?;
    }
    Ok(Trace::new(reader, info, &name, opts.skip_bad_lines))
}

fn info(name: &str) -> FormatInfo {
    format_info(name).copied().unwrap_or(FORMATS[0])
}
