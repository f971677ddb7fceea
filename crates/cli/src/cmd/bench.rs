//! `tierwise bench`: the speed and memory targets.

use anyhow::{Result, bail};

use crate::args::*;
use crate::{repo_root, write_file};

pub(crate) fn cmd_bench(a: BenchArgs) -> Result<()> {
    let mut o = tierwise_bench::BenchOpts {
        requests: a.requests,
        objects: a.objects,
        csv_lines: a.csv_lines,
        cachesim: a.cachesim,
        repeat: a.repeat,
        only: a.only,
        ..Default::default()
    };
    if let Some(d) = a.dir {
        o.dir = d;
    }
    if o.objects == 0 || o.requests == 0 || o.csv_lines == 0 {
        bail!("--requests, --objects and --csv-lines must be positive");
    }
    let repo = repo_root();
    let results = tierwise_bench::run(&o, &repo, &mut |s| eprintln!("bench: {s}")).map_err(anyhow::Error::msg)?;
    print!("{}", tierwise_bench::render(&results));
    if let Some(p) = a.json {
        write_file(&p, serde_json::to_string_pretty(&results)?.as_bytes())?;
    }
    Ok(())
}
