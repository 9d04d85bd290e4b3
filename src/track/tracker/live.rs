//! What the rules of an active operation report on each event besides matching: its message,
//! progress, stall and label values; an expression that failed reads as unknown, and the value
//! shown before is kept rather than made to flap.

use jiff::Timestamp;

use super::super::signal::{Message, Reading};
use crate::evaluate::EvalError;
use crate::operation::Stall;

/// What the rules of an active operation report on each event besides matching.
pub(super) struct Live<'a> {
    pub(super) message: Message<'a>,
    pub(super) progress: Reading<f64>,
    pub(super) stalled: Reading<Option<&'a str>>,
}

impl Live<'_> {
    /// The progress to show: the one reported, or the last known when the expression failed.
    pub(super) fn progress(&self, previous: Option<f64>) -> Option<f64> {
        match self.progress {
            Reading::None => None,
            Reading::Value(p) => Some(p),
            Reading::Unknown => previous,
        }
    }

    /// The stall to show: the one reported (since when it started), or the last known when
    /// the expression failed.
    pub(super) fn stalled(&self, previous: Option<&Stall>, now: Timestamp) -> Option<Stall> {
        match self.stalled {
            Reading::None | Reading::Value(None) => None,
            Reading::Value(Some(reason)) => Some(Stall::reported(reason, now).continuing(previous)),
            Reading::Unknown => previous.cloned(),
        }
    }
}

/// Successful label expression results. A failed expression is unknown rather than absent, so
/// the value it had before (`previous`, if any) is kept instead of making the label flap.
pub(super) fn dynamic_labels<'a>(
    results: &'a [(String, Result<String, EvalError>)],
    previous: impl Fn(&str) -> Option<&'a str>,
) -> Vec<(&'a str, &'a str)> {
    results
        .iter()
        .filter_map(|(key, result)| match result {
            Ok(value) => Some((key.as_str(), value.as_str())),
            Err(_) => Some((key.as_str(), previous(key)?)),
        })
        .collect()
}

/// `labels`, owned: what an entry keeps of its own label values.
pub(super) fn owned(labels: &[(&str, &str)]) -> Vec<(String, String)> {
    labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}
