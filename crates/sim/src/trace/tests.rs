//! Every reader on real sample lines from `shared/traces` (bundled in `data/traces` and
//! `tests/fixtures`), against the statistics in PROVENANCE.md, and on malformed input.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::*;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read_all(path: &Path, format: Option<&str>) -> Result<(Vec<TraceRecord>, Trace), TraceError> {
    let mut t = open_trace(path, &OpenOptions { format: format.map(str::to_string), skip_bad_lines: false })?;
    let mut out = Vec::new();
    let mut r = TraceRecord::default();
    while t.next(&mut r)? {
        out.push(r);
    }
    Ok((out, t))
}

fn summary(recs: &[TraceRecord]) -> (usize, usize, u64, u64) {
    let reads = recs.iter().filter(|r| r.op == IoOp::Read).count();
    let rb = recs.iter().filter(|r| r.op == IoOp::Read).map(|r| r.len).sum();
    let wb = recs.iter().filter(|r| r.op == IoOp::Write).map(|r| r.len).sum();
    (recs.len(), reads, rb, wb)
}

fn write_file(dir: &tempfile::TempDir, name: &str, content: &[u8]) -> PathBuf {
    let p = dir.path().join(name);
    let mut f = std::fs::File::create(&p).unwrap();
    f.write_all(content).unwrap();
    p
}

#[test]
fn cloudphysics_vscsi_matches_provenance() {
    let (recs, t) = read_all(&repo().join("data/traces/cloudphysics_libcachesim.sample.vscsi.gz"), None).unwrap();
    assert_eq!(t.info().name, "vscsi");
    assert_eq!(summary(&recs), (113_872, 46_974, 1_797_412_352, 2_408_565_760));
    let span = recs.last().unwrap().time_ns - recs[0].time_ns;
    assert!((span as f64 / 1e9 - 7200.09).abs() < 0.01, "span {span}");
    // First record, as in the CSV form of the same trace: time 5633898368802 us, WRITE(10),
    // 512 bytes at sector 42932745.
    assert_eq!(
        recs[0],
        TraceRecord {
            time_ns: 5_633_898_368_802_000,
            op: IoOp::Write,
            volume: 0,
            offset: 42_932_745 * 512,
            len: 512,
            key: 42_932_745
        }
    );
}

#[test]
fn cloudphysics_csv_equals_vscsi() {
    let (csv, t) = read_all(&repo().join("crates/sim/tests/fixtures/cloudphysics_head200.csv"), None).unwrap();
    assert_eq!(t.info().name, "csv");
    assert!(!t.info().object_trace, "id-unit=sector makes it a block trace");
    let (vscsi, _) = read_all(&repo().join("data/traces/cloudphysics_libcachesim.sample.vscsi.gz"), None).unwrap();
    assert_eq!(csv.len(), 200);
    assert_eq!(&csv[..], &vscsi[..200]);
    // The explicit column spec gives the same.
    let spec = "csv:has-header=true,time-col=2,op-col=3,obj-size-col=4,obj-id-col=5,time-unit=us,id-unit=sector";
    let (explicit, _) =
        read_all(&repo().join("crates/sim/tests/fixtures/cloudphysics_head200.csv"), Some(spec)).unwrap();
    assert_eq!(explicit, csv);
}

#[test]
fn msr_excerpt_matches_provenance() {
    let (recs, t) = read_all(&repo().join("data/traces/msr_hm_0.excerpt1000.csv"), None).unwrap();
    assert_eq!(t.info().name, "msr");
    assert_eq!(summary(&recs), (1000, 508, 6_108_672, 3_580_928));
    assert_eq!(
        recs[0],
        TraceRecord {
            time_ns: 128_166_385_295_514_663 * 100,
            op: IoOp::Write,
            volume: 0,
            offset: 9_056_014_336,
            len: 2048,
            key: 9_056_014_336
        }
    );
    let span = (recs[999].time_ns - recs[0].time_ns) as f64 / 1e9;
    assert!((span - 127.2).abs() < 0.1, "{span}");
}

