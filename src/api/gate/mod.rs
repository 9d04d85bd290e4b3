//! `maintenancegates` (its entry of the served resources: [`MAINTENANCE_GATES`]): a verdict per
//! scope, computed on the spot from the index's scope members and the server's facts about its
//! own data (see [`verdict`]).
//!
//! The gate of every node, namespace and component the cluster has answers GET, with nothing in
//! flight too (a clear gate: `kubectl wait` first GETs the object), and so does any gate with
//! operations in flight; the gate of one the cluster does not have is a 404, and while the
//! server cannot tell it is `Unknown` (see [`existence`]). A list holds `cluster` plus every
//! gate with operations in flight, and always the gate a `metadata.name` field selector names
//! if it exists, since `kubectl wait` lists and watches by name. A malformed name, in the path
//! or the selector, is a 400 that names the valid scopes.
//!
//! The gate of a node whose maintenance override is set says so in a condition of its own (see
//! [`overridden`]).
//!
//! A list is paged by `limit` and `continue` in name order; gates are computed, not kept in a
//! snapshot, so each page is read at the state of its own moment, from the first gate after the
//! last name of the page before (see [`GateContinueToken`]).

mod overridden;
mod scheduled;
mod schema;
mod table;
pub(crate) mod verdict;
mod watch;
mod window;

use std::sync::Arc;

use axum::response::Response;
use jiff::Timestamp;

use super::ApiState;
use super::continue_token::GateContinueToken;
use super::incomplete::Reader;
use super::negotiate::Representation;
use super::params::{IncludeObject, Params};
use super::resource::{Action, GROUP_VERSION, Plan, Resource, VERBS};
use super::respond::{json_response, meta_api_version};
use super::status::ApiError;
use super::table::{PartialMetadata, represent, row, table};
use super::wire::{List, ListMeta};
use crate::gate::{Existence, Judged};
use crate::index::{GateScope, MAX_GATE_OPERATIONS};
use crate::metrics::GateSeries;
use verdict::Gate;

/// The maintenance gates: not in the `inflight` category, which lists operations; selectable by
/// name only; read by the holders of their ClusterRole, who may be told every reason.
pub(super) const MAINTENANCE_GATES: Resource = Resource {
    plural: ifo_model::GATE_PLURAL,
    singular: "maintenancegate",
    kind: ifo_model::GATE_KIND,
    namespaced: false,
    short_names: &["gate", "gates"],
    categories: &[],
    verbs: VERBS,
    selectable: &["metadata.name"],
    reader: Reader::All,
    serve,
    description: schema::DESCRIPTION,
    definitions: schema::definitions,
};

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

    /// Whether the gate of `scope`, with `active` operations in flight, is in the selection
    /// (`served`: it exists, or may, see [`Existence::is_served`]).
    fn includes(&self, scope: &GateScope, active: usize, served: bool) -> bool {
        let listed =
            *scope == GateScope::Cluster || active > 0 || self.named.as_ref() == Some(scope);
        let name = scope.to_string();
        served
            && listed
            && self.params.labels.matches(&Default::default())
            && self
                .params
                .fields
                .matches(|f| (f == "metadata.name").then_some(name.as_str()))
    }

    /// The selected gates at the current resourceVersion, sorted by name, each listing its
    /// `operations` oldest operations: those of `page`, and whether more follow.
    fn gates(&self, state: &ApiState, operations: usize, page: &Page) -> Selected {
        let (rv, all) = state.gates().read(self.named.as_ref(), operations);
        let mut selected: Vec<(String, Judged)> = all
            .into_iter()
            .filter_map(|judged| {
                let name = judged.members.scope.to_string();
                if page
                    .after
                    .as_deref()
                    .is_some_and(|after| name.as_str() <= after)
                {
                    return None;
                }
                let scope = &judged.members;
                self.includes(&scope.scope, scope.active, judged.existence.is_served())
                    .then_some((name, judged))
            })
            .collect();
        selected.sort_by(|a, b| a.0.cmp(&b.0));
        let more = page.limit.is_some_and(|limit| selected.len() > limit);
        if let Some(limit) = page.limit {
            selected.truncate(limit);
        }
        let gates = selected
            .into_iter()
            .map(|(_, judged)| served(state, &judged))
            .collect();
        Selected { rv, gates, more }
    }
}

/// Which part of a list a request asks for (`limit` and `continue`).
#[derive(Debug, Default)]
struct Page {
    /// Only gates named after this (the last name of the page before).
    after: Option<String>,
    /// At most this many.
    limit: Option<usize>,
}

