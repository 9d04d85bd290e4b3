//! List bodies written a chunk of items at a time. The envelope (kind, apiVersion, metadata, a
//! Table's column definitions) is serialised with an empty item array, which is its last field,
//! and the items follow as the client reads: a list of 10,000 operations never sits in memory
//! as one body, and the runtime is never held for the whole of it. Small lists go out as one
//! body, written by the same code.

use super::negotiate;
use axum::body::Body;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::Serialize;
use std::sync::Arc;

use crate::index::Stored;

/// Items written per chunk (and the most a list may have to go out as one body).
pub(super) const CHUNK: usize = 500;

/// Writes one item's JSON.
pub(super) trait WriteItem: Fn(&Stored, &mut Vec<u8>) + Send + 'static {}
impl<F: Fn(&Stored, &mut Vec<u8>) + Send + 'static> WriteItem for F {}

/// Writes `value`'s JSON to `out` (the wire types only have string keys: this cannot fail).
pub(super) fn write_json(out: &mut Vec<u8>, value: &impl Serialize) {
    if let Err(e) = serde_json::to_writer(out, value) {
        tracing::error!(error = %e, "serialising a list item failed");
    }
}

/// The list response of `envelope` (serialised with an empty last array) with `items` written
/// by `write` in its last array.
pub(super) fn respond(
    envelope: &impl Serialize,
    items: Vec<Arc<Stored>>,
    write: impl WriteItem,
    size: ItemSize,
) -> Response {
    let mut head = serde_json::to_vec(envelope).unwrap_or_default();
    // `…[]}`: keep up to and including `[`; `]}` closes the body after the items.
    if !head.ends_with(b"[]}") {
        tracing::error!("a list envelope does not end with its item array");
        return super::status::ApiError::internal("list envelope").into_response();
    }
    head.truncate(head.len() - 2);
    let body = if items.len() <= CHUNK {
        let mut out = head;
        write_items(&items, 0, &write, size, &mut out);
        out.extend_from_slice(b"]}");
        Body::from(out)
    } else {
        let count = items.len();
        let chunks = (0..count).step_by(CHUNK).map(move |start| {
            let mut out = Vec::new();
            write_items(
                &items[start..(start + CHUNK).min(count)],
                start,
                &write,
                size,
                &mut out,
            );
            Ok::<_, std::convert::Infallible>(Bytes::from(out))
        });
        let all = std::iter::once(Ok(Bytes::from(head)))
            .chain(chunks)
            .chain(std::iter::once(Ok(Bytes::from_static(b"]}"))));
        Body::from_stream(futures::stream::iter(all))
    };
    ([(header::CONTENT_TYPE, negotiate::APPLICATION_JSON)], body).into_response()
}

/// How many bytes `write` adds for an item, where that is known before it is written (an
/// object written as it is stored); `None` where it is not (rows, metadata).
pub(super) type ItemSize = Option<fn(&Stored) -> usize>;

/// Writes `items`, the first being item number `first` of the list (commas between items).
/// Where their sizes are known, the room for all of them is made at once: a chunk of large
/// objects is not grown and copied again and again as it is written.
fn write_items(
    items: &[Arc<Stored>],
    first: usize,
    write: &impl WriteItem,
    size: ItemSize,
    out: &mut Vec<u8>,
) {
    if let Some(size) = size {
        out.reserve(items.iter().map(|item| size(item) + 1).sum());
    }
    for (i, stored) in items.iter().enumerate() {
        if first + i > 0 {
            out.push(b',');
        }
        write(stored, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::wire::{List, ListMeta};
    use futures::StreamExt;

    /// The body's data frames, counted, and their bytes.
    async fn body_of(response: Response) -> (usize, Vec<u8>) {
        let mut frames = 0;
        let mut data = response.into_body().into_data_stream();
        let mut out = Vec::new();
        while let Some(chunk) = data.next().await {
            frames += 1;
            out.extend_from_slice(&chunk.unwrap());
        }
        (frames, out)
    }

    fn list(
        items: Vec<&serde_json::value::RawValue>,
    ) -> List<'static, &serde_json::value::RawValue> {
        List {
            kind: "InFlightOperationList",
            api_version: "live.ifo.kubevirt.io/v1alpha1",
            metadata: ListMeta {
                resource_version: "7".into(),
                continue_token: Some("abc".into()),
            },
            items,
        }
    }

    #[tokio::test]
    async fn chunked_and_whole_bodies_are_the_same_json() {
        for n in [0, 1, CHUNK, CHUNK + 1, 3 * CHUNK + 7] {
            let stored: Vec<Arc<Stored>> = (0..n)
                .map(|i| {
                    Arc::new(Stored::new(
                        7,
                        crate::operation::test_record(&format!("s{i}")),
                    ))
                })
                .collect();
            let whole =
                serde_json::to_vec(&list(stored.iter().map(|s| s.object()).collect())).unwrap();
            // Written with the room for the items made at once, and grown as they come.
            let sized: fn(&Stored) -> usize = |s| s.object().get().len();
            for size in [Some(sized), None] {
                let response = respond(
                    &list(Vec::new()),
                    stored.clone(),
                    |s, out| out.extend_from_slice(s.object().get().as_bytes()),
                    size,
                );
                let (frames, body) = body_of(response).await;
                assert_eq!(
                    String::from_utf8(body).unwrap(),
                    String::from_utf8(whole.clone()).unwrap(),
                    "{n} items, sized: {}",
                    size.is_some()
                );
                let want_frames = if n <= CHUNK { 1 } else { n.div_ceil(CHUNK) + 2 };
                assert_eq!(frames, want_frames, "{n} items");
            }
        }
    }
}
