//! Recent list snapshots, so `continue` pages and `resourceVersionMatch=Exact` read the same
//! consistent state as the first page, and watches start from a shared view instead of a copy
//! of their own.
//!
//! A list or watch of one namespace takes (and shares) a snapshot of that namespace only: a
//! user allowed one namespace never makes the server copy the whole index.
//!
//! Kept by age, like the history kube-apiserver lists from (etcd keeps about five minutes):
//! a snapshot serves continue tokens for [`MAX_AGE`] however many other lists happened since,
//! within a memory budget ([`MAX_POINTERS`] record pointers across all snapshots, 8 bytes each;
//! the records themselves are shared). Past the budget, the oldest go first, so paginating
//! under heavy churn may still get `410 Expired` with an inconsistent continue token.

use crate::index::{IndexReader, Snapshot};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::Arc;
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
    /// Oldest first, each with when it was taken and its namespace (`None`: every record).
    snapshots: VecDeque<(Instant, Option<String>, Arc<Snapshot>)>,
    pointers: usize,
}

/// Whether a snapshot of `taken` (a namespace, or everything) holds what a request for
/// `wanted` reads.
fn covers(taken: Option<&str>, wanted: Option<&str>) -> bool {
    taken.is_none() || taken == wanted
}

impl Recent {
    fn evict(&mut self, now: Instant) {
        while let Some((taken, _, oldest)) = self.snapshots.front() {
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
    /// The snapshot at the index's current resourceVersion (shared by concurrent lists) of
    /// `namespace`, or of everything.
    pub fn current(&self, index: &IndexReader, namespace: Option<&str>) -> Arc<Snapshot> {
        let rv = index.current_rv();
        let mut recent = self.recent.lock();
        let now = Instant::now();
        let kept = recent
            .snapshots
            .iter()
            .rev()
            .take_while(|(_, _, s)| s.rv == rv)
            .find(|(_, taken, _)| covers(taken.as_deref(), namespace))
            .map(|(_, _, s)| s.clone());
        if let Some(kept) = kept {
            recent.evict(now);
            return kept;
        }
        let snapshot = Arc::new(match namespace {
            Some(ns) => index.snapshot_namespace(ns),
            None => index.snapshot(),
        });
        recent.pointers += snapshot.items.len();
        recent
            .snapshots
            .push_back((now, namespace.map(str::to_owned), snapshot.clone()));
        recent.evict(now);
        snapshot
    }

    /// The snapshot taken at `rv` that holds `namespace` (or everything), if it is still kept
    /// and was taken since the index's epoch (an older RV may have come from another replica).
    pub fn get(
        &self,
        index: &IndexReader,
        rv: u64,
        namespace: Option<&str>,
    ) -> Option<Arc<Snapshot>> {
        if rv < index.epoch() {
            return None;
        }
        let mut recent = self.recent.lock();
        recent.evict(Instant::now());
        recent
            .snapshots
            .iter()
            .find(|(_, taken, s)| s.rv == rv && covers(taken.as_deref(), namespace))
            .map(|(_, _, s)| s.clone())
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
        let first = snapshots.current(&index.reader(), None);
        for i in 0..50 {
            index.apply(vec![Change::Upsert(crate::operation::test_record(
                &format!("op-{i}"),
            ))]);
            snapshots.current(&index.reader(), None);
        }
        let kept = snapshots
            .get(&index.reader(), first.rv, None)
            .expect("still served");
        assert!(Arc::ptr_eq(&kept, &first));
    }

    #[test]
    fn a_list_of_one_namespace_copies_that_namespace_only() {
        let index = Arc::new(crate::index::Index::new(100, 1000, 16));
        for ns in ["a", "b", "c"] {
            for i in 0..3 {
                let mut op = (*crate::operation::test_record(&format!("{ns}-{i}"))).clone();
                op.namespace = Some(ns.into());
                index.apply(vec![Change::Upsert(Arc::new(op))]);
            }
        }
        let snapshots = Snapshots::default();
        let b = snapshots.current(&index.reader(), Some("b"));
        assert_eq!(b.items.len(), 3);
        assert!(
            b.items
                .iter()
                .all(|s| s.op.namespace.as_deref() == Some("b"))
        );
        assert!(Arc::ptr_eq(
            &snapshots.current(&index.reader(), Some("b")),
            &b
        ));
        assert!(snapshots.get(&index.reader(), b.rv, Some("a")).is_none());
        // A snapshot of everything serves every namespace at its RV.
        let all = snapshots.current(&index.reader(), None);
        assert_eq!(all.items.len(), 9);
        assert!(Arc::ptr_eq(
            &snapshots.current(&index.reader(), Some("c")),
            &all
        ));
        let a = snapshots.get(&index.reader(), b.rv, Some("a")).unwrap();
        assert!(Arc::ptr_eq(&a, &all));
    }

    #[test]
    fn snapshots_from_before_the_epoch_are_not_served() {
        let index = Arc::new(crate::index::Index::new(100, 1000, 16));
        let snapshots = Snapshots::default();
        index.apply(vec![Change::Upsert(crate::operation::test_record("op"))]);
        let before = snapshots.current(&index.reader(), None);
        let epoch = index.begin_epoch(5_000);
        assert_eq!(epoch, 5_000);
        assert!(snapshots.get(&index.reader(), before.rv, None).is_none());
        let after = snapshots.current(&index.reader(), None);
        assert_eq!(after.rv, 5_000);
        assert_eq!(after.items.len(), 1, "the records stay");
        assert!(snapshots.get(&index.reader(), after.rv, None).is_some());
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
            recent.snapshots.push_back((now, None, s));
            recent.evict(now);
        }
        assert_eq!(recent.snapshots.len(), 1);
        assert_eq!(recent.snapshots[0].2.rv, 3);
        assert!(
            recent
                .snapshots
                .iter()
                .map(|(_, _, s)| s.items.len())
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
                .push_back((long_ago, None, Arc::new(Snapshot { rv, items: vec![] })));
        }
        recent.snapshots.push_back((
            later,
            None,
            Arc::new(Snapshot {
                rv: 3,
                items: vec![],
            }),
        ));
        recent.evict(later);
        assert_eq!(recent.snapshots.len(), 1);
    }
}
