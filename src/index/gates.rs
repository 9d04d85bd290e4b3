//! The operations in flight per maintenance-gate scope: the whole cluster, a node, a component,
//! a namespace.
//!
//! Kept by the index itself, under the lock that changes its records and on exactly the changes
//! that move an operation in or out of a scope (like the active counts), so a gate is answered
//! from its own members however many operations the cluster has, and a change that only moves a
//! message costs one comparison. Each scope remembers the resourceVersion and the time of its
//! latest change, so a gate says when its verdict last moved; a bounded memory of scopes that
//! became empty keeps that for recently cleared gates too.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, OnceLock};

use hashbrown::{Equivalent, HashMap};
use serde_json::value::RawValue;

use jiff::Timestamp;

use crate::operation::{InFlightOperation, Phase};
use ifo_model::{NODE_LABEL, TARGET_NODE_LABEL};

/// Operations a gate lists in full (oldest first); the others are only counted.
pub const MAX_GATE_OPERATIONS: usize = 50;

/// Cleared scopes whose clearing time is remembered.
const CLEARED_MEMORY: usize = 4096;

/// What one maintenance gate covers.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GateScope {
    /// Every operation.
    Cluster,
    /// Operations whose `ifo.kubevirt.io/node` or `ifo.kubevirt.io/target-node` names the node.
    Node(String),
    /// Operations of a component (the ruleset's `spec.component`).
    Component(String),
    /// Operations on subjects in a namespace.
    Namespace(String),
}

/// Why a name is not a gate's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GateNameError {
    /// The part before the first `.` is not a scope.
    #[error(
        "{0:?} is not a maintenance gate: gates are named cluster, node.<node>, component.<component> or namespace.<namespace>"
    )]
    UnknownScope(String),
    /// The scope is known, the value is not a valid name for it.
    #[error(
        "{name:?} is not a maintenance gate: {value:?} is not a valid {scope} name ({rule}); gates are named cluster, node.<node>, component.<component> or namespace.<namespace>"
    )]
    InvalidValue {
        /// The whole name.
        name: String,
        /// The scope it names (`node`).
        scope: &'static str,
        /// What follows the scope.
        value: String,
        /// What a valid value is.
        rule: &'static str,
    },
}

impl GateScope {
    /// The scope a gate name names (`cluster`, `node.<node>`, `component.<c>`,
    /// `namespace.<ns>`), with the value checked as Kubernetes checks such names.
    pub fn parse(name: &str) -> Result<GateScope, GateNameError> {
        if name == "cluster" {
            return Ok(GateScope::Cluster);
        }
        let unknown = || GateNameError::UnknownScope(name.to_owned());
        let (scope, value) = name.split_once('.').ok_or_else(unknown)?;
        let invalid = |scope, rule| GateNameError::InvalidValue {
            name: name.to_owned(),
            scope,
            value: value.to_owned(),
            rule,
        };
        match scope {
            "node" if is_dns_subdomain(value) => Ok(GateScope::Node(value.to_owned())),
            "node" => Err(invalid("node", DNS_SUBDOMAIN_RULE)),
            "component" if is_component(value) => Ok(GateScope::Component(value.to_owned())),
            "component" => Err(invalid("component", COMPONENT_RULE)),
            "namespace" if is_dns_label(value) => Ok(GateScope::Namespace(value.to_owned())),
            "namespace" => Err(invalid("namespace", DNS_LABEL_RULE)),
            _ => Err(unknown()),
        }
    }

    /// The scopes an active operation counts in: the cluster, its node and migration target,
    /// its component, its namespace. Values that could not name a gate are left out (the
    /// cluster gate still counts the operation).
    pub fn of(op: &InFlightOperation) -> impl Iterator<Item = GateScope> + '_ {
        ScopeRef::of(op).map(ScopeRef::to_owned)
    }

    /// Whether `op` counts in this scope only as a migration's target (a node gate's message
    /// says so).
    pub fn is_target_of(&self, op: &InFlightOperation) -> bool {
        match self {
            GateScope::Node(n) => {
                label(op, TARGET_NODE_LABEL) == Some(n) && label(op, NODE_LABEL) != Some(n)
            }
            _ => false,
        }
    }
}

impl fmt::Display for GateScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GateScope::Cluster => f.write_str("cluster"),
            GateScope::Node(n) => write!(f, "node.{n}"),
            GateScope::Component(c) => write!(f, "component.{c}"),
            GateScope::Namespace(ns) => write!(f, "namespace.{ns}"),
        }
    }
}

