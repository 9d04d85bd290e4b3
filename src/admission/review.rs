//! Reading an `admission.k8s.io/v1` AdmissionReview for what a door's decision needs, and
//! nothing else: the request's identity (uid, resource, name, namespace, operation, dry run,
//! the user's name) and, where the door asks for it, the object. Everything else (the old
//! object, the options, the user's groups, and for the guard the Eviction itself) is skipped as
//! it is parsed, never kept. So parsing allocates in proportion to what is kept, never to the
//! body, and never twice.
//!
//! A body is read whole into one buffer (of its `Content-Length` when it has one), then parsed
//! from it: an eviction's review is about 2 KB (parsed where it is read up to [`SMALL_BYTES`]); a
//! larger one (an Eviction padded with annotations, a user of thousands of groups) up to
//! [`MAX_LARGE_BYTES`], more than kube-apiserver can send (its own limit on a request body is
//! 3 MiB), so whatever it sends is judged. Bodies are read in turns weighed by their size (see
//! `intake`), which bound the memory they hold, and large ones parsed in a few turns, past
//! [`INLINE_PARSE_BYTES`] on the blocking pool, so that megabytes sent by others never keep a
//! worker from kube-apiserver's reviews. Parsing from
//! memory is what keeps a padded review's answer within the guard's 2 ms: a review of a 70 KB
//! Eviction is answered in about 0.2 ms (`cargo bench --bench guard`);
//! parsed a byte at a time as it arrived (serde_json's reader), it took 0.7 ms there and 4–9 ms
//! in the tests' debug build beside kube-apiserver's own work.

use super::ReviewError;
use axum::body::Body;
use futures::TryStreamExt;
use k8s_openapi::api::authentication::v1::UserInfo;
use kube::core::admission::{AdmissionRequest, Operation};
use kube::core::{DynamicObject, GroupVersionKind, GroupVersionResource, TypeMeta};
use serde::Deserialize;

/// Small bodies: up to this size (by their `Content-Length`), parsed where they are read.
pub(super) const SMALL_BYTES: usize = 64 << 10;

/// Large bodies up to this size are parsed where they are read, in their large review's turn (4
/// at once, 2 an address): skipping what it does not keep, a padded 72 KB review's parse takes
/// 27 µs, less than the hop to the blocking pool and back on a busy machine (under attack: 117 µs
/// with the hop, p99 150 µs against 750 µs). The costliest JSON to skip (128 KiB of an array of
/// zeros) holds a worker about 0.7 ms, twice what a small review of the same make may.
pub(super) const INLINE_PARSE_BYTES: usize = 128 << 10;

/// Largest body read (then parsed on the blocking pool, in a large review's turn): over
/// kube-apiserver's own limit on a request (3 MiB) with the user's identity (its header limit,
/// 1 MiB) beside it.
pub(super) const MAX_LARGE_BYTES: usize = 8 << 20;

/// The only AdmissionReview version the webhooks are registered for.
pub(super) const REVIEW_API_VERSION: &str = "admission.k8s.io/v1";

/// What of an AdmissionReview is read.
#[derive(Deserialize)]
struct Envelope<O> {
    #[serde(rename = "apiVersion", default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    request: Option<Request<O>>,
}

/// What of its request is read (unknown fields are skipped unread).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Request<O> {
    uid: String,
    #[serde(default = "no_resource")]
    resource: GroupVersionResource,
    #[serde(default)]
    sub_resource: Option<String>,
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: Option<String>,
    operation: Operation,
    #[serde(default)]
    user_info: User,
    #[serde(default = "none")]
    object: Option<O>,
    #[serde(default)]
    dry_run: bool,
}

fn no_resource() -> GroupVersionResource {
    GroupVersionResource::gvr("", "", "")
}

fn none<O>() -> Option<O> {
    None
}

#[derive(Default, Deserialize)]
struct User {
    #[serde(default)]
    username: String,
}

/// The object of a review, skipped: what the guard reads of an eviction's review.
#[derive(Deserialize)]
pub(super) struct Skipped(serde::de::IgnoredAny);

/// The object of a review as the rulesets' door reads it: its name, and its spec as text (to be
/// measured before it is decoded).
#[derive(Deserialize)]
pub(super) struct Named<'a> {
    #[serde(default)]
    metadata: Metadata,
    #[serde(borrow, default)]
    spec: Option<&'a serde_json::value::RawValue>,
}

