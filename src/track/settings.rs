//! Debounce and retention settings.

use jiff::SignedDuration;

/// How long operations stay visible around their end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Settings {
    /// Grace after a rule stops matching before the operation completes (`DEBOUNCE_THRESHOLD`).
    /// Matching again within it continues the same occurrence. Zero or negative completes at once.
    pub debounce: SignedDuration,
    /// Keep completed operations visible (`RETAIN_COMPLETED_IFOS`). When false, a completed
    /// operation is shown once as `Completed` and then deleted.
    pub retain_completed: bool,
    /// How long a retained completed operation stays, counted from its completion time.
    pub completed_retention: SignedDuration,
    /// Upper bound on retained completed operations; the oldest completions go first.
    pub max_completed: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            debounce: SignedDuration::from_secs(30),
            retain_completed: false,
            completed_retention: SignedDuration::from_mins(15),
            max_completed: 10_000,
        }
    }
}
