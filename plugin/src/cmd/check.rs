//! `check`: exit 0 when nothing matching is in flight, 1 (printing them) when operations are,
//! answered by a gate when one covers the question, else by the operations. Its answers end
//! `wait` too.

use anyhow::{Result, bail};
use jiff::Timestamp;

use super::Context;
use super::fallback::{Gated, gate_or_fallback, instead};
use super::{emit, plural};
use crate::Exit;
use crate::client::{self, Scope};
use crate::colour::Colours;
use crate::filter::Filters;
use crate::format::{self, Output};
use crate::gate;
use crate::op::{Op, sort};
use crate::warnings::Warnings;

/// `check` of `gate` (the gate that answers, if any) or of the operations `filters` selects.
pub(crate) async fn run(cx: &Context<'_>, gate: Option<String>, filters: &Filters) -> Result<Exit> {
    let mut fallback = None;
    if let Some(name) = gate {
        match gate_or_fallback(cx.client, &name).await? {
            Gated::Gate(gate) => return gate_check(&gate, cx.scope, cx.output, cx.now),
            Gated::Fallback(why) => fallback = Some(why),
        }
    }
    let mut ops = client::list(cx.client, cx.scope, filters)
        .await
        .map_err(|e| instead(fallback.as_deref(), e))?;
    ensure_complete(cx.warnings)?;
    sort(&mut ops);
    report_in_flight(&ops, cx.scope, filters, cx.output, cx.now, cx.colours);
    if ops.is_empty() {
        explain_pod(cx, filters).await;
    }
    Ok(if ops.is_empty() {
        Exit::Done
    } else {
        Exit::InFlight
    })
}

/// Asked about one pod (`-k Pod --subject <name>` in a namespace) that holds nothing: why, on
/// stderr, when the pod itself says (see [`crate::holds`]). A pod the user may not read is left
/// unexplained: the answer stands without it.
async fn explain_pod(cx: &Context<'_>, filters: &Filters) {
    let (Scope::Namespace(ns), Some(kind), Some(name)) =
        (cx.scope, &filters.kind, &filters.subject)
    else {
        return;
    };
    if !kind.eq_ignore_ascii_case("pod") {
        return;
    }
    let pods: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        cx.client.clone(),
        ns,
        &kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&()),
    );
    let Ok(Some(pod)) = pods.get_opt(name).await else {
        return;
    };
    let pod = serde_json::to_value(&pod).unwrap_or_default();
    if let Some(why) = crate::holds::why_not_held(&pod) {
        eprintln!(
            "note: pod {ns}/{name} holds no node: {}",
            crate::sanitize::line(&why)
        );
    }
}

/// `check`'s answer from a gate: exit 0 clear, 1 in flight (with the operations), or an error
/// (exit 2) when the server cannot vouch for the scope.
pub(crate) fn gate_check(
    gate: &ifo_model::MaintenanceGate,
    scope: &Scope,
    output: Output,
    now: Timestamp,
) -> Result<Exit> {
    let verdict = gate.status.verdict();
    if let Some(overridden) = gate::overridden(gate)
        && !matches!(output, Output::Json | Output::Yaml)
    {
        // Whatever the verdict: a drain of the node goes through now.
        eprintln!("warning: the maintenance guard is overridden: {overridden}");
    }
    if let Some(ignored) = gate::override_not_in_force(gate)
        && !matches!(output, Output::Json | Output::Yaml)
    {
        eprintln!("warning: {ignored}");
    }
    if verdict == gate::Verdict::Unknown {
        return Err(gate::unknown_error(gate));
    }
    match output {
        Output::Json | Output::Yaml => {
            let v = serde_json::to_value(gate).unwrap_or_default();
            emit(&if output == Output::Json {
                format::to_json(&v)
            } else {
                format::to_yaml(&v)
            });
        }
        _ if verdict == gate::Verdict::Clear => {
            emit(&format!(
                "No operations in flight {}.\n",
                gate_place(gate, scope)
            ));
        }
        _ => {
            eprintln!("{}", gate::summary(gate, now));
            emit(&gate::operations(gate, now));
        }
    }
    Ok(if verdict == gate::Verdict::Clear {
        Exit::Done
    } else {
        Exit::InFlight
    })
}

/// `on node worker-1`, `of component kubevirt`, … for messages about a gate.
fn gate_place(gate: &ifo_model::MaintenanceGate, scope: &Scope) -> String {
    let name = gate.metadata.name.as_deref().unwrap_or_default();
    match name.split_once('.') {
        Some(("node", n)) => format!("on node {n}"),
        Some(("component", c)) => format!("of component {c}"),
        _ => scope.describe(),
    }
}

/// `check` and `wait` answer whether anything is in flight. When the server said its answer may
/// be incomplete (a rule target it is not watching), "nothing" cannot be trusted, nor can the
/// list: they fail (exit 2) with the server's reasons instead.
pub(crate) fn ensure_complete(warnings: &Warnings) -> Result<()> {
    let incomplete = warnings.incomplete();
    if incomplete.is_empty() {
        warnings.print_new();
        return Ok(());
    }
    bail!(
        "cannot tell what is in flight, the server's answer may be incomplete:\n  {}",
        incomplete.join("\n  ")
    )
}

/// `check`'s and `wait`'s answer: the operations in flight (stdout), or that there are none.
pub(crate) fn report_in_flight(
    ops: &[Op],
    scope: &Scope,
    filters: &Filters,
    output: Output,
    now: Timestamp,
    colours: Colours,
) {
    let matching = match filters.describe() {
        d if d.is_empty() => String::new(),
        d => format!(" matching {d}"),
    };
    match output {
        Output::Table | Output::Wide if ops.is_empty() => {
            emit(&format!(
                "No operations in flight {}{matching}.\n",
                scope.describe()
            ));
        }
        Output::Table | Output::Wide => {
            eprintln!(
                "{} in flight {}{matching}:",
                plural(ops.len(), "operation"),
                scope.describe()
            );
            emit(&format::render_list(
                ops,
                output,
                scope.namespace_column(),
                now,
                colours,
            ));
        }
        other => {
            emit(&format::render_list(
                ops,
                other,
                scope.namespace_column(),
                now,
                colours,
            ));
        }
    }
}
