//! `Activity`: what each client session of this node is doing, for `pg_stat_activity`, and
//! how to reach its connection, for `pg_cancel_backend` and `pg_terminate_backend`.
//! Each session owns its record and updates it around every statement (an uncontended
//! lock); the registry's lock is taken only when a session starts or ends, when
//! `pg_stat_activity` is read and when a session is signalled.

use std::collections::BTreeMap;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use pgwire::api::ConnectionHandle;
use plan::{Interrupt, SessionActivity, StopReason};
use sql::SqlResult;

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

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What another session needs to reach a connection: its statement's cancel handle and
/// interrupt, while the connection loop (`frontend::serve_connection`) serves it its
/// socket, and the idle timeouts the loop applies between statements.
#[derive(Default)]
pub struct ConnectionControl {
    cancel: Mutex<Option<Arc<ConnectionHandle>>>,
    socket: Mutex<Option<RawFd>>,
    terminated: AtomicBool,
    running: Mutex<Option<Running>>,
    /// `idle_in_transaction_session_timeout` and `idle_session_timeout`, in milliseconds (0:
    /// none), as the session's settings were after its last statement.
    idle_in_transaction_ms: AtomicU64,
    idle_session_ms: AtomicU64,
}

/// The statement a connection runs: how to stop it, and when its `statement_timeout` ends.
struct Running {
    interrupt: Interrupt,
    deadline: Option<Instant>,
}

impl ConnectionControl {
    pub fn set_cancel(&self, handle: Arc<ConnectionHandle>) {
        *locked(&self.cancel) = Some(handle);
    }

    /// Makes the connection's socket reachable until the guard drops, which must happen
    /// before the socket closes (so a signal never reaches another connection's socket that
    /// took over the descriptor's number).
    pub fn attach(&self, socket: RawFd) -> Attached<'_> {
        *locked(&self.socket) = Some(socket);
        Attached(self)
    }

    /// `pg_terminate_backend` ended this connection: its loop says so and closes it.
    pub fn terminated(&self) -> bool {
        self.terminated.load(Ordering::Relaxed)
    }

    /// A statement starts: `interrupt` stops it, and past `timeout` the watchdog raises it.
    /// A timeout raised for the statement before it in the same query is taken back.
    pub fn start_statement(&self, interrupt: &Interrupt, timeout: Option<Duration>) {
        let mut running = locked(&self.running);
        interrupt.clear_timeout();
        *running = Some(Running {
            interrupt: interrupt.clone(),
            deadline: timeout.map(|t| Instant::now() + t),
        });
    }

    /// The statement ended: nothing runs to be stopped.
    pub fn end_statement(&self) {
        *locked(&self.running) = None;
    }

    /// Raises the running statement's interrupt for `reason`, if one runs.
    fn stop_running(&self, reason: StopReason) {
        if let Some(running) = &*locked(&self.running) {
            running.interrupt.raise(reason);
        }
    }

    /// The watchdog's look at a running statement: raises its interrupt when its timeout
    /// has passed, and returns the socket to check for a closed client while it runs.
    fn watch_deadline(&self, now: Instant) -> Option<RawFd> {
        let running = locked(&self.running);
        let running = running.as_ref()?;
        if running.deadline.is_some_and(|d| now >= d) {
            running.interrupt.raise(StopReason::Timeout);
        }
        *locked(&self.socket)
    }

    /// `socket`'s client looked closed: checked again under the lock (the number may since
    /// name another connection's socket), then the running statement is stopped.
    fn confirm_closed(&self, socket: RawFd) {
        let running = locked(&self.running);
        let Some(running) = &*running else {
            return;
        };
        if *locked(&self.socket) == Some(socket) && closed(&mut [pollfd(socket)])[0] {
            running.interrupt.raise(StopReason::ConnectionLost);
        }
    }

    /// The session's idle timeouts, for the connection loop to apply.
    pub fn set_idle_timeouts(&self, in_transaction: Option<Duration>, session: Option<Duration>) {
        let ms = |d: Option<Duration>| d.map_or(0, |d| d.as_millis().max(1) as u64);
        self.idle_in_transaction_ms
            .store(ms(in_transaction), Ordering::Relaxed);
        self.idle_session_ms.store(ms(session), Ordering::Relaxed);
    }

    /// How long the connection may wait for its client's next message: inside a transaction
    /// block (`in_transaction`) or outside one. None: for ever.
    pub fn idle_timeout(&self, in_transaction: bool) -> Option<Duration> {
        let ms = if in_transaction {
            &self.idle_in_transaction_ms
        } else {
            &self.idle_session_ms
        };
        match ms.load(Ordering::Relaxed) {
            0 => None,
            ms => Some(Duration::from_millis(ms)),
        }
    }

    /// Cancels the statement running, if any (as a cancel request does): its interrupt is
    /// raised, and the connection's cancel handle fired for a query between statements or
    /// waiting (for a lock, say).
    fn cancel(&self) {
        self.stop_running(StopReason::Cancel);
        let Some(handle) = locked(&self.cancel).clone() else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                handle.cancel().await;
            });
        }
    }

    /// Ends the connection: its statement is cancelled, and the read side of its socket is
    /// shut so the connection loop, however it waits, reads the end and closes.
    fn terminate(&self) {
        self.terminated.store(true, Ordering::Relaxed);
        self.stop_running(StopReason::Terminate);
        self.cancel();
        if let Some(socket) = *locked(&self.socket) {
            // SAFETY: the descriptor is the connection's open socket: `Attached` forgets it
            // (under this lock) before the socket closes.
            unsafe { libc::shutdown(socket, libc::SHUT_RD) };
        }
    }
}

