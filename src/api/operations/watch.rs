//! Watches of operations, through the watch engine ([`crate::api::watch`]): the initial items
//! are the shared snapshot's, and each index event goes through this watcher's own filter (an
//! object entering or leaving the selectors is an ADDED or DELETED for it).

use super::matches;
use crate::api::ApiState;
use crate::api::negotiate::Representation;
use crate::api::params::Params;
use crate::api::resource::Scope;
use crate::api::status::ApiError;
use crate::api::table::represent;
use crate::api::watch::{self, Watched, frame};
use crate::index::{Event, EventKind, Snapshot, Stored};
use axum::response::Response;
use bytes::Bytes;
use std::sync::Arc;

/// Starts a watch of the operations in `scope` for `user`, or refuses it with 429 when a limit
/// on open watches is reached.
pub(crate) fn serve(
    state: Arc<ApiState>,
    user: &str,
    scope: Scope,
    params: Params,
    repr: Representation,
) -> Result<Response, ApiError> {
    watch::serve(
        state,
        user,
        repr,
        Operations {
            scope,
            params,
            repr,
        },
    )
}

/// One watcher of operations.
struct Operations {
    scope: Scope,
    params: Params,
    repr: Representation,
}

/// What is left to send of the initial snapshot or of one event.
enum Pending {
    /// The snapshot's items from `next` on (those that pass the filter, as ADDED).
    Snapshot {
        snapshot: Arc<Snapshot>,
        next: usize,
    },
    /// One event's, if any.
    Event(Option<(&'static str, Arc<Stored>)>),
}

impl Watched for Operations {
    type Pending = Pending;

    fn params(&self) -> &Params {
        &self.params
    }

    fn kind(&self) -> &'static str {
        self.scope.resource.kind
    }

    fn initial(&mut self, state: &ApiState) -> (u64, Pending) {
        let snapshot = super::current_snapshot(state, &self.scope).snapshot;
        (snapshot.rv, Pending::Snapshot { snapshot, next: 0 })
    }

    fn event(&mut self, _: &ApiState, event: &Event) -> Pending {
        Pending::Event(transition(&self.scope, &self.params, event))
    }

    fn next(&mut self, pending: &mut Pending) -> Option<Bytes> {
        let (type_, stored) = match pending {
            Pending::Snapshot { snapshot, next } => {
                let items = &snapshot.items[*next..];
                let at = items
                    .iter()
                    .position(|s| matches(&self.scope, &self.params, s))?;
                *next += at + 1;
                ("ADDED", items[at].clone())
            }
            Pending::Event(event) => event.take()?,
        };
        Some(frame(
            type_,
            &represent(self.repr, &*stored, self.params.include_object),
        ))
    }
}

/// The record as of `rv` (a filter-DELETED event carries the previous state at the new RV).
fn at_rv(stored: &Arc<Stored>, rv: u64) -> Arc<Stored> {
    if stored.rv == rv {
        return stored.clone();
    }
    Arc::new(Stored::new(rv, stored.op.clone()))
}

/// What this watcher should see of an index event, if anything.
fn transition(
    scope: &Scope,
    params: &Params,
    event: &Event,
) -> Option<(&'static str, Arc<Stored>)> {
    let object = event.object.as_ref()?;
    let now = matches(scope, params, object);
    let before = event
        .previous
        .as_ref()
        .is_some_and(|p| matches(scope, params, p));
    match event.kind {
        EventKind::Added if now => Some(("ADDED", object.clone())),
        EventKind::Deleted if now => Some(("DELETED", object.clone())),
        EventKind::Modified if now && before => Some(("MODIFIED", object.clone())),
        EventKind::Modified if now => Some(("ADDED", object.clone())),
        EventKind::Modified if before => {
            Some(("DELETED", at_rv(event.previous.as_ref()?, event.rv)))
        }
        _ => None,
    }
}
