//! What the node counts and measures, for `hotledger.metrics`, `.latency`, `.throughput`
//! and `/metrics`: counters the sessions bump (statements by kind, commits), latencies by
//! stage (`latency`), per-second counts of the last ten minutes (`throughput`), and what
//! the proposer, the log and the executor count themselves, read when asked.
//!
//! Recording is a relaxed atomic add or one short lock per statement; nothing here allocates
//! on the hot path.

pub mod latency;
pub mod prometheus;
pub mod throughput;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use plan::{MetricKind, MetricSample, Plan};

pub use latency::{Latencies, Stage};
pub use throughput::{Count, Throughput};

/// How a statement is counted in `hotledger_statements_total{kind}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatementKind {
    Select,
    Insert,
    Update,
    Delete,
    Call,
    Ddl,
    Transaction,
    Other,
}

impl StatementKind {
    const ALL: [StatementKind; 8] = [
        StatementKind::Select,
        StatementKind::Insert,
        StatementKind::Update,
        StatementKind::Delete,
        StatementKind::Call,
        StatementKind::Ddl,
        StatementKind::Transaction,
        StatementKind::Other,
    ];

    fn name(self) -> &'static str {
        match self {
            StatementKind::Select => "select",
            StatementKind::Insert => "insert",
            StatementKind::Update => "update",
            StatementKind::Delete => "delete",
            StatementKind::Call => "call",
            StatementKind::Ddl => "ddl",
            StatementKind::Transaction => "transaction",
            StatementKind::Other => "other",
        }
    }

    pub fn of(plan: &Plan) -> StatementKind {
        match plan {
            Plan::Select(_) | Plan::CopyTo { .. } | Plan::Show { .. } => StatementKind::Select,
            Plan::Write(write, _) => match write.as_ref() {
                plan::WritePlan::Insert(p) if p.call => StatementKind::Call,
                plan::WritePlan::Insert(_) => StatementKind::Insert,
                plan::WritePlan::Update(_) => StatementKind::Update,
                plan::WritePlan::Delete(_) => StatementKind::Delete,
            },
            Plan::CopyFrom(_) => StatementKind::Insert,
            Plan::Call(_) | Plan::LedgerBatch(_) | Plan::ClusterChange(_) => StatementKind::Call,
            Plan::Ddl(_) => StatementKind::Ddl,
            plan if plan.is_transaction_control() => StatementKind::Transaction,
            _ => StatementKind::Other,
        }
    }
}

/// The node's own counters and measurements.
#[derive(Default)]
pub struct NodeMetrics {
    pub latencies: Latencies,
    pub throughput: Throughput,
    statements: [AtomicU64; 8],
    statement_errors: AtomicU64,
    sessions_opened: AtomicU64,
    commits: AtomicU64,
}

impl NodeMetrics {
    /// A client statement ran (`failed` or not) in `took`.
    pub fn statement(&self, kind: StatementKind, took: Duration, failed: bool) {
        self.statements[kind as usize].fetch_add(1, Relaxed);
        if failed {
            self.statement_errors.fetch_add(1, Relaxed);
        }
        self.latencies.record(Stage::Statement, took);
        self.throughput.add(Count::Statements, 1);
    }

    /// A command this node proposed committed, `took` after it was proposed.
    pub fn commit(&self, took: Duration) {
        self.commits.fetch_add(1, Relaxed);
        self.latencies.record(Stage::Commit, took);
        self.throughput.add(Count::Commits, 1);
    }

    /// A committed entry applied `took` after it was handed to the executor.
    pub fn apply(&self, took: Duration) {
        self.latencies.record(Stage::Apply, took);
    }

    /// The log wrote and synced `bytes` in `took`.
    pub fn flush(&self, took: Duration, bytes: u64) {
        self.latencies.record(Stage::Fsync, took);
        self.throughput.add(Count::BytesFsynced, bytes);
    }

    pub fn session_opened(&self) {
        self.sessions_opened.fetch_add(1, Relaxed);
    }

    /// The samples these counters give (the rest of `hotledger.metrics` comes from the
    /// proposer, the log and the executor: `Session::node_views`).
    pub fn samples(&self, out: &mut Vec<MetricSample>) {
        for kind in StatementKind::ALL {
            out.push(count(
                "hotledger_statements_total",
                &format!("kind=\"{}\"", kind.name()),
                MetricKind::Counter,
                self.statements[kind as usize].load(Relaxed),
                "Client statements run, by kind.",
            ));
        }
        out.push(count(
            "hotledger_statement_errors_total",
            "",
            MetricKind::Counter,
            self.statement_errors.load(Relaxed),
            "Client statements that ended with an error.",
        ));
        out.push(count(
            "hotledger_sessions_opened_total",
            "",
            MetricKind::Counter,
            self.sessions_opened.load(Relaxed),
            "Client sessions started since the server did.",
        ));
        out.push(count(
            "hotledger_commits_total",
            "",
            MetricKind::Counter,
            self.commits.load(Relaxed),
            "Write commands this node proposed that committed.",
        ));
    }
}

/// One sample.
pub fn sample(
    name: &'static str,
    labels: &str,
    kind: MetricKind,
    value: impl Into<f64>,
    help: &'static str,
) -> MetricSample {
    MetricSample {
        name: name.to_owned(),
        labels: labels.to_owned(),
        kind,
        value: value.into(),
        help,
    }
}

/// Like `sample`, for a count (`u64` does not convert into `f64` losslessly: counts here
/// stay far below 2^53).
pub fn count(
    name: &'static str,
    labels: &str,
    kind: MetricKind,
    value: u64,
    help: &'static str,
) -> MetricSample {
    sample(name, labels, kind, value as f64, help)
}
