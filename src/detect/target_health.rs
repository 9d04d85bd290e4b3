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

use crate::ruleset::{CompiledRuleSet, RuleSetSpec, Target};
use jiff::Timestamp;
use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::index::{GateScope, Index};
use crate::readiness::Readiness;

/// How long [`TargetHealth::report_to`] gathers changes before it reports them.
const REPORT_COALESCE: Duration = Duration::from_millis(100);

/// Most skipped objects named per target and query (the rest are counted in the metrics and on
/// the rulesets).
const MAX_SKIPPED_NAMED: usize = 5;

/// Deleted objects a target remembers, by uid (the latest): an evaluation of one still queued
/// on a lane when its deletion was read must not mark it skipped again (a ghost that blinded its
/// gates until the ruleset changed). The lane's own deletion, in order after that evaluation,
/// clears its marks too ([`super::Health::deleted`]); this only keeps them from showing
/// meanwhile, so older tombstones may go. About 100 KB per target at most.
const MAX_TOMBSTONES: usize = 1024;

/// Namespaces a ruleset covers; `None`: every namespace.
pub type Namespaces = Option<BTreeSet<String>>;

/// The latest deleted objects of a target, by uid, at most [`MAX_TOMBSTONES`] (uids are never
/// reused, so remembering one too long is harmless).
#[derive(Debug, Default)]
struct Tombstones {
    order: std::collections::VecDeque<Arc<str>>,
    uids: HashSet<Arc<str>>,
}

impl Tombstones {
    fn insert(&mut self, uid: &str) {
        let uid: Arc<str> = uid.into();
        if !self.uids.insert(uid.clone()) {
            return;
        }
        self.order.push_back(uid);
        if self.order.len() > MAX_TOMBSTONES
            && let Some(oldest) = self.order.pop_front()
        {
            self.uids.remove(&oldest);
        }
    }

    fn contains(&self, uid: &str) -> bool {
        self.uids.contains(uid)
    }
}

/// Why detection in part of a target is not current.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Blind {
    /// Its watch is not current (starting, failing or stalled): nothing of it is seen.
    NotWatched(String),
    /// A ruleset of it is suspended in a namespace: its rules do not run there.
    Suspended {
        /// The ruleset.
        ruleset: String,
        /// The namespace; `None`: cluster-scoped subjects.
        namespace: Option<String>,
    },
    /// A ruleset's evaluation fell behind and dropped events; the target is listed again.
    DroppedEvents {
        /// The ruleset.
        ruleset: String,
    },
    /// A ruleset's evaluation lags: the oldest event its lane holds has waited longer than the
    /// bound. Nothing is lost; what changed since is seen once evaluation catches up.
    Lagging {
        /// The ruleset.
        ruleset: String,
        /// How long that event had waited when this was last said (whole seconds, at least
        /// `bound`).
        lag: Duration,
        /// The bound (`EVALUATION_LAG_BOUND`).
        bound: Duration,
    },
    /// One object is not evaluated.
    Skipped {
        /// `namespace/name` of the object.
        object: String,
        /// Why (it cannot be decoded, a ruleset went over its budget on it, or a rule fails on
        /// it), with the remedy.
        why: String,
    },
    /// A ruleset does not compile: none of its rules run.
    Invalid {
        /// The ruleset.
        ruleset: String,
        /// Its first problem.
        error: String,
    },
}

/// Reads as the rest of a sentence whose subject is the target.
impl fmt::Display for Blind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Blind::NotWatched(reason) => write!(f, "{}{reason}", ifo_model::NOT_WATCHED),
            Blind::Suspended { ruleset, namespace } => {
                let place = match namespace {
                    Some(ns) => format!("in namespace {ns}"),
                    None => "for cluster-scoped objects".to_owned(),
                };
                write!(
                    f,
                    "is not evaluated by ruleset {ruleset}: it is suspended {place} (it kept going over its evaluation budget there); make its rules cheaper or the objects there smaller (any change to its spec resumes it)"
                )
            }
            Blind::DroppedEvents { ruleset } => write!(
                f,
                "lost events of ruleset {ruleset} (its evaluation fell behind); listing it again"
            ),
            Blind::Lagging {
                ruleset,
                lag,
                bound,
            } => write!(
                f,
                "is evaluated late by ruleset {ruleset}: its oldest event not yet evaluated has waited over {} (EVALUATION_LAG_BOUND: {}), so what changed since is not seen yet; make the ruleset's rules cheaper, or find what changes its objects so often (ifo_evaluation_lag_seconds, ifo_object_events_total)",
                seconds(*lag),
                seconds(*bound),
            ),
            Blind::Skipped { object, why } => write!(f, "object {object} is skipped: {why}"),
            Blind::Invalid { ruleset, error } => write!(
                f,
                "is not evaluated by ruleset {ruleset}: its rules do not compile ({error}); fix the ruleset (kubectl describe ors {ruleset})"
            ),
        }
    }
}

/// `d` as a setting writes it: `5s`, `2.5s`, `500ms`.
fn seconds(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// A ruleset whose evaluation lags (see [`Blind::Lagging`]).
#[derive(Clone, Debug)]
struct Lag {
    /// The namespaces it covers.
    covered: Namespaces,
    lag: Duration,
    bound: Duration,
}

/// An object that is not evaluated.
#[derive(Clone, Debug)]
struct SkippedObject {
    namespace: Option<String>,
    object: String,
    why: String,
    /// The nodes its operations would be labelled with (as the index keys node gates); `None`
    /// when they cannot be known: then it may be on any node.
    nodes: Option<BTreeSet<String>>,
}

impl SkippedObject {
    /// Whether what it hides can be in the gate of `scope`, for a ruleset that reaches it.
    fn may_be_in(&self, scope: &GateScope) -> bool {
        match scope {
            GateScope::Node(node) => self.nodes.as_ref().is_none_or(|n| n.contains(node)),
            GateScope::Namespace(ns) => self.namespace.as_deref() == Some(ns.as_str()),
            GateScope::Cluster | GateScope::Component(_) => true,
        }
    }
}

/// Whether a ruleset covering `covered` matters to a question about `namespace`.
fn covers(covered: &Namespaces, namespace: Option<&str>) -> bool {
    match (covered, namespace) {
        (Some(set), Some(ns)) => set.contains(ns),
        _ => true,
    }
}

/// A namespace stream of a target: `Some(ns)` when its rulesets only watch some namespaces,
/// `None` for the one stream across all namespaces (or of a cluster-scoped target).
pub type Stream = Option<String>;

#[derive(Clone, Debug, PartialEq, Eq)]
enum StreamState {
    /// Its first list has not completed.
    Starting,
    /// Its latest list completed, and the watch has not failed since.
    Watching,
    /// Listing or watching failed; the watcher is retrying.
    Failing(String),
}

/// What discovery said about a target.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Resolution {
    /// Not asked yet.
    Pending,
    /// The API server does not serve it: there is nothing to watch, so nothing is missed (a
    /// ruleset for software not installed here is not a reason to doubt every answer).
    NotServed,
    /// Discovery failed: whether there is anything to watch is unknown.
    Failed(String),
    Resolved {
        namespaced: bool,
    },
}

