//! Whether each watched target is current: per target, and per namespace stream of it, whether
//! its watch is running, and if not why. The watchers write it; the API reads it (through
//! [`TargetHealth::stale`]) to tell clients when an answer may be incomplete, and it is exported
//! as the `ifo_target_watch_up` and `ifo_target_last_list_timestamp_seconds` metrics.
//!
//! Serving old state silently is the failure that matters most for a tool asked "is it safe to do
//! maintenance?": with etcd down, RBAC revoked or a CRD deleted, the index keeps what it last saw.

use crate::ruleset::Target;
use jiff::Timestamp;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::index::{GateScope, Index};
use crate::readiness::Readiness;

/// How long [`TargetHealth::report_to`] gathers changes before it reports them.
const REPORT_COALESCE: Duration = Duration::from_millis(100);

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

/// Which maintenance gates a target's rulesets can put operations in, besides the cluster's
/// and their namespaces'.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reach {
    /// Their components.
    pub components: BTreeSet<String>,
    /// Whether any of them labels the node (or the migration target) of an operation.
    pub nodes: bool,
}

#[derive(Debug)]
struct Entry {
    /// Namespaces whose operations this target's rulesets produce; `None`: any (cluster-scoped
    /// subjects included).
    feeds: Option<BTreeSet<String>>,
    /// The gates it feeds; `None` (not said): every one.
    reach: Option<Reach>,
    resolution: Resolution,
    streams: BTreeMap<Stream, StreamState>,
    /// The last failed liveness probe of a stream whose watch looks fine (a stalled watch).
    stalled: BTreeMap<Stream, String>,
    last_list: Option<Timestamp>,
}

