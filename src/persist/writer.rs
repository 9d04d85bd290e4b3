//! The writer: follows the index, keeps [`Pending`] up to date, and makes its writes.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use kube::Api;
use kube::api::{DeleteParams, DynamicObject, PostParams, Preconditions};
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::object::{FIELD_MANAGER, from_object, is_ours, to_object};
use super::pending::{Copy, Desired, Pending, Write, Written};
use super::restore::ReadBack;
use crate::index::{EventKind, IndexReader};

/// Writes in flight at once: enough to keep up with hundreds of writes a second over one
/// connection's round trips, few enough to stay a small share of kube-apiserver.
const MAX_IN_FLIGHT: usize = 8;

/// How often the pending-work gauges are brought up to date (finding the oldest is a scan).
const REPORT_PERIOD: Duration = Duration::from_secs(1);

/// How long the writer sleeps with nothing due (events and ended writes wake it sooner).
const IDLE_WAKE: Duration = Duration::from_secs(3600);

/// How the writer paces itself.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Settings {
    /// Least time between two writes of one operation's copy (`PERSIST_INTERVAL`).
    pub interval: Duration,
    /// Writes per second, all operations together (`PERSIST_QPS`).
    pub qps: f64,
    /// Writes allowed at once above the rate (`PERSIST_BURST`).
    pub burst: u32,
}

/// Mirrors the index into persisted copies.
pub(crate) struct Writer {
    api: Api<DynamicObject>,
    pending: Pending,
    limiter: DefaultDirectRateLimiter,
}

impl Writer {
    /// A writer that knows the copies read back at start.
    pub(crate) fn new(api: Api<DynamicObject>, settings: Settings, found: ReadBack) -> Writer {
        let mut pending = Pending::new(settings.interval);
        for (name, copy) in found.copies {
            pending.found(name, copy);
        }
        let period = Duration::from_secs_f64(1.0 / settings.qps.max(0.001));
        let quota = Quota::with_period(period)
            .expect("a positive period")
            .allow_burst(NonZeroU32::new(settings.burst.max(1)).expect("at least 1"));
        Writer {
            api,
            pending,
            limiter: RateLimiter::direct(quota),
        }
    }

    /// Runs until the index is gone.
    pub(crate) async fn run(mut self, index: IndexReader) {
        let (snapshot, mut events) = index.subscribe_with_snapshot();
        self.pending.resync(
            &records(&snapshot.items),
            Instant::now(),
            jiff::Timestamp::now(),
        );
        let mut in_flight: JoinSet<(String, Written)> = JoinSet::new();
        let mut names: HashMap<tokio::task::Id, String> = HashMap::new();
        let mut report = tokio::time::interval(REPORT_PERIOD);
        report.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            let now = Instant::now();
            let room = in_flight.len() < MAX_IN_FLIGHT;
            let next_due = self.pending.next_due();
            // A write is due and may start: wait for the rate limit's permit (dropping this
            // wait for another branch gives the permit back). Otherwise sleep until one is due,
            // or, with every slot taken, until a write ends.
            let due_now = room && next_due.is_some_and(|due| due <= now);
            let wake = next_due
                .filter(|_| room && !due_now)
                .unwrap_or(now + IDLE_WAKE);
            tokio::select! {
                () = self.limiter.until_ready(), if due_now => {
                    // The write is taken after the permit, so it carries the latest state.
                    if let Some(write) = self.pending.take(Instant::now()) {
                        let name = write.name().to_owned();
                        let handle = in_flight.spawn(perform(self.api.clone(), write));
                        names.insert(handle.id(), name);
                    }
                }
                _ = report.tick() => crate::metrics::set_persist_pending(
                    self.pending.len(),
                    self.pending.oldest(now).unwrap_or_default(),
                ),
                event = events.recv() => match event {
                    Ok(event) => {
                        // A change of the feeds' state carries no record to write.
                        let Some(object) = &event.object else { continue };
                        let desired = match event.kind {
                            EventKind::Added | EventKind::Modified => Desired::Present(object.op.clone()),
                            EventKind::Deleted => Desired::Absent(Some(object.op.clone())),
                            EventKind::FeedsChanged => continue,
                        };
                        self.pending.want(&object.op.name, desired, Instant::now());
                    }
                    Err(RecvError::Lagged(missed)) => {
                        tracing::warn!(missed, "persistence fell behind the index; comparing with all of it");
                        let (snapshot, receiver) = index.subscribe_with_snapshot();
                        events = receiver;
                        self.pending.resync(&records(&snapshot.items), Instant::now(), jiff::Timestamp::now());
                    }
                    Err(RecvError::Closed) => return,
                },
                Some(done) = in_flight.join_next_with_id(), if !in_flight.is_empty() => {
                    let (id, name, result) = match done {
                        Ok((id, (name, result))) => (id, Some(name), result),
                        Err(e) => (e.id(), None, Written::Failed),
                    };
                    let name = name.or_else(|| names.get(&id).cloned());
                    names.remove(&id);
                    if let Some(name) = name {
                        self.pending.done(&name, result, Instant::now());
                    }
                }
                () = tokio::time::sleep_until(wake) => {}
            }
        }
    }
}

