//! Recent list snapshots, so `continue` pages and `resourceVersionMatch=Exact` read the same
//! consistent state as the first page. Bounded: a handful of snapshots, each only pointers.

use crate::index::{Index, Snapshot};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

const KEEP: usize = 8;

#[derive(Default)]
pub struct Snapshots {
    recent: Mutex<VecDeque<Arc<Snapshot>>>,
}

impl Snapshots {
    /// The snapshot at the index's current resourceVersion (shared by concurrent lists).
    pub fn current(&self, index: &Index) -> Arc<Snapshot> {
        let rv = index.current_rv();
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(last) = recent.back().filter(|s| s.rv == rv) {
            return last.clone();
        }
        let snapshot = Arc::new(index.snapshot());
        recent.push_back(snapshot.clone());
        while recent.len() > KEEP {
            recent.pop_front();
        }
        snapshot
    }

    pub fn get(&self, rv: u64) -> Option<Arc<Snapshot>> {
        let recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        recent.iter().find(|s| s.rv == rv).cloned()
    }
}
