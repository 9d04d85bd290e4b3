//! Counts of the active records the index holds, by the labels of `ifo_operations_active`.
//!
//! Kept by the index itself, under the lock that changes its records, on exactly the
//! transitions that change them: the counts cannot drift from what is served, and a scrape reads
//! one entry per label set instead of walking every record. Each entry also keeps the start
//! times of its records, so the oldest operation in flight is known the same way. A label set
//! whose count reaches zero is dropped, so a namespace or node without operations leaves no
//! series behind.

use std::collections::{BTreeMap, HashMap};

use hashbrown::Equivalent;
use jiff::Timestamp;

use crate::operation::{InFlightOperation, NodeKey, Phase};

/// What one active record is counted under.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct ActiveKey {
    /// The ruleset's component.
    pub component: String,
    /// The operation (the rule's name for it).
    pub operation: String,
    /// The subject's kind (`VirtualMachine`).
    pub kind: String,
    /// The subject's namespace; empty for cluster-scoped subjects.
    pub namespace: String,
    /// The `ifo.kubevirt.io/node` label of the record; empty without one.
    pub node: String,
}

/// An [`ActiveKey`] borrowed from a record: how a change finds its entry without copying the
/// key's five strings, which every operation that starts or ends would otherwise do twice. It
/// hashes as the owned key does (the same fields in the same order, each hashed as a `str`).
#[derive(Debug, PartialEq, Eq, Hash)]
struct ActiveKeyRef<'a> {
    component: &'a str,
    operation: &'a str,
    kind: &'a str,
    namespace: &'a str,
    node: &'a str,
}

impl<'a> ActiveKeyRef<'a> {
    /// The key of `op` when it is active.
    fn of(op: &'a InFlightOperation) -> Option<ActiveKeyRef<'a>> {
        (op.phase == Phase::Active).then(|| ActiveKeyRef {
            component: &op.component,
            operation: &op.operation,
            kind: &op.subject.kind,
            namespace: op.namespace.as_deref().unwrap_or_default(),
            node: node_of(op),
        })
    }
}

impl Equivalent<ActiveKey> for ActiveKeyRef<'_> {
    fn equivalent(&self, key: &ActiveKey) -> bool {
        self.component == key.component
            && self.operation == key.operation
            && self.kind == key.kind
            && self.namespace == key.namespace
            && self.node == key.node
    }
}

impl From<&ActiveKeyRef<'_>> for ActiveKey {
    fn from(key: &ActiveKeyRef<'_>) -> ActiveKey {
        ActiveKey {
            component: key.component.to_owned(),
            operation: key.operation.to_owned(),
            kind: key.kind.to_owned(),
            namespace: key.namespace.to_owned(),
            node: key.node.to_owned(),
        }
    }
}

fn node_of(op: &InFlightOperation) -> &str {
    op.labels.node(NodeKey::NODE).unwrap_or_default()
}

/// Whether `a` and `b` count the same: under the same key with the same start, or both not
/// at all.
fn same_count(a: &InFlightOperation, b: &InFlightOperation) -> bool {
    match (a.phase, b.phase) {
        (Phase::Active, Phase::Active) => {
            a.created == b.created && ActiveKeyRef::of(a) == ActiveKeyRef::of(b)
        }
        (Phase::Completed, Phase::Completed) => true,
        _ => false,
    }
}

/// The active records of one key: how many, and their start times (a multiset, so that the
/// oldest is known without walking the records).
#[derive(Debug, Default)]
struct Count {
    records: u64,
    starts: BTreeMap<Timestamp, u32>,
}

/// Active records by [`ActiveKey`]; no empty entries.
#[derive(Debug, Default)]
pub(super) struct ActiveCounts(hashbrown::HashMap<ActiveKey, Count>);

impl ActiveCounts {
    /// The record at one key changes from `before` to `after` (`None`: absent). Costs nothing
    /// when both count the same, which is what most changes (a new message) do.
    pub(super) fn change(
        &mut self,
        before: Option<&InFlightOperation>,
        after: Option<&InFlightOperation>,
    ) {
        if let (Some(a), Some(b)) = (before, after)
            && same_count(a, b)
        {
            return;
        }
        if let Some(b) = before
            && let Some(key) = ActiveKeyRef::of(b)
            && let Some(count) = self.0.get_mut(&key)
        {
            count.records -= 1;
            if let Some(n) = count.starts.get_mut(&b.created) {
                *n -= 1;
                if *n == 0 {
                    count.starts.remove(&b.created);
                }
            }
            if count.records == 0 {
                self.0.remove(&key);
            }
        }
        if let Some(a) = after
            && let Some(key) = ActiveKeyRef::of(a)
        {
            let count = self.0.entry_ref(&key).or_default();
            count.records += 1;
            *count.starts.entry(a.created).or_default() += 1;
        }
    }

