//! What users see, character for character: the table, `-o wide`, the tree (owners,
//! correlation, `--for`) and the summary, for a fixed set of operations at a fixed time, with
//! colour off and on, and names that are not ASCII.

use jiff::Timestamp;
use kubectl_ifo::colour::Colours;
use kubectl_ifo::format::{Output, render_list};
use kubectl_ifo::op::Op;
use kubectl_ifo::{summary, tree};
use serde_json::json;

fn now() -> Timestamp {
    "2026-03-01T12:00:00Z".parse().unwrap()
}

/// An operation: (namespace, kind, name, uid, owner uid, operation, phase, outcome, age in s,
/// labels, message).
#[allow(clippy::too_many_arguments)]
fn op(
    ns: Option<&str>,
    kind: &str,
    name: &str,
    owner: Option<&str>,
    operation: &str,
    phase: &str,
    outcome: Option<&str>,
    age: i64,
    labels: serde_json::Value,
    message: &str,
) -> Op {
    let created = now() - jiff::SignedDuration::from_secs(age);
    let mut metadata = json!({
        "name": format!("{}-{}-1a2b3c4d", name, operation.to_lowercase()),
        "creationTimestamp": created.to_string(),
        "labels": labels,
    });
    if let Some(ns) = ns {
        metadata["namespace"] = json!(ns);
    }
    let owners: Vec<serde_json::Value> = owner
        .map(|o| json!({"apiVersion": "v1", "kind": "Owner", "name": o, "uid": format!("uid-{o}")}))
        .into_iter()
        .collect();
    let mut status = json!({"phase": phase, "message": message});
    if let Some(outcome) = outcome {
        status["outcome"] = json!(outcome);
        status["completed"] = json!((now() - jiff::SignedDuration::from_secs(5)).to_string());
    }
    Op::from_json(json!({
        "apiVersion": "live.ifo.kubevirt.io/v1alpha1",
        "kind": if ns.is_some() { "InFlightOperation" } else { "InFlightClusterOperation" },
        "metadata": metadata,
        "spec": {"operation": operation, "ruleSet": "rules", "component": if kind == "Backup" { "velero" } else { "kubevirt" },
                 "subject": {"apiVersion": "v1", "kind": kind, "name": name, "namespace": ns,
                             "uid": format!("uid-{name}"), "ownerReferences": owners}},
        "status": status,
    }))
}

fn ops() -> Vec<Op> {
    let none = json!({});
    let hco = |role: &str| json!({"ifo.kubevirt.io/correlation-group": "hco-stack", "ifo.kubevirt.io/correlation-role": role});
    vec![
        op(
            Some("vms"),
            "VirtualMachine",
            "データベース",
            None,
            "Migrating",
            "Active",
            None,
            125,
            none.clone(),
            "migrating vm [データベース]",
        ),
        op(
            Some("vms"),
            "VirtualMachineInstance",
            "データベース-vmi",
            Some("データベース"),
            "LiveMigrating",
            "Active",
            None,
            120,
            none.clone(),
            "from node-1 to node-2",
        ),
        op(
            Some("vms"),
            "VirtualMachine",
            "web",
            None,
            "Starting",
            "Active",
            None,
            30,
            none.clone(),
            "starting vm [web]",
        ),
        op(
            Some("vms"),
            "VirtualMachine",
            "web",
            None,
            "Stopping",
            "Completed",
            Some("Failed"),
            4000,
            none.clone(),
            "stopping vm [web]",
        ),
        op(
            None,
            "HyperConverged",
            "kubevirt-hyperconverged",
            None,
            "Upgrading",
            "Active",
            None,
            7200,
            hco("root"),
            "upgrading to 4.99",
        ),
        op(
            None,
            "KubeVirt",
            "kubevirt",
            None,
            "Degraded",
            "Active",
            None,
            600,
            hco("child"),
            "degraded",
        ),
        op(
            Some("backups"),
            "Backup",
            "nightly",
            None,
            "InProgress",
            "Active",
            None,
            90000,
            none,
            "backing up 3 namespaces",
        ),
    ]
}

