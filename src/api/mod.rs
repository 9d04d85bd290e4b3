//! The HTTP API: discovery and the live resources, behind the `auth` layer.

mod chunked;
pub(crate) mod continue_token;
pub(crate) mod discovery;
pub(crate) mod gate;
pub(crate) mod incomplete;
pub(crate) mod negotiate;
pub(crate) mod openapi;
mod operations;
pub(crate) mod params;
pub(crate) mod request;
pub(crate) mod resource;
mod respond;
mod routes;
pub(crate) mod served;
mod snapshots;
pub(crate) mod status;
mod table;
mod watch;
mod wire;

use crate::readiness::{Probe, Readiness};
use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use discovery::{Discovery, Document};
use negotiate::DiscoveryFormat;
use resource::{GROUP, GROUP_VERSION};
use status::ApiError;
use std::sync::Arc;

/// Everything the handlers read.
pub struct ApiState {
    pub(crate) discovery: Discovery,
    pub(crate) openapi: openapi::OpenApi,
    /// Read-only: the API never changes what it serves.
    pub(crate) index: crate::index::IndexReader,
    pub(crate) snapshots: snapshots::Snapshots,
    /// Answers `/readyz` (see [`crate::readiness`] for what ready means).
    pub(crate) readiness: Readiness,
    /// Limits on open watches.
    watch_slots: Arc<watch::slots::WatchSlots>,
    /// Which watched targets are not current, for the `Warning` header of reads.
    pub(crate) detection: crate::detect::HealthReader,
    /// The names of the cluster's nodes and namespaces: which of their gates exist.
    pub(crate) inventory: Arc<crate::inventory::Inventory>,
    /// What the rules announce: the gates' scheduled operations.
    pub(crate) schedules: crate::schedule::Schedules,
    /// Bumped to end every open watch cleanly (the server stops, or leadership is lost).
    watch_generation: tokio::sync::watch::Sender<u64>,
    /// Whether resource requests are answered (false on a standby replica).
    serving: std::sync::atomic::AtomicBool,
    /// When this state was made: the earliest a gate's verdict can date from.
    started: jiff::Timestamp,
}

/// Limits on what callers may hold open.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Open watches, in total.
    pub max_watches: usize,
    /// Open watches of one user.
    pub max_watches_per_user: usize,
    /// Estimated bytes held by all open watches (their selectors and buffers).
    pub max_watch_bytes: usize,
    /// Estimated bytes held by one user's open watches.
    pub max_watch_bytes_per_user: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_watches: 10_000,
            max_watches_per_user: 1_000,
            max_watch_bytes: 512 << 20,
            max_watch_bytes_per_user: 32 << 20,
        }
    }
}

/// The API's routes (discovery, OpenAPI, the served resources, `/metrics`) over `state`, without
/// the `auth` layer: the server puts the `guard` middleware in front, benchmarks call it bare.
pub fn router(state: Arc<ApiState>) -> Router {
    Router::new()
        .route("/apis", get(apis))
        .route(&format!("/apis/{GROUP}"), get(group))
        .route(&format!("/apis/{GROUP_VERSION}"), get(resource_list))
        .route(
            &format!("/apis/{GROUP_VERSION}/{{*rest}}"),
            axum::routing::any(routes::dispatch),
        )
        .route("/openapi/v2", get(openapi::v2_document))
        .route("/openapi/v3", get(openapi::v3_root_document))
        .route(
            &format!("/openapi/v3/apis/{GROUP_VERSION}"),
            get(openapi::v3_group_document),
        )
        .route("/metrics", get(|| async { crate::metrics::render() }))
        .fallback(not_found)
        .with_state(state)
}

impl ApiState {
    /// The state of an API serving what `index` holds; `/readyz` answers from `readiness`, and
    /// `limits` caps open watches.
    pub fn new(index: crate::index::IndexReader, readiness: Readiness, limits: Limits) -> Self {
        ApiState {
            discovery: Discovery::new(),
            openapi: openapi::OpenApi::new(),
            index,
            snapshots: snapshots::Snapshots::default(),
            readiness,
            watch_slots: watch::slots::WatchSlots::new(limits),
            detection: Default::default(),
            inventory: Default::default(),
            schedules: Default::default(),
            watch_generation: tokio::sync::watch::Sender::new(0),
            serving: std::sync::atomic::AtomicBool::new(true),
            started: jiff::Timestamp::now(),
        }
    }

