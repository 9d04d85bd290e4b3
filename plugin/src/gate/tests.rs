use super::*;
use clap::Parser;
use serde_json::json;

fn global(args: &[&str]) -> Global {
    super::super::cli::Cli::try_parse_from(
        std::iter::once("kubectl-ifo").chain(args.iter().copied()),
    )
    .unwrap()
    .global
}

#[test]
fn many_targets_of_one_cause_are_one_reason() {
    let stale: Vec<serde_json::Value> = ["a", "b", "c", "d", "e"]
            .iter()
            .map(|r| {
                serde_json::json!({"resource": format!("{r}.example.com/v1"),
                    "reason": format!("is not being watched: list failed: {r}.example.com is forbidden: User \"x\" cannot list")})
            })
            .chain([serde_json::json!({"resource": "pods/v1", "reason": "is not being watched: the watch stalled"})])
            .collect();
    let gate: MaintenanceGate = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "cluster"},
            "status": {"conditions": [{"type": "Clear", "status": "Unknown", "reason": "Stale", "message": "m"}],
                       "staleTargets": stale}
        }))
        .unwrap();
    assert_eq!(
        unknown_reasons(&gate),
        [
            "5 resource types (a.example.com/v1, b.example.com/v1, c.example.com/v1 and 2 \
                 more) are not being watched: the server is forbidden to list them; grant it \
                 read access to every target of the rulesets (deploy/rbac/rule-targets.yaml)",
            "pods/v1 is not being watched: the watch stalled",
        ]
    );
}

#[test]
fn flags_map_to_a_gate_only_when_one_answers_them() {
    let all = Scope::All;
    let ns = Scope::Namespace("vms".into());
    assert_eq!(name_for(&global(&["-A"]), &all).as_deref(), Some("cluster"));
    assert_eq!(
        name_for(&global(&["--node", "w1"]), &all).as_deref(),
        Some("node.w1")
    );
    assert_eq!(
        name_for(&global(&["--component", "kubevirt"]), &all).as_deref(),
        Some("component.kubevirt")
    );
    assert_eq!(
        name_for(&global(&[]), &ns).as_deref(),
        Some("namespace.vms")
    );
    assert_eq!(name_for(&global(&["--node", "w1"]), &ns), None);
    assert_eq!(name_for(&global(&["--operation", "Migrating"]), &all), None);
    assert_eq!(
        name_for(&global(&["--node", "w1", "--component", "c"]), &all),
        None
    );
    assert_eq!(name_for(&global(&[]), &Scope::Cluster), None);
}

#[test]
fn a_404_naming_the_gate_is_a_missing_gate_not_a_missing_resource() {
    let status = |message: &str, details: serde_json::Value| kube::core::Status {
        code: 404,
        reason: "NotFound".into(),
        message: message.into(),
        details: Some(serde_json::from_value(details).unwrap()),
        ..Default::default()
    };
    let missing = status(
        "maintenancegates \"node.nosuch\" not found: the cluster has no node nosuch",
        json!({"name": "node.nosuch", "group": "live.ifo.kubevirt.io", "kind": "maintenancegates"}),
    );
    assert_eq!(not_found(&missing), Some(NotFound::Gate));
    assert_eq!(
        format!("{:#}", missing_error("node.nosuch", &missing)),
        "node nosuch does not exist (gate node.nosuch: not found)\n  (maintenancegates \"node.nosuch\" not found: the cluster has no node nosuch)"
    );
    let component = status(
        "no ruleset declares it",
        json!({"kind": "maintenancegates"}),
    );
    assert_eq!(not_found(&component), Some(NotFound::Gate));
    assert!(
        format!("{:#}", missing_error("component.kv", &component))
            .starts_with("component kv does not exist (gate component.kv: not found)")
    );
    let bare = kube::core::Status {
        code: 404,
        ..Default::default()
    };
    assert_eq!(
        format!("{:#}", missing_error("namespace.gone", &bare)),
        "namespace gone does not exist (gate namespace.gone: not found)"
    );
    // kube-apiserver's answer for a resource it does not serve names nothing.
    let not_served = status(
        "the server could not find the requested resource",
        json!({}),
    );
    assert_eq!(not_found(&not_served), Some(NotFound::Resource));
    assert_eq!(
        not_found(&kube::core::Status {
            code: 404,
            ..Default::default()
        }),
        Some(NotFound::Resource)
    );
    assert_eq!(
        not_found(&kube::core::Status {
            code: 403,
            ..Default::default()
        }),
        None
    );
}

#[test]
fn check_and_wait_with_node_ask_the_nodes_gate() {
    // What lib.rs's scope gives check/wait --node (every namespace) maps to the node's gate.
    assert_eq!(
        name_for(&global(&["check", "--node", "w1"]), &Scope::All).as_deref(),
        Some("node.w1")
    );
    assert_eq!(
        name_for(&global(&["wait", "--component", "kv"]), &Scope::All).as_deref(),
        Some("component.kv")
    );
}

