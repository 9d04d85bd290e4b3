//! The HTTP API: discovery and the live resources, behind the `auth` layer.

pub mod discovery;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use discovery::{Discovery, Document, GROUP, GROUP_VERSION};
use serde_json::json;
use std::sync::Arc;

/// Everything the handlers read.
pub struct ApiState {
    pub discovery: Discovery,
    /// Answers `/readyz`: false until the server is ready to serve what it promises.
    pub ready: Arc<std::sync::atomic::AtomicBool>,
}

pub fn router(state: Arc<ApiState>) -> Router {
    Router::new()
        .route("/apis", get(apis))
        .route(&format!("/apis/{GROUP}"), get(group))
        .route(&format!("/apis/{GROUP_VERSION}"), get(resource_list))
        .fallback(not_found)
        .with_state(state)
}

/// Health endpoints, served without authentication (probes carry no identity).
pub fn health_router(state: Arc<ApiState>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/livez", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .with_state(state)
}

async fn readyz(State(state): State<Arc<ApiState>>) -> Response {
    if state.ready.load(std::sync::atomic::Ordering::Relaxed) {
        "ok".into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready").into_response()
    }
}

fn document(doc: &Document, content_type: &str, headers: &HeaderMap) -> Response {
    let not_modified = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == doc.etag));
    let status = if not_modified {
        StatusCode::NOT_MODIFIED
    } else {
        StatusCode::OK
    };
    let body = if not_modified {
        Body::empty()
    } else {
        Body::from(doc.body.clone())
    };
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, content_type)
        .header(header::ETAG, &doc.etag)
        .header(header::VARY, "Accept")
        .body(body)
        .expect("static response")
}

/// `/apis`: aggregated discovery when asked for, else the legacy group list.
async fn apis(State(state): State<Arc<ApiState>>, headers: HeaderMap) -> Response {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    let wants = |v: &str| {
        accept.split(',').any(|m| {
            let params: Vec<&str> = m.split(';').map(str::trim).collect();
            params.contains(&"g=apidiscovery.k8s.io")
                && params.contains(&"as=APIGroupDiscoveryList")
                && params.contains(&v)
        })
    };
    let d = &state.discovery;
    if wants("v=v2") {
        document(
            &d.aggregated_v2,
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
            &headers,
        )
    } else if wants("v=v2beta1") {
        document(
            &d.aggregated_v2beta1,
            "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList",
            &headers,
        )
    } else {
        document(&d.group_list, "application/json", &headers)
    }
}

async fn group(State(state): State<Arc<ApiState>>, headers: HeaderMap) -> Response {
    document(&state.discovery.group, "application/json", &headers)
}

async fn resource_list(State(state): State<Arc<ApiState>>, headers: HeaderMap) -> Response {
    document(&state.discovery.resource_list, "application/json", &headers)
}

/// A Kubernetes `Status` response.
pub fn status_response(code: StatusCode, reason: &str, message: &str) -> Response {
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code.as_u16(),
    });
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

async fn not_found() -> Response {
    status_response(
        StatusCode::NOT_FOUND,
        "NotFound",
        "the server could not find the requested resource",
    )
}
