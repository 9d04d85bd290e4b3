//! The names of the cluster's Nodes and Namespaces, kept in memory from metadata-only watches,
//! so that the maintenance gate of a node or namespace the cluster does not have does not exist.
//!
//! A gate is computed, never stored, so any well-formed name could answer: then `kubectl wait
//! --for=condition=Clear=True gate/node.worker1`, a typo for `worker-1`, would read `Clear` at
//! once and the drain of the real node would run unguarded. With the names known, such a gate
//! is a 404 (see `api::gate`), and the wait fails.
//!
//! Only the names are kept (a few dozen bytes each: 5,000 nodes and 20,000 namespaces are about
//! 2 MB), with a node's uid and maintenance override for the eviction guard, read by kube's
//! watcher as `PartialObjectMetadata` (metadata-only lists and watches: no spec, no status), a
//! page of 500 at a time (see `follow`). The pods' nodes, for the guard, are kept the same way
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

mod follow;
pub(crate) mod pods;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ifo_model::MAINTENANCE_OVERRIDE_ANNOTATION;
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::core::PartialObjectMeta;
use kube::runtime::watcher;
use kube::{Api, Client, Resource};
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::index::Index;
pub(crate) use follow::Keeper;

/// How long [`Inventory::report_to`] gathers changes before it reports them.
const REPORT_COALESCE: Duration = Duration::from_millis(100);

/// A kind of object whose names are kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Nodes: the gates `node.<node>`.
    Node,
    /// Namespaces: the gates `namespace.<namespace>`.
    Namespace,
}

impl Kind {
    /// Its resource, for messages and logs.
    pub fn plural(self) -> &'static str {
        match self {
            Kind::Node => "nodes",
            Kind::Namespace => "namespaces",
        }
    }

    /// The name of the task that watches it.
    pub fn task(self) -> &'static str {
        match self {
            Kind::Node => "node-names",
            Kind::Namespace => "namespace-names",
        }
    }
}

/// Whether the cluster has an object of a kind by that name, as far as the server knows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Presence {
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

/// What is kept of one Node or Namespace besides its name: for a Node, what the maintenance
/// guard needs (nothing for a Namespace).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Facts {
    /// Its uid: Events about it name it, as `kubectl describe` finds them by it.
    pub uid: Option<Arc<str>>,
    /// The value of its [`MAINTENANCE_OVERRIDE_ANNOTATION`], when set and not empty.
    pub maintenance_override: Option<Arc<str>>,
}

impl Facts {
    fn of(meta: &kube::core::ObjectMeta) -> Facts {
        Facts {
            uid: meta.uid.as_deref().map(Arc::from),
            maintenance_override: meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(MAINTENANCE_OVERRIDE_ANNOTATION))
                .map(|reason| reason.trim())
                .filter(|reason| !reason.is_empty())
                .map(Arc::from),
        }
    }
}

/// The names of one kind (with their [`Facts`]) and whether they are current. Each change says
/// whether it changed anything a gate shows: which names exist, and whether they are current.
#[derive(Debug, Default)]
struct Names {
    names: HashMap<Box<str>, Facts>,
    sync: Sync,
}

impl Names {
    fn presence(&self, kind: Kind, name: &str) -> Presence {
        if self.names.contains_key(name) {
            return Presence::Present;
        }
        match &self.sync {
            Sync::Listed => Presence::Absent,
            Sync::NotListed => Presence::Unknown(format!(
                "the cluster's {} have not been listed yet",
                kind.plural()
            )),
            Sync::Failing(why) => Presence::Unknown(format!(
                "the watch of the cluster's {} is failing: {why}",
                kind.plural()
            )),
        }
    }

    /// A list completed with `names`: they replace those held.
    fn listed(&mut self, names: HashMap<Box<str>, Facts>) -> bool {
        let changed = self.sync != Sync::Listed
            || self.names.len() != names.len()
            || names.keys().any(|name| !self.names.contains_key(name));
        self.names = names;
        self.sync = Sync::Listed;
        changed
    }