impl Page {
    /// The page `params` ask for; a `continue` token that is not a gate list's is a 400.
    fn of(params: &Params) -> Result<Page, ApiError> {
        let after = params
            .continue_token
            .as_deref()
            .map(GateContinueToken::decode)
            .transpose()?
            .map(|token| token.after);
        Ok(Page {
            after,
            limit: params.limit,
        })
    }
}

/// A page of gates.
struct Selected {
    /// The resourceVersion it was read at.
    rv: u64,
    gates: Vec<Gate>,
    /// Whether gates after the last of `gates` were left out by the limit.
    more: bool,
}

/// The gates an unfiltered list answers: the cluster's and those with operations in flight,
/// their verdicts and counts without the operations themselves (what metrics read).
pub(super) fn listed_gates(state: &ApiState) -> Vec<GateSeries> {
    let (_, all) = state.gates().read(None, 0);
    // All exist: the cluster's, and scopes with operations in flight.
    all.into_iter()
        .map(|judged| GateSeries {
            gate: judged.members.scope.to_string(),
            clear: judged.verdict.status().to_owned(),
            active: judged.members.active as u64,
            expected_clear: judged.members.expected_clear.map(|t| t.as_second()),
        })
        .collect()
}

/// The gate of a judged scope as served (a gate that does not exist is computed all the same:
/// a watch sends its last state as it goes): its verdict, with what only a served gate says —
/// its scheduled operations and windows, and a node's maintenance override.
fn served(state: &ApiState, judged: &Judged) -> Gate {
    let now = Timestamp::now();
    let scheduled = scheduled::of_scope(&state.schedules, &judged.members.scope, now);
    let mut gate = verdict::gate(judged, state.started, scheduled);
    if let GateScope::Node(node) = &judged.members.scope
        && let Some(o) = state.inventory.node_override(node)
    {
        let condition = overridden::condition(node, &o, now);
        gate.status.conditions.push(condition);
    }
    gate
}

/// The gates of `scopes` now, each with whether it exists: their members read between one
/// reading of the feeds before and one after, whatever their number.
fn current_gates(
    state: &ApiState,
    scopes: impl IntoIterator<Item = GateScope>,
) -> Vec<(Gate, Existence)> {
    state
        .gates()
        .judged(scopes)
        .into_iter()
        .map(|judged| (served(state, &judged), judged.existence))
        .collect()
}

/// Serves a request for the gates (see [`crate::api::resource::Serve`]): 404 for a gate that
/// does not exist, 400 for a malformed name.
fn serve(
    state: &Arc<ApiState>,
    Plan { action, params, .. }: Plan,
    repr: Representation,
    user: &str,
) -> Result<Response, ApiError> {
    match action {
        Action::Get(name) => {
            let scope = GateScope::parse(&name).map_err(bad_name)?;
            let (gate, existence) = current_gates(state, [scope])
                .pop()
                .expect("one gate per scope");
            match existence {
                Existence::NotFound(why) => Err(ApiError::NotFoundBecause {
                    resource: MAINTENANCE_GATES.group_resource(),
                    name,
                    why,
                }),
                Existence::Exists | Existence::Unknown(_) => Ok(json_response(&represent(
                    repr,
                    &gate,
                    params.include_object,
                ))),
            }
        }
        Action::Watch => watch::serve(state.clone(), user, Selection::new(params)?, repr),
        Action::List => list(state, Selection::new(params)?, repr),
    }
}

/// The selected gates, a page at a time when `limit` asks: at most `limit`, and a `continue`
/// token after the last when more follow (no `remainingItemCount`: the next page is read at its
/// own moment).
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
    let page = Page::of(&selection.params)?;
    let Selected { rv, gates, more } = selection.gates(state, operations, &page);
    let continue_token = more
        .then(|| gates.last().and_then(|g| g.metadata.name.clone()))
        .flatten()
        .map(|after| GateContinueToken { rv, after }.encode());
    let metadata = ListMeta {
        resource_version: rv.to_string(),
        continue_token,
    };
    Ok(match repr {
        Representation::Table { .. } => {
            let v = meta_api_version(repr);
            let now = Timestamp::now();
            let include = selection.params.include_object;
            let rows = gates.iter().map(|g| row(g, include, v, now)).collect();
            json_response(&table(rows, v, metadata))
        }
        Representation::PartialObjectMetadata { .. } => {
            let v = meta_api_version(repr);
            json_response(&List {
                kind: "PartialObjectMetadataList",
                api_version: v,
                metadata,
                items: gates.iter().map(|g| PartialMetadata::of(g, v)).collect(),
            })
        }
        Representation::Object => json_response(&List {
            kind: "MaintenanceGateList",
            api_version: GROUP_VERSION,
            metadata,
            items: gates,
        }),
    })
}

#[cfg(test)]
pub(crate) mod agreement_tests;
#[cfg(test)]
mod recording_tests;
#[cfg(test)]
mod tests;
