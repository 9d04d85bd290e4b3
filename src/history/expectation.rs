//! When an active operation is expected to end, and whether it is overdue, from the durations
//! learned for its rule and the progress its rule reports. Pure: time is passed in.

use jiff::{SignedDuration, Timestamp};

use super::quantiles::Quantiles;
use crate::operation::{
    EstimateBasis, Expectation, InFlightOperation, OVERDUE_BY_HISTORY, Phase, Stall,
};
use ifo_apimachinery::duration::human_duration;

/// Successful operations a rule needs before its history says anything: the fewest whose p90
/// band holds 85–95 % of the next ends, whatever their distribution. With n durations the band
/// is the ⌈0.9(n+1)⌉-th shortest (the longest below 9: see `quantiles::quantiles_of`), which a
/// next duration falls under with probability n/(n+1) below 9, ⌈0.9(n+1)⌉/(n+1) from there:
/// 83 % with 5, 86 % with 6, then 87.5, 89, 90, 91 % and so on, never over 94.7 %
/// (`replay::coverage_at` measures it, docs/performance.md has the table).
pub const MIN_SAMPLES: u64 = 6;

/// Progress (percent) from which extrapolating it beats the history's median: below it, the
/// time spent setting up weighs too much in the extrapolation.
pub(super) const MIN_PROGRESS: f64 = 10.0;

/// How far past its rule's 99th percentile an operation runs before it counts as stalled.
pub(super) const OVERDUE_FACTOR: f64 = 1.5;

/// What history (`learned`, the quantiles of its rule operation) and progress say of `op` at
/// `now`; `None` for completed operations and while neither says anything.
///
/// One clock for every reader: an operation in its debounce grace (no rule detects it any more)
/// ends when the grace does, and is not overdue. Otherwise the expected end is, once the rule
/// reports at least [`MIN_PROGRESS`] %, the time elapsed when that progress was seen,
/// extrapolated to 100 % (an operation's own progress knows its size, the median does not);
/// else what history says is left of it given how long it has run ([`by_history`]).
pub(crate) fn expect(
    learned: Option<&Quantiles>,
    op: &InFlightOperation,
    now: Timestamp,
) -> Option<Expectation> {
    if op.phase != Phase::Active {
        return None;
    }
    if let Some(end) = op.ending_at() {
        return Some(Expectation {
            end,
            basis: EstimateBasis::Grace,
            p90_end: None,
            overdue: None,
        });
    }
    let history = learned.filter(|q| q.count >= MIN_SAMPLES);
    let by_progress = op.progress().and_then(|p| extrapolate(op, p));
    let elapsed = now.duration_since(op.created);
    let (end, basis, p90_end) = match (by_progress, history) {
        (Some(end), _) => (end, EstimateBasis::Progress, None),
        (None, Some(q)) => (
            after(op.created, by_history(q, elapsed, 0.5)),
            EstimateBasis::History,
            Some(after(op.created, by_history(q, elapsed, 0.9))),
        ),
        (None, None) => return None,
    };
    let overdue = history.and_then(|q| overdue(op, q, now));
    Some(Expectation {
        end,
        basis,
        p90_end,
        overdue,
    })
}

/// How long history expects an operation that has run `elapsed` to take in all: the `quantile`
/// (0.5 for the median, 0.9 for the band's far edge) of the durations longer than `elapsed`, so
/// that one running long is not "overdue" by a median it has already passed. The durations are
/// read off the learned quantiles as a distribution linear between them: none at 0, half by the
/// median, 90 % and 99 % by those percentiles, all by the overdue limit ([`OVERDUE_FACTOR`] ×
/// p99, where the operation counts as stalled). Until the median, the time elapsed does not
/// count (the median is the median itself); past the limit, the limit (it is overdue).
fn by_history(q: &Quantiles, elapsed: SignedDuration, quantile: f64) -> SignedDuration {
    let elapsed = if elapsed < q.p50 {
        SignedDuration::ZERO
    } else {
        elapsed
    };
    let limit = q.p99.as_secs_f64() * OVERDUE_FACTOR;
    let knots = [
        (0.0, 0.0),
        (q.p50.as_secs_f64(), 0.5),
        (q.p90.as_secs_f64(), 0.9),
        (q.p99.as_secs_f64(), 0.99),
        (limit, 1.0),
    ];
    let e = elapsed.as_secs_f64();
    if e >= limit {
        return SignedDuration::try_from_secs_f64(limit).unwrap_or(q.p99);
    }
    // The share of durations up to `e`, then the duration below which `quantile` of the rest
    // lie.
    let share = knots.windows(2).find(|w| e < w[1].0).map_or(1.0, |w| {
        let ((x0, f0), (x1, f1)) = (w[0], w[1]);
        f0 + (e - x0) / (x1 - x0) * (f1 - f0)
    });
    let wanted = share + quantile * (1.0 - share);
    // Where learned quantiles are equal (durations all alike) the distribution steps: the
    // duration is that of the step.
    let total = knots
        .windows(2)
        .find(|w| wanted <= w[1].1)
        .map_or(limit, |w| {
            let ((x0, f0), (x1, f1)) = (w[0], w[1]);
            if x1 <= x0 || f1 <= f0 {
                x1
            } else {
                x0 + (wanted - f0) / (f1 - f0) * (x1 - x0)
            }
        });
    SignedDuration::try_from_secs_f64(total.max(e)).unwrap_or(q.p99)
}

