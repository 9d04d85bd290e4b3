//! What is known of one target's detection ([`Entry`]): discovery, its streams, and each
//! ruleset's and object's blind spots, kept as the watchers and the evaluator report them; and
//! where it is blind for a question about a namespace (for a gate: `gate_view.rs`).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;

use super::reach::covers;
use super::{Blind, Namespaces, Reach, Stream};

/// Most skipped objects named per target and query (the rest are counted in the metrics and on
/// the rulesets).
const MAX_SKIPPED_NAMED: usize = 5;

/// Deleted objects a target remembers, by uid (the latest): an evaluation of one still queued
/// on a lane when its deletion was read must not mark it skipped again (a ghost that blinded its
/// gates until the ruleset changed). The lane's own deletion, in order after that evaluation,
/// clears its marks too ([`crate::detect::Health::deleted`]); this only keeps them from showing
/// meanwhile, so older tombstones may go. About 100 KB per target at most.
pub(super) const MAX_TOMBSTONES: usize = 1024;

/// The latest deleted objects of a target, by uid, at most [`MAX_TOMBSTONES`] (uids are never
/// reused, so remembering one too long is harmless).
#[derive(Debug, Default)]
pub(super) struct Tombstones {
    order: std::collections::VecDeque<Arc<str>>,
    uids: HashSet<Arc<str>>,
}

impl Tombstones {
    pub(super) fn insert(&mut self, uid: &str) {
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

    pub(super) fn contains(&self, uid: &str) -> bool {
        self.uids.contains(uid)
    }
}

/// Where a ruleset's evaluation lags (see [`Blind::Lagging`]).
#[derive(Clone, Debug)]
pub(super) struct Lag {
    /// The namespaces whose changes are late: the one that lags, or (for cluster-scoped
    /// objects) every namespace the ruleset covers.
    pub(super) covered: Namespaces,
    /// The nodes the changes not seen yet are on, as the index keys node gates; `None` when
    /// they cannot be known: they may be on any node.
    pub(super) nodes: Option<BTreeSet<String>>,
    pub(super) lag: Duration,
    pub(super) bound: Duration,
}

impl Lag {
    fn blind(&self, (ruleset, namespace): &(String, Option<String>)) -> Blind {
        Blind::Lagging {
            ruleset: ruleset.clone(),
            namespace: namespace.clone(),
            lag: self.lag,
            bound: self.bound,
        }
    }
}

/// An object that is not evaluated.
#[derive(Clone, Debug)]
pub(super) struct SkippedObject {
    pub(super) namespace: Option<String>,
    pub(super) object: String,
    pub(super) why: String,
    /// The nodes its operations would be labelled with (as the index keys node gates); `None`
    /// when they cannot be known: then it may be on any node.
    pub(super) nodes: Option<BTreeSet<String>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum StreamState {
    /// Its first list has not completed.
    Starting,
    /// Its latest list completed, and the watch has not failed since.
    Watching,
    /// Listing or watching failed; the watcher is retrying.
    Failing(String),
}

/// What discovery said about a target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Resolution {
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

/// One watched target's detection, as reported.
#[derive(Debug)]
pub(super) struct Entry {
    /// Namespaces whose operations this target's rulesets produce; `None`: any (cluster-scoped
    /// subjects included).
    pub(super) feeds: Option<BTreeSet<String>>,
    /// The gates each of its rulesets feeds, by ruleset; `None` (not said): every one.
    pub(super) reach: Option<BTreeMap<String, Reach>>,
    pub(super) resolution: Resolution,
    pub(super) streams: BTreeMap<Stream, StreamState>,
    /// The last failed liveness probe of a stream whose watch looks fine (a stalled watch).
    pub(super) stalled: BTreeMap<Stream, String>,
    pub(super) last_list: Option<Timestamp>,
    /// Suspended rulesets of this target, and where (a namespace; `None`: cluster-scoped
    /// subjects).
    pub(super) suspended: BTreeSet<(String, Option<String>)>,
    /// Rulesets whose lane dropped events since the watcher's latest complete list.
    pub(super) dropped: BTreeMap<String, Namespaces>,
    /// Where rulesets' evaluation lags, by ruleset and namespace (`None`: cluster-scoped
    /// objects).
    pub(super) lagging: BTreeMap<(String, Option<String>), Lag>,
    /// Objects not evaluated, by uid and (for an over-budget evaluation) ruleset.
    pub(super) skipped: BTreeMap<(String, Option<String>), SkippedObject>,
    /// Objects deleted lately: what is still learned of them is ignored.
    pub(super) gone: Tombstones,
}

impl Entry {
    /// A target just watched: discovery pending, nothing else known.
    pub(super) fn new() -> Entry {
        Entry {
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
        }
    }

