//! Whether the server is ready: `/readyz` answers 503 until what we serve reflects the cluster.
//!
//! "Reflects the cluster" means the initial sync is done: the ruleset controller has listed the
//! OperationRuleSets, and every watcher that list started has *settled* — its initial list
//! completed, or it failed in a way its ruleset's status reports (`WatchFailed`, RBAC included,
//! or `InvalidTarget`). A failing or forbidden target does not hold the server back: waiting
//! would not make it succeed, the failure is visible on the ruleset, and a long-unready server
//! means `MissingEndpoints` for the APIService, which stalls namespace deletion cluster-wide.
//! For the same reason the wait is bounded ([`Readiness::give_up_after`]): a list that hangs,
//! or OperationRuleSets that cannot be listed at all, end the wait with a warning.
//!
//! Readiness is latched: once ready, the server stays ready. Rulesets added later start their
//! watchers while the server keeps serving; flapping `/readyz` would take the only replica out
//! of the Service for nothing.
//!
//! The only way to hold readiness back is a [`Pending`] handle, and the only way to build a
//! [`Readiness`] hands out the first one, so the server can't be ready before anyone looked.
//! Requests other than `/readyz` are served all along (the aggregator checks availability with
//! discovery, and an empty list early on is still a correct answer about an empty index).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// What `/readyz` answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Probe {
    /// Every initial sync is done: serve.
    Ready,
    /// Why not, for the probe's response body and the logs.
    NotReady(String),
}

#[derive(Debug)]
struct State {
    next_id: u64,
    /// What the initial sync still waits for, in the order it was registered. Kept after the
    /// wait was given up on (see [`Readiness::give_up_after`]) until each is done: answers
    /// until then may be incomplete (see [`Readiness::unsynced`]).
    pending: BTreeMap<u64, String>,
    /// Latched: set once, never cleared.
    ready: bool,
    /// Set on shutdown: not ready any more, whatever the sync says.
    shutting_down: bool,
    /// Set when a task the server cannot do without failed: neither live nor ready any more.
    failed: Option<String>,
}

impl State {
    fn probe(&self) -> Probe {
        if let Some(reason) = &self.failed {
            return Probe::NotReady(reason.clone());
        }
        if self.shutting_down {
            return Probe::NotReady("shutting down".to_string());
        }
        if self.ready {
            return Probe::Ready;
        }
        let waiting: Vec<&str> = self.pending.values().map(String::as_str).collect();
        Probe::NotReady(format!("initial sync: waiting for {}", waiting.join(", ")))
    }
}

/// Shared readiness of the server. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Readiness {
    state: Arc<watch::Sender<State>>,
}

impl Readiness {
    /// A readiness that waits for `first` (and for whatever is registered before `first` is done).
    pub fn new(first: impl Into<String>) -> (Readiness, Pending) {
        let (tx, _) = watch::channel(State {
            next_id: 0,
            pending: BTreeMap::new(),
            ready: false,
            shutting_down: false,
            failed: None,
        });
        let readiness = Readiness {
            state: Arc::new(tx),
        };
        let pending = readiness.register(first.into());
        (readiness, pending)
    }

    /// Holds readiness back until the returned handle is done (or dropped). After the server
    /// became ready this holds nothing back: readiness is about the initial sync only.
    #[must_use = "dropping the handle releases readiness at once"]
    pub(crate) fn pending(&self, what: impl Into<String>) -> Pending {
        self.register(what.into())
    }

    fn register(&self, what: String) -> Pending {
        let mut id = None;
        self.state.send_if_modified(|s| {
            if s.ready {
                return false;
            }
            id = Some(s.next_id);
            s.pending.insert(s.next_id, what);
            s.next_id += 1;
            true
        });
        Pending {
            readiness: self.clone(),
            id,
        }
    }

    fn release(&self, id: u64) {
        self.state.send_if_modified(|s| {
            if s.pending.remove(&id).is_none() {
                return false;
            }
            if !s.ready && s.pending.is_empty() {
                s.ready = true;
                tracing::info!("initial sync done: ready");
            }
            // After the wait was given up on, too: the sync is complete once the last is in.
            true
        });
    }

