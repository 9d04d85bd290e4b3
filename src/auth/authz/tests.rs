use std::error::Error as _;

use parking_lot::Mutex;
use serde_json::{Value, json};

use super::*;
use crate::mock_apiserver::{MockApiServer, Reply};

fn alice() -> UserInfo {
    UserInfo {
        name: "alice".into(),
        uid: Some("uid-alice".into()),
        groups: vec!["system:authenticated".into(), "team-a".into()],
        extra: Default::default(),
    }
}

fn list_in(namespace: &str) -> Attributes {
    Attributes::Resource {
        verb: "list".into(),
        group: "live.ifo.kubevirt.io".into(),
        version: "v1alpha1".into(),
        resource: "inflightoperations".into(),
        subresource: None,
        namespace: Some(namespace.into()),
        name: None,
    }
}

/// kube-apiserver's answer to a review: the review back, with its status.
fn answered(review: &Value, allowed: bool, reason: &str) -> Reply {
    let mut review = review.clone();
    review["status"] = json!({"allowed": allowed, "reason": reason});
    Reply::Object(review)
}

/// A review kube-apiserver fails (500), or does not answer in time, fails the request with an
/// error that keeps kube's (so that the 500 the caller gets says why); it is not cached: the
/// next request is reviewed again, and allowed.
#[tokio::test]
async fn a_failed_review_is_an_error_that_keeps_its_cause_and_is_not_cached() {
    let replies = Arc::new(Mutex::new(vec![
        Some(Reply::Status(500)),
        Some(Reply::NoAnswer(Duration::from_millis(10))),
        None,
    ]));
    let (client, api) = MockApiServer::start(move |asked| {
        replies
            .lock()
            .remove(0)
            .unwrap_or_else(|| answered(asked.body.as_ref().unwrap(), true, "granted"))
    });
    let authorizer = Authorizer::new(client);

    let refused = authorizer
        .authorize(&alice(), &list_in("a"))
        .await
        .unwrap_err();
    let AuthzError::Review(cause) = &refused;
    assert!(
        matches!(&**cause, kube::Error::Api(s) if s.code == 500),
        "{cause:?}"
    );
    assert!(refused.source().is_some());
    let unanswered = authorizer
        .authorize(&alice(), &list_in("a"))
        .await
        .unwrap_err();
    assert!(
        unanswered.to_string().contains("did not answer"),
        "{unanswered}"
    );
    assert_eq!(
        authorizer.authorize(&alice(), &list_in("a")).await.unwrap(),
        Authorization::Allow
    );
    assert_eq!(api.verbs(), ["create", "create", "create"]);
}

/// What is reviewed is the request as kube-apiserver would see it: the user with its uid and
/// groups, the verb, the resource and the namespace. A denial carries the authorizer's reason.
/// `system:masters` is allowed without a review.
#[tokio::test]
async fn the_review_names_the_user_and_the_request_and_a_denial_its_reason() {
    let (client, api) = MockApiServer::start(|asked| {
        answered(
            asked.body.as_ref().unwrap(),
            false,
            "no RBAC policy matched",
        )
    });
    let authorizer = Authorizer::new(client);
    assert_eq!(
        authorizer.authorize(&alice(), &list_in("a")).await.unwrap(),
        Authorization::Deny("no RBAC policy matched".into())
    );
    let asked = api.asked();
    assert_eq!(
        asked[0].info.resource.as_ref().unwrap().resource,
        "subjectaccessreviews"
    );
    let spec = &asked[0].body.as_ref().unwrap()["spec"];
    assert_eq!(spec["user"], "alice");
    assert_eq!(spec["uid"], "uid-alice");
    assert_eq!(spec["groups"], json!(["system:authenticated", "team-a"]));
    assert_eq!(
        spec["resourceAttributes"],
        json!({
            "verb": "list",
            "group": "live.ifo.kubevirt.io",
            "version": "v1alpha1",
            "resource": "inflightoperations",
            "namespace": "a",
        })
    );

    let admin = UserInfo {
        name: "admin".into(),
        uid: None,
        groups: vec!["system:masters".into()],
        extra: Default::default(),
    };
    assert_eq!(
        authorizer.authorize(&admin, &list_in("a")).await.unwrap(),
        Authorization::Allow
    );
    assert_eq!(api.asked().len(), 1, "no review for system:masters");
}

/// An answer, allow or deny, is reused for the same user and request until it expires; then
/// the request is reviewed again, and a change of RBAC meanwhile is seen. Another request (of
/// another namespace) is reviewed on its own.
#[tokio::test]
async fn answers_are_cached_until_they_expire() {
    let allowed = Arc::new(Mutex::new(false));
    let (client, api) = MockApiServer::start({
        let allowed = allowed.clone();
        move |asked| answered(asked.body.as_ref().unwrap(), *allowed.lock(), "")
    });
    let ttl = Duration::from_millis(300);
    let authorizer = Authorizer::caching_for(client, ttl);
    for _ in 0..5 {
        assert_eq!(
            authorizer.authorize(&alice(), &list_in("a")).await.unwrap(),
            Authorization::Deny(String::new())
        );
    }
    assert_eq!(api.asked().len(), 1, "one review for five requests");

    *allowed.lock() = true;
    assert_eq!(
        authorizer.authorize(&alice(), &list_in("a")).await.unwrap(),
        Authorization::Deny(String::new()),
        "still the cached answer"
    );
    assert_eq!(
        authorizer.authorize(&alice(), &list_in("b")).await.unwrap(),
        Authorization::Allow,
        "another request is reviewed"
    );
    assert_eq!(api.asked().len(), 2);

    tokio::time::sleep(ttl + Duration::from_millis(100)).await;
    assert_eq!(
        authorizer.authorize(&alice(), &list_in("a")).await.unwrap(),
        Authorization::Allow,
        "reviewed again once expired"
    );
    assert_eq!(api.asked().len(), 3);
}
