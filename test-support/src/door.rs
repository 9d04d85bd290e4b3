//! The rulesets' admission door as `kubectl apply` meets it: applies, refusals and what kubectl
//! printed, rulesets stored or not, and a namespace once kube-apiserver calls the door.

use crate::{Env, eventually};
use ifo_dev::{RULESET_WEBHOOK, User};
use serde_json::{Value, json};
use std::io::Write;
use std::process::{Output, Stdio};
use std::time::Duration;

/// How kube-apiserver prefixes the door's refusals.
pub fn denied_by() -> String {
    format!("admission webhook \"{RULESET_WEBHOOK}.ifo.kubevirt.io\" denied the request")
}

/// `kubectl apply -f -` of `manifest` as admin, with `extra` arguments: its output whatever it is.
pub fn apply(env: &Env, manifest: &str, extra: &[&str]) -> Output {
    let mut child = env
        .cluster
        .kubectl(User::Admin)
        .args(["apply", "-f", "-"])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(manifest.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// Applies `manifest`, which must be refused; returns kubectl's stderr.
pub fn refused(env: &Env, manifest: &str) -> String {
    let out = apply(env, manifest, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success(),
        "kubectl apply succeeded: {}{stderr}",
        String::from_utf8_lossy(&out.stdout)
    );
    stderr
}

/// A VirtualMachine ruleset in `ns` with `rules`.
pub fn ruleset(name: &str, ns: &str, rules: Value) -> String {
    let vms = json!({"group": "kubevirt.io", "version": "v1", "resource": "virtualmachines"});
    ruleset_over(name, ns, vms, rules)
}

/// A ruleset over `target` (`{group, version, resource}`) in `ns` with `rules`.
pub fn ruleset_over(name: &str, ns: &str, target: Value, rules: Value) -> String {
    json!({
        "apiVersion": "ifo.kubevirt.io/v1alpha1",
        "kind": "OperationRuleSet",
        "metadata": {"name": name},
        "spec": {"target": target, "namespaces": [ns], "rules": rules},
    })
    .to_string()
}

/// A Job ruleset in `ns` whose one rule, `Running`, is `expression`.
pub fn job_ruleset(name: &str, ns: &str, expression: &str) -> String {
    ruleset_over(
        name,
        ns,
        json!({"group": "batch", "version": "v1", "resource": "jobs"}),
        json!([{"operation": "Running", "expression": expression}]),
    )
}

/// The CRD of `gadgets.<group>` with a closed schema: `status.phase`, `status.conditions[]`
/// (`type`, `status`, `reason`, `message`), `spec.size`.
pub fn closed_gadget_crd(group: &str) -> String {
    let string = json!({"type": "string"});
    crate::gadget_crd_serving(
        group,
        json!({
            "name": "v1",
            "served": true,
            "storage": true,
            "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "apiVersion": string,
                    "kind": string,
                    "metadata": {"type": "object"},
                    "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                    "status": {"type": "object", "properties": {
                        "phase": string,
                        "conditions": {"type": "array", "items": {"type": "object", "properties": {
                            "type": string, "status": string, "reason": string, "message": string,
                        }}},
                    }},
                },
            }},
        }),
    )
}

/// `kubectl apply` (with `extra`) of `manifest` succeeds; its stderr (the warnings).
pub fn accepted(env: &Env, manifest: &str, extra: &[&str]) -> String {
    let out = apply(env, manifest, extra);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "kubectl apply failed: {}{stderr}",
        String::from_utf8_lossy(&out.stdout)
    );
    stderr
}

/// A rule that compiles and one that does not (the expression ends too early, at 1:33).
pub fn broken_rules() -> Value {
    json!([
        {"operation": "Ok", "expression": "true"},
        {"operation": "Broken", "expression": "object.status.printableStatus =="},
    ])
}

/// A fresh namespace (named after `prefix`), once kube-apiserver calls the door (it picks a new
/// webhook registration up within a second or so): a server-side dry run of a broken ruleset is
/// refused by it. Creates nothing else.
pub fn door_open(env: &Env, prefix: &str) -> String {
    let ns = env.namespace(prefix);
    let probe = ruleset(&format!("probe-{ns}"), &ns, broken_rules());
    eventually(Duration::from_secs(30), "the webhook in effect", || {
        let out = apply(env, &probe, &["--dry-run=server"]);
        String::from_utf8_lossy(&out.stderr)
            .contains(&denied_by())
            .then_some(())
    });
    ns
}

/// `said` (what kubectl printed) holds every one of `wanted`.
pub fn said_all(said: &str, wanted: &[&str]) {
    for w in wanted {
        assert!(said.contains(w), "{w:?} not in:\n{said}");
    }
}

/// The ruleset `name`, refused, was not created.
pub fn not_created(env: &Env, name: &str) {
    assert!(
        stored(env, name).is_none(),
        "the refused ruleset {name} was created"
    );
}

/// The ruleset `name` as the cluster has it, if it has it.
pub fn stored(env: &Env, name: &str) -> Option<Value> {
    let out = env
        .kubectl(
            User::Admin,
            &["get", "ors", name, "--ignore-not-found", "-o", "json"],
        )
        .unwrap();
    (!out.trim().is_empty()).then(|| serde_json::from_str(&out).unwrap())
}
