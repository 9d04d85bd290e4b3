//! Counts of the active records the index holds, by the labels of `ifo_operations_active`.
//!
//! Kept by the index itself, under the lock that changes its records, on exactly the
//! transitions that change them: the counts cannot drift from what is served, and a scrape reads
//! one entry per label set instead of walking every record. A label set whose count reaches zero
//! is dropped, so a namespace or node without operations leaves no series behind.

use std::collections::HashMap;

use crate::operation::{InFlightOperation, LABEL_PREFIX, Phase};

/// The label that names the node an operation runs on (set by the rules' label expressions).
pub const NODE_LABEL: &str = "node";

/// What one active record is counted under.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ActiveKey {
    pub component: String,
    pub operation: String,
    /// The subject's kind (`VirtualMachine`).
    pub kind: String,
    /// The subject's namespace; empty for cluster-scoped subjects.
    pub namespace: String,
    /// The `ifo.kubevirt.io/node` label of the record; empty without one.
    pub node: String,
}

impl ActiveKey {
    /// The key of `op` when it is active.
    fn of(op: &InFlightOperation) -> Option<ActiveKey> {
        (op.phase == Phase::Active).then(|| ActiveKey {
            component: op.component.clone(),
            operation: op.operation.clone(),
            kind: op.subject.kind.clone(),
            namespace: op.namespace.clone().unwrap_or_default(),
            node: node_of(op).to_owned(),
        })
    }
}

fn node_of(op: &InFlightOperation) -> &str {
    op.labels
        .iter()
        .find(|(k, _)| k.strip_prefix(LABEL_PREFIX) == Some(NODE_LABEL))
        .map_or("", |(_, v)| v.as_str())
}

/// Whether `a` and `b` count under the same key (both inactive counts as the same: nothing).
fn same_key(a: &InFlightOperation, b: &InFlightOperation) -> bool {
    match (a.phase, b.phase) {
        (Phase::Active, Phase::Active) => {
            a.component == b.component
                && a.operation == b.operation
                && a.subject.kind == b.subject.kind
                && a.namespace == b.namespace
                && node_of(a) == node_of(b)
        }
        (Phase::Completed, Phase::Completed) => true,
        _ => false,
    }
}

/// Active records by [`ActiveKey`]; no zero entries.
#[derive(Debug, Default)]
pub(super) struct ActiveCounts(HashMap<ActiveKey, u64>);

impl ActiveCounts {
    /// The record at one key changes from `before` to `after` (`None`: absent). Costs nothing
    /// when both count under the same key, which is what most changes (a new message) are.
    pub(super) fn change(
        &mut self,
        before: Option<&InFlightOperation>,
        after: Option<&InFlightOperation>,
    ) {
        if let (Some(a), Some(b)) = (before, after)
            && same_key(a, b)
        {
            return;
        }
        if let Some(key) = before.and_then(ActiveKey::of)
            && let Some(n) = self.0.get_mut(&key)
        {
            *n -= 1;
            if *n == 0 {
                self.0.remove(&key);
            }
        }
        if let Some(key) = after.and_then(ActiveKey::of) {
            *self.0.entry(key).or_default() += 1;
        }
    }

    /// Every label set with its count, sorted (a stable exposition).
    pub(super) fn to_vec(&self) -> Vec<(ActiveKey, u64)> {
        let mut all: Vec<(ActiveKey, u64)> = self.0.iter().map(|(k, n)| (k.clone(), *n)).collect();
        all.sort_unstable();
        all
    }

    /// The same counts recomputed from `records`: what the tests compare against.
    #[cfg(test)]
    pub(super) fn recount<'a>(
        records: impl IntoIterator<Item = &'a InFlightOperation>,
    ) -> Vec<(ActiveKey, u64)> {
        let mut counts = ActiveCounts::default();
        for r in records {
            counts.change(None, Some(r));
        }
        counts.to_vec()
    }
}

/// The rule an operation comes from, as metrics name it: component, operation, subject kind.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleKey {
    pub component: String,
    pub operation: String,
    pub kind: String,
}

/// The start of the oldest active record per [`RuleKey`], sorted by key.
///
/// Walks every record (borrowing, allocating one entry per key): an "oldest" cannot be kept
/// up to date by counting, and this runs once per scrape, not per event.
pub(super) fn oldest_active<'a>(
    records: impl Iterator<Item = &'a InFlightOperation>,
) -> Vec<(RuleKey, jiff::Timestamp)> {
    let mut oldest: HashMap<(&str, &str, &str), jiff::Timestamp> = HashMap::new();
    for r in records.filter(|r| r.phase == Phase::Active) {
        let key = (
            r.component.as_str(),
            r.operation.as_str(),
            r.subject.kind.as_str(),
        );
        oldest
            .entry(key)
            .and_modify(|t| *t = (*t).min(r.created))
            .or_insert(r.created);
    }
    let mut all: Vec<(RuleKey, jiff::Timestamp)> = oldest
        .into_iter()
        .map(|((component, operation, kind), t)| {
            (
                RuleKey {
                    component: component.to_owned(),
                    operation: operation.to_owned(),
                    kind: kind.to_owned(),
                },
                t,
            )
        })
        .collect();
    all.sort_unstable();
    all
}
