//! The operations in flight in one maintenance-gate scope, and what its gate says of them.
//!
//! A scope changes under the index's write lock on every operation that starts or ends in it
//! (an operation is in up to five: the cluster, its node, its migration's target node, its
//! component, its namespace), so joining one takes a free slot and leaving it frees the slot:
//! each operation's [`GateEntry`] remembers its slot in every scope it is in, and no other
//! member moves, so leaving touches nothing of another operation. (Members were a vector with a
//! swap-remove before: each leave then wrote the new place into the entry of the member it
//! moved, one more operation's memory touched per scope.) What a gate reads in order — its
//! oldest operations, the latest expected end — is selected as it is read, in one pass over
//! start and end times kept beside each member, so that pass reads no record. An ordered map
//! per scope kept the order on every write instead, and doubled what an operation starting and
//! ending cost the index (`docs/performance.md`, "The index").
//!
//! A scope's slots stay at the most it held until it empties, when the index drops it, as a
//! vector's capacity would: a read passes over the free slots too.

use std::sync::Arc;

use jiff::Timestamp;
use slab::Slab;

use super::gate_entry::GateEntry;
use super::gate_scope::GateScope;
use super::scope_ends::{Fold, ScopeEnds, Seen};

#[derive(Debug)]
struct Member {
    start: Timestamp,
    /// It holds its node's gate only if it started before the node was cordoned (see
    /// [`ifo_model::NODE_HOLD_LABEL`]).
    until_cordon: bool,
    /// [`crate::operation::InFlightOperation::clears_at`].
    clears_at: Option<Timestamp>,
    /// [`crate::operation::InFlightOperation::clears_at_p90`].
    clears_at_p90: Option<Timestamp>,
    /// [`crate::operation::InFlightOperation::is_overdue`].
    overdue: bool,
    stalled: bool,
    entry: Arc<GateEntry>,
}

impl Member {
    /// Oldest first; equal starts by uid.
    fn order(&self, other: &Member) -> std::cmp::Ordering {
        self.start
            .cmp(&other.start)
            .then_with(|| self.entry.uid.cmp(&other.entry.uid))
    }
}

/// One scope with operations in flight.
#[derive(Debug)]
pub(super) struct ScopeMembers {
    /// The scope itself (what its entry in the index's map of scopes is keyed by).
    pub(super) scope: GateScope,
    members: Slab<Member>,
    /// When the scope last went from nothing in flight to something.
    pub(super) since: Timestamp,
    /// The resourceVersion of its latest change.
    pub(super) rv: u64,
    /// Members that are stalled.
    stalled: usize,
    /// When the scope last went from no member stalled to some, or back.
    pub(super) stall_since: Timestamp,
}

impl ScopeMembers {
    pub(super) fn new(scope: GateScope, since: Timestamp, rv: u64) -> ScopeMembers {
        ScopeMembers {
            scope,
            members: Slab::new(),
            since,
            rv,
            stalled: 0,
            stall_since: since,
        }
    }

