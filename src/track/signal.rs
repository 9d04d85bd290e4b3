//! One signal per operation from the per-rule results of an evaluation.
//!
//! Several rules of a ruleset may detect the same operation (e.g. different conditions meaning
//! "migrating"). The operation is active if any of them matches; if none matches but one failed
//! to evaluate, whether it is active is unknown; only when all say "no" has it stopped.

use jiff::Timestamp;

use crate::evaluate::RuleResult;
use crate::operation::Outcome;

/// What an evaluation says about one operation.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Signal<'a> {
    Active {
        message: Message<'a>,
        /// The first successfully evaluated start time among the matching rules.
        start: Option<Timestamp>,
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
        } => Some((message, start_time)),
        _ => None,
    });
    if active.clone().next().is_some() {
        let mut message = Message::None;
        for (m, _) in active.clone() {
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
            .filter_map(|(_, s)| s.as_ref()?.as_ref().ok())
            .next()
            .copied();
        return Signal::Active { message, start };
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evaluate::EvalError;

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
            },
            RuleResult::Active {
                message: Some(Ok("m".into())),
                start_time: Some(Ok(t)),
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
                    start: Some(t)
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
                        start: None
                    }
                ),
            ]
        );
    }
}
