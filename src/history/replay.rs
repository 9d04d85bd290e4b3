//! Operations of a known distribution replayed through the learner and the coverage tracker
//! on a simulated clock: what the calibration figures of docs/performance.md are measured with,
//! and what the replay tests of docs/api.md hold them to.
//!
//! Operations start at random (exponential gaps, on average half the distribution's median
//! apart, so a few are in flight at once) and each ends after a duration drawn from the shape;
//! optionally from some operation on, every duration is multiplied (operations became slower).
//! Each operation shows the estimate history gives it when it starts, or, started before its
//! rule had enough history, when history first gives one (the server looks every 5 s; here at
//! every start and end); that first estimate is judged when it ends, as the server does (see
//! `coverage`). Pure: no clock, no I/O, the same figures for the same seed.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};

use super::Durations;
use crate::operation::{InFlightOperation, Outcome, Phase, RuleSetInfo, Subject};

/// The ruleset and operation the replayed operations belong to.
const RULESET: &str = "replay";
const OPERATION: &str = "Replaying";

/// The share of ends the p90 band is to cover: 85 to 95 %.
pub const BAND: (f64, f64) = (0.85, 0.95);

/// Ends after operations became twice as slow within which the published p90 coverage is back
/// inside [`BAND`] (docs/api.md): the learner's window (100 durations) and the tracker's (100
/// ends) both renewed, plus the slow operations' delay. Measured: at most 189 for a log-normal,
/// 300 for a bimodal shape, over 100 seeds (docs/performance.md).
pub const RECOVERY_ENDS: usize = 320;

/// A distribution of durations, in seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Shape {
    /// Log-normal: `median` × e^(`sigma` · Z), Z standard normal.
    LogNormal {
        /// Median, in seconds.
        median: f64,
        /// Spread of the logarithm (0.5: p90 at 1.9 × the median).
        sigma: f64,
    },
    /// Two log-normal modes: `slow_share` of the operations from the slow one.
    Bimodal {
        /// Median of the fast mode, in seconds.
        fast: f64,
        /// Median of the slow mode, in seconds.
        slow: f64,
        /// Spread of the logarithm within each mode.
        sigma: f64,
        /// Share of operations in the slow mode (0 to 1).
        slow_share: f64,
    },
    /// Pareto (heavy-tailed): at least `scale`, P(X > x) = (`scale` / x)^`alpha`.
    Pareto {
        /// The shortest duration, in seconds.
        scale: f64,
        /// The tail's index (1.5: a finite mean, an infinite variance).
        alpha: f64,
    },
}

impl Shape {
    /// A typical duration, to space starts by.
    fn median(self) -> f64 {
        match self {
            Shape::LogNormal { median, .. } => median,
            Shape::Bimodal { fast, .. } => fast,
            Shape::Pareto { scale, alpha } => scale * 2f64.powf(1.0 / alpha),
        }
    }

    fn draw(self, rng: &mut fastrand::Rng) -> f64 {
        match self {
            Shape::LogNormal { median, sigma } => median * (sigma * normal(rng)).exp(),
            Shape::Bimodal {
                fast,
                slow,
                sigma,
                slow_share,
            } => {
                let median = if rng.f64() < slow_share { slow } else { fast };
                median * (sigma * normal(rng)).exp()
            }
            Shape::Pareto { scale, alpha } => scale * (1.0 - rng.f64()).powf(-1.0 / alpha),
        }
    }
}

