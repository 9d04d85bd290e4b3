//! The evaluation budget against a real cluster: a ruleset that keeps going over it is reported
//! and suspended, while a ruleset of the same target in another namespace keeps detecting promptly.

use ifo_dev::User;
use ifo_test_support::{HEAVY, env, eventually, heavy_vm};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(30);

/// Longest the server may add to a normal ruleset's detection beside an over-budget one, after
/// kube-apiserver delivered the change itself. Before evaluation had its own lanes, the
/// over-budget ruleset's evaluations sat in front of it: 8.7 s were measured.
const PROMPT: Duration = Duration::from_secs(2);

fn condition(ruleset: &str, type_: &str) -> Option<Value> {
    let ors = env().get_json(User::Admin, &["get", "ors", ruleset]);
    ors["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .cloned()
}

fn wait_reason(ruleset: &str, type_: &str, reason: &str) -> Value {
    eventually(WAIT, &format!("{ruleset} {type_} reason {reason}"), || {
        condition(ruleset, type_).filter(|c| c["reason"] == reason)
    })
}

/// A ruleset for VirtualMachines in `namespace` whose rule is cheap by its compile-time estimate
/// but iterates `object.spec.n` times over a large annotation at run time.
fn heavy_ruleset(name: &str, namespace: &str, rule: &str) -> String {
    json!({
        "apiVersion": "ifo.kubevirt.io/v1alpha1",
        "kind": "OperationRuleSet",
        "metadata": {"name": name},
        "spec": {
            "component": "test",
            "target": {"group": "kubevirt.io", "version": "v1", "resource": "virtualmachines"},
            "namespaces": [namespace],
            "rules": [{"operation": "Heavy", "expression": rule}],
        }
    })
    .to_string()
}

#[test]
fn an_over_budget_ruleset_is_suspended_and_does_not_delay_another() {
    let env = env();
    let heavy_ns = env.namespace("cost-heavy");
    let heavy = format!("heavy-{heavy_ns}");
    let (normal_ns, normal) = env.vms_with_ruleset("cost-normal", &["vm1"]);
    env.apply(&heavy_ruleset(&heavy, &heavy_ns, HEAVY));
    env.wait_watching(&heavy);

    let ops = env.watch(&format!(
        "/apis/live.ifo.kubevirt.io/v1alpha1/namespaces/{normal_ns}/inflightoperations?watch=true"
    ));
    // The same change as kube-apiserver delivers it to any watcher: the floor the server's delay
    // is measured from (the suite's other tests load the same two cores).
    let vms = env.watch(&format!(
        "/apis/kubevirt.io/v1/namespaces/{normal_ns}/virtualmachines?watch=true"
    ));
    // Each of these costs the heavy ruleset a whole evaluation budget.
    for i in 0..8 {
        env.apply(&heavy_vm(&format!("heavy-{i}"), &heavy_ns));
    }
    let started = Instant::now();
    env.set_status(
        "vm",
        &normal_ns,
        "vm1",
        json!({"printableStatus": "Migrating"}),
    );
    let (_, changed) = vms.until_timed(WAIT, "the VM's change", |ev| {
        ev["object"]["status"]["printableStatus"] == "Migrating"
    });
    let (_, detected) = ops.until_timed(WAIT, "the normal ruleset's operation", |ev| {
        ev["object"]["spec"]["operation"] == "Migrating"
    });
    let delay = detected.saturating_duration_since(changed);
    println!(
        "detection delay of a normal ruleset beside an over-budget one: {delay:?} after \
         kube-apiserver's own event ({:?} after the change was sent)",
        detected.saturating_duration_since(started)
    );
    assert!(
        delay < PROMPT,
        "detection took {delay:?} after the VM's event"
    );

    let cost = wait_reason(&heavy, "CostExceeded", "Suspended");
    assert_eq!(cost["status"], "True");
    let message = cost["message"].as_str().unwrap();
    assert!(message.contains("rule Heavy"), "{message}");
    assert!(message.contains("limit"), "{message}");
    let ready = wait_reason(&heavy, "Ready", "Suspended");
    assert_eq!(ready["status"], "False");
    // The normal ruleset is untouched.
    let normal_cost = condition(&normal, "CostExceeded").unwrap();
    assert_eq!(normal_cost["status"], "False");

    // Direct callers need a token: alice's, with the right to read metrics.
    let binding = format!("alice-monitoring-{heavy_ns}");
    env.kubectl(
        User::Admin,
        &[
            "create",
            "clusterrolebinding",
            &binding,
            "--clusterrole=system:monitoring",
            "--user=alice",
        ],
    )
    .unwrap();
    let metrics = eventually(WAIT, "alice reads /metrics", || {
        env.kubectl_direct(User::Alice, &["get", "--raw", "/metrics"])
            .ok()
    });
    env.kubectl(User::Admin, &["delete", "clusterrolebinding", &binding])
        .unwrap();
    let counted = format!("ifo_evaluation_cost_exceeded_total{{ruleset=\"{heavy}\"}}");
    assert!(metrics.contains(&counted), "{counted} missing");
    assert!(
        metrics.contains(&format!(
            "ifo_ruleset_suspensions_total{{ruleset=\"{heavy}\"}} 1"
        )),
        "suspension not counted"
    );

    // A fixed ruleset (a new generation) runs again.
    env.apply(&heavy_ruleset(
        &heavy,
        &heavy_ns,
        "object.spec.?n.orValue(0) > 100000",
    ));
    wait_reason(&heavy, "CostExceeded", "WithinBudget");
    wait_reason(&heavy, "Ready", "WatchActive");

    env.kubectl(User::Admin, &["delete", "ors", &heavy, &normal])
        .unwrap();
}