/// A [`GateScope`] borrowed from an operation, to find its scopes without building their names:
/// it hashes as the `GateScope` it names (the same variants in the same order, strings hashed
/// as strings), which a test checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum ScopeRef<'a> {
    Cluster,
    Node(&'a str),
    Component(&'a str),
    Namespace(&'a str),
}

impl<'a> ScopeRef<'a> {
    /// See [`GateScope::of`].
    fn of(op: &'a InFlightOperation) -> impl Iterator<Item = ScopeRef<'a>> + 'a {
        let node = label(op, NODE_LABEL).filter(|n| is_dns_subdomain(n));
        let target =
            label(op, TARGET_NODE_LABEL).filter(|t| is_dns_subdomain(t) && Some(*t) != node);
        [
            Some(ScopeRef::Cluster),
            node.map(ScopeRef::Node),
            target.map(ScopeRef::Node),
            is_component(&op.component).then_some(ScopeRef::Component(&op.component)),
            op.namespace
                .as_deref()
                .filter(|ns| is_dns_label(ns))
                .map(ScopeRef::Namespace),
        ]
        .into_iter()
        .flatten()
    }

    fn to_owned(self) -> GateScope {
        match self {
            ScopeRef::Cluster => GateScope::Cluster,
            ScopeRef::Node(n) => GateScope::Node(n.to_owned()),
            ScopeRef::Component(c) => GateScope::Component(c.to_owned()),
            ScopeRef::Namespace(ns) => GateScope::Namespace(ns.to_owned()),
        }
    }
}

impl Equivalent<GateScope> for ScopeRef<'_> {
    fn equivalent(&self, key: &GateScope) -> bool {
        match (self, key) {
            (ScopeRef::Cluster, GateScope::Cluster) => true,
            (ScopeRef::Node(a), GateScope::Node(b))
            | (ScopeRef::Component(a), GateScope::Component(b))
            | (ScopeRef::Namespace(a), GateScope::Namespace(b)) => *a == b.as_str(),
            _ => false,
        }
    }
}

fn label<'a>(op: &'a InFlightOperation, key: &str) -> Option<&'a str> {
    op.labels.get(key).filter(|v| !v.is_empty())
}

const DNS_SUBDOMAIN_RULE: &str = "lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters";
const DNS_LABEL_RULE: &str = "lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63 characters";
const COMPONENT_RULE: &str = "letters, digits, '-', '_' and '.', starting and ending with a letter or digit, at most 63 characters";

fn alnum_ends(s: &str, inner: impl Fn(u8) -> bool, edge: impl Fn(u8) -> bool) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(&first), Some(&last)) => edge(first) && edge(last) && b.iter().all(|&c| inner(c)),
        _ => false,
    }
}

fn lower_alnum(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// Kubernetes `IsDNS1123Label`.
fn is_dns_label(s: &str) -> bool {
    s.len() <= 63 && alnum_ends(s, |c| lower_alnum(c) || c == b'-', lower_alnum)
}

/// Kubernetes `IsDNS1123Subdomain`.
fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

/// A label value that is not empty: what a component name can be in a gate's name.
fn is_component(s: &str) -> bool {
    s.len() <= 63
        && alnum_ends(
            s,
            |c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'),
            |c| c.is_ascii_alphanumeric(),
        )
}

/// Whether `a` and `b` count the same in every gate: same occurrence, start, scopes and the
/// fields a gate shows of its operations (expected end, progress, stall).
fn same_for_gates(a: &InFlightOperation, b: &InFlightOperation) -> bool {
    match (a.phase, b.phase) {
        (Phase::Active, Phase::Active) => {
            a.uid == b.uid
                && a.created == b.created
                && a.name == b.name
                && a.operation == b.operation
                && a.component == b.component
                && a.namespace == b.namespace
                && a.subject.kind == b.subject.kind
                && a.subject.name == b.subject.name
                && label(a, NODE_LABEL) == label(b, NODE_LABEL)
                && label(a, TARGET_NODE_LABEL) == label(b, TARGET_NODE_LABEL)
                && a.clears_at() == b.clears_at()
                && a.progress() == b.progress()
                && a.is_stalled() == b.is_stalled()
        }
        (Phase::Completed, Phase::Completed) => true,
        _ => false,
    }
}

/// An operation in flight as the gates hold it: its record, and the form a gate lists it in,
/// rendered once by whoever first needs it (the API) and shared by every scope the operation is
/// in, so that a list of gates, where an operation shows in its node's, component's,
/// namespace's and the cluster's gate, renders it once and then only copies it.
#[derive(Debug)]
pub struct GateEntry {
    record: Arc<InFlightOperation>,
    /// The record's uid, shared by the keys of every scope it is in.
    uid: Arc<str>,
    rendered: OnceLock<Box<RawValue>>,
}

impl GateEntry {
    pub(crate) fn new(record: Arc<InFlightOperation>) -> GateEntry {
        GateEntry {
            uid: record.uid.as_str().into(),
            record,
            rendered: OnceLock::new(),
        }
    }

    /// The gate's form of the record, rendered by `render` the first time. Records never
    /// change (a change is a new record, and a new entry), so neither does what it renders.
    pub fn rendered(&self, render: impl FnOnce(&InFlightOperation) -> Box<RawValue>) -> &RawValue {
        self.rendered.get_or_init(|| render(&self.record))
    }
}

impl Deref for GateEntry {
    type Target = InFlightOperation;

    fn deref(&self) -> &InFlightOperation {
        &self.record
    }
}

/// A member's place in its scope: oldest first, the uid making equal start times distinct.
/// The uid is the entry's, shared by every scope the operation is in.
#[derive(Debug, Clone)]
struct MemberKey(Timestamp, Arc<str>);

/// A member's place as a lookup names it, borrowed from a record: what [`MemberKey`]s are
/// compared by, so that a member is found without building a key of its own.
trait Place {
    fn place(&self) -> (Timestamp, &str);
}

impl Place for MemberKey {
    fn place(&self) -> (Timestamp, &str) {
        (self.0, &self.1)
    }
}

impl Place for (Timestamp, &str) {
    fn place(&self) -> (Timestamp, &str) {
        (self.0, self.1)
    }
}

impl<'a> std::borrow::Borrow<dyn Place + 'a> for MemberKey {
    fn borrow(&self) -> &(dyn Place + 'a) {
        self
    }
}

impl PartialEq for dyn Place + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.place() == other.place()
    }
}

