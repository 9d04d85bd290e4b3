//! Gadgets: a schemaless namespaced kind of a test's own group (kube-apiserver stores anything
//! in it), for what VirtualMachines cannot show: a target the server may not read (nothing
//! grants it), or one whose CRD goes away while a ruleset watches it.

use crate::{Env, Rule, RuleSet};
use ifo_dev::User;
use serde_json::{Value, json};

/// The expression of a gadget's `Busy` operation: in flight while `status.busy` is true.
pub const BUSY: &str = "object.?status.?busy.orValue(false)";

/// The CRD of `gadgets.<group>` (`Gadget`, namespaced, `v1`, any content).
pub fn gadget_crd(group: &str) -> String {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("gadgets.{group}")},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": "Gadget", "plural": "gadgets", "singular": "gadget", "listKind": "GadgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}],
        }
    })
    .to_string()
}

/// Creates the kind `gadgets.<group>` ([`gadget_crd`]) and waits until kube-apiserver serves it.
pub fn create_gadget_crd(env: &Env, group: &str) {
    env.apply(&gadget_crd(group));
    env.kubectl(
        User::Admin,
        &[
            "wait",
            "--for=condition=Established",
            &format!("crd/gadgets.{group}"),
            "--timeout=30s",
        ],
    )
    .unwrap();
}

/// Lets the server read gadgets of `group` in `ns` (it may only read what it is granted, as in
/// a cluster).
pub fn grant_gadgets(env: &Env, ns: &str, group: &str) {
    env.apply(
        &json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "read-gadgets", "namespace": ns},
            "rules": [{"apiGroups": [group], "resources": ["gadgets"], "verbs": ["get", "list", "watch"]}],
        })
        .to_string(),
    );
    env.apply(
        &json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "read-gadgets", "namespace": ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-gadgets"},
            "subjects": [{"kind": "ServiceAccount", "name": "ifo-apiserver", "namespace": "ifo-system"}],
        })
        .to_string(),
    );
}

/// A Gadget `name` of `group` in `ns` with `status`.
pub fn gadget(group: &str, name: &str, ns: &str, status: Value) -> String {
    json!({
        "apiVersion": format!("{group}/v1"), "kind": "Gadget",
        "metadata": {"name": name, "namespace": ns},
        "status": status,
    })
    .to_string()
}

/// A ruleset of `component` detecting `Busy` ([`BUSY`]) on the gadgets of `group` in `namespace`.
pub fn busy_gadgets(name: &str, component: &str, group: &str, namespace: &str) -> String {
    RuleSet::new(name)
        .component(component)
        .gadgets(group)
        .namespaces(&[namespace])
        .rule(Rule::new("Busy", BUSY))
        .to_string()
}

impl RuleSet {
    /// Watches the gadgets of `group` ([`gadget_crd`]).
    pub fn gadgets(self, group: &str) -> Self {
        self.target(group, "v1", "gadgets")
    }
}
