//! Whether detection is current, per target and per namespace: the target side of the one health
//! store ([`super::Health`]), and the one query every answer that depends on it asks
//! ([`TargetHealth::stale`], per namespace or everywhere).
//!
//! Detection in part of a target is not current ([`Blind`]) when
//! - its watch is not running: its first list has not completed, listing or watching fails, or
//!   a liveness probe found the watch stalled;
//! - a ruleset of it is suspended in a namespace (it kept going over its evaluation budget on
//!   objects there): its rules do not run there. Every object of that namespace that changes
//!   meanwhile is skipped (below), with the nodes its labels name, so that node gates are
//!   Unknown exactly where a change went unseen;
//! - a ruleset's evaluation lane fell behind and dropped events: until the list the watcher then
//!   starts completes, what those events said is missing;
//! - a ruleset's evaluation lags: the oldest event its lane holds has waited longer than the
//!   bound (`EVALUATION_LAG_BOUND`). Nothing is lost, only late: what changed since that event
//!   is not seen yet, and detection is current again once the lag is back under the bound;
//! - an object is skipped: it cannot be decoded, evaluating a ruleset on it went over the
//!   budget (its own data made it too costly), or a rule of the ruleset fails on it. Only that
//!   object's namespace is affected, and of the node gates only those of the nodes it was seen on
//!   (all of them when its node cannot be known);
//! - a ruleset does not compile: none of its rules run, wherever it applies.
//!
//! A maintenance gate errs toward Unknown: it depends on every ruleset that can put an operation
//! in its scope ([`Reach`]), and any blind spot of such a ruleset makes it Unknown. Only where
//! the server can prove a blind spot cannot reach the scope (another component, another
//! namespace, an object known to be on another node) does the gate leave it out.
//!
//! The watchers and the evaluator write it. The API reads it to add a `Warning` to every answer
//! that may be incomplete (and `kubectl ifo check`/`wait` exit 2 on such a warning); maintenance
//! gates read it to answer Unknown. It is exported as the `ifo_target_watch_up`,
//! `ifo_target_detection_current`, `ifo_target_objects_skipped` and
//! `ifo_target_last_list_timestamp_seconds` metrics.
//!
//! Serving old state silently is the failure that matters most for a tool asked "is it safe to do
//! maintenance?": with etcd down, RBAC revoked or a CRD deleted, the index keeps what it last saw.
//!
//! This file is the store: what the watchers and the evaluator report, and the questions about a
//! namespace. What it keeps of one target is `entry.rs`, the reasons `blind.rs`, the gates a
//! ruleset reaches `reach.rs`, and the questions about a gate `gate_view.rs`.

mod blind;
mod entry;
mod gate_view;
mod reach;
#[cfg(test)]
#[allow(
    clippy::disallowed_methods,
    reason = "a test's tasks end with the test's runtime"
)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::time::Duration;

use jiff::Timestamp;
use parking_lot::Mutex;

use crate::index::FeedsClock;
use crate::readiness::Readiness;
use crate::ruleset::Target;

pub(crate) use blind::Blind;
use entry::{Entry, Lag, Resolution, SkippedObject, StreamState};
pub(crate) use reach::Reach;
use reach::covers;

/// What is said of a lag over its bound: how long (whole seconds, at least the bound), the
/// bound, and the nodes the late changes are on (`None`: not known, any node).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LagSaid {
    pub lag: Duration,
    pub bound: Duration,
    pub nodes: Option<BTreeSet<String>>,
}

/// How long [`TargetHealth::report_to`] gathers changes before it reports them.
const REPORT_COALESCE: Duration = Duration::from_millis(100);

/// Namespaces a ruleset covers; `None`: every namespace.
pub(super) type Namespaces = Option<BTreeSet<String>>;

/// A namespace stream of a target: `Some(ns)` when its rulesets only watch some namespaces,
/// `None` for the one stream across all namespaces (or of a cluster-scoped target).
pub(crate) type Stream = Option<String>;

/// A ruleset that does not compile.
#[derive(Debug, Clone)]
struct InvalidRuleSet {
    target: Target,
    reach: Reach,
    error: String,
}

/// A target whose detection is not current, and why (one per reason).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Stale {
    /// The target.
    pub target: Target,
    /// Why.
    pub reason: Blind,
}

