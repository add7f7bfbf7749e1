//! `Activity`: what each client session of this node is doing, for `pg_stat_activity`.
//! Each session owns its record and updates it around every statement (an uncontended
//! lock); the registry's lock is taken only when a session starts or ends and when
//! `pg_stat_activity` is read.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use planner::SessionActivity;

/// PostgreSQL keeps this many bytes of a statement's text (`track_activity_query_size`).
const QUERY_BYTES: usize = 1024;

/// One session's record.
pub type Record = Arc<Mutex<SessionActivity>>;

pub fn lock(record: &Record) -> MutexGuard<'_, SessionActivity> {
    record.lock().unwrap_or_else(|e| e.into_inner())
}

/// The part of a statement's text PostgreSQL keeps: its first 1,024 bytes.
fn kept_text(sql: &str) -> &str {
    let mut end = sql.len().min(QUERY_BYTES);
    while !sql.is_char_boundary(end) {
        end -= 1;
    }
    sql[..end].trim()
}

/// Sets the statement a record shows.
pub fn set_query(activity: &mut SessionActivity, sql: &str) {
    activity.query.clear();
    activity.query.push_str(kept_text(sql));
}

/// The node's client sessions, by session id.
#[derive(Default)]
pub struct Activity {
    sessions: Mutex<BTreeMap<u64, Record>>,
}

impl Activity {
    fn sessions(&self) -> MutexGuard<'_, BTreeMap<u64, Record>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn register(&self, session: u64, record: Record) {
        self.sessions().insert(session, record);
    }

    pub fn remove(&self, session: u64) {
        self.sessions().remove(&session);
    }

    /// Every session's record as it is now, in the order they started.
    pub fn snapshot(&self) -> Vec<SessionActivity> {
        let records: Vec<Record> = self.sessions().values().cloned().collect();
        records.iter().map(|r| lock(r).clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_keeps_its_first_1024_bytes_on_a_character_boundary() {
        let mut a = SessionActivity::default();
        set_query(&mut a, "  select 1  ");
        assert_eq!(a.query, "select 1");
        let long = "é".repeat(600);
        set_query(&mut a, &long);
        assert_eq!(a.query.len(), 1024);
        let activity = Activity::default();
        activity.register(2, Arc::new(Mutex::new(a)));
        assert_eq!(activity.snapshot().len(), 1);
        activity.remove(2);
        assert!(activity.snapshot().is_empty());
    }
}
