//! `Accept` header negotiation, as kube-apiserver does it (`handlers/negotiation`,
//! `github.com/munnerz/goautoneg`).
//!
//! The same URL answers with different documents depending on `Accept`: kubectl asks for a
//! `meta.k8s.io` Table, metadata informers (client-go, kube-rs `metadata_watcher`) for
//! `PartialObjectMetadata[List]`, everything else for the object itself; and `/apis` answers
//! the aggregator's `APIGroupDiscoveryList` request differently from a plain `APIGroupList`
//! request. Getting this wrong breaks clients silently (kubectl falls back to client-side
//! printing, the aggregator marks the group stale), so the selection mirrors the apiserver:
//!
//! * clauses are ordered by `q` (descending), then specific types before wildcards, keeping
//!   header order otherwise;
//! * a clause applies when its media type is `application/json`, `application/*` or `*/*`
//!   (this server encodes JSON only; protobuf, YAML, CBOR, HTML ... are skipped);
//! * its `as`/`g`/`v` parameters request a conversion, which must be one this endpoint
//!   supports, else the clause is skipped; `stream` must be empty or `watch`;
//! * a clause with `q=0` never applies, and if the most specific clause naming JSON has
//!   `q=0`, JSON is refused altogether (RFC 9110 §12.5.1, as current apiserver does);
//! * a missing or empty header selects the plain object.
//!
//! Every response is sent as `Content-Type: application/json` except aggregated discovery,
//! whose content type repeats the negotiated `g`/`v`/`as` (the aggregator checks it).

use std::borrow::Cow;
use std::collections::BTreeMap;

/// The only media type this server encodes.
pub(crate) const APPLICATION_JSON: &str = "application/json";

/// Content type of an aggregated discovery `v2` response.
pub(crate) const DISCOVERY_V2_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
/// Content type of an aggregated discovery `v2beta1` response.
pub(crate) const DISCOVERY_V2BETA1_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";

const META_GROUP: &str = "meta.k8s.io";
const DISCOVERY_GROUP: &str = "apidiscovery.k8s.io";

/// One clause of an `Accept` header.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MediaRange {
    /// `application`, or `*`.
    pub type_: String,
    /// `json`, or `*`.
    pub subtype: String,
    /// Quality; 1.0 when absent, 0.0 when unparsable (as goautoneg).
    pub q: f32,
    /// Parameters other than `q`, e.g. `as`, `g`, `v`, `stream`. Later duplicates win.
    pub params: BTreeMap<String, String>,
}

impl MediaRange {
    fn param(&self, key: &str) -> Option<&str> {
        self.params.get(key).map(String::as_str)
    }

    /// How specifically this clause names JSON: 2 exact, 1 `application/*`, 0 `*/*`,
    /// `None` when it does not cover JSON at all.
    fn json_specificity(&self) -> Option<u8> {
        match (self.type_.as_str(), self.subtype.as_str()) {
            ("application", "json") => Some(2),
            ("application", "*") => Some(1),
            ("*", "*") => Some(0),
            _ => None,
        }
    }

    /// The conversion the `as`/`g`/`v` parameters ask for, if any.
    fn conversion(&self) -> Option<Conversion<'_>> {
        let (kind, group, version) = (self.param("as"), self.param("g"), self.param("v"));
        if kind.is_none() && group.is_none() && version.is_none() {
            return None;
        }
        Some(Conversion {
            kind: kind.unwrap_or(""),
            group: group.unwrap_or(""),
            version: version.unwrap_or(""),
        })
    }

    /// The `stream` and `sv` parameters: `stream` may only be `watch`; this server has no
    /// alternative server versions to offer for `sv`, so any value for it on discovery, and
    /// anything but `v1` elsewhere, disqualifies the clause.
    fn stream_and_server_version_ok(&self, allowed_sv: Option<&str>) -> bool {
        let stream_ok = self
            .param("stream")
            .is_none_or(|s| s.is_empty() || s == "watch");
        let sv_ok = self
            .param("sv")
            .is_none_or(|sv| sv.is_empty() || Some(sv) == allowed_sv);
        stream_ok && sv_ok
    }
}

struct Conversion<'a> {
    kind: &'a str,
    group: &'a str,
    version: &'a str,
}

/// How a resource (get/list/watch) response should be represented.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Representation {
    /// `meta.k8s.io` `Table` (`beta`: `v1beta1` instead of `v1`).
    Table { beta: bool },
    /// `meta.k8s.io` `PartialObjectMetadata` for a get or watch event, `PartialObjectMetadataList`
    /// for a list (`beta`: `v1beta1` instead of `v1`). Either `as=` value selects it.
    PartialObjectMetadata { beta: bool },
    /// The object (or `<Kind>List`) itself.
    Object,
}

