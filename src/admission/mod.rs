//! The server's answers to kube-apiserver's admission webhooks: where a request that kube-apiserver
//! is about to accept is shown to the server first, so that the server can refuse what it knows
//! it cannot run, and hold drains while work is in flight.
//!
//! Each door is a route of its own: a typed `AdmissionReview` in, a pure, unit-tested decision,
//! a thin handler. [`RULESETS_PATH`] refuses OperationRuleSets that do not compile, or that
//! read what their targets' schemas do not have (see `rulesets`); [`EVICTIONS_PATH`], the maintenance guard, refuses with 429 the eviction of a pod
//! on a node whose gate is not clear (see `evictions`), and [`EVICTIONS_STANDBY_PATH`] is its
//! second door. Each replica checks that kube-apiserver reaches the door it stands behind
//! (`reach`).
//!
//! The doors are served on a TLS listener of their own (`ADMISSION_PORT`), with connection
//! pools of their own, so that what callers of the API hold open on its port (watches, with any
//! token) takes nothing kube-apiserver's reviews need; and without the API's authentication,
//! since kube-apiserver calls webhooks without a client certificate unless it is given a
//! kubeconfig for them. Where it is (`ADMISSION_ALLOWED_NAMES`), the doors answer kube-apiserver
//! only, and everyone else gets 401 before its body is read; where it cannot be, anyone who reaches the
//! port can send reviews, so each takes a turn among its address's and all anonymous ones
//! before it is read (`intake`), and is read for what its decision needs and nothing else
//! (`review`). The rulesets' door checks the fields the rules read against the schemas the
//! server holds (every CRD's, from a watch; a built-in type's document of `/openapi/v3`, read
//! once per version of it), so a caller makes it read nothing of its choosing and learns
//! nothing an authenticated user could not read at `/openapi/v3`; the guard reads the
//! in-memory gates and pods (never the cluster), and its denial says only node-level facts
//! (docs/operating.md#security). Every
//! review is bounded: its body (to [`MAX_REVIEW_BYTES`] for rulesets; an eviction's to more
//! than kube-apiserver can send, in a few turns), its time to [`REVIEW_DEADLINE`], its
//! CPU to a few compiles at once.

pub(crate) mod evictions;
mod intake;
pub(crate) mod node_events;
pub(crate) mod reach;
mod review;
mod rulesets;
mod turns;

pub(crate) use intake::Intake;

use crate::evaluate::Engine;
use crate::metrics::AdmissionAnswer;
use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use kube::core::admission::AdmissionResponse;
use std::sync::Arc;
use std::time::Duration;

/// The path of the door for OperationRuleSets (the `ifo-ruleset-validation` webhook).
pub const RULESETS_PATH: &str = "/admission/rulesets";

/// The path of the maintenance guard's door for evictions (the `ifo-maintenance-guard`
/// webhook, through the leader's Service), served with `EVICTION_GUARD` only.
pub const EVICTIONS_PATH: &str = "/admission/evictions";

/// The path of the guard's second door (the `ifo-maintenance-guard-standby` webhook, through the
/// standbys' Service): the same decision, so that an eviction is answered while either replica
/// can answer, without a second count, log line or Event (see `evictions`).
pub const EVICTIONS_STANDBY_PATH: &str = "/admission/evictions/standby";

/// The doors at the paths that hold the doors' key (see [`crate::certificates::DoorKey`]): the same
/// doors; who may call them is [`Intake::caller`]'s to say.
const KEYED_RULESETS_PATH: &str = "/admission/{key}/rulesets";
const KEYED_EVICTIONS_PATH: &str = "/admission/{key}/evictions";
const KEYED_EVICTIONS_STANDBY_PATH: &str = "/admission/{key}/evictions/standby";

/// Largest review read: kube-apiserver's own limit on a request body (3 MiB), so any object it
/// accepts fits, with its old object on an update. A larger body is refused unread (413).
pub const MAX_REVIEW_BYTES: usize = 3 << 20;

/// Longest a review may take, its body read included. kube-apiserver gives up after the
/// webhook's `timeoutSeconds` (5 s) and applies its failure policy; past this, the server stops
/// waiting too (a compile under way still ends: it is bounded by itself, see `rulesets`).
pub const REVIEW_DEADLINE: Duration = Duration::from_secs(10);

