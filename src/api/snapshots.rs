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

use super::incomplete::Notice;
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
pub(crate) struct Snapshots {
    recent: Mutex<Recent>,
}

#[derive(Default)]
struct Recent {
    /// Oldest first.
    snapshots: VecDeque<Kept>,
    pointers: usize,
}

/// A snapshot kept for later pages, and what made it possibly incomplete when it was taken.
#[derive(Clone)]
pub(crate) struct Kept {
    taken: Instant,
    /// The namespace it holds (`None`: every record).
    namespace: Option<String>,
    pub snapshot: Arc<Snapshot>,
    /// The `Warning`s a read got just before it was taken (see
    /// [`super::incomplete::warnings_now`]): every page read from it carries them, whatever
    /// the server knows by the time the page is asked for.
    pub warnings: Arc<[Notice]>,
}

/// Whether a snapshot of `taken` (a namespace, or everything) serves a request for `wanted`:
/// only one of the same namespace. A snapshot of everything holds every namespace's records,
/// but its warnings name every namespace's blind spots: a read of one namespace served from it
/// would be warned of targets that do not feed that namespace (and `kubectl ifo check` would
/// fail for them).
fn covers(taken: Option<&str>, wanted: Option<&str>) -> bool {
    taken == wanted
}

impl Recent {
    fn evict(&mut self, now: Instant) {
        while let Some(oldest) = self.snapshots.front() {
            let keep_newest = self.snapshots.len() == 1;
            if keep_newest
                || (now.duration_since(oldest.taken) < MAX_AGE && self.pointers <= MAX_POINTERS)
            {
                break;
            }
            self.pointers -= oldest.snapshot.items.len();
            self.snapshots.pop_front();
        }
    }
}

impl Snapshots {
    /// The snapshot at the index's current resourceVersion (shared by concurrent lists) of
    /// `namespace`, or of everything. `warnings` are read before a new one is taken, and kept
    /// with it.
    pub(crate) fn current(
        &self,
        index: &IndexReader,
        namespace: Option<&str>,
        warnings: impl FnOnce() -> Vec<Notice>,
    ) -> Kept {
        let rv = index.current_rv();
        let mut recent = self.recent.lock();
        let now = Instant::now();
        let kept = recent
            .snapshots
            .iter()
            .rev()
            .take_while(|k| k.snapshot.rv == rv)
            .find(|k| covers(k.namespace.as_deref(), namespace))
            .cloned();
        if let Some(kept) = kept {
            recent.evict(now);
            return kept;
        }
        let warnings = warnings().into();
        let snapshot = Arc::new(match namespace {
            Some(ns) => index.snapshot_namespace(ns),
            None => index.snapshot(),
        });
        recent.pointers += snapshot.items.len();
        let kept = Kept {
            taken: now,
            namespace: namespace.map(str::to_owned),
            snapshot,
            warnings,
        };
        recent.snapshots.push_back(kept.clone());
        recent.evict(now);
        kept
    }