/// The share of ends the p90 band holds when its rule has `n` durations: each of `ends`
/// durations drawn from `shape` (multiplied by the factor from the end of index `slower_from`
/// on) is judged against the p90 of the `n` before it, as the server computes it
/// ([`super::quantiles::quantiles_of`]); and the share of the ends `marked` (by their index and
/// duration in seconds) that it held, when any were. A rule with `n` durations, for every `n`
/// the server might have: the figures of docs/performance.md's table by number of durations.
pub fn coverage_at(
    shape: Shape,
    n: usize,
    ends: usize,
    slower_from: Option<(usize, f64)>,
    marked: impl Fn(usize, f64) -> bool,
    seed: u64,
) -> (f64, Option<f64>) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let ms: Vec<u64> = (0..n + ends)
        .map(|i| {
            let factor = match slower_from {
                Some((from, factor)) if i >= n + from => factor,
                _ => 1.0,
            };
            // Saturating float to integer conversion, as the server's own durations are whole
            // milliseconds.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let ms = (shape.draw(&mut rng) * factor * 1000.0).round() as u64;
            ms
        })
        .collect();
    let (mut held, mut marked_ends, mut marked_held) = (0usize, 0usize, 0usize);
    for i in n..ms.len() {
        let p90 = super::quantiles::quantiles_of(ms[i - n..i].iter().copied()).p90;
        let covered = i128::from(ms[i]) <= p90.as_millis();
        held += usize::from(covered);
        #[allow(clippy::cast_precision_loss)]
        if marked(i - n, ms[i] as f64 / 1000.0) {
            marked_ends += 1;
            marked_held += usize::from(covered);
        }
    }
    #[allow(clippy::cast_precision_loss)]
    let share = |a: usize, b: usize| a as f64 / b as f64;
    (
        share(held, ends),
        (marked_ends > 0).then(|| share(marked_held, marked_ends)),
    )
}

/// A standard normal draw (Box–Muller).
fn normal(rng: &mut fastrand::Rng) -> f64 {
    let u1 = 1.0 - rng.f64();
    let u2 = rng.f64();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// One replay.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Replay {
    /// What the operations take.
    pub shape: Shape,
    /// How many operations start.
    pub operations: usize,
    /// From the operation of this index on, durations are multiplied by the factor.
    pub slower_from: Option<(usize, f64)>,
    /// The random draws' seed.
    pub seed: u64,
}

/// What a replay measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// Ends judged before the shift (all of them without one).
    pub judged: usize,
    /// Share of those that ended by their first expected end (the median).
    pub p50: f64,
    /// Share of those that ended by their first p90 end.
    pub p90: f64,
    /// For each judged end, in order: whether it ended by its first p90 end.
    pub by_p90: Vec<bool>,
    /// The tracker's p90 figure (over its window) after each judged end, in order.
    pub series: Vec<f64>,
    /// With a shift: the index in `series` of the first end of a slower operation.
    pub shift: Option<usize>,
}

impl Report {
    /// With a shift: how many ends after it the tracker's p90 figure took to be back inside
    /// [`BAND`] after it left it (0 when it never left); `None` when it never came back.
    pub fn recovered_after(&self) -> Option<usize> {
        let shift = self.shift?;
        let inside = |x: f64| (BAND.0..=BAND.1).contains(&x);
        let after = &self.series[shift..];
        let Some(left) = after.iter().position(|&x| !inside(x)) else {
            return Some(0);
        };
        after[left..]
            .iter()
            .position(|&x| inside(x))
            .map(|back| left + back + 1)
    }

    /// The lowest the tracker's p90 figure fell after the shift.
    pub fn lowest_after_shift(&self) -> Option<f64> {
        let shift = self.shift?;
        self.series[shift..].iter().copied().reduce(f64::min)
    }

    /// The share of the judged ends from the `from`-th on that came by their first p90 end.
    pub fn p90_from(&self, from: usize) -> f64 {
        let rest = &self.by_p90[from.min(self.by_p90.len())..];
        rest.iter().filter(|&&c| c).count() as f64 / rest.len().max(1) as f64
    }
}

fn at(start: Timestamp, seconds: f64) -> Timestamp {
    start + SignedDuration::try_from_secs_f64(seconds).unwrap_or(SignedDuration::MAX)
}

/// An operation in flight.
struct Flight {
    op: Arc<InFlightOperation>,
    end: Timestamp,
    slower: bool,
    /// The first estimate it showed: its expected end and p90 end.
    first: Option<(Timestamp, Timestamp)>,
}

/// A replay under way.
struct Run {
    durations: Durations,
    flights: Vec<Option<Flight>>,
    report: Report,
    by_p50: Vec<bool>,
}

