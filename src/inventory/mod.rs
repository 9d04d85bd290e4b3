//! The names of the cluster's Nodes and Namespaces, kept in memory from metadata-only watches,
//! so that the maintenance gate of a node or namespace the cluster does not have does not exist.
//!
//! A gate is computed, never stored, so any well-formed name could answer: then `kubectl wait
//! --for=condition=Clear=True gate/node.worker1`, a typo for `worker-1`, would read `Clear` at
//! once and the drain of the real node would run unguarded. With the names known, such a gate
//! is a 404 (see `api::gate`), and the wait fails.
//!
//! Only the names are kept (a few dozen bytes each: 5,000 nodes and 20,000 namespaces are about
//! 2 MB), with a node's uid and maintenance override for the eviction guard (see [`overrides`]:
//! whether an override is in force is judged at the time of each question, and its end wakes
//! the reporter, so that gates change when it passes) and since when it is cordoned (see
//! [`cordon`]), read by kube's watcher a page of 500 at a time (see `follow`): namespaces as
//! `PartialObjectMetadata` (metadata-only lists and watches), nodes as their metadata and
//! `spec.unschedulable` (the decoder skips the rest of the spec and the status). The pods' nodes, for the guard, are kept the same way
//! (see [`pods`]). Each kind
//! is *synced* once a list of it has completed, and stops being synced while its watch fails
//! (RBAC forbidden, kube-apiserver unreachable): the watch then starts over with a fresh list
//! after a backoff, as the target watchers do. Until a kind is synced again, a name it does not
//! hold cannot be told apart from a name the cluster does not have: the gate is `Unknown`, never
//! a 404 and never `Clear`. A name it holds still counts as present (it was, as of the last list
//! or event). A relist after an expired watch replaces the names at once when it completes.
//!
//! Whenever the names or their state change, the index takes a resourceVersion for it
//! ([`Inventory::report_to`]), so that watches of gates see a gate appear, go or turn `Unknown`
//! at one, like any other change.

pub(crate) mod cordon;
mod follow;
mod names;
pub(crate) mod overrides;
pub(crate) mod pods;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Namespace;
use kube::core::PartialObjectMeta;
use kube::runtime::watcher;
use kube::{Api, Client, Resource};
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::index::ScopesClock;
use cordon::NodeObject;
pub(crate) use follow::Keeper;
use names::Names;
pub(crate) use overrides::{End, Override};

/// How long [`Inventory::report_to`] gathers changes before it reports them.
const REPORT_COALESCE: Duration = Duration::from_millis(100);

/// A kind of object whose names are kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Nodes: the gates `node.<node>`.
    Node,
    /// Namespaces: the gates `namespace.<namespace>`.
    Namespace,
}

impl Kind {
    /// Its resource, for messages and logs.
    pub(crate) fn plural(self) -> &'static str {
        match self {
            Kind::Node => "nodes",
            Kind::Namespace => "namespaces",
        }
    }

    /// The name of the task that watches it.
    pub(crate) fn task(self) -> &'static str {
        match self {
            Kind::Node => "node-names",
            Kind::Namespace => "namespace-names",
        }
    }
}

/// Whether the cluster has an object of a kind by that name, as far as the server knows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Presence {
    /// Listed, or created since.
    Present,
    /// Not among the names of a list that completed and the watch that followed it.
    Absent,
    /// The names of its kind are not known: why (they were never listed, or their watch fails).
    Unknown(String),
}

/// Whether what is kept of one kind is current.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum Sync {
    /// No list has completed yet.
    #[default]
    NotListed,
    /// A list completed, and its watch has not failed since.
    Listed,
    /// The list or watch fails, with why; a list completing again ends it.
    Failing(String),
}

