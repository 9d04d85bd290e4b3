//! Where a window of a given length fits among the scheduled operations of a scope: one search
//! for the server (a gate's `nextWindow`, of any length) and the plugin (`plan --for`), so the
//! two agree.

use jiff::{SignedDuration, Timestamp};

use crate::gate::GateScheduled;

/// Where a window fits.
#[derive(Debug, PartialEq)]
pub enum Fit<'a> {
    /// Clear from `start` for at least the length asked: until `next` starts, or without a
    /// known end.
    Window {
        /// When it opens.
        start: Timestamp,
        /// The scheduled operation whose start closes it, if any.
        next: Option<&'a GateScheduled>,
        /// The scheduled operation whose expected end it waits for, if any.
        after: Option<&'a GateScheduled>,
    },
    /// This scheduled operation starts before a window of that length opens, and how long it
    /// takes is not known: nothing can be promised from its start on.
    NoDuration(&'a GateScheduled),
    /// When this scheduled operation next starts is not known: nothing can be promised.
    UnknownStart(&'a GateScheduled),
}

/// The first window of at least `length` (zero: any) from `from`, when the operations in flight
/// are expected to end, among `scheduled` (soonest first, as a gate lists them) at the p90 ends
/// of their durations (`p90`) or their medians.
pub fn fit(
    from: Timestamp,
    scheduled: &[GateScheduled],
    p90: bool,
    length: SignedDuration,
) -> Fit<'_> {
    // One that may start at any time takes every window away, wherever it is listed.
    let mut starts = Vec::with_capacity(scheduled.len());
    for op in scheduled {
        match op.start() {
            Some(t) => starts.push((op, t)),
            None => return Fit::UnknownStart(op),
        }
    }
    let mut start = from;
    let mut after = None;
    for (op, op_start) in starts {
        let room = op_start.duration_since(start);
        if room > SignedDuration::ZERO && room >= length {
            return Fit::Window {
                start,
                next: Some(op),
                after,
            };
        }
        match op.end_at(p90) {
            None => return Fit::NoDuration(op),
            Some(end) if end.0 > start => {
                start = end.0;
                after = Some(op);
            }
            Some(_) => {}
        }
    }
    Fit::Window {
        start,
        next: None,
        after,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn t(minute: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + minute * 60).unwrap()
    }

    /// Starts at `start`, ends at `start + p50` (median) and `start + p90`, in minutes.
    fn op(start: i64, p50: Option<i64>, p90: Option<i64>) -> GateScheduled {
        GateScheduled {
            operation: format!("at-{start}"),
            expected_start: Some(Time(t(start))),
            expected_end: p50.map(|d| Time(t(start + d))),
            expected_end_p90: p90.map(|d| Time(t(start + d))),
            ..GateScheduled::default()
        }
    }

    fn minutes(m: i64) -> SignedDuration {
        SignedDuration::from_mins(m)
    }

    fn window(f: Fit<'_>) -> (i64, Option<i64>, Option<String>) {
        let Fit::Window { start, next, after } = f else {
            panic!("no window: {f:?}")
        };
        let m = |x: Timestamp| (x.as_second() - 1_800_000_000) / 60;
        let end = next.and_then(GateScheduled::start);
        (m(start), end.map(m), after.map(|a| a.operation.clone()))
    }

    #[test]
    fn nothing_scheduled_is_a_window_without_end() {
        assert_eq!(window(fit(t(0), &[], true, minutes(600))), (0, None, None));
    }

    #[test]
    fn a_window_closes_at_the_next_scheduled_start_and_waits_past_one_too_close() {
        let s = [op(10, Some(5), Some(8)), op(30, Some(5), Some(8))];
        // Any length: from now until the first start.
        assert_eq!(
            window(fit(t(0), &s, true, SignedDuration::ZERO)),
            (0, Some(10), None)
        );
        // 15 minutes do not fit before 10; after its p90 end (18) they fit until 30.
        assert_eq!(
            window(fit(t(0), &s, true, minutes(12))),
            (18, Some(30), Some("at-10".into()))
        );
        // At the median, sooner: from 15.
        assert_eq!(
            window(fit(t(0), &s, false, minutes(15))),
            (15, Some(30), Some("at-10".into()))
        );
        // Longer than any gap: after the last one, with no known end.
        assert_eq!(
            window(fit(t(0), &s, true, minutes(60))),
            (38, None, Some("at-30".into()))
        );
    }

    #[test]
    fn in_flight_ends_first_and_a_scheduled_start_inside_them_pushes_the_window() {
        // In flight until 12: the one at 10 overlaps, its p90 end (18) opens the window.
        let s = [op(10, Some(5), Some(8))];
        assert_eq!(
            window(fit(t(12), &s, true, SignedDuration::ZERO)),
            (18, None, Some("at-10".into()))
        );
        // One that ended before the operations in flight do changes nothing.
        let s = [op(1, Some(1), Some(2))];
        assert_eq!(window(fit(t(12), &s, true, minutes(5))), (12, None, None));
    }

    #[test]
    fn an_unknown_duration_in_the_way_promises_nothing_after_its_start() {
        let s = [op(10, None, None), op(30, Some(5), Some(8))];
        // A window that fits before it is still promised.
        assert_eq!(
            window(fit(t(0), &s, true, minutes(10))),
            (0, Some(10), None)
        );
        assert_eq!(fit(t(0), &s, true, minutes(11)), Fit::NoDuration(&s[0]));
        // One whose next start is not known, anywhere in the list.
        let unknown = GateScheduled {
            operation: "unreadable".into(),
            ..GateScheduled::default()
        };
        let s = [op(30, Some(5), Some(8)), unknown];
        assert_eq!(fit(t(0), &s, true, minutes(1)), Fit::UnknownStart(&s[1]));
        // A median without a p90 answers at p50 only.
        let s = [op(10, Some(5), None)];
        assert!(matches!(
            fit(t(0), &s, true, minutes(11)),
            Fit::NoDuration(_)
        ));
        assert_eq!(window(fit(t(0), &s, false, minutes(11))).0, 15);
    }
}
