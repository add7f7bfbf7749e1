//! TigerBeetle's state-machine tests replayed against the real server: each file in
//! `server/tests/tigerbeetle/` is a sequence of batches — `CALL create_accounts(...)` and
//! `CALL create_transfers(...)` — with the result TigerBeetle gives each event, and checks
//! of the balances and transfers afterwards. The cases are TigerBeetle's own tables
//! (`src/state_machine_tests.zig`) written out in this format, plus the cases of
//! hotledger's that those do not cover; where SQL makes a difference unavoidable the file
//! says so.
//!
//! The format, one statement per line (`#` starts a comment):
//!
//! ```text
//! accounts                      a create_accounts batch, one event per line, until `end`
//!   id=1 ledger=1 code=1 [dmc] [cmd] [history] [closed] [user_data=N] [user_data_64=N]
//!        [user_data_32=N] [imported] [timestamp=N] [linked]  => result
//! transfers                     a create_transfers batch
//!   id=1 dr=1 cr=2 amount=10 ledger=1 code=1 [pending] [post] [void] [pending_id=N]
//!        [timeout=N] [bdr] [bcr] [cdr] [ccr] [user_data=N] [user_data_64=N]
//!        [user_data_32=N] [imported] [timestamp=N] [linked]  => result
//! end
//! account 1 0 15 0 0 [closed]   its debits_pending, debits_posted, credits_pending,
//!                               credits_posted, and whether it is closed
//! no account 3
//! transfer 5 amount=13          exists, with that amount (or user_data, user_data_64,
//!                               user_data_32)
//! no transfer 4
//! pending 2 expired             the status pending_transfers shows
//! sleep 1100                    milliseconds (timeouts run on the ledger clock, real time)
//! fresh server                  the rest of the file on a server of its own, from empty
//! ```
//!
//! A field left out is 0 (false for a flag), as TigerBeetle's clients send it. A number may
//! be written `max` (the largest value of its column: 2^128-1 for amounts and balances, as
//! in TigerBeetle, 2^63-1 for a bigint) or `max-N`; `null` is SQL's
//! NULL, which hotledger takes as a post's "all of it" beside TigerBeetle's AMOUNT_MAX. Each file's ids are
//! moved into a range of their own (0 and negative ids stay as written), so the files share
//! one server.

mod common;

use common::TestServer;
use tokio_postgres::Client;

/// What a file's ids are moved by, per file.
const ID_RANGE: i64 = 1_000_000;

#[derive(Clone, Copy, PartialEq)]
enum Batch {
    Accounts,
    Transfers,
}

/// One event of a batch: its fields (name, value; NULL as None) and the expected result.
struct Event {
    fields: Vec<(String, Option<i128>)>,
    expected: String,
    line: usize,
}

const ACCOUNT_FIELDS: &[(&str, &str, &str)] = &[
    ("id", "id", "bigint"),
    ("ledger", "ledger", "int"),
    ("code", "code", "int"),
    ("dmc", "debits_must_not_exceed_credits", "boolean"),
    ("cmd", "credits_must_not_exceed_debits", "boolean"),
    ("history", "history", "boolean"),
    ("closed", "closed", "boolean"),
    ("user_data", "user_data", "bigint"),
    ("user_data_64", "user_data_64", "bigint"),
    ("user_data_32", "user_data_32", "int"),
    ("imported", "imported", "boolean"),
    ("timestamp", "timestamp", "bigint"),
    ("linked", "linked", "boolean"),
];

const TRANSFER_FIELDS: &[(&str, &str, &str)] = &[
    ("id", "id", "bigint"),
    ("dr", "debit_account_id", "bigint"),
    ("cr", "credit_account_id", "bigint"),
    ("amount", "amount", "numeric"),
    ("ledger", "ledger", "int"),
    ("code", "code", "int"),
    ("pending", "pending", "boolean"),
    ("pending_id", "pending_id", "bigint"),
    ("post", "post_pending", "boolean"),
    ("void", "void_pending", "boolean"),
    ("timeout", "timeout", "int"),
    ("bdr", "balancing_debit", "boolean"),
    ("bcr", "balancing_credit", "boolean"),
    ("cdr", "closing_debit", "boolean"),
    ("ccr", "closing_credit", "boolean"),
    ("user_data", "user_data", "bigint"),
    ("user_data_64", "user_data_64", "bigint"),
    ("user_data_32", "user_data_32", "int"),
    ("imported", "imported", "boolean"),
    ("timestamp", "timestamp", "bigint"),
    ("linked", "linked", "boolean"),
];

/// A number as the files write it: decimal, `max` or `max-N` (see `decimal`).
fn number(text: &str) -> Option<i128> {
    match text.strip_prefix("max") {
        Some("") => Some(MAX),
        Some(rest) => rest
            .strip_prefix('-')?
            .parse::<i128>()
            .ok()
            .filter(|n| *n >= 0)
            .map(|n| MAX - n),
        None => text.parse::<i128>().ok().filter(|n| *n < MAX - (1 << 100)),
    }
}