    /// How many operations are in flight in it.
    pub(super) fn len(&self) -> usize {
        self.members.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// How many of them are stalled.
    pub(super) fn stalled(&self) -> usize {
        self.stalled
    }

    /// The slot the next member to join takes.
    pub(super) fn next_slot(&self) -> usize {
        self.members.vacant_key()
    }

    /// `entry` joins in `slot`, which must be [`Self::next_slot`] (where the entry was made
    /// to sit); `now` is read only if the stalled count leaves zero.
    pub(super) fn join(
        &mut self,
        entry: &Arc<GateEntry>,
        slot: usize,
        now: impl FnOnce() -> Timestamp,
    ) {
        let stalled = entry.is_stalled();
        let taken = self.members.insert(Member {
            start: entry.created,
            until_cordon: entry.labels.get(ifo_model::NODE_HOLD_LABEL)
                == Some(ifo_model::STARTED_BEFORE_CORDON),
            clears_at: entry.clears_at(),
            clears_at_p90: entry.clears_at_p90(),
            overdue: entry.is_overdue(),
            stalled,
            entry: entry.clone(),
        });
        debug_assert_eq!(taken, slot, "a member joins in a slot it was not made for");
        if stalled {
            if self.stalled == 0 {
                self.stall_since = now();
            }
            self.stalled += 1;
        }
    }

    /// `entry` leaves its `slot`; nothing happens unless it is there.
    pub(super) fn leave(
        &mut self,
        entry: &GateEntry,
        slot: usize,
        now: impl FnOnce() -> Timestamp,
    ) {
        if !self
            .members
            .get(slot)
            .is_some_and(|m| std::ptr::eq(&*m.entry, entry))
        {
            debug_assert!(false, "an entry leaves a scope it is not in");
            return;
        }
        let gone = self.members.remove(slot);
        if gone.stalled {
            self.stalled -= 1;
            if self.stalled == 0 {
                self.stall_since = now();
            }
        }
    }

    /// Its `n` oldest operations, oldest first.
    pub(super) fn oldest(&self, n: usize) -> Vec<Arc<GateEntry>> {
        self.oldest_of(n, |_| true)
    }

    /// The scope as a gate of a node cordoned since `cordoned` sees it: without the members
    /// that hold their node only if they started before its cordon and started after (see
    /// [`ifo_model::NODE_HOLD_LABEL`]). How many hold, the `n` oldest of them, their ends, how
    /// many of them are stalled, and how many were left out.
    pub(super) fn held_since_cordon(&self, cordoned: Timestamp, n: usize) -> Held {
        let holds = |m: &Member| !(m.until_cordon && m.start >= cordoned);
        let (active, stalled) = self
            .members
            .iter()
            .filter(|(_, m)| holds(m))
            .fold((0, 0), |(a, s), (_, m)| (a + 1, s + usize::from(m.stalled)));
        let (expected_clear, ends) = self.ends_of(holds);
        Held {
            active,
            operations: self.oldest_of(n, holds),
            expected_clear,
            ends,
            stalled,
            released: self.members.len() - active,
        }
    }

    fn oldest_of(&self, n: usize, holds: impl Fn(&Member) -> bool) -> Vec<Arc<GateEntry>> {
        if n == 0 {
            return Vec::new();
        }
        let mut oldest: Vec<&Member> = self
            .members
            .iter()
            .map(|(_, m)| m)
            .filter(|m| holds(m))
            .collect();
        if n < oldest.len() {
            oldest.select_nth_unstable_by(n, |a, b| a.order(b));
            oldest.truncate(n);
        }
        oldest.sort_unstable_by(|a, b| a.order(b));
        oldest.into_iter().map(|m| m.entry.clone()).collect()
    }

    /// When the last of its operations is expected to end; `None` when one has no estimate.
    #[cfg(test)]
    pub(super) fn expected_clear(&self) -> Option<Timestamp> {
        self.ends().0
    }

    /// In one pass: when the last of its operations is expected to end (`None` when one has no
    /// estimate), and what their ends say of when the scope clears at each confidence.
    pub(super) fn ends(&self) -> (Option<Timestamp>, ScopeEnds<Arc<GateEntry>>) {
        self.ends_of(|_| true)
    }

    fn ends_of(
        &self,
        holds: impl Fn(&Member) -> bool,
    ) -> (Option<Timestamp>, ScopeEnds<Arc<GateEntry>>) {
        let mut latest = Some(Timestamp::MIN);
        let mut fold = Fold::new();
        let mut any = false;
        for (_, m) in self.members.iter().filter(|(_, m)| holds(m)) {
            any = true;
            latest = match (latest, m.clears_at) {
                (Some(l), Some(c)) => Some(l.max(c)),
                _ => None,
            };
            fold.add(Seen {
                start: m.start,
                p50: m.clears_at,
                p90: m.clears_at_p90,
                overdue: m.overdue,
                entry: &m.entry,
            });
        }
        let latest = latest.filter(|_| any);
        (latest, fold.finish())
    }
}

/// A scope's members that hold a cordoned node's gate (see [`ScopeMembers::held_since_cordon`]).
pub(super) struct Held {
    pub active: usize,
    pub operations: Vec<Arc<GateEntry>>,
    pub expected_clear: Option<Timestamp>,
    pub ends: ScopeEnds<Arc<GateEntry>>,
    pub stalled: usize,
    pub released: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::gate_entry::Place;
    use crate::operation::InFlightOperation;