impl Stale {
    /// The target as readers name it: `virtualmachines.kubevirt.io/v1`, `pods/v1`.
    pub(crate) fn resource(&self) -> String {
        let t = &self.target;
        if t.group.is_empty() {
            format!("{}/{}", t.resource, t.version)
        } else {
            format!("{}.{}/{}", t.resource, t.group, t.version)
        }
    }
}

/// Every watched target's health. Cheap to read: one lock, held briefly.
#[derive(Debug, Default)]
pub(super) struct TargetHealth {
    targets: Mutex<BTreeMap<Target, Entry>>,
    /// Rulesets that do not compile, by name.
    invalid: Mutex<BTreeMap<String, InvalidRuleSet>>,
    /// Woken when what [`TargetHealth::stale`] answers may have changed.
    changed: tokio::sync::Notify,
}

impl TargetHealth {
    fn update(&self, target: &Target, f: impl FnOnce(&mut Entry)) {
        let mut targets = self.targets.lock();
        let Some(entry) = targets.get_mut(target) else {
            // Forgotten meanwhile: the watcher is being stopped.
            return;
        };
        // What the answers depend on: where the target is blind, anywhere.
        let before = entry.blind_spots(None);
        f(entry);
        if before != entry.blind_spots(None) {
            self.changed.notify_one();
        }
        crate::metrics::set_target_watch_up(target, entry.stale_reason(None).is_none());
        crate::metrics::set_target_detection(
            target,
            entry.blind_spots(None).is_empty(),
            entry.skipped.len(),
        );
        if let Some(at) = entry.last_list {
            crate::metrics::set_target_last_list(target, at.as_second());
        }
    }

    /// A watcher (re)starts for `target`, for rulesets feeding `feeds`. A restart (its rulesets
    /// changed) keeps what was known: the previous streams stay as they were until the new
    /// watcher reports, so a ruleset added elsewhere does not make every answer look stale.
    pub(super) fn watching(&self, target: &Target, feeds: Option<BTreeSet<String>>) {
        let mut targets = self.targets.lock();
        let entry = targets.entry(target.clone()).or_insert_with(Entry::new);
        entry.feeds = feeds;
        crate::metrics::set_target_watch_up(target, entry.stale_reason(None).is_none());
        self.changed.notify_one();
    }

    /// The rulesets watching `target` (see [`TargetHealth::watching`]) reach the gates of
    /// `reach`, each its own.
    pub(super) fn reaches(&self, target: &Target, reach: BTreeMap<String, Reach>) {
        let mut targets = self.targets.lock();
        if let Some(entry) = targets.get_mut(target)
            && entry.reach.as_ref() != Some(&reach)
        {
            entry.reach = Some(reach);
            self.changed.notify_one();
        }
    }

    /// No ruleset targets `target` any more.
    pub(super) fn forget(&self, target: &Target) {
        self.targets.lock().remove(target);
        crate::metrics::forget_target(target);
        self.changed.notify_one();
    }

    /// The rulesets that do not compile whose reach passes `filter`.
    fn invalid_reaching(&self, filter: impl Fn(&Reach) -> bool) -> Vec<Stale> {
        self.invalid
            .lock()
            .iter()
            .filter(|(_, i)| filter(&i.reach))
            .map(|(ruleset, i)| Stale {
                target: i.target.clone(),
                reason: Blind::Invalid {
                    ruleset: ruleset.clone(),
                    error: i.error.clone(),
                },
            })
            .collect()
    }

    /// The rulesets known not to compile.
    pub(super) fn invalid_rulesets(&self) -> Vec<String> {
        self.invalid.lock().keys().cloned().collect()
    }

    /// `ruleset`, of `target` and reaching `reach`, does not compile (`error`): none of its
    /// rules run until a new generation of it does.
    pub(super) fn invalid(&self, ruleset: &str, target: Target, reach: Reach, error: String) {
        self.invalid.lock().insert(
            ruleset.to_owned(),
            InvalidRuleSet {
                target,
                reach,
                error,
            },
        );
        self.changed.notify_one();
    }

