//! The maintenance gates' verdicts, below the API that serves them and the guard that decides
//! on evictions from them: the facts in — the index's scope members, the feeds' state, the
//! initial sync, the cluster's nodes and namespaces — and one typed [`Verdict`] out.
//!
//! [`Gates`] holds the facts; [`Gates::read`] and [`Gates::judged`] read scopes' members between
//! one reading of the feeds before and one after (see [`FeedsBefore`]) and judge them. The API
//! renders a judged scope as a `MaintenanceGate` (adding what only a served gate says: its windows, scheduled
//! operations and override condition); the guard decides from [`Gates::node`] without rendering
//! anything.

mod existence;
mod feeds;
mod verdict;

use std::sync::Arc;

use jiff::Timestamp;

use crate::detect::HealthReader;
use crate::index::{GateMembers, GateScope, IndexReader};
use crate::inventory::Inventory;
use crate::readiness::Readiness;
pub(crate) use existence::Existence;
pub(crate) use feeds::{Feeds, FeedsBefore, Meanwhile};
#[cfg(test)]
pub(crate) use verdict::Unknown;
pub(crate) use verdict::{Verdict, judge};

/// The facts every verdict is judged on. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Gates {
    index: IndexReader,
    /// Which watched targets are not current.
    detection: HealthReader,
    readiness: Readiness,
    /// The cluster's nodes (and whether they are cordoned) and namespaces.
    inventory: Arc<Inventory>,
}

/// A scope judged: its verdict, and the facts it was judged on.
#[derive(Debug)]
pub(crate) struct Judged {
    pub verdict: Verdict,
    pub members: GateMembers,
    pub feeds: Feeds,
    pub existence: Existence,
}

impl Gates {
    pub(crate) fn new(
        index: IndexReader,
        detection: HealthReader,
        readiness: Readiness,
        inventory: Arc<Inventory>,
    ) -> Gates {
        Gates {
            index,
            detection,
            readiness,
            inventory,
        }
    }

    /// The feeds as they are before a scope's members are read.
    fn feeds_before(&self) -> FeedsBefore {
        FeedsBefore::read(&self.detection, &self.readiness)
    }

    /// What went current while members were read since `before`.
    fn meanwhile(&self, before: FeedsBefore) -> Meanwhile {
        before.meanwhile(&self.detection)
    }

    /// The members of `scope` now, each operation of them listed; the resourceVersion they were
    /// read at first.
    fn members(&self, scope: &GateScope) -> (u64, GateMembers) {
        self.index.gate(scope, self.cordoned())
    }

    /// The cluster's scope and every scope with operations in flight, each with its
    /// `operations` oldest operations, at the current resourceVersion (returned first).
    fn listed(&self, operations: usize) -> (u64, Vec<GateMembers>) {
        let (rv, mut all) = self.index.gates_in_flight(operations, self.cordoned());
        if all.first().is_none_or(|m| m.scope != GateScope::Cluster) {
            all.insert(0, self.members(&GateScope::Cluster).1);
        }
        (rv, all)
    }

    /// Since when a node is cordoned, for a cordoned one: what started on it after holds
    /// nothing there if its rule says so (see [`GateMembers::released`]).
    fn cordoned(&self) -> impl Fn(&str) -> Option<Timestamp> + '_ {
        |node| self.inventory.cordoned_since(node)
    }

    /// Whether the gate of `members` exists (see [`existence`]).
    fn existence(&self, members: &GateMembers) -> Existence {
        existence::decide(&members.scope, members.active, || {
            existence::presence(
                &members.scope,
                &self.inventory,
                |c| self.detection.declares_component(c),
                self.readiness.is_synced(),
            )
        })
    }

    /// `members` judged (read after `meanwhile` began), with the facts of their scope.
    fn judge(&self, members: GateMembers, meanwhile: &Meanwhile) -> Judged {
        let existence = self.existence(&members);
        let mut feeds = Feeds::of(&members.scope, &self.detection, &self.readiness, meanwhile);
        if let Existence::Unknown(why) = &existence {
            feeds.existence_unknown = Some(why.clone());
        }
        Judged {
            verdict: judge(members.active, &feeds),
            members,
            feeds,
            existence,
        }
    }

    /// The scopes `scopes` judged now: their members read between one reading of the feeds
    /// before and one after, whatever their number.
    pub(crate) fn judged(&self, scopes: impl IntoIterator<Item = GateScope>) -> Vec<Judged> {
        let read = || ((), scopes.into_iter().map(|s| self.members(&s).1).collect());
        self.judged_between(read).1
    }

    /// What a read of the API judges: the scope `named`, or the cluster's and every scope with
    /// operations in flight, each listing its `operations` oldest operations; the
    /// resourceVersion they were read at first.
    pub(crate) fn read(&self, named: Option<&GateScope>, operations: usize) -> (u64, Vec<Judged>) {
        self.judged_between(|| match named {
            Some(scope) => {
                let (rv, members) = self.members(scope);
                (rv, vec![members])
            }
            None => self.listed(operations),
        })
    }

    /// The members `read` reads (with what it says of when: a resourceVersion), judged: read
    /// between one reading of the feeds before and one after (see [`FeedsBefore`]).
    fn judged_between<At>(
        &self,
        read: impl FnOnce() -> (At, Vec<GateMembers>),
    ) -> (At, Vec<Judged>) {
        let before = self.feeds_before();
        let (at, all) = read();
        let meanwhile = self.meanwhile(before);
        (
            at,
            all.into_iter().map(|m| self.judge(m, &meanwhile)).collect(),
        )
    }

    /// The gate of node `node` judged now, for the guard; `None` when it does not exist (the
    /// cluster has no such node, and no operation names it).
    pub(crate) fn node(&self, node: &str) -> Option<Judged> {
        let judged = self.judged([GateScope::Node(node.to_owned())]).pop()?;
        judged.existence.is_served().then_some(judged)
    }
}
