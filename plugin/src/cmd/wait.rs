//! `wait`: blocks until nothing matching is in flight (exit 0), or until `--timeout` (exit 1,
//! with what still is), watching the gate that covers the question when there is one, else the
//! operations.

use anyhow::{Result, bail};
use jiff::{SignedDuration, Timestamp};

use super::Context;
use super::check::{ensure_complete, gate_check, report_in_flight};
use super::deadline::{Deadline, TimedOut};
use super::fallback::{Gated, gate_or_fallback, instead};
use super::{emit, plural};
use crate::Exit;
use crate::client::{self, Scope};
use crate::filter::Filters;
use crate::format::Output;
use crate::gate;
use crate::sanitize;
use crate::watched::WatchedOps;

/// `wait` on `gate` (the gate that answers, if any) or on the operations `filters` selects.
pub(crate) async fn run(
    cx: &Context<'_>,
    gate: Option<String>,
    filters: &Filters,
    timeout: Option<SignedDuration>,
) -> Result<Exit> {
    let mut fallback = None;
    if let Some(name) = gate {
        match gate_or_fallback(cx.client, &name).await? {
            Gated::Gate(_) => {
                return gate_wait(cx.client, &name, cx.scope, cx.output, timeout).await;
            }
            Gated::Fallback(why) => fallback = Some(why),
        }
    }
    wait(cx, filters, timeout)
        .await
        .map_err(|e| instead(fallback.as_deref(), e))
}

/// `wait` on a gate: watches it (as `kubectl wait` does) until it is clear (exit 0) or the
/// timeout: exit 1 with what is still in flight, or exit 2 with why when the server could not
/// vouch for the gate then. An `Unknown` gate is waited through, as `kubectl wait` does (a new
/// ruleset's first list makes every node's gate Unknown for a moment), saying why once.
async fn gate_wait(
    client: &kube::Client,
    name: &str,
    scope: &Scope,
    output: Output,
    timeout: Option<SignedDuration>,
) -> Result<Exit> {
    let mut events = std::pin::pin!(gate::watch(client, name));
    let deadline = Deadline::after(timeout);
    let mut last: Option<ifo_model::MaintenanceGate> = None;
    loop {
        let next = match deadline.next(&mut events).await {
            Ok(next) => next,
            Err(TimedOut) => {
                match &last {
                    Some(gate) if gate.status.verdict() == gate::Verdict::Unknown => {
                        return Err(gate::unknown_error(gate));
                    }
                    Some(gate) => {
                        eprintln!("{}", gate::summary(gate, Timestamp::now()));
                        emit(&gate::operations(gate, Timestamp::now()));
                    }
                    None => eprintln!("(the gate could not be read in time)"),
                }
                return Ok(Exit::InFlight);
            }
        };
        let gate = match next {
            Some(Ok(gate)) => gate,
            Some(Err(e)) => return Err(e),
            None => bail!("the watch ended unexpectedly"),
        };
        let verdict = gate.status.verdict();
        if verdict == gate::Verdict::Clear {
            return gate_check(&gate, scope, output, Timestamp::now());
        }
        let status = |g: &ifo_model::MaintenanceGate| {
            (
                g.status.active_operations,
                g.status.expected_clear_time.clone(),
                g.status.clear().map(|c| c.message.clone()),
            )
        };
        if verdict == gate::Verdict::Unknown {
            if last.as_ref().map(|g| g.status.verdict()) != Some(gate::Verdict::Unknown) {
                eprintln!(
                    "waiting: the server cannot vouch for {name} now:\n  {}",
                    gate::unknown_reasons(&gate).join("\n  ")
                );
            }
        } else if last.as_ref().map(status) != Some(status(&gate)) {
            let summary = gate::summary(&gate, Timestamp::now());
            let expected = summary
                .split_once(" (")
                .map(|(_, e)| format!(" ({e}"))
                .unwrap_or_default();
            eprintln!(
                "waiting for {} to complete{expected}: {}",
                plural(gate.status.active_operations as usize, "operation"),
                gate.status.clear().map_or("", |c| c.message.as_str())
            );
        }
        last = Some(gate);
    }
}

/// `wait` on the operations: watches until nothing matches (exit 0), or until the timeout (exit
/// 1, with what is still in flight).
async fn wait(
    cx: &Context<'_>,
    filters: &Filters,
    timeout: Option<SignedDuration>,
) -> Result<Exit> {
    let mut watched = WatchedOps::new(cx.scope.requests().len(), filters.clone());
    let mut events = std::pin::pin!(client::watch(cx.client, cx.scope, filters));
    let deadline = Deadline::after(timeout);
    let mut reported: Option<usize> = None;
    loop {
        let next = match deadline.next(&mut events).await {
            Ok(next) => next,
            Err(TimedOut) => {
                if watched.synced() {
                    report_in_flight(
                        &watched.ops(),
                        cx.scope,
                        filters,
                        cx.output,
                        Timestamp::now(),
                        cx.colours,
                    );
                } else {
                    eprintln!("(the operations could not be listed in time)");
                }
                return Ok(Exit::InFlight);
            }
        };
        let Some((i, event)) = next else {
            bail!("the watch ended unexpectedly");
        };
        match event {
            Ok(ev) => {
                watched.apply(i, ev);
            }
            Err((message, true)) => bail!(message),
            Err((message, false)) => {
                eprintln!("warning: {} (retrying)", sanitize::text(&message));
                continue;
            }
        }
        if !watched.synced() {
            continue;
        }
        ensure_complete(cx.warnings)?;
        if watched.is_empty() {
            // The watch's cx.warnings are as old as the watch: ask once more before saying "none".
            let listed = client::list(cx.client, cx.scope, filters).await?;
            ensure_complete(cx.warnings)?;
            if !listed.is_empty() {
                continue;
            }
            report_in_flight(
                &[],
                cx.scope,
                filters,
                cx.output,
                Timestamp::now(),
                cx.colours,
            );
            return Ok(Exit::Done);
        }
        if reported != Some(watched.len()) {
            reported = Some(watched.len());
            let ops = watched.ops();
            let names: Vec<String> = ops
                .iter()
                .take(5)
                .map(|o| match &o.namespace {
                    Some(ns) => format!("{ns}/{} {}", o.subject_ref(), o.spec.operation),
                    None => format!("{} {}", o.subject_ref(), o.spec.operation),
                })
                .collect();
            let more = if ops.len() > 5 { ", …" } else { "" };
            eprintln!(
                "waiting for {} to complete: {}{more}",
                plural(ops.len(), "operation"),
                names.join(", ")
            );
        }
    }
}
