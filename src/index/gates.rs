//! The operations in flight per maintenance-gate scope: the whole cluster, a node, a component,
//! a namespace.
//!
//! Kept by the index itself, under the lock that changes its records and on exactly the changes
//! that move an operation in or out of a scope (like the active counts), so a gate is answered
//! from its own members however many operations the cluster has, and a change that only moves a
//! message costs one comparison. Each scope remembers the resourceVersion and the time of its
//! latest change, so a gate says when its verdict last moved; a bounded memory of scopes that
//! became empty keeps that for recently cleared gates too.

#[cfg(test)]
use std::collections::BTreeMap;
use std::sync::Arc;

use hashbrown::HashMap;
use jiff::Timestamp;
use slab::Slab;

pub(crate) use super::gate_entry::GateEntry;
use super::gate_entry::Place;
pub(crate) use super::gate_scope::{GateNameError, GateScope};
use super::gate_scope::{ROLES, ScopeRef, label};
pub(crate) use super::scope_ends::{LatestEnd, ScopeEnds};
use super::scope_members::ScopeMembers;
use crate::operation::{InFlightOperation, NodeKey, Phase};

/// Operations a gate lists in full (oldest first); the others are only counted.
pub(crate) const MAX_GATE_OPERATIONS: usize = 50;

/// Cleared scopes whose clearing time is remembered.
const CLEARED_MEMORY: usize = 4096;

/// Whether `a` and `b`, two states of the record at one key (the same namespace and name),
/// count the same in every gate: the same occurrence (its uid, which fixes its subject and
/// operation), start and scopes, and the same fields a gate shows or reads of its operations
/// (expected ends, progress, stall, overdue). The component is compared too: a ruleset's may change.
fn same_for_gates(a: &InFlightOperation, b: &InFlightOperation) -> bool {
    match (a.phase, b.phase) {
        (Phase::Active, Phase::Active) => {
            a.created == b.created
                && a.clears_at() == b.clears_at()
                && a.clears_at_p90() == b.clears_at_p90()
                && a.is_overdue() == b.is_overdue()
                && a.progress() == b.progress()
                && a.is_stalled() == b.is_stalled()
                && a.uid == b.uid
                && a.component == b.component
                && label(a, NodeKey::NODE) == label(b, NodeKey::NODE)
                && label(a, NodeKey::TARGET_NODE) == label(b, NodeKey::TARGET_NODE)
        }
        (Phase::Completed, Phase::Completed) => true,
        _ => false,
    }
}

/// The time of one change, read from the clock only if the change needs it (a scope filling
/// or emptying, a stall count leaving or reaching zero): most changes do not.
#[derive(Default)]
struct Now(Option<Timestamp>);

impl Now {
    fn get(&mut self) -> Timestamp {
        *self.0.get_or_insert_with(Timestamp::now)
    }
}

/// A gate's scope as the index holds it at one resourceVersion.
#[derive(Debug, Clone)]
pub(crate) struct GateMembers {
    /// The scope.
    pub scope: GateScope,
    /// The resourceVersion of the scope's latest change (the base or epoch RV when none is
    /// known).
    pub rv: u64,
    /// When the scope last went from nothing in flight to something, or back; `None` when
    /// the index has not seen it change since it started.
    pub since: Option<Timestamp>,
    /// How many operations are in flight in it.
    pub active: usize,
    /// The oldest of them, oldest first, as many as asked for (at most
    /// [`MAX_GATE_OPERATIONS`]).
    pub operations: Vec<Arc<GateEntry>>,
    /// When the last of them is expected to end; `None` when one has no estimate, or none is
    /// in flight.
    pub expected_clear: Option<Timestamp>,
    /// What their ends say of when the scope clears, at the median and at p90.
    pub ends: ScopeEnds<Arc<GateEntry>>,
    /// How many of them are stalled.
    pub stalled: usize,
    /// When the scope last went from none of them stalled to some, or back; `None` when the
    /// index has not seen it since it started.
    pub stall_since: Option<Timestamp>,
    /// When the targets feeding the index last went from all current to not, or back
    /// (`None`: not since the start).
    pub feeds_since: Option<Timestamp>,
    /// Operations of a cordoned node's scope that hold nothing there: they hold their node only
    /// if they started before its cordon, and started after (see
    /// [`ifo_model::NODE_HOLD_LABEL`]). Not in `active`, `operations`, `ends` or `stalled`.
    pub released: usize,
}