/// The end extrapolated from `progress` % seen at `op.last_detected`.
fn extrapolate(op: &InFlightOperation, progress: f64) -> Option<Timestamp> {
    if progress < MIN_PROGRESS {
        return None;
    }
    let elapsed = op.last_detected.duration_since(op.created);
    if elapsed <= SignedDuration::ZERO {
        return None;
    }
    let total = elapsed.as_secs_f64() * 100.0 / progress;
    Some(after(
        op.created,
        SignedDuration::try_from_secs_f64(total).ok()?,
    ))
}

/// A stall once `op` has run [`OVERDUE_FACTOR`] × its rule's p99.
fn overdue(op: &InFlightOperation, q: &Quantiles, now: Timestamp) -> Option<Stall> {
    let limit = SignedDuration::try_from_secs_f64(q.p99.as_secs_f64() * OVERDUE_FACTOR).ok()?;
    let since = after(op.created, limit);
    (now >= since).then(|| Stall {
        reason: OVERDUE_BY_HISTORY.to_owned(),
        message: format!(
            "in flight longer than {OVERDUE_FACTOR} × the 99th percentile ({}) of the {} {} \
             operations of this rule that succeeded",
            human_duration(q.p99),
            q.count,
            op.operation
        ),
        since,
    })
}

/// Keeps what an object already shows unless the new expectation differs in substance: the
/// same basis and an end within 5 % (at least a second) of the shown one keep the shown end, a
/// continuing overdue stall keeps its text. So a median that moves a little with every
/// completion does not rewrite every active operation of the rule. A shown end that `now` is
/// about to pass (within that tolerance) is not kept: it would read "overdue" while the new one
/// says otherwise.
pub(crate) fn settle(
    shown: Option<&Expectation>,
    new: Option<Expectation>,
    start: Timestamp,
    now: Timestamp,
) -> Option<Expectation> {
    let (Some(shown), Some(mut new)) = (shown, new.clone()) else {
        return new;
    };
    if shown.basis == new.basis {
        new.end = kept(shown.end, new.end, start, now);
        if let (Some(shown), Some(p90)) = (shown.p90_end, new.p90_end) {
            new.p90_end = Some(kept(shown, p90, start, now));
        }
    }
    if let (Some(old), Some(_)) = (&shown.overdue, &new.overdue) {
        new.overdue = Some(old.clone());
    }
    Some(new)
}

/// `shown` where `new` is within 5 % (at least a second) of it and `now` is not about to pass
/// it, else `new`.
fn kept(shown: Timestamp, new: Timestamp, start: Timestamp, now: Timestamp) -> Timestamp {
    let span = new.duration_since(start).abs();
    let tolerance = SignedDuration::from_secs(1).max(span / 20);
    if new.duration_since(shown).abs() <= tolerance
        && (shown.duration_since(now) > tolerance || new <= shown)
    {
        shown
    } else {
        new
    }
}

