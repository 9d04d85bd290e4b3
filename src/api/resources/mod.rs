//! list, get and watch of `inflightoperations` and `inflightclusteroperations`, read from the index
//! through its snapshot and watch interface.

use super::discovery::{GROUP, RESOURCES, Resource, VERSION};
use super::negotiate::Representation;
use super::params::{Params, RvMatch};
use super::request::{name_in_path, select_name, served_verb};
use super::respond::{json_response, meta_api_version};
use super::snapshots::Kept;
use super::status::{ApiError, GroupResource};
use super::table::{PartialMetadata, represent, row, table};
use super::wire::{List, ListMeta};
use super::{ApiState, chunked};
use crate::api::continue_token::ContinueToken;
use crate::index::Stored;
use crate::operation::SELECTABLE_FIELDS;
use axum::response::Response;
use ifo_apimachinery::RequestInfo;
use std::sync::Arc;

mod table;
pub(super) mod watch;

/// Which objects a request is about.
#[derive(Clone, Debug)]
pub struct Scope {
    pub resource: &'static Resource,
    /// For the namespaced resource: `Some(ns)` under `/namespaces/{ns}/`, `None` across all.
    pub namespace: Option<String>,
}

impl Scope {
    pub fn contains(&self, stored: &Stored) -> bool {
        match (&stored.op.namespace, self.resource.namespaced) {
            (None, false) => true,
            (Some(ns), true) => self.namespace.as_ref().is_none_or(|want| want == ns),
            _ => false,
        }
    }

    /// The namespace a snapshot for this scope may be limited to (`None`: it needs every
    /// record).
    pub fn snapshot_namespace(&self) -> Option<&str> {
        self.namespace
            .as_deref()
            .filter(|_| self.resource.namespaced)
    }

    fn group_resource(&self) -> GroupResource {
        GroupResource::new(GROUP, self.resource.plural)
    }
}

/// Whether a stored object passes the request's scope and selectors.
pub fn matches(scope: &Scope, params: &Params, stored: &Stored) -> bool {
    if !scope.contains(stored) {
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

pub fn resource_for(plural: &str) -> Option<&'static Resource> {
    RESOURCES.into_iter().find(|r| r.plural == plural)
}

/// What a request is served as, decided from its [`RequestInfo`] alone (the one its
/// authorization was derived from).
#[derive(Clone, Debug)]
pub struct Plan {
    pub scope: Scope,
    pub action: Action,
    pub params: Params,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
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
    pub fn verb(&self) -> &'static str {
        match self {
            Action::Get(_) => "get",
            Action::List => "list",
            Action::Watch => "watch",
        }
    }
}

/// Reads what `info` asks this API for: 404 for paths it does not serve, 405 for verbs other
/// than get, list and watch, 400 for bad parameters.
pub fn plan(info: &RequestInfo) -> Result<Plan, ApiError> {
    let r = info.resource.as_ref().ok_or(ApiError::PathNotFound)?;
    if r.group != GROUP || r.version != VERSION || r.subresource.is_some() {
        return Err(ApiError::PathNotFound);
    }
    let resource = resource_for(&r.resource).ok_or(ApiError::PathNotFound)?;
    match &r.namespace {
        Some(ns) if ns.is_empty() || !resource.namespaced => return Err(ApiError::PathNotFound),
        _ => {}
    }
    let name = name_in_path(r)?;
    let scope = Scope {
        resource,
        namespace: r.namespace.clone(),
    };
    let verb = info.verb.as_str();
    served_verb(verb, || scope.group_resource())?;
    let mut params = Params::parse(&info.query, verb == "watch")?;
    let action = match (verb, name) {
        ("watch", Some(name)) => {
            select_name(&mut params, name, SELECTABLE_FIELDS)?;
            Action::Watch
        }
        ("watch", None) => Action::Watch,
        (_, Some(name)) => Action::Get(name.to_string()),
        (_, None) => Action::List,
    };
    Ok(Plan {
        scope,
        action,
        params,
    })
}

pub(super) fn get(
    state: &ApiState,
    scope: &Scope,
    name: &str,
    repr: Representation,
    params: &Params,
) -> Result<Response, ApiError> {
    let not_found = || ApiError::NotFound {
        resource: scope.group_resource(),
        name: name.to_string(),
    };
    let stored = state
        .index
        .get(scope.namespace.as_deref(), name)
        .ok_or_else(not_found)?;
    if !scope.contains(&stored) {
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
            super::freshness::warnings_now(
                &state.freshness,
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

pub(super) fn list(
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
                api_version: super::discovery::GROUP_VERSION,
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
        .insert(super::freshness::Kept(kept.warnings));
    Ok(response)
}