impl Eq for dyn Place + '_ {}

impl PartialOrd for dyn Place + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for dyn Place + '_ {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.place().cmp(&other.place())
    }
}

impl PartialEq for MemberKey {
    fn eq(&self, other: &Self) -> bool {
        self.place() == other.place()
    }
}

impl Eq for MemberKey {}

impl PartialOrd for MemberKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for MemberKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.place().cmp(&other.place())
    }
}

/// One scope with operations in flight.
#[derive(Debug)]
struct Members {
    ops: BTreeMap<MemberKey, Arc<GateEntry>>,
    /// When the scope last went from nothing in flight to something.
    since: Timestamp,
    /// The resourceVersion of its latest change.
    rv: u64,
    /// The members' expected ends ([`InFlightOperation::clears_at`]), counted, so the latest
    /// is at hand as members come and go.
    ends: BTreeMap<Timestamp, usize>,
    /// Members without an expected end.
    unestimated: usize,
    /// Members that are stalled.
    stalled: usize,
    /// When the scope last went from no member stalled to some, or back.
    stall_since: Timestamp,
}

impl Members {
    fn new(since: Timestamp, rv: u64) -> Members {
        Members {
            ops: BTreeMap::new(),
            since,
            rv,
            ends: BTreeMap::new(),
            unestimated: 0,
            stalled: 0,
            stall_since: since,
        }
    }

    fn insert(&mut self, op: &Arc<GateEntry>, now: Timestamp) {
        if self
            .ops
            .insert(MemberKey(op.created, op.uid.clone()), op.clone())
            .is_some()
        {
            return;
        }
        match op.clears_at() {
            Some(end) => *self.ends.entry(end).or_default() += 1,
            None => self.unestimated += 1,
        }
        if op.is_stalled() {
            if self.stalled == 0 {
                self.stall_since = now;
            }
            self.stalled += 1;
        }
    }

    fn remove(&mut self, op: &InFlightOperation, now: Timestamp) {
        let place: &dyn Place = &(op.created, op.uid.as_str());
        let Some(held) = self.ops.remove(place) else {
            return;
        };
        // What was counted is what the held record said, not what `op` says.
        match held.clears_at() {
            Some(end) => {
                if let Some(n) = self.ends.get_mut(&end) {
                    *n -= 1;
                    if *n == 0 {
                        self.ends.remove(&end);
                    }
                }
            }
            None => self.unestimated = self.unestimated.saturating_sub(1),
        }
        if held.is_stalled() && self.stalled > 0 {
            self.stalled -= 1;
            if self.stalled == 0 {
                self.stall_since = now;
            }
        }
    }

    /// When the last member is expected to end; `None` when one has no estimate.
    fn expected_clear(&self) -> Option<Timestamp> {
        if self.unestimated > 0 {
            return None;
        }
        self.ends.keys().next_back().copied()
    }
}

