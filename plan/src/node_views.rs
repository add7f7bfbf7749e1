//! What the `hotledger` schema's views of the node show — `hotledger.metrics`,
//! `.latency`, `.throughput`, `.checkpoints` and `.sessions` — as the session that reads one
//! gathers it (`Catalog::node`, filled in a copy of the catalog as `hotledger.cluster` is).
//! The console's panels are queries over these views, and `/metrics` writes the same samples.

use sql::Value;

use crate::catalog::Catalog;

/// A Prometheus metric's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricKind {
    Counter,
    Gauge,
}

impl MetricKind {
    pub fn name(self) -> &'static str {
        match self {
            MetricKind::Counter => "counter",
            MetricKind::Gauge => "gauge",
        }
    }
}

/// One row of `hotledger.metrics`: a counter or gauge with its labels as Prometheus writes
/// them (`kind="select"`).
#[derive(Clone, Debug, PartialEq)]
pub struct MetricSample {
    pub name: String,
    pub labels: String,
    pub kind: MetricKind,
    pub value: f64,
    pub help: &'static str,
}

/// One row of `hotledger.latency`: a stage over a window, in microseconds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LatencyRow {
    pub stage: String,
    pub window_seconds: i64,
    pub count: i64,
    pub p50: i64,
    pub p90: i64,
    pub p99: i64,
    pub p999: i64,
    pub max: i64,
}

/// One row of `hotledger.throughput`: one second's counts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ThroughputRow {
    /// Microseconds since the Unix epoch: the second's start.
    pub at: i64,
    pub transfers: i64,
    pub statements: i64,
    pub commits: i64,
    pub bytes_fsynced: i64,
}

/// One row of `hotledger.checkpoints`: a checkpoint that became durable.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckpointRow {
    /// Microseconds since the Unix epoch.
    pub finished_at: i64,
    /// The log index it covers.
    pub log_index: i64,
    pub pages: i64,
    pub milliseconds: i64,
}

/// One row of `hotledger.hot_accounts`: an account among those with the most transfers
/// over the window, with its balances as its last transfer there left them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HotAccountRow {
    pub window_seconds: i64,
    pub account_id: i64,
    /// Transfers counted (an estimate, at most `error` too high).
    pub transfers: i64,
    pub error: i64,
    pub debits_pending: u128,
    pub debits_posted: u128,
    pub credits_pending: u128,
    pub credits_posted: u128,
}

/// The node's views, as one session gathered them for one statement.
#[derive(Clone, Debug, Default)]
pub struct NodeViews {
    pub node_id: i64,
    pub metrics: Vec<MetricSample>,
    pub latency: Vec<LatencyRow>,
    pub throughput: Vec<ThroughputRow>,
    pub checkpoints: Vec<CheckpointRow>,
    pub hot_accounts: Vec<HotAccountRow>,
}

fn int(v: i64) -> Value {
    Value::Int(v)
}

fn amount(v: u128) -> Value {
    Value::Numeric(sql::Numeric::from_u128(v))
}

pub(crate) fn metrics_rows(catalog: &Catalog) -> Vec<Vec<Value>> {
    catalog
        .node
        .metrics
        .iter()
        .map(|m| {
            vec![
                Value::Text(m.name.clone()),
                Value::Text(m.labels.clone()),
                Value::Text(m.kind.name().to_owned()),
                Value::Float(m.value),
            ]
        })
        .collect()
}

pub(crate) fn latency_rows(catalog: &Catalog) -> Vec<Vec<Value>> {
    catalog
        .node
        .latency
        .iter()
        .map(|l| {
            vec![
                Value::Text(l.stage.clone()),
                int(l.window_seconds),
                int(l.count),
                int(l.p50),
                int(l.p90),
                int(l.p99),
                int(l.p999),
                int(l.max),
            ]
        })
        .collect()
}

pub(crate) fn throughput_rows(catalog: &Catalog) -> Vec<Vec<Value>> {
    catalog
        .node
        .throughput
        .iter()
        .map(|t| {
            vec![
                Value::TimestampTz(t.at),
                int(t.transfers),
                int(t.statements),
                int(t.commits),
                int(t.bytes_fsynced),
            ]
        })
        .collect()
}

pub(crate) fn checkpoint_rows(catalog: &Catalog) -> Vec<Vec<Value>> {
    catalog
        .node
        .checkpoints
        .iter()
        .map(|c| {
            vec![
                Value::TimestampTz(c.finished_at),
                int(c.log_index),
                int(c.pages),
                int(c.milliseconds),
            ]
        })
        .collect()
}

pub(crate) fn hot_account_rows(catalog: &Catalog) -> Vec<Vec<Value>> {
    catalog
        .node
        .hot_accounts
        .iter()
        .map(|h| {
            vec![
                int(h.window_seconds),
                int(h.account_id),
                int(h.transfers),
                int(h.error),
                amount(h.debits_pending),
                amount(h.debits_posted),
                amount(h.credits_pending),
                amount(h.credits_posted),
            ]
        })
        .collect()
}
