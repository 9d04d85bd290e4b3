//! The resources the API serves, listed once, in discovery order: what discovery and OpenAPI
//! describe, what routing sends requests to, what the request metrics count by name and what the
//! authorization property test requests.
//!
//! Serving another kind is one entry here and its own module: its [`Resource`], the function
//! that serves it, its watch (a `Watched`), its Table (a `Printed`) and its OpenAPI definitions.

use super::gate::MAINTENANCE_GATES;
use super::operations::{INFLIGHT_CLUSTER_OPERATIONS, INFLIGHT_OPERATIONS};
use super::resource::Resource;
use ifo_apimachinery::RequestInfo;

/// Every served resource, in discovery order.
pub(crate) const SERVED: [&Resource; 3] = [
    &INFLIGHT_OPERATIONS,
    &INFLIGHT_CLUSTER_OPERATIONS,
    &MAINTENANCE_GATES,
];

/// The served resource named `plural`.
pub(crate) fn lookup(plural: &str) -> Option<&'static Resource> {
    SERVED.into_iter().find(|r| r.plural == plural)
}

/// The served resource `info` names, whatever else its path says (the resource serving it
/// reads that).
pub(crate) fn requested(info: &RequestInfo) -> Option<&'static Resource> {
    lookup(&info.resource.as_ref()?.resource)
}

/// `name` as a label from a fixed set: the plural of the served resource so named, if any.
pub(crate) fn plural(name: &str) -> Option<&'static str> {
    lookup(name).map(|r| r.plural)
}