    /// Ends every open watch cleanly (its stream closes; the client resumes from its last
    /// resourceVersion, elsewhere): what a stopping server does before it closes connections.
    pub(crate) fn end_watches(&self) {
        self.watch_generation.send_modify(|g| *g += 1);
    }

    /// Answer resource requests (the leader, or the only replica) or refuse them with 503
    /// (a standby). Stopping also ends the open watches.
    pub(crate) fn set_serving(&self, serving: bool) {
        self.serving
            .store(serving, std::sync::atomic::Ordering::SeqCst);
        crate::metrics::set_leader(serving);
        if !serving {
            self.end_watches();
        }
    }

    /// See [`ApiState::set_serving`].
    pub(crate) fn is_serving(&self) -> bool {
        self.serving.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The facts the maintenance gates are judged on (see [`crate::gate`]).
    pub(crate) fn gates(&self) -> crate::gate::Gates {
        crate::gate::Gates::new(
            self.index.clone(),
            self.detection.clone(),
            self.readiness.clone(),
            self.inventory.clone(),
        )
    }

    /// The maintenance gates a list answers (the cluster's and those with operations in
    /// flight), as they are served: what the gate metrics read.
    pub(crate) fn maintenance_gates(&self) -> Vec<crate::metrics::GateSeries> {
        gate::listed_gates(self)
    }

    /// Warns readers when a target in `targets` is not watched (by default none is known).
    pub(crate) fn with_detection(mut self, targets: crate::detect::HealthReader) -> Self {
        self.detection = targets;
        self
    }

    /// Tells which node and namespace gates exist from `inventory` (by default no name is
    /// known, and such gates are `Unknown` unless operations are in flight in them).
    pub(crate) fn with_inventory(mut self, inventory: Arc<crate::inventory::Inventory>) -> Self {
        self.inventory = inventory;
        self
    }

    /// Gates list the operations `schedules` announce.
    pub fn with_schedules(mut self, schedules: crate::schedule::Schedules) -> Self {
        self.schedules = schedules;
        self
    }
}

/// Health endpoints, served without authentication (probes carry no identity).
pub(crate) fn health_router(state: Arc<ApiState>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .with_state(state)
}

/// `ok`, or 503 with the reason once a task the server cannot do without has failed (see
/// [`crate::readiness::Readiness::fail`]).
async fn livez(State(state): State<Arc<ApiState>>) -> Response {
    match state.readiness.liveness() {
        Ok(()) => "ok".into_response(),
        Err(reason) => (StatusCode::SERVICE_UNAVAILABLE, reason).into_response(),
    }
}

/// `ok`, or 503 with the reason. Only this probe reflects readiness: every other path is served
/// before the initial sync is done.
async fn readyz(State(state): State<Arc<ApiState>>) -> Response {
    match state.readiness.probe() {
        Probe::Ready => "ok".into_response(),
        Probe::NotReady(reason) => (StatusCode::SERVICE_UNAVAILABLE, reason).into_response(),
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

/// `/apis`: aggregated discovery when asked for, else the legacy group list, else 406.
async fn apis(State(state): State<Arc<ApiState>>, headers: HeaderMap) -> Response {
    let d = &state.discovery;
    let accept = negotiate::accept_header(&headers);
    match negotiate::negotiate_discovery(accept.as_deref()) {
        Ok(format @ DiscoveryFormat::AggregatedV2) => {
            document(&d.aggregated_v2, format.content_type(), &headers)
        }
        Ok(format @ DiscoveryFormat::AggregatedV2Beta1) => {
            document(&d.aggregated_v2beta1, format.content_type(), &headers)
        }
        Ok(format @ DiscoveryFormat::Legacy) => {
            document(&d.group_list, format.content_type(), &headers)
        }
        Err(_) => ApiError::not_acceptable().into_response(),
    }
}

async fn group(State(state): State<Arc<ApiState>>, headers: HeaderMap) -> Response {
    document(&state.discovery.group, "application/json", &headers)
}

async fn resource_list(State(state): State<Arc<ApiState>>, headers: HeaderMap) -> Response {
    document(&state.discovery.resource_list, "application/json", &headers)
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (
            self.status_code(),
            [(header::CONTENT_TYPE, negotiate::APPLICATION_JSON)],
            self.to_json(),
        )
            .into_response();
        if let Some(seconds) = self.retry_after_seconds() {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, seconds.into());
        }
        response
    }
}

async fn not_found() -> Response {
    ApiError::PathNotFound.into_response()
}

#[cfg(test)]
mod tests;