use review::REVIEW_API_VERSION;

/// The doors' routes, without authentication (see the [module](self)): POST only (any other
/// method is 405), and nothing else (404), each such request's connection giving its place to
/// any newcomer from then on (kube-apiserver sends nothing but reviews). The door for evictions
/// only with the guard (`evictions`).
pub(crate) fn router(
    engine: Engine,
    evictions: Option<evictions::Evictions>,
    intake: Arc<Intake>,
    schemas: Option<Arc<crate::ruleset::schema_check::Schemas>>,
) -> Router {
    let router = Router::new()
        .route(RULESETS_PATH, axum::routing::post(rulesets::review))
        .route(KEYED_RULESETS_PATH, axum::routing::post(rulesets::review))
        .with_state(Arc::new(rulesets::RuleSets::new(
            engine,
            intake.clone(),
            schemas,
        )));
    let router = match evictions {
        Some(door) => router.merge({
            Router::new()
                .route(EVICTIONS_PATH, axum::routing::post(evictions::review))
                .route(KEYED_EVICTIONS_PATH, axum::routing::post(evictions::review))
                .route(
                    EVICTIONS_STANDBY_PATH,
                    axum::routing::post(evictions::review_standby),
                )
                .route(
                    KEYED_EVICTIONS_STANDBY_PATH,
                    axum::routing::post(evictions::review_standby),
                )
                .with_state(Arc::new(door))
        }),
        None => router,
    };
    router
        .fallback(|request: axum::extract::Request| async move {
            Intake::not_kube_apiserver(&request);
            StatusCode::NOT_FOUND
        })
        .method_not_allowed_fallback(|request: axum::extract::Request| async move {
            Intake::not_kube_apiserver(&request);
            StatusCode::METHOD_NOT_ALLOWED
        })
}

/// The door for evictions alone, over `state`, with the cluster's `nodes` and its `pods`
/// (namespace, name, node) as if their watches had listed them, and Events that go nowhere: what
/// the guard's benchmark measures (`cargo bench --bench guard`).
#[doc(hidden)]
pub fn evictions_router(
    state: crate::api::ApiState,
    nodes: &[String],
    pods: &[(String, String, String)],
) -> Router {
    let inventory = Arc::new(crate::inventory::Inventory::default());
    inventory.listed(
        crate::inventory::Kind::Node,
        nodes.iter().map(String::as_str),
    );
    let placed = Arc::new(crate::inventory::pods::Pods::default());
    let entries: Vec<(&str, &str, Option<&str>, bool)> = pods
        .iter()
        .map(|(ns, name, node)| (ns.as_str(), name.as_str(), Some(node.as_str()), false))
        .collect();
    placed.set(&entries);
    let state = state.with_inventory(inventory.clone());
    Router::new()
        .route(EVICTIONS_PATH, axum::routing::post(evictions::review))
        .with_state(Arc::new(evictions::Evictions {
            gates: state.gates(),
            inventory,
            pods: placed,
            when_unknown: crate::config::WhenUnknown::Deny,
            events: node_events::NodeEvents::nowhere(),
            intake: Arc::new(Intake::open()),
            reach: reach::Reach::new("ifo-apiserver", "ifo-system")
                .expect("the system's random source"),
        }))
}

