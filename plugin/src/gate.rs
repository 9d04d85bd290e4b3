//! Maintenance gates: the server's verdict per scope (the cluster, a node, a component, a
//! namespace), which `check` and `wait` read when what they are asked maps to one gate, and
//! `gates` prints. The verdict is the server's, so the plugin, `kubectl wait` and dashboards
//! agree: clear (exit 0), operations in flight (exit 1), or unknown (exit 2) when the server
//! cannot vouch for the scope.

use anyhow::{Result, anyhow};
use futures::{Stream, StreamExt};
use ifo_model::{
    ConditionStatus, GATE_KIND, GATE_OVERRIDDEN_CONDITION, GATE_PLURAL, GATE_STALLED_CONDITION,
    MaintenanceGate, StaleCause, group_by_cause,
};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DynamicObject, ListParams};
use kube::runtime::{WatchStreamExt, watcher};

use super::cli::Global;
use super::client::Scope;
use super::colour::Colours;
use super::format::{Table, age, human_duration};
use super::op::{GROUP, VERSION};

pub use ifo_model::Verdict;

/// The gate that answers a `check` or `wait` with these flags, when one does: every namespace
/// (`-A`, which `--node` and `--component` imply for `check` and `wait`) with at most `--node`
/// or `--component`, or one namespace without filters.
pub fn name_for(global: &Global, scope: &Scope) -> Option<String> {
    fn set(v: &Option<String>) -> Option<&str> {
        v.as_deref().filter(|s| !s.is_empty())
    }
    if [
        &global.operation,
        &global.kind,
        &global.subject,
        &global.selector,
    ]
    .into_iter()
    .any(|f| set(f).is_some())
    {
        return None;
    }
    match (scope, set(&global.node), set(&global.component)) {
        (Scope::All, None, None) => Some("cluster".to_owned()),
        (Scope::All, Some(node), None) => Some(format!("node.{node}")),
        (Scope::All, None, Some(component)) => Some(format!("component.{component}")),
        (Scope::Namespace(ns), None, None) => Some(format!("namespace.{ns}")),
        _ => None,
    }
}