/// What the maintenance guard asks of a node, at the time it asks (see [`Inventory::node`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Facts {
    /// Its uid: Events about it name it, as `kubectl describe` finds them by it.
    pub uid: Option<Arc<str>>,
    /// The reason of its maintenance override, while one is in force (set, and its end, if it
    /// has one, not passed).
    pub maintenance_override: Option<Arc<str>>,
}

/// What is kept of one Node or Namespace besides its name: for a Node, what the maintenance
/// guard needs (nothing for a Namespace).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Kept {
    /// Its uid.
    pub uid: Option<Arc<str>>,
    /// Its maintenance override, in force or not.
    pub maintenance_override: Option<Override>,
    /// Since when it is cordoned, while it is (see [`cordon`]).
    pub cordoned_since: Option<Timestamp>,
}

impl Kept {
    fn of(
        meta: &kube::core::ObjectMeta,
        cordoned_since: Option<Timestamp>,
        now: Timestamp,
    ) -> Kept {
        Kept {
            uid: meta.uid.as_deref().map(Arc::from),
            maintenance_override: Override::of(meta, now),
            cordoned_since,
        }
    }

    /// What it is at `now`.
    fn facts(&self, now: Timestamp) -> Facts {
        Facts {
            uid: self.uid.clone(),
            maintenance_override: self
                .maintenance_override
                .as_ref()
                .filter(|o| o.in_force(now))
                .map(|o| o.reason.clone()),
        }
    }

    /// The same object as `previous`, read again: an override that stays keeps when it was
    /// first seen, a cordon that stays the earliest time it was dated by. Whether anything a
    /// gate shows changed (its override, its cordon).
    fn follows(&mut self, previous: &Kept) -> bool {
        let overridden = match (
            &mut self.maintenance_override,
            &previous.maintenance_override,
        ) {
            (Some(now), Some(before)) => {
                now.continues(before);
                now != before
            }
            (None, None) => false,
            _ => true,
        };
        let cordoned = match (&mut self.cordoned_since, previous.cordoned_since) {
            (Some(now), Some(before)) => {
                *now = (*now).min(before);
                *now != before
            }
            (None, None) => false,
            _ => true,
        };
        overridden || cordoned
    }
}

#[cfg(test)]
impl Kept {
    /// What a node with the override annotations (`reason`, and `until` if any) is kept as,
    /// read at `now`.
    pub(crate) fn overridden(reason: &str, until: Option<&str>, now: Timestamp) -> Kept {
        let mut annotations = std::collections::BTreeMap::from([(
            ifo_model::MAINTENANCE_OVERRIDE_ANNOTATION.to_owned(),
            reason.to_owned(),
        )]);
        if let Some(until) = until {
            annotations.insert(
                ifo_model::MAINTENANCE_OVERRIDE_UNTIL_ANNOTATION.to_owned(),
                until.to_owned(),
            );
        }
        let meta = kube::core::ObjectMeta {
            annotations: Some(annotations),
            ..Default::default()
        };
        Kept::of(&meta, None, now)
    }

    /// What a node cordoned since `since` is kept as.
    pub(crate) fn cordoned(since: Timestamp) -> Kept {
        Kept {
            cordoned_since: Some(since),
            ..Kept::default()
        }
    }
}

/// The names of the cluster's Nodes and Namespaces (see the [module](self)). Empty and not
/// synced until [`Inventory::follow`] runs for each kind.
#[derive(Debug, Default)]
pub(crate) struct Inventory {
    nodes: Mutex<Names>,
    namespaces: Mutex<Names>,
    /// Notified when anything a gate shows changed.
    changed: Notify,
}

impl Inventory {
    fn names(&self, kind: Kind) -> &Mutex<Names> {
        match kind {
            Kind::Node => &self.nodes,
            Kind::Namespace => &self.namespaces,
        }
    }

    fn update(&self, kind: Kind, change: impl FnOnce(&mut Names) -> bool) {
        if change(&mut self.names(kind).lock()) {
            self.changed.notify_one();
        }
    }