#[derive(Default, Deserialize)]
struct Metadata {
    #[serde(default)]
    name: Option<String>,
}

impl<O> Envelope<O> {
    /// The request, with its object made by `object`.
    fn request(
        self,
        object: impl FnOnce(O) -> Option<DynamicObject>,
    ) -> Result<AdmissionRequest<DynamicObject>, ReviewError> {
        if self.api_version != REVIEW_API_VERSION || self.kind != "AdmissionReview" {
            return Err(ReviewError::NotAReview {
                api_version: self.api_version,
                kind: self.kind,
            });
        }
        let r = self.request.ok_or(ReviewError::NoRequest)?;
        Ok(AdmissionRequest {
            types: TypeMeta {
                api_version: REVIEW_API_VERSION.to_owned(),
                kind: "AdmissionReview".to_owned(),
            },
            uid: r.uid,
            kind: GroupVersionKind::gvk("", "", ""),
            resource: r.resource,
            sub_resource: r.sub_resource,
            request_kind: None,
            request_resource: None,
            request_sub_resource: None,
            name: r.name,
            namespace: r.namespace,
            operation: r.operation,
            user_info: UserInfo {
                username: Some(r.user_info.username),
                ..UserInfo::default()
            },
            object: r.object.and_then(object),
            old_object: None,
            dry_run: r.dry_run,
            options: None,
        })
    }
}

/// The review in `bytes`, its object skipped.
pub(super) fn parse_skipping(bytes: &[u8]) -> Result<AdmissionRequest<DynamicObject>, ReviewError> {
    // serde_json's recursion limit bounds how deep anything may nest, skipped parts included.
    let envelope: Envelope<Skipped> = serde_json::from_slice(bytes).map_err(ReviewError::Json)?;
    envelope.request(|_| None)
}

/// The review in `bytes` with its object's name and spec (see [`Named`]), the spec decoded by
/// `spec` (which may leave it out, e.g. for its size).
pub(super) fn parse_named(
    bytes: &[u8],
    spec: impl FnOnce(&serde_json::value::RawValue) -> serde_json::Result<serde_json::Value>,
) -> Result<AdmissionRequest<DynamicObject>, ReviewError> {
    let envelope: Envelope<Named<'_>> = serde_json::from_slice(bytes).map_err(ReviewError::Json)?;
    let spec = match envelope.request.as_ref().and_then(|r| r.object.as_ref()) {
        Some(Named {
            spec: Some(raw), ..
        }) => Some(spec(raw).map_err(ReviewError::Json)?),
        _ => None,
    };
    envelope.request(|named| {
        let mut object = DynamicObject {
            types: None,
            metadata: Default::default(),
            data: serde_json::Value::Object(Default::default()),
        };
        object.metadata.name = named.metadata.name;
        if let Some(spec) = spec {
            object.data["spec"] = spec;
        }
        Some(object)
    })
}

