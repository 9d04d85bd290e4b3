//! `maintenancegates`: a verdict per scope, computed on the spot from the index's scope members
//! and the server's facts about its own data (see [`verdict`]).
//!
//! Any well-formed name answers GET, with nothing in flight too (a clear gate, never a 404:
//! `kubectl wait` first GETs the object). A list holds `cluster` plus every gate with operations
//! in flight, and always the gate a `metadata.name` field selector names, since `kubectl wait`
//! lists and watches by name. A malformed name, in the path or the selector, is a 400 that
//! names the valid scopes.

mod table;
pub(crate) mod verdict;
mod watch;

use std::sync::Arc;

use axum::http::HeaderMap;
use axum::response::Response;
use ifo_model::{GATE_PLURAL, MaintenanceGate};
use jiff::Timestamp;

use super::ApiState;
use super::discovery::{GROUP, MAINTENANCE_GATES, VERSION};
use super::negotiate::Representation;
use super::params::{IncludeObject, Params};
use super::resources::{json_response, meta_api_version, representation};
use super::status::{ApiError, GroupResource};
use super::wire::{List, ListMeta};
use crate::apimachinery::RequestInfo;
use crate::index::{GateMembers, GateScope, MAX_GATE_OPERATIONS};
use verdict::{Feeds, FeedsBefore, Gate, Meanwhile};

/// The only field a gate can be selected by.
const SELECTABLE: &[&str] = &["metadata.name"];

/// Whether `info` is a request for gates (and so for this module).
pub fn is_gate_request(info: &RequestInfo) -> bool {
    info.resource
        .as_ref()
        .is_some_and(|r| r.group == GROUP && r.version == VERSION && r.resource == GATE_PLURAL)
}

fn group_resource() -> GroupResource {
    GroupResource::new(GROUP, MAINTENANCE_GATES.plural)
}

fn bad_name(e: crate::index::GateNameError) -> ApiError {
    ApiError::BadRequest(e.to_string())
}

/// Which gates a list or watch asks for.
#[derive(Clone, Debug)]
pub(crate) struct Selection {
    /// The gate an exact `metadata.name` selector names: always included.
    named: Option<GateScope>,
    params: Params,
}

impl Selection {
    fn new(params: Params) -> Result<Selection, ApiError> {
        let named = params
            .fields
            .exact("metadata.name")
            .map(GateScope::parse)
            .transpose()
            .map_err(bad_name)?;
        Ok(Selection { named, params })
    }

    /// Whether the gate of `scope`, with `active` operations in flight, is in the selection.
    fn includes(&self, scope: &GateScope, active: usize) -> bool {
        let listed =
            *scope == GateScope::Cluster || active > 0 || self.named.as_ref() == Some(scope);
        let name = scope.to_string();
        listed
            && self.params.labels.matches(&Default::default())
            && self
                .params
                .fields
                .matches(|f| (f == "metadata.name").then_some(name.as_str()))
    }

    /// The selected gates at the current resourceVersion (returned first), sorted by name.
    /// The selected gates, each listing its `operations` oldest operations.
    fn gates(&self, state: &ApiState, operations: usize) -> (u64, Vec<Gate>) {
        let before = FeedsBefore::read(&state.freshness, &state.readiness);
        let (rv, mut all) = match &self.named {
            Some(scope) => {
                let (rv, members) = state.index.gate(scope);
                (rv, vec![members])
            }
            None => listed(state, operations),
        };
        let meanwhile = before.meanwhile(&state.freshness);
        all.retain(|m| self.includes(&m.scope, m.active));
        let mut gates: Vec<Gate> = all.iter().map(|m| gate_of(state, m, &meanwhile)).collect();
        gates.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        (rv, gates)
    }
}

/// The cluster's scope and every scope with operations in flight, each with its `operations`
/// oldest operations, at the current RV (returned first).
fn listed(state: &ApiState, operations: usize) -> (u64, Vec<GateMembers>) {
    let (rv, mut all) = state.index.gates_in_flight(operations);
    if all.first().is_none_or(|m| m.scope != GateScope::Cluster) {
        all.insert(0, state.index.gate(&GateScope::Cluster).1);
    }
    (rv, all)
}

/// The gates an unfiltered list answers: the cluster's and those with operations in flight,
/// their verdicts and counts without the operations themselves (what metrics read).
pub fn listed_gates(state: &ApiState) -> Vec<MaintenanceGate> {
    let before = FeedsBefore::read(&state.freshness, &state.readiness);
    let (_, all) = listed(state, 0);
    let meanwhile = before.meanwhile(&state.freshness);
    all.iter()
        .map(|m| gate_of(state, m, &meanwhile).map_operations(|op| op.to_model()))
        .collect()
}

/// The gate of `members` (read after `meanwhile` began), with the facts of its scope.
fn gate_of(state: &ApiState, members: &GateMembers, meanwhile: &Meanwhile) -> Gate {
    let feeds = Feeds::of(
        &members.scope,
        &state.freshness,
        &state.readiness,
        meanwhile,
    );
    verdict::gate(members, &feeds, state.started)
}