impl Entry {
    /// Why the part of this target feeding `namespace` (`None`: every part) is not current.
    fn stale_reason(&self, namespace: Option<&str>) -> Option<String> {
        match &self.resolution {
            Resolution::Pending => return Some("its first list has not completed".into()),
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
                StreamState::Starting => "its first list has not completed".into(),
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

/// A target that is not current, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stale {
    pub target: Target,
    pub reason: String,
}

/// Every watched target's health. Cheap to read: one lock, held briefly.
#[derive(Debug, Default)]
pub struct TargetHealth {
    targets: Mutex<BTreeMap<Target, Entry>>,
    /// Woken when what [`TargetHealth::stale`] answers may have changed.
    changed: tokio::sync::Notify,
}

impl TargetHealth {
    fn update(&self, target: &Target, f: impl FnOnce(&mut Entry)) {
        let mut targets = self.targets.lock().unwrap_or_else(|p| p.into_inner());
        let Some(entry) = targets.get_mut(target) else {
            // Forgotten meanwhile: the watcher is being stopped.
            return;
        };
        let before = (
            entry.resolution.clone(),
            entry.streams.clone(),
            entry.stalled.clone(),
        );
        f(entry);
        if before
            != (
                entry.resolution.clone(),
                entry.streams.clone(),
                entry.stalled.clone(),
            )
        {
            self.changed.notify_one();
        }
        crate::metrics::set_target_watch_up(target, entry.stale_reason(None).is_none());
        if let Some(at) = entry.last_list {
            crate::metrics::set_target_last_list(target, at.as_second());
        }
    }

    /// A watcher (re)starts for `target`, for rulesets feeding `feeds`. A restart (its rulesets
    /// changed) keeps what was known: the previous streams stay as they were until the new
    /// watcher reports, so a ruleset added elsewhere does not make every answer look stale.
    pub fn watching(&self, target: &Target, feeds: Option<BTreeSet<String>>) {
        let mut targets = self.targets.lock().unwrap_or_else(|p| p.into_inner());
        let entry = targets.entry(target.clone()).or_insert_with(|| Entry {
            feeds: None,
            reach: None,
            resolution: Resolution::Pending,
            streams: BTreeMap::new(),
            stalled: BTreeMap::new(),
            last_list: None,
        });
        entry.feeds = feeds;
        crate::metrics::set_target_watch_up(target, entry.stale_reason(None).is_none());
        self.changed.notify_one();
    }

    /// The rulesets watching `target` (see [`TargetHealth::watching`]) reach the gates of
    /// `reach`.
    pub fn reaches(&self, target: &Target, reach: Reach) {
        let mut targets = self.targets.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(entry) = targets.get_mut(target)
            && entry.reach.as_ref() != Some(&reach)
        {
            entry.reach = Some(reach);
            self.changed.notify_one();
        }
    }

    /// No ruleset targets `target` any more.
    pub fn forget(&self, target: &Target) {
        self.targets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(target);
        crate::metrics::forget_target(target);
        self.changed.notify_one();
    }

    /// The targets that feed the maintenance gate of `scope` and are not current: those whose
    /// rulesets can put an operation in it.
    pub fn stale_for_gate(&self, scope: &GateScope) -> Vec<Stale> {
        match scope {
            GateScope::Cluster => self.stale(None),
            GateScope::Namespace(ns) => self.stale(Some(ns)),
            GateScope::Node(_) | GateScope::Component(_) => {
                let reaches = |e: &Entry| {
                    e.reach.as_ref().is_none_or(|r| match scope {
                        GateScope::Component(c) => r.components.contains(c),
                        _ => r.nodes,
                    })
                };
                let targets = self.targets.lock().unwrap_or_else(|p| p.into_inner());
                targets
                    .iter()
                    .filter(|(_, e)| reaches(e))
                    .filter_map(|(target, e)| {
                        e.stale_reason(None).map(|reason| Stale {
                            target: target.clone(),
                            reason,
                        })
                    })
                    .collect()
            }
        }
    }

    /// Tells `index` whenever what [`TargetHealth::stale`] answers, or the initial sync, may
    /// have changed, so that the maintenance gates that depend on it change at a
    /// resourceVersion like everything else. Runs for as long as the server.
    pub async fn report_to(self: Arc<Self>, index: Arc<Index>, readiness: Readiness) {
        loop {
            let synced = readiness.is_synced();
            tokio::select! {
                _ = self.changed.notified() => {}
                _ = readiness.wait(), if !synced => {}
            }
            // A burst (every target listed at start) is one change.
            tokio::time::sleep(REPORT_COALESCE).await;
            index.feeds_changed(readiness.is_synced() && self.stale(None).is_empty());
        }
    }

    /// The API server does not serve `target` (its CRD is not installed).
    pub fn not_served(&self, target: &Target) {
        self.update(target, |e| e.resolution = Resolution::NotServed);
    }

    /// Discovery of `target` failed.
    pub fn unresolved(&self, target: &Target, reason: String) {
        self.update(target, |e| e.resolution = Resolution::Failed(reason));
    }

    /// Discovery found `target`; it is watched through `streams`.
    pub fn resolved(&self, target: &Target, namespaced: bool, streams: &[Stream]) {
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
    pub fn listed(&self, target: &Target, stream: &Stream, at: Timestamp) {
        self.update(target, |e| {
            e.streams.insert(stream.clone(), StreamState::Watching);
            e.last_list = Some(at);
        });
    }

    /// Listing or watching `stream` failed: it is not current until a list completes again.
    pub fn failed(&self, target: &Target, stream: &Stream, reason: String) {
        self.update(target, |e| {
            e.streams
                .insert(stream.clone(), StreamState::Failing(reason));
        });
    }

    /// A liveness probe of `stream` failed (`Some`) or succeeded (`None`). A watch can stall
    /// without an error (etcd down: kube-apiserver keeps the watch open and silent).
    pub fn probed(&self, target: &Target, stream: &Stream, failure: Option<String>) {
        self.update(target, |e| match failure {
            Some(reason) => {
                e.stalled.insert(stream.clone(), reason);
            }
            None => {
                e.stalled.remove(stream);
            }
        });
    }

    /// The targets that feed operations in `namespace` (`None`: anywhere) and are not current.
    /// Read-only: what the API tells clients along with an answer.
    pub fn stale(&self, namespace: Option<&str>) -> Vec<Stale> {
        let targets = self.targets.lock().unwrap_or_else(|p| p.into_inner());
        targets
            .iter()
            .filter(|(_, e)| namespace.is_none_or(|ns| e.feeds(ns)))
            .filter_map(|(target, e)| {
                e.stale_reason(namespace).map(|reason| Stale {
                    target: target.clone(),
                    reason,
                })
            })
            .collect()
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
            .map(|s| format!("{}: {}", s.target.resource, s.reason))
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
        let node = GateScope::Node("w1".into());
        let kubevirt = GateScope::Component("kubevirt".into());
        assert_eq!(names(&node), ["pods", "vms"], "unsaid: every gate");
        h.reaches(
            &vms,
            Reach {
                components: ["kubevirt".to_string()].into(),
                nodes: true,
            },
        );
        h.reaches(&pods, Reach::default());
        assert_eq!(names(&node), ["vms"]);
        assert_eq!(names(&kubevirt), ["vms"]);
        assert!(names(&GateScope::Component("other".into())).is_empty());
        assert_eq!(names(&GateScope::Cluster), ["pods", "vms"]);
        assert!(names(&GateScope::Namespace("b".into())).is_empty());
        h.listed(&vms, &None, Timestamp::UNIX_EPOCH);
        assert!(names(&node).is_empty());
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
}