/// Which maintenance gates one ruleset can put operations in: the cluster's, its component's,
/// those of the namespaces it covers and, when it labels operations with a node, every node's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reach {
    /// Its component.
    pub component: String,
    /// Whether it labels the node (or the migration target) of an operation, statically or by
    /// an expression.
    pub nodes: bool,
    /// The namespaces it covers; `None`: every one (and cluster-scoped subjects).
    pub namespaces: Namespaces,
}

/// Whether labels with these keys can name a node.
fn names_nodes<'a>(mut keys: impl Iterator<Item = &'a str>) -> bool {
    keys.any(|k| k == ifo_model::NODE_LABEL || k == ifo_model::TARGET_NODE_LABEL)
}

impl Reach {
    /// The reach of a loaded ruleset (its related parts' labels are its operations' too; a
    /// part's own reach is that of its label expressions).
    pub fn of(rs: &CompiledRuleSet) -> Reach {
        Reach {
            component: rs.info.component.clone(),
            nodes: names_nodes(
                rs.info
                    .labels
                    .keys()
                    .map(String::as_str)
                    .chain(rs.exprs.label_expressions.iter().map(|(k, _)| k.as_str()))
                    .chain(
                        rs.related.iter().flat_map(|p| {
                            p.exprs.label_expressions.iter().map(|(k, _)| k.as_str())
                        }),
                    ),
            ),
            namespaces: (!rs.namespaces.is_empty())
                .then(|| rs.namespaces.iter().cloned().collect()),
        }
    }

    /// The reach a ruleset would have, read from its spec alone (it does not compile).
    pub fn of_spec(spec: &RuleSetSpec) -> Reach {
        Reach {
            component: spec.component.clone(),
            nodes: names_nodes(
                spec.labels
                    .keys()
                    .map(String::as_str)
                    .chain(spec.label_expressions.iter().map(|l| l.key.as_str()))
                    .chain(
                        spec.related
                            .iter()
                            .flat_map(|r| r.label_expressions.iter().map(|l| l.key.as_str())),
                    ),
            ),
            namespaces: (!spec.namespaces.is_empty())
                .then(|| spec.namespaces.iter().cloned().collect()),
        }
    }

    /// Whether the ruleset can put an operation in the gate of `scope`.
    fn reaches(&self, scope: &GateScope) -> bool {
        match scope {
            GateScope::Cluster => true,
            GateScope::Node(_) => self.nodes,
            GateScope::Component(c) => self.component == *c,
            GateScope::Namespace(ns) => covers(&self.namespaces, Some(ns)),
        }
    }
}

/// A ruleset that does not compile.
#[derive(Debug, Clone)]
struct InvalidRuleSet {
    target: Target,
    reach: Reach,
    error: String,
}

#[derive(Debug)]
struct Entry {
    /// Namespaces whose operations this target's rulesets produce; `None`: any (cluster-scoped
    /// subjects included).
    feeds: Option<BTreeSet<String>>,
    /// The gates each of its rulesets feeds, by ruleset; `None` (not said): every one.
    reach: Option<BTreeMap<String, Reach>>,
    resolution: Resolution,
    streams: BTreeMap<Stream, StreamState>,
    /// The last failed liveness probe of a stream whose watch looks fine (a stalled watch).
    stalled: BTreeMap<Stream, String>,
    last_list: Option<Timestamp>,
    /// Suspended rulesets of this target, and where (a namespace; `None`: cluster-scoped
    /// subjects).
    suspended: BTreeSet<(String, Option<String>)>,
    /// Rulesets whose lane dropped events since the watcher's latest complete list.
    dropped: BTreeMap<String, Namespaces>,
    /// Rulesets whose evaluation lags.
    lagging: BTreeMap<String, Lag>,
    /// Objects not evaluated, by uid and (for an over-budget evaluation) ruleset.
    skipped: BTreeMap<(String, Option<String>), SkippedObject>,
    /// Objects deleted lately: what is still learned of them is ignored.
    gone: Tombstones,
}

impl Lag {
    fn blind(&self, ruleset: &str) -> Blind {
        Blind::Lagging {
            ruleset: ruleset.to_owned(),
            lag: self.lag,
            bound: self.bound,
        }
    }
}

impl Entry {
    /// Every reason why the part of this target feeding `namespace` (`None`: every part) is
    /// not current.
    fn blind_spots(&self, namespace: Option<&str>) -> Vec<Blind> {
        let mut out: Vec<Blind> = self
            .stale_reason(namespace)
            .map(Blind::NotWatched)
            .into_iter()
            .collect();
        if self.resolution == Resolution::NotServed {
            return out;
        }
        out.extend(
            self.suspended
                .iter()
                .filter(|(_, place)| namespace.is_none_or(|ns| place.as_deref() == Some(ns)))
                .map(|(ruleset, place)| Blind::Suspended {
                    ruleset: ruleset.clone(),
                    namespace: place.clone(),
                }),
        );
        out.extend(
            self.dropped
                .iter()
                .filter(|(_, covered)| covers(covered, namespace))
                .map(|(ruleset, _)| Blind::DroppedEvents {
                    ruleset: ruleset.clone(),
                }),
        );
        out.extend(
            self.lagging
                .iter()
                .filter(|(_, lag)| covers(&lag.covered, namespace))
                .map(|(ruleset, lag)| lag.blind(ruleset)),
        );
        out.extend(
            self.skipped
                .values()
                .filter(|o| namespace.is_none_or(|ns| o.namespace.as_deref() == Some(ns)))
                .take(MAX_SKIPPED_NAMED)
                .map(|o| Blind::Skipped {
                    object: o.object.clone(),
                    why: o.why.clone(),
                }),
        );
        out
    }

