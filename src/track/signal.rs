//! One signal per operation from the per-rule results of an evaluation.
//!
//! Several rules of a ruleset may detect the same operation (e.g. different conditions meaning
//! "migrating"). The operation is active if any of them matches; if none matches but one failed
//! to evaluate, whether it is active is unknown; only when all say "no" has it stopped.

use jiff::Timestamp;

use crate::evaluate::{EvalError, RuleResult};
use crate::operation::Outcome;

/// What an evaluation says about one operation.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Signal<'a> {
    Active {
        message: Message<'a>,
        /// The first successfully evaluated start time among the matching rules.
        start: Option<Timestamp>,
        /// The first progress reported by a matching rule.
        progress: Reading<f64>,
        /// Stalled (with its reason, maybe empty) when any matching rule says so.
        stalled: Reading<Option<&'a str>>,
    },
    Inactive {
        /// The first valid outcome name among the rules' outcome expressions.
        outcome: Option<Outcome>,
    },
    /// A rule failed and none matched: no information.
    Unknown,
}

/// The message of an active operation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Message<'a> {
    /// No message expression (or an empty message): show none.
    None,
    Text(&'a str),
    /// The expression failed: keep showing the last known message.
    Unknown,
}

/// A value the rules of an active operation report on every event (its progress, whether it
/// is stalled).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Reading<T> {
    /// No matching rule has an expression for it.
    None,
    Value(T),
    /// The expressions failed: keep what was last known.
    Unknown,
}

/// Signals per distinct operation, in order of first appearance. `operations[i]` is the
/// operation of `rules[i]`.
pub(super) fn signals<'a>(
    operations: &'a [String],
    rules: &'a [RuleResult],
) -> Vec<(&'a str, Signal<'a>)> {
    debug_assert_eq!(operations.len(), rules.len());
    let pairs: Vec<(&str, &RuleResult)> = operations
        .iter()
        .map(String::as_str)
        .zip(rules.iter())
        .collect();
    let mut out: Vec<(&str, Signal)> = Vec::new();
    for (op, _) in &pairs {
        if out.iter().any(|(seen, _)| seen == op) {
            continue;
        }
        let results = pairs.iter().filter(|(o, _)| o == op).map(|(_, r)| *r);
        out.push((op, combine(results)));
    }
    out
}

fn combine<'a>(results: impl Iterator<Item = &'a RuleResult> + Clone) -> Signal<'a> {
    let active = results.clone().filter_map(|r| match r {
        RuleResult::Active {
            message,
            start_time,
            progress,
            stalled,
        } => Some((message, start_time, progress, stalled)),
        _ => None,
    });
    if active.clone().next().is_some() {
        let mut message = Message::None;
        for (m, ..) in active.clone() {
            match m {
                Some(Ok(text)) if !text.is_empty() => {
                    message = Message::Text(text);
                    break;
                }
                Some(Err(_)) => message = Message::Unknown,
                _ => {}
            }
        }
        let start = active
            .clone()
            .filter_map(|(_, s, ..)| s.as_ref()?.as_ref().ok())
            .next()
            .copied();
        let progress = progress_of(active.clone().map(|(.., p, _)| p));
        let stalled = stalled_of(active.map(|(.., s)| s));
        return Signal::Active {
            message,
            start,
            progress,
            stalled,
        };
    }
    if results.clone().any(|r| matches!(r, RuleResult::Error(_))) {
        return Signal::Unknown;
    }
    let outcome = results
        .filter_map(|r| match r {
            RuleResult::Inactive {
                outcome: Some(Ok(name)),
            } => name.parse::<Outcome>().ok(),
            _ => None,
        })
        .next();
    Signal::Inactive { outcome }
}

/// The first progress a matching rule reports; unknown when none reports one and some failed.
fn progress_of<'a>(
    results: impl Iterator<Item = &'a Option<Result<Option<f64>, EvalError>>>,
) -> Reading<f64> {
    let mut reading = Reading::None;
    for result in results.flatten() {
        match result {
            Ok(Some(p)) => return Reading::Value(*p),
            Ok(None) => {}
            Err(_) => reading = Reading::Unknown,
        }
    }
    reading
}