/// Reads `body` whole, within `limit` bytes (refused as soon as it is over), into one buffer
/// made for its length when known (its `Content-Length`, within `limit`): each byte is copied
/// once.
pub(super) async fn read_whole(body: Body, limit: usize) -> Result<Vec<u8>, ReviewError> {
    let too_large = ReviewError::TooLarge { limit };
    let mut bytes = match axum::body::HttpBody::size_hint(&body).upper() {
        Some(n) if n > limit as u64 => return Err(too_large),
        Some(n) => Vec::with_capacity(n as usize),
        None => Vec::new(),
    };
    let mut body = body.into_data_stream();
    while let Some(chunk) = body
        .try_next()
        .await
        .map_err(|e| ReviewError::Body(e.into()))?
    {
        let needed = bytes.len() + chunk.len();
        if needed > limit {
            return Err(too_large);
        }
        if needed > bytes.capacity() {
            // Doubling, as a Vec grows, but never past the limit.
            let capacity = (2 * bytes.capacity()).clamp(needed, limit);
            bytes.reserve_exact(capacity - bytes.len());
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// The most of an eviction's review read: [`SMALL_BYTES`] when it says it is small (`large`
/// false), else [`MAX_LARGE_BYTES`].
pub(super) fn read_limit(large: bool) -> usize {
    if large { MAX_LARGE_BYTES } else { SMALL_BYTES }
}

/// Whether a review's body of `length` (if known) is large: read up to [`MAX_LARGE_BYTES`], and
/// parsed in a large review's turn.
pub(super) fn is_large(length: Option<u64>) -> bool {
    length.is_none_or(|n| n > SMALL_BYTES as u64)
}

/// Whether `request` is the creation of a pod's eviction (what the guard is registered for).
pub(super) fn is_eviction(request: &AdmissionRequest<DynamicObject>) -> bool {
    request.operation == Operation::Create
        && request.resource.group.is_empty()
        && request.resource.resource == "pods"
        && request.sub_resource.as_deref() == Some("eviction")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn eviction(padding: usize) -> Vec<u8> {
        json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "u-1",
                "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "subResource": "eviction",
                "name": "p", "namespace": "demo", "operation": "CREATE",
                "userInfo": {"username": "alice", "groups": vec!["g".repeat(60); padding / 64]},
                "object": {"apiVersion": "policy/v1", "kind": "Eviction",
                    "metadata": {"name": "p", "namespace": "demo",
                        "annotations": {"pad": "x".repeat(padding)}}},
                "oldObject": null,
                "dryRun": true,
            }
        })
        .to_string()
        .into_bytes()
    }

    fn check(request: &AdmissionRequest<DynamicObject>) {
        assert_eq!(request.uid, "u-1");
        assert_eq!(request.resource.resource, "pods");
        assert_eq!(request.sub_resource.as_deref(), Some("eviction"));
        assert_eq!(
            (request.namespace.as_deref(), request.name.as_str()),
            (Some("demo"), "p")
        );
        assert_eq!(request.operation, Operation::Create);
        assert_eq!(request.user_info.username.as_deref(), Some("alice"));
        assert!(request.dry_run, "dryRun comes after the object");
        assert!(request.object.is_none(), "the eviction is skipped");
    }

    /// A review read and parsed as the guard's door does (without its turns).
    async fn read_skipping(
        body: Body,
        length: Option<u64>,
    ) -> Result<AdmissionRequest<DynamicObject>, ReviewError> {
        parse_skipping(&read_whole(body, read_limit(is_large(length))).await?)
    }

    #[tokio::test]
    async fn an_eviction_is_read_whatever_its_size_and_however_it_arrives() {
        let small = eviction(100);
        let length = Some(small.len() as u64);
        check(&read_skipping(Body::from(small), length).await.unwrap());
        // 4 MB of annotations and groups, in pieces, its length unknown.
        let padded = eviction(2 << 20);
        assert!(padded.len() > 4_000_000);
        let pieces: Vec<Result<Vec<u8>, std::io::Error>> =
            padded.chunks(16 << 10).map(|c| Ok(c.to_vec())).collect();
        let body = Body::from_stream(futures::stream::iter(pieces));
        check(&read_skipping(body, None).await.unwrap());
    }

    /// A body without a length grows its buffer as a Vec does, but never past its limit.
    #[tokio::test]
    async fn a_body_of_unknown_length_takes_no_more_than_its_limit() {
        let limit = 100_000;
        let pieces: Vec<Result<Vec<u8>, std::io::Error>> =
            (0..limit / 1000).map(|_| Ok(vec![b' '; 1000])).collect();
        let body = Body::from_stream(futures::stream::iter(pieces));
        let bytes = read_whole(body, limit).await.unwrap();
        assert_eq!(bytes.len(), limit);
        assert!(bytes.capacity() <= limit, "{}", bytes.capacity());
    }

    #[tokio::test]
    async fn a_body_over_what_kube_apiserver_can_send_is_refused() {
        let huge = eviction(MAX_LARGE_BYTES);
        let length = Some(huge.len() as u64);
        assert!(matches!(
            read_skipping(Body::from(huge.clone()), length).await,
            Err(ReviewError::TooLarge { .. })
        ));
        // Without a length, refused as soon as it is over.
        let pieces: Vec<Result<Vec<u8>, std::io::Error>> =
            huge.chunks(16 << 10).map(|c| Ok(c.to_vec())).collect();
        assert!(matches!(
            read_skipping(Body::from_stream(futures::stream::iter(pieces)), None).await,
            Err(ReviewError::TooLarge { .. })
        ));
        // A small length is held to the small bound.
        assert!(matches!(
            read_skipping(Body::from(eviction(SMALL_BYTES)), Some(100)).await,
            Err(ReviewError::TooLarge { limit }) if limit == SMALL_BYTES
        ));
        assert!(matches!(
            read_skipping(Body::from("{\"apiVersion\": [}"), None).await,
            Err(ReviewError::Json(_))
        ));
    }
}
