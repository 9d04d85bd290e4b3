//! The field an author most likely meant: the nearest known name by edit distance.

/// The name in `known` nearest to `typed`, when it is near enough to be a typo: a different
/// case, or at most a third of the letters (at least 2) changed, added or removed.
pub(super) fn nearest<'a>(typed: &str, known: &[&'a str]) -> Option<&'a str> {
    let lower = typed.to_lowercase();
    let limit = (typed.chars().count() / 3).max(2);
    known
        .iter()
        .map(|k| {
            let distance = if k.to_lowercase() == lower {
                0
            } else {
                strsim::levenshtein(typed, k).min(strsim::damerau_levenshtein(typed, k))
            };
            (distance, *k)
        })
        .filter(|(d, _)| *d <= limit)
        .min()
        .map(|(_, k)| k)
}

#[cfg(test)]
mod tests {
    use super::nearest;

    #[test]
    fn a_typo_finds_the_field_and_a_stranger_finds_none() {
        let known = ["printableStatus", "conditions", "ready", "created"];
        assert_eq!(nearest("printableStatsu", &known), Some("printableStatus"));
        assert_eq!(nearest("printablestatus", &known), Some("printableStatus"));
        assert_eq!(nearest("conditon", &known), Some("conditions"));
        assert_eq!(nearest("phase", &known), None);
        assert_eq!(nearest("x", &[]), None);
    }
}
