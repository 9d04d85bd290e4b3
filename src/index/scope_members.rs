//! The operations in flight in one maintenance-gate scope, and what its gate says of them.
//!
//! A scope changes under the index's write lock on every operation that starts or ends in it
//! (an operation is in up to five: the cluster, its node, its migration's target node, its
//! component, its namespace), so joining one is a push and leaving it a swap-remove: each
//! operation's [`GateEntry`] remembers where it sits in every scope it is in. What a gate reads
//! in order — its oldest operations, the latest expected end — is selected as it is read, in
//! one pass over start and end times kept beside each member, so that pass reads no record.
//! An ordered map per scope kept the order on every write instead, and doubled what an
//! operation starting and ending cost the index (`docs/performance.md`, "The index").

use std::sync::Arc;

use jiff::Timestamp;

use super::gate_entry::GateEntry;
use super::gate_scope::GateScope;

#[derive(Debug)]
struct Member {
    start: Timestamp,
    /// [`crate::operation::InFlightOperation::clears_at`].
    clears_at: Option<Timestamp>,
    stalled: bool,
    /// The member's role in this scope: which of its places is this scope's.
    role: usize,
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
    members: Vec<Member>,
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
            members: Vec::new(),
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

    /// `entry` joins as the scope of its `role`; `now` is read only if the stalled count
    /// leaves zero.
    pub(super) fn join(
        &mut self,
        entry: &Arc<GateEntry>,
        role: usize,
        now: impl FnOnce() -> Timestamp,
    ) {
        entry.set_place(role, self.members.len());
        let stalled = entry.is_stalled();
        self.members.push(Member {
            start: entry.created,
            clears_at: entry.clears_at(),
            stalled,
            role,
            entry: entry.clone(),
        });
        if stalled {
            if self.stalled == 0 {
                self.stall_since = now();
            }
            self.stalled += 1;
        }
    }

    /// `entry` leaves the scope of its `role`; nothing happens unless it is there.
    pub(super) fn leave(
        &mut self,
        entry: &GateEntry,
        role: usize,
        now: impl FnOnce() -> Timestamp,
    ) {
        let place = entry.place(role);
        if !self
            .members
            .get(place)
            .is_some_and(|m| std::ptr::eq(&*m.entry, entry))
        {
            debug_assert!(false, "an entry leaves a scope it is not in");
            return;
        }
        let gone = self.members.swap_remove(place);
        if let Some(moved) = self.members.get(place) {
            moved.entry.set_place(moved.role, place);
        }
        if gone.stalled {
            self.stalled -= 1;
            if self.stalled == 0 {
                self.stall_since = now();
            }
        }
    }

    /// Its `n` oldest operations, oldest first.
    pub(super) fn oldest(&self, n: usize) -> Vec<Arc<GateEntry>> {
        if n == 0 {
            return Vec::new();
        }
        let mut oldest: Vec<&Member> = self.members.iter().collect();
        if n < oldest.len() {
            oldest.select_nth_unstable_by(n, |a, b| a.order(b));
            oldest.truncate(n);
        }
        oldest.sort_unstable_by(|a, b| a.order(b));
        oldest.into_iter().map(|m| m.entry.clone()).collect()
    }

    /// When the last of its operations is expected to end; `None` when one has no estimate.
    pub(super) fn expected_clear(&self) -> Option<Timestamp> {
        let mut latest = None;
        for member in &self.members {
            latest = latest.max(Some(member.clears_at?));
        }
        latest
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operation::InFlightOperation;

    fn entry(start: i64, uid: &str) -> Arc<GateEntry> {
        let mut op: InFlightOperation = (*crate::operation::test_record("subject")).clone();
        op.created = Timestamp::from_second(start).unwrap();
        op.uid = uid.to_owned();
        Arc::new(GateEntry::in_scopes(
            Arc::new(op),
            [Some(0), None, None, None, None],
        ))
    }

    /// Members joining in any order and leaving from anywhere: the oldest `n` are always the
    /// first `n` of the members sorted, and each entry's place stays where it sits.
    #[test]
    fn the_oldest_are_selected_whatever_the_order_of_joining_and_leaving() {
        let mut members = ScopeMembers::new(GateScope::Cluster, Timestamp::UNIX_EPOCH, 1);
        let mut rng = fastrand::Rng::with_seed(24);
        let mut model: Vec<Arc<GateEntry>> = Vec::new();
        let now = || Timestamp::UNIX_EPOCH;
        for step in 0..3_000 {
            if model.is_empty() || rng.u8(..3) > 0 {
                // Equal starts are common: the uid orders them.
                let e = entry(rng.i64(0..400), &format!("u{step}"));
                members.join(&e, 0, now);
                model.push(e);
            } else {
                let e = model.swap_remove(rng.usize(..model.len()));
                members.leave(&e, 0, now);
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
                assert!(std::ptr::eq(&*members.members[e.place(0)].entry, &**e));
            }
        }
    }

    #[test]
    fn the_expected_clear_time_is_the_latest_end_and_none_without_an_estimate() {
        let mut members = ScopeMembers::new(GateScope::Cluster, Timestamp::UNIX_EPOCH, 1);
        let at = |s| Timestamp::from_second(s).unwrap();
        let with_end = |uid: &str, end: i64| {
            let mut op: InFlightOperation = (*entry(1, uid)).clone();
            op.expectation = Some(crate::operation::Expectation {
                end: at(end),
                basis: crate::operation::EstimateBasis::History,
                overdue: None,
            });
            Arc::new(GateEntry::in_scopes(
                Arc::new(op),
                [Some(0), None, None, None, None],
            ))
        };
        let (a, b, c) = (with_end("a", 50), with_end("b", 90), entry(2, "c"));
        let now = || Timestamp::UNIX_EPOCH;
        members.join(&a, 0, now);
        members.join(&b, 0, now);
        assert_eq!(members.expected_clear(), Some(at(90)));
        members.join(&c, 0, now);
        assert_eq!(members.expected_clear(), None);
        members.leave(&c, 0, now);
        members.leave(&b, 0, now);
        assert_eq!(members.expected_clear(), Some(at(50)));
    }
}
