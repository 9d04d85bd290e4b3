//! OperationRuleSets as typed builders, so a test says what its ruleset detects and nothing
//! else: `RuleSet::new(name).component(c).vms().namespaces(&[ns]).rule(Rule::new(op, expr))`.
//! Only the fields a test sets are written: a ruleset without `.component(..)` has none, as a
//! hand-written manifest without it would. And a ruleset's conditions, as kubectl reads them.

use crate::{Env, eventually};
use ifo_dev::User;
use serde_json::{Value, json};
use std::fmt;
use std::time::Duration;

/// An `OperationRuleSet` manifest being built; [`fmt::Display`] writes it as JSON, for
/// [`crate::Env::apply`].
#[derive(Clone, Debug)]
#[must_use = "a ruleset is applied with `env.apply(&ruleset.to_string())`"]
pub struct RuleSet(Value);

impl RuleSet {
    /// A ruleset named `name` with an empty spec.
    pub fn new(name: &str) -> Self {
        RuleSet(json!({
            "apiVersion": "ifo.kubevirt.io/v1alpha1",
            "kind": "OperationRuleSet",
            "metadata": {"name": name},
            "spec": {},
        }))
    }

    /// A ruleset of `component` on the VirtualMachines of `namespace`.
    pub fn vms_of(name: &str, component: &str, namespace: &str) -> Self {
        RuleSet::new(name)
            .component(component)
            .vms()
            .namespaces(&[namespace])
    }

    /// Sets `spec.<field>` to `value` (fields without a method of their own: `exclusive`,
    /// `relatedResources`, ...).
    pub fn spec(mut self, field: &str, value: impl Into<Value>) -> Self {
        self.0["spec"][field] = value.into();
        self
    }

    /// The component its operations belong to (`spec.component`).
    pub fn component(self, component: &str) -> Self {
        self.spec("component", component)
    }

    /// The kind it watches (`spec.target`).
    pub fn target(self, group: &str, version: &str, resource: &str) -> Self {
        self.spec(
            "target",
            json!({"group": group, "version": version, "resource": resource}),
        )
    }

    /// Watches VirtualMachines (`kubevirt.io/v1`, of the CRD in `tests/cluster/crds/`).
    pub fn vms(self) -> Self {
        self.target("kubevirt.io", "v1", "virtualmachines")
    }

    /// The namespaces it watches (`spec.namespaces`).
    pub fn namespaces(self, namespaces: &[&str]) -> Self {
        self.spec("namespaces", namespaces)
    }

    /// A static label of its operations (`spec.labels`).
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.0["spec"]["labels"][key] = value.into();
        self
    }

    /// A label of its operations computed from the object (`spec.labelExpressions`).
    pub fn label_expression(self, key: &str, expression: &str) -> Self {
        self.push(
            "labelExpressions",
            json!({"key": key, "expression": expression}),
        )
    }

    /// One more rule (`spec.rules`).
    pub fn rule(self, rule: Rule) -> Self {
        self.push("rules", rule.0)
    }

    fn push(mut self, field: &str, item: Value) -> Self {
        let list = &mut self.0["spec"][field];
        match list.as_array_mut() {
            Some(items) => items.push(item),
            None => *list = Value::Array(vec![item]),
        }
        self
    }

    /// The manifest.
    pub fn json(&self) -> &Value {
        &self.0
    }
}

impl fmt::Display for RuleSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// One rule of a [`RuleSet`]: an operation and the CEL expression that detects it.
#[derive(Clone, Debug)]
#[must_use = "a rule is added with `RuleSet::rule`"]
pub struct Rule(Value);

impl Rule {
    /// Operation `operation`, in flight while `expression` holds.
    pub fn new(operation: &str, expression: &str) -> Self {
        Rule(json!({"operation": operation, "expression": expression}))
    }

    /// Sets `<field>` to `value` (fields without a method of their own).
    pub fn set(mut self, field: &str, value: impl Into<Value>) -> Self {
        self.0[field] = value.into();
        self
    }

    /// The operation's message, a CEL expression.
    pub fn message(self, expression: &str) -> Self {
        self.set("message", expression)
    }

    /// The operation's outcome when it ends, a CEL expression.
    pub fn outcome(self, expression: &str) -> Self {
        self.set("outcome", expression)
    }

    /// When the operation started, a CEL expression.
    pub fn start_time(self, expression: &str) -> Self {
        self.set("startTime", expression)
    }
}

impl Env {
    /// The condition `type_` (`Ready`, `CostExceeded`, ...) of ruleset `name`, if it has one.
    pub fn ruleset_condition(&self, name: &str, type_: &str) -> Option<Value> {
        let ors = self.get_json(User::Admin, &["get", "ors", name]);
        ors["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == type_)
            .cloned()
    }

    /// Waits until ruleset `name` has condition `type_` with status `status`, and returns it;
    /// panics after `timeout`.
    pub fn wait_ruleset_condition(
        &self,
        name: &str,
        type_: &str,
        status: &str,
        timeout: Duration,
    ) -> Value {
        eventually(timeout, &format!("{name} {type_}={status}"), || {
            self.ruleset_condition(name, type_)
                .filter(|c| c["status"] == status)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ruleset_has_only_the_fields_set() {
        let rs = RuleSet::new("rs")
            .component("c")
            .vms()
            .namespaces(&["ns"])
            .label("team", "virt")
            .rule(Rule::new("Up", "true").outcome("'Succeeded'"))
            .rule(Rule::new("Down", "false"));
        assert_eq!(
            rs.json(),
            &json!({
                "apiVersion": "ifo.kubevirt.io/v1alpha1",
                "kind": "OperationRuleSet",
                "metadata": {"name": "rs"},
                "spec": {
                    "component": "c",
                    "target": {"group": "kubevirt.io", "version": "v1", "resource": "virtualmachines"},
                    "namespaces": ["ns"],
                    "labels": {"team": "virt"},
                    "rules": [
                        {"operation": "Up", "expression": "true", "outcome": "'Succeeded'"},
                        {"operation": "Down", "expression": "false"},
                    ],
                },
            })
        );
        assert_eq!(
            serde_json::from_str::<Value>(&rs.to_string()).unwrap(),
            *rs.json()
        );
    }
}