    /// `name` was created or changed.
    fn applied(&mut self, name: Box<str>, facts: Facts) -> bool {
        self.names.insert(name, facts).is_none()
    }

    /// `name` was deleted.
    fn deleted(&mut self, name: &str) -> bool {
        self.names.remove(name).is_some()
    }

    /// The list or watch failed: not synced until a list completes again.
    fn failed(&mut self, why: String) -> bool {
        let failing = Sync::Failing(why);
        let changed = self.sync != failing;
        self.sync = failing;
        changed
    }
}

/// The names of the cluster's Nodes and Namespaces (see the [module](self)). Empty and not
/// synced until [`Inventory::follow`] runs for each kind.
#[derive(Debug, Default)]
pub struct Inventory {
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
    pub fn presence(&self, kind: Kind, name: &str) -> Presence {
        self.names(kind).lock().presence(kind, name)
    }

    /// Whether the names of `kind` are current: a list completed, and the watch has not failed
    /// since.
    #[cfg(test)]
    fn is_synced(&self, kind: Kind) -> bool {
        self.names(kind).lock().sync == Sync::Listed
    }

    /// What is kept of the node `name`, if the cluster has it (as far as the server knows).
    pub fn node(&self, name: &str) -> Option<Facts> {
        self.nodes.lock().names.get(name).cloned()
    }

    /// A list of `kind` completed with `names` and no facts (what tests and benchmarks set).
    pub fn listed<S: Into<Box<str>>>(&self, kind: Kind, names: impl IntoIterator<Item = S>) {
        let names = names
            .into_iter()
            .map(|n| (n.into(), Facts::default()))
            .collect();
        self.update(kind, |n| n.listed(names));
    }

    /// The `kind` named `name` was created (or changed), with `facts`.
    #[cfg(test)]
    pub fn applied(&self, kind: Kind, name: &str, facts: Facts) {
        self.update(kind, |n| n.applied(name.into(), facts));
    }

    /// The `kind` named `name` was deleted.
    pub fn deleted(&self, kind: Kind, name: &str) {
        self.update(kind, |n| n.deleted(name));
    }

    /// The list or watch of `kind` failed (`why`): not synced until a list completes again.
    pub fn failed(&self, kind: Kind, why: String) {
        self.update(kind, |n| n.failed(why));
    }

    /// Tells `index` whenever which gates exist may have changed (see
    /// [`Index::scopes_changed`]). Runs for as long as the server.
    pub async fn report_to(self: Arc<Self>, index: Arc<Index>) {
        loop {
            self.changed.notified().await;
            // A burst (a list, many namespaces created at once) is one change, and changes come
            // at most about once a second (see `Index::feeds_change_due`).
            tokio::time::sleep(REPORT_COALESCE).await;
            index.feeds_change_due().await;
            let _ = futures::FutureExt::now_or_never(self.changed.notified());
            index.scopes_changed();
        }
    }

    /// Keeps the names of `kind` up to date for as long as it runs: lists them, then watches.
    /// A failure makes them not synced, with why, and starts over with a fresh list after a
    /// backoff (see `follow`).
    pub async fn follow(self: Arc<Self>, client: Client, kind: Kind) {
        let keeper = NamesOf {
            inventory: &self,
            kind,
        };
        match kind {
            Kind::Node => {
                let api = Api::<PartialObjectMeta<Node>>::all(client);
                follow::follow(&keeper, api, watcher::Config::default()).await;
            }
            Kind::Namespace => {
                let api = Api::<PartialObjectMeta<Namespace>>::all(client);
                follow::follow(&keeper, api, watcher::Config::default()).await;
            }
        }
    }
}

/// The [`Keeper`] of one kind's names.
struct NamesOf<'a> {
    inventory: &'a Inventory,
    kind: Kind,
}