#[test]
fn systor_sample_matches_provenance() {
    let (recs, t) = read_all(&repo().join("data/traces/systor17_vdi.sample1000.csv.gz"), None).unwrap();
    assert_eq!(t.info().name, "systor");
    assert_eq!(summary(&recs), (999, 826, 36_355_584, 2_766_848));
    assert_eq!(recs[0].time_ns, 1_456_095_145_133_076_000);
}

#[test]
fn websearch_and_tpcc_mqsim_match_provenance() {
    let (recs, t) = read_all(&repo().join("data/traces/umass_websearch.mqsim_ascii.trace.gz"), None).unwrap();
    assert_eq!(t.info().name, "mqsim");
    let (n, reads, rb, _) = summary(&recs);
    assert_eq!((n, reads, rb), (24_783, 24_779, 382_085_120));
    assert_eq!(
        recs[0],
        TraceRecord {
            time_ns: 11_413_000,
            op: IoOp::Read,
            volume: 0,
            offset: 657_728 * 512,
            len: 16 * 512,
            key: 657_728
        }
    );
    let (recs, _) = read_all(&repo().join("data/traces/tpcc_unverified.mqsim_ascii.trace"), Some("mqsim")).unwrap();
    let (n, reads, _, _) = summary(&recs);
    assert_eq!((n, reads), (6_999, 4_381));
    assert_eq!(recs.iter().map(|r| r.volume).max(), Some(15), "16 devices");
}

#[test]
fn arc_oltp_complete_trace() {
    let (recs, t) = read_all(&repo().join("data/traces/arc_OLTP.lis.zst"), None).unwrap();
    assert_eq!(t.info().name, "arc-lis");
    assert!(!t.info().has_time);
    assert_eq!(recs.len(), 914_145);
    let mut blocks = std::collections::HashSet::new();
    for r in &recs {
        for b in r.offset / 512..(r.offset + r.len) / 512 {
            blocks.insert(b);
        }
    }
    assert_eq!(blocks.len(), 186_880, "ARC paper Table III");
}

#[test]
fn spc_fiu_blkparse_and_oracle_general_parse_their_documented_lines() {
    let dir = tempfile::tempdir().unwrap();
    let spc = write_file(&dir, "fin.spc", b"0,20941264,8192,W,0.551706\n1,1,512,r,0.6\n");
    let (r, _) = read_all(&spc, None).unwrap();
    assert_eq!(
        r[0],
        TraceRecord {
            time_ns: 551_706_000,
            op: IoOp::Write,
            volume: 0,
            offset: 20_941_264 * 512,
            len: 8192,
            key: 20_941_264
        }
    );
    assert_eq!(r[1].op, IoOp::Read);
    assert_eq!(r[1].volume, 1);

    let fiu = write_file(
        &dir,
        "homes.txt",
        b"89966527306290 4892 syslogd 904265560 8 W 6 0 531e779ba7d9d3d1a2d7ec6d3e0e3e1c\n",
    );
    let (r, t) = read_all(&fiu, None).unwrap();
    assert_eq!(t.info().name, "fiu");
    assert_eq!(
        r[0],
        TraceRecord {
            time_ns: 89_966_527_306_290,
            op: IoOp::Write,
            volume: 0,
            offset: 904_265_560 * 512,
            len: 4096,
            key: 904_265_560
        }
    );

    let blk = write_file(
        &dir,
        "sda.blkparse",
        b"Input file sda.blktrace.0 added\n  8,0    3        1     0.000000000  4162  Q  WS 2048 + 8 [kworker/u8:2]\n  8,0    3        2     0.000001000  4162  G  WS 2048 + 8 [kworker/u8:2]\n  8,0    3        3     0.000002000  4162  P   N [kworker/u8:2]\n  8,16   0        4     1.500000000  99  Q   R 100 + 16 [cat]\n  8,0    0        5     1.6  99  Q   FN [cat]\nCPU0 (8,0):\n Reads Queued:           0,        0KiB\n",
    );
    let (r, _) = read_all(&blk, None).unwrap();
    assert_eq!(r.len(), 2, "only Q events with data");
    assert_eq!(r[0], TraceRecord { time_ns: 0, op: IoOp::Write, volume: 0, offset: 2048 * 512, len: 4096, key: 2048 });
    assert_eq!(
        r[1],
        TraceRecord { time_ns: 1_500_000_000, op: IoOp::Read, volume: 1, offset: 100 * 512, len: 8192, key: 100 }
    );
    let (r, _) = read_all(&blk, Some("blkparse:action=G")).unwrap();
    assert_eq!(r.len(), 1);

    let mut og = Vec::new();
    oracle_general::write_record(&mut og, 7, 42, 4096, -1).unwrap();
    oracle_general::write_record(&mut og, 8, 43, 100, 5).unwrap();
    let p = write_file(&dir, "x.oracleGeneral.bin", &og);
    let (r, t) = read_all(&p, None).unwrap();
    assert!(t.info().object_trace);
    assert_eq!(r[1], TraceRecord { time_ns: 8_000_000_000, op: IoOp::Read, volume: 0, offset: 0, len: 100, key: 43 });
}