impl Representation {
    /// The `apiVersion` of the converted document, or `None` for [`Representation::Object`].
    pub(crate) fn meta_api_version(self) -> Option<&'static str> {
        match self {
            Representation::Table { beta } | Representation::PartialObjectMetadata { beta } => {
                Some(if beta {
                    "meta.k8s.io/v1beta1"
                } else {
                    "meta.k8s.io/v1"
                })
            }
            Representation::Object => None,
        }
    }

    /// Always `application/json`: kube-apiserver does not decorate the content type of
    /// Tables or metadata lists; clients decode by `kind`.
    pub(crate) fn content_type(self) -> &'static str {
        APPLICATION_JSON
    }
}

/// Which document `GET /apis` should return.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum DiscoveryFormat {
    /// `apidiscovery.k8s.io/v2` `APIGroupDiscoveryList`.
    AggregatedV2,
    /// `apidiscovery.k8s.io/v2beta1` `APIGroupDiscoveryList`.
    AggregatedV2Beta1,
    /// `v1` `APIGroupList`.
    Legacy,
}

impl DiscoveryFormat {
    /// The response `Content-Type`; the aggregator only caches an aggregated answer whose
    /// content type carries the matching `g`/`v`/`as`.
    pub(crate) fn content_type(self) -> &'static str {
        match self {
            DiscoveryFormat::AggregatedV2 => DISCOVERY_V2_CONTENT_TYPE,
            DiscoveryFormat::AggregatedV2Beta1 => DISCOVERY_V2BETA1_CONTENT_TYPE,
            DiscoveryFormat::Legacy => APPLICATION_JSON,
        }
    }
}

/// No clause of the `Accept` header can be served: answer `406 NotAcceptable`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("only the following media types are accepted: application/json")]
pub(crate) struct NotAcceptable;

/// The first `Accept` header of a request (later ones are ignored, as Go's `Header.Get`
/// does). Bytes that are not UTF-8 are replaced, which can only make a clause unmatchable.
pub(crate) fn accept_header(headers: &http::HeaderMap) -> Option<Cow<'_, str>> {
    headers
        .get(http::header::ACCEPT)
        .map(|v| String::from_utf8_lossy(v.as_bytes()))
}

/// Chooses the representation for a get, list or watch request.
pub(crate) fn negotiate_resource(accept: Option<&str>) -> Result<Representation, NotAcceptable> {
    negotiate(accept, |clause| match clause.conversion() {
        None => clause
            .stream_and_server_version_ok(Some("v1"))
            .then_some(Representation::Object),
        Some(c) => {
            if !clause.stream_and_server_version_ok(Some("v1")) || c.group != META_GROUP {
                return None;
            }
            let beta = match c.version {
                "v1" => false,
                "v1beta1" => true,
                _ => return None,
            };
            match c.kind {
                "Table" => Some(Representation::Table { beta }),
                "PartialObjectMetadata" | "PartialObjectMetadataList" => {
                    Some(Representation::PartialObjectMetadata { beta })
                }
                _ => None,
            }
        }
    })
    .map(|r| r.unwrap_or(Representation::Object))
}

/// Chooses the document for `GET /apis`: aggregated discovery when a clause asks for
/// `as=APIGroupDiscoveryList;g=apidiscovery.k8s.io;v=v2|v2beta1` (first such clause wins),
/// else the legacy `APIGroupList` when plain JSON is acceptable.
pub(crate) fn negotiate_discovery(accept: Option<&str>) -> Result<DiscoveryFormat, NotAcceptable> {
    // kube-apiserver first negotiates with restrictions that admit only the aggregated
    // conversion, then hands the request to the legacy handler, which admits only
    // unconverted JSON. Together: the first clause (in priority order) that is either.
    let aggregated = negotiate(accept, |clause| {
        let c = clause.conversion()?;
        if !clause.stream_and_server_version_ok(None)
            || c.group != DISCOVERY_GROUP
            || c.kind != "APIGroupDiscoveryList"
        {
            return None;
        }
        match c.version {
            "v2" => Some(DiscoveryFormat::AggregatedV2),
            "v2beta1" => Some(DiscoveryFormat::AggregatedV2Beta1),
            _ => None,
        }
    });
    if let Ok(Some(format)) = aggregated {
        return Ok(format);
    }
    negotiate(accept, |clause| {
        (clause.conversion().is_none() && clause.stream_and_server_version_ok(None))
            .then_some(DiscoveryFormat::Legacy)
    })
    .map(|f| f.unwrap_or(DiscoveryFormat::Legacy))
}

