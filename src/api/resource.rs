//! What the API says of a resource it serves, and the group version it serves them in: one
//! [`Resource`] per served kind, listed once in [`super::served`], which discovery, OpenAPI,
//! routing and the request metrics read.
//!
//! A kind's own module defines its entry (`resources` the operations', `gate` the gates'), with
//! the function that serves its requests.

use super::ApiState;
use super::freshness::Reader;
use super::status::{ApiError, GroupResource};
use crate::apimachinery::RequestInfo;
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::{Map, Value};
use std::sync::Arc;

pub const GROUP: &str = ifo_model::GROUP;
pub const VERSION: &str = ifo_model::VERSION;
pub const GROUP_VERSION: &str = ifo_model::GROUP_VERSION;

/// The verbs every served resource answers: it is read-only.
pub const VERBS: &[&str] = &["get", "list", "watch"];

/// Answers a request for `resource` that routing sent it: `info` as it was authorized, for
/// `user`, with the request's `headers` (what it is answered as).
pub type Serve = fn(
    state: &Arc<ApiState>,
    resource: &'static Resource,
    info: &RequestInfo,
    user: &str,
    headers: &HeaderMap,
) -> Result<Response, ApiError>;

/// One resource the server serves: its names as discovery and OpenAPI give them, what a request
/// may ask of it, what serves it, and its OpenAPI definitions.
#[derive(Debug)]
pub struct Resource {
    pub plural: &'static str,
    pub singular: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    pub short_names: &'static [&'static str],
    pub categories: &'static [&'static str],
    /// The verbs it answers; any other is a 405.
    pub verbs: &'static [&'static str],
    /// The fields a field selector may name.
    pub selectable: &'static [&'static str],
    /// Who reads the warnings of its answers (see [`Reader`]).
    pub reader: Reader,
    /// Serves its requests.
    pub serve: Serve,
    /// What `kubectl explain` says of its kind.
    pub description: &'static str,
    /// Its OpenAPI definitions (v2 form), by name: its object, its list and the types they use.
    pub definitions: fn(&Resource) -> Map<String, Value>,
}

impl Resource {
    /// The resource in our group, as `Status` errors name it.
    pub fn group_resource(&self) -> GroupResource {
        GroupResource::new(GROUP, self.plural)
    }
}
