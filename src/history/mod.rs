//! What operations normally take, learned from the ones that completed, and what that says of
//! the ones in flight: their expected end (`status.expectedEnd`) and whether they are overdue
//! (`Stalled`, reason `OverdueByHistory`).
//!
//! * [`Durations`]: per (ruleset, operation), the durations of the last operations that
//!   succeeded (and counts of the other outcomes), bounded in memory; published on the
//!   ruleset's status and seeded from it at start, so it survives restarts and failovers.
//! * `own`: per subject that repeats its operations (a CronJob's runs, a VM's migrations), what
//!   they took: what its operations are expected to take once it has enough, rather than its
//!   rule's mix of every object. Bounded, in memory only.
//! * `quantiles`: what a window of durations says the next one takes (median, p90, p99).
//! * `coverage`: how often the estimates came true, judged at each end against the first
//!   estimate its operation showed (published with the durations).
//! * [`replay`]: operations of a known distribution through both, on a simulated clock: what
//!   the calibration figures are measured with.
//! * [`expect`]: the expectation of one active operation, pure.
//! * [`refreshed`]: an active record with its expectation brought up to date, when it changed.

mod coverage;
mod durations;
mod expectation;
mod own;
mod quantiles;
pub mod replay;

use std::sync::Arc;

use jiff::Timestamp;

pub use coverage::{ENDS_WINDOW, Figures, MIN_ENDS, RELIABLE_P90};
pub use durations::{Durations, RuleCoverage, WINDOW};
pub use expectation::MIN_SAMPLES;
pub(crate) use expectation::{expect, settle};
pub(crate) use own::{expected, named_key};

use crate::operation::{InFlightOperation, Phase};

/// `op` (an active record) with the expectation `learned` gives at `now` (its subject's own
/// durations once it has enough, else its rule's), or `None` when what it shows is still right
/// (see [`settle`]).
pub fn refreshed(
    op: &Arc<InFlightOperation>,
    learned: &Durations,
    now: Timestamp,
) -> Option<Arc<InFlightOperation>> {
    if op.phase != Phase::Active {
        return None;
    }
    let quantiles = learned.in_flight(op);
    let new = settle(
        op.expectation.as_ref(),
        expect(quantiles.as_ref(), op, now),
        op.created,
        now,
    );
    (new != op.expectation).then(|| {
        Arc::new(InFlightOperation {
            expectation: new,
            ..(**op).clone()
        })
    })
}
