//! A target followed as the server follows it (discovery, its list and watch, evaluation in its
//! lanes) against the mock kube-apiserver: what a user sees of it, the operations served and
//! whether answers say detection is current.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::super::{InitialList, Liveness, Watches};
use crate::detect::{Detector, Health, Limits, WatchState};
use crate::evaluate::Engine;
use crate::index::{Index, IndexReader};
use crate::mock_apiserver::{self, Asked, End, MockApiServer, Reply, event, list, watch_expired};
use crate::readiness::Readiness;
use crate::ruleset::CompiledRuleSet;
use crate::track::{Settings, Tracker};

/// The ruleset `busy`: an operation `Busy` on every thing whose `status.busy` is true.
fn busy_ruleset() -> Arc<CompiledRuleSet> {
    let spec = serde_json::from_value(json!({
        "component": "test",
        "target": {"group": "example.com", "version": "v1", "resource": "things"},
        "rules": [{"operation": "Busy", "expression": "object.?status.?busy.orValue(false)"}],
    }))
    .unwrap();
    Arc::new(crate::ruleset::compile(&Engine::new(), "busy", Some(1), &spec).unwrap())
}

/// A thing named `name`, busy or not, at `resource_version`.
fn thing(name: &str, busy: bool, resource_version: u32) -> Value {
    json!({
        "apiVersion": "example.com/v1",
        "kind": "Thing",
        "metadata": {
            "name": name,
            "namespace": "a",
            "uid": format!("uid-{name}"),
            "resourceVersion": resource_version.to_string(),
        },
        "status": {"busy": busy},
    })
}

/// Discovery of `example.com/v1`: it serves `things`.
fn discovery() -> Reply {
    Reply::Object(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": "example.com/v1",
        "resources": [{
            "name": "things",
            "singularName": "thing",
            "namespaced": true,
            "kind": "Thing",
            "verbs": ["get", "list", "watch"],
        }],
    }))
}

/// What a user sees of the target.
struct Seen {
    index: IndexReader,
    health: Arc<Health>,
    _watches: Watches,
}

impl Seen {
    /// The things with a `Busy` operation served.
    fn busy(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .index
            .snapshot()
            .items
            .iter()
            .map(|s| s.op.subject.name.clone())
            .collect();
        names.sort();
        names
    }

    /// What answers warn of (empty: detection is current).
    fn warnings(&self) -> Vec<String> {
        self.health
            .reader()
            .stale(None)
            .iter()
            .map(|s| s.reason.to_string())
            .collect()
    }

    /// What the ruleset's status says of its watch.
    fn watch(&self) -> WatchState {
        self.health.reader().ruleset("busy").watch
    }

    /// Waits (on the test's clock) until `done` holds.
    async fn until(&self, what: &str, done: impl Fn(&Seen) -> bool) {
        mock_apiserver::until(
            Duration::from_secs(120),
            || done(self),
            || {
                format!(
                    "not {what}: busy {:?}, warnings {:?}, watch {:?}",
                    self.busy(),
                    self.warnings(),
                    self.watch()
                )
            },
        )
        .await;
    }
}

/// The ruleset `busy` followed against `script` (which answers what is not discovery).
fn follow(
    initial: InitialList,
    mut script: impl FnMut(&Asked) -> Reply + Send + 'static,
) -> (Seen, MockApiServer) {
    let (client, api) = MockApiServer::start(move |asked| {
        if asked.info.path == "/apis/example.com/v1" {
            discovery()
        } else {
            script(asked)
        }
    });
    let handles = Index::new(1, 1000, 100).into_handles();
    let health = Arc::new(Health::default());
    let detector = Arc::new(Detector::new(
        Tracker::new(Settings {
            debounce: jiff::SignedDuration::ZERO,
            retain_completed: false,
            completed_retention: jiff::SignedDuration::ZERO,
            max_completed: 0,
        }),
        handles.writer,
        health.clone(),
        Limits::default(),
    ));
    let rs = busy_ruleset();
    detector.ruleset_loaded("busy", Some(1));
    let (readiness, _started) = Readiness::new("the test");
    let watches = Watches::new(
        client,
        detector,
        health.clone(),
        Duration::from_secs(5),
        initial,
        Liveness {
            probe_interval: Duration::from_secs(3600),
            probe_timeout: Duration::from_secs(10),
        },
        readiness,
    );
    let _ = watches.restart(BTreeMap::from([(rs.target.clone(), vec![rs])]));
    let seen = Seen {
        index: handles.reader,
        health,
        _watches: watches,
    };
    (seen, api)
}

