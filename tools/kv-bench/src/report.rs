//! Summaries of benchmark runs: one line per run on stderr, and CSV/markdown files.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use hdrhistogram::Histogram;

use crate::{Config, RunResult};

fn micros(histogram: &Histogram<u64>, quantile: f64) -> f64 {
    if histogram.is_empty() {
        return f64::NAN;
    }
    histogram.value_at_quantile(quantile) as f64 / 1000.0
}

fn max_micros(histogram: &Histogram<u64>) -> f64 {
    if histogram.is_empty() {
        return f64::NAN;
    }
    histogram.max() as f64 / 1000.0
}

pub struct Summary {
    pub median_ops: u64,
    pub min_ops: u64,
    pub min_over_median: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    pub p999_during_us: f64,
    pub p999_between_us: f64,
}

pub fn summarize(result: &RunResult) -> Summary {
    let mut sorted = result.per_second.clone();
    sorted.sort_unstable();
    let median_ops = sorted.get(sorted.len() / 2).copied().unwrap_or(0);
    let min_ops = sorted.first().copied().unwrap_or(0);
    Summary {
        median_ops,
        min_ops,
        min_over_median: if median_ops == 0 {
            0.0
        } else {
            min_ops as f64 / median_ops as f64
        },
        p50_us: micros(&result.latency_all, 0.5),
        p99_us: micros(&result.latency_all, 0.99),
        p999_us: micros(&result.latency_all, 0.999),
        max_us: max_micros(&result.latency_all),
        p999_during_us: micros(&result.latency_during_checkpoint, 0.999),
        p999_between_us: micros(&result.latency_between_checkpoints, 0.999),
    }
}

pub fn one_line(result: &RunResult) -> String {
    let s = summarize(result);
    format!(
        "{} {}: median {} ops/s, worst second {} ({:.0}% of median), p50 {:.2} us, p99 {:.2} us, p99.9 {:.2} us \
         (during checkpoints {:.2}, between {:.2}), max {:.0} us; {}",
        result.engine,
        result.workload.name(),
        s.median_ops,
        s.min_ops,
        s.min_over_median * 100.0,
        s.p50_us,
        s.p99_us,
        s.p999_us,
        s.p999_during_us,
        s.p999_between_us,
        s.max_us,
        result.notes
    )
}

pub fn write_all(out: &Path, results: &[RunResult], config: &Config) -> std::io::Result<()> {
    let mut summary = String::from(
        "engine,workload,median_ops_per_s,min_ops_per_s,min_over_median,p50_us,p99_us,p999_us,max_us,p999_during_checkpoint_us,p999_between_checkpoints_us\n",
    );
    let mut table = format!(
        "kv-bench: {} keys of 16 B, 100 B values, {} s per workload, pool {} MiB, page {} B, checkpoint every {} s, writes spread over {} ms\n\n\
         | engine | workload | median ops/s | worst 1 s (% of median) | p50 µs | p99 µs | p99.9 µs | p99.9 during / between checkpoints µs | max µs |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|\n",
        config.keys,
        config.duration.as_secs(),
        config.pool_mb,
        config.page_size,
        config.checkpoint_interval.as_secs(),
        config.checkpoint_spread.as_millis()
    );
    let mut series = String::from("engine,workload,second,ops,checkpointing\n");
    for result in results {
        let s = summarize(result);
        let _ = writeln!(
            summary,
            "{},{},{},{},{:.3},{:.2},{:.2},{:.2},{:.1},{:.2},{:.2}",
            result.engine,
            result.workload.name(),
            s.median_ops,
            s.min_ops,
            s.min_over_median,
            s.p50_us,
            s.p99_us,
            s.p999_us,
            s.max_us,
            s.p999_during_us,
            s.p999_between_us
        );
        let _ = writeln!(
            table,
            "| {} | {} | {} | {} ({:.0}%) | {:.2} | {:.2} | {:.2} | {:.2} / {:.2} | {:.0} |",
            result.engine,
            result.workload.name(),
            s.median_ops,
            s.min_ops,
            s.min_over_median * 100.0,
            s.p50_us,
            s.p99_us,
            s.p999_us,
            s.p999_during_us,
            s.p999_between_us,
            s.max_us
        );
        for (second, (ops, checkpointing)) in result
            .per_second
            .iter()
            .zip(&result.checkpointing)
            .enumerate()
        {
            let _ = writeln!(
                series,
                "{},{},{},{},{}",
                result.engine,
                result.workload.name(),
                second,
                ops,
                u8::from(*checkpointing)
            );
        }
    }
    for result in results {
        let _ = writeln!(
            table,
            "\n- {} {}: {}",
            result.engine,
            result.workload.name(),
            result.notes
        );
    }
    std::fs::File::create(out.join("summary.csv"))?.write_all(summary.as_bytes())?;
    std::fs::File::create(out.join("summary.md"))?.write_all(table.as_bytes())?;
    std::fs::File::create(out.join("timeseries.csv"))?.write_all(series.as_bytes())?;
    Ok(())
}
