//! Running a ruleset's cases: each object is evaluated as the server would, and the operations,
//! messages, outcomes and labels are compared with what the case expects. Any evaluation error
//! fails the case: a rule that errors on a plausible object is a bug, and so is an object on
//! which two rules of an `exclusive` ruleset match.

use super::load::{RuleSetFile, cases_path};
use crate::evaluate::{Bound, Engine, RuleResult, evaluate};
use crate::ruleset::compile;
use anyhow::{Context, Result};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Deserialize)]
struct CasesFile {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    object: serde_json::Value,
    expect: Expect,
}

#[derive(Deserialize)]
struct Expect {
    active: Vec<String>,
    #[serde(default)]
    messages: BTreeMap<String, String>,
    #[serde(default)]
    outcomes: BTreeMap<String, String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    /// Progress (percent) of an active operation; absent from the map: not checked.
    #[serde(default)]
    progress: BTreeMap<String, f64>,
    /// Stall reason of an active operation (`''` for a plain `true`); absent: not checked.
    #[serde(default)]
    stalled: BTreeMap<String, String>,
}

/// One mismatch, readable as a diff line.
#[derive(Debug)]
pub struct CaseFailure {
    /// The ruleset whose case failed.
    pub ruleset: String,
    /// The case's name in the cases file.
    pub case: String,
    /// What differed, as expected against got.
    pub problem: String,
}

impl std::fmt::Display for CaseFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} / {}: {}", self.ruleset, self.case, self.problem)
    }
}

/// Runs every case of every file; returns the number of cases run and the failures.
pub fn run_cases(engine: &Engine, files: &[RuleSetFile]) -> Result<(usize, Vec<CaseFailure>)> {
    let mut failures = Vec::new();
    let mut count = 0;
    for file in files {
        let path = cases_path(&file.path);
        let fail = |case: &str, problem: String| CaseFailure {
            ruleset: file.name.clone(),
            case: case.to_string(),
            problem,
        };
        if !path.exists() {
            failures.push(fail("-", format!("no cases file ({})", path.display())));
            continue;
        }
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let cases: CasesFile = serde_saphyr::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        let compiled = match compile(engine, &file.name, None, &file.spec) {
            Ok(c) => c,
            Err(errors) => {
                failures.push(fail("-", format!("does not compile: {errors}")));
                continue;
            }
        };
        for case in cases.cases {
            count += 1;
            let bound = Bound::new(&case.object);
            let ev = evaluate(&compiled.exprs, &bound);
            let mut active = BTreeSet::new();
            let mut messages = BTreeMap::new();
            let mut outcomes = BTreeMap::new();
            let mut progresses = BTreeMap::new();
            let mut stalls = BTreeMap::new();
            for (op, result) in compiled.operations.iter().zip(&ev.rules) {
                match result {
                    RuleResult::Error(e) => {
                        failures.push(fail(&case.name, format!("rule {op} errored: {e}")))
                    }
                    RuleResult::Active {
                        message,
                        start_time,
                        progress,
                        stalled,
                    } => {
                        match progress {
                            Some(Ok(Some(p))) => {
                                progresses.insert(op.clone(), *p);
                            }
                            Some(Err(e)) => failures
                                .push(fail(&case.name, format!("progress of {op} errored: {e}"))),
                            _ => {}
                        }
                        match stalled {
                            Some(Ok(Some(reason))) => {
                                stalls.insert(op.clone(), reason.clone());
                            }
                            Some(Err(e)) => failures
                                .push(fail(&case.name, format!("stalled of {op} errored: {e}"))),
                            _ => {}
                        }
                        active.insert(op.clone());
                        match message {
                            Some(Ok(m)) => {
                                messages.insert(op.clone(), m.clone());
                            }
                            Some(Err(e)) => failures
                                .push(fail(&case.name, format!("message of {op} errored: {e}"))),
                            None => {}
                        }
                        if let Some(Err(e)) = start_time {
                            failures
                                .push(fail(&case.name, format!("startTime of {op} errored: {e}")));
                        }
                    }
                    RuleResult::Inactive { outcome } => match outcome {
                        Some(Ok(o)) => {
                            if o.parse::<crate::operation::Outcome>().is_err() {
                                failures.push(fail(
                                    &case.name,
                                    format!("outcome of {op} is {o:?}, not an outcome name"),
                                ));
                            }
                            outcomes.insert(op.clone(), o.clone());
                        }
                        Some(Err(e)) => {
                            failures.push(fail(&case.name, format!("outcome of {op} errored: {e}")))
                        }
                        None => {}
                    },
                }
            }
            if file.spec.exclusive && active.len() > 1 {
                failures.push(fail(
                    &case.name,
                    format!(
                        "exclusive ruleset, yet {active:?} match together (a subject is in at \
                         most one of its operations at a time)"
                    ),
                ));
            }
            let expected: BTreeSet<String> = case.expect.active.iter().cloned().collect();
            if active != expected {
                failures.push(fail(
                    &case.name,
                    format!("active: expected {expected:?}, got {active:?}"),
                ));
            }
            for (op, want) in &case.expect.messages {
                if messages.get(op) != Some(want) {
                    failures.push(fail(
                        &case.name,
                        format!(
                            "message of {op}: expected {want:?}, got {:?}",
                            messages.get(op)
                        ),
                    ));
                }
            }
            for (op, want) in &case.expect.outcomes {
                if outcomes.get(op) != Some(want) {
                    failures.push(fail(
                        &case.name,
                        format!(
                            "outcome of {op}: expected {want:?}, got {:?}",
                            outcomes.get(op)
                        ),
                    ));
                }
            }
            for (op, want) in &case.expect.progress {
                let got = progresses.get(op);
                if got.is_none_or(|p| (p - want).abs() > 0.01) {
                    failures.push(fail(
                        &case.name,
                        format!("progress of {op}: expected {want}, got {got:?}"),
                    ));
                }
            }
            for (op, want) in &case.expect.stalled {
                if stalls.get(op) != Some(want) {
                    failures.push(fail(
                        &case.name,
                        format!(
                            "stalled of {op}: expected {want:?}, got {:?}",
                            stalls.get(op)
                        ),
                    ));
                }
            }
            let labels: BTreeMap<&String, &Result<String, _>> =
                ev.labels.iter().map(|(k, v)| (k, v)).collect();
            for (key, value) in &labels {
                if let Err(e) = value {
                    failures.push(fail(&case.name, format!("label {key} errored: {e}")));
                }
            }
            for (key, want) in &case.expect.labels {
                let got = labels.get(key).and_then(|v| v.as_ref().ok());
                if got != Some(want) {
                    failures.push(fail(
                        &case.name,
                        format!("label {key}: expected {want:?}, got {got:?}"),
                    ));
                }
            }
        }
    }
    Ok((count, failures))
}
