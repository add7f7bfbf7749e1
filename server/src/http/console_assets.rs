//! The console's page, script and style sheet, compiled into the binary (`server/console/`):
//! `cargo build` alone gives a working console, and the page needs nothing from elsewhere.

use axum::http::header;
use axum::response::IntoResponse;

const INDEX: &str = include_str!("../../console/index.html");
const SCRIPT: &str = include_str!("../../console/console.js");
const STYLE: &str = include_str!("../../console/console.css");

/// Asset responses: no caching across builds, nothing to sniff, no framing by other pages.
fn asset(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::X_FRAME_OPTIONS, "DENY"),
        ],
        body,
    )
}

pub async fn index() -> impl IntoResponse {
    asset("text/html; charset=utf-8", INDEX)
}

pub async fn script() -> impl IntoResponse {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

pub async fn style() -> impl IntoResponse {
    asset("text/css; charset=utf-8", STYLE)
}