fn expect_err(dir: &tempfile::TempDir, name: &str, content: &[u8], format: Option<&str>, want: &[&str]) {
    let p = write_file(dir, name, content);
    let e = match read_all(&p, format) {
        Ok((r, _)) => panic!("{name}: expected an error, got {} records", r.len()),
        Err(e) => e.to_string(),
    };
    for w in want {
        assert!(e.contains(w), "{name}: `{e}` lacks `{w}`");
    }
}

#[test]
fn malformed_lines_name_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    expect_err(
        &dir,
        "a.csv",
        b"128166385295514663,hm,0,Write,9056014336,2048,2833\n128166385295514878,hm,0,Wirte,1,512,2617\n",
        Some("msr"),
        &["a.csv:2", "`Type`", "Read or Write"],
    );
    expect_err(&dir, "b.csv", b"128166385295514663,hm,0,Read,-5,2048,2833\n", Some("msr"), &["b.csv:1", "`Offset`"]);
    expect_err(&dir, "c.spc", b"0,1,512,x,0.1\n", None, &["c.spc:1", "`Opcode`"]);
    expect_err(&dir, "d.spc", b"0,1,512,r\n", None, &["`Timestamp`"]);
    expect_err(&dir, "e.fiu", b"1 2 p 3 8 Q 6 0 md5\n", Some("fiu"), &["e.fiu:1", "`op`"]);
    expect_err(&dir, "f.mqsim", b"1 0 5 16 1\n2 0 5 16 7\n", Some("mqsim"), &["f.mqsim:2", "`type`"]);
    expect_err(&dir, "g.lis", b"1 2 0 0\nx 1 0 1\n", Some("arc-lis"), &["g.lis:2", "`starting_block`"]);
    expect_err(&dir, "h.blkparse", b"  8,0 3 1 0.1 4162 Q WS 2048 - 8 [k]\n", None, &["h.blkparse:1", "`sectors`"]);
    expect_err(&dir, "i.csv", b"1,x\n", Some("csv:obj-id-col=2"), &["i.csv:1", "`obj-id`"]);
    expect_err(&dir, "j.csv", b"1,2\n", Some("csv:time-col=1"), &["obj-id-col is required"]);
    expect_err(&dir, "k.csv", b"1,2\n", Some("csv:obj-id-col=1,colour=blue"), &["colour", "obj-id-col"]);
    expect_err(
        &dir,
        "l.systor",
        b"Timestamp,Response,IOType,LUN,Offset,Size\n1.0,0.1,X,0,0,512\n",
        Some("systor"),
        &[":2", "`IOType`"],
    );
    expect_err(&dir, "m.vscsi", &[7u8; 100], None, &["m.vscsi", "version"]);
    expect_err(&dir, "m2.vscsi", &[1u8; 100], None, &["m2.vscsi: record 0", "`lbn`"]);
    let mut og = Vec::new();
    oracle_general::write_record(&mut og, 1, 1, 1, 1).unwrap();
    og.extend_from_slice(&[0; 5]);
    expect_err(&dir, "n.oracleGeneral", &og, None, &["truncated", "5 bytes"]);
    expect_err(&dir, "o.txt", b"hello world\n", None, &["o.txt", "--format", "msr"]);
    expect_err(&dir, "p.txt", b"", None, &["empty"]);
    expect_err(&dir, "q.txt", b"1 2 3 4\n", Some("nonsense"), &["unknown format `nonsense`"]);
    let e = read_all(Path::new("/nonexistent/trace.csv"), None).err().unwrap().to_string();
    assert!(e.contains("/nonexistent/trace.csv"), "{e}");
}

