//! Gathering the `hotledger` schema's views of the node (`plan::NodeViews`) for a session
//! that reads them, and for `GET /metrics`: the node's own counters (`metrics`), what the
//! proposer and the log count, and what the executor reports (buffer pool, checkpoints).

use std::sync::atomic::Ordering::Relaxed;

use ledger::Request;
use plan::{HotAccountRow, LatencyRow, MetricKind::*, NodeViews, ThroughputRow};

/// Accounts `hotledger.hot_accounts` lists per window.
const HOT_ACCOUNTS: usize = 20;
use sql::SqlResult;

use super::{ask_executor, Shared};
use crate::metrics::{count, latency, sample, Stage};

/// Everything the views show, now.
pub(crate) async fn gather(shared: &Shared) -> SqlResult<NodeViews> {
    let stats = ask_executor(&shared.executor, |reply| Request::Stats { reply }).await?;
    let metrics = &shared.metrics;
    let mut samples = Vec::with_capacity(48);
    metrics.samples(&mut samples);
    samples.push(count(
        "hotledger_sessions",
        "",
        Gauge,
        shared.activity.snapshot().len() as u64,
        "Client sessions open now.",
    ));
    let proposer = shared.proposer.stats();
    let (commands, entries) = (
        proposer.commands.load(Relaxed),
        proposer.entries.load(Relaxed),
    );
    let log = &shared.log_stats;
    let storage = &stats.storage;
    samples.extend([
        count(
            "hotledger_commands_proposed_total",
            "",
            Counter,
            commands,
            "Commands this node proposed to the log.",
        ),
        count(
            "hotledger_proposer_entries_total",
            "",
            Counter,
            entries,
            "Log entries this node's proposer made (each holds the commands queued meanwhile).",
        ),
        sample(
            "hotledger_commands_per_entry",
            "",
            Gauge,
            if entries == 0 {
                0.0
            } else {
                commands as f64 / entries as f64
            },
            "Commands per proposed entry since start: how much group commit gathers.",
        ),
        count(
            "hotledger_log_entries_total",
            "",
            Counter,
            log.entries.load(Relaxed),
            "Entries appended to this node's log.",
        ),
        count(
            "hotledger_log_fsyncs_total",
            "",
            Counter,
            log.flushes.load(Relaxed),
            "Writes and fdatasyncs of the log (one per batch of appends).",
        ),
        count(
            "hotledger_log_bytes_total",
            "",
            Counter,
            log.bytes.load(Relaxed),
            "Bytes of entries written to the log.",
        ),
        count(
            "hotledger_buffer_pool_hits_total",
            "",
            Counter,
            storage.pool.hits,
            "Page reads the buffer pool answered.",
        ),
        count(
            "hotledger_buffer_pool_misses_total",
            "",
            Counter,
            storage.pool.misses,
            "Page reads that went to the data file.",
        ),
        count(
            "hotledger_buffer_pool_resident_pages",
            "",
            Gauge,
            storage.resident_pages as u64,
            "Pages in the buffer pool.",
        ),
        count(
            "hotledger_buffer_pool_dirty_pages",
            "",
            Gauge,
            storage.dirty_pages as u64,
            "Pages changed since the last checkpoint.",
        ),
        count(
            "hotledger_buffer_pool_capacity_pages",
            "",
            Gauge,
            storage.pool_capacity_pages as u64,
            "Pages the buffer pool holds at most.",
        ),
        count(
            "hotledger_checkpoints_total",
            "",
            Counter,
            storage.checkpoint_seq,
            "Checkpoints made durable since the data directory was created.",
        ),
        count(
            "hotledger_checkpoint_last_pages",
            "",
            Gauge,
            storage.last_checkpoint_pages as u64,
            "Pages the last checkpoint wrote.",
        ),
        count(
            "hotledger_checkpoint_last_milliseconds",
            "",
            Gauge,
            storage.last_checkpoint_elapsed.as_millis() as u64,
            "How long the last checkpoint took.",
        ),
        count(
            "hotledger_executor_partitions",
            "",
            Gauge,
            stats.partitions as u64,
            "Executor partitions.",
        ),
    ]);
    for (partition, depth) in shared.executor.queue_depths().into_iter().enumerate() {
        samples.push(count(
            "hotledger_executor_queue_depth",
            &format!("partition=\"{partition}\""),
            Gauge,
            depth,
            "Requests waiting for an executor thread: partition 0's is the coordinator's queue.",
        ));
    }
    let activity = shared.executor.transfer_activity();
    samples.push(count(
        "hotledger_transfers_total",
        "",
        Counter,
        activity.transfers_created(),
        "Transfers this node's executor created since it started (on every replica: the cluster's).",
    ));
    let (role, term, running) = shared.cluster_status.here();
    samples.extend([
        count(
            "hotledger_raft_term",
            "",
            Gauge,
            term,
            "This node's Raft term.",
        ),
        count(
            "hotledger_raft_leader",
            "",
            Gauge,
            u64::from(role == "leader"),
            "1 while this node leads.",
        ),
        count(
            "hotledger_raft_running",
            "",
            Gauge,
            u64::from(running),
            "1 while this node's Raft runs.",
        ),
    ]);
    let mut latency_rows = Vec::new();
    for stage in Stage::ALL {
        for window in latency::WINDOWS {
            let s = metrics.latencies.summary(stage, window);
            latency_rows.push(LatencyRow {
                stage: stage.name().to_owned(),
                window_seconds: window as i64,
                count: s.count as i64,
                p50: s.p50 as i64,
                p90: s.p90 as i64,
                p99: s.p99 as i64,
                p999: s.p999 as i64,
                max: s.max as i64,
            });
        }
    }
    let throughput = metrics
        .throughput
        .seconds()
        .into_iter()
        .map(|s| ThroughputRow {
            at: s.at as i64 * 1_000_000,
            transfers: s.transfers as i64,
            statements: s.statements as i64,
            commits: s.commits as i64,
            bytes_fsynced: s.bytes_fsynced as i64,
        })
        .collect();
    let hot_accounts = [10, 60]
        .into_iter()
        .flat_map(|window| {
            activity
                .hot_accounts(window, HOT_ACCOUNTS)
                .into_iter()
                .map(move |h| HotAccountRow {
                    window_seconds: window as i64,
                    account_id: h.account,
                    transfers: h.transfers as i64,
                    error: h.error as i64,
                    debits_pending: h.balances.debits_pending,
                    debits_posted: h.balances.debits_posted,
                    credits_pending: h.balances.credits_pending,
                    credits_posted: h.balances.credits_posted,
                })
        })
        .collect();
    Ok(NodeViews {
        node_id: shared.cluster_status.node_id() as i64,
        metrics: samples,
        latency: latency_rows,
        throughput,
        checkpoints: stats.recent_checkpoints,
        hot_accounts,
    })
}

/// The stages' totals since start, for the Prometheus summaries.
pub(crate) fn stage_totals(shared: &Shared) -> crate::metrics::prometheus::StageTotals {
    Stage::ALL
        .iter()
        .map(|s| {
            let (count, sum) = shared.metrics.latencies.totals(*s);
            (s.name(), count, sum)
        })
        .collect()
}