/// Active records by gate scope; a scope without any is absent (and remembered as cleared).
#[derive(Debug, Default)]
pub(super) struct GateCounts {
    /// The scopes with operations in flight, each under a key its members' entries hold.
    scopes: Slab<ScopeMembers>,
    /// Their keys by scope.
    keys: HashMap<GateScope, usize>,
    /// Scopes that became empty: when, and at which RV. Bounded by [`CLEARED_MEMORY`].
    cleared: HashMap<GateScope, (Timestamp, u64)>,
}

impl GateCounts {
    /// The record at one key changes from `before` to `after` (`None`: absent) at `rv`;
    /// `held` is the entry the gates hold of `before` (the index keeps it with the record).
    /// Returns the entry they hold of `after`, for the index to keep with it: `held` itself when
    /// both count the same in every gate (a new message: one comparison, and the entry is not
    /// touched), `None` when `after` is in no gate.
    pub(super) fn change(
        &mut self,
        before: Option<&InFlightOperation>,
        held: Option<Arc<GateEntry>>,
        after: Option<&Arc<InFlightOperation>>,
        rv: u64,
    ) -> Option<Arc<GateEntry>> {
        // What the gates cost the index is measured against the same code built without them
        // (`tests/gates-cost.sh`).
        if cfg!(bench_no_gates) {
            return None;
        }
        if let (Some(b), Some(a)) = (before, after)
            && same_for_gates(b, a)
        {
            return held;
        }
        let mut now = Now::default();
        if let Some(entry) = held {
            self.leave(&entry, rv, &mut now);
        }
        after
            .filter(|a| a.phase == Phase::Active)
            .map(|a| self.enter(a, rv, &mut now))
    }

    /// `op` joins its scopes, each in its next free slot; the scopes it fills are made (found
    /// by borrowed names: an owned one is built, and the name checked, only for a scope that
    /// fills).
    fn enter(&mut self, op: &Arc<InFlightOperation>, rv: u64, now: &mut Now) -> Arc<GateEntry> {
        let places = ScopeRef::named_by(op).map(|scope| {
            let scope = scope?;
            let key = match self.keys.get(&scope) {
                Some(&key) => key,
                None => {
                    if !scope.is_valid() {
                        return None;
                    }
                    let scope = scope.to_owned();
                    self.cleared.remove(&scope);
                    let key = self
                        .scopes
                        .insert(ScopeMembers::new(scope.clone(), now.get(), rv));
                    self.keys.insert(scope, key);
                    key
                }
            };
            Place::new(key, self.scopes.get(key)?.next_slot())
        });
        let entry = Arc::new(GateEntry::in_scopes(op.clone(), places));
        for place in places.into_iter().flatten() {
            if let Some(members) = self.scopes.get_mut(place.scope()) {
                members.join(&entry, place.slot(), || now.get());
                members.rv = rv;
            }
        }
        entry
    }

    /// `entry` leaves its scopes; those it empties are dropped and remembered as cleared.
    fn leave(&mut self, entry: &GateEntry, rv: u64, now: &mut Now) {
        for role in 0..ROLES {
            let Some(place) = entry.place(role) else {
                continue;
            };
            let Some(members) = self.scopes.get_mut(place.scope()) else {
                continue;
            };
            members.leave(entry, place.slot(), || now.get());
            members.rv = rv;
            if members.is_empty() {
                let scope = self.scopes.remove(place.scope()).scope;
                self.keys.remove(&scope);
                self.remember_cleared(scope, now.get(), rv);
            }
        }
    }

    fn remember_cleared(&mut self, scope: GateScope, at: Timestamp, rv: u64) {
        if self.cleared.len() >= CLEARED_MEMORY
            && let Some(evict) = self.cleared.keys().next().cloned()
        {
            self.cleared.remove(&evict);
        }
        self.cleared.insert(scope, (at, rv));
    }

    /// The scope as it stands, with its `listed` oldest operations (at most
    /// [`MAX_GATE_OPERATIONS`]); `base_rv` when nothing is known of it. `cordoned`: since when
    /// the nodes are cordoned (the cordoned ones only).
    pub(super) fn members(
        &self,
        scope: &GateScope,
        base_rv: u64,
        listed: usize,
        cordoned: impl Fn(&str) -> Option<Timestamp>,
    ) -> GateMembers {
        match self.keys.get(scope).and_then(|&k| self.scopes.get(k)) {
            Some(m) => Self::of(m, listed, cordoned),
            None => {
                let cleared = self.cleared.get(scope);
                GateMembers {
                    scope: scope.clone(),
                    rv: cleared.map_or(base_rv, |c| c.1.max(base_rv)),
                    since: cleared.map(|c| c.0),
                    active: 0,
                    operations: Vec::new(),
                    expected_clear: None,
                    ends: ScopeEnds::NOTHING,
                    stalled: 0,
                    stall_since: cleared.map(|c| c.0),
                    feeds_since: None,
                    released: 0,
                }
            }
        }
    }

