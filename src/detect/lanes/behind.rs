//! What the lanes of one watcher do when evaluation cannot keep up ([`Behind`]): work lost is
//! reported and a relist asked for; and the look at every lane's lag from outside the lanes
//! ([`watch_lag`]), which marks a ruleset not current while its lag is over the bound.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::queue::Shared;
use crate::detect::detector::Detector;
use crate::ruleset::{CompiledRuleSet, Target};

/// How often the lanes' lag is looked at: a quarter of the bound, within these.
const LAG_TICK_MIN: Duration = Duration::from_millis(50);
const LAG_TICK_MAX: Duration = Duration::from_secs(1);

/// What the lanes of one watcher do when evaluation cannot keep up, loses work, or lags.
pub(super) struct Behind {
    pub(super) detector: Arc<Detector>,
    pub(super) target: Target,
    /// Notified at the first loss: the watcher lists the target again.
    pub(super) relist: Arc<Notify>,
    /// Whether any lane lost work.
    pub(super) dropped: AtomicBool,
}

impl Behind {
    /// `ruleset` lost work (`what`): its detection on the target is not current (answers carry
    /// a `Warning`, gates are Unknown) until the target is listed again, which this asks for.
    pub(super) fn lost(&self, ruleset: &CompiledRuleSet, what: &str) {
        let name = &ruleset.info.name;
        crate::metrics::evaluation_event_dropped(&ruleset.owner().name);
        tracing::warn!(ruleset = %name, target = %self.target, "{what}");
        self.detector
            .health()
            .dropped_events(&self.target, ruleset, what.to_owned());
        if !self.dropped.swap(true, Ordering::AcqRel) {
            self.relist.notify_one();
        }
    }

    /// `ruleset`'s lane lags by `lag`, over `bound` (`Some((lag, bound))`), or no longer does
    /// (`None`): its detection on the target is not current meanwhile. Nothing is lost.
    pub(super) fn lagging(&self, ruleset: &CompiledRuleSet, lag: Option<(Duration, Duration)>) {
        let name = &ruleset.info.name;
        match lag {
            Some((lag, bound)) => tracing::warn!(
                ruleset = %name,
                target = %self.target,
                lag = ?lag,
                bound = ?bound,
                "evaluation lags: its detection is not current until it catches up"
            ),
            None => tracing::info!(ruleset = %name, target = %self.target, "evaluation caught up"),
        }
        self.detector.health().lagging(&self.target, ruleset, lag);
    }
}

/// The lag each lane of a watcher was last said to have (`None`: within the bound), by lane.
pub(super) struct LagMarks {
    /// The lanes ended: nothing is marked any more.
    pub(super) closed: bool,
    pub(super) said: Vec<Option<Duration>>,
}

/// What to say of a lane's lag `lag` after `said` (`None`: nothing, within the bound): nothing
/// within `bound`; over it, the lag in whole seconds (at least the bound), said again only once
/// it has doubled or fallen, so that what gates and warnings say does not change at every look.
pub(super) fn lag_to_say(
    said: Option<Duration>,
    lag: Duration,
    bound: Duration,
) -> Option<Duration> {
    if lag <= bound {
        return None;
    }
    match said {
        Some(said) if lag >= said && lag < said * 2 => Some(said),
        _ => Some(Duration::from_secs(lag.as_secs()).max(bound)),
    }
}

/// Looks at the lag of `lanes` (each with its ruleset and gauge) every quarter of `bound` (at
/// most every second), from outside the lanes: a lane busy in a long evaluation does not hold
/// this up. Runs until the lanes end (see [`Lanes`]'s `Drop`).
pub(super) async fn watch_lag(
    lanes: Vec<(
        Arc<CompiledRuleSet>,
        Arc<Shared>,
        crate::metrics::EvaluationLag,
    )>,
    behind: Arc<Behind>,
    marks: Arc<Mutex<LagMarks>>,
    bound: Duration,
) {
    let mut tick = tokio::time::interval((bound / 4).clamp(LAG_TICK_MIN, LAG_TICK_MAX));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let now = Instant::now();
        let mut marks = marks.lock();
        if marks.closed {
            return;
        }
        for ((ruleset, shared, gauge), said) in lanes.iter().zip(marks.said.iter_mut()) {
            let lag = shared.lag(now);
            gauge.set(lag);
            let say = lag_to_say(*said, lag, bound);
            if say != *said {
                *said = say;
                behind.lagging(ruleset, say.map(|lag| (lag, bound)));
            }
        }
    }
}
