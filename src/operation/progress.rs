//! How far along an operation is: the progress and stall its rule reports, and the end expected
//! from what similar operations took.

use jiff::Timestamp;

/// The reason of a stall judged from history rather than reported by the rule.
pub(crate) const OVERDUE_BY_HISTORY: &str = "OverdueByHistory";

/// The condition reason of a stall the rule reported without a reason of its own, or with one
/// that is not a condition reason (a sentence rather than a `CamelCase` word).
pub(super) const REPORTED_BY_RULE: &str = "ReportedByRule";

/// An operation that is not progressing: the `Stalled` condition of its object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stall {
    /// The condition's `reason`: a `CamelCase` word.
    pub reason: String,
    /// The condition's `message`: what is wrong, in words.
    pub message: String,
    /// When it became stalled (the condition's `lastTransitionTime`).
    pub since: Timestamp,
}

impl Stall {
    /// A stall the rule's `stalled` expression reported at `now`, with the reason it gave
    /// (empty when it said `true`). A reason that is a condition reason (`ImportFailed`) is the
    /// condition's reason and message; any other text is its message.
    pub fn reported(reason: &str, now: Timestamp) -> Stall {
        let (reason, message) = if reason.is_empty() {
            (
                REPORTED_BY_RULE.to_owned(),
                "the rule reports the operation stalled".to_owned(),
            )
        } else if is_condition_reason(reason) {
            (reason.to_owned(), reason.to_owned())
        } else {
            (REPORTED_BY_RULE.to_owned(), reason.to_owned())
        };
        Stall {
            reason,
            message,
            since: now,
        }
    }

    /// The same stall, still going: keeps the time it started when the rule's result is the
    /// same as before.
    pub fn continuing(self, previous: Option<&Stall>) -> Stall {
        match previous {
            Some(p) if p.reason == self.reason && p.message == self.message => Stall {
                since: p.since,
                ..self
            },
            _ => self,
        }
    }
}

/// Whether `s` is a valid `metav1.Condition` reason: a letter, then letters, digits, `_`, `,`
/// or `:`, not ending in `,` or `:`, at most 1024 characters.
fn is_condition_reason(s: &str) -> bool {
    let mut chars = s.chars();
    s.len() <= 1024
        && chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | ',' | ':'))
        && !s.ends_with([',', ':'])
}

/// What an expected end is based on (`status.estimate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr)]
pub enum EstimateBasis {
    /// Start + the median duration of the rule's operations that succeeded.
    History,
    /// The time elapsed, extrapolated by the progress the rule reports.
    Progress,
    /// The end of its debounce grace: no rule detects it any more, and it completes then
    /// unless detected again.
    Grace,
}

impl EstimateBasis {
    /// As in `status.estimate`.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// What history and progress say of an active operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expectation {
    /// When it is expected to end (`status.expectedEnd`).
    pub end: Timestamp,
    /// What `end` is based on.
    pub basis: EstimateBasis,
    /// By when nine in ten operations like it have ended, given how long it has run
    /// (`status.expectedEndP90`): the band's far edge, from history only.
    pub p90_end: Option<Timestamp>,
    /// Set once it runs past what its rule's operations normally take (reason
    /// [`OVERDUE_BY_HISTORY`]).
    pub overdue: Option<Stall>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reported_reasons_become_condition_reasons_only_when_they_are_one() {
        let now: Timestamp = "2026-11-22T10:00:00Z".parse().unwrap();
        let s = Stall::reported("ImportFailed", now);
        assert_eq!(
            (s.reason.as_str(), s.message.as_str()),
            ("ImportFailed", "ImportFailed")
        );
        let s = Stall::reported("Unable to connect to http data source: 404", now);
        assert_eq!(s.reason, REPORTED_BY_RULE);
        assert_eq!(s.message, "Unable to connect to http data source: 404");
        let s = Stall::reported("", now);
        assert_eq!(s.reason, REPORTED_BY_RULE);
        assert!(!is_condition_reason("Bad:"));
        assert!(!is_condition_reason("9Lives"));
    }

    #[test]
    fn a_continuing_stall_keeps_its_start() {
        let t0: Timestamp = "2026-11-22T10:00:00Z".parse().unwrap();
        let t1: Timestamp = "2026-11-22T10:05:00Z".parse().unwrap();
        let first = Stall::reported("ImportFailed", t0);
        let again = Stall::reported("ImportFailed", t1).continuing(Some(&first));
        assert_eq!(again.since, t0);
        let other = Stall::reported("Restarting", t1).continuing(Some(&first));
        assert_eq!(other.since, t1);
    }
}