fn plural(n: u64, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// `(expected clear in ~4m, at 10:42)` in the local time zone; empty without an estimate.
fn expected(gate: &MaintenanceGate, now: Timestamp) -> String {
    let Some(at) = gate.status.expected_clear_time.as_ref().map(|t| t.0) else {
        return String::new();
    };
    let clock = at
        .to_zoned(jiff::tz::TimeZone::system())
        .strftime("%H:%M")
        .to_string();
    if at <= now {
        format!(" (expected clear by {clock}, overdue)")
    } else {
        let left = human_duration(at.as_second() - now.as_second());
        format!(" (expected clear in ~{left}, at {clock})")
    }
}

/// One line for a gate: `clear: nothing in flight`, `not clear: 2 operations (expected clear
/// in ~4m, at 10:42)`, or why the server cannot tell.
pub fn summary(gate: &MaintenanceGate, now: Timestamp) -> String {
    let n = gate.status.active_operations;
    match gate.status.verdict() {
        Verdict::Clear => "clear: nothing in flight".to_owned(),
        Verdict::InFlight => format!(
            "not clear: {}{}{}",
            plural(n, "operation"),
            stalled(gate),
            expected(gate, now)
        ),
        Verdict::Unknown => format!("unknown: {}", unknown_reasons(gate).join("; ")),
    }
}

/// What a node's gate says of the node's maintenance override while it is in force (its
/// `Overridden` condition is `True`), on one line: the guard lets every eviction on the node
/// through, whatever the verdict.
pub fn overridden(gate: &MaintenanceGate) -> Option<String> {
    gate.status
        .condition(GATE_OVERRIDDEN_CONDITION)
        .filter(|c| ConditionStatus::holds(&c.status))
        .map(|c| crate::sanitize::line(&c.message))
}

/// What a node's gate says of an override the node carries that is not in force because its
/// end cannot be read (reason `InvalidOverrideEnd`), on one line: the guard holds, though the
/// admin may think it does not.
pub fn override_not_in_force(gate: &MaintenanceGate) -> Option<String> {
    gate.status
        .condition(GATE_OVERRIDDEN_CONDITION)
        .filter(|c| {
            ConditionStatus::of(&c.status) == ConditionStatus::False
                && c.reason == "InvalidOverrideEnd"
        })
        .map(|c| crate::sanitize::line(&c.message))
}

/// `, 1 stalled` when operations in the scope are stalled; empty otherwise.
fn stalled(gate: &MaintenanceGate) -> String {
    let stalled = gate
        .status
        .operations
        .iter()
        .filter(|op| op.stalled)
        .count();
    let reported = gate
        .status
        .condition(GATE_STALLED_CONDITION)
        .is_some_and(|c| ConditionStatus::holds(&c.status));
    match (reported, stalled) {
        (false, _) => String::new(),
        // Stalled beyond the operations the gate lists.
        (true, 0) => ", some stalled".to_owned(),
        (true, n) => format!(", {n} stalled"),
    }
}

/// When an operation is expected to end, from now: `~4m`, `overdue`, or empty.
fn expected_in(at: Option<&Time>, now: Timestamp) -> String {
    match at {
        Some(t) if t.0 <= now => "overdue".to_owned(),
        Some(t) => format!("~{}", human_duration(t.0.as_second() - now.as_second())),
        None => String::new(),
    }
}

/// Why a gate is unknown: each stale target, or the condition's message. Many targets the
/// server may not list (RBAC), or whose first list is not done, are one line each cause.
pub fn unknown_reasons(gate: &MaintenanceGate) -> Vec<String> {
    if gate.status.stale_targets.is_empty() {
        let message = gate
            .status
            .clear()
            .map_or("the gate has no verdict", |c| &c.message);
        return vec![message.to_owned()];
    }
    let stale: Vec<(&str, &str)> = gate
        .status
        .stale_targets
        .iter()
        .map(|s| (s.resource.as_str(), s.reason.as_str()))
        .collect();
    let (groups, grouped) = group_by_cause(&stale);
    let told = groups.iter().map(|group| {
        let said = match group.cause {
            StaleCause::Forbidden => {
                "are not being watched: the server is forbidden to list them; grant it read \
                 access to every target of the rulesets (deploy/rbac/rule-targets.yaml)"
            }
            StaleCause::FirstList => "are being listed for the first time",
        };
        format!(
            "{} resource types ({}) {said}",
            group.names.len(),
            group.some_names()
        )
    });
    let rest = stale
        .iter()
        .zip(grouped)
        .filter(|(_, grouped)| !grouped)
        // The reason reads as the rest of a sentence whose subject is the target ("is not
        // being watched: …", "is not evaluated by ruleset …").
        .map(|((resource, reason), _)| format!("{resource} {reason}"));
    told.chain(rest).collect()
}

/// The error `check` and `wait` end with on an unknown gate (exit 2).
pub fn unknown_error(gate: &MaintenanceGate) -> anyhow::Error {
    anyhow!(
        "cannot tell what is in flight, the server's answer may be incomplete:\n  {}",
        unknown_reasons(gate).join("\n  ")
    )
}

/// The gate's operations, one line each, oldest first (what `check` prints when not clear).
pub fn operations(gate: &MaintenanceGate, now: Timestamp) -> String {
    let mut rows = vec![
        [
            "NAMESPACE",
            "NAME",
            "KIND",
            "SUBJECT",
            "OPERATION",
            "AGE",
            "PROGRESS",
            "EXPECTED",
            "STALLED",
        ]
        .map(str::to_owned)
        .to_vec(),
    ];
    rows.extend(gate.status.operations.iter().map(|op| {
        vec![
            op.namespace.clone().unwrap_or_default(),
            op.name.clone(),
            op.subject.kind.clone(),
            op.subject.name.clone(),
            op.operation.clone(),
            age(now, op.start_time.as_ref().map(|t| t.0)),
            op.progress.map(|p| format!("{p:.0}%")).unwrap_or_default(),
            expected_in(op.expected_end.as_ref(), now),
            if op.stalled { "yes" } else { "" }.to_owned(),
        ]
    }));
    let out = Table::render(&rows, Colours::OFF);
    let listed = gate.status.operations.len() as u64;
    if gate.status.active_operations > listed {
        let more = gate.status.active_operations - listed;
        return format!("{out}… and {more} more\n");
    }
    out
}

/// The gates as a table: NAME, CLEAR, ACTIVE, EXPECTED, OLDEST, MESSAGE.
pub fn table(gates: &[MaintenanceGate], now: Timestamp, colours: Colours) -> String {
    let mut rows = vec![
        ["NAME", "CLEAR", "ACTIVE", "EXPECTED", "OLDEST", "MESSAGE"]
            .map(str::to_owned)
            .to_vec(),
    ];
    rows.extend(gates.iter().map(|g| {
        let clear = g.status.clear();
        vec![
            g.metadata.name.clone().unwrap_or_default(),
            clear.map_or("Unknown".to_owned(), |c| c.status.clone()),
            g.status.active_operations.to_string(),
            expected_in(g.status.expected_clear_time.as_ref(), now),
            g.status
                .operations
                .first()
                .map(|op| age(now, op.start_time.as_ref().map(|t| t.0)))
                .unwrap_or_default(),
            match (clear.map_or("", |c| c.message.as_str()), overridden(g)) {
                (message, None) => message.to_owned(),
                (message, Some(_)) => format!("{message} (maintenance guard overridden)"),
            },
        ]
    }));
    Table::render(&rows, colours)
}

fn api(client: &kube::Client) -> Api<DynamicObject> {
    let ar = super::client::api_resource(GROUP, VERSION, GATE_KIND, GATE_PLURAL);
    Api::all_with(client.clone(), &ar)
}

fn to_gate(obj: DynamicObject) -> MaintenanceGate {
    serde_json::to_value(obj)
        .ok()
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default()
}

/// Whether an error says the caller may not read gates (then `check` and `wait` answer from the
/// operations the caller may read instead).
pub fn is_forbidden(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 403)
}