fn gate(status: &str, active: u64, expected: Option<&str>) -> MaintenanceGate {
    let mut v = json!({
        "metadata": {"name": "node.w1"},
        "status": {
            "conditions": [{"type": "Clear", "status": status, "reason": "r", "message": "m",
                            "lastTransitionTime": "2026-11-22T10:00:00Z"}],
            "activeOperations": active,
        },
    });
    if let Some(t) = expected {
        v["status"]["expectedClearTime"] = json!(t);
    }
    serde_json::from_value(v).unwrap()
}

#[test]
fn summaries_say_the_verdict_and_when() {
    let now: Timestamp = "2026-11-22T10:38:00Z".parse().unwrap();
    assert_eq!(
        summary(&gate("True", 0, None), now),
        "clear: nothing in flight"
    );
    assert_eq!(
        summary(&gate("False", 2, None), now),
        "not clear: 2 operations"
    );
    let s = summary(&gate("False", 2, Some("2026-11-22T10:42:00Z")), now);
    assert!(
        s.starts_with("not clear: 2 operations (expected clear in ~4m, at "),
        "{s}"
    );
    assert_eq!(gate("Unknown", 0, None).status.verdict(), Verdict::Unknown);
    assert_eq!(summary(&gate("Unknown", 0, None), now), "unknown: m");
    assert_eq!(
        MaintenanceGate::<ifo_model::GateOperation>::default()
            .status
            .verdict(),
        Verdict::Unknown
    );
}

#[test]
fn stalled_operations_show_in_the_summary_and_the_operations() {
    let now: Timestamp = "2026-11-22T10:38:00Z".parse().unwrap();
    let mut g = gate("False", 2, None);
    g.status.conditions.push(
        serde_json::from_value(json!({"type": "Stalled", "status": "True",
                "reason": "OperationsStalled", "message": "m",
                "lastTransitionTime": "2026-11-22T10:00:00Z"}))
        .unwrap(),
    );
    g.status.operations = serde_json::from_value(json!([
        {"name": "a", "kind": "InFlightOperation", "operation": "Importing",
         "subject": {"kind": "DataVolume", "name": "dv"}, "progress": 45.0,
         "expectedEnd": "2026-11-22T10:42:00Z", "stalled": true},
        {"name": "b", "kind": "InFlightOperation", "operation": "Migrating",
         "subject": {"kind": "VirtualMachine", "name": "vm"}, "stalled": false},
    ]))
    .unwrap();
    assert_eq!(summary(&g, now), "not clear: 2 operations, 1 stalled");
    let out = operations(&g, now);
    let lines: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(&lines[0][6..], ["PROGRESS", "EXPECTED", "STALLED"]);
    assert!(lines[1].ends_with(&["Importing", "<unknown>", "45%", "~4m", "yes"]));
    assert!(lines[2].ends_with(&["Migrating", "<unknown>"]), "{out}");
}

#[test]
fn the_table_colours_the_verdict() {
    let now: Timestamp = "2026-11-22T10:38:00Z".parse().unwrap();
    let out = table(
        &[gate("False", 2, Some("2026-11-22T10:42:00Z"))],
        now,
        Colours::OFF,
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        ["NAME", "CLEAR", "ACTIVE", "EXPECTED", "OLDEST", "MESSAGE"]
    );
    assert_eq!(
        lines[1].split_whitespace().collect::<Vec<_>>(),
        ["node.w1", "False", "2", "~4m", "m"]
    );
    let coloured = table(&[gate("Unknown", 0, None)], now, Colours::ON);
    assert!(coloured.contains("\u{1b}[31mUnknown"), "{coloured}");
}

#[test]
fn an_override_in_force_shows_in_the_table_and_ended_ones_do_not() {
    let gate = |overridden: &str| -> MaintenanceGate {
        serde_json::from_value(json!({
            "metadata": {"name": "node.w1"},
            "status": {"conditions": [
                {"type": "Clear", "status": "False", "reason": "OperationsInFlight",
                 "message": "Pod b/p Protected", "lastTransitionTime": "2026-11-22T10:00:00Z"},
                {"type": "Overridden", "status": overridden, "reason": "OverrideSet",
                 "message": "evictions of pods on node w1 are let through\u{1b}[2J",
                 "lastTransitionTime": "2026-11-22T10:00:00Z"},
            ], "activeOperations": 1}
        }))
        .unwrap()
    };
    let held = gate("True");
    assert_eq!(
        overridden(&held).as_deref(),
        Some("evictions of pods on node w1 are let through")
    );
    let table = table(&[held], Timestamp::now(), Colours::OFF);
    assert!(
        table.contains("Pod b/p Protected (maintenance guard overridden)"),
        "{table}"
    );
    let ended = gate("False");
    assert_eq!(overridden(&ended), None);
    assert!(!table_of(&ended).contains("overridden"));
}

fn table_of(gate: &MaintenanceGate) -> String {
    table(std::slice::from_ref(gate), Timestamp::now(), Colours::OFF)
}