fn after(t: Timestamp, d: SignedDuration) -> Timestamp {
    t.checked_add(d).unwrap_or(Timestamp::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operation::{Subject, test_ruleset};

    fn at(s: i64) -> Timestamp {
        "2026-11-22T10:00:00Z".parse::<Timestamp>().unwrap() + SignedDuration::from_secs(s)
    }

    fn active(progress: Option<f64>, seen_at: i64) -> InFlightOperation {
        let subject = Subject {
            api_version: "v1".into(),
            kind: "Thing".into(),
            name: "t".into(),
            namespace: None,
            uid: "u".into(),
            generation: None,
            owner_references: Vec::new(),
        };
        let ruleset = test_ruleset("rs", "c");
        let (mut op, _) = InFlightOperation::new_active(
            &ruleset,
            "Importing",
            &subject,
            at(0),
            at(seen_at),
            None,
            [],
        );
        op.progress = progress;
        op
    }

    fn learned(count: u64, p50: i64, p99: i64) -> Quantiles {
        Quantiles {
            count,
            p50: SignedDuration::from_secs(p50),
            p90: SignedDuration::from_secs(p99),
            p99: SignedDuration::from_secs(p99),
        }
    }

    #[test]
    fn history_needs_min_samples_and_gives_start_plus_median() {
        let op = active(None, 0);
        assert_eq!(
            expect(Some(&learned(MIN_SAMPLES - 1, 60, 90)), &op, at(1)),
            None
        );
        let e = expect(Some(&learned(MIN_SAMPLES, 60, 90)), &op, at(1)).unwrap();
        assert_eq!((e.end, e.basis), (at(60), EstimateBasis::History));
        assert_eq!(e.overdue, None);
    }

    #[test]
    fn progress_takes_over_from_ten_percent() {
        let q = learned(20, 60, 90);
        let early = expect(Some(&q), &active(Some(5.0), 30), at(30)).unwrap();
        assert_eq!(early.basis, EstimateBasis::History);
        // 45 % after 90 s: 200 s in all.
        let e = expect(Some(&q), &active(Some(45.0), 90), at(90)).unwrap();
        assert_eq!((e.end, e.basis), (at(200), EstimateBasis::Progress));
        // No history at all: progress alone.
        let e = expect(None, &active(Some(50.0), 10), at(10)).unwrap();
        assert_eq!((e.end, e.basis), (at(20), EstimateBasis::Progress));
        assert_eq!(expect(None, &active(None, 10), at(10)), None);
    }

    #[test]
    fn overdue_past_one_and_a_half_times_the_p99() {
        let q = learned(10, 60, 100);
        let op = active(None, 0);
        assert_eq!(expect(Some(&q), &op, at(149)).unwrap().overdue, None);
        let stall = expect(Some(&q), &op, at(150)).unwrap().overdue.unwrap();
        assert_eq!(stall.reason, OVERDUE_BY_HISTORY);
        assert_eq!(stall.since, at(150));
        assert!(
            stall.message.contains("(100s) of the 10 Importing"),
            "{}",
            stall.message
        );
        let mut with_rule_stall = op.clone();
        with_rule_stall.expectation = expect(Some(&q), &op, at(150));
        assert_eq!(with_rule_stall.stall().unwrap().reason, OVERDUE_BY_HISTORY);
        with_rule_stall.stalled = Some(Stall::reported("ImportFailed", at(10)));
        assert_eq!(with_rule_stall.stall().unwrap().reason, "ImportFailed");
    }

    fn quantiles(count: u64, p50: i64, p90: i64, p99: i64) -> Quantiles {
        Quantiles {
            count,
            p50: SignedDuration::from_secs(p50),
            p90: SignedDuration::from_secs(p90),
            p99: SignedDuration::from_secs(p99),
        }
    }

    fn secs(d: SignedDuration) -> f64 {
        (d.as_secs_f64() * 10.0).round() / 10.0
    }

    /// Durations spread evenly over 0–100 s (p50 50 s, p90 90 s, p99 99 s): of those longer
    /// than 50 s, half are longer than 75 s; of those longer than 60 s, half are longer than
    /// 80 s; of those longer than 90 s, half are longer than 95 s. Before the median, the
    /// median.
    #[test]
    fn history_expects_the_median_of_the_durations_longer_than_the_time_elapsed() {
        let q = quantiles(1000, 50, 90, 99);
        let (at, p90) = (expected_at(&q, 0.5), expected_at(&q, 0.9));
        // The band's far edge: nine in ten of those longer than the time elapsed end by then.
        assert_eq!((p90(0), p90(49)), (90.0, 90.0));
        assert_eq!((p90(50), p90(60), p90(90)), (95.0, 96.0, 99.0));
        band_ends_after_the_median(&p90, &at, 200);
        assert_eq!(at(0), 50.0);
        assert_eq!(at(49), 50.0);
        assert_eq!(at(50), 75.0);
        assert_eq!(at(60), 80.0);
        assert_eq!(at(90), 95.0);
        // Past the 99th percentile, toward the overdue limit (148.5 s), and never before now.
        assert!((99.0..148.5).contains(&at(100)), "{}", at(100));
        for e in 0..200 {
            assert!(at(e) >= (e as f64).min(148.5), "{e}: {}", at(e));
            assert!(at(e + 1) >= at(e), "not monotonic at {e}");
        }
        assert_eq!(at(500), 148.5);
    }

    /// The expected end at `quantile` by history, in seconds, of an operation running for a
    /// number of seconds.
    fn expected_at(q: &Quantiles, quantile: f64) -> impl Fn(i64) -> f64 + '_ {
        move |e| secs(by_history(q, SignedDuration::from_secs(e), quantile))
    }

    /// For every time elapsed up to `until`, the band's far edge is not before the median.
    fn band_ends_after_the_median(
        p90: impl Fn(i64) -> f64,
        median: impl Fn(i64) -> f64,
        until: i64,
    ) {
        for e in 0..until {
            assert!(p90(e) >= median(e), "{e}: the band ends before the median");
        }
    }

    /// Durations all alike (p50 = p90 = p99): the band's far edge is that duration, not the
    /// start.
    #[test]
    fn durations_all_alike_put_the_band_at_their_duration() {
        let q = quantiles(MIN_SAMPLES, 10, 10, 10);
        let (median, p90) = (expected_at(&q, 0.5), expected_at(&q, 0.9));
        assert_eq!((median(0), p90(0)), (10.0, 10.0));
        band_ends_after_the_median(&p90, &median, 20);
        let e = expect(Some(&q), &active(None, 0), at(1)).unwrap();
        assert_eq!(e.p90_end, Some(at(10)));
    }

    /// A long-running operation's expected end moves on with the time it has run, and it is
    /// never said overdue before the overdue limit; the shown end follows.
    #[test]
    fn a_long_operations_expected_end_moves_with_the_time_elapsed() {
        let q = quantiles(100, 60, 90, 100);
        let op = active(None, 0);
        let mut shown = None;
        let mut ends = Vec::new();
        for now in [1, 30, 61, 75, 89, 120, 140] {
            let new = expect(Some(&q), &op, at(now));
            shown = settle(shown.as_ref(), new, op.created, at(now));
            let e = shown.clone().unwrap();
            assert!(e.end > at(now), "overdue at {now}s: {e:?}");
            assert_eq!(e.overdue, None);
            ends.push(e.end);
        }
        assert!(ends.windows(2).all(|w| w[0] <= w[1]), "{ends:?}");
        assert_eq!(ends[0], at(60));
        assert!(ends[6] > at(140), "{ends:?}");
        let late = expect(Some(&q), &op, at(150)).unwrap();
        assert_eq!(late.end, at(150));
        assert!(late.overdue.is_some());
    }

    /// In its grace an operation ends when the grace does, whatever history or progress said,
    /// and is not overdue.
    #[test]
    fn in_its_grace_an_operation_ends_with_the_grace_and_is_not_overdue() {
        let q = quantiles(10, 10, 20, 30);
        let mut op = active(Some(50.0), 10);
        op.ending = Some(crate::operation::Ending {
            at: at(200),
            since: at(197),
        });
        let e = expect(Some(&q), &op, at(198)).unwrap();
        assert_eq!(
            (e.end, e.basis, e.overdue.clone()),
            (at(200), EstimateBasis::Grace, None)
        );
        op.expectation = Some(e);
        assert_eq!(op.stall(), None);
        assert_eq!(op.clears_at(), Some(at(200)));
    }

    #[test]
    fn small_moves_of_the_median_do_not_rewrite_the_expectation() {
        let op = active(None, 0);
        let shown = expect(Some(&learned(10, 100, 200)), &op, at(1));
        let moved = expect(Some(&learned(11, 103, 200)), &op, at(1));
        assert_eq!(settle(shown.as_ref(), moved, op.created, at(1)), shown);
        let jumped = expect(Some(&learned(12, 130, 200)), &op, at(1));
        assert_eq!(
            settle(shown.as_ref(), jumped.clone(), op.created, at(1)),
            jumped
        );
        assert_eq!(settle(shown.as_ref(), None, op.created, at(1)), None);
    }
}
