//! The console's API: a login by password (the same roles, passwords and refusals as a
//! PostgreSQL login) gives a session cookie; each `POST /api/sql` runs one statement in that
//! login's own session, as its role, and answers JSON — the columns, the rows as PostgreSQL's
//! text, the command tag and notices, or the error with its SQLSTATE.
//!
//! A console session is read-only unless the request says `"writes": true` (the page's
//! unlock switch): the session is held read-only whatever it SETs. Requests that change
//! anything must carry the `X-Hotledger-Console` header, which a page of another origin
//! cannot send without the preflight this server never grants; the cookie is HttpOnly and
//! SameSite=Strict. Sessions end after 30 minutes unused, and at most `MAX_SESSIONS` live.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value as JsonValue};

use super::HttpState;
use crate::session::{Session, StatementResult};

const COOKIE: &str = "hotledger_console";
const IDLE: Duration = Duration::from_secs(30 * 60);
const MAX_SESSIONS: usize = 256;
/// The header a write request must carry (see the module's header).
const CONSOLE_HEADER: &str = "x-hotledger-console";
/// Rows a result sends at most (the rest are counted, not sent).
const MAX_ROWS: usize = 2000;

/// One login's session.
pub struct ConsoleSession {
    user: String,
    session: tokio::sync::Mutex<Session>,
    last_used: Mutex<Instant>,
}

#[derive(Default)]
pub struct ConsoleSessions {
    by_token: Mutex<HashMap<String, Arc<ConsoleSession>>>,
}

impl ConsoleSessions {
    fn get(&self, token: &str) -> Option<Arc<ConsoleSession>> {
        let mut map = self.by_token.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, s| {
            s.last_used
                .lock()
                .map(|t| t.elapsed() < IDLE)
                .unwrap_or(false)
        });
        let found = map.get(token).cloned()?;
        *found.last_used.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        Some(found)
    }

    fn insert(&self, session: ConsoleSession) -> String {
        let token: String = (0..32)
            .map(|_| format!("{:02x}", rand::random::<u8>()))
            .collect();
        let mut map = self.by_token.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= MAX_SESSIONS {
            // The least recently used goes.
            let oldest = map
                .iter()
                .min_by_key(|(_, s)| *s.last_used.lock().unwrap_or_else(|e| e.into_inner()))
                .map(|(t, _)| t.clone());
            if let Some(oldest) = oldest {
                map.remove(&oldest);
            }
        }
        map.insert(token.clone(), Arc::new(session));
        token
    }

    fn remove(&self, token: &str) {
        self.by_token
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(token);
    }
}

fn token_of(headers: &HeaderMap) -> Option<String> {
    let cookies = headers.get(header::COOKIE)?.to_str().ok()?;
    cookies.split(';').find_map(|c| {
        let (name, value) = c.trim().split_once('=')?;
        (name == COOKIE).then(|| value.to_owned())
    })
}

fn refusal(code: StatusCode, message: &str) -> Response {
    (code, Json(json!({ "error": { "message": message } }))).into_response()
}