/// Stalled when a matching rule says so (its reason); otherwise unknown when one failed to say,
/// not stalled when one said so.
fn stalled_of<'a>(
    results: impl Iterator<Item = &'a Option<Result<Option<String>, EvalError>>>,
) -> Reading<Option<&'a str>> {
    let mut reading = Reading::None;
    for result in results.flatten() {
        match result {
            Ok(Some(reason)) => return Reading::Value(Some(reason)),
            Err(_) => reading = Reading::Unknown,
            Ok(None) if reading == Reading::None => reading = Reading::Value(None),
            Ok(None) => {}
        }
    }
    reading
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err() -> EvalError {
        EvalError::Execution("boom".into())
    }

    fn ops(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn any_active_rule_makes_the_operation_active() {
        let t: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let rules = [
            RuleResult::Error(err()),
            RuleResult::Inactive { outcome: None },
            RuleResult::Active {
                message: Some(Err(err())),
                start_time: Some(Err(err())),
                progress: None,
                stalled: None,
            },
            RuleResult::Active {
                message: Some(Ok("m".into())),
                start_time: Some(Ok(t)),
                progress: None,
                stalled: None,
            },
        ];
        let names = ops(&["A", "A", "A", "A"]);
        let s = signals(&names, &rules);
        assert_eq!(
            s,
            [(
                "A",
                Signal::Active {
                    message: Message::Text("m"),
                    start: Some(t),
                    progress: Reading::None,
                    stalled: Reading::None,
                }
            )]
        );
    }

    #[test]
    fn error_without_match_is_unknown_and_outcomes_need_valid_names() {
        let rules = [
            RuleResult::Error(err()),
            RuleResult::Inactive {
                outcome: Some(Ok("Succeeded".into())),
            },
            RuleResult::Inactive {
                outcome: Some(Ok("nonsense".into())),
            },
            RuleResult::Inactive {
                outcome: Some(Err(err())),
            },
            RuleResult::Inactive {
                outcome: Some(Ok("Failed".into())),
            },
            RuleResult::Active {
                message: Some(Err(err())),
                start_time: None,
                progress: None,
                stalled: None,
            },
        ];
        let names = ops(&["A", "A", "B", "B", "C", "D"]);
        let s = signals(&names, &rules);
        assert_eq!(
            s,
            [
                ("A", Signal::Unknown),
                ("B", Signal::Inactive { outcome: None }),
                (
                    "C",
                    Signal::Inactive {
                        outcome: Some(Outcome::Failed)
                    }
                ),
                (
                    "D",
                    Signal::Active {
                        message: Message::Unknown,
                        start: None,
                        progress: Reading::None,
                        stalled: Reading::None,
                    }
                ),
            ]
        );
    }

    #[test]
    fn progress_and_stalled_combine_over_matching_rules() {
        let active = |progress: Option<Result<Option<f64>, EvalError>>,
                      stalled: Option<Result<Option<String>, EvalError>>| {
            RuleResult::Active {
                message: None,
                start_time: None,
                progress,
                stalled,
            }
        };
        let rules = [
            // A: one rule fails, the other reports: the report wins.
            active(Some(Err(err())), Some(Err(err()))),
            active(Some(Ok(Some(45.0))), Some(Ok(Some("ImportFailed".into())))),
            // B: failures only: unknown, so the last known values stay.
            active(Some(Err(err())), Some(Err(err()))),
            // C: "not stalled" from one rule, nothing from the other; no progress said.
            active(Some(Ok(None)), Some(Ok(None))),
            active(None, None),
            // D: "not stalled" and a failure: unknown.
            active(None, Some(Ok(None))),
            active(None, Some(Err(err()))),
        ];
        let names = ops(&["A", "A", "B", "C", "C", "D", "D"]);
        let read: Vec<_> = signals(&names, &rules)
            .into_iter()
            .map(|(op, s)| match s {
                Signal::Active {
                    progress, stalled, ..
                } => (op, progress, stalled),
                other => panic!("{op}: {other:?}"),
            })
            .collect();
        assert_eq!(
            read,
            [
                (
                    "A",
                    Reading::Value(45.0),
                    Reading::Value(Some("ImportFailed"))
                ),
                ("B", Reading::Unknown, Reading::Unknown),
                ("C", Reading::None, Reading::Value(None)),
                ("D", Reading::None, Reading::Unknown),
            ]
        );
    }
}