/// A watch that expired (410) is listed again, and what changed while it was behind is seen:
/// the operation of a thing deleted meanwhile ends, that of a thing that went busy starts, and
/// detection is current again without a failure said on the ruleset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_watch_is_listed_again_and_what_changed_meanwhile_is_seen() {
    let (seen, api) = follow(InitialList::Paged, |asked| match asked.verb() {
        "list" => {
            let things = if asked.count("list") == 1 {
                vec![
                    thing("t1", true, 3),
                    thing("t2", true, 4),
                    thing("t3", false, 5),
                ]
            } else {
                vec![thing("t1", true, 3), thing("t3", true, 12)]
            };
            Reply::Object(list("ThingList", "20", None, things))
        }
        _ if asked.count("list") == 1 => Reply::Watch(vec![watch_expired()], End::Open),
        _ => Reply::Watch(Vec::new(), End::Open),
    });
    seen.until("listed again", |s| s.busy() == ["t1", "t3"])
        .await;
    seen.until("current", |s| s.warnings().is_empty()).await;
    assert_eq!(seen.watch(), WatchState::Active);
    assert_eq!(api.verbs()[1..], ["list", "watch", "list", "watch"]);
}

/// A watch whose connection breaks makes detection of the target not current, said in answers
/// and on the ruleset's status, while the operations seen stay served; after the backoff the
/// target is listed afresh, and is current again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_stream_is_said_until_the_target_is_listed_again() {
    let (seen, api) = follow(InitialList::Paged, |asked| match asked.verb() {
        "list" => {
            let mut things = vec![thing("t1", true, 3)];
            if asked.count("list") > 1 {
                things.push(thing("t2", true, 9));
            }
            Reply::Object(list("ThingList", "10", None, things))
        }
        _ if asked.count("list") == 1 => {
            Reply::Watch(vec![event("MODIFIED", thing("t1", true, 6))], End::Cut)
        }
        _ => Reply::Watch(Vec::new(), End::Open),
    });
    // What the list gave is evaluated (its lanes go on) while the watch fails.
    seen.until("failed, what was seen served", |s| {
        matches!(s.watch(), WatchState::Failed(_)) && s.busy() == ["t1"]
    })
    .await;
    let WatchState::Failed(why) = seen.watch() else {
        unreachable!()
    };
    assert!(why.starts_with("watch failed: "), "{why}");
    let warnings = seen.warnings();
    assert!(
        warnings.len() == 1 && warnings[0].contains(&why),
        "{warnings:?}"
    );

    seen.until("listed again", |s| s.busy() == ["t1", "t2"])
        .await;
    seen.until("current", |s| s.warnings().is_empty()).await;
    assert_eq!(seen.watch(), WatchState::Active);
    assert_eq!(api.count("list"), 2);
}

/// A list in pages is evaluated whole before the target is current: the things of every page
/// have their operations; and an API server that refuses streaming lists (422) is listed in
/// pages without a failure said anywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_in_pages_after_a_refused_stream_is_evaluated_whole() {
    let (seen, api) = follow(InitialList::Streaming, |asked| {
        match (asked.verb(), asked.param("continue")) {
            ("watch", _) if asked.param("sendInitialEvents").is_some() => Reply::Status(422),
            ("list", None) => Reply::Object(list(
                "ThingList",
                "10",
                Some("page-2"),
                vec![thing("t1", true, 3), thing("t2", false, 4)],
            )),
            ("list", Some(_)) => {
                Reply::Object(list("ThingList", "10", None, vec![thing("t3", true, 5)]))
            }
            _ => Reply::Watch(Vec::new(), End::Open),
        }
    });
    seen.until("active", |s| s.watch() == WatchState::Active)
        .await;
    assert_eq!(
        seen.busy(),
        ["t1", "t3"],
        "every page evaluated once current"
    );
    assert!(seen.warnings().is_empty(), "{:?}", seen.warnings());
    assert_eq!(api.verbs()[1..4], ["watch", "list", "list"]);
}