    /// Whether the cluster has the `kind` named `name`, as far as the server knows.
    pub(crate) fn presence(&self, kind: Kind, name: &str) -> Presence {
        self.names(kind).lock().presence(kind, name)
    }

    /// Whether the names of `kind` are current: a list completed, and the watch has not failed
    /// since.
    #[cfg(test)]
    fn is_synced(&self, kind: Kind) -> bool {
        self.names(kind).lock().sync == Sync::Listed
    }

    /// Asserts that each name of `kind` in `expected` has its presence.
    #[cfg(test)]
    #[track_caller]
    fn assert_presences(&self, kind: Kind, expected: &[(&str, Presence)]) {
        for (name, presence) in expected {
            assert_eq!(&self.presence(kind, name), presence, "{name}");
        }
    }

    /// What the guard asks of the node `name` now, if the cluster has it (as far as the server
    /// knows): its maintenance override only while it is in force at this very moment.
    pub(crate) fn node(&self, name: &str) -> Option<Facts> {
        let now = Timestamp::now();
        self.nodes
            .lock()
            .names
            .get(name)
            .map(|kept| kept.facts(now))
    }

    /// Since when the node `name` is cordoned, while it is (see [`cordon`]).
    pub(crate) fn cordoned_since(&self, name: &str) -> Option<Timestamp> {
        self.nodes.lock().names.get(name)?.cordoned_since
    }

    /// The maintenance override of the node `name`, in force or not (its gate shows it).
    pub(crate) fn node_override(&self, name: &str) -> Option<Override> {
        self.nodes
            .lock()
            .names
            .get(name)
            .and_then(|kept| kept.maintenance_override.clone())
    }

    /// Every node's maintenance override, in force or not, by node name.
    pub(crate) fn overrides(&self) -> Vec<(Box<str>, Override)> {
        let nodes = self.nodes.lock();
        let mut all: Vec<(Box<str>, Override)> = nodes
            .names
            .iter()
            .filter_map(|(name, kept)| Some((name.clone(), kept.maintenance_override.clone()?)))
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// The earliest end of an override still in force at `now`: when a gate changes next
    /// with no event.
    fn next_override_end(&self, now: Timestamp) -> Option<Timestamp> {
        self.nodes
            .lock()
            .names
            .values()
            .filter_map(|kept| kept.maintenance_override.as_ref()?.ends_at())
            .filter(|at| *at > now)
            .min()
    }

    /// A list of `kind` completed with `names` and nothing else kept (what tests and
    /// benchmarks set).
    pub(crate) fn listed<S: Into<Box<str>>>(&self, kind: Kind, names: impl IntoIterator<Item = S>) {
        let names = names
            .into_iter()
            .map(|n| (n.into(), Kept::default()))
            .collect();
        self.update(kind, |n| n.listed(names));
    }

    /// The `kind` named `name` was created (or changed), with `kept`.
    #[cfg(test)]
    pub(crate) fn applied(&self, kind: Kind, name: &str, kept: Kept) {
        self.update(kind, |n| n.applied(name.into(), kept));
    }

    /// The `kind` named `name` was deleted.
    pub(crate) fn deleted(&self, kind: Kind, name: &str) {
        self.update(kind, |n| n.deleted(name));
    }

    /// The list or watch of `kind` failed (`why`): not synced until a list completes again.
    pub(crate) fn failed(&self, kind: Kind, why: String) {
        self.update(kind, |n| n.failed(why));
    }

    /// Tells `index` whenever which gates exist, or what a node's gate says of its override,
    /// may have changed (see [`Index::scopes_changed`]): on a change, and when an override's
    /// end passes. Runs for as long as the server.
    pub(crate) async fn report_to(self: Arc<Self>, scopes: ScopesClock) {
        loop {
            let now = Timestamp::now();
            let ends_in = self
                .next_override_end(now)
                .map(|end| end.duration_since(now).unsigned_abs());
            tokio::select! {
                () = self.changed.notified() => {}
                () = sleep_for(ends_in) => {}
            }
            // A burst (a list, many namespaces created at once) is one change, and changes come
            // at most about once a second (see `Index::feeds_change_due`).
            tokio::time::sleep(REPORT_COALESCE).await;
            scopes.change_due().await;
            let _ = futures::FutureExt::now_or_never(self.changed.notified());
            scopes.scopes_changed();
        }
    }

    /// Keeps the names of `kind` up to date for as long as it runs: lists them, then watches.
    /// A failure makes them not synced, with why, and starts over with a fresh list after a
    /// backoff (see `follow`).
    pub(crate) async fn follow(self: Arc<Self>, client: Client, kind: Kind) {
        let keeper = NamesOf {
            inventory: &self,
            kind,
        };
        match kind {
            Kind::Node => {
                let inventory = Arc::downgrade(&self);
                crate::metrics::serve_overrides_from(move || {
                    inventory
                        .upgrade()
                        .map(|inventory| override_series(&inventory.overrides(), Timestamp::now()))
                        .unwrap_or_default()
                });
                let api = Api::<NodeObject>::all_with(client, &cordon::node_resource());
                follow::follow(&keeper, api, watcher::Config::default()).await;
            }
            Kind::Namespace => {
                let api = Api::<PartialObjectMeta<Namespace>>::all(client);
                follow::follow(&keeper, api, watcher::Config::default()).await;
            }
        }
    }
}

/// Sleeps for `duration`, or forever without one.
async fn sleep_for(duration: Option<Duration>) {
    match duration {
        Some(duration) => tokio::time::sleep(duration).await,
        None => std::future::pending().await,
    }
}

/// The [`Keeper`] of one kind's names.
struct NamesOf<'a> {
    inventory: &'a Inventory,
    kind: Kind,
}

