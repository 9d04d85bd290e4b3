//! A condition's `status`, read once: Kubernetes writes it as the strings `True`, `False` and
//! `Unknown` (metav1.ConditionStatus); every reader of a condition here reads it through this
//! type, and only [`ConditionStatus::as_str`] writes the strings.

use strum::{EnumString, IntoStaticStr};

/// A condition's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, IntoStaticStr, EnumString)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// It does not.
    False,
    /// Whether it holds is not known.
    Unknown,
}

impl ConditionStatus {
    /// What a condition's `status` says; anything but `True` and `False` is unknown, as
    /// Kubernetes reads it.
    pub fn of(status: &str) -> ConditionStatus {
        status.parse().unwrap_or(ConditionStatus::Unknown)
    }

    /// The status as the wire carries it.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Whether a condition with `status` holds (is `True`).
    pub fn holds(status: &str) -> bool {
        ConditionStatus::of(status) == ConditionStatus::True
    }
}

#[cfg(test)]
mod tests {
    use super::ConditionStatus;

    #[test]
    fn only_the_exact_words_are_read_as_true_or_false() {
        assert_eq!(ConditionStatus::of("True"), ConditionStatus::True);
        assert_eq!(ConditionStatus::of("False"), ConditionStatus::False);
        for other in ["Unknown", "true", "", "TRUE", " True"] {
            assert_eq!(
                ConditionStatus::of(other),
                ConditionStatus::Unknown,
                "{other:?}"
            );
        }
        for s in [
            ConditionStatus::True,
            ConditionStatus::False,
            ConditionStatus::Unknown,
        ] {
            assert_eq!(ConditionStatus::of(s.as_str()), s);
        }
    }
}
