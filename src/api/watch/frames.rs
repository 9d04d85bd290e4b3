//! What the watch engine ([`super`]) writes and how long it waits: how long a watch lasts, how
//! much it buffers, and the lines it writes (events, bookmarks, and the in-stream errors that
//! end it).

use crate::api::resource::GROUP_VERSION;
use crate::api::status::ApiError;
use crate::index::WatchError;
use bytes::Bytes;
use serde::Serialize;
use serde_json::json;
use std::time::Duration;

/// kube-apiserver's `--min-request-timeout`: a watch lasts between this and twice this (random,
/// so that watches opened together do not all end together); `timeoutSeconds` only shortens it.
pub(super) const MIN_REQUEST_TIMEOUT: Duration = Duration::from_secs(1800);
pub(super) const BOOKMARK_EVERY: Duration = Duration::from_secs(60);
/// Encoded events buffered per watch before the sender waits on the client.
pub(super) const CHANNEL: usize = 64;
/// How long a watch waits for a client that has stopped reading before closing it.
pub(super) const STALLED_CLIENT: Duration = Duration::from_secs(60);
/// History events a watch reads from the index at a time (each read holds the index's read
/// lock briefly; none copies the whole history).
pub(super) const REPLAY_CHUNK: usize = 256;

#[derive(Serialize)]
struct WireEvent<'a, T> {
    #[serde(rename = "type")]
    type_: &'a str,
    object: &'a T,
}

/// One watch event on the wire: `{"type":..,"object":..}` and a newline.
pub(in crate::api) fn frame(type_: &str, object: &impl Serialize) -> Bytes {
    let mut line = serde_json::to_vec(&WireEvent { type_, object }).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

/// An in-stream `ERROR` event carrying a `Status`.
pub(super) fn error_frame(err: &ApiError) -> Bytes {
    frame("ERROR", &err.to_status())
}

/// A `BOOKMARK` of `kind` at `rv`; `initial_events_end` marks the end of the initial events.
pub(super) fn bookmark_frame(kind: &str, rv: u64, initial_events_end: bool) -> Bytes {
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if initial_events_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    frame(
        "BOOKMARK",
        &json!({"kind": kind, "apiVersion": GROUP_VERSION, "metadata": metadata}),
    )
}

/// How long a watch lasts: the server's jittered maximum, or less if the client asked for less
/// (`timeoutSeconds` of 0 or absent asks for nothing). Never longer than two
/// [`MIN_REQUEST_TIMEOUT`]s, whatever the client sends.
pub(super) fn lifetime(requested_seconds: Option<u64>) -> Duration {
    let server = MIN_REQUEST_TIMEOUT.mul_f64(1.0 + fastrand::f64());
    match requested_seconds {
        Some(s) if s > 0 => Duration::from_secs(s).min(server),
        _ => server,
    }
}

pub(super) fn expired(e: WatchError) -> ApiError {
    match e {
        WatchError::Expired { requested, oldest } => {
            ApiError::TooOldResourceVersion { requested, oldest }
        }
        // In-stream 410 (not 504) for a future version: clients then relist instead of retrying it forever.
        WatchError::TooLarge { requested, current } => ApiError::Expired(format!(
            "too large resource version: {requested}, current: {current}"
        )),
    }
}

/// What a watcher that read nothing for [`STALLED_CLIENT`] is told before it is cut.
pub(super) fn stalled() -> ApiError {
    ApiError::Expired(format!(
        "the watcher read nothing for {}s; list again and watch from there",
        STALLED_CLIENT.as_secs()
    ))
}

/// What a watcher that fell `missed` events behind is told before it is cut.
pub(super) fn fell_behind(missed: u64) -> ApiError {
    ApiError::Expired(format!(
        "the watcher fell {missed} events behind; list again and watch from there"
    ))
}
