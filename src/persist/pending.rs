//! What is left to write: the persisted copy each operation should have, against what the
//! cluster holds as far as the writer knows, with when each next write may happen.
//!
//! Pure and synchronous (time is passed in). Work is keyed by operation name, never queued by
//! event: however many changes an operation goes through while kube-apiserver is unreachable,
//! it has one entry whose desired state is the latest, so memory is bounded by the number of
//! operations and a write carries the newest state (coalescing). Each operation is written at
//! most once per interval; failures back off exponentially with jitter.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use jiff::Timestamp;

use crate::backoff::Backoff;
use crate::operation::{InFlightOperation, Outcome, Phase};

/// A copy of ours in the cluster.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Copy {
    /// What it holds; `None` when it could not be read (it is then replaced or deleted).
    pub record: Option<Arc<InFlightOperation>>,
    /// Its `metadata.uid`: deletes are conditional on it.
    pub uid: String,
    /// Its `metadata.resourceVersion`: replaces are conditional on it.
    pub resource_version: String,
}

/// What an operation's copy should be.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Desired {
    /// A copy of this record.
    Present(Arc<InFlightOperation>),
    /// No copy: the live record is gone (its last state, if known, so that a completion
    /// nobody wrote yet is shown before the copy goes).
    Absent(Option<Arc<InFlightOperation>>),
}

/// One write to make.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Write {
    /// Create the copy.
    Create(Arc<InFlightOperation>),
    /// Replace the copy at `copy.resource_version` with the record.
    Replace(Arc<InFlightOperation>, Copy),
    /// Delete the copy with this uid.
    Delete {
        /// The copy's name (the operation's).
        name: String,
        /// The copy's own uid, so a copy made again under the name is not deleted.
        uid: String,
    },
}

impl Write {
    /// The operation (and copy) name.
    pub(super) fn name(&self) -> &str {
        match self {
            Write::Create(r) | Write::Replace(r, _) => &r.name,
            Write::Delete { name, .. } => name,
        }
    }

    /// The HTTP verb, for logs and metrics.
    pub(super) fn verb(&self) -> &'static str {
        match self {
            Write::Create(_) => "create",
            Write::Replace(..) => "update",
            Write::Delete { .. } => "delete",
        }
    }
}

/// How a write went.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Written {
    /// Created or replaced: the copy now.
    Stored(Copy),
    /// Deleted, or found gone.
    Deleted,
    /// The cluster holds something else than we knew (a conflict, or a copy gone or already
    /// there); it was read again: this is the copy now (`None`: there is none).
    Reread(Option<Copy>),
    /// The name is held by an object someone else wrote: it is left alone.
    Foreign,
    /// Failed (kube-apiserver unreachable, refused, late): tried again after a backoff.
    Failed,
}

#[derive(Debug)]
struct Slot {
    desired: Desired,
    /// When the next write may happen.
    due: Instant,
    /// Since when this operation has had work left.
    since: Instant,
    /// Failed attempts in a row.
    failures: u32,
    in_flight: bool,
}

/// The writer's bookkeeping.
#[derive(Debug)]
pub(super) struct Pending {
    interval: Duration,
    /// Our copies in the cluster, by name, with when each was last written.
    copies: HashMap<String, (Copy, Option<Instant>)>,
    /// Names held by objects of others.
    foreign: HashSet<String>,
    /// Operations with work left, by name.
    work: HashMap<String, Slot>,
    /// Work not in flight, by due time.
    queue: BTreeSet<(Instant, String)>,
}

/// The wait before a failed write is tried again: 500 ms doubling to 30 s, each with ±20 %
/// jitter so that writes failed together do not retry together.
const BACKOFF: Backoff =
    Backoff::new(Duration::from_millis(500), Duration::from_secs(30)).jitter(0.2);

impl Pending {
    /// `interval`: the least time between two writes of one operation's copy.
    pub(super) fn new(interval: Duration) -> Pending {
        Pending {
            interval,
            copies: HashMap::new(),
            foreign: HashSet::new(),
            work: HashMap::new(),
            queue: BTreeSet::new(),
        }
    }

    /// A copy of ours found in the cluster (at start).
    pub(super) fn found(&mut self, name: String, copy: Copy) {
        self.copies.insert(name, (copy, None));
    }

    /// Operations with work left (in flight or waiting).
    pub(super) fn len(&self) -> usize {
        self.work.len()
    }

