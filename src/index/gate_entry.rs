//! An operation in flight as the maintenance gates hold it.

use std::ops::Deref;
use std::sync::{Arc, OnceLock};

use serde_json::value::RawValue;

use super::gate_scope::ROLES;
use crate::operation::InFlightOperation;

/// Where an entry sits in one of its scopes: the scope's key in the index's map of scopes, and
/// the entry's slot among that scope's members. Kept in 32 bits each, as an entry is in up to
/// five scopes and the index holds one per operation in flight: neither count comes near 2^32
/// (a scope that did would not fit in memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Place {
    scope: u32,
    slot: u32,
}

impl Place {
    /// The place at scope key `scope`, slot `slot`; `None` past 32 bits (or at [`NOWHERE`]).
    pub(super) fn new(scope: usize, slot: usize) -> Option<Place> {
        let place = Place {
            scope: u32::try_from(scope).ok()?,
            slot: u32::try_from(slot).ok()?,
        };
        (place != NOWHERE).then_some(place)
    }

    /// The scope's key.
    pub(super) fn scope(self) -> usize {
        self.scope as usize
    }

    /// The entry's slot among the scope's members.
    pub(super) fn slot(self) -> usize {
        self.slot as usize
    }
}

/// No place: an entry's role it has no scope in (a place, kept without the room an `Option`
/// would take).
const NOWHERE: Place = Place {
    scope: u32::MAX,
    slot: u32::MAX,
};

/// An operation in flight as the gates hold it: its record; the form a gate lists it in,
/// rendered once by whoever first needs it (the API) and shared by every scope the operation is
/// in, so that a list of gates, where an operation shows in its node's, component's,
/// namespace's and the cluster's gate, renders it once and then only copies it; and which
/// scopes it is in and where in each, so that leaving them costs no lookup. Its places are fixed
/// when it is made: a scope's members keep their slots until they leave (see
/// [`super::scope_members`]).
///
/// The index keeps it beside the record it holds, and moves it to the record's next state for
/// as long as the operation counts the same in every gate.
#[derive(Debug)]
pub(crate) struct GateEntry {
    record: Arc<InFlightOperation>,
    rendered: OnceLock<Box<RawValue>>,
    /// Where it sits in each of its scopes, by role
    /// ([`super::gate_scope::ScopeRef::by_role`]); [`NOWHERE`] where it has none.
    places: [Place; ROLES],
}

impl GateEntry {
    /// `record` in no scope: how a gate's operation is built outside the index (tests).
    #[cfg(test)]
    pub(crate) fn new(record: Arc<InFlightOperation>) -> GateEntry {
        GateEntry::in_scopes(record, [None; ROLES])
    }

    /// `record` at these places, by role.
    pub(super) fn in_scopes(
        record: Arc<InFlightOperation>,
        places: [Option<Place>; ROLES],
    ) -> GateEntry {
        GateEntry {
            record,
            rendered: OnceLock::new(),
            places: places.map(|p| p.unwrap_or(NOWHERE)),
        }
    }

    /// Where it sits in its scope in `role`.
    pub(super) fn place(&self, role: usize) -> Option<Place> {
        Some(self.places[role]).filter(|p| *p != NOWHERE)
    }

    /// The gate's form of the record, rendered by `render` the first time. The index keeps an
    /// entry only while its operation's later records show the same in every gate, so what it
    /// renders stays true.
    pub(crate) fn rendered(
        &self,
        render: impl FnOnce(&InFlightOperation) -> Box<RawValue>,
    ) -> &RawValue {
        self.rendered.get_or_init(|| render(&self.record))
    }
}

impl Deref for GateEntry {
    type Target = InFlightOperation;

    fn deref(&self) -> &InFlightOperation {
        &self.record
    }
}