    /// The snapshot of `namespace` (or everything) taken at `rv`, if it is still kept
    /// and was taken since the index's epoch (an older RV may have come from another replica).
    pub(crate) fn get(
        &self,
        index: &IndexReader,
        rv: u64,
        namespace: Option<&str>,
    ) -> Option<Kept> {
        if rv < index.epoch() {
            return None;
        }
        let mut recent = self.recent.lock();
        recent.evict(Instant::now());
        recent
            .snapshots
            .iter()
            .find(|k| k.snapshot.rv == rv && covers(k.namespace.as_deref(), namespace))
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::track::Change;

    /// The current snapshot, taken with no warning.
    fn current(
        snapshots: &Snapshots,
        index: &crate::index::Handles,
        ns: Option<&str>,
    ) -> Arc<Snapshot> {
        snapshots
            .current(&index.reader.clone(), ns, Vec::new)
            .snapshot
    }

    fn get(
        snapshots: &Snapshots,
        index: &crate::index::Handles,
        rv: u64,
        ns: Option<&str>,
    ) -> Option<Arc<Snapshot>> {
        snapshots
            .get(&index.reader.clone(), rv, ns)
            .map(|k| k.snapshot)
    }

    fn kept(taken: Instant, snapshot: Arc<Snapshot>) -> Kept {
        Kept {
            taken,
            namespace: None,
            snapshot,
            warnings: Arc::new([]),
        }
    }

    #[test]
    fn a_snapshot_outlives_many_later_lists() {
        let index = crate::index::Index::new(100, 1000, 16).into_handles();
        let snapshots = Snapshots::default();
        let first = current(&snapshots, &index, None);
        for i in 0..50 {
            index
                .writer
                .apply(vec![Change::Upsert(crate::operation::test_record(
                    &format!("op-{i}"),
                ))]);
            current(&snapshots, &index, None);
        }
        let kept = get(&snapshots, &index, first.rv, None).expect("still served");
        assert!(Arc::ptr_eq(&kept, &first));
    }

    #[test]
    fn a_list_of_one_namespace_copies_that_namespace_only() {
        let index = crate::index::Index::new(100, 1000, 16).into_handles();
        for ns in ["a", "b", "c"] {
            for i in 0..3 {
                let mut op = (*crate::operation::test_record(&format!("{ns}-{i}"))).clone();
                op.namespace = Some(ns.into());
                index.writer.apply(vec![Change::Upsert(Arc::new(op))]);
            }
        }
        let snapshots = Snapshots::default();
        let b = current(&snapshots, &index, Some("b"));
        assert_eq!(b.items.len(), 3);
        assert!(
            b.items
                .iter()
                .all(|s| s.op.namespace.as_deref() == Some("b"))
        );
        assert!(Arc::ptr_eq(&current(&snapshots, &index, Some("b")), &b));
        assert!(get(&snapshots, &index, b.rv, Some("a")).is_none());
        // A snapshot of everything is not shared with a read of one namespace: its warnings
        // are every namespace's.
        let all = current(&snapshots, &index, None);
        assert_eq!(all.items.len(), 9);
        let c = current(&snapshots, &index, Some("c"));
        assert!(!Arc::ptr_eq(&c, &all));
        assert_eq!(c.items.len(), 3);
        assert!(get(&snapshots, &index, b.rv, Some("a")).is_none());
        assert!(Arc::ptr_eq(
            &get(&snapshots, &index, b.rv, None).unwrap(),
            &all
        ));
    }

    #[test]
    fn a_read_of_one_namespace_gets_the_warnings_of_that_namespace() {
        let index = crate::index::Index::new(100, 1000, 16).into_handles();
        let snapshots = Snapshots::default();
        let everywhere = || vec!["things in namespace a are not being watched".into()];
        let all = snapshots.current(&index.reader.clone(), None, everywhere);
        assert_eq!(all.warnings.len(), 1);
        let b = snapshots.current(&index.reader.clone(), Some("b"), Vec::new);
        assert_eq!(b.snapshot.rv, all.snapshot.rv);
        assert!(b.warnings.is_empty(), "{:?}", b.warnings);
    }

    #[test]
    fn snapshots_from_before_the_epoch_are_not_served() {
        let index = crate::index::Index::new(100, 1000, 16).into_handles();
        let snapshots = Snapshots::default();
        index
            .writer
            .apply(vec![Change::Upsert(crate::operation::test_record("op"))]);
        let before = current(&snapshots, &index, None);
        let epoch = index.epochs.begin(5_000);
        assert_eq!(epoch, 5_000);
        assert!(get(&snapshots, &index, before.rv, None).is_none());
        let after = current(&snapshots, &index, None);
        assert_eq!(after.rv, 5_000);
        assert_eq!(after.items.len(), 1, "the records stay");
        assert!(get(&snapshots, &index, after.rv, None).is_some());
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
            recent.snapshots.push_back(kept(now, s));
            recent.evict(now);
        }
        assert_eq!(recent.snapshots.len(), 1);
        assert_eq!(recent.snapshots[0].snapshot.rv, 3);
        assert!(
            recent
                .snapshots
                .iter()
                .map(|k| k.snapshot.items.len())
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
                .push_back(kept(long_ago, Arc::new(Snapshot { rv, items: vec![] })));
        }
        recent.snapshots.push_back(kept(
            later,
            Arc::new(Snapshot {
                rv: 3,
                items: vec![],
            }),
        ));
        recent.evict(later);
        assert_eq!(recent.snapshots.len(), 1);
    }

    #[test]
    fn later_pages_carry_the_warnings_read_before_their_snapshot_was_taken() {
        let index = crate::index::Index::new(100, 1000, 16).into_handles();
        let snapshots = Snapshots::default();
        let partial = snapshots.current(&index.reader.clone(), None, || {
            vec!["not listed yet".into()]
        });
        // A list at the same RV shares it, and what was read before it was taken.
        let shared = snapshots.current(&index.reader.clone(), None, Vec::new);
        assert!(Arc::ptr_eq(&shared.snapshot, &partial.snapshot));
        assert_eq!(&*shared.warnings, [Notice::from("not listed yet")]);
        index
            .writer
            .apply(vec![Change::Upsert(crate::operation::test_record("op"))]);
        let whole = snapshots.current(&index.reader.clone(), None, Vec::new);
        assert!(whole.warnings.is_empty());
        let page = snapshots
            .get(&index.reader.clone(), partial.snapshot.rv, None)
            .unwrap();
        assert_eq!(&*page.warnings, [Notice::from("not listed yet")]);
    }
}