/// `max` as `number` holds it: `MAX - n` stands for `max-n` (a file's plain numbers stay
/// far below, so the two never meet).
const MAX: i128 = i128::MAX;

/// A number `number` read, as SQL text for a column of 128-bit amounts (`wide`) or a
/// bigint one: `max` is 2^128-1 or 2^63-1.
fn decimal(n: i128, wide: bool) -> String {
    if n <= MAX - (1 << 100) {
        return n.to_string();
    }
    let below = (MAX - n) as u128;
    let max = if wide { u128::MAX } else { i64::MAX as u128 };
    (max - below).to_string()
}

/// The columns `transfer N column=value` may check.
const TRANSFER_CHECKS: &[&str] = &[
    "amount",
    "user_data",
    "user_data_64",
    "user_data_32",
    "timestamp",
];

/// Fields holding ids, moved into the file's range.
const ID_FIELDS: &[&str] = &["id", "dr", "cr", "pending_id"];

struct Replay {
    client: Client,
    /// A server of the file's own, after `fresh server`.
    own_server: Option<TestServer>,
    file: String,
    base: i64,
    failures: Vec<String>,
}

impl Replay {
    fn id(&self, id: i64) -> i64 {
        if id > 0 {
            id + self.base
        } else {
            id
        }
    }

    fn fail(&mut self, line: usize, what: String) {
        self.failures.push(format!("{}:{line}: {what}", self.file));
    }

    fn parse_event(&self, text: &str, line: usize) -> Result<Event, String> {
        let (fields, expected) = text
            .split_once("=>")
            .ok_or_else(|| format!("line {line}: an event needs `=> result`"))?;
        let mut parsed = Vec::new();
        for token in fields.split_whitespace() {
            let (name, value) = match token.split_once('=') {
                Some((name, "null")) => (name, None),
                Some((name, v)) => {
                    let v =
                        number(v).ok_or_else(|| format!("line {line}: bad number in {token}"))?;
                    let v = if ID_FIELDS.contains(&name) {
                        i128::from(self.id(v as i64))
                    } else {
                        v
                    };
                    (name, Some(v))
                }
                None => (token, Some(1)),
            };
            parsed.push((name.to_string(), value));
        }
        Ok(Event {
            fields: parsed,
            expected: expected.trim().to_string(),
            line,
        })
    }

    /// The CALL for a batch: one array per field, each event's value or its 0.
    fn call(batch: Batch, events: &[Event]) -> Result<String, String> {
        let (procedure, fields) = match batch {
            Batch::Accounts => ("create_accounts", ACCOUNT_FIELDS),
            Batch::Transfers => ("create_transfers", TRANSFER_FIELDS),
        };
        for e in events {
            for (name, _) in &e.fields {
                if !fields.iter().any(|(short, _, _)| short == name) {
                    return Err(format!("line {}: unknown field {name}", e.line));
                }
            }
        }
        let arrays: Vec<String> = fields
            .iter()
            .map(|(short, column, ty)| {
                let values: Vec<String> = events
                    .iter()
                    .map(|e| {
                        let value = e.fields.iter().find(|(n, _)| n == short).map(|(_, v)| *v);
                        match (value, *ty) {
                            (Some(None), _) => "NULL".into(),
                            (Some(Some(v)), "boolean") => (v != 0).to_string(),
                            (Some(Some(v)), ty) => decimal(v, ty == "numeric"),
                            (None, "boolean") => "false".into(),
                            (None, _) => "0".into(),
                        }
                    })
                    .collect();
                format!("{column} => ARRAY[{}]::{ty}[]", values.join(", "))
            })
            .collect();
        Ok(format!("CALL {procedure}({})", arrays.join(", ")))
    }

    async fn batch(&mut self, batch: Batch, events: Vec<Event>, line: usize) {
        let call = match Self::call(batch, &events) {
            Ok(call) => call,
            Err(e) => return self.fail(line, e),
        };
        let rows = match self.client.query(call.as_str(), &[]).await {
            Ok(rows) => rows,
            Err(e) => return self.fail(line, format!("the batch failed: {e:?}")),
        };
        if rows.len() != events.len() {
            return self.fail(
                line,
                format!("{} results for {} events", rows.len(), events.len()),
            );
        }
        for (row, event) in rows.iter().zip(&events) {
            let result: String = row.get("result");
            if result != event.expected {
                let message: Option<String> = row.get("message");
                self.fail(
                    event.line,
                    format!(
                        "expected {}, got {result} ({})",
                        event.expected,
                        message.unwrap_or_default()
                    ),
                );
            }
        }
    }