/// The gates of `scopes` now: their members read between one reading of the feeds before and
/// one after, whatever their number.
fn current_gates(state: &ApiState, scopes: impl IntoIterator<Item = GateScope>) -> Vec<Gate> {
    let before = FeedsBefore::read(&state.freshness, &state.readiness);
    let all: Vec<GateMembers> = scopes
        .into_iter()
        .map(|scope| state.index.gate(&scope).1)
        .collect();
    let meanwhile = before.meanwhile(&state.freshness);
    all.iter().map(|m| gate_of(state, m, &meanwhile)).collect()
}

/// Serves a request [`is_gate_request`] accepted: 404 for what is not a gate's path, 405 for
/// verbs other than get, list and watch, 400 for a malformed name or bad parameters.
pub fn route(
    state: &Arc<ApiState>,
    info: &RequestInfo,
    user: &str,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let r = info.resource.as_ref().ok_or(ApiError::PathNotFound)?;
    if r.namespace.is_some() || r.subresource.is_some() {
        return Err(ApiError::PathNotFound);
    }
    let name = match (r.name_in_path, r.name.as_deref()) {
        (false, _) => None,
        (true, Some(name)) if !name.is_empty() => Some(name),
        (true, _) => return Err(ApiError::PathNotFound),
    };
    let verb = info.verb.as_str();
    if !matches!(verb, "get" | "list" | "watch") {
        return Err(ApiError::MethodNotAllowed {
            resource: group_resource(),
            verb: verb.to_string(),
        });
    }
    let mut params = Params::parse_selecting(&info.query, verb == "watch", SELECTABLE)?;
    let repr = representation(headers)?;
    match (verb, name) {
        ("get", Some(name)) => {
            let scope = GateScope::parse(name).map_err(bad_name)?;
            let gate = current_gates(state, [scope])
                .pop()
                .expect("one gate per scope");
            Ok(one(repr, &gate, &params))
        }
        ("watch", name) => {
            if let Some(name) = name {
                // A watch of one gate is a watch with a name field selector.
                let selector = format!(
                    "metadata.name={}",
                    crate::apimachinery::fields::escape_value(name)
                );
                let combined = if params.fields.is_empty() {
                    selector
                } else {
                    format!("{},{selector}", params.fields)
                };
                params.fields =
                    crate::apimachinery::fields::FieldSelector::parse(&combined, SELECTABLE)?;
            }
            let selection = Selection::new(params)?;
            watch::serve(state.clone(), user, selection, repr)
        }
        _ => list(state, Selection::new(params)?, repr),
    }
}

/// One gate as the client asked for it.
fn one(repr: Representation, gate: &Gate, params: &Params) -> Response {
    match repr {
        Representation::Object => json_response(gate),
        Representation::PartialObjectMetadata { .. } => {
            json_response(&table::PartialMetadata::of(gate, meta_api_version(repr)))
        }
        Representation::Table { .. } => {
            let v = meta_api_version(repr);
            let row = table::row(gate, params.include_object, v, Timestamp::now());
            let metadata = ListMeta {
                resource_version: gate.metadata.resource_version.clone().unwrap_or_default(),
                continue_token: None,
            };
            json_response(&table::table(vec![row], v, metadata))
        }
    }
}

/// Every selected gate, in one answer: there are at most as many as nodes, components and
/// namespaces with operations in flight, so `limit` is not applied (no `continue`).
fn list(
    state: &ApiState,
    selection: Selection,
    repr: Representation,
) -> Result<Response, ApiError> {
    // A gate lists up to 50 operations, most of a list's cost: a table shows none of them
    // unless it carries whole objects, only the few its messages name.
    let operations = match (repr, selection.params.include_object) {
        (Representation::Table { .. }, IncludeObject::Object) | (Representation::Object, _) => {
            MAX_GATE_OPERATIONS
        }
        (Representation::Table { .. }, _) => verdict::NAMED_IN_MESSAGE,
        (Representation::PartialObjectMetadata { .. }, _) => 0,
    };
    let (rv, gates) = selection.gates(state, operations);
    let metadata = ListMeta {
        resource_version: rv.to_string(),
        continue_token: None,
    };
    Ok(match repr {
        Representation::Table { .. } => {
            let v = meta_api_version(repr);
            let now = Timestamp::now();
            let include = selection.params.include_object;
            let rows = gates
                .iter()
                .map(|g| table::row(g, include, v, now))
                .collect();
            json_response(&table::table(rows, v, metadata))
        }
        Representation::PartialObjectMetadata { .. } => {
            let v = meta_api_version(repr);
            json_response(&List {
                kind: "PartialObjectMetadataList",
                api_version: v,
                metadata,
                items: gates
                    .iter()
                    .map(|g| table::PartialMetadata::of(g, v))
                    .collect(),
            })
        }
        Representation::Object => json_response(&List {
            kind: "MaintenanceGateList",
            api_version: super::discovery::GROUP_VERSION,
            metadata,
            items: gates,
        }),
    })
}

#[cfg(test)]
mod tests;
