use kube::core::{ApiResource, GroupVersionKind, Status};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::*;
use crate::mock_apiserver::{
    Asked, End, MockApiServer, Reply, event, initial_events_end, list, two_pages, watch_expired,
};

fn status(code: u16) -> Box<Status> {
    Status::failure("sendInitialEvents is forbidden", "Invalid")
        .with_code(code)
        .boxed()
}

/// An API server without WatchList refuses the streaming watch as it starts (422, or 400
/// where the parameter is not understood): that turns the stream to pages. Other failures
/// (forbidden, gone, unavailable) are what any list would meet, and keep streaming.
#[test]
fn only_a_refused_streaming_watch_turns_to_pages() {
    for code in [422, 400] {
        assert!(streaming_refused(&watcher::Error::WatchStartFailed(
            kube::Error::Api(status(code))
        )));
        assert!(streaming_refused(&watcher::Error::WatchError(status(code))));
    }
    for code in [403, 404, 410, 429, 500, 503] {
        assert!(!streaming_refused(&watcher::Error::WatchStartFailed(
            kube::Error::Api(status(code))
        )));
        assert!(!streaming_refused(&watcher::Error::WatchError(status(
            code
        ))));
    }
    assert!(!streaming_refused(&watcher::Error::NoResourceVersion));
}

/// A VirtualMachine named `name`, as kube-apiserver sends it at `resource_version`.
fn vm(name: &str, resource_version: u32) -> Value {
    json!({
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {
            "name": name,
            "namespace": "vms",
            "uid": format!("uid-{name}"),
            "resourceVersion": resource_version.to_string(),
        },
    })
}

/// The stream of VirtualMachines in `vms` as the watcher follows it, against `script`.
fn stream(
    initial: InitialList,
    script: impl FnMut(&Asked) -> Reply + Send + 'static,
) -> (Events, MockApiServer) {
    let (client, api) = MockApiServer::start(script);
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "kubevirt.io",
        "v1",
        "VirtualMachine",
    ));
    let vms = Api::namespaced_with(client, "vms", &ar);
    (relisting(vms, Arc::new(Notify::new()), initial), api)
}

/// What the first `n` items of `events` say, each with when it came (whole seconds of the
/// test's clock from the start).
async fn first(events: &mut Events, n: usize) -> Vec<(u64, String)> {
    let start = Instant::now();
    let mut seen = Vec::new();
    while seen.len() < n {
        let next = tokio::time::timeout(Duration::from_secs(600), events.next())
            .await
            .unwrap_or_else(|_| panic!("only {seen:?} in ten minutes"))
            .expect("the stream goes on");
        let name = |o: &Object| o.metadata.name.clone().unwrap_or_default();
        let said = match next {
            Ok(watcher::Event::Init) => "list".to_owned(),
            Ok(watcher::Event::InitApply(o)) => format!("listed {}", name(&o)),
            Ok(watcher::Event::InitDone) => "listed".to_owned(),
            Ok(watcher::Event::Apply(o)) => format!("applied {}", name(&o)),
            Ok(watcher::Event::Delete(o)) => format!("deleted {}", name(&o)),
            Err(e) if expired(&e) => "expired".to_owned(),
            Err(e) => format!("failed: {}", watch_error_message(&e)),
        };
        seen.push((start.elapsed().as_secs(), said));
    }
    seen
}

/// What each request asked: `list`, `list continue=<token>`, `watch from <rv>` or `watch
/// streaming`.
fn asked(api: &MockApiServer) -> Vec<String> {
    api.asked()
        .iter()
        .map(
            |a| match (a.verb(), a.param("continue"), a.param("sendInitialEvents")) {
                ("list", Some(token), _) => format!("list continue={token}"),
                ("list", None, _) => format!("list limit={}", a.param("limit").unwrap_or_default()),
                ("watch", _, Some("true")) => "watch streaming".to_owned(),
                ("watch", _, _) => format!(
                    "watch from {}",
                    a.param("resourceVersion").unwrap_or_default()
                ),
                (verb, _, _) => verb.to_owned(),
            },
        )
        .collect()
}

fn said(items: &[(u64, String)]) -> Vec<&str> {
    items.iter().map(|(_, s)| s.as_str()).collect()
}

/// The script of an API server that answers a streaming list with `streamed()` and a list with
/// `listed()` at resourceVersion 5; the watches after it stay open, sending nothing.
fn streamed_or_listed(
    streamed: impl Fn() -> Reply + Send + 'static,
    listed: impl Fn() -> Vec<Value> + Send + 'static,
) -> impl FnMut(&Asked) -> Reply + Send + 'static {
    move |asked| match (asked.verb(), asked.param("sendInitialEvents")) {
        ("watch", Some("true")) => streamed(),
        ("list", _) => Reply::Object(list("VirtualMachineList", "5", None, listed())),
        _ => Reply::Watch(Vec::new(), End::Open),
    }
}

