//! Stale targets grouped by cause: many targets the server may not list (RBAC), or whose first
//! list is not done (the initial sync), are told as one reason each cause, by the server's
//! `Warning`s and by the plugin alike, rather than one line a resource type.

/// How the server says a target is not watched (the start of a stale target's reason).
pub const NOT_WATCHED: &str = "is not being watched: ";

/// Why a target whose first list is not done is not watched.
pub const FIRST_LIST_PENDING: &str = "its first list has not completed";

/// Fewest targets of one cause told in one line: below, each is told as it is (a few lines that
/// each name their target read better than a count).
pub const GROUP_FROM: usize = 4;

/// A cause many targets can be stale for at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StaleCause {
    /// The server is forbidden to list them.
    Forbidden,
    /// Their first list is not done.
    FirstList,
}

impl StaleCause {
    const ALL: [StaleCause; 2] = [StaleCause::Forbidden, StaleCause::FirstList];

    /// Whether `reason`, a stale target's reason as served (`staleTargets[].reason`, which
    /// reads as the rest of a sentence whose subject is the target), is of this cause.
    pub fn of(self, reason: &str) -> bool {
        let Some(why) = reason.strip_prefix(NOT_WATCHED) else {
            return false;
        };
        match self {
            StaleCause::Forbidden => why.contains("forbidden"),
            StaleCause::FirstList => why.contains(FIRST_LIST_PENDING),
        }
    }
}

/// The targets of one cause, told as one reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CauseGroup {
    /// The cause.
    pub cause: StaleCause,
    /// The targets' names, distinct and sorted (at least [`GROUP_FROM`]).
    pub names: Vec<String>,
}

impl CauseGroup {
    /// The first three names, and how many more.
    pub fn some_names(&self) -> String {
        let shown = self
            .names
            .iter()
            .take(3)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        match self.names.len().saturating_sub(3) {
            0 => shown,
            more => format!("{shown} and {more} more"),
        }
    }
}

/// The causes for which [`GROUP_FROM`] or more of `stale` (target name, reason as served) are
/// stale, and for each of `stale` whether one of those groups tells it.
pub fn group_by_cause(stale: &[(&str, &str)]) -> (Vec<CauseGroup>, Vec<bool>) {
    let mut groups = Vec::new();
    let mut grouped = vec![false; stale.len()];
    for cause in StaleCause::ALL {
        let mut names: Vec<String> = stale
            .iter()
            .filter(|(_, reason)| cause.of(reason))
            .map(|(name, _)| (*name).to_owned())
            .collect();
        names.sort();
        names.dedup();
        if names.len() < GROUP_FROM {
            continue;
        }
        for (told, (_, reason)) in grouped.iter_mut().zip(stale) {
            *told |= cause.of(reason);
        }
        groups.push(CauseGroup { cause, names });
    }
    (groups, grouped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_targets_of_a_cause_are_one_group_and_fewer_are_not() {
        let forbidden = "is not being watched: list failed: x is forbidden: User \"u\" cannot list";
        let first = "is not being watched: its first list has not completed";
        let stale = [
            ("d/v1", forbidden),
            ("a/v1", forbidden),
            ("b/v1", forbidden),
            ("a/v1", forbidden),
            ("c/v1", forbidden),
            ("e/v1", forbidden),
            ("p/v1", first),
            ("q/v1", first),
            // Not a reason of a target that is not watched: never grouped.
            (
                "s/v1",
                "is skipped: object ns/forbidden-thing is over the budget",
            ),
        ];
        let (groups, grouped) = group_by_cause(&stale);
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].cause, StaleCause::Forbidden);
        assert_eq!(groups[0].names, ["a/v1", "b/v1", "c/v1", "d/v1", "e/v1"]);
        assert_eq!(groups[0].some_names(), "a/v1, b/v1, c/v1 and 2 more");
        assert_eq!(
            grouped,
            [true, true, true, true, true, true, false, false, false]
        );
    }
}
