//! `SHOW group_commit_stats` and `SHOW storage_stats`: how the log and the storage engine
//! are doing.

use super::*;

impl Session {
    /// How well group commit works since start: commands proposed, Raft entries they went
    /// into, entries written to the log and the fsyncs that made them durable.
    pub(super) fn group_commit_stats(&self) -> String {
        use std::sync::atomic::Ordering::Relaxed;
        let proposer = self.shared.proposer.stats();
        let log = &self.shared.log_stats;
        format!(
            "commands={} entries={} log_entries={} fsyncs={}",
            proposer.commands.load(Relaxed),
            proposer.entries.load(Relaxed),
            log.entries.load(Relaxed),
            log.flushes.load(Relaxed)
        )
    }

    /// The storage engine's buffer pool and file, for `SHOW storage_stats`: pages resident in
    /// the pool and its capacity, page buffers in memory (the pool's, and those only read
    /// views still hold), the page size, pages in the data
    /// file, pool hits and misses (and pages read ahead of the commands of a log entry,
    /// `Executor::page_in_ahead`), the checkpoints, the executor partitions, and how many
    /// point operations found their leaf from a leaf hint or descended from the root (or
    /// started at a leaf a multi-row statement's lookahead found), and how often and how
    /// long entries waited for a checkpoint to make room in the pool, and how many point
    /// reads were served on the session's thread from a published view or went to the
    /// executor, and how many pauses long reads took to leave a busy ledger its cores
    /// (`read_pacing`).
    pub(super) async fn storage_stats(&self) -> SqlResult<String> {
        let all = self.ask(|reply| Request::Stats { reply }).await?;
        let stats = all.storage;
        let (on_view, on_executor) = self.shared.executor.point_reads_on_views();
        Ok(format!(
            "page_size={} pool_capacity_pages={} resident_pages={} dirty_pages={} mapped_pages={} peak_buffer_pages={} snapshot_pages={} file_pages={} hits={} misses={} pages_read_ahead={} checkpoint_seq={} last_checkpoint_pages={} last_checkpoint_ms={} partitions={} commands_on_partition_threads={} commands_on_coordinator={} partition_handovers={} commands_split={} leaf_hint_hits={} leaf_hint_misses={} lookahead_keys={} lookahead_used={} pool_waits={} pool_wait_ms={} point_reads_on_view={} point_reads_on_executor={} long_read_pauses={} insert_buffer_bytes={} insert_buffer_drained={}",
            stats.page_size,
            stats.pool_capacity_pages,
            stats.resident_pages,
            stats.dirty_pages,
            stats.mapped_pages,
            stats.peak_buffer_pages,
            stats.snapshot_pages,
            stats.page_count,
            stats.pool.hits,
            stats.pool.misses,
            stats.pool.read_ahead,
            stats.checkpoint_seq,
            stats.last_checkpoint_pages,
            stats.last_checkpoint_elapsed.as_millis(),
            all.partitions,
            all.on_partition_threads,
            all.on_coordinator,
            all.handovers,
            all.split,
            stats.leaf_hint_hits,
            stats.leaf_hint_misses,
            stats.lookahead_keys,
            stats.lookahead_used,
            all.pool_waits,
            all.pool_wait.as_millis(),
            on_view,
            on_executor,
            crate::read_pacing::pauses(),
            stats.insert_buffer_bytes,
            stats.insert_buffer_drained
        ))
    }
}
