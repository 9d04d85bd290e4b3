//! A client watching operations through kube-apiserver, matching every event to the
//! transition that caused it. Each watcher keeps its own books, so with many watchers every
//! one of them must see every operation.
//!
//! An operation completes when it is shown in the completed phase, or when its object is
//! deleted before that (implementations that delete what has completed): whichever comes
//! first counts, once.

use crate::ledger::{Key, Ledger};
use crate::resume::watch_from;
use crate::target::{IfoApi, Sighting};
use anyhow::Result;
use kube::api::{ListParams, WatchEvent, WatchParams};
use kube::core::Request;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// What one watcher saw since its books were last taken.
#[derive(Default, Debug)]
pub(crate) struct Books {
    /// Transition → first event of the operation it started.
    pub start_latencies: Vec<Duration>,
    /// How long after the debounce threshold an ended operation was shown `Completed`.
    pub completion_delays: Vec<Duration>,
    /// Operations seen starting that the driver started.
    pub matched: u64,
    /// Operations seen completing.
    pub completed: u64,
    /// Of those, the ones whose object was deleted without being shown completed first.
    pub completed_by_delete: u64,
    /// The same object version delivered twice, or a second operation for one transition.
    pub duplicates: u64,
    /// Operations no transition of this run explains.
    pub unexpected: u64,
    /// Times the watch had to relist (410 Expired or a broken stream).
    pub relists: u64,
    pub events: u64,
}

/// One watching client.
pub(crate) struct Watcher {
    books: Mutex<Books>,
    /// Operations seen, by uid: their key, last resourceVersion, and whether completed.
    seen: Mutex<HashMap<String, (Key, String, bool)>>,
    /// Per key, the start already matched, so a second occurrence for it is a duplicate.
    matched_starts: Mutex<HashMap<Key, Instant>>,
    ledger: Arc<Ledger>,
    debounce: Duration,
    /// The subjects' namespace: operations of subjects elsewhere are not this run's.
    namespace: String,
}

impl Watcher {
    pub(crate) fn new(ledger: Arc<Ledger>, debounce: Duration, namespace: &str) -> Arc<Watcher> {
        Arc::new(Watcher {
            books: Mutex::default(),
            seen: Mutex::default(),
            matched_starts: Mutex::default(),
            ledger,
            debounce,
            namespace: namespace.to_string(),
        })
    }