    /// Whether nothing is left to write.
    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.work.is_empty()
    }

    /// How long the operation waiting longest has been waiting.
    pub(super) fn oldest(&self, now: Instant) -> Option<Duration> {
        self.work.values().map(|s| now - s.since).max()
    }

    /// When the earliest waiting write is due.
    pub(super) fn next_due(&self) -> Option<Instant> {
        self.queue.first().map(|(t, _)| *t)
    }

    /// The copy of `name` should now be `desired`.
    pub(super) fn want(&mut self, name: &str, desired: Desired, now: Instant) {
        if self.foreign.contains(name) {
            if matches!(desired, Desired::Absent(_)) {
                self.foreign.remove(name);
            }
            return;
        }
        if let Some(slot) = self.work.get_mut(name) {
            slot.desired = desired;
            return;
        }
        let due = match self.copies.get(name) {
            Some((_, Some(at))) => (*at + self.interval).max(now),
            _ => now,
        };
        self.work.insert(
            name.to_owned(),
            Slot {
                desired,
                due,
                since: now,
                failures: 0,
                in_flight: false,
            },
        );
        self.queue.insert((due, name.to_owned()));
    }

    /// Everything the index holds now: each record should have its copy, and copies of
    /// anything else should go. After the writer missed events (or at start). A copy still
    /// showing an active operation the index no longer has is first written completed, outcome
    /// `Unknown`, at `wall` (the operation ended while the writer was not looking), so that
    /// readers of the copies see it end before it goes.
    pub(super) fn resync(
        &mut self,
        records: &[Arc<InFlightOperation>],
        now: Instant,
        wall: Timestamp,
    ) {
        let live: HashSet<&str> = records.iter().map(|r| r.name.as_str()).collect();
        let gone: Vec<(String, Option<Arc<InFlightOperation>>)> = self
            .copies
            .iter()
            .filter(|(name, _)| !live.contains(name.as_str()))
            .map(|(name, (copy, _))| {
                let last = copy.record.as_ref().map(|r| ended_unseen(r, wall));
                (name.clone(), last)
            })
            .chain(
                self.work
                    .iter()
                    .filter(|(name, _)| !live.contains(name.as_str()))
                    .map(|(name, _)| (name.clone(), None)),
            )
            .collect();
        for (name, last) in gone {
            self.want(&name, Desired::Absent(last), now);
        }
        for record in records {
            self.want(&record.name, Desired::Present(record.clone()), now);
        }
    }

    /// The next write that is due at `now`, marked in flight until [`Pending::done`].
    pub(super) fn take(&mut self, now: Instant) -> Option<Write> {
        while let Some((due, name)) = self.queue.first().cloned() {
            if due > now {
                return None;
            }
            self.queue.remove(&(due, name.clone()));
            let Some(slot) = self.work.get_mut(&name) else {
                continue;
            };
            let copy = self.copies.get(&name).map(|(c, _)| c);
            match next_write(&name, &slot.desired, copy) {
                Some(write) => {
                    slot.in_flight = true;
                    return Some(write);
                }
                None => {
                    self.work.remove(&name);
                }
            }
        }
        None
    }

    /// The write of `name` that [`Pending::take`] handed out ended as `result`.
    pub(super) fn done(&mut self, name: &str, result: Written, now: Instant) {
        let Some(slot) = self.work.get_mut(name) else {
            return;
        };
        slot.in_flight = false;
        let last_write = self.copies.get(name).and_then(|(_, at)| *at);
        let due = match result {
            Written::Stored(copy) => {
                slot.failures = 0;
                self.copies.insert(name.to_owned(), (copy, Some(now)));
                now + self.interval
            }
            Written::Deleted => {
                slot.failures = 0;
                self.copies.remove(name);
                now
            }
            Written::Reread(copy) => {
                // Written by someone meanwhile or gone: decide again from what is there, soon
                // but not in a tight loop should it keep changing.
                slot.failures += 1;
                match copy {
                    Some(copy) => self.copies.insert(name.to_owned(), (copy, last_write)),
                    None => self.copies.remove(name),
                };
                now + BACKOFF.wait(slot.failures - 1) / 4
            }
            Written::Foreign => {
                // Left alone while the live operation lasts (its name is taken).
                if matches!(slot.desired, Desired::Present(_)) {
                    self.foreign.insert(name.to_owned());
                }
                self.copies.remove(name);
                self.work.remove(name);
                return;
            }
            Written::Failed => {
                slot.failures += 1;
                now + BACKOFF.wait(slot.failures)
            }
        };
        slot.due = due;
        slot.since = if slot.failures == 0 { now } else { slot.since };
        self.queue.insert((due, name.to_owned()));
    }
}

/// `record` completed at `at` with an unknown outcome, if it is still active.
fn ended_unseen(record: &Arc<InFlightOperation>, at: Timestamp) -> Arc<InFlightOperation> {
    if record.phase != Phase::Active {
        return record.clone();
    }
    let mut ended = (**record).clone();
    ended.phase = Phase::Completed;
    ended.outcome = Some(Outcome::Unknown);
    ended.completed = Some(at);
    Arc::new(ended)
}

/// The write that brings `copy` to `desired`, if any.
fn next_write(name: &str, desired: &Desired, copy: Option<&Copy>) -> Option<Write> {
    match (desired, copy) {
        (Desired::Present(record), None) => Some(Write::Create(record.clone())),
        (Desired::Present(record), Some(copy)) => (copy.record.as_ref() != Some(record))
            .then(|| Write::Replace(record.clone(), copy.clone())),
        // A completion the copy does not show yet is written before the copy goes, so that
        // readers of the copies see how the operation ended.
        (Desired::Absent(Some(last)), Some(copy))
            if last.phase == Phase::Completed
                && copy
                    .record
                    .as_ref()
                    .is_some_and(|r| r.phase == Phase::Active && r.uid == last.uid) =>
        {
            Some(Write::Replace(last.clone(), copy.clone()))
        }
        (Desired::Absent(_), Some(copy)) => Some(Write::Delete {
            name: name.to_owned(),
            uid: copy.uid.clone(),
        }),
        (Desired::Absent(_), None) => None,
    }
}

#[cfg(test)]
mod tests;
