//! Whether a gate answers `check` and `wait`, or the operations do: the gate when it can be
//! read, the operations the caller may list when it cannot (forbidden, or no gates served), and
//! an error when the gate itself does not exist.

use anyhow::Result;

use crate::client;
use crate::gate;

/// What answers a `check` or `wait` that a gate could.
#[derive(Debug)]
pub(crate) enum Gated {
    /// The gate.
    Gate(Box<ifo_model::MaintenanceGate>),
    /// The operations the caller may read, because the gate could not be read (why).
    Fallback(String),
}

/// The gate `name`, or a fallback to the operations when the caller may not read gates (403) or
/// the server serves none (a 404 that names nothing). A 404 about the gate itself (its node,
/// namespace or component does not exist) is an error (exit 2): the operations would answer
/// "nothing in flight" for a mistyped node.
pub(crate) async fn gate_or_fallback(client: &kube::Client, name: &str) -> Result<Gated> {
    match gate::get(client, name).await {
        Ok(gate) => Ok(Gated::Gate(Box::new(gate))),
        Err(kube::Error::Api(s)) => match fallback(name, &s) {
            Some(why) => Ok(Gated::Fallback(why)),
            None if s.code == 404 => Err(gate::missing_error(name, &s)),
            None => Err(gate::explain(&kube::Error::Api(s), "get")),
        },
        Err(e) => Err(gate::explain(&e, "get")),
    }
}

/// Why `check`/`wait` answer from the operations instead of the gate `name` that answered
/// `status`; `None` when they may not (the gate does not exist, or another error).
fn fallback(name: &str, status: &kube::core::Status) -> Option<String> {
    match (status.code, gate::not_found(status)) {
        (403, _) => Some(format!(
            "you may not get the gate {name} (reading gates needs a cluster-wide role such as ifo-maintenancegate-reader)"
        )),
        (_, Some(gate::NotFound::Resource)) => {
            Some(format!("the server serves no gates (such as {name})"))
        }
        _ => None,
    }
}

/// An error of answering from the operations instead of a gate (`why`: why instead), saying so.
/// The list's hint to use `-n` does not apply: the question was about every namespace.
pub(crate) fn instead(why: Option<&str>, e: anyhow::Error) -> anyhow::Error {
    match why {
        None => e,
        Some(why) => {
            let inner = format!("{e:#}").replace(client::ALL_NAMESPACES_HINT, "");
            anyhow::anyhow!("{why}, and answering from the operations instead failed: {inner}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16, message: &str, details: Option<serde_json::Value>) -> kube::core::Status {
        kube::core::Status {
            code,
            message: message.into(),
            reason: if code == 404 { "NotFound" } else { "Forbidden" }.into(),
            details: details.map(|d| serde_json::from_value(d).unwrap()),
            ..Default::default()
        }
    }

    #[test]
    fn a_missing_gate_is_an_error_and_only_a_missing_resource_or_forbidden_falls_back() {
        let missing = status(
            404,
            "maintenancegates \"node.nosuch\" not found: the cluster has no node nosuch",
            Some(serde_json::json!({"name": "node.nosuch", "kind": "maintenancegates"})),
        );
        assert_eq!(fallback("node.nosuch", &missing), None);
        // Of the gates resource, even without a name.
        let of_gates = status(
            404,
            "not found",
            Some(serde_json::json!({"kind": "maintenancegates"})),
        );
        assert_eq!(fallback("node.nosuch", &of_gates), None);
        // kube-apiserver: the resource itself is not served.
        let not_served = status(
            404,
            "the server could not find the requested resource",
            Some(serde_json::json!({})),
        );
        let why = fallback("node.w1", &not_served).unwrap();
        assert!(why.contains("serves no gates"), "{why}");
        assert!(
            fallback(
                "node.w1",
                &status(
                    404,
                    "the server could not find the requested resource",
                    None
                )
            )
            .is_some()
        );
        let forbidden = status(403, "User \"alice\" cannot get ...", None);
        let why = fallback("node.w1", &forbidden).unwrap();
        assert!(why.contains("ifo-maintenancegate-reader"), "{why}");
        assert_eq!(fallback("node.w1", &status(500, "boom", None)), None);
    }

    #[test]
    fn a_failed_fallback_says_why_it_fell_back_without_suggesting_a_namespace() {
        let list = anyhow::anyhow!(
            "forbidden: you may not list inflightoperations.live.ifo.kubevirt.io in all namespaces{}\n  (no)",
            client::ALL_NAMESPACES_HINT
        );
        let text = format!(
            "{:#}",
            instead(Some("you may not get the gate node.w1 (…)"), list)
        );
        assert_eq!(
            text,
            "you may not get the gate node.w1 (…), and answering from the operations instead failed: forbidden: you may not list inflightoperations.live.ifo.kubevirt.io in all namespaces\n  (no)"
        );
        let text = format!("{:#}", instead(None, anyhow::anyhow!("as is")));
        assert_eq!(text, "as is");
    }
}