    /// Whether `ruleset` (`None`: any of this target's) can put an operation in the gate of
    /// `scope`. A ruleset the entry has no reach for counts as reaching every gate.
    fn reaches(&self, ruleset: Option<&str>, scope: &GateScope) -> bool {
        let Some(reach) = &self.reach else {
            return true;
        };
        match ruleset {
            Some(name) => reach.get(name).is_none_or(|r| r.reaches(scope)),
            None => reach.values().any(|r| r.reaches(scope)),
        }
    }

    /// Every reason why this target may hide an operation in the gate of `scope`: any blind
    /// spot of a ruleset that reaches it, unless the blind spot is known to be elsewhere.
    fn blind_for_gate(&self, scope: &GateScope) -> Vec<Blind> {
        let mut out = Vec::new();
        let namespace = match scope {
            GateScope::Namespace(ns) => Some(ns.as_str()),
            _ => None,
        };
        if self.reaches(None, scope)
            && let Some(reason) = self.stale_reason(namespace)
        {
            out.push(Blind::NotWatched(reason));
        }
        if self.resolution == Resolution::NotServed {
            return out;
        }
        let applies = |ruleset: &str, covered: &Namespaces| {
            self.reaches(Some(ruleset), scope)
                && match scope {
                    GateScope::Namespace(ns) => covers(covered, Some(ns)),
                    _ => true,
                }
        };
        // Not node gates: what changes in a suspended namespace is skipped with its nodes.
        out.extend(
            self.suspended
                .iter()
                .filter(|(ruleset, place)| {
                    self.reaches(Some(ruleset), scope)
                        && match scope {
                            GateScope::Node(_) => false,
                            GateScope::Namespace(ns) => place.as_deref() == Some(ns.as_str()),
                            GateScope::Cluster | GateScope::Component(_) => true,
                        }
                })
                .map(|(ruleset, place)| Blind::Suspended {
                    ruleset: ruleset.clone(),
                    namespace: place.clone(),
                }),
        );
        out.extend(
            self.dropped
                .iter()
                .filter(|(ruleset, covered)| applies(ruleset, covered))
                .map(|(ruleset, _)| Blind::DroppedEvents {
                    ruleset: ruleset.clone(),
                }),
        );
        out.extend(
            self.lagging
                .iter()
                .filter(|(ruleset, lag)| applies(ruleset, &lag.covered))
                .map(|(ruleset, lag)| lag.blind(ruleset)),
        );
        out.extend(
            self.skipped
                .iter()
                .filter(|((_, ruleset), o)| {
                    o.may_be_in(scope) && self.skipper_reaches(ruleset.as_deref(), o, scope)
                })
                .take(MAX_SKIPPED_NAMED)
                .map(|(_, o)| Blind::Skipped {
                    object: o.object.clone(),
                    why: o.why.clone(),
                }),
        );
        out
    }

    /// Whether the ruleset that skips `object` (`None`: it cannot be decoded, so every ruleset
    /// of the target that applies to its namespace) can put an operation in the gate of `scope`.
    fn skipper_reaches(
        &self,
        ruleset: Option<&str>,
        object: &SkippedObject,
        scope: &GateScope,
    ) -> bool {
        match (ruleset, &self.reach) {
            (Some(_), _) | (None, None) => self.reaches(ruleset, scope),
            (None, Some(reach)) => reach
                .values()
                .any(|r| r.reaches(scope) && covers(&r.namespaces, object.namespace.as_deref())),
        }
    }

    /// Why the part of this target feeding `namespace` (`None`: every part) is not current.
    fn stale_reason(&self, namespace: Option<&str>) -> Option<String> {
        match &self.resolution {
            Resolution::Pending => return Some(ifo_model::FIRST_LIST_PENDING.into()),
            Resolution::NotServed => return None,
            Resolution::Failed(reason) => return Some(reason.clone()),
            Resolution::Resolved { .. } => {}
        }
        let relevant = |stream: &Stream| match (namespace, stream) {
            (Some(ns), Some(s)) => s == ns,
            _ => true,
        };
        for (stream, state) in self.streams.iter().filter(|(s, _)| relevant(s)) {
            let reason = match state {
                StreamState::Watching => match self.stalled.get(stream) {
                    Some(reason) => reason.clone(),
                    None => continue,
                },
                StreamState::Starting => ifo_model::FIRST_LIST_PENDING.into(),
                StreamState::Failing(reason) => reason.clone(),
            };
            return Some(match stream {
                Some(ns) => format!("in namespace {ns}: {reason}"),
                None => reason,
            });
        }
        None
    }

    fn feeds(&self, namespace: &str) -> bool {
        self.feeds
            .as_ref()
            .is_none_or(|set| set.contains(namespace))
            && self.resolution != (Resolution::Resolved { namespaced: false })
    }
}