fn forest_text(ops: &[Op], focus: Option<&str>, colours: Colours) -> String {
    let forest = tree::forest(ops);
    let roots: Vec<&tree::Node<'_>> = match focus {
        Some(target) => tree::focus(&forest, target).unwrap().into_iter().collect(),
        None => forest.iter().collect(),
    };
    tree::render(&roots, now(), colours)
}

fn list_text(ops: &[Op], output: Output, namespace_column: bool, colours: Colours) -> String {
    render_list(ops, output, namespace_column, now(), colours)
}

fn sorted(mut ops: Vec<Op>) -> Vec<Op> {
    kubectl_ifo::op::sort(&mut ops);
    ops
}

#[test]
fn table_with_every_namespace() {
    let ops = sorted(ops());
    let want = "\
NAMESPACE   NAME                                         KIND                     SUBJECT                   OPERATION       PHASE       AGE    MESSAGE
-           kubevirt-hyperconverged-upgrading-1a2b3c4d   HyperConverged           kubevirt-hyperconverged   Upgrading       Active      120m   upgrading to 4.99
-           kubevirt-degraded-1a2b3c4d                   KubeVirt                 kubevirt                  Degraded        Active      10m    degraded
backups     nightly-inprogress-1a2b3c4d                  Backup                   nightly                   InProgress      Active      25h    backing up 3 namespaces
vms         web-stopping-1a2b3c4d                        VirtualMachine           web                       Stopping        Completed   66m    stopping vm [web]
vms         web-starting-1a2b3c4d                        VirtualMachine           web                       Starting        Active      30s    starting vm [web]
vms         データベース-migrating-1a2b3c4d              VirtualMachine           データベース              Migrating       Active      2m5s   migrating vm [データベース]
vms         データベース-vmi-livemigrating-1a2b3c4d      VirtualMachineInstance   データベース-vmi          LiveMigrating   Active      2m     from node-1 to node-2
";
    assert_eq!(list_text(&ops, Output::Table, true, Colours::OFF), want);
}

#[test]
fn wide_table() {
    let ops = sorted(ops());
    let want = "\
NAMESPACE   NAME                                         KIND                     SUBJECT                   OPERATION       PHASE       AGE    COMPONENT   RULESET   OUTCOME   COMPLETED   EXPECTED   MESSAGE
-           kubevirt-hyperconverged-upgrading-1a2b3c4d   HyperConverged           kubevirt-hyperconverged   Upgrading       Active      120m   kubevirt    rules     <none>    <none>      <none>     upgrading to 4.99
-           kubevirt-degraded-1a2b3c4d                   KubeVirt                 kubevirt                  Degraded        Active      10m    kubevirt    rules     <none>    <none>      <none>     degraded
backups     nightly-inprogress-1a2b3c4d                  Backup                   nightly                   InProgress      Active      25h    velero      rules     <none>    <none>      <none>     backing up 3 namespaces
vms         web-stopping-1a2b3c4d                        VirtualMachine           web                       Stopping        Completed   66m    kubevirt    rules     Failed    5s          <none>     stopping vm [web]
vms         web-starting-1a2b3c4d                        VirtualMachine           web                       Starting        Active      30s    kubevirt    rules     <none>    <none>      <none>     starting vm [web]
vms         データベース-migrating-1a2b3c4d              VirtualMachine           データベース              Migrating       Active      2m5s   kubevirt    rules     <none>    <none>      <none>     migrating vm [データベース]
vms         データベース-vmi-livemigrating-1a2b3c4d      VirtualMachineInstance   データベース-vmi          LiveMigrating   Active      2m     kubevirt    rules     <none>    <none>      <none>     from node-1 to node-2
";
    assert_eq!(list_text(&ops, Output::Wide, true, Colours::OFF), want);
}

