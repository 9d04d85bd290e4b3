//! Serving a request below the group version: sent to the served resource it names (see
//! [`super::served`]), with the `Warning`s of the answer.

use super::ApiState;
use super::incomplete;
use super::request::plan;
use super::respond::representation;
use super::served;
use super::status::ApiError;
use axum::Extension;
use axum::extract::{FromRequestParts, State};
use axum::http::HeaderMap;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use ifo_apimachinery::{RequestInfo, UserInfo};
use std::sync::Arc;

/// The request as the `auth` layer read and authorized it. Requests that did not pass through
/// that layer (the API's own unit tests) are read here, the same way.
pub(super) struct ParsedRequest(pub Arc<RequestInfo>);

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
pub(super) async fn dispatch(
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
        incomplete::warnings_now(&state.detection, &unsynced, namespace)
    };
    // Before the answer is read from the index and after: a target that becomes current while
    // the answer is taken may have been read half-listed (see `incomplete::warnings_now`).
    let before = warnings();
    let mut response = match route(&state, &info, &user, &headers) {
        Ok(response) => response,
        Err(e) => e.into_response(),
    };
    // With those of the snapshot a list page was read from, told as one.
    let kept = response.extensions_mut().remove::<incomplete::Kept>();
    let after = warnings();
    let notices = before
        .iter()
        .chain(kept.iter().flat_map(|k| k.0.iter()))
        .chain(&after);
    let texts = incomplete::texts(notices, reader(&info));
    incomplete::warn(texts, &mut response);
    response
}

/// Who reads the warnings of the answer to `info` (see [`incomplete::Reader`]): as the resource
/// it names says; every reason for a request for none.
fn reader(info: &RequestInfo) -> incomplete::Reader {
    served::requested(info).map_or(incomplete::Reader::All, |r| r.reader)
}

/// Sends the request to the served resource it names, with what it asks of it and how it is to be
/// answered: 404 when it names none, and the errors of [`plan`], then a 406 for an `Accept` it
/// cannot answer, before the resource reads it.
fn route(
    state: &Arc<ApiState>,
    info: &RequestInfo,
    user: &str,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let resource = served::requested(info).ok_or(ApiError::PathNotFound)?;
    let plan = plan(resource, info)?;
    let repr = representation(headers)?;
    (resource.serve)(state, plan, repr, user)
}
