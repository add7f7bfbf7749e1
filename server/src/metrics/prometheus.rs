//! The node's views in Prometheus' text exposition format (version 0.0.4), as `GET
//! /metrics` answers: every `hotledger.metrics` sample under its family's HELP and TYPE
//! lines, and the latency of each stage as a summary over the last 60 seconds (its
//! quantiles in microseconds, and the count and sum since the server started).

use std::fmt::Write;

use plan::NodeViews;

/// The stages' totals since start, (stage, count, sum of microseconds), for the
/// summaries' `_count` and `_sum`.
pub type StageTotals = Vec<(&'static str, u64, u64)>;

pub fn text(views: &NodeViews, totals: &StageTotals) -> String {
    let mut out = String::with_capacity(8192);
    let mut family = "";
    for m in &views.metrics {
        if m.name != family {
            family = &m.name;
            let _ = writeln!(out, "# HELP {} {}", m.name, m.help);
            let _ = writeln!(out, "# TYPE {} {}", m.name, m.kind.name());
        }
        if m.labels.is_empty() {
            let _ = writeln!(out, "{} {}", m.name, number(m.value));
        } else {
            let _ = writeln!(out, "{}{{{}}} {}", m.name, m.labels, number(m.value));
        }
    }
    let name = "hotledger_latency_microseconds";
    let _ = writeln!(
        out,
        "# HELP {name} Latency by stage (statement, commit, fsync, apply) over the last 60 seconds."
    );
    let _ = writeln!(out, "# TYPE {name} summary");
    for (stage, count, sum) in totals {
        if let Some(l) = views
            .latency
            .iter()
            .find(|l| l.stage == *stage && l.window_seconds == 60)
        {
            for (q, v) in [
                ("0.5", l.p50),
                ("0.9", l.p90),
                ("0.99", l.p99),
                ("0.999", l.p999),
            ] {
                let _ = writeln!(out, "{name}{{stage=\"{stage}\",quantile=\"{q}\"}} {v}");
            }
        }
        let _ = writeln!(out, "{name}_sum{{stage=\"{stage}\"}} {sum}");
        let _ = writeln!(out, "{name}_count{{stage=\"{stage}\"}} {count}");
    }
    out
}

/// A sample's value as Prometheus writes one: integers without a fraction.
fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use plan::{LatencyRow, MetricKind, MetricSample};

    #[test]
    fn families_have_one_help_and_type_each() {
        let sample = |name: &str, labels: &str, value: f64| MetricSample {
            name: name.into(),
            labels: labels.into(),
            kind: MetricKind::Counter,
            value,
            help: "Things.",
        };
        let views = NodeViews {
            metrics: vec![
                sample("a_total", "kind=\"x\"", 1.0),
                sample("a_total", "kind=\"y\"", 2.0),
                sample("b_total", "", 0.5),
            ],
            latency: vec![LatencyRow {
                stage: "commit".into(),
                window_seconds: 60,
                count: 3,
                p50: 10,
                p90: 20,
                p99: 30,
                p999: 40,
                max: 50,
            }],
            ..NodeViews::default()
        };
        let text = text(&views, &vec![("commit", 7, 700)]);
        assert_eq!(text.matches("# TYPE a_total counter").count(), 1);
        assert!(text.contains("a_total{kind=\"y\"} 2\n"), "{text}");
        assert!(text.contains("b_total 0.5\n"), "{text}");
        assert!(
            text.contains("hotledger_latency_microseconds{stage=\"commit\",quantile=\"0.99\"} 30")
        );
        assert!(text.contains("hotledger_latency_microseconds_count{stage=\"commit\"} 7"));
    }
}