    /// Tells `index` whenever what [`TargetHealth::stale`] answers, or the initial sync, may
    /// have changed, so that the maintenance gates that depend on it change at a
    /// resourceVersion like everything else. Runs for as long as the server.
    ///
    /// The first change after a quiet while is told after [`REPORT_COALESCE`] (a gate must
    /// turn Unknown quickly); what changes within a second of the last report is told together
    /// when the second has passed ([`Index::feeds_change_due`]), so that an object whose skip
    /// mark flips all the time costs the gate watches about one event a second.
    pub(super) async fn report_to(&self, feeds: FeedsClock, readiness: Readiness) {
        loop {
            let synced = readiness.is_synced();
            tokio::select! {
                _ = self.changed.notified() => {}
                _ = readiness.synced(), if !synced => {}
            }
            // A burst (every target listed at start) is one change.
            tokio::time::sleep(REPORT_COALESCE).await;
            feeds.change_due().await;
            // What changed while waiting is told now, not once more after.
            let _ = futures::FutureExt::now_or_never(self.changed.notified());
            feeds.feeds_changed(readiness.is_synced() && self.stale(None).is_empty());
        }
    }

    /// The API server does not serve `target` (its CRD is not installed).
    pub(super) fn not_served(&self, target: &Target) {
        self.update(target, |e| e.resolution = Resolution::NotServed);
    }

    /// Discovery of `target` failed.
    pub(super) fn unresolved(&self, target: &Target, reason: String) {
        self.update(target, |e| e.resolution = Resolution::Failed(reason));
    }

    /// Discovery found `target`; it is watched through `streams`.
    pub(super) fn resolved(&self, target: &Target, namespaced: bool, streams: &[Stream]) {
        self.update(target, |e| {
            e.resolution = Resolution::Resolved { namespaced };
            let old = std::mem::take(&mut e.streams);
            e.streams = streams
                .iter()
                .map(|s| {
                    (
                        s.clone(),
                        old.get(s).cloned().unwrap_or(StreamState::Starting),
                    )
                })
                .collect();
            e.stalled.retain(|s, _| streams.contains(s));
        });
    }

    /// A list of `stream` completed: it is current.
    pub(super) fn listed(&self, target: &Target, stream: &Stream, at: Timestamp) {
        self.update(target, |e| {
            e.streams.insert(stream.clone(), StreamState::Watching);
            e.last_list = Some(at);
        });
    }

    /// Listing or watching `stream` failed: it is not current until a list completes again.
    pub(super) fn failed(&self, target: &Target, stream: &Stream, reason: String) {
        self.update(target, |e| {
            e.streams
                .insert(stream.clone(), StreamState::Failing(reason));
        });
    }

    /// A liveness probe of `stream` failed (`Some`) or succeeded (`None`). A watch can stall
    /// without an error (etcd down: kube-apiserver keeps the watch open and silent).
    pub(super) fn probed(&self, target: &Target, stream: &Stream, failure: Option<String>) {
        self.update(target, |e| match failure {
            Some(reason) => {
                e.stalled.insert(stream.clone(), reason);
            }
            None => {
                e.stalled.remove(stream);
            }
        });
    }

    /// `ruleset` of `target` is suspended in `namespace` (`None`: for cluster-scoped
    /// subjects): its rules no longer run there.
    pub(super) fn suspended(&self, target: &Target, ruleset: &str, namespace: Option<&str>) {
        self.update(target, |e| {
            e.suspended
                .insert((ruleset.to_owned(), namespace.map(str::to_owned)));
        });
    }

    /// `ruleset` of `target`, covering `namespaces`, dropped events: what they said is missing
    /// until the watcher's next complete list ([`TargetHealth::relisted`]).
    pub(super) fn dropped_events(&self, target: &Target, ruleset: &str, namespaces: Namespaces) {
        self.update(target, |e| {
            e.dropped.insert(ruleset.to_owned(), namespaces);
        });
    }

    /// Every stream of `target` completed a list started after its rulesets last dropped
    /// events: nothing is missing any more.
    pub(super) fn relisted(&self, target: &Target) {
        self.update(target, |e| e.dropped.clear());
    }

    /// `ruleset` of `target` lags in `namespace` (`None`: on cluster-scoped objects), its
    /// late changes covering `covered` and on `nodes` (where known), by `lag`, over `bound`
    /// (`Some`); or no longer does there (`None`): its detection there is not current
    /// meanwhile.
    pub(super) fn lagging(
        &self,
        target: &Target,
        (ruleset, namespace): (&str, Option<&str>),
        covered: Namespaces,
        lag: Option<LagSaid>,
    ) {
        let key = (ruleset.to_owned(), namespace.map(str::to_owned));
        self.update(target, |e| match lag {
            Some(LagSaid { lag, bound, nodes }) => {
                e.lagging.insert(
                    key,
                    Lag {
                        covered,
                        nodes,
                        lag,
                        bound,
                    },
                );
            }
            None => {
                e.lagging.remove(&key);
            }
        });
    }

