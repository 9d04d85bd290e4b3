//! list, get and watch of `inflightoperations` and `inflightclusteroperations`, read from the index
//! through its snapshot and watch interface; their entries of the served resources are
//! [`INFLIGHT_OPERATIONS`] and [`INFLIGHT_CLUSTER_OPERATIONS`].

use super::incomplete::Reader;
use super::negotiate::Representation;
use super::params::{Params, RvMatch};
use super::resource::{Action, GROUP_VERSION, Plan, Resource, Scope, VERBS};
use super::respond::{json_response, meta_api_version};
use super::snapshots::Kept;
use super::status::ApiError;
use super::table::{PartialMetadata, represent, row, table};
use super::wire::{List, ListMeta};
use super::{ApiState, chunked};
use crate::api::continue_token::ContinueToken;
use crate::index::Stored;
use crate::operation::SELECTABLE_FIELDS;
use axum::response::Response;
use std::sync::Arc;

mod schema;
mod table;
pub(super) mod watch;

pub(super) const INFLIGHT_OPERATIONS: Resource = Resource {
    plural: ifo_model::NAMESPACED_PLURAL,
    singular: "inflightoperation",
    kind: ifo_model::NAMESPACED_KIND,
    namespaced: true,
    short_names: &["ifo", "ifos"],
    categories: CATEGORIES,
    verbs: VERBS,
    selectable: SELECTABLE_FIELDS,
    reader: Reader::All,
    serve,
    description: schema::NAMESPACED,
    definitions: schema::definitions,
};

/// Read by the holders of no namespace (see [`Reader::ClusterScoped`]).
pub(super) const INFLIGHT_CLUSTER_OPERATIONS: Resource = Resource {
    plural: ifo_model::CLUSTER_PLURAL,
    singular: "inflightclusteroperation",
    kind: ifo_model::CLUSTER_KIND,
    namespaced: false,
    short_names: &["ifco", "ifcos"],
    categories: CATEGORIES,
    verbs: VERBS,
    selectable: SELECTABLE_FIELDS,
    reader: Reader::ClusterScoped,
    serve,
    description: schema::CLUSTER,
    definitions: schema::definitions,
};

/// `kubectl get inflight` lists the operations of both scopes.
const CATEGORIES: &[&str] = &["inflight"];

/// Whether `stored` is of the resource and namespace of `scope`.
fn contains(scope: &Scope, stored: &Stored) -> bool {
    match (&stored.op.namespace, scope.resource.namespaced) {
        (None, false) => true,
        (Some(ns), true) => scope.namespace.as_ref().is_none_or(|want| want == ns),
        _ => false,
    }
}

/// Whether a stored object passes the request's scope and selectors.
pub(super) fn matches(scope: &Scope, params: &Params, stored: &Stored) -> bool {
    if !contains(scope, stored) {
        return false;
    }
    if !params.labels.matches_with(|k| stored.op.labels.get(k)) {
        return false;
    }
    if params.fields.is_empty() {
        return true;
    }
    params.fields.matches(|field| stored.op.field(field))
}

/// Serves a request for the operations of one scope (see [`crate::api::resource::Serve`]).
fn serve(
    state: &Arc<ApiState>,
    Plan {
        scope,
        action,
        params,
    }: Plan,
    repr: Representation,
    user: &str,
) -> Result<Response, ApiError> {
    match action {
        Action::Get(name) => get(state, &scope, &name, repr, &params),
        Action::List => list(state, &scope, &params, repr),
        Action::Watch => watch::serve(state.clone(), user, scope, params, repr),
    }
}

fn get(
    state: &ApiState,
    scope: &Scope,
    name: &str,
    repr: Representation,
    params: &Params,
) -> Result<Response, ApiError> {
    let not_found = || ApiError::NotFound {
        resource: scope.resource.group_resource(),
        name: name.to_string(),
    };
    let stored = state
        .index
        .get(scope.namespace.as_deref(), name)
        .ok_or_else(not_found)?;
    if !contains(scope, &stored) {
        return Err(not_found());
    }
    Ok(json_response(&represent(
        repr,
        &*stored,
        params.include_object,
    )))
}

/// The current snapshot for `scope`, kept with the warnings a read of it got just before.
pub(super) fn current_snapshot(state: &ApiState, scope: &Scope) -> Kept {
    state
        .snapshots
        .current(&state.index, scope.snapshot_namespace(), || {
            super::incomplete::warnings_now(
                &state.detection,
                &state.readiness.unsynced(),
                scope.namespace.as_deref(),
            )
        })
}

