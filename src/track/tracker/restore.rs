//! Operations taken back from their persisted copies: at start ([`Tracker::restore`], then
//! [`Tracker::sweep_restored`] for those no evaluation confirmed) and when a replica starts
//! leading ([`Tracker::adopt`]), so that clients keep seeing the objects served before.

use jiff::Timestamp;
use std::sync::Arc;

use super::{Change, Entry, Key, State, Tracker};
use crate::operation::{InFlightOperation, Outcome, Phase};

impl Tracker {
    /// Takes back an operation read from its persisted copy at start, so that it keeps its
    /// name, uid and start time: an `Active` one continues when its rule matches again, and
    /// completes when its subject is evaluated and no longer matches (at once: when it ended
    /// is unknown), when its subject is gone, or at [`Tracker::sweep_restored`]. A `Completed`
    /// one is retained for what is left of its retention, when completed operations are
    /// retained at all.
    ///
    /// `false` when the record is not taken (a completed record that is not retained, or a
    /// second record of the same operation): its persisted copy has no live record to mirror.
    pub(crate) fn restore(&mut self, record: Arc<InFlightOperation>) -> bool {
        let key = Key::new(&record.ruleset, &record.subject.uid, &record.operation);
        if self.entries.contains_key(&key) {
            return false;
        }
        let state = match (record.phase, record.completed) {
            (Phase::Active, _) => {
                *self.active.entry(key.ruleset.clone()).or_default() += 1;
                State::Active {
                    last_active: record.last_detected,
                    grace: None,
                    restored: true,
                }
            }
            (Phase::Completed, Some(completed)) if self.settings.retain_completed => {
                self.retained.insert((completed, key.clone()));
                State::Retained
            }
            (Phase::Completed, _) => return false,
        };
        self.entries.insert(
            key,
            Entry {
                record,
                state,
                own: None,
            },
        );
        true
    }

    /// Takes the identity (uid and start) of an active operation from its persisted copy, for
    /// the same operation this tracker detected on its own: what a replica does when it starts
    /// leading, so that clients keep seeing the object the previous leader served (each replica
    /// saw the operation start at a slightly different time, and the uid derives from it).
    /// `None` when there is nothing to change: the copy is not of an active operation, or this
    /// tracker has no active one in that slot (the writer completes such a copy).
    pub(crate) fn adopt(&mut self, copy: &InFlightOperation) -> Option<Change> {
        if copy.phase != Phase::Active {
            return None;
        }
        let key = Key::new(&copy.ruleset, &copy.subject.uid, &copy.operation);
        let entry = self.entries.get_mut(&key)?;
        if !matches!(entry.state, State::Active { .. })
            || (entry.record.uid == copy.uid && entry.record.created == copy.created)
        {
            return None;
        }
        entry.record = Arc::new(InFlightOperation {
            uid: copy.uid.clone(),
            created: copy.created,
            ..(*entry.record).clone()
        });
        Some(Change::Upsert(entry.record.clone()))
    }

    /// Restored operations that no evaluation has confirmed since the initial sync (plus a
    /// grace) ended while nobody watched: they complete now, with `RuleSetRemoved` when their
    /// ruleset is gone, else `Unknown` (their subject left the ruleset's scope, or the rule
    /// has only errored since).
    pub(crate) fn sweep_restored(&mut self, now: Timestamp) -> Vec<Change> {
        let mut changes = self.tick(now);
        let keys: Vec<Key> = self
            .entries
            .iter()
            .filter(|(_, e)| matches!(e.state, State::Active { restored: true, .. }))
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            let outcome = if self.loaded.contains_key(&key.ruleset) {
                Outcome::Unknown
            } else {
                Outcome::RuleSetRemoved
            };
            self.complete(&key, now, outcome, now, &mut changes);
        }
        changes
    }
}