#[test]
fn skip_bad_lines_counts_and_continues() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_file(&dir, "x.mqsim", b"1 0 5 16 1\ngarbage here\n2 0 6 16 0\n3 0 x 1 1\n");
    let mut t = open_trace(&p, &OpenOptions { format: Some("mqsim".into()), skip_bad_lines: true }).unwrap();
    let mut r = TraceRecord::default();
    let mut n = 0;
    while t.next(&mut r).unwrap() {
        n += 1;
    }
    assert_eq!(n, 2);
    let (skipped, first) = t.skipped();
    assert_eq!(skipped, 2);
    assert!(first.unwrap().contains("x.mqsim:2"));
}

#[test]
fn compressed_and_plain_read_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let plain = std::fs::read(repo().join("data/traces/msr_hm_0.excerpt1000.csv")).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&plain).unwrap();
    let gz_path = write_file(&dir, "hm.csv.gz", &gz.finish().unwrap());
    let zst_path = write_file(&dir, "hm.csv.zst", &zstd::encode_all(&plain[..], 3).unwrap());
    let (a, _) = read_all(&repo().join("data/traces/msr_hm_0.excerpt1000.csv"), None).unwrap();
    let (b, _) = read_all(&gz_path, None).unwrap();
    let (c, _) = read_all(&zst_path, None).unwrap();
    assert_eq!(a, b);
    assert_eq!(a, c);
}

mod no_panics {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Arbitrary bytes through every reader: errors are fine, panics are not.
        #[test]
        fn readers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600), lines in proptest::collection::vec("[ 0-9a-zA-Z,.+\\[\\]-]{0,60}", 0..12)) {
            let dir = tempfile::tempdir().unwrap();
            let text = lines.join("\n");
            for f in FORMATS {
                let spec = if f.name == "csv" { "csv:obj-id-col=2,time-col=1,obj-size-col=3,op-col=4".to_string() } else { f.name.to_string() };
                for (i, content) in [bytes.as_slice(), text.as_bytes()].into_iter().enumerate() {
                    let p = write_file(&dir, &format!("t{i}"), content);
                    if let Ok(mut t) = open_trace(&p, &OpenOptions { format: Some(spec.clone()), skip_bad_lines: i == 0 }) {
                        let mut r = TraceRecord::default();
                        for _ in 0..1000 {
                            match t.next(&mut r) {
                                Ok(true) => {}
                                _ => break,
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A comma-separated trace whose first field is all digits was taken for blkparse and read as
/// 0 requests, silently: detection now needs blkparse's device field and its columns, and a
/// text file that yields no request is an error naming the format and the formats allowed.
#[test]
fn numeric_csv_is_not_blkparse_and_no_requests_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let csv = write_file(&dir, "numbers.csv", b"1,2,3,4\n5,6,7,8\n");
    let e = read_all(&csv, None).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.contains("cannot tell the format") && e.contains("blkparse, vscsi"), "{e}");
    let e = read_all(&csv, Some("blkparse")).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.contains("2 non-empty lines and not one blkparse request") && e.contains("--format"), "{e}");
    let blk = write_file(&dir, "t.blkparse.txt", b"8,0 3 1 0.000000001 697 Q W 223490 + 8 [fio]\n");
    assert_eq!(read_all(&blk, None).expect("blkparse").0.len(), 1);
    // Every line malformed and skipped: an error too, with the first problem.
    let mut t = open_trace(&csv, &OpenOptions { format: Some("msr".into()), skip_bad_lines: true }).expect("opens");
    let e = t.for_each(u64::MAX, |_| -> Result<(), TraceError> { Ok(()) }).expect_err("nothing read").to_string();
    assert!(e.contains("all 2 records were malformed"), "{e}");
    // An empty file is still an empty trace.
    let empty = write_file(&dir, "empty.csv", b"");
    assert!(read_all(&empty, Some("msr")).is_ok_and(|(r, _)| r.is_empty()));
}
