//! The node's HTTP server (`hotledger serve --http HOST:PORT`, default 127.0.0.1:8080):
//! the console's page at `/` (its assets are in the binary), `GET /metrics` in Prometheus'
//! text format, `GET /health`, and the console's API — `POST /api/login` (the same roles and
//! passwords as PostgreSQL logins, then a session cookie), `POST /api/logout`, `GET
//! /api/me`, `POST /api/sql` (one statement, run as the logged-in role, read-only unless the
//! page unlocks writes; `console_api.rs`).
//!
//! It runs on a thread of its own, so a slow console never holds up a client session, and
//! it answers only what is asked of it here: the page loads nothing from elsewhere.

mod console_api;
mod console_assets;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;

use crate::login::Logins;
use crate::session::Shared;

/// What every handler reaches.
pub struct HttpState {
    pub shared: Arc<Shared>,
    pub logins: Arc<Logins>,
    pub sessions: console_api::ConsoleSessions,
}

/// Binds `addr` (an error says why it cannot) and serves on a thread of its own.
pub fn start(addr: SocketAddr, shared: Arc<Shared>, logins: Arc<Logins>) -> Result<(), String> {
    let listener =
        std::net::TcpListener::bind(addr).map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("{addr}: {e}"))?;
    let state = Arc::new(HttpState {
        shared,
        logins,
        sessions: console_api::ConsoleSessions::default(),
    });
    std::thread::Builder::new()
        .name("http".into())
        .stack_size(sql::STATEMENT_STACK_BYTES)
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(r) => r,
                Err(e) => return eprintln!("hotledger: the console's runtime: {e}"),
            };
            runtime.block_on(async move {
                let listener = match tokio::net::TcpListener::from_std(listener) {
                    Ok(l) => l,
                    Err(e) => return eprintln!("hotledger: the console's listener: {e}"),
                };
                let app = router(state).into_make_service_with_connect_info::<SocketAddr>();
                if let Err(e) = axum::serve(listener, app).await {
                    eprintln!("hotledger: the console stopped: {e}");
                }
            });
        })
        .map_err(|e| format!("cannot start the console's thread: {e}"))?;
    Ok(())
}

fn router(state: Arc<HttpState>) -> Router {
    Router::new()
        .route("/", get(console_assets::index))
        .route("/console.js", get(console_assets::script))
        .route("/console.css", get(console_assets::style))
        .route("/metrics", get(metrics))
        .route("/health", get(health))
        .route("/api/login", post(console_api::login))
        .route("/api/logout", post(console_api::logout))
        .route("/api/me", get(console_api::me))
        .route("/api/sql", post(console_api::sql))
        .with_state(state)
}

/// `GET /metrics`: every `hotledger.metrics` sample and the stages' latency summaries.
async fn metrics(State(state): State<Arc<HttpState>>) -> Response {
    match crate::session::gather_node_views(&state.shared).await {
        Ok(views) => {
            let totals = crate::session::stage_totals(&state.shared);
            (
                [(
                    header::CONTENT_TYPE,
                    "text/plain; version=0.0.4; charset=utf-8",
                )],
                crate::metrics::prometheus::text(&views, &totals),
            )
                .into_response()
        }
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, e.message).into_response(),
    }
}

/// `GET /health`: 200 with the node's role while it serves, 503 once its Raft stopped.
async fn health(State(state): State<Arc<HttpState>>) -> Response {
    let status = &state.shared.cluster_status;
    let (role, term, running) = status.here();
    let body = serde_json::json!({
        "status": if running { "serving" } else { "stopped" },
        "node_id": status.node_id(),
        "role": role,
        "term": term,
    });
    let code = if running {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, axum::Json(body)).into_response()
}
