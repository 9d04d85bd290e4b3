//! What the driver did and when: the ground truth the watchers' events are matched against.

use dashmap::DashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// `(subject name, operation)`.
pub(crate) type Key = (String, String);

#[derive(Default)]
pub(crate) struct Ledger {
    /// When each operation last started (the request that moved the subject into its state
    /// was about to be sent).
    starts: DashMap<Key, Instant>,
    /// When each operation last ended (its subject moved to a state without it).
    ends: DashMap<Key, Instant>,
    /// When each `(subject, state)` was last written.
    states: DashMap<Key, Instant>,
    started: AtomicU64,
    writes: AtomicU64,
    failed: AtomicU64,
    /// Request → response of each status write: kube-apiserver's and etcd's share of the
    /// start latency.
    write_latencies: Mutex<Vec<Duration>>,
}

impl Ledger {
    /// Records an operation's start; call before sending the request that causes it, so an
    /// event can never arrive before its expectation.
    pub(crate) fn start(&self, key: Key, at: Instant) {
        self.starts.insert(key, at);
        self.started.fetch_add(1, Ordering::Relaxed);
    }

    /// Records a status write moving `subject` to `state`; call before sending it.
    pub(crate) fn state(&self, key: Key, at: Instant) {
        self.states.insert(key, at);
    }

    pub(crate) fn state_written_at(&self, key: &Key) -> Option<Instant> {
        self.states.get(key).map(|e| *e)
    }

    pub(crate) fn end(&self, key: Key, at: Instant) {
        self.ends.insert(key, at);
    }

    /// A status write was sent; `started` tells whether it started an operation.
    pub(crate) fn wrote(&self, ok: bool, started: bool, took: Duration) {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.write_latencies.lock().unwrap().push(took);
        if !ok {
            self.failed.fetch_add(1, Ordering::Relaxed);
            if started {
                // No operation will appear for a write that did not happen.
                self.started.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    pub(crate) fn started_at(&self, key: &Key) -> Option<Instant> {
        self.starts.get(key).map(|e| *e)
    }

    pub(crate) fn ended_at(&self, key: &Key) -> Option<Instant> {
        self.ends.get(key).map(|e| *e)
    }

    /// The write latencies since the last call.
    pub(crate) fn take_write_latencies(&self) -> Vec<Duration> {
        std::mem::take(&mut self.write_latencies.lock().unwrap())
    }

    pub(crate) fn counts(&self) -> Counts {
        Counts {
            started: self.started.load(Ordering::Relaxed),
            writes: self.writes.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
        }
    }
}

/// Running totals; subtract two readings for one phase.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub(crate) struct Counts {
    /// Operations the subjects' transitions started.
    pub started: u64,
    /// Status writes sent to kube-apiserver.
    pub writes: u64,
    /// Status writes that failed.
    pub failed: u64,
}

impl std::ops::Sub for Counts {
    type Output = Counts;
    fn sub(self, earlier: Counts) -> Counts {
        Counts {
            started: self.started - earlier.started,
            writes: self.writes - earlier.writes,
            failed: self.failed - earlier.failed,
        }
    }
}