/// Why a request is refused: its status and message.
type Refused = (StatusCode, &'static str);

/// The request's session, or why it is refused: 401 without a live one, 403 for a request
/// that changes something without the console's header.
fn session_of(
    state: &HttpState,
    headers: &HeaderMap,
    changes: bool,
) -> Result<Arc<ConsoleSession>, Refused> {
    if changes && !headers.contains_key(CONSOLE_HEADER) {
        return Err((
            StatusCode::FORBIDDEN,
            "missing the console's request header",
        ));
    }
    token_of(headers)
        .and_then(|t| state.sessions.get(&t))
        .ok_or((StatusCode::UNAUTHORIZED, "log in first"))
}

#[derive(Deserialize)]
pub struct LoginRequest {
    user: String,
    password: String,
}

pub async fn login(
    State(state): State<Arc<HttpState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Json(request): Json<LoginRequest>,
) -> Response {
    if !headers.contains_key(CONSOLE_HEADER) {
        return refusal(
            StatusCode::FORBIDDEN,
            "missing the console's request header",
        );
    }
    if let Err(message) = state
        .logins
        .password_login(peer, &request.user, &request.password)
        .await
    {
        return refusal(StatusCode::UNAUTHORIZED, &message);
    }
    let startup: HashMap<String, String> = [
        ("user".to_owned(), request.user.clone()),
        ("database".to_owned(), crate::login::DATABASE.to_owned()),
        (
            "application_name".to_owned(),
            "hotledger console".to_owned(),
        ),
    ]
    .into();
    // A process id of its own, as a connection's (what pg_stat_activity shows).
    let pid = (rand::random::<u32>() & 0x3fff_ffff) as i32 | 1;
    let mut session = Session::new(state.shared.clone(), &startup, pid, Default::default());
    session.set_client(peer);
    session.lock_writes(true);
    let token = state.sessions.insert(ConsoleSession {
        user: request.user.clone(),
        session: tokio::sync::Mutex::new(session),
        last_used: Mutex::new(Instant::now()),
    });
    let cookie = format!("{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/");
    (
        [(header::SET_COOKIE, cookie)],
        Json(json!({ "user": request.user })),
    )
        .into_response()
}

pub async fn logout(State(state): State<Arc<HttpState>>, headers: HeaderMap) -> Response {
    if let Some(token) = token_of(&headers) {
        state.sessions.remove(&token);
    }
    let expired = format!("{COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0");
    ([(header::SET_COOKIE, expired)], Json(json!({}))).into_response()
}

pub async fn me(State(state): State<Arc<HttpState>>, headers: HeaderMap) -> Response {
    match session_of(&state, &headers, false) {
        Ok(s) => Json(json!({ "user": s.user })).into_response(),
        Err((code, why)) => refusal(code, why),
    }
}

#[derive(Deserialize)]
pub struct SqlRequest {
    sql: String,
    #[serde(default)]
    writes: bool,
}

pub async fn sql(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    Json(request): Json<SqlRequest>,
) -> Response {
    let console = match session_of(&state, &headers, true) {
        Ok(s) => s,
        Err((code, why)) => return refusal(code, why),
    };
    let mut session = console.session.lock().await;
    session.lock_writes(!request.writes);
    Json(run_statement(&mut session, &request.sql).await).into_response()
}

fn error_json(e: &sql::SqlError) -> JsonValue {
    json!({
        "error": {
            "sqlstate": e.sqlstate(),
            "message": e.message,
            "detail": e.detail,
        }
    })
}

/// Runs one statement as a simple query would, and says what it gave.
async fn run_statement(session: &mut Session, text: &str) -> JsonValue {
    let statements = match sql::parse(text) {
        Ok(s) => s,
        Err(e) => return error_json(&e),
    };
    let [statement] = statements.as_slice() else {
        let e = sql::SqlError::syntax("the console runs one statement at a time");
        return error_json(&e);
    };
    let _ = session.begin_query();
    session.begin_statement(&statement.text);
    let catalog = session.catalog();
    let bound = planner::bind_in_session(&catalog, statement, &[], session.bind_context());
    let result = match bound {
        Ok(bound) => session.execute(&bound, &[]).await,
        Err(e) => {
            session.statement_failed();
            Err(e)
        }
    };
    let notices: Vec<JsonValue> = std::mem::take(&mut session.notices)
        .iter()
        .map(|n| json!({ "sqlstate": n.sqlstate(), "message": n.message }))
        .collect();
    let mut answer = match result {
        Err(e) => error_json(&e),
        Ok(StatementResult::Rows { columns, rows, tag }) => {
            let total = rows.len();
            let rows: Vec<Vec<Option<String>>> = rows
                .iter()
                .take(MAX_ROWS)
                .map(|row| {
                    row.iter()
                        .zip(&columns)
                        .map(|(v, c)| v.to_pg_text(c.ty))
                        .collect()
                })
                .collect();
            json!({
                "columns": columns.iter().map(|c| json!({ "name": c.name, "type": c.ty.pg_name() })).collect::<Vec<_>>(),
                "rows": rows,
                "row_count": total,
                "tag": if tag == "SHOW" { tag } else { format!("{tag} {total}") },
            })
        }
        Ok(StatementResult::Command(tag)) => json!({ "tag": tag }),
        Ok(_) => error_json(&sql::SqlError::feature_not_supported(
            "COPY in the console (use psql's \\copy)",
        )),
    };
    answer["notices"] = JsonValue::Array(notices);
    answer
}
