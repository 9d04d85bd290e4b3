//! The scheduled operations of a scope, soonest first: every start within [`HORIZON`] of now
//! of the announced operations the scope takes, at most [`MAX_LISTED`], each with the p50 and
//! p90 durations it is expected to take: its object's own runs' once there are
//! [`crate::history::MIN_SAMPLES`] of them, else its rule's, never less than its own took (see
//! `history::own`).
//! A schedule that fires often fills the list with its own runs, so past [`MAX_LISTED`] the list
//! says up to when it is complete ([`Upcomings::through`]).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};

use super::table::{Entry, Schedules, When};
use crate::history::expected;
use crate::operation::Subject;

/// How far ahead scheduled operations are listed.
pub const HORIZON: SignedDuration = SignedDuration::from_hours(24);

/// Most scheduled operations listed for one scope.
pub const MAX_LISTED: usize = 50;

/// One start of an announced operation.
#[derive(Debug, Clone)]
pub struct Upcoming {
    entry: Arc<Entry>,
    /// When it is expected to start.
    pub start: Timestamp,
    /// What it is expected to take (median), once learned (see the [module](self)).
    pub p50: Option<SignedDuration>,
    /// Its 90th percentile, once learned.
    pub p90: Option<SignedDuration>,
}

impl Upcoming {
    /// The ruleset whose rule announces it.
    pub fn ruleset(&self) -> &str {
        &self.entry.ruleset
    }

    /// The ruleset's component.
    pub fn component(&self) -> &str {
        &self.entry.component
    }

    /// The rule's operation.
    pub fn operation(&self) -> &str {
        &self.entry.operation
    }

    /// The object that announces it.
    pub fn subject(&self) -> &Subject {
        &self.entry.subject
    }

    /// The cron schedule and its time zone it comes from; `None` for a start given as a time.
    pub fn schedule(&self) -> Option<(&str, &str)> {
        match &self.entry.when {
            When::Cron(c) => Some((c.text(), c.zone_name())),
            When::At(_) | When::Unknown(_) => None,
        }
    }
}

/// An announced operation whose next start is not known.
#[derive(Debug, Clone)]
pub struct Unknown {
    entry: Arc<Entry>,
}

impl Unknown {
    /// The object that announces it.
    pub fn subject(&self) -> &Subject {
        &self.entry.subject
    }

    /// The rule's operation.
    pub fn operation(&self) -> &str {
        &self.entry.operation
    }

    /// The ruleset whose rule announces it.
    pub fn ruleset(&self) -> &str {
        &self.entry.ruleset
    }

    /// The ruleset's component.
    pub fn component(&self) -> &str {
        &self.entry.component
    }

    /// Why it is not known.
    pub fn why(&self) -> &str {
        match &self.entry.when {
            When::Unknown(why) => why,
            _ => "",
        }
    }
}

/// The scheduled operations of a scope.
#[derive(Debug, Clone)]
pub struct Upcomings {
    /// Those whose next start is not known: the scope has no window to promise.
    pub unknown: Vec<Unknown>,
    /// Soonest first.
    pub listed: Vec<Upcoming>,
    /// Every start up to this time is listed: now + [`HORIZON`], or the last start listed when
    /// there were more than [`MAX_LISTED`].
    pub through: Timestamp,
}

impl Schedules {
    /// The scheduled operations after `now` of the announced ones `includes` takes (by their
    /// namespace and component).
    pub fn upcoming(
        &self,
        now: Timestamp,
        includes: impl Fn(Option<&str>, &str) -> bool,
    ) -> Upcomings {
        let horizon = now.saturating_add(HORIZON).unwrap_or(Timestamp::MAX);
        let (unknown, entries): (Vec<_>, Vec<_>) = self
            .entries(includes)
            .into_iter()
            .partition(|e| matches!(e.when, When::Unknown(_)));
        let unknown: Vec<Unknown> = unknown.into_iter().map(|entry| Unknown { entry }).collect();
        // Each entry's next start, soonest on top; a schedule's next one replaces it as it is
        // taken: at most one start per entry in the heap.
        let mut heap: BinaryHeap<Reverse<(Timestamp, usize)>> = entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| Some(Reverse((e.next_after(now)?, i))))
            .filter(|Reverse((t, _))| *t <= horizon)
            .collect();
        let mut listed = Vec::new();
        // Each entry's expected durations, read once however many of its starts are listed.
        let mut durations: Vec<Option<(Option<SignedDuration>, Option<SignedDuration>)>> =
            vec![None; entries.len()];
        while let Some(Reverse((start, i))) = heap.pop() {
            if listed.len() == MAX_LISTED {
                return Upcomings {
                    through: listed.last().map_or(now, |u: &Upcoming| u.start),
                    unknown,
                    listed,
                };
            }
            let entry = &entries[i];
            if let When::Cron(c) = &entry.when
                && let Some(next) = c.next_after(start)
                && next <= horizon
            {
                heap.push(Reverse((next, i)));
            }
            let (p50, p90) = *durations[i].get_or_insert_with(|| {
                let (ruleset, operation) = &entry.durations_of;
                let own = entry
                    .own_key(&self.durations)
                    .and_then(|key| self.durations.own(&key, ruleset, operation));
                expected(own, self.durations.quantiles(ruleset, operation))
            });
            listed.push(Upcoming {
                entry: entry.clone(),
                start,
                p50,
                p90,
            });
        }
        Upcomings {
            unknown,
            listed,
            through: horizon,
        }
    }
}