/// A gate's scope as the index holds it at one resourceVersion.
#[derive(Debug, Clone)]
pub struct GateMembers {
    /// The scope.
    pub scope: GateScope,
    /// The resourceVersion of the scope's latest change (the base or epoch RV when none is
    /// known).
    pub rv: u64,
    /// When the scope last went from nothing in flight to something, or back; `None` when
    /// the index has not seen it change since it started.
    pub since: Option<Timestamp>,
    /// How many operations are in flight in it.
    pub active: usize,
    /// The oldest of them, oldest first, as many as asked for (at most
    /// [`MAX_GATE_OPERATIONS`]).
    pub operations: Vec<Arc<GateEntry>>,
    /// When the last of them is expected to end; `None` when one has no estimate, or none is
    /// in flight.
    pub expected_clear: Option<Timestamp>,
    /// How many of them are stalled.
    pub stalled: usize,
    /// When the scope last went from none of them stalled to some, or back; `None` when the
    /// index has not seen it since it started.
    pub stall_since: Option<Timestamp>,
    /// When the targets feeding the index last went from all current to not, or back
    /// (`None`: not since the start).
    pub feeds_since: Option<Timestamp>,
}

/// Active records by gate scope; a scope without any is absent (and remembered as cleared).
#[derive(Debug, Default)]
pub(super) struct GateCounts {
    scopes: HashMap<GateScope, Members>,
    /// Scopes that became empty: when, and at which RV. Bounded by [`CLEARED_MEMORY`].
    cleared: HashMap<GateScope, (Timestamp, u64)>,
}

impl GateCounts {
    /// The record at one key changes from `before` to `after` (`None`: absent) at `rv`. Costs
    /// one comparison when both count the same in every gate (a new message).
    pub(super) fn change(
        &mut self,
        before: Option<&Arc<InFlightOperation>>,
        after: Option<&Arc<InFlightOperation>>,
        rv: u64,
    ) {
        if let (Some(a), Some(b)) = (before, after)
            && same_for_gates(a, b)
        {
            return;
        }
        let now = Timestamp::now();
        // Scopes are found by borrowed names: an owned one is built only for a scope that
        // fills or empties.
        if let Some(b) = before.filter(|b| b.phase == Phase::Active) {
            for scope in ScopeRef::of(b) {
                let Some(members) = self.scopes.get_mut(&scope) else {
                    continue;
                };
                members.remove(b, now);
                members.rv = rv;
                if members.ops.is_empty() {
                    self.scopes.remove(&scope);
                    self.remember_cleared(scope.to_owned(), now, rv);
                }
            }
        }
        if let Some(a) = after.filter(|a| a.phase == Phase::Active) {
            let entry = Arc::new(GateEntry::new(a.clone()));
            for scope in ScopeRef::of(a) {
                if !self.scopes.contains_key(&scope) {
                    let scope = scope.to_owned();
                    self.cleared.remove(&scope);
                    self.scopes.insert(scope, Members::new(now, rv));
                }
                if let Some(members) = self.scopes.get_mut(&scope) {
                    members.insert(&entry, now);
                    members.rv = rv;
                }
            }
        }
    }

    fn remember_cleared(&mut self, scope: GateScope, at: Timestamp, rv: u64) {
        if self.cleared.len() >= CLEARED_MEMORY
            && let Some(evict) = self.cleared.keys().next().cloned()
        {
            self.cleared.remove(&evict);
        }
        self.cleared.insert(scope, (at, rv));
    }

    /// The scope as it stands, with its `listed` oldest operations (at most
    /// [`MAX_GATE_OPERATIONS`]); `base_rv` when nothing is known of it.
    pub(super) fn members(&self, scope: &GateScope, base_rv: u64, listed: usize) -> GateMembers {
        match self.scopes.get(scope) {
            Some(m) => GateMembers {
                scope: scope.clone(),
                rv: m.rv,
                since: Some(m.since),
                active: m.ops.len(),
                operations: m
                    .ops
                    .values()
                    .take(listed.min(MAX_GATE_OPERATIONS))
                    .cloned()
                    .collect(),
                expected_clear: m.expected_clear(),
                stalled: m.stalled,
                stall_since: Some(m.stall_since),
                feeds_since: None,
            },
            None => {
                let cleared = self.cleared.get(scope);
                GateMembers {
                    scope: scope.clone(),
                    rv: cleared.map_or(base_rv, |c| c.1.max(base_rv)),
                    since: cleared.map(|c| c.0),
                    active: 0,
                    operations: Vec::new(),
                    expected_clear: None,
                    stalled: 0,
                    stall_since: cleared.map(|c| c.0),
                    feeds_since: None,
                }
            }
        }
    }

