//! The live API: requests by verb, resource and code with their latency, open watches, and what
//! the server refused or cut.
//!
//! Request labels are mapped onto fixed sets ([`request_labels`]): a request for a resource
//! this server does not serve is `other`, an unusual method `other`, so no caller can add
//! series by inventing paths.

use super::{Histograms, Labels, register};
use http::{Method, StatusCode};
use ifo_apimachinery::RequestInfo;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::time::Instant;

/// Upper bounds of `ifo_api_request_duration_seconds`.
const REQUEST_BUCKETS: [f64; 12] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

fn request_histogram() -> Histogram {
    Histogram::new(REQUEST_BUCKETS)
}

pub(super) struct Api {
    requests: Family<Labels, Counter>,
    duration: Histograms,
    open_watches: Gauge,
    watches_refused: Family<Labels, Counter>,
    watchers_cut: Family<Labels, Counter>,
    connections_refused: Family<Labels, Counter>,
    connections_displaced: Family<Labels, Counter>,
}

impl Api {
    pub(super) fn register(r: &mut Registry) -> Api {
        let api = Api {
            requests: register(
                r,
                "api_requests",
                "Requests to the API (authentication and authorization refusals included), by verb, resource (empty for discovery, OpenAPI and /metrics) and HTTP code",
                Family::default(),
            ),
            duration: register(
                r,
                "api_request_duration_seconds",
                "Time from a request's arrival to its response headers (for watches and lists, when the stream starts), by verb and resource",
                Histograms::new_with_constructor(request_histogram),
            ),
            open_watches: register(
                r,
                "api_open_watches",
                "Watches open on the live API",
                Gauge::default(),
            ),
            watches_refused: register(
                r,
                "api_watches_refused",
                "Watches refused with 429 because a limit was reached, by limit (total, user)",
                Family::default(),
            ),
            watchers_cut: register(
                r,
                "api_watchers_cut",
                "Watches the server ended early, by reason (lagging: fell behind the event stream; stalled: stopped reading)",
                Family::default(),
            ),
            connections_refused: register(
                r,
                "connections_refused",
                "Client connections closed at once, by port (api: SECURE_PORT; admission: ADMISSION_PORT, each with pools of its own) and pool (proven: MAX_CONNECTIONS connections with a verified certificate were open; anonymous: MAX_ANONYMOUS_CONNECTIONS were open and no address held more than the newcomer's)",
                Family::default(),
            ),
            connections_displaced: register(
                r,
                "connections_displaced",
                "Anonymous connections closed to make room for one of an address that held no more (MAX_ANONYMOUS_CONNECTIONS reached), by port (api, admission): refused at the doors first, then idle ones, else the oldest of an address holding at least two more",
                Family::default(),
            ),
        };
        // Fixed label sets start at 0, so that "never happened" reads as 0, not as no data.
        for limit in ["total", "user"] {
            drop(
                api.watches_refused
                    .get_or_create(&vec![("limit", limit.to_owned())]),
            );
        }
        for port in ["api", "admission"] {
            for pool in ["proven", "anonymous"] {
                drop(
                    api.connections_refused
                        .get_or_create(&vec![("port", port.to_owned()), ("pool", pool.to_owned())]),
                );
            }
            drop(
                api.connections_displaced
                    .get_or_create(&vec![("port", port.to_owned())]),
            );
        }
        for reason in ["lagging", "stalled"] {
            drop(
                api.watchers_cut
                    .get_or_create(&vec![("reason", reason.to_owned())]),
            );
        }
        api
    }
}

fn api() -> &'static Api {
    &super::metrics().api
}

/// Verbs counted under their own name; any other is `other`.
const VERBS: &[&str] = &[
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
    "post",
    "put",
    "head",
    "options",
];

/// The `verb` and `resource` labels of a request: `info` when it could be read, else its
/// method alone (resource empty). A resource is counted under its own name when `served` knows
/// it (the API's served resources), else as `other`.
pub fn request_labels(
    info: Option<&RequestInfo>,
    method: &Method,
    served: impl Fn(&str) -> Option<&'static str>,
) -> (&'static str, &'static str) {
    let known = |verb: &str| {
        VERBS
            .iter()
            .copied()
            .find(|v| *v == verb)
            .unwrap_or("other")
    };
    match info {
        Some(info) => {
            let resource = match &info.resource {
                None => "",
                Some(r) => served(&r.resource).unwrap_or("other"),
            };
            (known(&info.verb), resource)
        }
        None => (known(&method.as_str().to_ascii_lowercase()), ""),
    }
}

/// Times one request from its arrival; [`RequestTimer::finish`] counts it.
#[derive(Debug)]
pub struct RequestTimer(Instant);

impl RequestTimer {
    /// Starts timing a request that just arrived.
    pub fn start() -> RequestTimer {
        RequestTimer(Instant::now())
    }

    /// The request was answered with `status`.
    pub fn finish(self, labels: (&'static str, &'static str), status: StatusCode) {
        let (verb, resource) = labels;
        let api = api();
        api.requests
            .get_or_create(&vec![
                ("verb", verb.to_owned()),
                ("resource", resource.to_owned()),
                ("code", status.as_u16().to_string()),
            ])
            .inc();
        api.duration
            .get_or_create(&vec![
                ("verb", verb.to_owned()),
                ("resource", resource.to_owned()),
            ])
            .observe(self.0.elapsed().as_secs_f64());
    }
}

/// Watches of the live API opened (+1) or closed (-1).
pub fn open_watches(delta: i64) {
    api().open_watches.inc_by(delta);
}

/// A watch was refused with 429 at `limit` (`total`, `user`).
pub fn watch_refused(limit: &'static str) {
    api()
        .watches_refused
        .get_or_create(&vec![("limit", limit.to_string())])
        .inc();
}

/// The server ended a watch for `reason` (`lagging`, `stalled`).
pub fn watcher_cut(reason: &'static str) {
    api()
        .watchers_cut
        .get_or_create(&vec![("reason", reason.to_string())])
        .inc();
}

/// A connection to `port` was closed at once: its `pool` was full.
pub fn connection_refused(port: &'static str, pool: &'static str) {
    api()
        .connections_refused
        .get_or_create(&vec![("port", port.to_owned()), ("pool", pool.to_owned())])
        .inc();
}

/// An anonymous connection to `port` was closed to make room for another.
pub fn connection_displaced(port: &'static str) {
    api()
        .connections_displaced
        .get_or_create(&vec![("port", port.to_owned())])
        .inc();
}
