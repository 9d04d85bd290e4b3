//! The rule engine against a real cluster: rulesets become Ready (or say why not), and subjects
//! moving through states produce, keep and complete operations.

use ifo_dev::User;
use ifo_test_support::{
    Env, MIGRATING, Rule, RuleSet, completion, env, eventually, vm, vm_ruleset,
};
use serde_json::json;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

/// A fresh namespace (named after `prefix`) with a [`vm_ruleset`] for it, Ready. Returns the
/// namespace and the ruleset's name.
fn ready_ruleset(env: &Env, prefix: &str) -> (String, String) {
    let (ns, rs) = env.namespace_with_ruleset(prefix, "vm-rules", vm_ruleset);
    env.wait_ruleset_condition(&rs, "Ready", "True", WAIT);
    (ns, rs)
}

#[test]
fn ruleset_becomes_ready_and_detects_operations_with_labels_and_messages() {
    let env = env();
    let (ns, rs) = ready_ruleset(env, "detect");
    let ors = env.get_json(User::Admin, &["get", "ors", &rs]);
    assert_eq!(ors["status"]["watchActive"], true);
    assert_eq!(
        ors["status"]["observedGeneration"],
        ors["metadata"]["generation"]
    );

    env.apply(&vm("vm1", &ns));
    env.set_vm_status(
        &ns,
        "vm1",
        json!({"printableStatus": "Migrating", "migrationTarget": "node-2", "nodeName": "node-1"}),
    );
    let op = env.wait_ifo(&ns, "a Migrating operation", |o| {
        o["spec"]["operation"] == "Migrating"
    });
    assert_eq!(op["kind"], "InFlightOperation");
    assert_eq!(op["apiVersion"], "live.ifo.kubevirt.io/v1alpha1");
    assert_eq!(op["metadata"]["namespace"], ns.as_str());
    assert_eq!(op["status"]["phase"], "Active");
    assert_eq!(op["status"]["message"], "to node-2");
    assert_eq!(op["spec"]["ruleSet"], rs.as_str());
    assert_eq!(op["spec"]["component"], "kubevirt");
    assert_eq!(op["spec"]["subject"]["kind"], "VirtualMachine");
    assert_eq!(op["spec"]["subject"]["name"], "vm1");
    let labels = &op["metadata"]["labels"];
    // Built-in beats static, static is kept, dynamic comes from the expression, owner from the first ownerRef.
    assert_eq!(labels["ifo.kubevirt.io/operation"], "Migrating");
    assert_eq!(labels["example.com/team"], "virt");
    assert_eq!(labels["example.com/node"], "node-1");
    assert_eq!(labels["ifo.kubevirt.io/subject-name"], "vm1");
    assert_eq!(labels["ifo.kubevirt.io/owner-kind"], "VirtualMachinePool");
    assert_eq!(labels["ifo.kubevirt.io/owner-group"], "pool.kubevirt.io");
    assert_eq!(labels["ifo.kubevirt.io/owner-version"], "v1alpha1");
    let active = eventually(WAIT, "activeOperations=1", || {
        let ors = env.get_json(User::Admin, &["get", "ors", &rs]);
        (ors["status"]["activeOperations"] == 1).then_some(ors)
    });
    assert_eq!(active["status"]["activeOperations"], 1);
    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}

#[test]
fn flapping_within_the_grace_is_one_occurrence_and_completion_carries_the_outcome() {
    let env = env();
    let (ns, rs) = ready_ruleset(env, "flap");
    env.apply(&vm("vm1", &ns));
    env.set_vm_status(&ns, "vm1", json!({"printableStatus": "Migrating"}));
    let first = eventually(WAIT, "Migrating", || env.ifos(&ns).into_iter().next());
    let uid = first["metadata"]["uid"].clone();
    let watch = env.watch_ifos(&ns, first["metadata"]["resourceVersion"].as_str().unwrap());

    // Out of the state and back within the 3 s grace: the same occurrence, never completed.
    env.set_vm_status(&ns, "vm1", json!({"printableStatus": "Running"}));
    std::thread::sleep(Duration::from_millis(500));
    env.set_vm_status(&ns, "vm1", json!({"printableStatus": "Migrating"}));
    std::thread::sleep(Duration::from_secs(4));
    let ops = env.ifos(&ns);
    assert_eq!(ops.len(), 1, "{ops:#?}");
    assert_eq!(ops[0]["metadata"]["uid"], uid);
    assert_eq!(ops[0]["status"]["phase"], "Active");

    // Out of the state for good, with a failed migration: Completed (Failed), then removed.
    env.set_vm_status(
        &ns,
        "vm1",
        json!({"printableStatus": "Running", "lastMigration": "Failed"}),
    );
    let events = watch.until(WAIT, "DELETED", |e| e["type"] == "DELETED");
    assert_eq!(completion(&events)["outcome"], "Failed");
    assert!(
        events.iter().all(|e| e["type"] != "ADDED"),
        "flapping made a second occurrence: {events:#?}"
    );
    assert!(env.ifos(&ns).is_empty());
    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}

