//! What the expected ends of a scope's operations say of when it clears, at the median
//! (`status.expectedEnd`) and at the far edge of the band (`status.expectedEndP90`): read in the
//! same pass over the members as the latest expected end, from the ends kept beside each member,
//! so it reads no record.
//!
//! At each confidence one operation decides: one without an end there (the oldest such) before
//! one overdue (the oldest such), before the one expected to end last (the oldest of equal
//! ends). An overdue operation has run past its rule's limit, where its expected end stays
//! while it runs on: that end has passed and says nothing of when it will end.

use jiff::Timestamp;

/// What the ends of a scope's operations say at one confidence; `E` is how an operation is
/// held.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum LatestEnd<E> {
    /// Nothing is in flight.
    Nothing,
    /// Every operation has an end and none is overdue: the latest end, and whose it is.
    At(Timestamp, E),
    /// This operation has no expected end at this confidence.
    Missing(E),
    /// This operation is overdue: its expected end has passed.
    Overdue(E),
}

/// The same at both confidences.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ScopeEnds<E> {
    /// From the median ends.
    pub p50: LatestEnd<E>,
    /// From the p90 ends.
    pub p90: LatestEnd<E>,
}

impl<E> ScopeEnds<E> {
    /// Nothing in flight.
    pub(crate) const NOTHING: ScopeEnds<E> = ScopeEnds {
        p50: LatestEnd::Nothing,
        p90: LatestEnd::Nothing,
    };
}

#[cfg(test)]
impl ScopeEnds<std::sync::Arc<super::GateEntry>> {
    /// What the index reads of `entries`' ends, as it reads them of a scope's members.
    pub(crate) fn of_entries(entries: &[std::sync::Arc<super::GateEntry>]) -> Self {
        let mut fold = Fold::new();
        for e in entries {
            fold.add(Seen {
                start: e.created,
                p50: e.clears_at(),
                p90: e.clears_at_p90(),
                overdue: e.is_overdue(),
                entry: e,
            });
        }
        fold.finish()
    }
}

/// What orders two operations that started at the same time: their uids, read only then (a uid
/// is in the record, which the pass otherwise does not read).
pub(crate) trait Uid {
    fn uid(&self) -> &str;
}

impl Uid for std::sync::Arc<super::GateEntry> {
    fn uid(&self) -> &str {
        &self.uid
    }
}

/// One operation as the pass reads it.
pub(super) struct Seen<'a, E> {
    /// When it started (then its uid): the older of two decides.
    pub start: Timestamp,
    pub p50: Option<Timestamp>,
    pub p90: Option<Timestamp>,
    pub overdue: bool,
    pub entry: &'a E,
}

impl<E> Clone for Seen<'_, E> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<E> Copy for Seen<'_, E> {}

/// The pass: the operations one by one, then [`Fold::finish`].
pub(super) struct Fold<'a, E> {
    p50: Pick<'a, E>,
    p90: Pick<'a, E>,
}

#[derive(Clone, Copy)]
enum Kind {
    Nothing,
    At(Timestamp),
    Overdue,
    Missing,
}

impl Kind {
    fn rank(self) -> u8 {
        match self {
            Kind::Nothing => 0,
            Kind::At(_) => 1,
            Kind::Overdue => 2,
            Kind::Missing => 3,
        }
    }
}

struct Pick<'a, E> {
    kind: Kind,
    by: Option<Seen<'a, E>>,
}

impl<'a, E: Uid> Pick<'a, E> {
    fn new() -> Self {
        Pick {
            kind: Kind::Nothing,
            by: None,
        }
    }

    fn add(&mut self, op: Seen<'a, E>, end: Option<Timestamp>) {
        let kind = match (end, op.overdue) {
            (None, _) => Kind::Missing,
            (Some(_), true) => Kind::Overdue,
            (Some(t), false) => Kind::At(t),
        };
        let older = || {
            self.by.as_ref().is_none_or(|by| {
                op.start < by.start || (op.start == by.start && op.entry.uid() < by.entry.uid())
            })
        };
        let replaces = match (kind, self.kind) {
            (new, old) if new.rank() != old.rank() => new.rank() > old.rank(),
            (Kind::At(new), Kind::At(old)) => new > old || (new == old && older()),
            _ => older(),
        };
        if replaces {
            self.kind = kind;
            self.by = Some(op);
        }
    }