/// Whether an OpenAPI document may be sent: it exists only as JSON (kube-openapi also offers
/// protobuf, which the aggregator never asks of us). Any clause covering JSON will do, its
/// parameters ignored, as kube-openapi matches type and subtype only.
pub(crate) fn negotiate_openapi(accept: Option<&str>) -> Result<(), NotAcceptable> {
    negotiate(accept, |_| Some(())).map(|_| ())
}

/// Walks the clauses in priority order and returns the first one `accept` admits.
/// `Ok(None)` means the header was absent or empty (serve the default).
fn negotiate<T>(
    header: Option<&str>,
    accept: impl Fn(&MediaRange) -> Option<T>,
) -> Result<Option<T>, NotAcceptable> {
    let header = match header {
        None | Some("") => return Ok(None),
        Some(h) => h,
    };
    let clauses = parse_accept(header);
    if json_rejected(&clauses) {
        return Err(NotAcceptable);
    }
    clauses
        .iter()
        .filter(|c| c.q > 0.0 && c.json_specificity().is_some())
        .find_map(accept)
        .map(Some)
        .ok_or(NotAcceptable)
}

/// JSON is refused when the most specific clause covering it (the first one, in priority
/// order, among equally specific clauses) has `q <= 0`.
fn json_rejected(clauses: &[MediaRange]) -> bool {
    let mut best: Option<(u8, bool)> = None;
    for c in clauses {
        if let Some(spec) = c.json_specificity()
            && best.is_none_or(|(b, _)| spec > b)
        {
            best = Some((spec, c.q <= 0.0));
        }
    }
    best.is_some_and(|(_, rejected)| rejected)
}

/// Parses an `Accept` header into clauses in priority order, like goautoneg `ParseAccept`:
/// split on `,` and `;`, trim spaces, drop clauses without a `type/subtype` (a lone `*` means
/// `*/*`), read `q` as a float (0 when unparsable), then sort by `q` descending with specific
/// types before wildcards, otherwise keeping header order.
pub(crate) fn parse_accept(header: &str) -> Vec<MediaRange> {
    let mut clauses = Vec::new();
    for part in header.split(',') {
        let part = part.trim_matches(' ');
        let mut pieces = part.split(';');
        let media_range = pieces.next().unwrap_or("");
        let mut type_subtype = media_range.split('/');
        let type_ = type_subtype.next().unwrap_or("").trim_matches(' ');
        let subtype = match (type_subtype.next(), type_subtype.next()) {
            (None, _) if type_ == "*" => "*",
            (Some(sub), None) => sub.trim_matches(' '),
            _ => continue,
        };
        let mut clause = MediaRange {
            type_: type_.to_owned(),
            subtype: subtype.to_owned(),
            q: 1.0,
            params: BTreeMap::new(),
        };
        for param in pieces {
            let Some((key, value)) = param.split_once('=') else {
                continue;
            };
            let key = key.trim_matches(' ');
            if key == "q" {
                clause.q = value.parse::<f32>().unwrap_or(0.0);
            } else {
                clause
                    .params
                    .insert(key.to_owned(), value.trim_matches(' ').to_owned());
            }
        }
        clauses.push(clause);
    }
    sort_clauses(&mut clauses);
    clauses
}

/// goautoneg's ordering. Go's `sort.Sort` is an insertion sort for up to 12 elements, and the
/// comparison is not a strict weak order (a wildcard loses to a specific type even at higher
/// `q` when compared in that direction), so for realistic headers the same insertion sort is
/// replayed to get the very same order; longer headers fall back to a stable sort on a
/// consistent key.
fn sort_clauses(clauses: &mut [MediaRange]) {
    fn less(a: &MediaRange, b: &MediaRange) -> bool {
        a.q > b.q || (a.type_ != "*" && b.type_ == "*") || (a.subtype != "*" && b.subtype == "*")
    }
    if clauses.len() <= 12 {
        for i in 1..clauses.len() {
            let mut j = i;
            while j > 0 && less(&clauses[j], &clauses[j - 1]) {
                clauses.swap(j, j - 1);
                j -= 1;
            }
        }
    } else {
        clauses.sort_by(|a, b| {
            b.q.total_cmp(&a.q)
                .then_with(|| (a.type_ == "*").cmp(&(b.type_ == "*")))
                .then_with(|| (a.subtype == "*").cmp(&(b.subtype == "*")))
        });
    }
}

#[cfg(test)]
mod tests;
