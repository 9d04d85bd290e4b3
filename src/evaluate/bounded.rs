//! Bounded strings: what an expression returns, or an error quotes, comes from object data of any
//! size (a 1,000,000-character status field is a valid object). Messages are cut at Kubernetes'
//! limit for a condition's message, error texts (which go to ruleset status and logs, on every
//! event) much shorter; either way with a marker saying so.

/// Longest message an operation carries, in characters (Kubernetes' limit on a condition's
/// message).
pub(crate) const MAX_MESSAGE_CHARS: usize = 32_768;

/// Longest evaluation error text kept, in characters.
pub(super) const MAX_ERROR_CHARS: usize = 1_024;

use std::borrow::Cow;

/// What ends a cut text.
pub(super) const TRUNCATED: &str = "… [truncated]";

/// `text` if it has at most `max` characters; else its beginning, ending with [`TRUNCATED`], in
/// `max` characters in all. Only what is kept is copied.
pub(super) fn bounded(text: &str, max: usize) -> Cow<'_, str> {
    // Byte length bounds character count: most texts are short and need no counting.
    if text.len() <= max || text.chars().nth(max).is_none() {
        return Cow::Borrowed(text);
    }
    let keep = max.saturating_sub(TRUNCATED.chars().count());
    let end = text.char_indices().nth(keep).map_or(text.len(), |(i, _)| i);
    Cow::Owned(format!("{}{TRUNCATED}", &text[..end]))
}

/// [`bounded`], for an owned text.
pub(crate) fn truncated(text: String, max: usize) -> String {
    match bounded(&text, max) {
        Cow::Borrowed(_) => text,
        Cow::Owned(cut) => cut,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_texts_are_kept_long_ones_cut_with_a_marker() {
        assert_eq!(truncated("abc".into(), 20), "abc");
        let exact = "é".repeat(20);
        assert_eq!(truncated(exact.clone(), 20), exact);
        let long = "é".repeat(1_000_000);
        let cut = truncated(long, MAX_MESSAGE_CHARS);
        assert_eq!(cut.chars().count(), MAX_MESSAGE_CHARS);
        assert!(cut.ends_with(TRUNCATED));
        assert!(cut.starts_with("éé"));
    }
}
