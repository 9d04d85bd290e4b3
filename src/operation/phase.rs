//! Lifecycle phase and final outcome of an operation.

use std::fmt;
use std::str::FromStr;

/// `status.phase`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// The operation's rule matches, or stopped matching less than the debounce grace ago.
    Active,
    /// The operation ended; `status.outcome` says how.
    Completed,
}

impl Phase {
    /// Every phase, for the OpenAPI enum.
    pub const ALL: [Phase; 2] = [Phase::Active, Phase::Completed];

    /// The name served in `status.phase`.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Active => "Active",
            Phase::Completed => "Completed",
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `status.outcome` of a completed operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The operation did what it set out to do (an outcome expression said so).
    Succeeded,
    /// The operation ended in failure (an outcome expression said so).
    Failed,
    /// The operation was called off (an outcome expression said so).
    Canceled,
    /// A newer operation took over from this one (an outcome expression said so).
    Superseded,
    /// The subject disappeared while the operation was active.
    SubjectDeleted,
    /// The ruleset that detected it was deleted, made invalid or no longer has the rule.
    RuleSetRemoved,
    /// The rule stopped matching and no outcome expression said how it ended.
    Unknown,
}

impl Outcome {
    /// Every outcome, for the OpenAPI enum and for parsing outcome expressions' results.
    pub const ALL: [Outcome; 7] = [
        Outcome::Succeeded,
        Outcome::Failed,
        Outcome::Canceled,
        Outcome::Superseded,
        Outcome::SubjectDeleted,
        Outcome::RuleSetRemoved,
        Outcome::Unknown,
    ];

    /// The name served in `status.outcome`, and the one outcome expressions return.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Succeeded => "Succeeded",
            Outcome::Failed => "Failed",
            Outcome::Canceled => "Canceled",
            Outcome::Superseded => "Superseded",
            Outcome::SubjectDeleted => "SubjectDeleted",
            Outcome::RuleSetRemoved => "RuleSetRemoved",
            Outcome::Unknown => "Unknown",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An outcome expression returned a string that is not one of the outcome names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown outcome {0:?}")]
pub struct ParseOutcomeError(pub String);

impl FromStr for Outcome {
    type Err = ParseOutcomeError;

    /// Exact, case-sensitive names: these are API enum values, and accepting variants would
    /// let rules that only work here be written.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Outcome::ALL
            .into_iter()
            .find(|o| o.as_str() == s)
            .ok_or_else(|| ParseOutcomeError(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcome_names_round_trip_exactly() {
        for o in Outcome::ALL {
            assert_eq!(o.as_str().parse::<Outcome>(), Ok(o));
        }
        assert!("succeeded".parse::<Outcome>().is_err());
        assert!(" Failed".parse::<Outcome>().is_err());
        assert_eq!(Phase::Completed.to_string(), "Completed");
    }
}
