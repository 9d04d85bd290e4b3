//! The aggregation hop: kube-apiserver trusts our server, and clients discover our resources.

use ifo_dev::User;
use ifo_test_support::{env, eventually};
use std::time::Duration;

#[test]
fn apiservice_is_available_and_resources_are_discoverable() {
    let env = env();
    let kubectl = |args: &[&str]| env.kubectl(User::Admin, args).unwrap();
    let status = kubectl(&[
        "get",
        "apiservice",
        "v1alpha1.live.ifo.kubevirt.io",
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"Available\")].status}",
    ]);
    assert_eq!(status, "True");

    let out = kubectl(&[
        "api-resources",
        "--api-group=live.ifo.kubevirt.io",
        "-o",
        "wide",
        "--no-headers",
    ]);
    let rows: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    let row = |name: &str| {
        rows.iter()
            .find(|r| r[0] == name)
            .unwrap_or_else(|| panic!("{name} not listed:\n{out}"))
    };
    // NAME SHORTNAMES APIVERSION NAMESPACED KIND VERBS CATEGORIES
    assert_eq!(
        row("inflightoperations")[1..6],
        [
            "ifo,ifos",
            "live.ifo.kubevirt.io/v1alpha1",
            "true",
            "InFlightOperation",
            "get,list,watch"
        ]
    );
    let ifco = row("inflightclusteroperations");
    assert_eq!(
        [ifco[1], ifco[3], ifco[4]],
        ["ifco,ifcos", "false", "InFlightClusterOperation"]
    );
    // Gates: cluster-scoped, and not in the `inflight` category (no CATEGORIES column).
    assert_eq!(
        row("maintenancegates")[1..],
        [
            "gate,gates",
            "live.ifo.kubevirt.io/v1alpha1",
            "false",
            "MaintenanceGate",
            "get,list,watch"
        ]
    );
}

#[test]
fn discovery_is_served_with_aggregated_format() {
    let env = env();
    // kube-apiserver merges our aggregated discovery document into its own.
    let raw = env
        .kubectl(
            User::Admin,
            &["get", "--raw", "/apis/live.ifo.kubevirt.io/v1alpha1"],
        )
        .unwrap();
    let list: serde_json::Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(list["kind"], "APIResourceList");
    assert_eq!(list["groupVersion"], "live.ifo.kubevirt.io/v1alpha1");
    let names: Vec<&str> = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "inflightoperations",
            "inflightclusteroperations",
            "maintenancegates"
        ]
    );
}

#[test]
fn readyz_reports_ready_once_the_initial_sync_is_done() {
    let env = env();
    // Probes carry no identity: the health endpoints answer without credentials.
    let (code, body) = eventually(Duration::from_secs(30), "/readyz ok", || {
        Some(env.direct("/readyz", &[])).filter(|(code, _)| code == "200")
    });
    assert_eq!((code.as_str(), body.as_str()), ("200", "ok"));
    assert_eq!(env.direct("/livez", &[]).0, "200");
}
