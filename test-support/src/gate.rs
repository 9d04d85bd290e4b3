//! Reading maintenance gates as users do (`kubectl get gate <name> -o json`): a gate's `Clear`
//! condition, and waiting until a gate settles on a `Clear` status.

use crate::{Env, Run, eventually};
use ifo_dev::User;
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

static NONE: Value = Value::Null;

/// The `Clear` condition of `gate` (a gate object, as kubectl prints it), `Null` when it has
/// none.
pub fn clear_condition(gate: &Value) -> &Value {
    gate["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Clear"))
        .unwrap_or(&NONE)
}

/// The status of the `Clear` condition of `gate` (`True`, `False` or `Unknown`; empty when it
/// has none).
pub fn clear_status(gate: &Value) -> &str {
    clear_condition(gate)["status"].as_str().unwrap_or_default()
}

/// Whether `gate` reads `Unknown` only because rulesets of namespaces other than `namespaces`
/// have not finished their first list: on a shared cluster another test's new ruleset makes
/// every node's gate `Unknown` for as long (the verdict owed to anyone whose objects it may
/// reach), which says nothing of what a test's own namespaces hold.
pub fn unknown_only_for_others_first_lists(gate: &Value, namespaces: &[&str]) -> bool {
    let stale = gate["status"]["staleTargets"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    clear_status(gate) == "Unknown"
        && !stale.is_empty()
        && stale.iter().all(|target| {
            let reason = target["reason"].as_str().unwrap_or_default();
            reason.contains("its first list has not completed")
                && reason.contains("in namespace ")
                && !namespaces
                    .iter()
                    .any(|ns| reason.contains(&format!("in namespace {ns}:")))
        })
}

/// The operations a gate names (`status.operations`): each one's subject kind, namespace (empty
/// for a cluster-scoped subject), name, and operation.
pub fn gate_operations(gate: &Value) -> Vec<[String; 4]> {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    gate["status"]["operations"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| {
            let subject = &o["subject"];
            [
                text(&subject["kind"]),
                text(&subject["namespace"]),
                text(&subject["name"]),
                text(&o["operation"]),
            ]
        })
        .collect()
}

impl Env {
    /// Gate `name`, read by the admin.
    pub fn gate(&self, name: &str) -> Value {
        self.get_json(User::Admin, &["get", "gate", name])
    }

    /// Gate `name`, read by the admin, and again while it is `Unknown` only because other tests'
    /// new rulesets have not finished their first lists (see
    /// [`unknown_only_for_others_first_lists`]): what `namespaces` make of it.
    pub fn gate_of(&self, name: &str, namespaces: &[&str]) -> Value {
        eventually(
            Duration::from_secs(60),
            &format!("gate {name} told by {namespaces:?}"),
            || {
                Some(self.gate(name))
                    .filter(|g| !unknown_only_for_others_first_lists(g, namespaces))
            },
        )
    }

    /// Gate `name`, read by `user` (impersonated, see [`Env::kubectl_as`]); `None` while it is
    /// not served to them.
    pub fn gate_as(&self, user: &str, name: &str) -> Option<Value> {
        let out = self
            .kubectl_as(user, &["get", "gate", name, "-o", "json"], None)
            .ok()?;
        serde_json::from_str(&out).ok()
    }

    /// `kubectl wait --for=condition=Clear=True gate/<name> --timeout=<timeout>` as the admin,
    /// as the README's drain runs it: not started.
    pub fn wait_clear_cmd(&self, name: &str, timeout: &str) -> Command {
        self.kubectl_cmd(
            User::Admin,
            &[
                "wait",
                "--for=condition=Clear=True",
                &format!("gate/{name}"),
                &format!("--timeout={timeout}"),
            ],
        )
    }

    /// [`Env::wait_clear_cmd`], run to the end: exit code 0 once the gate is clear, else when
    /// `timeout` passed.
    pub fn wait_clear(&self, name: &str, timeout: &str) -> Run {
        self.wait_clear_cmd(name, timeout)
            .output()
            .expect("running kubectl wait")
            .into()
    }

    /// Waits until gate `name` reads `Clear=<status>` (e.g. `False` while an operation holds it)
    /// and returns it; panics after `timeout`.
    pub fn wait_gate(&self, name: &str, status: &str, timeout: Duration) -> Value {
        eventually(timeout, &format!("gate {name} Clear={status}"), || {
            self.kubectl(User::Admin, &["get", "gate", name, "-o", "json"])
                .ok()
                .and_then(|out| serde_json::from_str::<Value>(&out).ok())
                .filter(|g| clear_status(g) == status)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_clear_condition_is_found_among_the_others() {
        let gate = json!({"status": {"conditions": [
            {"type": "Other", "status": "True"},
            {"type": "Clear", "status": "False", "message": "busy"},
        ]}});
        assert_eq!(clear_condition(&gate)["message"], "busy");
        assert_eq!(clear_status(&gate), "False");
        assert_eq!(clear_status(&json!({})), "");
        assert!(clear_condition(&json!({"status": {}})).is_null());
    }
}
