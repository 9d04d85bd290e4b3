//! Gadgets: a schemaless namespaced kind of a test's own group (kube-apiserver stores anything
//! in it), for what VirtualMachines cannot show: a target the server may not read (nothing
//! grants it), or one whose CRD goes away while a ruleset watches it.

use crate::{Env, Rule, RuleSet, Scope};
use ifo_dev::User;
use serde_json::{Value, json};

/// The expression of a gadget's `Busy` operation: in flight while `status.busy` is true.
pub const BUSY: &str = "object.?status.?busy.orValue(false)";

/// The CRD of `gadgets.<group>` (`Gadget`, namespaced, `v1`, any content).
pub fn gadget_crd(group: &str) -> String {
    gadget_crd_serving(
        group,
        json!({"name": "v1", "served": true, "storage": true,
            "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}),
    )
}

/// The CRD of `gadgets.<group>` (`Gadget`, namespaced) serving the one `version` (an item of
/// `spec.versions`: its name, schema and subresources).
pub fn gadget_crd_serving(group: &str, version: Value) -> String {
    crd_serving(group, "Gadget", version)
}

/// The CRD of the namespaced kind `kind` of `group` (its plural: the kind in lower case with an
/// `s`) serving the one `version` (an item of `spec.versions`).
pub fn crd_serving(group: &str, kind: &str, version: Value) -> String {
    let singular = kind.to_ascii_lowercase();
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{singular}s.{group}")},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": format!("{singular}s"), "singular": singular, "listKind": format!("{kind}List")},
            "versions": [version],
        }
    })
    .to_string()
}

/// Creates the kind `gadgets.<group>` ([`gadget_crd`]) and waits until kube-apiserver serves it.
pub fn create_gadget_crd(env: &Env, group: &str) {
    establish_gadget_crd(env, group, &gadget_crd(group));
}

/// Applies `crd`, the CRD of `gadgets.<group>`, and waits (60 s at the most) until
/// kube-apiserver serves the kind.
pub fn establish_gadget_crd(env: &Env, group: &str, crd: &str) {
    env.apply(crd);
    env.kubectl(
        User::Admin,
        &[
            "wait",
            "--for=condition=Established",
            &format!("crd/gadgets.{group}"),
            "--timeout=60s",
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

impl Env {
    /// A [`Scope`] whose group has the kind `Gadget` ([`create_gadget_crd`]), which the server
    /// may read in its namespace ([`grant_gadgets`]).
    pub fn gadget_scope(&self, prefix: &str) -> Scope {
        let scope = self.scope(prefix);
        create_gadget_crd(self, &scope.group);
        grant_gadgets(self, &scope.ns, &scope.group);
        scope
    }
}

impl Scope {
    /// The scope's ruleset, of its component, on the gadgets of its group in its namespace,
    /// without rules yet.
    pub fn gadgets_ruleset(&self) -> RuleSet {
        RuleSet::new(&self.rs)
            .component(&self.component)
            .gadgets(&self.group)
            .namespaces(&[&self.ns])
    }

    /// The scope's ruleset detecting `Busy` ([`BUSY`]) on its gadgets.
    pub fn busy_gadgets(&self) -> RuleSet {
        self.gadgets_ruleset().rule(Rule::new("Busy", BUSY))
    }

    /// A Gadget `name` of the scope's group in its namespace with `status`.
    pub fn gadget(&self, name: &str, status: Value) -> String {
        gadget(&self.group, name, &self.ns, status)
    }

    /// Deletes the scope's ruleset and its kind of gadgets.
    pub fn delete_gadgets(&self, env: &Env) {
        self.delete_ruleset(env);
        env.kubectl(
            User::Admin,
            &["delete", "crd", &format!("gadgets.{}", self.group)],
        )
        .unwrap();
    }
}
