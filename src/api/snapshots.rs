//! Recent list snapshots, so `continue` pages and `resourceVersionMatch=Exact` read the same
//! consistent state as the first page, and watches start from a shared view instead of a copy
//! of their own.
//!
//! Kept by age, like the history kube-apiserver lists from (etcd keeps about five minutes):
//! a snapshot serves continue tokens for [`MAX_AGE`] however many other lists happened since,
//! within a memory budget ([`MAX_POINTERS`] record pointers across all snapshots, 8 bytes each;
//! the records themselves are shared). Past the budget, the oldest go first, so paginating
//! under heavy churn may still get `410 Expired` with an inconsistent continue token.

use crate::index::{IndexReader, Snapshot};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a snapshot serves `continue` tokens and `Exact` lists.
const MAX_AGE: Duration = Duration::from_secs(300);
/// Record pointers held across all snapshots (8 MiB).
const MAX_POINTERS: usize = 1 << 20;

#[derive(Default)]
pub struct Snapshots {
    recent: Mutex<Recent>,
}

#[derive(Default)]
struct Recent {
    /// Oldest first, each with when it was taken.
    snapshots: VecDeque<(Instant, Arc<Snapshot>)>,
    pointers: usize,
}

impl Recent {
    fn evict(&mut self, now: Instant) {
        while let Some((taken, oldest)) = self.snapshots.front() {
            let keep_newest = self.snapshots.len() == 1;
            if keep_newest
                || (now.duration_since(*taken) < MAX_AGE && self.pointers <= MAX_POINTERS)
            {
                break;
            }
            self.pointers -= oldest.items.len();
            self.snapshots.pop_front();
        }
    }
}

impl Snapshots {
    /// The snapshot at the index's current resourceVersion (shared by concurrent lists).
    pub fn current(&self, index: &IndexReader) -> Arc<Snapshot> {
        let rv = index.current_rv();
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if let Some((_, last)) = recent.snapshots.back().filter(|(_, s)| s.rv == rv) {
            let last = last.clone();
            recent.evict(now);
            return last;
        }
        let snapshot = Arc::new(index.snapshot());
        recent.pointers += snapshot.items.len();
        recent.snapshots.push_back((now, snapshot.clone()));
        recent.evict(now);
        snapshot
    }

    /// The snapshot taken at `rv`, if it is still kept and was taken since the index's epoch
    /// (an older RV may have come from another replica).
    pub fn get(&self, index: &IndexReader, rv: u64) -> Option<Arc<Snapshot>> {
        if rv < index.epoch() {
            return None;
        }
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        recent.evict(Instant::now());
        recent
            .snapshots
            .iter()
            .find(|(_, s)| s.rv == rv)
            .map(|(_, s)| s.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::track::Change;

    #[test]
    fn a_snapshot_outlives_many_later_lists() {
        let index = Arc::new(crate::index::Index::new(100, 1000, 16));
        let snapshots = Snapshots::default();
        let first = snapshots.current(&index.reader());
        for i in 0..50 {
            index.apply(vec![Change::Upsert(crate::index::test_record(&format!(
                "op-{i}"
            )))]);
            snapshots.current(&index.reader());
        }
        let kept = snapshots
            .get(&index.reader(), first.rv)
            .expect("still served");
        assert!(Arc::ptr_eq(&kept, &first));
    }

    #[test]
    fn snapshots_from_before_the_epoch_are_not_served() {
        let index = Arc::new(crate::index::Index::new(100, 1000, 16));
        let snapshots = Snapshots::default();
        index.apply(vec![Change::Upsert(crate::index::test_record("op"))]);
        let before = snapshots.current(&index.reader());
        let epoch = index.begin_epoch(5_000);
        assert_eq!(epoch, 5_000);
        assert!(snapshots.get(&index.reader(), before.rv).is_none());
        let after = snapshots.current(&index.reader());
        assert_eq!(after.rv, 5_000);
        assert_eq!(after.items.len(), 1, "the records stay");
        assert!(snapshots.get(&index.reader(), after.rv).is_some());
    }

    #[test]
    fn the_pointer_budget_drops_the_oldest_but_never_the_newest() {
        let mut recent = Recent::default();
        let now = Instant::now();
        let big = |rv| {
            Arc::new(Snapshot {
                rv,
                items: vec![crate::index::test_stored(); MAX_POINTERS / 2 + 1],
            })
        };
        for rv in 1..=3 {
            let s = big(rv);
            recent.pointers += s.items.len();
            recent.snapshots.push_back((now, s));
            recent.evict(now);
        }
        assert_eq!(recent.snapshots.len(), 1);
        assert_eq!(recent.snapshots[0].1.rv, 3);
        assert!(
            recent
                .snapshots
                .iter()
                .map(|(_, s)| s.items.len())
                .sum::<usize>()
                == recent.pointers
        );
    }

    #[test]
    fn old_snapshots_expire() {
        let mut recent = Recent::default();
        let long_ago = Instant::now();
        let later = long_ago + MAX_AGE + Duration::from_secs(1);
        for rv in 1..=2 {
            recent
                .snapshots
                .push_back((long_ago, Arc::new(Snapshot { rv, items: vec![] })));
        }
        recent.snapshots.push_back((
            later,
            Arc::new(Snapshot {
                rv: 3,
                items: vec![],
            }),
        ));
        recent.evict(later);
        assert_eq!(recent.snapshots.len(), 1);
    }
}