    fn record(start: i64, uid: &str) -> InFlightOperation {
        let mut op: InFlightOperation = (*crate::operation::test_record("subject")).clone();
        op.created = Timestamp::from_second(start).unwrap();
        op.uid = uid.to_owned();
        op
    }

    /// `op` joins `members` (as the cluster's scope, key 0), as the index makes it join.
    fn join(members: &mut ScopeMembers, op: InFlightOperation) -> Arc<GateEntry> {
        let slot = members.next_slot();
        let e = Arc::new(GateEntry::in_scopes(
            Arc::new(op),
            [Place::new(0, slot), None, None, None, None],
        ));
        members.join(&e, slot, || Timestamp::UNIX_EPOCH);
        e
    }

    fn leave(members: &mut ScopeMembers, e: &GateEntry) {
        let slot = e.place(0).unwrap().slot();
        members.leave(e, slot, || Timestamp::UNIX_EPOCH);
    }

    /// Members joining in any order and leaving from anywhere: the oldest `n` are always the
    /// first `n` of the members sorted, and each entry's place stays where it sits.
    #[test]
    fn the_oldest_are_selected_whatever_the_order_of_joining_and_leaving() {
        let mut members = ScopeMembers::new(GateScope::Cluster, Timestamp::UNIX_EPOCH, 1);
        let mut rng = fastrand::Rng::with_seed(24);
        let mut model: Vec<Arc<GateEntry>> = Vec::new();
        for step in 0..3_000 {
            if model.is_empty() || rng.u8(..3) > 0 {
                // Equal starts are common: the uid orders them.
                let e = join(&mut members, record(rng.i64(0..400), &format!("u{step}")));
                model.push(e);
            } else {
                let e = model.swap_remove(rng.usize(..model.len()));
                leave(&mut members, &e);
            }
            let mut sorted: Vec<(Timestamp, String)> =
                model.iter().map(|e| (e.created, e.uid.clone())).collect();
            sorted.sort();
            let n = rng.usize(0..60);
            let oldest: Vec<(Timestamp, String)> = members
                .oldest(n)
                .iter()
                .map(|e| (e.created, e.uid.clone()))
                .collect();
            assert_eq!(
                oldest,
                sorted.iter().take(n).cloned().collect::<Vec<_>>(),
                "step {step}"
            );
            assert_eq!(members.len(), model.len());
            for e in &model {
                let slot = e.place(0).unwrap().slot();
                assert!(std::ptr::eq(&*members.members[slot].entry, &**e));
            }
        }
    }

    #[test]
    fn the_expected_clear_time_is_the_latest_end_and_none_without_an_estimate() {
        let mut members = ScopeMembers::new(GateScope::Cluster, Timestamp::UNIX_EPOCH, 1);
        let at = |s| Timestamp::from_second(s).unwrap();
        let with_end = |uid: &str, end: i64| {
            let mut op = record(1, uid);
            op.expectation = Some(crate::operation::Expectation {
                end: at(end),
                basis: crate::operation::EstimateBasis::History,
                p90_end: None,
                overdue: None,
            });
            op
        };
        let _a = join(&mut members, with_end("a", 50));
        let b = join(&mut members, with_end("b", 90));
        assert_eq!(members.expected_clear(), Some(at(90)));
        let c = join(&mut members, record(2, "c"));
        assert_eq!(members.expected_clear(), None);
        leave(&mut members, &c);
        leave(&mut members, &b);
        assert_eq!(members.expected_clear(), Some(at(50)));
    }
}