/// The series of the overrides in force at `now` (see `metrics::overrides`).
fn override_series(
    overrides: &[(Box<str>, Override)],
    now: Timestamp,
) -> Vec<crate::metrics::OverrideSeries> {
    overrides
        .iter()
        .filter(|(_, o)| o.in_force(now))
        .map(|(node, o)| crate::metrics::OverrideSeries {
            node: node.to_string(),
            since: o.since().as_second(),
            end: o.ends_at().map(|at| at.as_second()),
        })
        .collect()
}

/// An object of a kind whose names are kept, as it is decoded: what is kept of it.
trait Named: Resource {
    fn kept(&self, now: Timestamp) -> Kept;
}

impl Named for NodeObject {
    fn kept(&self, now: Timestamp) -> Kept {
        let cordoned_since = cordon::since(&self.metadata, &self.spec, now);
        Kept::of(&self.metadata, cordoned_since, now)
    }
}

impl Named for PartialObjectMeta<Namespace> {
    fn kept(&self, _: Timestamp) -> Kept {
        Kept::default()
    }
}

impl<M: Named> Keeper<M> for NamesOf<'_> {
    type Entry = Kept;

    fn resource(&self) -> &'static str {
        self.kind.plural()
    }

    fn entry(&self, object: &M) -> Option<(Box<str>, Kept)> {
        let name = object.meta().name.as_deref()?;
        Some((name.into(), object.kept(Timestamp::now())))
    }

    fn listed(&self, entries: HashMap<Box<str>, Kept>) {
        self.inventory.update(self.kind, |n| n.listed(entries));
    }

    fn applied(&self, key: Box<str>, entry: Kept) {
        self.inventory.update(self.kind, |n| n.applied(key, entry));
    }

    fn deleted(&self, key: &str) {
        self.inventory.deleted(self.kind, key);
    }

    fn failed(&self, why: String) {
        self.inventory.failed(self.kind, why);
    }
}

#[cfg(test)]
#[allow(
    clippy::disallowed_methods,
    reason = "a test's tasks end with the test's runtime"
)]
mod tests;
