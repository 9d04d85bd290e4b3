use super::*;
use crate::op::tests::op;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

fn owned_by(mut o: Op, owner: &str) -> Op {
    o.spec.subject.owner_references.push(OwnerReference {
        kind: "Owner".into(),
        name: owner.into(),
        uid: format!("uid-{owner}"),
        ..OwnerReference::default()
    });
    o
}

fn correlated(mut o: Op, group: &str, role: &str) -> Op {
    o.labels.insert(GROUP_LABEL.into(), group.into());
    o.labels.insert(ROLE_LABEL.into(), role.into());
    o
}

fn at(mut o: Op, created: &str) -> Op {
    o.created = Some(created.parse().unwrap());
    o
}

fn now() -> Timestamp {
    "2026-01-01T10:05:00Z".parse().unwrap()
}

/// A migrating VM and its VMI, which the VM owns.
fn vm_and_its_vmi() -> Vec<Op> {
    vec![
        op(Some("vms"), "VirtualMachine", "vm1", "Migrating", "Active"),
        owned_by(
            op(
                Some("vms"),
                "VirtualMachineInstance",
                "vmi1",
                "LiveMigrating",
                "Active",
            ),
            "vm1",
        ),
    ]
}

fn text(ops: &[Op]) -> String {
    let forest = forest(ops);
    render(&forest.iter().collect::<Vec<_>>(), now(), Colours::OFF)
}

#[test]
fn one_line_per_subject_nested_under_owners_at_any_depth() {
    let mut ops = vm_and_its_vmi();
    ops.extend([
        op(Some("vms"), "VirtualMachine", "vm1", "Starting", "Active"),
        owned_by(
            op(
                Some("vms"),
                "VirtualMachineInstanceMigration",
                "mig1",
                "Running",
                "Active",
            ),
            "vmi1",
        ),
        owned_by(
            op(Some("vms"), "Pod", "launcher", "Starting", "Active"),
            "vmi1",
        ),
        op(
            Some("vms"),
            "VirtualMachine",
            "vm2",
            "Stopping",
            "Completed",
        ),
    ]);
    let want = "\
kubevirt
  vms
    VirtualMachine/vm1                            Migrating, Starting   5m
    └── VirtualMachineInstance/vmi1               LiveMigrating         5m
        ├── Pod/launcher                          Starting              5m
        └── VirtualMachineInstanceMigration/mig1  Running               5m
    VirtualMachine/vm2                            Stopping (Completed)  5m
";
    let got = text(&ops);
    assert_eq!(got, want, "\n{got}");
}

#[test]
fn correlation_roots_take_their_group_per_namespace() {
    let ops = vec![
        correlated(
            op(None, "HyperConverged", "hco", "Upgrading", "Active"),
            "hco-stack",
            "root",
        ),
        correlated(
            op(None, "KubeVirt", "kv", "Deploying", "Active"),
            "hco-stack",
            "child",
        ),
        correlated(
            op(None, "CDI", "cdi", "Deploying", "Active"),
            "hco-stack",
            "child",
        ),
        // Another namespace: its own group.
        correlated(
            op(Some("other"), "SSP", "ssp", "Deploying", "Active"),
            "hco-stack",
            "child",
        ),
        // Several roots: the earliest takes the others.
        at(
            correlated(
                op(None, "Backup", "b2", "InProgress", "Active"),
                "data-protection",
                "root",
            ),
            "2026-01-01T10:01:00Z",
        ),
        at(
            correlated(
                op(None, "Backup", "b1", "InProgress", "Active"),
                "data-protection",
                "root",
            ),
            "2026-01-01T10:00:30Z",
        ),
    ];
    let forest = forest(&ops);
    let names: Vec<String> = forest.iter().map(Node::subject).collect();
    assert_eq!(names, ["Backup/b1", "HyperConverged/hco", "SSP/ssp"]);
    let kids = |n: &Node<'_>| n.children.iter().map(Node::subject).collect::<Vec<_>>();
    assert_eq!(kids(&forest[0]), ["Backup/b2"]);
    assert_eq!(kids(&forest[1]), ["CDI/cdi", "KubeVirt/kv"]);
    assert!(forest[2].children.is_empty());
}

#[test]
fn ownership_cycles_do_not_loop() {
    let a = owned_by(op(Some("ns"), "A", "a", "X", "Active"), "b");
    let b = owned_by(op(Some("ns"), "B", "b", "Y", "Active"), "a");
    let ops = [a, b];
    let forest = forest(&ops);
    assert_eq!(forest.len(), 1);
    assert_eq!(forest[0].children.len(), 1);
    assert!(forest[0].children[0].children.is_empty());
}

#[test]
fn columns_align_by_display_width() {
    let ops = vec![
        op(
            Some("ns"),
            "VirtualMachine",
            "データベース",
            "Migrating",
            "Active",
        ),
        op(Some("ns"), "VirtualMachine", "web", "Starting", "Active"),
    ];
    let got = text(&ops);
    let columns: Vec<usize> = got
        .lines()
        .skip(2)
        .map(|l| {
            let at = l
                .find("  Migrating")
                .or_else(|| l.find("  Starting"))
                .unwrap();
            l[..at].width()
        })
        .collect();
    assert_eq!(columns[0], columns[1], "{got}");
}

#[test]
fn focus_finds_a_subject_anywhere_and_checks_the_argument() {
    let ops = vm_and_its_vmi();
    let forest = forest(&ops);
    let found = focus(&forest, "virtualmachineinstance/vmi1")
        .unwrap()
        .unwrap();
    assert_eq!(found.subject(), "VirtualMachineInstance/vmi1");
    assert_eq!(focus(&forest, "VirtualMachine/vm9").unwrap(), None);
    assert!(focus(&forest, "vm1").is_err());
    assert!(focus(&forest, "/vm1").is_err());
}