    /// Object `uid` (`object`: `namespace/name`, in `namespace`) of `target` is not evaluated,
    /// by `ruleset` alone (over its budget, or a rule fails on it) or, for `None`, at all (it
    /// cannot be decoded). `nodes`: the nodes it is on, where known. False, and nothing
    /// recorded, when the object was deleted meanwhile (an evaluation still queued when its
    /// deletion was read) or the target is no longer watched.
    pub(super) fn skipped(
        &self,
        target: &Target,
        (uid, ruleset): (&str, Option<&str>),
        namespace: Option<&str>,
        (object, nodes): (String, Option<BTreeSet<String>>),
        why: String,
    ) -> bool {
        let mut recorded = false;
        self.update(target, |e| {
            if e.gone.contains(uid) {
                return;
            }
            recorded = true;
            e.skipped.insert(
                (uid.to_owned(), ruleset.map(str::to_owned)),
                SkippedObject {
                    namespace: namespace.map(str::to_owned),
                    object,
                    why,
                    nodes,
                },
            );
        });
        recorded
    }

    /// Object `uid` of `target` was evaluated by `ruleset` (`None`: it was decoded) again.
    pub(super) fn evaluated(&self, target: &Target, uid: &str, ruleset: Option<&str>) {
        let key = (uid.to_owned(), ruleset.map(str::to_owned));
        let known = self
            .targets
            .lock()
            .get(target)
            .is_some_and(|e| e.skipped.contains_key(&key));
        // Checked first: this runs on every evaluation, and updating refreshes the metrics.
        if known {
            self.update(target, |e| {
                e.skipped.remove(&key);
            });
        }
    }

    /// Object `uid` of `target` was deleted: its skip marks go, and so does what is still
    /// learned of it (see [`MAX_TOMBSTONES`]).
    pub(super) fn object_gone(&self, target: &Target, uid: &str) {
        self.update(target, |e| {
            e.skipped.retain(|(u, _), _| u != uid);
            e.gone.insert(uid);
        });
    }

    /// A list of `stream` of `target` saw exactly the objects `present` (by uid): skipped
    /// objects of that stream not among them are gone.
    pub(super) fn keep_skipped(&self, target: &Target, stream: &Stream, present: &HashSet<String>) {
        self.update(target, |e| {
            e.skipped.retain(|(uid, _), o| {
                let in_stream = stream.is_none() || o.namespace == *stream;
                !in_stream || present.contains(uid)
            });
        });
    }

    /// A ruleset was reloaded (a new generation) or deleted: it is no longer suspended nor
    /// invalid, and what was skipped for it is forgotten.
    pub(super) fn ruleset_reset(&self, ruleset: &str) {
        if self.invalid.lock().remove(ruleset).is_some() {
            self.changed.notify_one();
        }
        let targets: Vec<Target> = self.targets.lock().keys().cloned().collect();
        for target in targets {
            self.update(&target, |e| {
                e.suspended.retain(|(r, _)| r != ruleset);
                e.dropped.remove(ruleset);
                e.lagging.retain(|(r, _), _| r != ruleset);
                e.skipped.retain(|(_, r), _| r.as_deref() != Some(ruleset));
            });
        }
    }

    /// Where detection feeding operations in `namespace` (`None`: anywhere, cluster-scoped
    /// subjects included) is not current, and why: every target, every reason. Empty when the
    /// answer is complete. Read-only, one lock held briefly: what the API tells clients along
    /// with an answer, and what a maintenance gate needs to answer Unknown.
    pub(super) fn stale(&self, namespace: Option<&str>) -> Vec<Stale> {
        let mut out: Vec<Stale> = {
            let targets = self.targets.lock();
            targets
                .iter()
                .filter(|(_, e)| namespace.is_none_or(|ns| e.feeds(ns)))
                .flat_map(|(target, e)| {
                    e.blind_spots(namespace).into_iter().map(|reason| Stale {
                        target: target.clone(),
                        reason,
                    })
                })
                .collect()
        };
        out.extend(self.invalid_reaching(|reach| covers(&reach.namespaces, namespace)));
        out
    }
}