/// Why a review got no decision: it is answered with an HTTP error, and kube-apiserver applies
/// the webhook's failure policy.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReviewError {
    /// The doors answer only kube-apiserver, and the caller did not prove it is.
    #[error(
        "Unauthorized: this door answers only kube-apiserver, with the client certificate or at the path its webhook configuration gives it"
    )]
    Unauthorized,
    /// The body is over the door's limit ([`MAX_REVIEW_BYTES`] for rulesets).
    #[error("the AdmissionReview is larger than {limit} bytes")]
    TooLarge {
        /// The limit.
        limit: usize,
    },
    /// The body could not be read.
    #[error("cannot read the AdmissionReview")]
    Body(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The body is not an AdmissionReview.
    #[error("malformed AdmissionReview")]
    Json(#[source] serde_json::Error),
    /// An AdmissionReview of another version or kind.
    #[error(
        "expected an AdmissionReview of {REVIEW_API_VERSION}, got kind {kind:?} of {api_version:?}"
    )]
    NotAReview {
        /// `apiVersion` of the body.
        api_version: String,
        /// `kind` of the body.
        kind: String,
    },
    /// The review has no `request`.
    #[error("malformed AdmissionReview: no request")]
    NoRequest,
    /// A CREATE or UPDATE without the object.
    #[error("malformed AdmissionReview: a {operation} request without its object")]
    NoObject {
        /// The request's operation.
        operation: &'static str,
    },
    /// No answer within [`REVIEW_DEADLINE`].
    #[error("no answer within {0:?}")]
    TimedOut(Duration),
    /// The review's turn to be read was taken back before its body had all come: an address
    /// that held less needed it (see `turns`).
    #[error(
        "the review's body had not all come when a caller that held fewer of the turns to be read needed this one"
    )]
    TakenBack,
    /// The decision failed (it panicked).
    #[error("the review failed")]
    Failed(#[source] tokio::task::JoinError),
    /// The decision, made on the request's task, panicked: the review is refused with an
    /// error, and the server goes on serving.
    #[error("the review failed (the decision panicked)")]
    Panicked,
}

impl ReviewError {
    /// What went wrong, as a metric's label value: `too_large`, `malformed` (unreadable, not
    /// an AdmissionReview, or missing its request or object), `timed_out`, `taken_back` or
    /// `failed`.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            ReviewError::Unauthorized => "unauthorized",
            ReviewError::TooLarge { .. } => "too_large",
            ReviewError::Body(_)
            | ReviewError::Json(_)
            | ReviewError::NotAReview { .. }
            | ReviewError::NoRequest
            | ReviewError::NoObject { .. } => "malformed",
            ReviewError::TimedOut(_) => "timed_out",
            ReviewError::TakenBack => "taken_back",
            ReviewError::Failed(_) | ReviewError::Panicked => "failed",
        }
    }

    fn status(&self) -> StatusCode {
        match self {
            ReviewError::Unauthorized => StatusCode::UNAUTHORIZED,
            ReviewError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ReviewError::Body(_)
            | ReviewError::Json(_)
            | ReviewError::NotAReview { .. }
            | ReviewError::NoRequest
            | ReviewError::NoObject { .. } => StatusCode::BAD_REQUEST,
            ReviewError::TimedOut(_) => StatusCode::SERVICE_UNAVAILABLE,
            ReviewError::TakenBack => StatusCode::TOO_MANY_REQUESTS,
            ReviewError::Failed(_) | ReviewError::Panicked => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The error and its causes, as one line.
    fn message(&self) -> String {
        let mut message = self.to_string();
        let mut source = std::error::Error::source(self);
        while let Some(cause) = source {
            message.push_str(": ");
            message.push_str(&cause.to_string());
            source = cause.source();
        }
        message
    }
}

/// The HTTP answer to a review, and the decision it counts as.
fn respond(answered: Result<AdmissionResponse, ReviewError>) -> (Response, AdmissionAnswer) {
    match answered {
        Ok(response) => {
            let decision = if response.allowed {
                AdmissionAnswer::Allowed
            } else {
                AdmissionAnswer::Denied
            };
            (axum::Json(response.into_review()).into_response(), decision)
        }
        Err(e) => {
            match &e {
                // A bug: worth an operator's look.
                ReviewError::Failed(_) | ReviewError::Panicked => {
                    tracing::warn!(error = %e.message(), "admission review failed");
                }
                // What any caller of this unauthenticated path can send or cause (a review
                // waiting for its turn behind many): counted, not logged above debug.
                _ => tracing::debug!(error = %e.message(), "admission review not answered"),
            }
            let mut response = (
                e.status(),
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                e.message(),
            )
                .into_response();
            if matches!(e, ReviewError::TakenBack) {
                // kube-apiserver's client retries a 429 that says when (within the webhook's
                // timeout); without it, the failure policy decides at once.
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
            }
            (response, AdmissionAnswer::Error)
        }
    }
}