    /// Every label set with its count, sorted (a stable exposition).
    pub(super) fn to_vec(&self) -> Vec<(ActiveKey, u64)> {
        let mut all: Vec<(ActiveKey, u64)> =
            self.0.iter().map(|(k, c)| (k.clone(), c.records)).collect();
        all.sort_unstable();
        all
    }

    /// The start of the oldest active record per [`RuleKey`], sorted by key: one step per
    /// label set, not per record.
    pub(super) fn oldest(&self) -> Vec<(RuleKey, Timestamp)> {
        let mut oldest: HashMap<(&str, &str, &str), Timestamp> = HashMap::new();
        for (key, count) in &self.0 {
            let Some((&first, _)) = count.starts.first_key_value() else {
                continue;
            };
            oldest
                .entry((&key.component, &key.operation, &key.kind))
                .and_modify(|t| *t = (*t).min(first))
                .or_insert(first);
        }
        let mut all: Vec<(RuleKey, Timestamp)> = oldest
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

    /// The same counts and oldest starts recomputed from `records`: what the tests compare
    /// against.
    #[cfg(test)]
    #[allow(clippy::type_complexity)]
    pub(super) fn recount<'a>(
        records: impl IntoIterator<Item = &'a InFlightOperation>,
    ) -> (Vec<(ActiveKey, u64)>, Vec<(RuleKey, Timestamp)>) {
        let mut counts: HashMap<ActiveKey, u64> = HashMap::new();
        let mut oldest: HashMap<RuleKey, Timestamp> = HashMap::new();
        for r in records.into_iter().filter(|r| r.phase == Phase::Active) {
            let key = ActiveKeyRef::of(r).expect("active");
            *counts.entry(ActiveKey::from(&key)).or_default() += 1;
            let rule = RuleKey {
                component: r.component.clone(),
                operation: r.operation.clone(),
                kind: r.subject.kind.clone(),
            };
            let t = oldest.entry(rule).or_insert(r.created);
            *t = (*t).min(r.created);
        }
        let mut counts: Vec<_> = counts.into_iter().collect();
        counts.sort_unstable();
        let mut oldest: Vec<_> = oldest.into_iter().collect();
        oldest.sort_unstable();
        (counts, oldest)
    }
}

/// The rule an operation comes from, as metrics name it: component, operation, subject kind.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct RuleKey {
    /// The ruleset's component.
    pub component: String,
    /// The operation (the rule's name for it).
    pub operation: String,
    /// The subject's kind.
    pub kind: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn borrowed(fields: &[String; 5]) -> ActiveKeyRef<'_> {
        ActiveKeyRef {
            component: &fields[0],
            operation: &fields[1],
            kind: &fields[2],
            namespace: &fields[3],
            node: &fields[4],
        }
    }

    #[test]
    fn a_borrowed_key_finds_the_key_it_names_and_no_other() {
        let base = ["kubevirt", "Migrating", "VirtualMachine", "demo", "w1"].map(String::from);
        // The same key, and keys that differ in one field, or only in where a field ends.
        let mut keys = vec![base.clone()];
        for field in 0..5 {
            let mut other = base.clone();
            other[field].push('x');
            keys.push(other);
        }
        let mut shifted = base.clone();
        shifted[3] = "dem".into();
        shifted[4] = "ow1".into();
        keys.push(shifted);
        let map: hashbrown::HashMap<ActiveKey, usize> = keys
            .iter()
            .map(|k| ActiveKey::from(&borrowed(k)))
            .zip(0..)
            .collect();
        assert_eq!(map.len(), keys.len());
        for (i, key) in keys.iter().enumerate() {
            assert_eq!(map.get(&borrowed(key)), Some(&i), "{key:?}");
        }
        let absent = ["kubevirt", "Migrating", "VirtualMachine", "demo", ""].map(String::from);
        assert_eq!(map.get(&borrowed(&absent)), None);
    }
}