#[test]
fn deleted_subject_and_deleted_ruleset_end_their_operations() {
    let env = env();
    let (ns, rs) = ready_ruleset(env, "ends");
    for name in ["vm1", "vm2"] {
        env.apply(&vm(name, &ns));
        env.set_vm_status(&ns, name, json!({"printableStatus": "Starting"}));
    }
    let ops = eventually(WAIT, "two operations", || {
        Some(env.ifos(&ns)).filter(|o| o.len() == 2)
    });
    let rv = ops[0]["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .max(ops[1]["metadata"]["resourceVersion"].as_str().unwrap());
    let watch = env.watch_ifos(&ns, rv);

    // The outcome `subject`'s operation completes with, up to its deletion.
    let outcome = |subject: &str| {
        let events = watch.until(WAIT, &format!("{subject} completed"), |e| {
            e["object"]["spec"]["subject"]["name"] == subject && e["type"] == "DELETED"
        });
        let done = events
            .iter()
            .find(|e| e["object"]["status"]["phase"] == "Completed")
            .expect("a Completed event");
        done["object"]["status"]["outcome"].clone()
    };

    env.kubectl(User::Admin, &["delete", "vm", "vm1", "-n", &ns])
        .unwrap();
    assert_eq!(outcome("vm1"), "SubjectDeleted");
    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
    assert_eq!(outcome("vm2"), "RuleSetRemoved");
    assert!(env.ifos(&ns).is_empty());
}

#[test]
fn namespaced_ruleset_ignores_other_namespaces() {
    let env = env();
    let (watched, rs) = ready_ruleset(env, "watched");
    let other = env.namespace("other");
    env.apply(&vm("vm1", &other));
    env.apply(&vm("vm1", &watched));
    env.set_vm_status(&other, "vm1", json!({"printableStatus": "Starting"}));
    env.set_vm_status(&watched, "vm1", json!({"printableStatus": "Starting"}));
    eventually(WAIT, "the watched namespace's operation", || {
        env.ifos(&watched).into_iter().next()
    });
    assert!(env.ifos(&other).is_empty());
    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}

// A ruleset that does not compile is refused when it is applied (`admission.rs`); what its
// status says when one gets past that door (a server down while it is applied) is checked in
// `tests/blind.rs`, whose cluster sends rulesets to no door.

#[test]
fn ruleset_whose_target_appears_later_becomes_ready_by_itself() {
    let env = env();
    let group = "test.ifo.example.com";
    let (ns, rs) = env.namespace_with_ruleset("later", "widgets", |rs, _| {
        RuleSet::new(rs)
            .target(group, "v1", "widgets")
            .rule(Rule::new(
                "Spinning",
                "object.?status.?spinning.orValue(false)",
            ))
            .to_string()
    });
    let invalid = env.wait_ruleset_condition(&rs, "InvalidTarget", "True", WAIT);
    assert!(invalid["message"].as_str().unwrap().contains("widgets"));
    env.apply(&format!(
        r#"{{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{{"name":"widgets.{group}"}},
"spec":{{"group":"{group}","scope":"Namespaced","names":{{"kind":"Widget","plural":"widgets","singular":"widget","listKind":"WidgetList"}},
 "versions":[{{"name":"v1","served":true,"storage":true,"subresources":{{"status":{{}}}},
   "schema":{{"openAPIV3Schema":{{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}}}}]}}}}"#
    ));
    env.wait_ruleset_condition(&rs, "Ready", "True", WAIT);
    env.apply(&format!(r#"{{"apiVersion":"{group}/v1","kind":"Widget","metadata":{{"name":"w1","namespace":"{ns}"}}}}"#));
    env.set_status(
        &format!("widgets.{group}"),
        &ns,
        "w1",
        json!({"spinning": true}),
    );
    env.wait_ifo(&ns, "a Spinning operation", |o| {
        o["spec"]["operation"] == "Spinning"
    });
    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}

#[test]
fn deleting_a_ruleset_while_its_subjects_change_leaves_no_operation_active() {
    let env = env();
    let vms = ["vm1", "vm2", "vm3", "vm4"];
    let (ns, rs) = env.vms_with_ruleset("delete-race", &vms);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Each subject flips between two detected states as fast as kubectl can write them, so
    // events are being evaluated when the deletion arrives.
    let churn: Vec<_> = vms
        .iter()
        .map(|name| {
            let (ns, name, stop) = (ns.clone(), name.to_string(), stop.clone());
            std::thread::spawn(move || {
                let mut n = 0u32;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let state = if n.is_multiple_of(2) {
                        "Migrating"
                    } else {
                        "Starting"
                    };
                    env.set_vm_status(&ns, &name, json!({"printableStatus": state}));
                    n += 1;
                }
                n
            })
        })
        .collect();
    eventually(WAIT, "operations under churn", || {
        (env.ifos(&ns).len() >= 2).then_some(())
    });
    std::thread::sleep(Duration::from_millis(500));
    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
    // Keep changing the subjects while the deletion is processed.
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let writes: u32 = churn.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(writes >= 8, "only {writes} status writes");
    // Past the debounce (3 s): nothing of the deleted ruleset may still be Active.
    std::thread::sleep(Duration::from_secs(5));
    let active: Vec<_> = env
        .ifos(&ns)
        .into_iter()
        .filter(|o| o["spec"]["ruleSet"] == rs.as_str() && o["status"]["phase"] == "Active")
        .collect();
    assert!(active.is_empty(), "still Active: {active:#?}");
}

/// A ruleset for the VirtualMachines of `namespace` whose `Migrating` takes its progress and
/// its stall from the object's status, whatever their types.
fn progress_ruleset(name: &str, namespace: &str) -> String {
    RuleSet::vms_of(name, "kubevirt", namespace)
        .rule(
            Rule::new("Migrating", MIGRATING)
                .set("progress", "object.?status.?progress.orValue('')")
                .set("stalled", "object.?status.?stuck.orValue(false)"),
        )
        .to_string()
}

#[test]
fn bad_progress_and_stalled_values_are_rule_errors_never_served() {
    let env = env();
    let (ns, rs) = env.vms_watched_by("badprogress", "progress", progress_ruleset, &["vm1"]);
    env.set_vm_status(
        &ns,
        "vm1",
        json!({"printableStatus": "Migrating", "progress": "12.5%", "stuck": "disk full"}),
    );
    let op = env.wait_ifo(&ns, "progress and a stall", |o| {
        o["status"]["progress"] == 12.5
    });
    assert_eq!(op["status"]["conditions"][0]["type"], "Stalled", "{op:#}");
    assert_eq!(op["status"]["conditions"][0]["reason"], "ReportedByRule");
    assert_eq!(op["status"]["conditions"][0]["message"], "disk full");

    // Out of range, and neither bool nor string: errors, and the last good values stay.
    env.set_vm_status(
        &ns,
        "vm1",
        json!({"printableStatus": "Migrating", "progress": 140, "stuck": 3}),
    );
    let errors = env.wait_ruleset_condition(&rs, "RuleErrors", "True", WAIT);
    let message = errors["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("rule Migrating progress") || message.contains("rule Migrating stalled"),
        "{errors:#}"
    );
    let op = env
        .ifos(&ns)
        .into_iter()
        .find(|o| o["spec"]["subject"]["name"] == "vm1")
        .unwrap();
    assert_eq!(op["status"]["progress"], 12.5, "{op:#}");
    assert_eq!(
        op["status"]["conditions"][0]["message"], "disk full",
        "{op:#}"
    );

    // A valid "not stalled" and a progress the object no longer reports.
    env.set_vm_status(
        &ns,
        "vm1",
        json!({"printableStatus": "Migrating", "progress": "", "stuck": false}),
    );
    let op = env.wait_ifo(&ns, "no progress and no stall", |o| {
        o["status"].get("progress").is_none()
    });
    assert_eq!(op["status"]["conditions"], json!([]), "{op:#}");
}
