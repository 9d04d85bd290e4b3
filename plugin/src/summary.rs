//! `summary`: counts of operations by phase, component, operation and namespace.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::colour::Colours;
use super::format::Table;
use super::op::Op;
use super::tree::{CLUSTER_SCOPE, NO_COMPONENT};

/// How many operations of a group are active and how many are completed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Count {
    /// `status.phase` `Active`.
    pub active: usize,
    /// Any phase other than `Active`.
    pub completed: usize,
}

impl Count {
    fn add(&mut self, op: &Op) {
        if op.is_active() {
            self.active += 1;
        } else {
            self.completed += 1;
        }
    }

    /// Active and completed together.
    pub fn total(&self) -> usize {
        self.active + self.completed
    }
}

/// What `kubectl ifo summary` prints: the totals and the same counts broken down four ways.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Every operation.
    pub total: Count,
    /// Operations per phase (`Active`, `Completed`; `(none)` for an object without one).
    pub by_phase: BTreeMap<String, usize>,
    /// Per `spec.component`.
    pub by_component: BTreeMap<String, Count>,
    /// Per `spec.operation`.
    pub by_operation: BTreeMap<String, Count>,
    /// Per namespace (cluster-scoped ones under one name of their own).
    pub by_namespace: BTreeMap<String, Count>,
}

fn or(s: &str, default: &str) -> String {
    if s.is_empty() {
        default.to_owned()
    } else {
        s.to_owned()
    }
}

/// Counts `ops`.
pub fn summarize(ops: &[Op]) -> Summary {
    let mut s = Summary::default();
    for op in ops {
        s.total.add(op);
        *s.by_phase
            .entry(or(&op.status.phase, "(none)"))
            .or_default() += 1;
        s.by_component
            .entry(or(&op.spec.component, NO_COMPONENT))
            .or_default()
            .add(op);
        s.by_operation
            .entry(or(&op.spec.operation, "(none)"))
            .or_default()
            .add(op);
        s.by_namespace
            .entry(op.namespace.clone().unwrap_or_else(|| CLUSTER_SCOPE.into()))
            .or_default()
            .add(op);
    }
    s
}

fn breakdown(
    out: &mut String,
    title: &str,
    counts: &BTreeMap<String, Count>,
    total: Count,
    colours: Colours,
) {
    let mut rows = vec![vec![
        title.to_owned(),
        "ACTIVE".into(),
        "COMPLETED".into(),
        "TOTAL".into(),
    ]];
    for (name, c) in counts {
        rows.push(vec![
            name.clone(),
            c.active.to_string(),
            c.completed.to_string(),
            c.total().to_string(),
        ]);
    }
    rows.push(vec![
        "Total".into(),
        total.active.to_string(),
        total.completed.to_string(),
        total.total().to_string(),
    ]);
    out.push_str(&Table::render(&rows, colours));
}

/// The summary as tables: phases, then each breakdown with a total row.
pub fn render(s: &Summary, colours: Colours) -> String {
    let mut out = String::new();
    let mut rows = vec![vec!["PHASE".to_string(), "COUNT".into()]];
    rows.extend(
        s.by_phase
            .iter()
            .map(|(phase, n)| vec![phase.clone(), n.to_string()]),
    );
    out.push_str(&Table::render(&rows, colours));
    for (title, counts) in [
        ("COMPONENT", &s.by_component),
        ("OPERATION", &s.by_operation),
        ("NAMESPACE", &s.by_namespace),
    ] {
        out.push('\n');
        breakdown(&mut out, title, counts, s.total, colours);
    }
    out
}

fn counts_json(counts: &BTreeMap<String, Count>) -> Value {
    counts
        .iter()
        .map(|(k, c)| {
            (
                k.clone(),
                json!({"active": c.active, "completed": c.completed, "total": c.total()}),
            )
        })
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// The summary as JSON for `-o json|yaml`, with camelCase keys like the API's.
pub fn to_json(s: &Summary) -> Value {
    json!({
        "active": s.total.active,
        "completed": s.total.completed,
        "total": s.total.total(),
        "byPhase": s.by_phase,
        "byComponent": counts_json(&s.by_component),
        "byOperation": counts_json(&s.by_operation),
        "byNamespace": counts_json(&s.by_namespace),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::tests::op;

    fn ops() -> Vec<Op> {
        let mut ops = vec![
            op(Some("ns1"), "VirtualMachine", "vm1", "Migrating", "Active"),
            op(
                Some("ns1"),
                "VirtualMachine",
                "vm2",
                "Migrating",
                "Completed",
            ),
            op(Some("ns2"), "VirtualMachine", "vm3", "Starting", "Active"),
            op(None, "Node", "n1", "Draining", "Active"),
        ];
        ops[3].spec.component = "node".into();
        ops
    }

    #[test]
    fn counts_by_every_dimension() {
        let s = summarize(&ops());
        assert_eq!(
            s.total,
            Count {
                active: 3,
                completed: 1
            }
        );
        assert_eq!(s.by_phase["Active"], 3);
        assert_eq!(s.by_phase["Completed"], 1);
        assert_eq!(
            s.by_component["kubevirt"],
            Count {
                active: 2,
                completed: 1
            }
        );
        assert_eq!(
            s.by_component["node"],
            Count {
                active: 1,
                completed: 0
            }
        );
        assert_eq!(
            s.by_operation["Migrating"],
            Count {
                active: 1,
                completed: 1
            }
        );
        assert_eq!(s.by_namespace[CLUSTER_SCOPE].active, 1);
        assert_eq!(s.by_namespace["ns1"].total(), 2);
        assert_eq!(summarize(&[]), Summary::default());
    }

    #[test]
    fn renders_tables_and_json() {
        let s = summarize(&ops());
        let text = render(&s, Colours::OFF);
        assert!(
            text.starts_with("PHASE       COUNT\nActive      3\nCompleted   1\n"),
            "{text}"
        );
        assert!(text.contains("COMPONENT   ACTIVE   COMPLETED   TOTAL\nkubevirt    2        1           3\nnode        1        0           1\nTotal       3        1           4\n"), "{text}");
        assert!(
            text.contains("\nMigrating   1        1           2\n"),
            "{text}"
        );
        let j = to_json(&s);
        assert_eq!(j["active"], 3);
        assert_eq!(j["byNamespace"]["ns2"]["active"], 1);
        assert_eq!(j["byPhase"]["Completed"], 1);
    }
}
