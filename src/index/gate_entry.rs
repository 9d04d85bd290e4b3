//! An operation in flight as the maintenance gates hold it.

use std::ops::Deref;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

use serde_json::value::RawValue;

use super::gate_scope::ROLES;
use crate::operation::InFlightOperation;

/// No scope in this role (see [`GateEntry::scope`]).
const NO_SCOPE: u32 = u32::MAX;

/// An operation in flight as the gates hold it: its record; the form a gate lists it in,
/// rendered once by whoever first needs it (the API) and shared by every scope the operation is
/// in, so that a list of gates, where an operation shows in its node's, component's,
/// namespace's and the cluster's gate, renders it once and then only copies it; and which
/// scopes it is in and where in each, so that leaving them costs no lookup.
///
/// The index keeps it beside the record it holds, and moves it to the record's next state for
/// as long as the operation counts the same in every gate.
#[derive(Debug)]
pub struct GateEntry {
    record: Arc<InFlightOperation>,
    rendered: OnceLock<Box<RawValue>>,
    /// The keys of the scopes it is in, by role ([`super::gate_scope::ScopeRef::by_role`]);
    /// [`NO_SCOPE`] where it has none.
    scopes: [u32; ROLES],
    /// Where it sits in each scope's members. Only changed under the index's write lock (the
    /// atomics make the entry shareable with readers, who never read them).
    places: [AtomicU32; ROLES],
}

impl GateEntry {
    /// `record` in no scope: how a gate's operation is built outside the index (tests).
    #[cfg(test)]
    pub(crate) fn new(record: Arc<InFlightOperation>) -> GateEntry {
        GateEntry::in_scopes(record, [None; ROLES])
    }

    /// `record` in the scopes with these keys, by role.
    pub(super) fn in_scopes(
        record: Arc<InFlightOperation>,
        scopes: [Option<usize>; ROLES],
    ) -> GateEntry {
        GateEntry {
            record,
            rendered: OnceLock::new(),
            scopes: scopes.map(|s| s.and_then(|s| u32::try_from(s).ok()).unwrap_or(NO_SCOPE)),
            places: Default::default(),
        }
    }

    /// The key of the scope it is in in `role`.
    pub(super) fn scope(&self, role: usize) -> Option<usize> {
        let key = self.scopes[role];
        (key != NO_SCOPE).then_some(key as usize)
    }

    /// Where it sits in the members of its scope in `role`.
    pub(super) fn place(&self, role: usize) -> usize {
        self.places[role].load(Ordering::Relaxed) as usize
    }

    pub(super) fn set_place(&self, role: usize, place: usize) {
        // A scope of 2^32 operations would not fit in memory; were it to, the member past
        // the bound would be found at no place and stay (see `ScopeMembers::leave`).
        let place = u32::try_from(place).unwrap_or(u32::MAX);
        self.places[role].store(place, Ordering::Relaxed);
    }

    /// The gate's form of the record, rendered by `render` the first time. The index keeps an
    /// entry only while its operation's later records show the same in every gate, so what it
    /// renders stays true.
    pub fn rendered(&self, render: impl FnOnce(&InFlightOperation) -> Box<RawValue>) -> &RawValue {
        self.rendered.get_or_init(|| render(&self.record))
    }
}

impl Deref for GateEntry {
    type Target = InFlightOperation;

    fn deref(&self) -> &InFlightOperation {
        &self.record
    }
}