fn records(items: &[Arc<crate::index::Stored>]) -> Vec<Arc<crate::operation::InFlightOperation>> {
    items.iter().map(|s| s.op.clone()).collect()
}

fn post_params() -> PostParams {
    PostParams {
        dry_run: false,
        field_manager: Some(FIELD_MANAGER.to_owned()),
    }
}

/// The status code of an API error, if it is one.
fn code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

fn copy_of(
    object: &DynamicObject,
    record: Option<Arc<crate::operation::InFlightOperation>>,
) -> Copy {
    Copy {
        record,
        uid: object.metadata.uid.clone().unwrap_or_default(),
        resource_version: object.metadata.resource_version.clone().unwrap_or_default(),
    }
}

/// Makes one write (its rate-limit permit already taken); returns the name and how it went.
async fn perform(api: Api<DynamicObject>, write: Write) -> (String, Written) {
    let name = write.name().to_owned();
    let verb = write.verb();
    // What the logs name: the operation, when the write carries its record (a delete does not).
    let (ruleset, subject, operation) = match &write {
        Write::Create(r) | Write::Replace(r, _) => (
            r.ruleset.clone(),
            r.subject.reference(),
            r.operation.clone(),
        ),
        Write::Delete { .. } => Default::default(),
    };
    let result = match write {
        Write::Create(record) => {
            match api.create(&post_params(), &to_object(&record, None)).await {
                Ok(object) => Ok(Written::Stored(copy_of(&object, Some(record)))),
                Err(e) if code(&e) == Some(409) => {
                    crate::metrics::persist_write(verb, "conflict");
                    Ok(reread(&api, &name).await)
                }
                Err(e) => Err(e),
            }
        }
        Write::Replace(record, copy) => {
            let object = to_object(&record, Some(&copy.resource_version));
            match api.replace(&name, &post_params(), &object).await {
                Ok(object) => Ok(Written::Stored(copy_of(&object, Some(record)))),
                Err(e) if matches!(code(&e), Some(409 | 404)) => {
                    let result = if code(&e) == Some(409) {
                        "conflict"
                    } else {
                        "not_found"
                    };
                    crate::metrics::persist_write(verb, result);
                    Ok(reread(&api, &name).await)
                }
                Err(e) => Err(e),
            }
        }
        Write::Delete { uid, .. } => {
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: Some(uid),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            match api.delete(&name, &params).await {
                Ok(_) => Ok(Written::Deleted),
                // Gone already, or the name now holds another object (the uid differs): our
                // copy is gone either way.
                Err(e) if matches!(code(&e), Some(404 | 409)) => {
                    crate::metrics::persist_write(verb, "not_found");
                    Ok(Written::Deleted)
                }
                Err(e) => Err(e),
            }
        }
    };
    let written = match result {
        Ok(written) => {
            if matches!(written, Written::Stored(_) | Written::Deleted) {
                crate::metrics::persist_write(verb, "ok");
                tracing::debug!(name = %name, ruleset = %ruleset, subject = %subject, operation = %operation, verb, "persisted copy written");
            }
            written
        }
        Err(e) => {
            crate::metrics::persist_write(verb, "error");
            tracing::warn!(name = %name, ruleset = %ruleset, subject = %subject, operation = %operation, verb, error = %e, "writing the persisted copy failed; retrying after a backoff");
            Written::Failed
        }
    };
    (name, written)
}

/// After a conflict: what the cluster holds under `name` now.
async fn reread(api: &Api<DynamicObject>, name: &str) -> Written {
    match api.get_opt(name).await {
        Ok(Some(object)) if is_ours(&object) => {
            crate::metrics::persist_write("get", "ok");
            let record = from_object(&object).ok();
            Written::Reread(Some(copy_of(&object, record)))
        }
        Ok(Some(_)) => {
            crate::metrics::persist_write("get", "foreign");
            tracing::warn!(name = %name, "an InFlightOperation of that name exists and is not ours; leaving it alone");
            Written::Foreign
        }
        Ok(None) => {
            crate::metrics::persist_write("get", "not_found");
            Written::Reread(None)
        }
        Err(e) => {
            crate::metrics::persist_write("get", "error");
            tracing::warn!(name = %name, error = %e, "reading the persisted copy again failed; retrying after a backoff");
            Written::Failed
        }
    }
}

#[cfg(test)]
#[allow(
    clippy::disallowed_methods,
    reason = "a test's tasks end with the test's runtime"
)]
mod tests;