impl Run {
    /// Shows an estimate on every operation in flight that has none yet, as the server's
    /// periodic pass does.
    fn estimate(&mut self, now: Timestamp) {
        for flight in self.flights.iter_mut().flatten() {
            if flight.first.is_some() {
                continue;
            }
            let Some(shown) = super::refreshed(&flight.op, &self.durations, now) else {
                continue;
            };
            if let Some(e) = &shown.expectation
                && let Some(p90) = e.p90_end
            {
                self.durations.shown(&shown);
                flight.first = Some((e.end, p90));
            }
        }
    }

    /// Operation `i` ends: completed in the learner, and, when it showed an estimate, judged,
    /// with the tracker's figure after it.
    fn finish(&mut self, i: usize) {
        let Some(flight) = self.flights[i].take() else {
            return;
        };
        let mut done = (*flight.op).clone();
        done.phase = Phase::Completed;
        done.outcome = Some(Outcome::Succeeded);
        done.completed = Some(flight.end);
        done.last_detected = flight.end;
        self.durations.completed(&done);
        let Some((end, p90_end)) = flight.first else {
            return;
        };
        let figures = self
            .durations
            .coverage(RULESET, OPERATION)
            .expect("an end was judged");
        let report = &mut self.report;
        report.series.push(figures.p90);
        report.by_p90.push(flight.end <= p90_end);
        self.by_p50.push(flight.end <= end);
        if flight.slower && report.shift.is_none() {
            report.shift = Some(report.series.len() - 1);
        }
    }
}

/// Runs `replay`.
pub fn replay(replay: &Replay) -> Report {
    let mut rng = fastrand::Rng::with_seed(replay.seed);
    let ruleset = RuleSetInfo {
        name: RULESET.to_owned(),
        component: RULESET.to_owned(),
        ..RuleSetInfo::default()
    };
    let epoch = Timestamp::UNIX_EPOCH;
    let gap = replay.shape.median() / 2.0;
    let mut run = Run {
        durations: Durations::default(),
        flights: Vec::with_capacity(replay.operations),
        report: Report {
            judged: 0,
            p50: 0.0,
            p90: 0.0,
            by_p90: Vec::new(),
            series: Vec::new(),
            shift: None,
        },
        by_p50: Vec::new(),
    };
    let mut ends: BinaryHeap<Reverse<(Timestamp, usize)>> = BinaryHeap::new();
    let mut clock = 0.0;
    for i in 0..replay.operations {
        clock += gap * -(1.0 - rng.f64()).ln();
        let start = at(epoch, clock);
        let slower = replay.slower_from.filter(|&(from, _)| i >= from);
        let duration = replay.shape.draw(&mut rng) * slower.map_or(1.0, |(_, factor)| factor);
        // What ended before this one starts.
        while let Some(&Reverse((t, j))) = ends.peek()
            && t <= start
        {
            ends.pop();
            run.finish(j);
            run.estimate(t);
        }
        let subject = Subject {
            api_version: "v1".to_owned(),
            kind: "Replayed".to_owned(),
            name: format!("op-{i}"),
            namespace: None,
            uid: format!("uid-{i}"),
            generation: None,
            owner_references: Vec::new(),
        };
        let (op, _) =
            InFlightOperation::new_active(&ruleset, OPERATION, &subject, start, start, None, []);
        let end = at(start, duration.max(0.001));
        run.flights.push(Some(Flight {
            op: Arc::new(op),
            end,
            slower: slower.is_some(),
            first: None,
        }));
        ends.push(Reverse((end, i)));
        run.estimate(start);
    }
    while let Some(Reverse((t, j))) = ends.pop() {
        run.finish(j);
        run.estimate(t);
    }
    let mut report = run.report;
    let judged = report.shift.unwrap_or(report.by_p90.len());
    let share = |v: &[bool]| v.iter().filter(|&&c| c).count() as f64 / judged.max(1) as f64;
    report.judged = judged;
    report.p50 = share(&run.by_p50[..judged]);
    report.p90 = share(&report.by_p90[..judged]);
    report
}

#[cfg(test)]
mod tests;