/// Whether the client has closed its end of `socket` (or it failed): a statement running
/// for it has no one to answer. Pipelined messages waiting to be read do not count.
/// What the watchdog does every tick: raises the interrupt of each running statement whose
/// timeout has passed or whose client has closed the connection. The sockets of all running
/// statements are looked at in one `poll` (with a thousand connections, one call each was
/// a few percent of the machine).
pub fn watch_connections(controls: &[Arc<ConnectionControl>], now: Instant) {
    let watched: Vec<(&ConnectionControl, RawFd)> = controls
        .iter()
        .filter_map(|c| Some((&**c, c.watch_deadline(now)?)))
        .collect();
    if watched.is_empty() {
        return;
    }
    let mut fds: Vec<libc::pollfd> = watched.iter().map(|&(_, fd)| pollfd(fd)).collect();
    for (&(control, socket), closed) in watched.iter().zip(closed(&mut fds)) {
        if closed {
            control.confirm_closed(socket);
        }
    }
}

fn pollfd(socket: RawFd) -> libc::pollfd {
    libc::pollfd {
        fd: socket,
        events: libc::POLLRDHUP,
        revents: 0,
    }
}

/// Which of `fds` have a closed peer (or an error), without waiting.
fn closed(fds: &mut [libc::pollfd]) -> Vec<bool> {
    // SAFETY: `fds` is a valid array of `fds.len()` pollfds for the call; a zero timeout
    // never blocks.
    let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 0) };
    let mask = libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR;
    fds.iter()
        .map(|p| ready > 0 && p.revents & mask != 0)
        .collect()
}

/// A connection's socket, reachable by signals while this lives.
pub struct Attached<'a>(&'a ConnectionControl);

impl Drop for Attached<'_> {
    fn drop(&mut self) {
        *locked(&self.0.socket) = None;
    }
}

struct Entry {
    record: Record,
    control: Option<Arc<ConnectionControl>>,
}

/// The node's client sessions, by session id.
#[derive(Default)]
pub struct Activity {
    sessions: Mutex<BTreeMap<u64, Entry>>,
}

impl Activity {
    fn sessions(&self) -> MutexGuard<'_, BTreeMap<u64, Entry>> {
        locked(&self.sessions)
    }

    pub fn register(&self, session: u64, record: Record) {
        let control = None;
        self.sessions().insert(session, Entry { record, control });
    }

    /// How to reach session `session`'s connection.
    pub fn attach_control(&self, session: u64, control: Arc<ConnectionControl>) {
        if let Some(entry) = self.sessions().get_mut(&session) {
            entry.control = Some(control);
        }
    }

    pub fn remove(&self, session: u64) {
        self.sessions().remove(&session);
    }

    /// Every connection's control, for the watchdog.
    pub fn controls(&self) -> Vec<Arc<ConnectionControl>> {
        self.sessions()
            .values()
            .filter_map(|e| e.control.clone())
            .collect()
    }

    /// How many of the node's sessions run as `user` (a role's `CONNECTION LIMIT`).
    pub fn sessions_of(&self, user: &str) -> usize {
        let records: Vec<Record> = self.sessions().values().map(|e| e.record.clone()).collect();
        records.iter().filter(|r| lock(r).user == user).count()
    }

    /// Every session's record as it is now, in the order they started.
    pub fn snapshot(&self) -> Vec<SessionActivity> {
        let records: Vec<Record> = self.sessions().values().map(|e| e.record.clone()).collect();
        records.iter().map(|r| lock(r).clone()).collect()
    }
}

/// `pg_cancel_backend` and `pg_terminate_backend` as role `role` calls them: a superuser
/// signals any session; anyone else only sessions of roles whose privileges it has, and no
/// superuser's (PostgreSQL's rule, less its `pg_signal_backend` role).
pub struct SignalsFrom<'a> {
    pub activity: &'a Activity,
    pub catalog: &'a plan::Catalog,
    pub role: u32,
}

impl plan::BackendSignals for SignalsFrom<'_> {
    fn signal(&self, pid: i32, terminate: bool) -> SqlResult<bool> {
        let target = self.activity.sessions().values().find_map(|e| {
            let record = lock(&e.record);
            (record.pid == pid).then(|| record.user.clone())
        });
        let auth = &self.catalog.authorization;
        if let (Some(user), false) = (target, auth.is_superuser(self.role)) {
            let (what, whose) = if terminate {
                ("terminate", "process is being terminated")
            } else {
                ("cancel", "query is being canceled")
            };
            let role = auth.role(&user);
            let denied = |message: String| {
                Err(sql::SqlError::new(
                    sql::ErrorKind::InsufficientPrivilege,
                    message,
                ))
            };
            if role.is_some_and(|r| r.attributes.superuser) {
                let object = if terminate { "process" } else { "query" };
                return denied(format!("must be a superuser to {what} superuser {object}"));
            }
            if !role.is_some_and(|r| auth.privileged_as(self.role).contains(&r.oid)) {
                return denied(format!(
                    "must be a member of the role whose {whose} or member of pg_signal_backend"
                ));
            }
        }
        self.activity.signal(pid, terminate)
    }
}

impl plan::BackendSignals for Activity {
    fn signal(&self, pid: i32, terminate: bool) -> SqlResult<bool> {
        let control = self
            .sessions()
            .values()
            .find(|e| lock(&e.record).pid == pid)
            .and_then(|e| e.control.clone());
        let Some(control) = control else {
            return Ok(false);
        };
        if terminate {
            control.terminate();
        } else {
            control.cancel();
        }
        Ok(true)
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