/// A target whose detection is not current, and why (one per reason).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stale {
    /// The target.
    pub target: Target,
    /// Why.
    pub reason: Blind,
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
        let entry = targets.entry(target.clone()).or_insert_with(|| Entry {
            feeds: None,
            reach: None,
            resolution: Resolution::Pending,
            streams: BTreeMap::new(),
            stalled: BTreeMap::new(),
            last_list: None,
            suspended: BTreeSet::new(),
            dropped: BTreeMap::new(),
            lagging: BTreeMap::new(),
            skipped: BTreeMap::new(),
            gone: Tombstones::default(),
        });
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

    /// The targets that may hide an operation in the maintenance gate of `scope`, and why:
    /// every blind spot of a ruleset that can put an operation in it (see [`Reach`]), and every
    /// ruleset reaching it that does not compile.
    pub(super) fn stale_for_gate(&self, scope: &GateScope) -> Vec<Stale> {
        let mut out: Vec<Stale> = {
            let targets = self.targets.lock();
            targets
                .iter()
                .filter(|(_, e)| match scope {
                    GateScope::Namespace(ns) => e.feeds(ns),
                    _ => true,
                })
                .flat_map(|(target, e)| {
                    e.blind_for_gate(scope).into_iter().map(|reason| Stale {
                        target: target.clone(),
                        reason,
                    })
                })
                .collect()
        };
        out.extend(self.invalid_reaching(|reach| reach.reaches(scope)));
        out
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

    /// Whether a ruleset the server knows of declares `component` (its gate exists).
    pub(super) fn declares_component(&self, component: &str) -> bool {
        self.targets.lock().values().any(|e| {
            e.reach
                .as_ref()
                .is_some_and(|r| r.values().any(|r| r.component == component))
        }) || self
            .invalid
            .lock()
            .values()
            .any(|i| i.reach.component == component)
    }

    /// Tells `index` whenever what [`TargetHealth::stale`] answers, or the initial sync, may
    /// have changed, so that the maintenance gates that depend on it change at a
    /// resourceVersion like everything else. Runs for as long as the server.
    ///
    /// The first change after a quiet while is told after [`REPORT_COALESCE`] (a gate must
    /// turn Unknown quickly); what changes within a second of the last report is told together
    /// when the second has passed ([`Index::feeds_change_due`]), so that an object whose skip
    /// mark flips all the time costs the gate watches about one event a second.
    pub(super) async fn report_to(&self, index: Arc<Index>, readiness: Readiness) {
        loop {
            let synced = readiness.is_synced();
            tokio::select! {
                _ = self.changed.notified() => {}
                _ = readiness.synced(), if !synced => {}
            }
            // A burst (every target listed at start) is one change.
            tokio::time::sleep(REPORT_COALESCE).await;
            index.feeds_change_due().await;
            // What changed while waiting is told now, not once more after.
            let _ = futures::FutureExt::now_or_never(self.changed.notified());
            index.feeds_changed(readiness.is_synced() && self.stale(None).is_empty());
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

    /// `ruleset` of `target`, covering `namespaces`, lags by `lag`, over `bound` (`Some`), or
    /// no longer does (`None`): its detection there is not current meanwhile.
    pub(super) fn lagging(
        &self,
        target: &Target,
        ruleset: &str,
        namespaces: Namespaces,
        lag: Option<(Duration, Duration)>,
    ) {
        self.update(target, |e| match lag {
            Some((lag, bound)) => {
                e.lagging.insert(
                    ruleset.to_owned(),
                    Lag {
                        covered: namespaces,
                        lag,
                        bound,
                    },
                );
            }
            None => {
                e.lagging.remove(ruleset);
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
                e.lagging.remove(ruleset);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn target(resource: &str) -> Target {
        Target {
            group: "example.com".into(),
            version: "v1".into(),
            resource: resource.into(),
        }
    }

    fn ns(s: &str) -> Stream {
        Some(s.to_string())
    }

    fn reasons(h: &TargetHealth, namespace: Option<&str>) -> Vec<String> {
        h.stale(namespace)
            .into_iter()
            .map(|s| match s.reason {
                Blind::NotWatched(reason) => format!("{}: {reason}", s.target.resource),
                other => format!("{}: {other}", s.target.resource),
            })
            .collect()
    }

    #[test]
    fn a_target_is_stale_until_its_first_list_completes() {
        let h = TargetHealth::default();
        let t = target("things");
        h.watching(&t, None);
        assert_eq!(
            reasons(&h, None),
            ["things: its first list has not completed"]
        );
        h.resolved(&t, true, &[None]);
        assert_eq!(reasons(&h, Some("a")).len(), 1);
        h.listed(&t, &None, Timestamp::UNIX_EPOCH);
        assert!(reasons(&h, None).is_empty());
        assert!(reasons(&h, Some("a")).is_empty());
    }

    #[test]
    fn a_failure_makes_it_stale_until_a_list_completes_again() {
        let h = TargetHealth::default();
        let t = target("things");
        h.watching(&t, None);
        h.resolved(&t, true, &[None]);
        h.listed(&t, &None, Timestamp::UNIX_EPOCH);
        h.failed(&t, &None, "forbidden".into());
        assert_eq!(reasons(&h, Some("a")), ["things: forbidden"]);
        h.listed(&t, &None, Timestamp::UNIX_EPOCH);
        assert!(reasons(&h, None).is_empty());
    }

    #[test]
    fn a_failed_probe_marks_a_silent_watch_stale() {
        let h = TargetHealth::default();
        let t = target("things");
        h.watching(&t, None);
        h.resolved(&t, true, &[None]);
        h.listed(&t, &None, Timestamp::UNIX_EPOCH);
        h.probed(&t, &None, Some("listing did not answer within 10s".into()));
        assert_eq!(
            reasons(&h, None),
            ["things: listing did not answer within 10s"]
        );
        h.probed(&t, &None, None);
        assert!(reasons(&h, None).is_empty());
    }

    #[test]
    fn only_targets_feeding_the_namespace_count() {
        let h = TargetHealth::default();
        let t = target("things");
        h.watching(&t, Some(["a".to_string(), "b".to_string()].into()));
        h.resolved(&t, true, &[ns("a"), ns("b")]);
        h.listed(&t, &ns("a"), Timestamp::UNIX_EPOCH);
        h.failed(&t, &ns("b"), "forbidden".into());
        assert!(reasons(&h, Some("a")).is_empty());
        assert!(reasons(&h, Some("c")).is_empty());
        assert_eq!(
            reasons(&h, Some("b")),
            ["things: in namespace b: forbidden"]
        );
        assert_eq!(reasons(&h, None), ["things: in namespace b: forbidden"]);
    }

    #[test]
    fn a_cluster_scoped_target_does_not_feed_namespaces() {
        let h = TargetHealth::default();
        let t = target("nodes");
        h.watching(&t, None);
        h.resolved(&t, false, &[None]);
        h.failed(&t, &None, "forbidden".into());
        assert!(reasons(&h, Some("a")).is_empty());
        assert_eq!(reasons(&h, None), ["nodes: forbidden"]);
    }

    #[test]
    fn a_restart_keeps_what_was_known_and_forget_drops_it() {
        let h = TargetHealth::default();
        let t = target("things");
        h.watching(&t, None);
        h.resolved(&t, true, &[None]);
        h.listed(&t, &None, Timestamp::UNIX_EPOCH);
        h.watching(&t, None);
        h.resolved(&t, true, &[None]);
        assert!(reasons(&h, None).is_empty());
        h.failed(&t, &None, "gone".into());
        h.forget(&t);
        assert!(reasons(&h, None).is_empty());
        // Reports of a watcher being stopped change nothing once it is forgotten.
        h.failed(&t, &None, "late".into());
        assert!(reasons(&h, None).is_empty());
    }

    fn reach(component: &str, nodes: bool, namespaces: &[&str]) -> Reach {
        Reach {
            component: component.into(),
            nodes,
            namespaces: (!namespaces.is_empty())
                .then(|| namespaces.iter().map(|n| n.to_string()).collect()),
        }
    }

    fn gate_reasons(h: &TargetHealth, scope: &GateScope) -> Vec<String> {
        h.stale_for_gate(scope)
            .into_iter()
            .map(|s| format!("{}: {}", s.target.resource, s.reason))
            .collect()
    }

    fn node(n: &str) -> GateScope {
        GateScope::Node(n.into())
    }

    /// Two targets, current: `vms` (ruleset `vm-rules`, component kubevirt, labels nodes, in
    /// namespace a) and `pods` (ruleset `pod-rules`, component pods, no node label, anywhere).
    fn two_targets() -> (TargetHealth, Target, Target) {
        let h = TargetHealth::default();
        let (vms, pods) = (target("vms"), target("pods"));
        h.watching(&vms, Some(["a".to_string()].into()));
        h.watching(&pods, None);
        for t in [&vms, &pods] {
            h.resolved(t, true, &[None]);
            h.listed(t, &None, Timestamp::UNIX_EPOCH);
        }
        h.reaches(
            &vms,
            [("vm-rules".to_string(), reach("kubevirt", true, &["a"]))].into(),
        );
        h.reaches(
            &pods,
            [("pod-rules".to_string(), reach("pods", false, &[]))].into(),
        );
        (h, vms, pods)
    }

    #[test]
    fn gates_depend_on_the_targets_that_reach_them() {
        let h = TargetHealth::default();
        let (vms, pods) = (target("vms"), target("pods"));
        for t in [&vms, &pods] {
            h.watching(t, Some(["a".to_string()].into()));
            h.resolved(t, true, &[None]);
        }
        let names = |scope: &GateScope| -> Vec<String> {
            h.stale_for_gate(scope)
                .into_iter()
                .map(|s| s.target.resource)
                .collect()
        };
        let kubevirt = GateScope::Component("kubevirt".into());
        assert_eq!(names(&node("w1")), ["pods", "vms"], "unsaid: every gate");
        h.reaches(
            &vms,
            [("vm-rules".to_string(), reach("kubevirt", true, &["a"]))].into(),
        );
        h.reaches(
            &pods,
            [("pod-rules".to_string(), reach("pods", false, &["a"]))].into(),
        );
        assert_eq!(names(&node("w1")), ["vms"]);
        assert_eq!(names(&kubevirt), ["vms"]);
        assert!(names(&GateScope::Component("other".into())).is_empty());
        assert_eq!(names(&GateScope::Cluster), ["pods", "vms"]);
        assert!(names(&GateScope::Namespace("b".into())).is_empty());
        h.listed(&vms, &None, Timestamp::UNIX_EPOCH);
        assert!(names(&node("w1")).is_empty());
    }

    #[test]
    fn a_ruleset_suspended_in_a_namespace_blinds_that_namespace_and_not_the_nodes() {
        let (h, vms, pods) = two_targets();
        h.suspended(&vms, "vm-rules", Some("a"));
        let suspended = "vms: is not evaluated by ruleset vm-rules: it is suspended in namespace a (it kept going over its evaluation budget there); make its rules cheaper or the objects there smaller (any change to its spec resumes it)";
        for scope in [
            GateScope::Component("kubevirt".into()),
            GateScope::Namespace("a".into()),
            GateScope::Cluster,
        ] {
            assert_eq!(gate_reasons(&h, &scope), [suspended], "{scope}");
        }
        for scope in [
            GateScope::Component("pods".into()),
            GateScope::Namespace("b".into()),
            // What changes there is skipped with its nodes (`unevaluated`), not every node.
            node("w1"),
        ] {
            assert!(gate_reasons(&h, &scope).is_empty(), "{scope}");
        }
        assert!(reasons(&h, Some("b")).is_empty(), "reads of b do not warn");
        h.ruleset_reset("vm-rules");
        h.suspended(&pods, "pod-rules", Some("b"));
        assert!(gate_reasons(&h, &node("w1")).is_empty());
        assert_eq!(gate_reasons(&h, &GateScope::Namespace("b".into())).len(), 1);
        assert_eq!(
            gate_reasons(&h, &GateScope::Component("pods".into())).len(),
            1
        );
        h.ruleset_reset("pod-rules");
        h.dropped_events(&vms, "vm-rules", Some(["a".to_string()].into()));
        assert_eq!(gate_reasons(&h, &node("w9")).len(), 1, "dropped events");
    }

    #[test]
    fn a_skipped_object_blinds_the_gates_of_its_node_or_of_every_node_when_unknown() {
        let (h, vms, _) = two_targets();
        let on = |nodes: &[&str]| Some(nodes.iter().map(|n| n.to_string()).collect());
        h.skipped(
            &vms,
            ("u1", Some("vm-rules")),
            Some("a"),
            ("a/vm-1".into(), on(&["w1", "w2"])),
            "over".into(),
        );
        assert_eq!(
            gate_reasons(&h, &node("w1")),
            ["vms: object a/vm-1 is skipped: over"]
        );
        assert_eq!(
            gate_reasons(&h, &node("w2")).len(),
            1,
            "a migration's target"
        );
        assert!(
            gate_reasons(&h, &node("w3")).is_empty(),
            "known to be elsewhere"
        );
        assert_eq!(gate_reasons(&h, &GateScope::Namespace("a".into())).len(), 1);
        assert!(gate_reasons(&h, &GateScope::Namespace("b".into())).is_empty());
        assert_eq!(
            gate_reasons(&h, &GateScope::Component("kubevirt".into())).len(),
            1
        );
        assert!(gate_reasons(&h, &GateScope::Component("pods".into())).is_empty());

        // Its node cannot be known (its node label failed): every node's gate.
        h.skipped(
            &vms,
            ("u2", Some("vm-rules")),
            Some("a"),
            ("a/vm-2".into(), None),
            "fails".into(),
        );
        assert_eq!(
            gate_reasons(&h, &node("w3")),
            ["vms: object a/vm-2 is skipped: fails"]
        );
        // Undecodable: by every ruleset of the target covering its namespace.
        h.evaluated(&vms, "u2", Some("vm-rules"));
        h.skipped(
            &vms,
            ("u3", None),
            Some("b"),
            ("b/x".into(), None),
            "deep".into(),
        );
        assert!(
            gate_reasons(&h, &node("w3")).is_empty(),
            "no ruleset covers b"
        );
        h.skipped(
            &vms,
            ("u4", None),
            Some("a"),
            ("a/x".into(), None),
            "deep".into(),
        );
        assert_eq!(
            gate_reasons(&h, &node("w3")),
            ["vms: object a/x is skipped: deep"]
        );
        h.object_gone(&vms, "u4");
        assert!(gate_reasons(&h, &node("w3")).is_empty());
    }

    #[test]
    fn a_ruleset_that_does_not_compile_blinds_what_it_would_reach() {
        let (h, vms, _) = two_targets();
        h.invalid(
            "broken",
            vms.clone(),
            reach("kubevirt", true, &["c"]),
            "rules[0] (Migrating).expression: undeclared reference".into(),
        );
        let broken = "vms: is not evaluated by ruleset broken: its rules do not compile (rules[0] (Migrating).expression: undeclared reference); fix the ruleset (kubectl describe ors broken)";
        assert_eq!(gate_reasons(&h, &node("w1")), [broken]);
        assert_eq!(
            gate_reasons(&h, &GateScope::Namespace("c".into())),
            [broken]
        );
        assert!(gate_reasons(&h, &GateScope::Namespace("a".into())).is_empty());
        assert!(gate_reasons(&h, &GateScope::Component("pods".into())).is_empty());
        assert_eq!(
            reasons(&h, Some("c")).len(),
            1,
            "reads of its namespace warn"
        );
        assert!(reasons(&h, Some("a")).is_empty());
        assert!(h.declares_component("kubevirt") && !h.declares_component("nothing"));
        h.ruleset_reset("broken");
        assert!(h.stale(None).is_empty());
        assert!(gate_reasons(&h, &node("w1")).is_empty());
    }

    #[test]
    fn a_failed_discovery_is_stale_but_an_unserved_target_is_not() {
        let h = TargetHealth::default();
        let t = target("things");
        h.watching(&t, None);
        h.unresolved(&t, "discovery failed: timeout".into());
        assert_eq!(reasons(&h, None), ["things: discovery failed: timeout"]);
        h.not_served(&t);
        assert!(reasons(&h, None).is_empty());
    }

    #[test]
    fn suspended_rulesets_dropped_events_and_skipped_objects_count_where_they_apply() {
        let h = TargetHealth::default();
        let t = target("things");
        h.watching(&t, None);
        h.resolved(&t, true, &[None]);
        h.listed(&t, &None, Timestamp::UNIX_EPOCH);
        assert!(h.stale(None).is_empty());

        h.suspended(&t, "costly", Some("a"));
        assert_eq!(
            reasons(&h, Some("a")),
            [
                "things: is not evaluated by ruleset costly: it is suspended in namespace a (it kept going over its evaluation budget there); make its rules cheaper or the objects there smaller (any change to its spec resumes it)"
            ]
        );
        assert!(reasons(&h, Some("b")).is_empty());
        h.ruleset_reset("costly");
        assert!(h.stale(None).is_empty());

        h.skipped(
            &t,
            ("u1", None),
            Some("b"),
            ("b/deep".into(), None),
            "it cannot be decoded: too deep".into(),
        );
        assert_eq!(
            reasons(&h, Some("b")),
            ["things: object b/deep is skipped: it cannot be decoded: too deep"]
        );
        assert!(reasons(&h, Some("a")).is_empty());
        assert_eq!(h.stale(None).len(), 1);
        h.evaluated(&t, "u1", None);
        assert!(h.stale(None).is_empty());
        h.skipped(
            &t,
            ("u2", Some("r")),
            Some("b"),
            ("b/big".into(), None),
            "over".into(),
        );
        h.keep_skipped(&t, &None, &HashSet::new());
        assert!(h.stale(None).is_empty(), "gone from a new list");

        h.dropped_events(&t, "busy", None);
        assert_eq!(
            reasons(&h, Some("z")),
            ["things: lost events of ruleset busy (its evaluation fell behind); listing it again"]
        );
        h.relisted(&t);
        assert!(h.stale(None).is_empty());

        // Late, not lost: only the lag coming back under the bound clears it, not a list.
        let (lag, bound) = (Duration::from_secs(12), Duration::from_secs(5));
        h.lagging(
            &t,
            "slow",
            Some(["a".to_string()].into()),
            Some((lag, bound)),
        );
        assert_eq!(
            reasons(&h, Some("a")),
            [
                "things: is evaluated late by ruleset slow: its oldest event not yet evaluated has waited over 12s (EVALUATION_LAG_BOUND: 5s), so what changed since is not seen yet; make the ruleset's rules cheaper, or find what changes its objects so often (ifo_evaluation_lag_seconds, ifo_object_events_total)"
            ]
        );
        assert!(
            reasons(&h, Some("b")).is_empty(),
            "a namespace it does not cover"
        );
        h.relisted(&t);
        assert_eq!(reasons(&h, Some("a")).len(), 1);
        h.lagging(&t, "slow", Some(["a".to_string()].into()), None);
        assert!(h.stale(None).is_empty());
    }

    /// A blind spot in the model of [`gates_are_never_clear_while_a_ruleset_reaching_them_is_blind`].
    #[derive(Clone, Debug)]
    enum Spot {
        /// The ruleset dropped events or does not compile.
        Whole(usize),
        /// The ruleset's evaluation lags.
        Lagging(usize),
        /// The ruleset is suspended in a namespace (what changes there is an `Object` spot).
        Suspended(usize, String),
        /// An object (`uid`) in namespace `ns` is skipped by the ruleset (`None`: undecodable),
        /// on `nodes` (`None`: unknown).
        Object {
            uid: String,
            ruleset: Option<usize>,
            ns: String,
            nodes: Option<BTreeSet<String>>,
        },
    }

    /// Random rulesets of one target, random blind spots coming and going: whenever the model
    /// holds a blind spot of a ruleset that can put an operation in a gate's scope (by the
    /// ruleset's component, namespaces and node labels alone), that gate is not clear.
    #[test]
    fn gates_are_never_clear_while_a_ruleset_reaching_them_is_blind() {
        const NAMESPACES: [&str; 3] = ["a", "b", "c"];
        const NODES: [&str; 3] = ["n1", "n2", "n3"];
        const COMPONENTS: [&str; 2] = ["k", "m"];
        let mut rng = fastrand::Rng::with_seed(36);
        for round in 0..300 {
            let h = TargetHealth::default();
            let t = target("things");
            let rulesets: Vec<Reach> = (0..rng.usize(1..4))
                .map(|_| Reach {
                    component: COMPONENTS[rng.usize(..2)].into(),
                    nodes: rng.bool(),
                    namespaces: rng.bool().then(|| {
                        NAMESPACES
                            .iter()
                            .filter(|_| rng.bool())
                            .map(|n| n.to_string())
                            .collect()
                    }),
                })
                .collect();
            let name = |i: usize| format!("rs-{i}");
            h.watching(&t, None);
            h.resolved(&t, true, &[None]);
            h.listed(&t, &None, Timestamp::UNIX_EPOCH);
            h.reaches(
                &t,
                rulesets
                    .iter()
                    .enumerate()
                    .map(|(i, r)| (name(i), r.clone()))
                    .collect(),
            );
            let mut spots: Vec<Spot> = Vec::new();
            // Deleted objects: what is learned of them after is ignored.
            let mut gone: HashSet<String> = HashSet::new();
            for step in 0..40 {
                let i = rng.usize(..rulesets.len());
                match rng.usize(..10) {
                    0 => {
                        let ns = NAMESPACES[rng.usize(..3)].to_string();
                        h.suspended(&t, &name(i), Some(&ns));
                        spots.push(Spot::Suspended(i, ns));
                    }
                    1 => {
                        h.dropped_events(&t, &name(i), rulesets[i].namespaces.clone());
                        spots.push(Spot::Whole(i));
                    }
                    2 => {
                        h.invalid(&name(i), t.clone(), rulesets[i].clone(), "bad".into());
                        spots.push(Spot::Whole(i));
                    }
                    3 | 4 => {
                        let uid = format!("u{}", rng.usize(..6));
                        let ruleset = rng.bool().then_some(i);
                        let ns = NAMESPACES[rng.usize(..3)].to_string();
                        let nodes = rng.bool().then(|| {
                            NODES
                                .iter()
                                .filter(|_| rng.bool())
                                .map(|n| n.to_string())
                                .collect::<BTreeSet<_>>()
                        });
                        let recorded = h.skipped(
                            &t,
                            (&uid, ruleset.map(name).as_deref()),
                            Some(&ns),
                            (format!("{ns}/{uid}"), nodes.clone()),
                            "why".into(),
                        );
                        assert_eq!(recorded, !gone.contains(&uid));
                        if !recorded {
                            continue;
                        }
                        spots.retain(|s| {
                            !matches!(s, Spot::Object { uid: u, ruleset: r, .. } if *u == uid && *r == ruleset)
                        });
                        spots.push(Spot::Object {
                            uid,
                            ruleset,
                            ns,
                            nodes,
                        });
                    }
                    5 => {
                        h.ruleset_reset(&name(i));
                        spots.retain(|s| match s {
                            Spot::Whole(r) | Spot::Lagging(r) | Spot::Suspended(r, _) => *r != i,
                            Spot::Object { ruleset, .. } => *ruleset != Some(i),
                        });
                    }
                    8 => {
                        let lag = Duration::from_secs(rng.u64(6..60));
                        let bound = Some((lag, Duration::from_secs(5)));
                        h.lagging(&t, &name(i), rulesets[i].namespaces.clone(), bound);
                        spots.retain(|s| !matches!(s, Spot::Lagging(r) if *r == i));
                        spots.push(Spot::Lagging(i));
                    }
                    9 => {
                        h.lagging(&t, &name(i), rulesets[i].namespaces.clone(), None);
                        spots.retain(|s| !matches!(s, Spot::Lagging(r) if *r == i));
                    }
                    6 => {
                        let uid = format!("u{}", rng.usize(..6));
                        h.object_gone(&t, &uid);
                        gone.insert(uid.clone());
                        spots.retain(|s| !matches!(s, Spot::Object { uid: u, .. } if *u == uid));
                    }
                    _ => {
                        let uid = format!("u{}", rng.usize(..6));
                        h.evaluated(&t, &uid, Some(&name(i)));
                        spots.retain(|s| {
                            !matches!(s, Spot::Object { uid: u, ruleset: Some(r), .. } if *u == uid && *r == i)
                        });
                    }
                }
                let scopes = std::iter::once(GateScope::Cluster)
                    .chain(NODES.iter().map(|n| GateScope::Node(n.to_string())))
                    .chain(
                        COMPONENTS
                            .iter()
                            .map(|c| GateScope::Component(c.to_string())),
                    )
                    .chain(
                        NAMESPACES
                            .iter()
                            .map(|n| GateScope::Namespace(n.to_string())),
                    );
                for scope in scopes {
                    let reaching = |r: &Reach| match &scope {
                        GateScope::Cluster => true,
                        GateScope::Node(_) => r.nodes,
                        GateScope::Component(c) => r.component == *c,
                        GateScope::Namespace(ns) => {
                            r.namespaces.as_ref().is_none_or(|set| set.contains(ns))
                        }
                    };
                    let blind = spots.iter().find(|spot| match spot {
                        Spot::Whole(i) | Spot::Lagging(i) => reaching(&rulesets[*i]),
                        // Nodes: what changes there is skipped with its nodes (an `Object`).
                        Spot::Suspended(i, ns) => {
                            reaching(&rulesets[*i])
                                && match &scope {
                                    GateScope::Node(_) => false,
                                    GateScope::Namespace(n) => n == ns,
                                    _ => true,
                                }
                        }
                        Spot::Object {
                            ruleset, ns, nodes, ..
                        } => {
                            let by = |r: &Reach| {
                                reaching(r)
                                    && r.namespaces.as_ref().is_none_or(|set| set.contains(ns))
                            };
                            let by_ruleset = match ruleset {
                                Some(i) => by(&rulesets[*i]),
                                None => rulesets.iter().any(by),
                            };
                            let here = match &scope {
                                GateScope::Node(n) => {
                                    nodes.as_ref().is_none_or(|set| set.contains(n))
                                }
                                GateScope::Namespace(n) => ns == n,
                                _ => true,
                            };
                            by_ruleset && here
                        }
                    });
                    if let Some(spot) = blind {
                        assert!(
                            !h.stale_for_gate(&scope).is_empty(),
                            "round {round}, step {step}: gate {scope} would be clear while {spot:?} of {rulesets:?}"
                        );
                    }
                }
            }
            for i in 0..rulesets.len() {
                h.ruleset_reset(&name(i));
            }
            h.relisted(&t);
            h.keep_skipped(&t, &None, &HashSet::new());
            assert!(h.stale(None).is_empty(), "round {round}: all fixed");
        }
    }

    /// A deleted object's evaluation still queued on a lane finds it over budget: that is
    /// ignored. Tombstones are bounded: the oldest go (the lane's own deletion clears then).
    #[test]
    fn what_is_learned_of_a_deleted_object_is_ignored() {
        let h = TargetHealth::default();
        let t = target("things");
        h.watching(&t, None);
        h.resolved(&t, true, &[None]);
        h.listed(&t, &None, Timestamp::UNIX_EPOCH);
        let skip = |uid: &str| {
            h.skipped(
                &t,
                (uid, Some("r")),
                Some("a"),
                (format!("a/{uid}"), None),
                "over".into(),
            )
        };
        assert!(skip("u1"));
        h.object_gone(&t, "u1");
        assert!(h.stale(None).is_empty());
        assert!(!skip("u1"), "deleted: its late result is ignored");
        assert!(h.stale(None).is_empty());
        for i in 0..MAX_TOMBSTONES {
            h.object_gone(&t, &format!("other-{i}"));
        }
        assert!(
            skip("u1"),
            "forgotten after {MAX_TOMBSTONES} more deletions"
        );
        h.evaluated(&t, "u1", Some("r"));
        assert!(h.stale(None).is_empty());
    }

    /// One object whose skip mark flips every 150 ms for 6 s (a tenant's costly object patched
    /// in a loop), with the reporter running: each flip changes what the gates answer, and
    /// every `FeedsChanged` is an event for every open gate watch. The first change goes out
    /// after the 100 ms gathering; the rest at most about once a second (40 events before).
    #[tokio::test(start_paused = true)]
    async fn a_flapping_skip_mark_changes_the_feeds_about_once_a_second() {
        use tokio::time::{Instant, sleep};
        let h = Arc::new(TargetHealth::default());
        let t = target("things");
        h.watching(&t, None);
        h.resolved(&t, true, &[None]);
        h.listed(&t, &None, Timestamp::UNIX_EPOCH);
        let (readiness, pending) = Readiness::new("the test");
        pending.done();
        let index = Arc::new(Index::new(1, 4096, 4096));
        let mut events = index.subscribe();
        let reporter = tokio::spawn({
            let (h, index) = (h.clone(), index.clone());
            async move { h.report_to(index, readiness).await }
        });
        // What starting reported; then a quiet while.
        sleep(Duration::from_secs(5)).await;
        while events.try_recv().is_ok() {}

        let flips = 40;
        let started = Instant::now();
        // When each FeedsChanged came, after `started`.
        let seen = Arc::new(Mutex::new(Vec::new()));
        let collector = tokio::spawn({
            let seen = seen.clone();
            async move {
                while let Ok(event) = events.recv().await {
                    assert_eq!(event.kind, crate::index::EventKind::FeedsChanged);
                    seen.lock().push(started.elapsed());
                }
            }
        });
        for i in 0..flips {
            if i % 2 == 0 {
                h.skipped(
                    &t,
                    ("u1", Some("r")),
                    Some("a"),
                    ("a/slow".into(), None),
                    "over".into(),
                );
            } else {
                h.evaluated(&t, "u1", Some("r"));
            }
            sleep(Duration::from_millis(150)).await;
        }
        sleep(Duration::from_secs(2)).await;
        let took = started.elapsed();
        let (count, first) = {
            let seen = seen.lock();
            (seen.len(), seen.first().copied())
        };
        println!("{flips} flips in {took:?}: {count} FeedsChanged, the first after {first:?}");
        assert!(
            first.is_some_and(|f| f <= Duration::from_millis(150)),
            "the first change is prompt: {first:?}"
        );
        let most = took.as_secs() as usize + 1;
        assert!(
            count <= most,
            "{count} FeedsChanged in {took:?} (at most {most})"
        );
        reporter.abort();
        collector.abort();
    }
}
