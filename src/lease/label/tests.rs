use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::watch;

use super::*;
use crate::mock_apiserver::{Asked, MockApiServer, Reply, list};

/// The name of the object a request addresses.
fn name(asked: &Asked) -> String {
    asked
        .info
        .resource
        .as_ref()
        .and_then(|r| r.name.clone())
        .unwrap_or_default()
}

/// The labels each patch of the pod `me` set (null: removed), in order.
fn patches(asked: &[Asked]) -> Vec<Value> {
    asked
        .iter()
        .filter(|a| a.verb() == "patch" && name(a) == "me")
        .map(|a| a.body.clone().unwrap()["metadata"]["labels"].clone())
        .collect()
}

fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ifo-system"}})
}

/// Marks `me` as its role goes: from `first`, each of `then` after its pause, then the
/// election stopped a moment later; what its pod was patched with.
async fn marks_through(first: Role, then: &[(Duration, Role)]) -> Vec<Value> {
    let (client, mock) = MockApiServer::start(|asked| match asked.verb() {
        "patch" => Reply::Object(pod(&name(asked))),
        "list" => Reply::Object(list("PodList", "1", None, vec![])),
        _ => Reply::Status(404),
    });
    let label = LeaderLabel::new(client, "ifo-system", "me", "ifo-apiserver");
    let (role, receiver) = watch::channel(first);
    let following = tokio::spawn(label.follow(receiver));
    for (pause, next) in then {
        tokio::time::sleep(*pause).await;
        role.send_replace(*next);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(role);
    following.await.unwrap();
    patches(&mock.asked())
}

/// A moment.
const NOW: Duration = Duration::from_millis(100);

/// [`marks_through`] a standby that leads a moment, then is `then`.
async fn leads_then(then: Role) -> Vec<Value> {
    marks_through(Role::Following, &[(NOW, Role::Leading), (NOW, then)]).await
}

/// A leader that steps down (another replica won the Lease) takes the leader's mark off its pod
/// at once, and a stopped election leaves the pod unmarked.
#[tokio::test(start_paused = true)]
async fn a_leader_that_steps_down_leaves_the_leaders_service() {
    let patched = leads_then(Role::Following).await;
    let leader = |labels: &Value| labels[LEADER_LABEL] == "true";
    assert_eq!(patched.len(), 4, "{patched:?}");
    assert!(!leader(&patched[0]) && patched[0][STANDBY_LABEL] == "true");
    assert!(leader(&patched[1]) && patched[1][STANDBY_LABEL] == "true");
    assert!(!leader(&patched[2]) && patched[2][STANDBY_LABEL] == "true");
    assert!(!leader(&patched[3]) && patched[3][STANDBY_LABEL].is_null());
}

/// A leader handing over on shutdown keeps the leader's mark, also once its election stopped:
/// the Service keeps an endpoint (the terminating pod, answering 503 with Retry-After) until the
/// next leader takes the mark from it.
#[tokio::test(start_paused = true)]
async fn a_leader_handing_over_keeps_the_leaders_mark_for_the_next_one_to_take() {
    let patched = leads_then(Role::HandingOver).await;
    assert_eq!(patched.len(), 2, "{patched:?}");
    assert_eq!(patched[1][LEADER_LABEL], "true");
    // And after the standby overlap (leader only), the same.
    let overlap = STANDBY_OVERLAP + Duration::from_secs(1);
    let patched = marks_through(Role::Leading, &[(overlap, Role::HandingOver)]).await;
    let last = patched.last().unwrap();
    assert_eq!(last[LEADER_LABEL], "true", "{patched:?}");
    assert!(last[STANDBY_LABEL].is_null(), "{patched:?}");
}
