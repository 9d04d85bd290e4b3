//! What the API says of a resource it serves, and the group version it serves them in: one
//! [`Resource`] per served kind, listed once in [`super::served`], which discovery, OpenAPI,
//! routing and the request metrics read; and what a request for one is served as (a [`Plan`],
//! which `request::plan` reads from the request and the resource's function serves).
//!
//! A kind's own module defines its entry (`resources` the operations', `gate` the gates'), with
//! the function that serves its requests.

use super::ApiState;
use super::incomplete::Reader;
use super::negotiate::Representation;
use super::params::Params;
use super::status::{ApiError, GroupResource};
use axum::response::Response;
use serde_json::{Map, Value};
use std::sync::Arc;

pub(crate) const GROUP: &str = ifo_model::GROUP;
pub(crate) const VERSION: &str = ifo_model::VERSION;
pub(crate) const GROUP_VERSION: &str = ifo_model::GROUP_VERSION;

/// The verbs every served resource answers: it is read-only.
pub(crate) const VERBS: &[&str] = &["get", "list", "watch"];

/// Answers a request routing sent: what it asks (`plan`, of this resource), in the
/// representation `repr`, for `user`.
pub(crate) type Serve = fn(
    state: &Arc<ApiState>,
    plan: Plan,
    repr: Representation,
    user: &str,
) -> Result<Response, ApiError>;

/// One resource the server serves: its names as discovery and OpenAPI give them, what a request
/// may ask of it, what serves it, and its OpenAPI definitions.
#[derive(Debug)]
pub(crate) struct Resource {
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
    pub(crate) fn group_resource(&self) -> GroupResource {
        GroupResource::new(GROUP, self.plural)
    }
}

/// Which objects a request is about.
#[derive(Clone, Debug)]
pub(crate) struct Scope {
    pub resource: &'static Resource,
    /// For a namespaced resource: `Some(ns)` under `/namespaces/{ns}/`, `None` across all.
    pub namespace: Option<String>,
}

impl Scope {
    /// The namespace a snapshot for this scope may be limited to (`None`: it needs every
    /// record).
    pub(crate) fn snapshot_namespace(&self) -> Option<&str> {
        self.namespace
            .as_deref()
            .filter(|_| self.resource.namespaced)
    }
}

/// What a request is served as, decided from its `RequestInfo` alone (the one its
/// authorization was derived from).
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    pub scope: Scope,
    pub action: Action,
    pub params: Params,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// One object, by the name in the path.
    Get(String),
    List,
    /// A watch; of one object when the path names it (its name then joins the field selector).
    Watch,
}

impl Action {
    /// The verb authorization names this action with; the property tests check that it is the
    /// one the guard authorized.
    #[cfg(test)]
    pub(crate) fn verb(&self) -> &'static str {
        match self {
            Action::Get(_) => "get",
            Action::List => "list",
            Action::Watch => "watch",
        }
    }
}
