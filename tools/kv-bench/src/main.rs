//! `kv-bench`: the same single-threaded workload on hotledger's engine, redb and (with the
//! `rocksdb` feature) RocksDB. It loads N keys of 16 bytes with 100-byte values in random
//! order, then runs each workload for a fixed time, reporting throughput per second and
//! per-operation latency percentiles (separately while a checkpoint runs and between). It
//! writes `summary.csv`, `timeseries.csv` and `summary.md` to the output directory; `plot.py`
//! turns the time series into a PNG.
//!
//! Durability model, the same for every engine: updates are not made durable one by one (in
//! hotledger the replicated log does that); each engine makes its state durable in the
//! background or periodically: hotledger by checkpoints, redb by an `Immediate` commit every
//! checkpoint interval (other commits use `Durability::None`), RocksDB by its own memtable
//! flushes and compactions (WAL off).

mod engines;
mod report;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_distr::Distribution;

use engines::BenchEngine;

pub const KEY_LEN: usize = 16;
pub const VALUE_LEN: usize = 100;

#[derive(Clone, Debug)]
pub struct Config {
    engines: Vec<String>,
    workloads: Vec<Workload>,
    keys: u64,
    duration: Duration,
    out: PathBuf,
    pool_mb: usize,
    page_size: u32,
    checkpoint_interval: Duration,
    /// hotledger: spread each checkpoint's writes over this long (0 = full speed).
    checkpoint_spread: Duration,
    io: kv::IoMode,
    redb_batch: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    UpdateUniform,
    UpdateZipf,
    ReadUniform,
    ReadZipf,
}

impl Workload {
    fn parse(name: &str) -> Option<Workload> {
        match name {
            "update-uniform" => Some(Workload::UpdateUniform),
            "update-zipf" => Some(Workload::UpdateZipf),
            "read-uniform" => Some(Workload::ReadUniform),
            "read-zipf" => Some(Workload::ReadZipf),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Workload::UpdateUniform => "update-uniform",
            Workload::UpdateZipf => "update-zipf",
            Workload::ReadUniform => "read-uniform",
            Workload::ReadZipf => "read-zipf",
        }
    }

    fn is_update(self) -> bool {
        matches!(self, Workload::UpdateUniform | Workload::UpdateZipf)
    }

    fn is_zipf(self) -> bool {
        matches!(self, Workload::UpdateZipf | Workload::ReadZipf)
    }
}

const USAGE: &str = "usage: kv-bench [--engines hotledger,redb,rocksdb] [--workloads update-uniform,update-zipf,read-uniform,read-zipf]
                [--keys N] [--duration-s S] [--out DIR] [--pool-mb MB] [--page-size BYTES]
                [--checkpoint-interval-s S] [--checkpoint-spread-ms MS] [--io auto|uring|portable] [--redb-batch OPS]";

fn parse_args() -> Result<Config, String> {
    let mut config = Config {
        engines: vec!["hotledger".into(), "redb".into()],
        workloads: vec![
            Workload::UpdateUniform,
            Workload::UpdateZipf,
            Workload::ReadUniform,
            Workload::ReadZipf,
        ],
        keys: 1_000_000,
        duration: Duration::from_secs(300),
        out: PathBuf::from("kv-bench-results"),
        pool_mb: 1024,
        page_size: 4096,
        checkpoint_interval: Duration::from_secs(5),
        checkpoint_spread: Duration::from_millis(2500),
        io: kv::IoMode::Auto,
        redb_batch: 1000,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--help" || flag == "-h" {
            println!("{USAGE}");
            std::process::exit(0);
        }
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number = |value: &str| {
            value
                .parse::<u64>()
                .map_err(|_| format!("{flag}: not a number: {value}"))
        };
        match flag.as_str() {
            "--engines" => config.engines = value.split(',').map(str::to_string).collect(),
            "--workloads" => {
                config.workloads = value
                    .split(',')
                    .map(|name| {
                        Workload::parse(name).ok_or_else(|| format!("unknown workload {name}"))
                    })
                    .collect::<Result<_, _>>()?
            }
            "--keys" => config.keys = number(&value)?,
            "--duration-s" => config.duration = Duration::from_secs(number(&value)?),
            "--out" => config.out = PathBuf::from(value),
            "--pool-mb" => config.pool_mb = number(&value)? as usize,
            "--page-size" => config.page_size = number(&value)? as u32,
            "--checkpoint-interval-s" => {
                config.checkpoint_interval = Duration::from_secs(number(&value)?)
            }
            "--checkpoint-spread-ms" => {
                config.checkpoint_spread = Duration::from_millis(number(&value)?)
            }
            "--io" => {
                config.io = kv::IoMode::parse(&value)
                    .ok_or_else(|| format!("--io: unknown mode {value}"))?
            }
            "--redb-batch" => config.redb_batch = number(&value)?.max(1) as usize,
            other => return Err(format!("unknown flag {other}\n{USAGE}")),
        }
    }
    Ok(config)
}

pub fn key_of(id: u64) -> [u8; KEY_LEN] {
    let mut key = [0u8; KEY_LEN];
    key[..4].copy_from_slice(b"acct");
    key[8..].copy_from_slice(&id.to_be_bytes());
    key
}