    /// Watches until the task is aborted. Lists first (the current operations are known, not
    /// matched), then watches from the list's resourceVersion, resuming after each timeout and
    /// relisting on `410 Expired`. Signals `ready` once the first watch is open.
    pub(crate) async fn run(
        self: Arc<Self>,
        client: kube::Client,
        api: IfoApi,
        ready: tokio::sync::mpsc::Sender<()>,
    ) -> Result<()> {
        let request = Request::new(api.path());
        let watch = WatchParams::default().timeout(290);
        let mut ready = Some(ready);
        let mut rv = None;
        loop {
            let from = match rv.take() {
                Some(rv) => rv,
                None => {
                    let list: Value = client
                        .request(request.list(&ListParams::default())?)
                        .await?;
                    if ready.is_none() {
                        self.books.lock().unwrap().relists += 1;
                    }
                    for item in list["items"].as_array().into_iter().flatten() {
                        self.observe(&api, item, Instant::now());
                    }
                    list["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap_or("0")
                        .to_string()
                }
            };
            rv = watch_from(
                &client,
                &request,
                &watch,
                from,
                &mut ready,
                |event, at| match event {
                    WatchEvent::Added(o) | WatchEvent::Modified(o) => self.observe(&api, &o, at),
                    WatchEvent::Deleted(o) => self.observe_deleted(&o, at),
                    WatchEvent::Bookmark(_) | WatchEvent::Error(_) => {}
                },
            )
            .await;
        }
    }

    fn observe(&self, api: &IfoApi, object: &Value, now: Instant) {
        let Some(Sighting {
            uid,
            resource_version,
            key,
            namespace,
            completed,
        }) = api.read(object)
        else {
            return;
        };
        let mut books = self.books.lock().unwrap();
        books.events += 1;
        if namespace.is_some_and(|ns| ns != self.namespace) {
            return;
        }
        let mut seen = self.seen.lock().unwrap();
        let previous = seen.insert(uid, (key.clone(), resource_version.clone(), completed));
        match previous {
            Some((_, rv, _)) if rv == resource_version => books.duplicates += 1,
            Some((_, _, was_completed)) => {
                if completed && !was_completed {
                    self.completed(&mut books, &key, now);
                }
            }
            None if completed => {}
            None => {
                let mut matched = self.matched_starts.lock().unwrap();
                match self.ledger.started_at(&key) {
                    Some(start) if matched.get(&key) == Some(&start) => books.duplicates += 1,
                    Some(start) => {
                        matched.insert(key, start);
                        books.matched += 1;
                        books.start_latencies.push(now - start);
                    }
                    None => books.unexpected += 1,
                }
            }
        }
    }

    /// A deleted operation: a completion if it had not been shown completed. Its uid is
    /// forgotten, so neither a repeated DELETE nor a late completed version counts again.
    fn observe_deleted(&self, object: &Value, now: Instant) {
        let mut books = self.books.lock().unwrap();
        books.events += 1;
        let Some(uid) = object["metadata"]["uid"].as_str() else {
            return;
        };
        let Some((key, _, was_completed)) = self.seen.lock().unwrap().remove(uid) else {
            return;
        };
        if !was_completed {
            books.completed_by_delete += 1;
            self.completed(&mut books, &key, now);
        }
    }

    fn completed(&self, books: &mut Books, key: &Key, now: Instant) {
        books.completed += 1;
        if let Some(ended) = self.ledger.ended_at(key) {
            let due = ended + self.debounce;
            books
                .completion_delays
                .push(now.saturating_duration_since(due));
        }
    }

    /// Takes the books, starting new ones.
    pub(crate) fn take(&self) -> Books {
        std::mem::take(&mut self.books.lock().unwrap())
    }

    /// Operations this watcher shows as not completed.
    pub(crate) fn active(&self) -> usize {
        self.seen
            .lock()
            .unwrap()
            .values()
            .filter(|(_, _, c)| !c)
            .count()
    }
}

impl Watcher {
    /// `(matched starts, completions)` in the current books.
    pub(crate) fn progress(&self) -> (u64, u64) {
        let books = self.books.lock().unwrap();
        (books.matched, books.completed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn operation(uid: &str, rv: &str, namespace: &str, op: &str, phase: &str) -> Value {
        json!({
            "metadata": {"uid": uid, "resourceVersion": rv, "namespace": namespace},
            "spec": {"operation": op, "subject": {"name": "vm-1", "namespace": namespace}},
            "status": {"phase": phase},
        })
    }

    /// A watcher of namespace `bench` (with `debounce`) of a driver that started `op` on
    /// `vm-1` at the instant returned, and ended it a second later.
    fn started(op: &str, debounce: Duration) -> (Arc<Watcher>, Instant) {
        let ledger = Arc::new(Ledger::default());
        let t0 = Instant::now();
        ledger.start(("vm-1".into(), op.into()), t0);
        ledger.end(("vm-1".into(), op.into()), t0 + Duration::from_secs(1));
        (Watcher::new(ledger, debounce, "bench"), t0)
    }

    impl Watcher {
        /// `operation` seen at `at` (not deleted), through the default API.
        fn seen(&self, operation: &Value, at: Instant) {
            self.observe(&crate::target::parse(&[]), operation, at);
        }
    }

    #[test]
    fn a_delete_without_a_completed_phase_completes_the_operation_once() {
        let (w, t0) = started("Starting", Duration::from_secs(5));
        w.seen(&operation("u1", "1", "bench", "Starting", "Active"), t0);
        assert_eq!(w.progress(), (1, 0));
        let deleted = operation("u1", "2", "bench", "Starting", "Active");
        w.observe_deleted(&deleted, t0 + Duration::from_secs(7));
        // A repeated DELETE and a late completed version are not counted again.
        w.observe_deleted(&deleted, t0 + Duration::from_secs(8));
        w.seen(
            &operation("u1", "3", "bench", "Starting", "Completed"),
            t0 + Duration::from_secs(8),
        );
        assert_eq!(w.active(), 0);
        let books = w.take();
        assert_eq!(
            (books.matched, books.completed, books.completed_by_delete),
            (1, 1, 1)
        );
        // Ended at t0 + 1 s, due 5 s later, deleted at t0 + 7 s.
        assert_eq!(books.completion_delays, vec![Duration::from_secs(1)]);
        assert_eq!(
            (books.duplicates, books.unexpected, books.events),
            (0, 0, 4)
        );
    }

    #[test]
    fn a_delete_after_the_completed_phase_adds_nothing() {
        let (w, t0) = started("Migrating", Duration::ZERO);
        w.seen(&operation("u1", "1", "bench", "Migrating", "Active"), t0);
        let completed = operation("u1", "2", "bench", "Migrating", "Completed");
        w.seen(&completed, t0 + Duration::from_secs(2));
        w.observe_deleted(&completed, t0 + Duration::from_secs(3));
        let books = w.take();
        assert_eq!(
            (books.matched, books.completed, books.completed_by_delete),
            (1, 1, 0)
        );
        assert_eq!(books.completion_delays, vec![Duration::from_secs(1)]);
    }

    #[test]
    fn a_delete_of_an_operation_never_seen_is_no_completion() {
        let (w, t0) = started("Stopping", Duration::ZERO);
        w.observe_deleted(&operation("u9", "5", "bench", "Stopping", "Active"), t0);
        let books = w.take();
        assert_eq!((books.matched, books.completed, books.events), (0, 0, 1));
    }

    #[test]
    fn operations_of_subjects_in_other_namespaces_are_ignored() {
        let (w, t0) = started("Starting", Duration::ZERO);
        w.seen(&operation("u1", "1", "other", "Starting", "Active"), t0);
        w.observe_deleted(&operation("u1", "2", "other", "Starting", "Active"), t0);
        let books = w.take();
        assert_eq!(
            (books.matched, books.completed, books.unexpected),
            (0, 0, 0)
        );
        assert_eq!(books.events, 2);
    }
}
