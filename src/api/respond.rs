//! How a resource request is answered, whatever the resource: the representation its `Accept`
//! header asks for, and a JSON body.

use super::negotiate::{self, Representation};
use super::status::ApiError;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// The `apiVersion` of a `meta.k8s.io` representation (Tables and metadata-only objects).
pub(super) fn meta_api_version(repr: Representation) -> &'static str {
    repr.meta_api_version().unwrap_or("meta.k8s.io/v1")
}

pub(super) fn representation(headers: &HeaderMap) -> Result<Representation, ApiError> {
    Ok(negotiate::negotiate_resource(
        negotiate::accept_header(headers).as_deref(),
    )?)
}

pub(super) fn json_response(value: &impl Serialize) -> Response {
    (
        [(header::CONTENT_TYPE, negotiate::APPLICATION_JSON)],
        serde_json::to_vec(value).unwrap_or_default(),
    )
        .into_response()
}
