//! Running a ruleset's cases: each object is evaluated as the server would, and the operations,
//! messages, outcomes and labels are compared with what the case expects. Any evaluation error
//! fails the case: a rule that errors on a plausible object is a bug, and so is an object on
//! which two rules of an `exclusive` ruleset match. A case may give the related object of each
//! of the ruleset's related parts (`related:`, in the order of `spec.related`): their label
//! expressions are evaluated on them, and the labels expected are those the operations get
//! (the subject's own below static ones, the related ones below the subject's own).

use super::load::{RuleSetFile, cases_path};
use crate::evaluate::{Bound, Engine, NextStart, RuleResult, evaluate};
use crate::ruleset::compile;
use crate::schedule::cron::CronSchedule;
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
    /// The related object of each related part, in order; `null` (or a shorter list): none.
    #[serde(default)]
    related: Vec<Option<serde_json::Value>>,
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
    /// What a rule's `schedule` announces: `<cron schedule>`, `<cron schedule> in <zone>`,
    /// `@every <duration> from <last run>`, an RFC 3339 time, or `''` for nothing; absent: not
    /// checked.
    #[serde(default)]
    schedules: BTreeMap<String, String>,
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
                for (part, e) in result.errors() {
                    let what = match part {
                        None => format!("rule {op} errored: {e}"),
                        Some(part) => format!("{part} of {op} errored: {e}"),
                    };
                    failures.push(fail(&case.name, what));
                }
                match result {
                    RuleResult::Active {
                        message,
                        progress,
                        stalled,
                        ..
                    } => {
                        active.insert(op.clone());
                        if let Some(Ok(Some(p))) = progress {
                            progresses.insert(op.clone(), *p);
                        }
                        if let Some(Ok(Some(reason))) = stalled {
                            stalls.insert(op.clone(), reason.clone());
                        }
                        if let Some(Ok(m)) = message {
                            messages.insert(op.clone(), m.clone());
                        }
                    }
                    RuleResult::Inactive {
                        outcome: Some(Ok(o)),
                    } => {
                        if o.parse::<crate::operation::Outcome>().is_err() {
                            failures.push(fail(
                                &case.name,
                                format!("outcome of {op} is {o:?}, not an outcome name"),
                            ));
                        }
                        outcomes.insert(op.clone(), o.clone());
                    }
                    _ => {}
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
            for problem in mismatches("message of", &case.expect.messages, &messages) {
                failures.push(fail(&case.name, problem));
            }
            for problem in mismatches("outcome of", &case.expect.outcomes, &outcomes) {
                failures.push(fail(&case.name, problem));
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
            for problem in mismatches("stalled of", &case.expect.stalled, &stalls) {
                failures.push(fail(&case.name, problem));
            }
            let mut schedules = BTreeMap::new();
            for (op, start) in compiled.operations.iter().zip(&ev.starts) {
                match start {
                    Some(Ok(start)) => match announced(start) {
                        Ok(text) => {
                            schedules.insert(op.clone(), text);
                        }
                        Err(e) => failures.push(fail(&case.name, format!("schedule of {op}: {e}"))),
                    },
                    Some(Err(e)) => {
                        failures.push(fail(&case.name, format!("schedule of {op} errored: {e}")))
                    }
                    None => {}
                }
            }
            for problem in mismatches("schedule of", &case.expect.schedules, &schedules) {
                failures.push(fail(&case.name, problem));
            }
            let mut labels: BTreeMap<String, String> = BTreeMap::new();
            for (key, value) in &ev.labels {
                match value {
                    Ok(v) => {
                        labels.insert(key.clone(), v.clone());
                    }
                    Err(e) => failures.push(fail(&case.name, format!("label {key} errored: {e}"))),
                }
            }
            match related_labels(&compiled, &case) {
                Ok(related) => {
                    for (key, value) in related {
                        // An own value that is empty gives way; a non-empty one wins.
                        let own = labels.entry(key).or_default();
                        if own.is_empty() {
                            *own = value;
                        }
                    }
                }
                Err(problems) => failures.extend(problems.into_iter().map(|p| fail(&case.name, p))),
            }
            for problem in mismatches("label", &case.expect.labels, &labels) {
                failures.push(fail(&case.name, problem));
            }
        }
    }
    Ok((count, failures))
}

/// What a schedule announces, as a case writes it; an error for a cron schedule the server
/// cannot read.
fn announced(start: &NextStart) -> Result<String, crate::schedule::cron::CronError> {
    Ok(match start {
        NextStart::Nothing => String::new(),
        NextStart::At(t) => t.to_string(),
        NextStart::Cron {
            schedule,
            time_zone,
            from,
        } => {
            let parsed = CronSchedule::parse(schedule, time_zone, *from)?;
            let mut said = schedule.clone();
            if !time_zone.is_empty() {
                said = format!("{said} in {time_zone}");
            }
            if let Some(from) = parsed.counted_from() {
                said = format!("{said} from {from}");
            }
            said
        }
    })
}

/// What differs from what a case expects of `what` (`label`, `message of`, …): a problem for
/// each expected key whose value is absent or another.
fn mismatches<'a>(
    what: &'a str,
    expected: &'a BTreeMap<String, String>,
    got: &'a BTreeMap<String, String>,
) -> impl Iterator<Item = String> + 'a {
    expected.iter().filter_map(move |(key, want)| {
        let value = got.get(key);
        (value != Some(want)).then(|| format!("{what} {key}: expected {want:?}, got {value:?}"))
    })
}

/// The labels the related objects of `case` give its subject, lowest precedence first (a later
/// part's value wins), empty values left out; or what is wrong: a related object for a part the
/// ruleset does not have, one that is not where its `match` says, an expression that errors.
fn related_labels(
    compiled: &crate::ruleset::CompiledRuleSet,
    case: &Case,
) -> Result<Vec<(String, String)>, Vec<String>> {
    let mut problems = Vec::new();
    let mut out: Vec<(String, String)> = Vec::new();
    if case.related.len() > compiled.related.len() {
        problems.push(format!(
            "related: {} objects given, the ruleset has {} related parts",
            case.related.len(),
            compiled.related.len()
        ));
    }
    let place = |o: &serde_json::Value| {
        let at = |field: &str| o["metadata"][field].as_str().map(str::to_owned);
        (at("namespace"), at("name"))
    };
    for (index, (part, object)) in compiled.related.iter().zip(&case.related).enumerate() {
        let Some(object) = object else { continue };
        let matching = part.part_of.as_ref().map(|p| p.matching);
        if matching == Some(crate::ruleset::Match::SameName) && place(object) != place(&case.object)
        {
            problems.push(format!(
                "related[{index}]: a SameName related object has the subject's namespace and name, \
                 got {:?}",
                place(object)
            ));
        }
        for (key, value) in evaluate(&part.exprs, &Bound::new(object)).labels {
            match value {
                Ok(v) if v.is_empty() => {}
                Ok(v) => {
                    out.retain(|(k, _)| *k != key);
                    out.push((key, v));
                }
                Err(e) => problems.push(format!("related[{index}] label {key} errored: {e}")),
            }
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}
