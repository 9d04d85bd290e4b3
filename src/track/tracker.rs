//! The debounce table itself.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};

use super::change::{Change, Observed};
use super::related_values::{RelatedValues, merge_labels};
use super::settings::Settings;
use super::signal::{Message, Signal, signals};
use crate::evaluate::Evaluation;
use crate::operation::{Ending, InFlightOperation, Outcome, RuleSetInfo, Subject, build_labels};
use live::{Live, dynamic_labels, owned};

/// Identity of an operation slot. Ordered ruleset first so that a ruleset's operations, and a
/// subject's operations within a ruleset, are contiguous ranges.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Key {
    ruleset: String,
    subject_uid: String,
    operation: String,
}

impl Key {
    fn new(ruleset: &str, subject_uid: &str, operation: &str) -> Key {
        Key {
            ruleset: ruleset.to_owned(),
            subject_uid: subject_uid.to_owned(),
            operation: operation.to_owned(),
        }
    }
}

struct Entry {
    /// The record as last handed out.
    record: Arc<InFlightOperation>,
    state: State,
    /// What the subject's own label expressions gave at its latest evaluation, so that its
    /// labels can be made again when its related values change (see `relabel`). `None` for a
    /// record restored and not evaluated since.
    own: Option<Vec<(String, String)>>,
}

enum State {
    Active {
        /// Last time a rule matched. Not written into the visible record on every event (that
        /// would be a MODIFIED per subject event), but used when the operation completes.
        last_active: Timestamp,
        /// Set while the rule has stopped matching and the debounce grace runs.
        grace: Option<Grace>,
        /// Read back from its persisted copy at start and not evaluated since: whether it is
        /// still in flight is not known yet (see [`Tracker::restore`]).
        restored: bool,
    },
    /// A completed record kept for `completed_retention`; `record.completed` is set.
    Retained,
}

struct Grace {
    deadline: Timestamp,
    /// When the rule stopped matching: the completion time if the grace runs out.
    stopped_at: Timestamp,
    /// The outcome the rules reported when they stopped matching, or, while that is unknown
    /// (none reported, or `Unknown`), the first determinate one reported since: what the
    /// subject does after the operation ended must not rewrite how it ended.
    outcome: Option<Outcome>,
    subject_generation: Option<i64>,
}

/// The debounce table, keyed by (subject uid, ruleset, operation).
///
/// Every method that takes `now` first completes graces and expires retained records that are
/// due at `now`, so the result never depends on how promptly the caller calls [`Tracker::tick`].
/// Memory is bounded by the active operations plus at most `max_completed` retained ones; the
/// deadline indexes hold one entry per pending grace or retained record.
pub(crate) struct Tracker {
    settings: Settings,
    entries: BTreeMap<Key, Entry>,
    /// Pending graces by deadline.
    graces: BTreeSet<(Timestamp, Key)>,
    /// Retained completed records by completion time (oldest first: expiry and eviction order).
    retained: BTreeSet<(Timestamp, Key)>,
    /// Active operations per ruleset (no zero entries).
    active: HashMap<String, usize>,
    /// The generation of every loaded ruleset. Only these rulesets, at these generations, may
    /// start or change operations: a watcher still running the rules of a ruleset that was
    /// deleted or updated must not bring back what its removal ended.
    loaded: HashMap<String, Option<i64>>,
    /// The labels related objects give subjects (`spec.related`), below their own.
    related: RelatedValues,
}

impl Tracker {
    /// An empty tracker: no operation, no ruleset loaded.
    pub(crate) fn new(settings: Settings) -> Tracker {
        Tracker {
            settings,
            entries: BTreeMap::new(),
            graces: BTreeSet::new(),
            retained: BTreeSet::new(),
            active: HashMap::new(),
            loaded: HashMap::new(),
            related: RelatedValues::default(),
        }
    }

    /// `ruleset` is loaded at `generation`: from now on only evaluations by this generation (or
    /// a later one) count.
    pub(crate) fn ruleset_loaded(&mut self, ruleset: &str, generation: Option<i64>) {
        self.loaded.insert(ruleset.to_owned(), generation);
    }

