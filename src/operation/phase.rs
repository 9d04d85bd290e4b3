//! Lifecycle phase and final outcome of an operation.

use strum::{Display, EnumString, IntoStaticStr, VariantArray};

/// `status.phase`. Its names are exact and case-sensitive (`FromStr`, `Display`, `as_str`):
/// they are API enum values. [`strum::VariantArray::VARIANTS`] lists them, for the OpenAPI enum.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, IntoStaticStr, Display, EnumString, VariantArray,
)]
pub enum Phase {
    /// The operation's rule matches, or stopped matching less than the debounce grace ago.
    Active,
    /// The operation ended; `status.outcome` says how.
    Completed,
}

impl Phase {
    /// The name served in `status.phase`.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// `status.outcome` of a completed operation, named as [`Phase`] is: outcome expressions must
/// return one of these names exactly, so that no rule works here only.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, IntoStaticStr, Display, EnumString, VariantArray,
)]
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
    /// The name served in `status.outcome`, and the one outcome expressions return.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcome_names_round_trip_exactly() {
        for &o in Outcome::VARIANTS {
            assert_eq!(o.as_str().parse::<Outcome>(), Ok(o));
        }
        assert!("succeeded".parse::<Outcome>().is_err());
        assert!(" Failed".parse::<Outcome>().is_err());
        assert_eq!(Phase::Completed.to_string(), "Completed");
    }
}
