//! How operations end: a grace that runs out, a subject deleted (seen, or missed while a watch
//! was down), a ruleset removed or no longer detecting an operation; each turns the active
//! record into its `Completed` form, retained for a while or removed, in one place
//! ([`Tracker::complete`]).

use jiff::Timestamp;
use std::collections::HashSet;
use std::sync::Arc;

use super::{Change, Entry, Key, State, Tracker, after};
use crate::operation::{InFlightOperation, Outcome, Phase};

impl Tracker {
    /// Completes graces that ran out and drops retained records past their retention.
    pub(crate) fn tick(&mut self, now: Timestamp) -> Vec<Change> {
        let mut changes = Vec::new();
        while let Some((deadline, key)) = self.graces.first().cloned() {
            if deadline > now {
                break;
            }
            self.end_grace(&key, now, &mut changes);
        }
        while let Some((completed, key)) = self.retained.first().cloned() {
            if after(completed, self.settings.completed_retention) > now {
                break;
            }
            if let Some(old) = self.remove_retained(&key) {
                changes.push(Change::Remove(old));
            }
        }
        changes
    }

    /// The earliest time at which [`Tracker::tick`] has something to do.
    pub(crate) fn next_deadline(&self) -> Option<Timestamp> {
        let grace = self.graces.first().map(|(t, _)| *t);
        let retention = self
            .retained
            .first()
            .map(|(t, _)| after(*t, self.settings.completed_retention));
        match (grace, retention) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The subject was deleted: its active operations in `ruleset` complete now with
    /// `SubjectDeleted`, whether or not a grace was running (it can't match again).
    pub(crate) fn subject_deleted(
        &mut self,
        ruleset: &str,
        subject_uid: &str,
        now: Timestamp,
    ) -> Vec<Change> {
        let mut changes = self.tick(now);
        let keys = self.active_keys(ruleset, |k| k.subject_uid == subject_uid);
        for key in keys {
            self.complete(&key, now, Outcome::SubjectDeleted, now, &mut changes);
        }
        changes
    }

    /// After a relist of `ruleset`'s subjects in `namespace` (`None`: every namespace, or a
    /// cluster-scoped target): active operations of subjects there that are not in
    /// `present_subject_uids` were deleted while the watch was down. Subjects elsewhere are
    /// not judged: that list did not cover them.
    pub(crate) fn resync(
        &mut self,
        ruleset: &str,
        namespace: Option<&str>,
        present_subject_uids: &HashSet<String>,
        now: Timestamp,
    ) -> Vec<Change> {
        let mut changes = self.tick(now);
        let keys = self.active_keys_where(ruleset, |k, record| {
            namespace.is_none_or(|ns| record.subject.namespace.as_deref() == Some(ns))
                && !present_subject_uids.contains(&k.subject_uid)
        });
        for key in keys {
            self.complete(&key, now, Outcome::SubjectDeleted, now, &mut changes);
        }
        changes
    }

    /// The ruleset was deleted or became invalid: its active operations complete now with
    /// `RuleSetRemoved`, and nothing it evaluates counts any more (until it is loaded again).
    /// Retained completed records stay until their retention ends.
    pub(crate) fn ruleset_removed(&mut self, ruleset: &str, now: Timestamp) -> Vec<Change> {
        self.loaded.remove(ruleset);
        self.related.forget(ruleset);
        self.retain_operations(ruleset, &[], now)
    }

    /// The ruleset was updated and now detects only `operations`: active operations it no
    /// longer has a rule for complete now with `RuleSetRemoved` (nothing would ever end them).
    pub(crate) fn retain_operations(
        &mut self,
        ruleset: &str,
        operations: &[String],
        now: Timestamp,
    ) -> Vec<Change> {
        let mut changes = self.tick(now);
        let keys = self.active_keys(ruleset, |k| !operations.contains(&k.operation));
        for key in keys {
            self.complete(&key, now, Outcome::RuleSetRemoved, now, &mut changes);
        }
        changes
    }

    /// The grace of `key` ran out (or the debounce is zero): complete with what it recorded.
    pub(super) fn end_grace(&mut self, key: &Key, now: Timestamp, changes: &mut Vec<Change>) {
        let Some(Entry {
            state: State::Active {
                grace: Some(grace), ..
            },
            ..
        }) = self.entries.get(key)
        else {
            return;
        };
        let (at, outcome) = (grace.stopped_at, grace.outcome.unwrap_or(Outcome::Unknown));
        self.complete(key, at, outcome, now, changes);
    }

    /// Turns the active record of `key` into its `Completed` form, then retains or removes it.
    pub(super) fn complete(
        &mut self,
        key: &Key,
        at: Timestamp,
        outcome: Outcome,
        now: Timestamp,
        changes: &mut Vec<Change>,
    ) {
        let Some(entry) = self.entries.get_mut(key) else {
            return;
        };
        let State::Active {
            last_active, grace, ..
        } = &entry.state
        else {
            return;
        };
        let mut subject_generation = entry.record.subject_generation;
        if let Some(g) = grace {
            self.graces.remove(&(g.deadline, key.clone()));
            subject_generation = g.subject_generation.or(subject_generation);
        }
        let record = Arc::new(InFlightOperation {
            phase: Phase::Completed,
            outcome: Some(outcome),
            completed: Some(at),
            last_detected: *last_active,
            subject_generation,
            ending: None,
            ..(*entry.record).clone()
        });
        if let Some(n) = self.active.get_mut(&key.ruleset) {
            *n -= 1;
            if *n == 0 {
                self.active.remove(&key.ruleset);
            }
        }
        changes.push(Change::Upsert(record.clone()));
        if self.settings.retain_completed {
            entry.record = record;
            entry.state = State::Retained;
            self.retained.insert((at, key.clone()));
            while self.retained.len() > self.settings.max_completed {
                let (_, oldest) = self.retained.first().cloned().expect("non-empty");
                if let Some(old) = self.remove_retained(&oldest) {
                    changes.push(Change::Remove(old));
                }
            }
            // Possibly already past its retention (retention shorter than the debounce).
            if after(at, self.settings.completed_retention) <= now
                && let Some(old) = self.remove_retained(key)
            {
                changes.push(Change::Remove(old));
            }
        } else {
            self.entries.remove(key);
            changes.push(Change::Remove(record));
        }
    }

    pub(super) fn remove_retained(&mut self, key: &Key) -> Option<Arc<InFlightOperation>> {
        let entry = self.entries.remove(key)?;
        debug_assert!(matches!(entry.state, State::Retained));
        if let Some(completed) = entry.record.completed {
            self.retained.remove(&(completed, key.clone()));
        }
        Some(entry.record)
    }
}