/// A watch whose resourceVersion expired (410 Gone in the stream) is listed again at once, with
/// no backoff (it is routine), and what changed meanwhile is in the new list.
#[tokio::test(start_paused = true)]
async fn an_expired_watch_is_listed_again_at_once() {
    let mut lists = 0;
    let (mut events, api) = stream(InitialList::Streaming, move |asked| {
        lists += 1;
        match lists {
            1 => Reply::Watch(
                vec![
                    event("ADDED", vm("a", 4)),
                    initial_events_end("kubevirt.io/v1", "VirtualMachine", "5"),
                    event("MODIFIED", vm("a", 6)),
                    watch_expired(),
                ],
                End::Open,
            ),
            _ => {
                assert_eq!(asked.param("sendInitialEvents"), Some("true"));
                Reply::Watch(
                    vec![
                        event("ADDED", vm("b", 9)),
                        initial_events_end("kubevirt.io/v1", "VirtualMachine", "9"),
                    ],
                    End::Open,
                )
            }
        }
    });
    let seen = first(&mut events, 8).await;
    assert_eq!(
        said(&seen),
        [
            "list",
            "listed a",
            "listed",
            "applied a",
            "expired",
            "list",
            "listed b",
            "listed"
        ]
    );
    assert_eq!(seen[7].0, 0, "listed again at once: {seen:?}");
    assert_eq!(asked(&api), ["watch streaming", "watch streaming"]);
}

/// A watch whose connection breaks is a failure: reported, then the stream starts over with a
/// fresh list after the backoff (1 s, then 2 s), never resuming a watch that may have missed
/// events.
#[tokio::test(start_paused = true)]
async fn a_cut_stream_is_reported_and_listed_again_after_a_backoff() {
    let (mut events, api) = stream(InitialList::Paged, |asked| match asked.verb() {
        "list" => Reply::Object(list("VirtualMachineList", "5", None, vec![vm("a", 4)])),
        _ => Reply::Watch(vec![event("MODIFIED", vm("a", 6))], End::Cut),
    });
    let seen = first(&mut events, 15).await;
    let once = ["list", "listed a", "listed", "applied a"];
    assert_eq!(&said(&seen)[..4], once);
    assert!(seen[4].1.starts_with("failed: watch failed"), "{seen:?}");
    assert_eq!(said(&seen)[5..9], once, "{seen:?}");
    assert_eq!(seen[5].0, 1, "after 1 s: {seen:?}");
    assert!(seen[9].1.starts_with("failed: watch failed"), "{seen:?}");
    assert_eq!(seen[10].0, 3, "after 2 s more: {seen:?}");
    assert_eq!(
        asked(&api)[..4],
        [
            "list limit=500",
            "watch from 5",
            "list limit=500",
            "watch from 5"
        ]
    );
}

/// A list in pages asks for each next page with the token of the one before, passes on every
/// page's objects as one list, and watches from the last page's resourceVersion.
#[tokio::test(start_paused = true)]
async fn a_paged_list_reads_every_page_then_watches_from_its_end() {
    let (mut events, api) = stream(InitialList::Paged, |asked| {
        let (first, rest) = (vec![vm("a", 3), vm("b", 4)], vec![vm("c", 5)]);
        two_pages(asked, "VirtualMachineList", "7", first, rest)
            .unwrap_or_else(|| Reply::Watch(vec![event("DELETED", vm("b", 8))], End::Open))
    });
    let seen = first(&mut events, 6).await;
    assert_eq!(
        said(&seen),
        [
            "list",
            "listed a",
            "listed b",
            "listed c",
            "listed",
            "deleted b"
        ]
    );
    assert_eq!(
        asked(&api),
        ["list limit=500", "list continue=page-2", "watch from 7"]
    );
}

/// An API server that refuses streaming lists (422: WatchList off) is listed in pages from then
/// on, without a failure reported or a backoff.
#[tokio::test(start_paused = true)]
async fn a_refused_streaming_list_turns_to_pages_at_once() {
    let (mut events, api) = stream(
        InitialList::Streaming,
        streamed_or_listed(|| Reply::Status(422), || vec![vm("a", 4)]),
    );
    let seen = first(&mut events, 3).await;
    assert_eq!(said(&seen), ["list", "listed a", "listed"]);
    assert_eq!(seen[2].0, 0);
    // Then the watch that follows the list.
    tokio::select! {
        _ = events.next() => panic!("the watch sends nothing"),
        () = api.asked_for("watch", 2) => {}
    }
    assert_eq!(
        asked(&api),
        ["watch streaming", "list limit=500", "watch from 5"]
    );
}

/// A streaming list that sends some objects and then nothing for a minute without ending (an
/// API server that ignores `sendInitialEvents`) is listed in pages instead: the list starts
/// over, and ends.
#[tokio::test(start_paused = true)]
async fn a_streaming_list_that_never_ends_turns_to_pages_after_a_minute() {
    let (mut events, api) = stream(
        InitialList::Streaming,
        streamed_or_listed(
            || Reply::Watch(vec![event("ADDED", vm("a", 4))], End::Open),
            || vec![vm("a", 4), vm("b", 5)],
        ),
    );
    let seen = first(&mut events, 6).await;
    assert_eq!(
        said(&seen),
        ["list", "listed a", "list", "listed a", "listed b", "listed"]
    );
    assert_eq!(seen[2].0, 60, "{seen:?}");
    assert_eq!(asked(&api)[..2], ["watch streaming", "list limit=500"]);
}