    /// Every scope with operations in flight, sorted by scope, each with its `listed` oldest
    /// operations.
    pub(super) fn in_flight(&self, base_rv: u64, listed: usize) -> Vec<GateMembers> {
        let mut scopes: Vec<&GateScope> = self.scopes.keys().collect();
        scopes.sort_unstable();
        scopes
            .into_iter()
            .map(|s| self.members(s, base_rv, listed))
            .collect()
    }

    /// The scopes, their member uids, expected clear time and stalled count recomputed from
    /// `records`: what the tests compare against.
    #[cfg(test)]
    pub(super) fn recount<'a>(
        records: impl IntoIterator<Item = &'a InFlightOperation>,
    ) -> BTreeMap<GateScope, ScopeSummary> {
        let mut all: BTreeMap<GateScope, Vec<&InFlightOperation>> = BTreeMap::new();
        for r in records.into_iter().filter(|r| r.phase == Phase::Active) {
            for scope in GateScope::of(r) {
                all.entry(scope).or_default().push(r);
            }
        }
        all.into_iter()
            .map(|(s, mut v)| {
                v.sort_by(|a, b| (a.created, &a.uid).cmp(&(b.created, &b.uid)));
                let expected_clear = v
                    .iter()
                    .map(|r| r.clears_at())
                    .collect::<Option<Vec<_>>>()
                    .and_then(|ends| ends.into_iter().max());
                let stalled = v.iter().filter(|r| r.is_stalled()).count();
                let uids = v.into_iter().map(|r| r.uid.clone()).collect();
                (s, (uids, expected_clear, stalled))
            })
            .collect()
    }

    /// The same, as the index keeps it.
    #[cfg(test)]
    pub(super) fn to_map(&self) -> BTreeMap<GateScope, ScopeSummary> {
        self.scopes
            .iter()
            .map(|(s, m)| {
                let uids = m.ops.keys().map(|k| k.1.to_string()).collect();
                (s.clone(), (uids, m.expected_clear(), m.stalled))
            })
            .collect()
    }
}

/// A scope's member uids (oldest first), expected clear time and stalled count.
#[cfg(test)]
pub(super) type ScopeSummary = (Vec<String>, Option<Timestamp>, usize);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_print_back() {
        for name in [
            "cluster",
            "node.worker-1",
            "node.ip-10-0-0-1.ec2.internal",
            "component.kubevirt",
            "component.OpenShift_Virt",
            "namespace.demo",
        ] {
            assert_eq!(GateScope::parse(name).unwrap().to_string(), name);
        }
        assert_eq!(
            GateScope::parse("node.w1"),
            Ok(GateScope::Node("w1".into()))
        );
    }

    #[test]
    fn a_borrowed_scope_finds_the_scope_it_names_and_no_other() {
        let owned = [
            GateScope::Cluster,
            GateScope::Node("w1".into()),
            GateScope::Component("w1".into()),
            GateScope::Namespace("w1".into()),
            GateScope::Node("w2".into()),
        ];
        let map: HashMap<GateScope, usize> = owned.iter().cloned().zip(0..).collect();
        let borrowed = [
            ScopeRef::Cluster,
            ScopeRef::Node("w1"),
            ScopeRef::Component("w1"),
            ScopeRef::Namespace("w1"),
            ScopeRef::Node("w2"),
        ];
        for (i, scope) in borrowed.into_iter().enumerate() {
            assert_eq!(map.get(&scope), Some(&i), "{scope:?}");
            assert_eq!(scope.to_owned(), owned[i]);
        }
        assert_eq!(map.get(&ScopeRef::Namespace("w2")), None);
    }

    #[test]
    fn malformed_names_say_which_scopes_exist() {
        for name in ["", "clusters", "pod.x", "node", "cluster.x"] {
            let err = GateScope::parse(name).unwrap_err();
            assert!(
                matches!(err, GateNameError::UnknownScope(_)),
                "{name}: {err:?}"
            );
            assert!(err.to_string().contains("node.<node>"), "{err}");
        }
        for name in [
            "node.",
            "node.Worker",
            "node.a_b",
            "namespace.a.b",
            "component.-x",
            "namespace.",
        ] {
            let err = GateScope::parse(name).unwrap_err();
            assert!(
                matches!(err, GateNameError::InvalidValue { .. }),
                "{name}: {err:?}"
            );
            assert!(err.to_string().contains("namespace.<namespace>"), "{err}");
        }
        let long = format!("namespace.{}", "a".repeat(64));
        assert!(GateScope::parse(&long).is_err());
    }
}
