//! What the lanes of one watcher do when evaluation cannot keep up ([`Behind`]): work lost is
//! reported and a relist asked for; and the look at every lane's lag from outside the lanes
//! ([`watch_lag`]), which marks a ruleset not current in a namespace while its lag there is over
//! the bound.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::queue::{Place, Shared};
use crate::detect::LagSaid;
use crate::detect::detector::Detector;
use crate::ruleset::{CompiledRuleSet, Target};

/// How often the lanes' lag is looked at: a quarter of the bound, within these.
const LAG_TICK_MIN: Duration = Duration::from_millis(50);
const LAG_TICK_MAX: Duration = Duration::from_secs(1);

/// The longest one look spends finding the nodes of the changes that lag: past it, they may be
/// on any node. The lines of a lane hold at most `LANE_CAPACITY` objects, and a node label is
/// typically one field read (microseconds), so this is reached only by labels that are costly
/// on the objects queued.
const NODES_LOOK: Duration = Duration::from_secs(1);

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

    /// `ruleset`'s lane lags in `place` as `said` (over the bound), or no longer does
    /// (`None`): its detection there is not current meanwhile. Nothing is lost.
    pub(super) fn lagging(&self, ruleset: &CompiledRuleSet, place: &Place, said: Option<LagSaid>) {
        let name = &ruleset.info.name;
        let namespace = place.as_deref();
        match &said {
            Some(said) => tracing::warn!(
                ruleset = %name,
                target = %self.target,
                namespace,
                lag = ?said.lag,
                bound = ?said.bound,
                nodes = ?said.nodes,
                "evaluation lags: its detection there is not current until it catches up"
            ),
            None => {
                tracing::info!(ruleset = %name, target = %self.target, namespace, "evaluation caught up")
            }
        }
        self.detector
            .health()
            .lagging(&self.target, ruleset, namespace, said);
    }
}

/// What each lane of a watcher was last said to lag by, by place (places within the bound are
/// left out), by lane.
pub(super) struct LagMarks {
    /// The lanes ended: nothing is marked any more.
    pub(super) closed: bool,
    pub(super) said: Vec<HashMap<Place, LagSaid>>,
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

/// What one look at a lane found: each place's lag, and, where it is over the bound, the
/// objects whose changes are not seen yet there.
struct Look {
    lags: HashMap<Place, Duration>,
    unseen: Unseen,
}

/// The objects whose changes are not seen yet, by place.
type Unseen = Vec<(Place, Vec<Arc<serde_json::Value>>)>;

/// Looks at the lag of `lanes` (each with its ruleset and gauge), per place, every quarter of
/// `bound` (at most every second), from outside the lanes: a lane busy in a long evaluation does
/// not hold this up. Where a place lags past the bound, the nodes its late changes are on are
/// looked up (the ruleset's node labels on them, on the blocking pool, for at most
/// [`NODES_LOOK`] a look; past that, any node), so that the node gates the lag can hide an
/// operation in, and only those, read Unknown. Runs until the lanes end (see [`Lanes`]'s
/// `Drop`).
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
        let looks: Vec<Look> = lanes
            .iter()
            .map(|(_, shared, gauge)| {
                let queue = shared.queue.lock();
                let lags = queue.lags(now);
                let unseen = lags
                    .iter()
                    .filter(|(_, lag)| **lag > bound)
                    .map(|(place, _)| (place.clone(), queue.unseen(place)))
                    .collect();
                drop(queue);
                gauge.set(lags.values().copied().max().unwrap_or_default());
                Look { lags, unseen }
            })
            .collect();
        let nodes = nodes_of_unseen(&behind.detector, &lanes, &looks).await;
        let mut marks = marks.lock();
        if marks.closed {
            return;
        }
        for (((ruleset, _, _), look), (said, mut nodes)) in lanes
            .iter()
            .zip(&looks)
            .zip(marks.said.iter_mut().zip(nodes))
        {
            let mut saying: HashMap<Place, LagSaid> = HashMap::new();
            for (place, lag) in &look.lags {
                let before = said.get(place).map(|s| s.lag);
                if let Some(lag) = lag_to_say(before, *lag, bound) {
                    let nodes = nodes.remove(place).unwrap_or(None);
                    saying.insert(place.clone(), LagSaid { lag, bound, nodes });
                }
            }
            for (place, now_said) in &saying {
                if said.get(place) != Some(now_said) {
                    behind.lagging(ruleset, place, Some(now_said.clone()));
                }
            }
            for place in said.keys().filter(|p| !saying.contains_key(*p)) {
                behind.lagging(ruleset, place, None);
            }
            *said = saying;
        }
    }
}

/// The nodes of what each look found unseen, by lane and place (see
/// [`Detector::nodes_of_unseen`]), looked up on the blocking pool for at most [`NODES_LOOK`].
async fn nodes_of_unseen(
    detector: &Arc<Detector>,
    lanes: &[(
        Arc<CompiledRuleSet>,
        Arc<Shared>,
        crate::metrics::EvaluationLag,
    )],
    looks: &[Look],
) -> Vec<HashMap<Place, Option<BTreeSet<String>>>> {
    let work: Vec<(Arc<CompiledRuleSet>, Unseen)> = lanes
        .iter()
        .zip(looks)
        .map(|((ruleset, _, _), look)| (ruleset.clone(), look.unseen.clone()))
        .collect();
    if work.iter().all(|(_, unseen)| unseen.is_empty()) {
        return vec![HashMap::new(); lanes.len()];
    }
    let detector = detector.clone();
    let looked = tokio::task::spawn_blocking(move || {
        let deadline = std::time::Instant::now() + NODES_LOOK;
        work.into_iter()
            .map(|(ruleset, unseen)| {
                unseen
                    .into_iter()
                    .map(|(place, objects)| {
                        let nodes = detector.nodes_of_unseen(&ruleset, &objects, deadline);
                        (place, nodes)
                    })
                    .collect()
            })
            .collect()
    })
    .await;
    // Lost (the runtime is shutting down): any node.
    looked.unwrap_or_else(|_| vec![HashMap::new(); lanes.len()])
}