/// The snapshot a list reads: the current one, or, for `Exact` or a continue token, the one it
/// names; with the warnings it was taken with.
fn snapshot_for(
    state: &ApiState,
    scope: &Scope,
    params: &Params,
) -> Result<(Kept, Option<ContinueToken>), ApiError> {
    let namespace = scope.snapshot_namespace();
    let current = || current_snapshot(state, scope);
    if let Some(token) = &params.continue_token {
        let token = ContinueToken::decode(token)?;
        return match state.snapshots.get(&state.index, token.rv, namespace) {
            Some(s) => Ok((s, Some(token))),
            None => {
                // The snapshot is gone: like kube-apiserver, offer to continue inconsistently.
                let current = current().snapshot;
                let (ns, name) = token.start_key();
                let resume = ContinueToken::new(current.rv, ns, name);
                Err(ApiError::ContinueExpired {
                    continue_token: Some(resume.encode()),
                })
            }
        };
    }
    let current = current();
    let current_rv = current.snapshot.rv;
    match (params.resource_version, params.rv_match) {
        (Some(rv), Some(RvMatch::Exact)) if rv != current_rv => {
            match state.snapshots.get(&state.index, rv, namespace) {
                Some(s) => Ok((s, None)),
                None if rv > current_rv => Err(ApiError::ResourceVersionTooLarge {
                    requested: rv,
                    current: current_rv,
                }),
                None => Err(ApiError::TooOldResourceVersion {
                    requested: rv,
                    oldest: current_rv,
                }),
            }
        }
        (Some(rv), _) if rv > current_rv => Err(ApiError::ResourceVersionTooLarge {
            requested: rv,
            current: current_rv,
        }),
        _ => Ok((current, None)),
    }
}

fn list(
    state: &ApiState,
    scope: &Scope,
    params: &Params,
    repr: Representation,
) -> Result<Response, ApiError> {
    let (kept, start) = snapshot_for(state, scope, params)?;
    let snapshot = kept.snapshot;
    let key = |s: &Stored| {
        (
            s.op.namespace.clone().unwrap_or_default(),
            s.op.name.clone(),
        )
    };
    let begin = match &start {
        Some(token) => {
            let (ns, name) = token.start_key();
            snapshot
                .items
                .partition_point(|s| key(s) < (ns.to_string(), name.to_string()))
        }
        None => 0,
    };
    let mut selected: Vec<&Arc<Stored>> = Vec::new();
    let mut continue_token = None;
    for stored in &snapshot.items[begin..] {
        if !matches(scope, params, stored) {
            continue;
        }
        if params.limit.is_some_and(|l| selected.len() == l) {
            let (ns, name) = key(stored);
            continue_token = Some(ContinueToken::new(snapshot.rv, &ns, &name).encode());
            break;
        }
        selected.push(stored);
    }
    let metadata = ListMeta {
        resource_version: snapshot.rv.to_string(),
        continue_token,
    };
    // Serialised from the stored objects in place (nothing is copied per item), a chunk of
    // items at a time for large lists.
    let items: Vec<Arc<Stored>> = selected.into_iter().cloned().collect();
    let include = params.include_object;
    let mut response = match repr {
        Representation::Table { .. } => {
            let v = meta_api_version(repr);
            let now = jiff::Timestamp::now();
            chunked::respond(
                &table::<Stored>(Vec::new(), v, metadata),
                items,
                move |s, out| chunked::write_json(out, &row(s, include, v, now)),
                None,
            )
        }
        Representation::PartialObjectMetadata { .. } => {
            let v = meta_api_version(repr);
            let envelope: List<'_, ()> = List {
                kind: "PartialObjectMetadataList",
                api_version: v,
                metadata,
                items: Vec::new(),
            };
            chunked::respond(
                &envelope,
                items,
                move |s, out| chunked::write_json(out, &PartialMetadata::of(s, v)),
                None,
            )
        }
        Representation::Object => {
            let kind = format!("{}List", scope.resource.kind);
            let envelope: List<'_, ()> = List {
                kind: &kind,
                api_version: GROUP_VERSION,
                metadata,
                items: Vec::new(),
            };
            chunked::respond(
                &envelope,
                items,
                |s, out| out.extend_from_slice(s.object().get().as_bytes()),
                Some(|s| s.object().get().len()),
            )
        }
    };
    // A page read from a snapshot taken while detection was not current says so, however
    // current it is by now ([`dispatch`] tells it).
    response
        .extensions_mut()
        .insert(super::incomplete::Kept(kept.warnings));
    Ok(response)
}