/// What a 404 from the gates resource means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotFound {
    /// The gate does not exist: the server serves gates, and says the node, namespace or
    /// component it names does not exist (a `Status` naming the gate, or of `maintenancegates`).
    Gate,
    /// The resource itself is not served (kube-apiserver's "the server could not find the
    /// requested resource", which names nothing): a server without gates.
    Resource,
}

/// What a 404 `status` from the gates resource means; `None` for any other status. Anything
/// that names an object, or the gates resource, is the gate missing: answering "nothing in
/// flight" from the operations for a node the cluster does not have would be wrong.
pub fn not_found(status: &kube::core::Status) -> Option<NotFound> {
    if status.code != 404 {
        return None;
    }
    let details = status.details.as_ref();
    let named = details.is_some_and(|d| !d.name.is_empty());
    let of_gates = details.is_some_and(|d| d.kind == GATE_PLURAL);
    Some(if named || of_gates {
        NotFound::Gate
    } else {
        NotFound::Resource
    })
}

/// The error `check` and `wait` end with (exit 2) when the gate `name` does not exist:
/// `node nosuch does not exist (gate node.nosuch: not found)`, then the server's message.
pub fn missing_error(name: &str, status: &kube::core::Status) -> anyhow::Error {
    let what = match name.split_once('.') {
        Some((scope @ ("node" | "component" | "namespace"), n)) => format!("{scope} {n}"),
        _ => format!("gate {name}"),
    };
    if status.message.is_empty() {
        anyhow!("{what} does not exist (gate {name}: not found)")
    } else {
        anyhow!(
            "{what} does not exist (gate {name}: not found)\n  ({})",
            status.message
        )
    }
}