    /// The rulesets loaded now, by name.
    pub(crate) fn loaded(&self) -> impl Iterator<Item = &str> {
        self.loaded.keys().map(String::as_str)
    }

    /// Whether evaluations by `ruleset` count: it is loaded, and not at a later generation.
    pub(crate) fn accepts(&self, ruleset: &RuleSetInfo) -> bool {
        self.loaded
            .get(&ruleset.name)
            .is_some_and(|loaded| ruleset.generation >= *loaded)
    }

    /// Applies one evaluation of `subject` by `ruleset`.
    ///
    /// `operations[i]` is the operation of the ruleset's i-th rule, parallel to `eval.rules`.
    /// An evaluation by a ruleset that is not loaded, or by an older generation of it, changes
    /// nothing (see [`Tracker::accepts`]).
    pub(crate) fn observe(
        &mut self,
        ruleset: &RuleSetInfo,
        operations: &[String],
        subject: &Subject,
        eval: &Evaluation,
        now: Timestamp,
    ) -> Observed {
        let mut out = Observed {
            changes: self.tick(now),
            warnings: Vec::new(),
        };
        if !self.accepts(ruleset) {
            return out;
        }
        let signals = signals(operations, &eval.rules);
        let matching: Vec<&str> = signals
            .iter()
            .filter(|(_, signal)| matches!(signal, Signal::Active { .. }))
            .map(|(operation, _)| *operation)
            .collect();
        // In an exclusive ruleset, an operation that starts matching ends the subject's other
        // operations at once: they need no grace announced first.
        let superseding = ruleset.exclusive
            && signals.iter().any(|(operation, signal)| {
                matches!(signal, Signal::Active { .. })
                    && self.starts(&Key::new(&ruleset.name, &subject.uid, operation))
            });
        // Operations that stop matching first, so that the outcome they report at this event
        // is recorded before an exclusive operation that starts at it completes them.
        for (operation, signal) in &signals {
            if let Signal::Inactive { outcome } = signal {
                let key = Key::new(&ruleset.name, &subject.uid, operation);
                self.on_inactive(key, *outcome, subject, now, !superseding, &mut out.changes);
            }
            // Unknown: neither starts nor cancels anything.
        }
        for (operation, signal) in signals {
            let Signal::Active {
                message,
                start,
                progress,
                stalled,
            } = signal
            else {
                continue;
            };
            let key = Key::new(&ruleset.name, &subject.uid, operation);
            if ruleset.exclusive && self.starts(&key) {
                self.supersede(&key, |op| matching.contains(&op), now, &mut out.changes);
            }
            let live = Live {
                message,
                progress,
                stalled,
            };
            self.on_active(key, ruleset, subject, eval, live, start, now, &mut out);
        }
        out
    }

    /// Whether a match of `key` starts it: it is not active, or it is in its grace.
    fn starts(&self, key: &Key) -> bool {
        match self.entries.get(key) {
            Some(Entry {
                state: State::Active { grace, .. },
                ..
            }) => grace.is_some(),
            _ => true,
        }
    }