    fn of(
        m: &ScopeMembers,
        listed: usize,
        cordoned: impl Fn(&str) -> Option<Timestamp>,
    ) -> GateMembers {
        let listed = listed.min(MAX_GATE_OPERATIONS);
        if let GateScope::Node(node) = &m.scope
            && let Some(cordoned) = cordoned(node)
        {
            let held = m.held_since_cordon(cordoned, listed);
            if held.released > 0 {
                return GateMembers {
                    scope: m.scope.clone(),
                    rv: m.rv,
                    // Nothing that holds: clear since the cordon at the earliest (a member that
                    // held may have left since, which the scope does not date).
                    since: Some(if held.active == 0 {
                        m.since.max(cordoned)
                    } else {
                        m.since
                    }),
                    active: held.active,
                    operations: held.operations,
                    expected_clear: held.expected_clear,
                    ends: held.ends,
                    stalled: held.stalled,
                    stall_since: Some(m.stall_since),
                    feeds_since: None,
                    released: held.released,
                };
            }
        }
        let (expected_clear, ends) = m.ends();
        GateMembers {
            scope: m.scope.clone(),
            rv: m.rv,
            since: Some(m.since),
            active: m.len(),
            operations: m.oldest(listed),
            expected_clear,
            ends,
            stalled: m.stalled(),
            stall_since: Some(m.stall_since),
            feeds_since: None,
            released: 0,
        }
    }

    /// Every scope with operations in flight, sorted by scope, each with its `listed` oldest
    /// operations (see [`GateCounts::members`] for `cordoned`).
    pub(super) fn in_flight(
        &self,
        listed: usize,
        cordoned: impl Fn(&str) -> Option<Timestamp>,
    ) -> Vec<GateMembers> {
        let mut scopes: Vec<&ScopeMembers> = self.scopes.iter().map(|(_, m)| m).collect();
        scopes.sort_unstable_by(|a, b| a.scope.cmp(&b.scope));
        scopes
            .into_iter()
            .map(|m| Self::of(m, listed, &cordoned))
            .collect()
    }

    /// The scopes, their member uids, expected clear time and stalled count recomputed from
    /// `records`: what the tests compare against.
    #[cfg(test)]
    pub(super) fn recount<'a>(
        records: impl IntoIterator<Item = &'a InFlightOperation>,
    ) -> BTreeMap<GateScope, ScopeSummary> {
        let mut all: BTreeMap<GateScope, Vec<&InFlightOperation>> = BTreeMap::new();
        for r in records.into_iter().filter(|r| r.phase == Phase::Active) {
            for scope in GateScope::of(r) {
                all.entry(scope).or_default().push(r);
            }
        }
        all.into_iter()
            .map(|(s, mut v)| {
                v.sort_by(|a, b| (a.created, &a.uid).cmp(&(b.created, &b.uid)));
                let expected_clear = v
                    .iter()
                    .map(|r| r.clears_at())
                    .collect::<Option<Vec<_>>>()
                    .and_then(|ends| ends.into_iter().max());
                let stalled = v.iter().filter(|r| r.is_stalled()).count();
                let uids = v.into_iter().map(|r| r.uid.clone()).collect();
                (s, (uids, expected_clear, stalled))
            })
            .collect()
    }

    /// The same, as the index keeps it.
    #[cfg(test)]
    pub(super) fn to_map(&self) -> BTreeMap<GateScope, ScopeSummary> {
        self.scopes
            .iter()
            .map(|(_, m)| {
                let uids = m.oldest(usize::MAX).iter().map(|e| e.uid.clone()).collect();
                (m.scope.clone(), (uids, m.expected_clear(), m.stalled()))
            })
            .collect()
    }
}

/// A scope's member uids (oldest first), expected clear time and stalled count.
#[cfg(test)]
pub(super) type ScopeSummary = (Vec<String>, Option<Timestamp>, usize);
