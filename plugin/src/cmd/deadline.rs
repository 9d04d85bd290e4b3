//! `wait --timeout`: the next event of a watch, or the end of the time allowed.

use futures::{Stream, StreamExt};
use jiff::SignedDuration;
use tokio::time::Instant;

/// When a `wait` gives up: `--timeout` after it began, or never.
pub(crate) struct Deadline {
    timeout: Option<SignedDuration>,
    at: Option<Instant>,
}

/// The deadline passed before the next event.
pub(crate) struct TimedOut;

impl Deadline {
    /// `timeout` from now; none: wait for ever.
    pub(crate) fn after(timeout: Option<SignedDuration>) -> Self {
        let at = timeout
            .and_then(|t| std::time::Duration::try_from(t).ok())
            .map(|t| Instant::now() + t);
        Self { timeout, at }
    }

    /// The next item of `events` (`None`: the stream ended), or [`TimedOut`] once the deadline
    /// passes first, saying so on stderr (`timed out after 3s`).
    pub(crate) async fn next<S: Stream + Unpin>(
        &self,
        events: &mut S,
    ) -> Result<Option<S::Item>, TimedOut> {
        let Some(at) = self.at else {
            return Ok(events.next().await);
        };
        match tokio::time::timeout_at(at, events.next()).await {
            Ok(next) => Ok(next),
            Err(_) => {
                let waited = self.timeout.map(|t| format!("{t:#}")).unwrap_or_default();
                eprintln!("timed out after {waited}");
                Err(TimedOut)
            }
        }
    }
}