    /// `key` starts matching in an exclusive ruleset: the subject's other active operations in
    /// that ruleset complete now, except those `still_matching` (rules that overlap are a
    /// ruleset's own contradiction; ending an operation its rule still detects would only
    /// start it again at the next event). One in its grace completes as its grace would have,
    /// except that one that stopped matching at this very moment, its outcome not said, was cut
    /// short by the next: `Superseded` (so it is not taken for a run to its end). One whose rule
    /// failed to evaluate completes now, `Unknown`.
    fn supersede(
        &mut self,
        key: &Key,
        still_matching: impl Fn(&str) -> bool,
        now: Timestamp,
        changes: &mut Vec<Change>,
    ) {
        let start = Key::new(&key.ruleset, &key.subject_uid, "");
        let others: Vec<(Key, Timestamp, Outcome)> = self
            .entries
            .range(start..)
            .take_while(|(k, _)| k.ruleset == key.ruleset && k.subject_uid == key.subject_uid)
            .filter(|(k, _)| k.operation != key.operation && !still_matching(&k.operation))
            .filter_map(|(k, e)| match &e.state {
                State::Active { grace, .. } => {
                    let (at, outcome) = match grace {
                        Some(g) => (g.stopped_at, superseded(g, now)),
                        None => (now, Outcome::Unknown),
                    };
                    Some((k.clone(), at, outcome))
                }
                State::Retained => None,
            })
            .collect();
        for (other, at, outcome) in others {
            tracing::debug!(
                ruleset = %other.ruleset,
                subject_uid = %other.subject_uid,
                operation = %other.operation,
                superseded_by = %key.operation,
                %outcome,
                "exclusive ruleset: operation completes as another starts"
            );
            self.complete(&other, at, outcome, now, changes);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn on_active(
        &mut self,
        key: Key,
        ruleset: &RuleSetInfo,
        subject: &Subject,
        eval: &Evaluation,
        live: Live<'_>,
        start: Option<Timestamp>,
        now: Timestamp,
        out: &mut Observed,
    ) {
        if let Some(entry) = self.entries.get_mut(&key) {
            match &mut entry.state {
                State::Active {
                    last_active,
                    grace,
                    restored,
                } => {
                    // Matching again within the grace (or after a restart): the same
                    // occurrence goes on.
                    *restored = false;
                    if let Some(g) = grace.take() {
                        self.graces.remove(&(g.deadline, key.clone()));
                    }
                    *last_active = now;
                    let old = &entry.record;
                    let message = match live.message {
                        Message::None => None,
                        Message::Text(text) => Some(text.to_owned()),
                        Message::Unknown => old.message.clone(),
                    };
                    let progress = live.progress(old.progress);
                    let stalled = live.stalled(old.stalled.as_ref(), now);
                    let own = match &entry.own {
                        Some(own) => dynamic_labels(&eval.labels, |k| {
                            own.iter().find(|(o, _)| o == k).map(|(_, v)| v.as_str())
                        }),
                        None => dynamic_labels(&eval.labels, |k| old.labels.get(k)),
                    };
                    let related = self.related.get(
                        &ruleset.name,
                        subject.namespace.as_deref(),
                        &subject.name,
                    );
                    let (labels, warnings) = build_labels(
                        subject,
                        ruleset,
                        &key.operation,
                        merge_labels(&related, &own),
                    );
                    let own = owned(&own);
                    out.warnings.extend(warnings);
                    let mut candidate = InFlightOperation {
                        labels,
                        message,
                        subject: subject.clone(),
                        subject_generation: subject.generation,
                        component: ruleset.component.clone(),
                        progress,
                        stalled,
                        ending: None,
                        ..(**old).clone()
                    };
                    if entry.own.as_ref() != Some(&own) {
                        entry.own = Some(own);
                    }
                    if candidate != **old {
                        candidate.last_detected = now;
                        entry.record = Arc::new(candidate);
                        out.changes.push(Change::Upsert(entry.record.clone()));
                    }
                    return;
                }
                State::Retained => {
                    // A new occurrence replaces the retained one; its uid differs, so clients
                    // must see the old object go before the new one comes.
                    let old = self.remove_retained(&key).expect("entry exists");
                    out.changes.push(Change::Remove(old));
                }
            }
        }
        let message = match live.message {
            Message::Text(text) => Some(text.to_owned()),
            Message::None | Message::Unknown => None,
        };
        let own = dynamic_labels(&eval.labels, |_| None);
        let related = self
            .related
            .get(&ruleset.name, subject.namespace.as_deref(), &subject.name);
        let (mut record, warnings) = InFlightOperation::new_active(
            ruleset,
            &key.operation,
            subject,
            start.unwrap_or(now),
            now,
            message,
            merge_labels(&related, &own),
        );
        let own = owned(&own);
        record.progress = live.progress(None);
        record.stalled = live.stalled(None, now);
        out.warnings.extend(warnings);
        let record = Arc::new(record);
        out.changes.push(Change::Upsert(record.clone()));
        *self.active.entry(key.ruleset.clone()).or_default() += 1;
        self.entries.insert(
            key,
            Entry {
                record,
                state: State::Active {
                    last_active: now,
                    grace: None,
                    restored: false,
                },
                own: Some(own),
            },
        );
    }

    /// `announce`: show the grace on the record (`ending`); false when the operation is about to
    /// complete at this same event anyway.
    fn on_inactive(
        &mut self,
        key: Key,
        outcome: Option<Outcome>,
        subject: &Subject,
        now: Timestamp,
        announce: bool,
        changes: &mut Vec<Change>,
    ) {
        let Some(Entry {
            record,
            state: State::Active {
                grace, restored, ..
            },
            ..
        }) = self.entries.get_mut(&key)
        else {
            return;
        };
        if *restored {
            // It ended while nobody watched, at a time nobody knows: it completes now, with
            // the outcome the object shows if its rule reports one.
            let outcome = outcome.unwrap_or(Outcome::Unknown);
            self.complete(&key, now, outcome, now, changes);
            return;
        }
        match grace {
            Some(g) => {
                // How it ended was settled when it stopped matching; only a result that was
                // not known then may still be learned.
                if matches!(g.outcome, None | Some(Outcome::Unknown)) && outcome.is_some() {
                    g.outcome = outcome;
                }
                g.subject_generation = subject.generation;
            }
            None => {
                let deadline = after(now, self.settings.debounce);
                *grace = Some(Grace {
                    deadline,
                    stopped_at: now,
                    outcome,
                    subject_generation: subject.generation,
                });
                self.graces.insert((deadline, key.clone()));
                if deadline <= now {
                    self.end_grace(&key, now, changes);
                } else if announce {
                    *record = Arc::new(InFlightOperation {
                        ending: Some(Ending {
                            since: now,
                            at: deadline,
                        }),
                        ..(**record).clone()
                    });
                    changes.push(Change::Upsert(record.clone()));
                }
            }
        }
    }

    /// Active operations (grace running or not) of `ruleset`.
    pub(crate) fn active_count(&self, ruleset: &str) -> usize {
        self.active.get(ruleset).copied().unwrap_or(0)
    }

    /// Retained completed records, all rulesets.
    #[cfg(test)]
    pub(crate) fn retained_count(&self) -> usize {
        self.retained.len()
    }

    fn active_keys(&self, ruleset: &str, filter: impl Fn(&Key) -> bool) -> Vec<Key> {
        self.active_keys_where(ruleset, |k, _| filter(k))
    }

    fn active_keys_where(
        &self,
        ruleset: &str,
        filter: impl Fn(&Key, &InFlightOperation) -> bool,
    ) -> Vec<Key> {
        let start = Key::new(ruleset, "", "");
        self.entries
            .range(start..)
            .take_while(|(k, _)| k.ruleset == ruleset)
            .filter(|(k, e)| matches!(e.state, State::Active { .. }) && filter(k, &e.record))
            .map(|(k, _)| k.clone())
            .collect()
    }
}

/// `ts + d`, saturating instead of failing at the ends of the representable range.
fn after(ts: Timestamp, d: SignedDuration) -> Timestamp {
    ts.checked_add(d).unwrap_or(if d.is_negative() {
        Timestamp::MIN
    } else {
        Timestamp::MAX
    })
}

/// The outcome of an operation in its `grace` that the next operation of an exclusive ruleset
/// ends at `now`: the one its rule reported; when it reported none and stopped matching at this
/// same moment, the subject moved straight from it to the next, `Superseded`.
fn superseded(grace: &Grace, now: Timestamp) -> Outcome {
    match grace.outcome {
        Some(outcome) if outcome != Outcome::Unknown => outcome,
        _ if grace.stopped_at == now => Outcome::Superseded,
        _ => Outcome::Unknown,
    }
}

mod ending;
mod live;
mod relabel;
mod restore;

#[cfg(test)]
mod tests;
