//! How far a cluster node purges its log: everything its last snapshot covers, except what a
//! reachable follower still needs — bounded, so a follower that lags too far (or a dead one
//! that still looks reachable) gets the snapshot instead of holding the log forever.
//!
//! The tail kept is bounded in entries and in bytes (`KeepBehind`): entries of a batch
//! path can be 100 KiB each, and a count alone would then keep gigabytes.
//!
//! openraft's own purge keeps a fixed count behind each snapshot; a cluster node turns that
//! off (`max_in_snapshot_log_to_keep` is the most a follower may hold back) and asks for
//! purges itself (`Raft::trigger().purge_log`), which never blocks appends: openraft purges
//! when no replication is reading the entries.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::log_store::RaftLog;
use crate::types::{NodeId, Raft};

/// A follower whose log has not moved for this long, and is behind, counts as unreachable:
/// the log is not kept for it.
const REACHABLE_WITHIN: Duration = Duration::from_secs(10);

/// How much of the log a node keeps behind its snapshot for followers a little behind: at
/// most this many entries, and at most this many bytes of them.
#[derive(Clone, Copy, Debug)]
pub struct KeepBehind {
    pub entries: u64,
    pub bytes: u64,
}

/// The index to purge up to: the snapshot's, held back to the lowest log position of the
/// reachable followers, but never more than `keep` entries behind the snapshot, nor below
/// `bytes_floor` (the purge point that leaves the most the byte bound allows).
pub(crate) fn purge_point(
    snapshot: u64,
    keep: u64,
    bytes_floor: u64,
    reachable_followers: &[u64],
) -> u64 {
    let needed = reachable_followers
        .iter()
        .copied()
        .min()
        .unwrap_or(snapshot);
    let point = needed
        .min(snapshot)
        .max(snapshot.saturating_sub(keep))
        .max(bytes_floor.min(snapshot));
    debug_assert!(point <= snapshot, "a purge past the snapshot loses entries");
    point
}

/// What the leader saw of each follower: its matched index, and when that last moved.
#[derive(Default)]
pub(crate) struct FollowerProgress {
    seen: BTreeMap<NodeId, (u64, Instant)>,
}

impl FollowerProgress {
    /// The matched indexes of the followers that are reachable now: caught up with
    /// `last_index`, or moving.
    pub fn reachable(&mut self, matched: &BTreeMap<NodeId, u64>, last_index: u64) -> Vec<u64> {
        let now = Instant::now();
        self.seen.retain(|id, _| matched.contains_key(id));
        let mut reachable = Vec::new();
        for (&id, &index) in matched {
            let entry = self.seen.entry(id).or_insert((index, now));
            if entry.0 != index {
                *entry = (index, now);
            }
            if index >= last_index || now.duration_since(entry.1) < REACHABLE_WITHIN {
                reachable.push(index);
            }
        }
        reachable
    }
}

/// Purges this node's log as far as `purge_point` allows, given its snapshot and, on the
/// leader, its followers' progress.
pub(crate) async fn purge(
    raft: &Raft,
    log: &RaftLog,
    keep: KeepBehind,
    progress: &mut FollowerProgress,
) {
    let (snapshot, purged, followers, last_index) = {
        let metrics = raft.metrics();
        let metrics = metrics.borrow();
        let followers: BTreeMap<NodeId, u64> = metrics
            .replication
            .as_ref()
            .map(|r| {
                r.iter()
                    .filter(|(&id, _)| id != metrics.id)
                    .map(|(&id, matched)| (id, matched.map_or(0, |m| m.index)))
                    .collect()
            })
            .unwrap_or_default();
        (
            metrics.snapshot.map(|s| s.index),
            metrics.purged.map(|p| p.index),
            followers,
            metrics.last_log_index.unwrap_or(0),
        )
    };
    let Some(snapshot) = snapshot else { return };
    let reachable = progress.reachable(&followers, last_index);
    // Entries from `first` on fit in the byte bound: purging through `first - 1` keeps
    // them. (None: nothing through the snapshot is held, nothing to bound.)
    let bytes_floor = match log.first_within_bytes(snapshot, keep.bytes).await {
        Ok(first) => first.map_or(0, |first| first.saturating_sub(1)),
        Err(_) => return,
    };
    let upto = purge_point(snapshot, keep.entries, bytes_floor, &reachable);
    if purged.is_none_or(|p| upto > p) {
        let _ = raft.trigger().purge_log(upto).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_purge_keeps_what_reachable_followers_need_within_the_bound() {
        // No follower (a follower node, or all caught up): up to the snapshot.
        assert_eq!(purge_point(1_000, 100, 0, &[]), 1_000);
        assert_eq!(purge_point(1_000, 100, 0, &[1_200, 1_300]), 1_000);
        // A reachable follower at 950 still needs 951..: kept.
        assert_eq!(purge_point(1_000, 100, 0, &[950, 1_300]), 950);
        // One further behind than the bound gets the snapshot instead.
        assert_eq!(purge_point(1_000, 100, 0, &[10]), 900);
        assert_eq!(purge_point(50, 100, 0, &[10]), 10);
    }

    #[test]
    fn the_purge_keeps_no_more_bytes_than_the_bound() {
        // Entries from 981 on fit in the byte bound: a follower at 950 gets the snapshot.
        assert_eq!(purge_point(1_000, 100, 980, &[950]), 980);
        // Within both bounds: kept for it.
        assert_eq!(purge_point(1_000, 100, 900, &[950]), 950);
        // The entry bound is the tighter one.
        assert_eq!(purge_point(1_000, 10, 900, &[950]), 990);
        // Even the snapshot's own entry is over the bound: up to the snapshot, not past.
        assert_eq!(purge_point(1_000, 100, 1_000, &[950]), 1_000);
        assert_eq!(purge_point(1_000, 100, 5_000, &[]), 1_000);
    }

    #[test]
    fn a_follower_counts_as_reachable_while_it_moves_or_is_caught_up() {
        let mut progress = FollowerProgress::default();
        let matched = BTreeMap::from([(2, 500), (3, 900)]);
        assert_eq!(progress.reachable(&matched, 900), vec![500, 900]);
        // Stuck behind for longer than REACHABLE_WITHIN: no longer waited for.
        progress
            .seen
            .insert(2, (500, Instant::now() - REACHABLE_WITHIN * 2));
        assert_eq!(progress.reachable(&matched, 900), vec![900]);
        // It moves again: reachable.
        let moved = BTreeMap::from([(2, 600), (3, 900)]);
        assert_eq!(progress.reachable(&moved, 900), vec![600, 900]);
        // Caught up counts even when not moving.
        progress
            .seen
            .insert(3, (900, Instant::now() - REACHABLE_WITHIN * 2));
        assert_eq!(progress.reachable(&moved, 900), vec![600, 900]);
    }
}