    fn finish(self) -> LatestEnd<E>
    where
        E: Clone,
    {
        match (self.kind, self.by) {
            (Kind::At(t), Some(by)) => LatestEnd::At(t, by.entry.clone()),
            (Kind::Overdue, Some(by)) => LatestEnd::Overdue(by.entry.clone()),
            (Kind::Missing, Some(by)) => LatestEnd::Missing(by.entry.clone()),
            _ => LatestEnd::Nothing,
        }
    }
}

impl<'a, E: Clone + Uid> Fold<'a, E> {
    pub(super) fn new() -> Self {
        Fold {
            p50: Pick::new(),
            p90: Pick::new(),
        }
    }

    pub(super) fn add(&mut self, op: Seen<'a, E>) {
        self.p50.add(op, op.p50);
        self.p90.add(op, op.p90);
    }

    pub(super) fn finish(self) -> ScopeEnds<E> {
        ScopeEnds {
            p50: self.p50.finish(),
            p90: self.p90.finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    struct Op {
        name: &'static str,
        start: i64,
        p50: Option<i64>,
        p90: Option<i64>,
        overdue: bool,
    }

    fn op(name: &'static str, start: i64, p50: Option<i64>, p90: Option<i64>) -> Op {
        Op {
            name,
            start,
            p50,
            p90,
            overdue: false,
        }
    }

    impl Uid for &'static str {
        fn uid(&self) -> &str {
            self
        }
    }

    fn ends(ops: &[Op]) -> ScopeEnds<&'static str> {
        let mut fold = Fold::new();
        for o in ops {
            fold.add(Seen {
                start: at(o.start),
                p50: o.p50.map(at),
                p90: o.p90.map(at),
                overdue: o.overdue,
                entry: &o.name,
            });
        }
        fold.finish()
    }

    #[test]
    fn nothing_in_flight_is_nothing_at_both_confidences() {
        let e = ends(&[]);
        assert_eq!((e.p50, e.p90), (LatestEnd::Nothing, LatestEnd::Nothing));
    }

    #[test]
    fn the_latest_end_decides_at_each_confidence() {
        // a ends last by its median, b by its p90.
        let e = ends(&[
            op("a", 0, Some(100), Some(150)),
            op("b", 10, Some(90), Some(200)),
        ]);
        assert_eq!(e.p50, LatestEnd::At(at(100), "a"));
        assert_eq!(e.p90, LatestEnd::At(at(200), "b"));
        // In any order.
        let e = ends(&[
            op("b", 10, Some(90), Some(200)),
            op("a", 0, Some(100), Some(150)),
        ]);
        assert_eq!(e.p50, LatestEnd::At(at(100), "a"));
        assert_eq!(e.p90, LatestEnd::At(at(200), "b"));
        // Equal ends: the older.
        let e = ends(&[
            op("b", 10, Some(90), Some(90)),
            op("a", 0, Some(90), Some(90)),
        ]);
        assert_eq!(e.p90, LatestEnd::At(at(90), "a"));
    }

    #[test]
    fn an_operation_without_an_end_means_no_latest_end_and_the_oldest_such_is_named() {
        let e = ends(&[
            op("a", 0, Some(100), Some(150)),
            op("late-start", 30, None, None),
            op("c", 20, None, None),
            op("d", 5, Some(500), Some(900)),
        ]);
        assert_eq!(e.p50, LatestEnd::Missing("c"));
        assert_eq!(e.p90, LatestEnd::Missing("c"));
        // An end at the median without a p90 end (as read back from an object that has one
        // field only): missing at p90 only.
        let e = ends(&[op("a", 0, Some(100), None), op("b", 1, Some(50), Some(60))]);
        assert_eq!(e.p50, LatestEnd::At(at(100), "a"));
        assert_eq!(e.p90, LatestEnd::Missing("a"));
    }

    #[test]
    fn an_overdue_operation_outweighs_ends_but_not_a_missing_one() {
        let mut late = op("late", 5, Some(60), Some(60));
        late.overdue = true;
        let e = ends(&[op("a", 0, Some(100), Some(150)), late]);
        assert_eq!(e.p50, LatestEnd::Overdue("late"));
        assert_eq!(e.p90, LatestEnd::Overdue("late"));
        let mut late = op("late", 5, Some(60), Some(60));
        late.overdue = true;
        let e = ends(&[late, op("unknown", 9, None, None)]);
        assert_eq!(e.p90, LatestEnd::Missing("unknown"));
    }
}
