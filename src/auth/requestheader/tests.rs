use super::*;
use crate::mock_apiserver::{End, MockApiServer, Reply, list};
use crate::supervise::testing::{failures, ready_tasks, restarting_killable};
use ifo_dev::pki::KeyPair;

/// The ConfigMap kube-apiserver publishes, naming `ca` the front-proxy CA.
fn config_map(ca: &KeyPair) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": NAME, "namespace": NAMESPACE, "resourceVersion": "1"},
        "data": {
            "requestheader-client-ca-file": String::from_utf8(ca.cert_pem.clone()).unwrap(),
            "requestheader-username-headers": "[\"X-Remote-User\"]",
        },
    })
}

/// An API server that serves `current` as the ConfigMap, to a get, a list, and a watch that
/// never sends anything.
fn api_server(current: Arc<parking_lot::Mutex<serde_json::Value>>) -> (Client, MockApiServer) {
    MockApiServer::start(move |asked| match asked.verb() {
        "watch" => Reply::Watch(Vec::new(), End::Open),
        "get" => Reply::Object(current.lock().clone()),
        _ => Reply::Object(list(
            "ConfigMapList",
            "1",
            None,
            vec![current.lock().clone()],
        )),
    })
}

/// The trust settings' watch runs under the server's tasks: killed, it is counted and started
/// again, and the run started again lists the ConfigMap afresh, so a change it missed is
/// published.
#[tokio::test]
async fn a_killed_trust_watch_is_counted_and_started_again() {
    let (first, rotated) = (
        KeyPair::new_ca("front-proxy-ca").unwrap(),
        KeyPair::new_ca("rotated-front-proxy-ca").unwrap(),
    );
    let current = Arc::new(parking_lot::Mutex::new(config_map(&first)));
    let (client, api) = api_server(current.clone());
    let (mut trust, trust_watch) = read_request_header_config(client).await.unwrap();
    let ca = |pem: &[u8]| vec![CertificateDer::from_pem_slice(pem).unwrap()];
    assert_eq!(trust.borrow().client_ca, ca(&first.cert_pem));

    let (readiness, mut tasks) = ready_tasks();
    let failed_before = failures("trust-settings");
    let kill = restarting_killable(&mut tasks, "trust-settings", move || {
        trust_watch.clone().follow()
    });
    // The ConfigMap is listed, then watched.
    api.asked_for("watch", 1).await;

    // Rotated while the watch hears nothing of it; then the watch is killed.
    *current.lock() = config_map(&rotated);
    kill.notify_one();
    tokio::time::timeout(Duration::from_secs(10), trust.changed())
        .await
        .expect("the watch started again publishes the rotated CA")
        .unwrap();
    assert_eq!(trust.borrow().client_ca, ca(&rotated.cert_pem));
    assert_eq!(failures("trust-settings"), failed_before + 1);
    assert_eq!(
        api.verbs()[..4],
        ["get", "list", "watch", "list"],
        "read once, then listed and watched by each run"
    );
    assert!(readiness.liveness().is_ok());
    tasks.shutdown().await;
}