#[test]
fn tree_nests_owners_and_correlated_subjects() {
    let ops = sorted(ops());
    let want = "\
kubevirt
  (cluster-scoped)
    HyperConverged/kubevirt-hyperconverged       Upgrading                       120m
    └── KubeVirt/kubevirt                        Degraded                        10m
  vms
    VirtualMachine/web                           Stopping (Completed), Starting  66m
    VirtualMachine/データベース                  Migrating                       2m5s
    └── VirtualMachineInstance/データベース-vmi  LiveMigrating                   2m
velero
  backups
    Backup/nightly                               InProgress                      25h
";
    assert_eq!(forest_text(&ops, None, Colours::OFF), want);
}

#[test]
fn tree_for_one_subject() {
    let ops = sorted(ops());
    let want = "\
kubevirt
  vms
    VirtualMachine/データベース                  Migrating      2m5s
    └── VirtualMachineInstance/データベース-vmi  LiveMigrating  2m
";
    assert_eq!(
        forest_text(&ops, Some("VirtualMachine/データベース"), Colours::OFF),
        want
    );
}

#[test]
fn summary_tables() {
    let ops = sorted(ops());
    let want = "\
PHASE       COUNT
Active      6
Completed   1

COMPONENT   ACTIVE   COMPLETED   TOTAL
kubevirt    5        1           6
velero      1        0           1
Total       6        1           7

OPERATION       ACTIVE   COMPLETED   TOTAL
Degraded        1        0           1
InProgress      1        0           1
LiveMigrating   1        0           1
Migrating       1        0           1
Starting        1        0           1
Stopping        0        1           1
Upgrading       1        0           1
Total           6        1           7

NAMESPACE          ACTIVE   COMPLETED   TOTAL
(cluster-scoped)   2        0           2
backups            1        0           1
vms                3        1           4
Total              6        1           7
";
    assert_eq!(
        summary::render(&summary::summarize(&ops), Colours::OFF),
        want
    );
}

#[test]
fn colour_paints_without_moving_columns() {
    let ops = sorted(ops());
    // The cluster-scoped HyperConverged upgrade and the degraded KubeVirt under it.
    let want = "\u{1b}[1mkubevirt\u{1b}[0m\n  \u{1b}[93m(cluster-scoped)\u{1b}[0m\n    HyperConverged/kubevirt-hyperconverged  \u{1b}[32mUpgrading\u{1b}[0m  \u{1b}[2m120m\u{1b}[0m\n    └── KubeVirt/kubevirt                   \u{1b}[33mDegraded\u{1b}[0m   \u{1b}[2m10m\u{1b}[0m\n";
    assert_eq!(forest_text(&ops[..2], None, Colours::ON), want);
    let want = "\u{1b}[1mNAME\u{1b}[0m                                         \u{1b}[1mKIND\u{1b}[0m             \u{1b}[1mSUBJECT\u{1b}[0m                   \u{1b}[1mOPERATION\u{1b}[0m   \u{1b}[1mPHASE\u{1b}[0m    \u{1b}[1mAGE\u{1b}[0m    \u{1b}[1mMESSAGE\u{1b}[0m\nkubevirt-hyperconverged-upgrading-1a2b3c4d   HyperConverged   kubevirt-hyperconverged   Upgrading   \u{1b}[32mActive\u{1b}[0m   120m   upgrading to 4.99\nkubevirt-degraded-1a2b3c4d                   KubeVirt         kubevirt                  \u{1b}[33mDegraded\u{1b}[0m    \u{1b}[32mActive\u{1b}[0m   10m    degraded\n";
    assert_eq!(
        list_text(&ops[..2], Output::Table, false, Colours::ON),
        want
    );
    // Without the escape codes, the same text as without colour.
    let plain = |s: String| {
        let mut out = String::new();
        let mut rest = s.as_str();
        while let Some(at) = rest.find('\u{1b}') {
            out.push_str(&rest[..at]);
            rest = &rest[at + rest[at..].find('m').unwrap() + 1..];
        }
        out + rest
    };
    assert_eq!(
        plain(forest_text(&ops, None, Colours::ON)),
        forest_text(&ops, None, Colours::OFF)
    );
    assert_eq!(
        plain(list_text(&ops, Output::Wide, true, Colours::ON)),
        list_text(&ops, Output::Wide, true, Colours::OFF)
    );
}