    /// What `/readyz` answers now.
    pub(crate) fn probe(&self) -> Probe {
        self.state.borrow().probe()
    }

    /// Whether `/readyz` succeeds now.
    #[cfg(test)]
    pub(crate) fn is_ready(&self) -> bool {
        self.probe() == Probe::Ready
    }

    /// What the initial sync has not seen yet, ready or not: the list of OperationRuleSets, or
    /// the first list of a target (done when it completed and was evaluated, or failed: a
    /// failing target is then named by the target health instead). Empty once every first list
    /// is in. Until then an answer may be missing what those lists hold: the API says so.
    pub(crate) fn unsynced(&self) -> Vec<String> {
        self.state.borrow().pending.values().cloned().collect()
    }

    /// Whether the initial sync is complete: every first list is in, even if the wait for them
    /// was given up on (then the server is ready before it is synced). Latched, and unlike
    /// [`Readiness::is_ready`] not withdrawn on shutdown. What a maintenance gate needs to know
    /// before it may say clear.
    pub(crate) fn is_synced(&self) -> bool {
        let s = self.state.borrow();
        s.ready && s.pending.is_empty()
    }

    /// Resolves once [`Readiness::is_synced`].
    pub(crate) async fn synced(&self) {
        let mut rx = self.state.subscribe();
        let _ = rx.wait_for(|s| s.ready && s.pending.is_empty()).await;
    }

    /// The server is stopping: `/readyz` fails from now on, so that the Service and the
    /// aggregator stop sending requests before open watches are ended.
    pub(crate) fn shut_down(&self) {
        self.state.send_modify(|s| s.shutting_down = true);
    }

    /// A task the server cannot do without failed (see the `supervise` module): `/livez` and
    /// `/readyz` fail from now on with `reason`, so that the pod is restarted.
    pub(crate) fn fail(&self, reason: String) {
        self.state.send_modify(|s| {
            s.failed.get_or_insert(reason);
        });
    }

    /// What `/livez` answers: `Err` with the reason once [`Readiness::fail`] was called.
    pub(crate) fn liveness(&self) -> Result<(), String> {
        match &self.state.borrow().failed {
            Some(reason) => Err(reason.clone()),
            None => Ok(()),
        }
    }

    /// Resolves once the server is ready.
    pub async fn wait(&self) {
        let mut rx = self.state.subscribe();
        // The sender lives in `self`, so the channel can't close while we wait.
        let _ = rx.wait_for(|s| s.ready).await;
    }

    /// Becomes ready after `timeout` if the initial sync has not finished by then, with a
    /// warning naming what it still waited for. Run it as a task next to the server.
    pub async fn give_up_after(self, timeout: Duration) {
        if tokio::time::timeout(timeout, self.wait()).await.is_ok() {
            return;
        }
        self.state.send_if_modified(|s| {
            if s.ready {
                return false;
            }
            let waiting: Vec<&str> = s.pending.values().map(String::as_str).collect();
            tracing::warn!(
                after = ?timeout,
                waiting = %waiting.join(", "),
                "initial sync not done in time; reporting ready with what is known so far"
            );
            s.ready = true;
            true
        });
    }
}

/// One thing the initial sync waits for. Readiness is released by [`Pending::done`], or by
/// dropping the handle: a task that is aborted (a watcher replaced or stopped) no longer holds
/// the server back. Whoever replaces it registers its own handle first.
#[derive(Debug)]
pub struct Pending {
    readiness: Readiness,
    /// `None` when registered after the server became ready.
    id: Option<u64>,
}

impl Pending {
    /// What it waited for has happened.
    pub fn done(self) {}
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            self.readiness.release(id);
        }
    }
}

#[cfg(test)]
#[allow(
    clippy::disallowed_methods,
    reason = "a test's tasks end with the test's runtime"
)]
mod tests;
