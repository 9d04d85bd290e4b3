use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::inventory::{Inventory, Kind, Presence};
use crate::mock_apiserver::{
    self, Asked, End, MockApiServer, Reply, event, list, two_pages, watch_expired,
};

fn namespace(name: &str, resource_version: u32) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": name,
            "uid": format!("uid-{name}"),
            "resourceVersion": resource_version.to_string(),
        },
    })
}

/// An inventory keeping the cluster's namespaces from `script`.
fn follow(script: impl FnMut(&Asked) -> Reply + Send + 'static) -> (Arc<Inventory>, MockApiServer) {
    let (client, api) = MockApiServer::start(script);
    let inventory = Arc::new(Inventory::default());
    tokio::spawn(inventory.clone().follow(client, Kind::Namespace));
    (inventory, api)
}

/// Waits until `name` is `presence`, on the test's clock; returns how long that took.
async fn until(
    inventory: &Inventory,
    name: &str,
    presence: impl Fn(&Presence) -> bool,
) -> Duration {
    let start = Instant::now();
    mock_apiserver::until(
        Duration::from_secs(600),
        || presence(&inventory.presence(Kind::Namespace, name)),
        || {
            format!(
                "{name} still {:?} after ten minutes",
                inventory.presence(Kind::Namespace, name)
            )
        },
    )
    .await;
    start.elapsed()
}

/// The names are those of every page of the list, then of what the watch says: a namespace
/// created is there, a namespace deleted is gone, and a name the cluster never had is absent
/// (its gate a 404), not unknown.
#[tokio::test(start_paused = true)]
async fn the_names_are_the_pages_listed_then_what_the_watch_says() {
    let (inventory, api) = follow(|asked| {
        let (first, rest) = (
            vec![namespace("a", 3), namespace("b", 4)],
            vec![namespace("c", 5)],
        );
        two_pages(asked, "NamespaceList", "9", first, rest).unwrap_or_else(|| {
            let events = vec![
                event("ADDED", namespace("d", 10)),
                event("DELETED", namespace("a", 11)),
            ];
            Reply::Watch(events, End::Open)
        })
    });
    until(&inventory, "d", |p| *p == Presence::Present).await;
    inventory.assert_presences(
        Kind::Namespace,
        &[
            ("a", Presence::Absent),
            ("b", Presence::Present),
            ("c", Presence::Present),
            ("typo", Presence::Absent),
        ],
    );
    assert_eq!(api.verbs(), ["list", "list", "watch"]);
    assert_eq!(api.asked()[2].param("resourceVersion"), Some("9"));
}

/// A watch that expired (410) is listed again at once, and the new list replaces the names: a
/// namespace deleted while the watch was behind is gone. That is routine: no name turns unknown.
#[tokio::test(start_paused = true)]
async fn an_expired_watch_is_listed_again_and_the_list_replaces_the_names() {
    let (inventory, api) = follow(|asked| match asked.verb() {
        "list" => {
            let names = if asked.count("list") == 1 {
                vec![namespace("a", 3), namespace("b", 4)]
            } else {
                vec![namespace("b", 4)]
            };
            Reply::Object(list("NamespaceList", "9", None, names))
        }
        _ if asked.count("list") == 1 => Reply::Watch(vec![watch_expired()], End::Open),
        _ => Reply::Watch(Vec::new(), End::Open),
    });
    let took = until(&inventory, "a", |p| *p == Presence::Absent).await;
    assert!(
        took < Duration::from_secs(1),
        "listed again at once: {took:?}"
    );
    inventory.assert_presences(
        Kind::Namespace,
        &[("b", Presence::Present), ("typo", Presence::Absent)],
    );
    assert_eq!(api.verbs()[..3], ["list", "watch", "list"]);
}

/// A watch cut, or a list refused (403: the ClusterRole lost `list namespaces`), makes the
/// names not current: a name not held is unknown, saying why (its gate `Unknown`, never a 404),
/// while the names held stay present; the list is tried again after a backoff that doubles
/// (1 s, 2 s, 4 s), and once it completes the names are current again.
#[tokio::test(start_paused = true)]
async fn a_failing_watch_makes_names_unknown_and_is_listed_again_after_a_backoff() {
    // The first watch is cut; the lists after it are refused until the test says otherwise.
    let refusing = Arc::new(Mutex::new(None));
    let (inventory, api) = follow({
        let refusing = refusing.clone();
        move |asked| match (asked.verb(), *refusing.lock()) {
            ("list", Some(true)) => Reply::Status(403),
            ("list", _) => Reply::Object(list("NamespaceList", "9", None, vec![namespace("a", 3)])),
            (_, None) => Reply::Watch(Vec::new(), End::Cut),
            _ => Reply::Watch(Vec::new(), End::Open),
        }
    });
    until(
        &inventory,
        "typo",
        |p| matches!(p, Presence::Unknown(why) if why.contains("failing")),
    )
    .await;
    let cut = Instant::now();
    *refusing.lock() = Some(true);
    inventory.assert_presences(
        Kind::Namespace,
        &[
            (
                "typo",
                Presence::Unknown(
                    "the watch of the cluster's namespaces is failing: watch failed: Error reading events stream: ServiceError: connection reset"
                        .into(),
                ),
            ),
            // Held as of the last list.
            ("a", Presence::Present),
        ],
    );

    let mut lists_at = Vec::new();
    for n in 2..=4 {
        api.asked_for("list", n).await;
        lists_at.push(cut.elapsed().as_millis().div_ceil(1000));
    }
    assert_eq!(lists_at, [1, 3, 7], "listed again after (s)");
    let Presence::Unknown(why) = inventory.presence(Kind::Namespace, "typo") else {
        panic!("unknown while the list is refused");
    };
    assert!(why.contains("list failed"), "{why}");

    *refusing.lock() = Some(false);
    let took = until(&inventory, "typo", |p| *p == Presence::Absent).await;
    assert!(
        took <= Duration::from_secs(8),
        "listed again after 8 s: {took:?}"
    );
}