/// The key ids a workload touches, precomputed so the generator costs nothing while timed.
/// Zipf ranks are scattered over the key space by a bijective multiplication, so hot keys do
/// not sit on the same few pages.
fn key_sequence(workload: Workload, keys: u64, length: usize) -> Vec<u64> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    if workload.is_zipf() {
        let zipf = rand_distr::Zipf::new(keys, 0.99).expect("valid zipf parameters");
        let multiplier = largest_coprime_multiplier(keys);
        (0..length)
            .map(|_| ((zipf.sample(&mut rng) as u64 - 1) * multiplier) % keys)
            .collect()
    } else {
        let uniform = rand::distributions::Uniform::new(0, keys);
        (0..length).map(|_| uniform.sample(&mut rng)).collect()
    }
}

fn largest_coprime_multiplier(keys: u64) -> u64 {
    fn gcd(a: u64, b: u64) -> u64 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    let mut multiplier = 2_654_435_761 % keys.max(2);
    while gcd(multiplier, keys) != 1 {
        multiplier += 1;
    }
    multiplier
}

/// What one workload run measured.
pub struct RunResult {
    pub engine: String,
    pub workload: Workload,
    /// Operations completed in each whole second.
    pub per_second: Vec<u64>,
    /// Whether a checkpoint (or flush) was running at the end of each second.
    pub checkpointing: Vec<bool>,
    pub latency_all: Histogram<u64>,
    pub latency_during_checkpoint: Histogram<u64>,
    pub latency_between_checkpoints: Histogram<u64>,
    pub notes: String,
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid histogram bounds")
}

fn run_workload(engine: &mut dyn BenchEngine, workload: Workload, config: &Config) -> RunResult {
    let sequence = key_sequence(workload, config.keys, 1 << 24);
    let mut value = [7u8; VALUE_LEN];
    let mut result = RunResult {
        engine: engine.name().to_string(),
        workload,
        per_second: Vec::new(),
        checkpointing: Vec::new(),
        latency_all: histogram(),
        latency_during_checkpoint: histogram(),
        latency_between_checkpoints: histogram(),
        notes: String::new(),
    };
    engine.begin_workload();
    let started = Instant::now();
    let mut second_end = started + Duration::from_secs(1);
    let mut ops_this_second = 0u64;
    let mut cursor = 0usize;
    let mut counter = 0u64;
    let mut in_checkpoint = engine.housekeeping();
    loop {
        for _ in 0..256 {
            let key = key_of(sequence[cursor]);
            cursor = (cursor + 1) & (sequence.len() - 1);
            let begin = Instant::now();
            if workload.is_update() {
                counter += 1;
                value[..8].copy_from_slice(&counter.to_le_bytes());
                engine.update(&key, &value);
            } else {
                engine.read(&key);
            }
            let nanos = begin.elapsed().as_nanos() as u64;
            let nanos = nanos.max(1);
            result.latency_all.saturating_record(nanos);
            if in_checkpoint {
                result.latency_during_checkpoint.saturating_record(nanos);
            } else {
                result.latency_between_checkpoints.saturating_record(nanos);
            }
        }
        ops_this_second += 256;
        in_checkpoint = engine.housekeeping();
        let now = Instant::now();
        if now >= second_end {
            result.per_second.push(ops_this_second);
            result.checkpointing.push(in_checkpoint);
            ops_this_second = 0;
            second_end += Duration::from_secs(1);
            if now.duration_since(started) >= config.duration {
                break;
            }
        }
    }
    result.notes = engine.notes();
    result
}

fn main() {
    let config = match parse_args() {
        Ok(config) => config,
        Err(message) => {
            eprintln!("kv-bench: {message}");
            std::process::exit(2);
        }
    };
    if let Err(err) = std::fs::create_dir_all(&config.out) {
        eprintln!("kv-bench: cannot create {}: {err}", config.out.display());
        std::process::exit(1);
    }
    let mut ids: Vec<u64> = (0..config.keys).collect();
    ids.shuffle(&mut rand::rngs::StdRng::seed_from_u64(7));
    let mut results = Vec::new();
    for name in &config.engines {
        let data_dir = config.out.join(format!("{name}.data"));
        let _ = std::fs::remove_dir_all(&data_dir);
        std::fs::create_dir_all(&data_dir).expect("create the engine's data directory");
        let mut engine = match engines::open(name, &data_dir, &config) {
            Ok(engine) => engine,
            Err(message) => {
                eprintln!("kv-bench: {message}");
                std::process::exit(2);
            }
        };
        let load_started = Instant::now();
        engine.load(&ids, &[1u8; VALUE_LEN]);
        eprintln!(
            "{name}: loaded {} keys in {:.1} s ({})",
            config.keys,
            load_started.elapsed().as_secs_f64(),
            engine.notes()
        );
        for workload in &config.workloads {
            let result = run_workload(engine.as_mut(), *workload, &config);
            eprintln!("{}", report::one_line(&result));
            results.push(result);
        }
        engine.close();
        let _ = std::fs::remove_dir_all(&data_dir);
    }
    if let Err(err) = report::write_all(&config.out, &results, &config) {
        eprintln!("kv-bench: writing results: {err}");
        std::process::exit(1);
    }
    eprintln!("results in {}", config.out.display());
}
