//! What time does to the operations in flight: their expectations brought up to date as
//! history is learned and they run late, and the debounce table's deadlines (graces that run
//! out, completed operations that expire).

use std::collections::HashSet;
use std::sync::Arc;

use super::{Detector, now};
use crate::history;
use crate::operation::{OVERDUE_BY_HISTORY, Phase};
use crate::track::Change;

impl Detector {
    /// Every `every`, brings the expectations of active operations up to date (what was learned
    /// since, and operations that became overdue: nothing else would tell), and counts the
    /// stalled ones for `ifo_operations_stalled`.
    pub(crate) async fn run_expectations(self: Arc<Self>, every: std::time::Duration) {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            self.refresh_expectations();
        }
    }

    /// One pass of [`Self::run_expectations`].
    pub(crate) fn refresh_expectations(&self) {
        let mut stalled = crate::metrics::StalledCounts::default();
        let at = now();
        // Under the tracker's lock: no change of the tracker can come between the snapshot
        // and the records made from it.
        let tracker = self.tracker.lock();
        let snapshot = self.index.snapshot();
        let mut changes = Vec::new();
        for stored in &snapshot.items {
            let op = &stored.op;
            if op.phase != Phase::Active {
                continue;
            }
            let current = history::refreshed(op, &self.durations, at);
            let shown = current.as_ref().unwrap_or(op);
            if let Some(stall) = shown.stall() {
                let cause = if stall.reason == OVERDUE_BY_HISTORY {
                    "history"
                } else {
                    "rule"
                };
                stalled.add(
                    &shown.component,
                    &shown.operation,
                    &shown.subject.kind,
                    cause,
                );
            }
            if let Some(op) = current {
                self.durations.shown(&op);
                changes.push(Change::Upsert(op));
            }
        }
        // The first estimates of operations that went without completing (nothing else would
        // drop them), under the tracker's lock: every operation published is in the snapshot.
        let active: HashSet<&str> = snapshot
            .items
            .iter()
            .filter(|s| s.op.phase == Phase::Active)
            .map(|s| s.op.uid.as_str())
            .collect();
        self.durations.retain_estimates(|uid| active.contains(uid));
        if !changes.is_empty() {
            let transitions = self.index.apply(changes);
            debug_assert!(transitions.is_empty());
        }
        drop(tracker);
        crate::metrics::set_stalled(stalled);
    }

    /// Completes operations whose grace ran out and drops expired completed ones, sleeping until
    /// the next deadline in between.
    pub(crate) async fn run_deadlines(self: Arc<Self>) {
        loop {
            let next = {
                let at = now();
                let mut tracker = self.tracker.lock();
                self.publish(tracker.tick(at));
                tracker.next_deadline()
            };
            // A deadline already past (the tick took long) wakes at once, not as late again.
            let wait = next
                .map(|d| std::time::Duration::try_from(d.duration_since(now())).unwrap_or_default())
                .unwrap_or(std::time::Duration::from_secs(3600));
            tokio::select! {
                _ = tokio::time::sleep(wait.max(std::time::Duration::from_millis(10))) => {}
                _ = self.deadlines.notified() => {}
            }
        }
    }
}
