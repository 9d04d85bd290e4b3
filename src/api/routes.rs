//! Serving a request below the group version: the operations' resources (see
//! [`super::resources`]) and their watches, or the gates (see [`super::gate`]), with the
//! `Warning`s of the answer.

use super::ApiState;
use super::resources::{Action, Plan, get, list, plan, resource_for};
use super::respond::representation;
use super::status::ApiError;
use super::{freshness, gate, resources};
use axum::Extension;
use axum::extract::{FromRequestParts, State};
use axum::http::HeaderMap;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use ifo_apimachinery::{RequestInfo, UserInfo};
use std::sync::Arc;

/// The request as the `auth` layer read and authorized it. Requests that did not pass through
/// that layer (the API's own unit tests) are read here, the same way.
pub struct ParsedRequest(pub Arc<RequestInfo>);

impl<S: Send + Sync> FromRequestParts<S> for ParsedRequest {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        if let Some(info) = parts.extensions.get::<Arc<RequestInfo>>() {
            return Ok(ParsedRequest(info.clone()));
        }
        RequestInfo::parse(&parts.method, parts.uri.path(), parts.uri.query())
            .map(|info| ParsedRequest(Arc::new(info)))
            .map_err(|e| ApiError::BadRequest(e.to_string()))
    }
}

/// Serves `/apis/<g>/<v>/...` paths below the group version.
pub async fn dispatch(
    State(state): State<Arc<ApiState>>,
    ParsedRequest(info): ParsedRequest,
    user: Option<Extension<UserInfo>>,
    headers: HeaderMap,
) -> Response {
    if !state.is_serving() {
        return ApiError::not_leader().into_response();
    }
    let user = user.map(|Extension(u)| u.name).unwrap_or_default();
    let namespace = info.resource.as_ref().and_then(|r| r.namespace.as_deref());
    let warnings = || {
        let unsynced = state.readiness.unsynced();
        freshness::warnings_now(&state.freshness, &unsynced, namespace)
    };
    // Before the answer is read from the index and after: a target that becomes current while
    // the answer is taken may have been read half-listed (see `freshness::warnings_now`).
    let before = warnings();
    let mut response = match route(&state, &info, &user, &headers) {
        Ok(response) => response,
        Err(e) => e.into_response(),
    };
    // With those of the snapshot a list page was read from, told as one.
    let kept = response.extensions_mut().remove::<freshness::Kept>();
    let after = warnings();
    let notices = before
        .iter()
        .chain(kept.iter().flat_map(|k| k.0.iter()))
        .chain(&after);
    let texts = freshness::texts(notices, reader(&info));
    freshness::warn(texts, &mut response);
    response
}

/// Who reads the warnings of the answer to `info` (see [`freshness::Reader`]): a read of
/// cluster-scoped operations is authorized for no namespace.
fn reader(info: &RequestInfo) -> freshness::Reader {
    let cluster_scoped = info
        .resource
        .as_ref()
        .and_then(|r| resource_for(&r.resource))
        .is_some_and(|r| !r.namespaced);
    if cluster_scoped && !gate::is_gate_request(info) {
        freshness::Reader::ClusterScoped
    } else {
        freshness::Reader::All
    }
}

fn route(
    state: &Arc<ApiState>,
    info: &RequestInfo,
    user: &str,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    if gate::is_gate_request(info) {
        return gate::route(state, info, user, headers);
    }
    let Plan {
        scope,
        action,
        params,
    } = plan(info)?;
    let repr = representation(headers)?;
    match action {
        Action::Get(name) => get(state, &scope, &name, repr, &params),
        Action::List => list(state, &scope, &params, repr),
        Action::Watch => resources::watch::serve(state.clone(), user, scope, params, repr),
    }
}