/// A message saying what went wrong reading gates, and what to do.
pub fn explain(e: &kube::Error, verb: &str) -> anyhow::Error {
    super::client::access_error(
        e,
        verb,
        &format!("{GATE_PLURAL}.{GROUP}"),
        "reading gates needs a cluster-wide role such as ifo-maintenancegate-reader",
    )
}

/// One gate.
pub async fn get(client: &kube::Client, name: &str) -> Result<MaintenanceGate, kube::Error> {
    api(client).get(name).await.map(to_gate)
}

/// Every gate the server lists: the cluster's and those with operations in flight.
pub async fn list(client: &kube::Client) -> Result<Vec<MaintenanceGate>> {
    let list = api(client)
        .list(&ListParams::default())
        .await
        .map_err(|e| explain(&e, "list"))?;
    Ok(list.items.into_iter().map(to_gate).collect())
}

/// The error a 404 ends the gate's watch with: the gate does not exist, or gates are not served.
fn gone(name: &str, status: &kube::core::Status) -> anyhow::Error {
    match not_found(status) {
        Some(NotFound::Resource) => anyhow!(
            "cannot watch {GATE_PLURAL}: the server does not serve them ({})",
            status.message
        ),
        _ => missing_error(name, status),
    }
}

/// What the gate's watch does with one watcher event.
enum Step {
    /// Nothing to report (yet).
    Skip,
    /// Report this.
    Report(Box<Result<MaintenanceGate>>),
    /// The gate was not listed, or was deleted: ask for it by name (a 404 ends the wait).
    Ask,
}

/// The gate `name` as it changes (a list and watch by name, as `kubectl wait` does; transient
/// errors are retried with backoff). Ends in an error when the caller may not watch gates, or
/// the gate does not exist (a 404, or not listed and then not found by name).
pub fn watch(
    client: &kube::Client,
    name: &str,
) -> impl Stream<Item = Result<MaintenanceGate>> + use<> {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let (client, name) = (client.clone(), name.to_owned());
    watcher(api(&client), config)
        .default_backoff()
        .scan(false, move |seen, ev| {
            let step = match ev {
                Ok(watcher::Event::Init) => {
                    *seen = false;
                    Step::Skip
                }
                Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                    *seen = true;
                    Step::Report(Box::new(Ok(to_gate(o))))
                }
                Ok(watcher::Event::InitDone) if *seen => Step::Skip,
                Ok(watcher::Event::InitDone | watcher::Event::Delete(_)) => Step::Ask,
                Err(
                    watcher::Error::WatchError(s)
                    | watcher::Error::InitialListFailed(kube::Error::Api(s))
                    | watcher::Error::WatchStartFailed(kube::Error::Api(s))
                    | watcher::Error::WatchFailed(kube::Error::Api(s)),
                ) => match s.code {
                    403 => Step::Report(Box::new(Err(anyhow!(
                        "forbidden: you may not watch {GATE_PLURAL}.{GROUP}: {}",
                        s.message
                    )))),
                    404 => Step::Report(Box::new(Err(gone(&name, &s)))),
                    _ => Step::Skip,
                },
                Err(_) => Step::Skip,
            };
            let (client, name) = (client.clone(), name.clone());
            async move {
                Some(match step {
                    Step::Skip => None,
                    Step::Report(r) => Some(*r),
                    Step::Ask => match get(&client, &name).await {
                        Ok(gate) => Some(Ok(gate)),
                        Err(kube::Error::Api(s)) if s.code == 404 => Some(Err(gone(&name, &s))),
                        Err(_) => None,
                    },
                })
            }
        })
        .filter_map(|step| async move { step })
}

#[cfg(test)]
mod tests;
