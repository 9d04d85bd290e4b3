//! The aggregation hop: kube-apiserver trusts our server, and clients discover our resources.

use ifo_dev::User;
use ifo_test_support::{env, eventually};
use std::time::Duration;

#[test]
fn apiservice_is_available_and_resources_are_discoverable() {
    let env = env();
    let status = env
        .kubectl(
            User::Admin,
            &[
                "get",
                "apiservice",
                "v1alpha1.live.ifo.kubevirt.io",
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Available\")].status}",
            ],
        )
        .unwrap();
    assert_eq!(status, "True");

    let out = env
        .kubectl(
            User::Admin,
            &[
                "api-resources",
                "--api-group=live.ifo.kubevirt.io",
                "-o",
                "wide",
                "--no-headers",
            ],
        )
        .unwrap();
    let rows: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    let ifo = rows
        .iter()
        .find(|r| r[0] == "inflightoperations")
        .unwrap_or_else(|| panic!("inflightoperations not listed:\n{out}"));
    // NAME SHORTNAMES APIVERSION NAMESPACED KIND VERBS CATEGORIES
    assert_eq!(ifo[1], "ifo,ifos");
    assert_eq!(ifo[2], "live.ifo.kubevirt.io/v1alpha1");
    assert_eq!(ifo[3], "true");
    assert_eq!(ifo[4], "InFlightOperation");
    assert_eq!(ifo[5], "get,list,watch");
    let ifco = rows
        .iter()
        .find(|r| r[0] == "inflightclusteroperations")
        .unwrap_or_else(|| panic!("inflightclusteroperations not listed:\n{out}"));
    assert_eq!(ifco[1], "ifco,ifcos");
    assert_eq!(ifco[3], "false");
    assert_eq!(ifco[4], "InFlightClusterOperation");
    // Gates: cluster-scoped, and not in the `inflight` category (no CATEGORIES column).
    let gates = rows
        .iter()
        .find(|r| r[0] == "maintenancegates")
        .unwrap_or_else(|| panic!("maintenancegates not listed:\n{out}"));
    assert_eq!(
        gates[1..],
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