    async fn check(&mut self, words: &[&str], line: usize) {
        let field = |i: usize| words.get(i).and_then(|w| number(w));
        match words {
            ["account", id, ..] => {
                let Ok(id) = id.parse::<i64>() else {
                    return self.fail(line, "bad account id".into());
                };
                let expected: Vec<String> =
                    (2..6).filter_map(field).map(|n| decimal(n, true)).collect();
                let closed = match words.get(6) {
                    None => false,
                    Some(&"closed") => true,
                    Some(other) => return self.fail(line, format!("cannot read: {other}")),
                };
                let sql = format!(
                    "SELECT debits_pending::text, debits_posted::text, credits_pending::text, credits_posted::text, closed FROM accounts WHERE id = {}",
                    self.id(id)
                );
                match self.client.query_opt(sql.as_str(), &[]).await {
                    Ok(Some(row)) => {
                        let got: Vec<String> = (0..4).map(|i| row.get(i)).collect();
                        if got != expected {
                            self.fail(
                                line,
                                format!("account {id}: {got:?}, expected {expected:?}"),
                            );
                        }
                        let got_closed: bool = row.get(4);
                        if got_closed != closed {
                            self.fail(
                                line,
                                format!("account {id}: closed is {got_closed}, expected {closed}"),
                            );
                        }
                    }
                    Ok(None) => self.fail(line, format!("account {id} does not exist")),
                    Err(e) => self.fail(line, format!("{e:?}")),
                }
            }
            ["no", table @ ("account" | "transfer"), id] => {
                let id: i64 = id.parse().unwrap_or(0);
                let sql = format!("SELECT count(*) FROM {table}s WHERE id = {}", self.id(id));
                let count: i64 = self
                    .client
                    .query_one(sql.as_str(), &[])
                    .await
                    .unwrap()
                    .get(0);
                if count != 0 {
                    self.fail(line, format!("{table} {id} exists"));
                }
            }
            ["transfer", id, check] => {
                let id: i64 = id.parse().unwrap_or(0);
                let Some((column, expected)) = check
                    .split_once('=')
                    .filter(|(c, _)| TRANSFER_CHECKS.contains(c))
                    .and_then(|(c, v)| Some((c, decimal(number(v)?, c == "amount"))))
                else {
                    return self.fail(line, format!("cannot read: {check}"));
                };
                let sql = format!(
                    "SELECT {column}::text FROM transfers WHERE id = {}",
                    self.id(id)
                );
                match self.client.query_opt(sql.as_str(), &[]).await.unwrap() {
                    Some(row) if row.get::<_, String>(0) == expected => {}
                    Some(row) => self.fail(
                        line,
                        format!(
                            "transfer {id}: {column} {}, expected {expected}",
                            row.get::<_, String>(0)
                        ),
                    ),
                    None => self.fail(line, format!("transfer {id} does not exist")),
                }
            }
            ["pending", id, status] => {
                let id: i64 = id.parse().unwrap_or(0);
                let sql = format!(
                    "SELECT status FROM pending_transfers WHERE id = {}",
                    self.id(id)
                );
                let got: Option<String> = self
                    .client
                    .query_opt(sql.as_str(), &[])
                    .await
                    .unwrap()
                    .map(|r| r.get(0));
                if got.as_deref() != Some(*status) {
                    self.fail(line, format!("pending {id}: {got:?}, expected {status}"));
                }
            }
            ["fresh", "server"] => {
                let server = TestServer::start();
                self.client = server.client().await;
                self.own_server = Some(server);
            }
            ["sleep", ms] => {
                let ms: u64 = ms.parse().unwrap_or(0);
                tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
            }
            _ => self.fail(line, format!("cannot read: {}", words.join(" "))),
        }
    }

    async fn run(&mut self, text: &str) {
        let mut open: Option<(Batch, Vec<Event>, usize)> = None;
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let text = raw.split('#').next().unwrap_or("").trim();
            if text.is_empty() {
                continue;
            }
            if let Some((batch, events, start)) = open.take() {
                if text == "end" {
                    self.batch(batch, events, start).await;
                    continue;
                }
                let mut events = events;
                match self.parse_event(text, line) {
                    Ok(event) => events.push(event),
                    Err(e) => self.fail(line, e),
                }
                open = Some((batch, events, start));
                continue;
            }
            match text {
                "accounts" => open = Some((Batch::Accounts, Vec::new(), line)),
                "transfers" => open = Some((Batch::Transfers, Vec::new(), line)),
                _ => {
                    let words: Vec<&str> = text.split_whitespace().collect();
                    self.check(&words, line).await;
                }
            }
        }
        if let Some((_, _, start)) = open {
            self.fail(start, "a batch without `end`".into());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tigerbeetle_state_machine_tests_replay() {
    let server = TestServer::start();
    let dir = common::repo_root().join("server/tests/tigerbeetle");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("the cases directory")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "tb"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no cases in {}", dir.display());
    let mut failures = Vec::new();
    for (n, path) in files.iter().enumerate() {
        let text = std::fs::read_to_string(path).expect("read a case file");
        let mut replay = Replay {
            client: server.client().await,
            own_server: None,
            file: path.file_name().unwrap().to_string_lossy().into_owned(),
            base: (n as i64 + 1) * ID_RANGE,
            failures: Vec::new(),
        };
        replay.run(&text).await;
        failures.append(&mut replay.failures);
    }
    assert!(
        failures.is_empty(),
        "{} differences from TigerBeetle:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
