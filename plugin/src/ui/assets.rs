//! The page, embedded: its HTML, and the script and style sheet esbuild bundled at build time
//! (build.rs). Nothing is loaded from elsewhere: the page works offline, and its
//! Content-Security-Policy allows this origin only.

use axum::http::header;
use axum::response::IntoResponse;

const INDEX: &str = include_str!("../../ui/index.html");
const SCRIPT: &str = include_str!(concat!(env!("OUT_DIR"), "/ui/dist/main.js"));
const STYLE: &str = include_str!(concat!(env!("OUT_DIR"), "/ui/dist/style.css"));

pub(super) async fn index() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], INDEX)
}

pub(super) async fn script() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        SCRIPT,
    )
}

pub(super) async fn style() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE)
}