    /// Every reason why the part of this target feeding `namespace` (`None`: every part) is
    /// not current.
    pub(super) fn blind_spots(&self, namespace: Option<&str>) -> Vec<Blind> {
        let mut out: Vec<Blind> = self
            .stale_reason(namespace)
            .map(Blind::NotWatched)
            .into_iter()
            .collect();
        if self.resolution == Resolution::NotServed {
            return out;
        }
        self.rulesets_blind(
            &mut out,
            |_, place| namespace.is_none_or(|ns| place == Some(ns)),
            |_, covered| covers(covered, namespace),
            |_, lag| covers(&lag.covered, namespace),
            |_, o| namespace.is_none_or(|ns| o.namespace.as_deref() == Some(ns)),
        );
        out
    }

    /// Adds to `out` the blind spots of this target's rulesets and objects that the filters
    /// keep: suspensions (`suspended`: ruleset, where), dropped events (`covering`: ruleset,
    /// the namespaces it covers), lags (`lagging`: ruleset, where it lags), then at most [`MAX_SKIPPED_NAMED`] skipped objects
    /// (`skipped`: the ruleset that skips it, `None` when it cannot be decoded; the object).
    pub(super) fn rulesets_blind(
        &self,
        out: &mut Vec<Blind>,
        suspended: impl Fn(&str, Option<&str>) -> bool,
        covering: impl Fn(&str, &Namespaces) -> bool,
        lagging: impl Fn(&str, &Lag) -> bool,
        skipped: impl Fn(Option<&str>, &SkippedObject) -> bool,
    ) {
        out.extend(
            self.suspended
                .iter()
                .filter(|(ruleset, place)| suspended(ruleset, place.as_deref()))
                .map(|(ruleset, place)| Blind::Suspended {
                    ruleset: ruleset.clone(),
                    namespace: place.clone(),
                }),
        );
        out.extend(
            self.dropped
                .iter()
                .filter(|(ruleset, covered)| covering(ruleset, covered))
                .map(|(ruleset, _)| Blind::DroppedEvents {
                    ruleset: ruleset.clone(),
                }),
        );
        out.extend(
            self.lagging
                .iter()
                .filter(|((ruleset, _), lag)| lagging(ruleset, lag))
                .map(|(key, lag)| lag.blind(key)),
        );
        out.extend(
            self.skipped
                .iter()
                .filter(|((_, ruleset), o)| skipped(ruleset.as_deref(), o))
                .take(MAX_SKIPPED_NAMED)
                .map(|(_, o)| Blind::Skipped {
                    object: o.object.clone(),
                    why: o.why.clone(),
                }),
        );
    }

    /// Why the part of this target feeding `namespace` (`None`: every part) is not current.
    pub(super) fn stale_reason(&self, namespace: Option<&str>) -> Option<String> {
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

    /// Whether this target's rulesets produce operations in `namespace`.
    pub(super) fn feeds(&self, namespace: &str) -> bool {
        self.feeds
            .as_ref()
            .is_none_or(|set| set.contains(namespace))
            && self.resolution != (Resolution::Resolved { namespaced: false })
    }
}