impl<M: Resource> Keeper<M> for NamesOf<'_> {
    type Entry = Facts;

    fn resource(&self) -> &'static str {
        self.kind.plural()
    }

    fn entry(&self, object: &M) -> Option<(Box<str>, Facts)> {
        let meta = object.meta();
        let name = meta.name.as_deref()?;
        let facts = match self.kind {
            Kind::Node => Facts::of(meta),
            Kind::Namespace => Facts::default(),
        };
        Some((name.into(), facts))
    }

    fn listed(&self, entries: HashMap<Box<str>, Facts>) {
        self.inventory.update(self.kind, |n| n.listed(entries));
    }

    fn applied(&self, key: Box<str>, entry: Facts) {
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
mod tests {
    use super::*;

    #[test]
    fn a_name_is_unknown_until_listed_then_present_or_absent() {
        let inventory = Inventory::default();
        let unknown = inventory.presence(Kind::Node, "w1");
        assert_eq!(
            unknown,
            Presence::Unknown("the cluster's nodes have not been listed yet".into())
        );
        assert!(!inventory.is_synced(Kind::Node));
        inventory.listed(Kind::Node, ["w1"]);
        assert!(inventory.is_synced(Kind::Node));
        assert_eq!(inventory.presence(Kind::Node, "w1"), Presence::Present);
        assert_eq!(inventory.presence(Kind::Node, "w2"), Presence::Absent);
        // Each kind on its own.
        assert!(matches!(
            inventory.presence(Kind::Namespace, "w1"),
            Presence::Unknown(_)
        ));
        inventory.applied(Kind::Node, "w2", Facts::default());
        assert_eq!(inventory.presence(Kind::Node, "w2"), Presence::Present);
        inventory.deleted(Kind::Node, "w1");
        assert_eq!(inventory.presence(Kind::Node, "w1"), Presence::Absent);
    }

    #[test]
    fn a_failing_watch_makes_unknown_names_unknown_until_a_list_completes() {
        let inventory = Inventory::default();
        inventory.listed(Kind::Namespace, ["demo"]);
        inventory.failed(
            Kind::Namespace,
            "list failed: namespaces is forbidden".into(),
        );
        assert!(!inventory.is_synced(Kind::Namespace));
        assert_eq!(
            inventory.presence(Kind::Namespace, "other"),
            Presence::Unknown(
                "the watch of the cluster's namespaces is failing: list failed: namespaces is forbidden"
                    .into()
            )
        );
        // Known as of the last list.
        assert_eq!(
            inventory.presence(Kind::Namespace, "demo"),
            Presence::Present
        );
        // A relist replaces the names.
        inventory.listed(Kind::Namespace, ["other"]);
        assert_eq!(
            inventory.presence(Kind::Namespace, "demo"),
            Presence::Absent
        );
        assert_eq!(
            inventory.presence(Kind::Namespace, "other"),
            Presence::Present
        );
    }

    #[test]
    fn only_changes_are_reported() {
        let mut names = Names::default();
        let a = || [("a".into(), Facts::default())].into_iter().collect();
        assert!(names.listed(a()));
        assert!(!names.listed(a()));
        let overridden = Facts {
            uid: None,
            maintenance_override: Some("INC-1".into()),
        };
        assert!(
            !names.applied("a".into(), overridden),
            "an update of a known object"
        );
        assert!(names.applied("b".into(), Facts::default()));
        assert!(names.deleted("b"));
        assert!(!names.deleted("b"));
        assert!(names.failed("forbidden".into()));
        assert!(!names.failed("forbidden".into()), "the same failure again");
        assert!(names.failed("timeout".into()));
        assert!(names.listed(a()));
    }

    #[tokio::test(start_paused = true)]
    async fn the_index_takes_a_resource_version_for_a_burst_of_changes() {
        let inventory = Arc::new(Inventory::default());
        let index = Arc::new(Index::new(100, 64, 64));
        let reporter = tokio::spawn(inventory.clone().report_to(index.clone()));
        let mut events = index.reader().subscribe();
        inventory.listed(Kind::Node, ["w1", "w2"]);
        inventory.applied(Kind::Node, "w3", Facts::default());
        let event = events.recv().await.unwrap();
        assert_eq!(event.kind, crate::index::EventKind::FeedsChanged);
        // Nothing changed: nothing more.
        inventory.applied(Kind::Node, "w3", Facts::default());
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(events.try_recv().is_err());
        reporter.abort();
    }
}
