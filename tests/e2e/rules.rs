//! The rule engine against a real cluster: rulesets become Ready (or say why not), and subjects
//! moving through states produce, keep and complete operations.

use ifo_dev::User;
use ifo_test_support::{MIGRATING, Rule, RuleSet, env, eventually, vm, vm_ruleset};
use serde_json::json;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

#[test]
fn ruleset_becomes_ready_and_detects_operations_with_labels_and_messages() {
    let env = env();
    let (ns, rs) = env.namespace_with_ruleset("detect", "vm-rules", vm_ruleset);
    env.wait_ruleset_condition(&rs, "Ready", "True", WAIT);
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
    let op = eventually(WAIT, "a Migrating operation", || {
        env.ifos(&ns)
            .into_iter()
            .find(|o| o["spec"]["operation"] == "Migrating")
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
    let (ns, rs) = env.namespace_with_ruleset("flap", "vm-rules", vm_ruleset);
    env.wait_ruleset_condition(&rs, "Ready", "True", WAIT);
    env.apply(&vm("vm1", &ns));
    env.set_vm_status(&ns, "vm1", json!({"printableStatus": "Migrating"}));
    let first = eventually(WAIT, "Migrating", || env.ifos(&ns).into_iter().next());
    let uid = first["metadata"]["uid"].clone();
    let rv = first["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let watch = env.watch(&format!(
        "/apis/live.ifo.kubevirt.io/v1alpha1/namespaces/{ns}/inflightoperations?watch=true&resourceVersion={rv}"
    ));

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
    let completed = events
        .iter()
        .find(|e| e["type"] == "MODIFIED" && e["object"]["status"]["phase"] == "Completed")
        .unwrap_or_else(|| panic!("no Completed event: {events:#?}"));
    assert_eq!(completed["object"]["status"]["outcome"], "Failed");
    assert!(completed["object"]["status"]["completed"].is_string());
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
    let (ns, rs) = env.namespace_with_ruleset("ends", "vm-rules", vm_ruleset);
    env.wait_ruleset_condition(&rs, "Ready", "True", WAIT);
    env.apply(&vm("vm1", &ns));
    env.apply(&vm("vm2", &ns));
    env.set_vm_status(&ns, "vm1", json!({"printableStatus": "Starting"}));
    env.set_vm_status(&ns, "vm2", json!({"printableStatus": "Starting"}));
    let ops = eventually(WAIT, "two operations", || {
        Some(env.ifos(&ns)).filter(|o| o.len() == 2)
    });
    let rv = ops[0]["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .max(ops[1]["metadata"]["resourceVersion"].as_str().unwrap())
        .to_string();
    let watch = env.watch(&format!(
        "/apis/live.ifo.kubevirt.io/v1alpha1/namespaces/{ns}/inflightoperations?watch=true&resourceVersion={rv}"
    ));

    env.kubectl(User::Admin, &["delete", "vm", "vm1", "-n", &ns])
        .unwrap();
    let events = watch.until(WAIT, "vm1 completed", |e| {
        e["object"]["spec"]["subject"]["name"] == "vm1" && e["type"] == "DELETED"
    });
    let done = events
        .iter()
        .find(|e| e["object"]["status"]["phase"] == "Completed")
        .expect("a Completed event");
    assert_eq!(done["object"]["status"]["outcome"], "SubjectDeleted");

    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
    let events = watch.until(WAIT, "vm2 completed", |e| {
        e["object"]["spec"]["subject"]["name"] == "vm2" && e["type"] == "DELETED"
    });
    let done = events
        .iter()
        .find(|e| e["object"]["status"]["phase"] == "Completed")
        .expect("a Completed event");
    assert_eq!(done["object"]["status"]["outcome"], "RuleSetRemoved");
    assert!(env.ifos(&ns).is_empty());
}

#[test]
fn namespaced_ruleset_ignores_other_namespaces() {
    let env = env();
    let watched = env.namespace("watched");
    let other = env.namespace("other");
    let rs = format!("vm-rules-{watched}");
    env.apply(&vm_ruleset(&rs, &watched));
    env.wait_ruleset_condition(&rs, "Ready", "True", WAIT);
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
    let ns = env.namespace("later");
    let rs = format!("widgets-{ns}");
    let group = "test.ifo.example.com";
    env.apply(
        &RuleSet::new(&rs)
            .target(group, "v1", "widgets")
            .rule(Rule::new(
                "Spinning",
                "object.?status.?spinning.orValue(false)",
            ))
            .to_string(),
    );
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
    eventually(WAIT, "a Spinning operation", || {
        env.ifos(&ns)
            .into_iter()
            .find(|o| o["spec"]["operation"] == "Spinning")
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

#[test]
fn bad_progress_and_stalled_values_are_rule_errors_never_served() {
    let env = env();
    let (ns, rs) = env.namespace_with_ruleset("badprogress", "progress", |rs, ns| {
        RuleSet::vms_of(rs, "kubevirt", ns)
            .rule(
                Rule::new("Migrating", MIGRATING)
                    .set("progress", "object.?status.?progress.orValue('')")
                    .set("stalled", "object.?status.?stuck.orValue(false)"),
            )
            .to_string()
    });
    env.apply(&vm("vm1", &ns));
    env.wait_watching(&rs);
    env.set_vm_status(
        &ns,
        "vm1",
        json!({"printableStatus": "Migrating", "progress": "12.5%", "stuck": "disk full"}),
    );
    let op = eventually(WAIT, "progress and a stall", || {
        env.ifos(&ns)
            .into_iter()
            .find(|o| o["status"]["progress"] == 12.5)
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
    let op = eventually(WAIT, "no progress and no stall", || {
        env.ifos(&ns)
            .into_iter()
            .find(|o| o["status"].get("progress").is_none())
    });
    assert_eq!(op["status"]["conditions"], json!([]), "{op:#}");
}
