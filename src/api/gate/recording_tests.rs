//! Served gates, recorded: what a client reads of a fixed set of scopes — each gate as JSON
//! and as a Table row, the lists in every representation, a watch's events, and the gates while
//! detection is not current and while the cluster's nodes cannot be listed — is compared byte for
//! byte with `tests/recordings/served-gates.txt`. Times and ages are masked (each read is at
//! its own now); everything else is as served.
//!
//! A change of what is served shows as a diff of that file: `IFO_RECORD=1 cargo test --lib
//! served_gates_are_the_recording` writes it anew, for review beside the change.

use std::fmt::Write as _;
use std::sync::Arc;

use crate::api::{ApiState, router};
use crate::detect::Health;
use crate::index::Index;
use crate::inventory::{Inventory, Kept, Kind};
use crate::ruleset::Target;
use crate::track::Change;

use super::tests::{Events, GATES, TABLE, migration, served_state};

const METADATA: &str =
    "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json";
const RECORDING: &str = "tests/recordings/served-gates.txt";

/// What a client reads of `uri`, as recorded: the request, the status, the body.
async fn read(state: &Arc<ApiState>, out: &mut String, uri: &str, accept: Option<&str>) {
    let (status, body) = crate::api::tests::call(router(state.clone()), uri, accept).await;
    let accept = accept.map(|a| format!(" ({a})")).unwrap_or_default();
    writeln!(out, "### GET {uri}{accept}\n{status}\n{body}\n").unwrap();
}

/// `2026-11-27T10:00:00Z` and its kin written as `<time>`, and a Table's ages (a cell `"5d1h"`)
/// as `<age>`.
fn timeless(text: &str) -> String {
    let times =
        regex::Regex::new(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)").unwrap();
    let ages = regex::Regex::new(r#""(\d+[dhms])+""#).unwrap();
    let text = times.replace_all(text, "<time>");
    ages.replace_all(&text, r#""<age>""#).into_owned()
}

async fn recording() -> String {
    let index = Index::new(100, 64, 64).into_handles();
    index.writer.apply(vec![
        Change::Upsert(migration("demo", "vm-0", "w1", "w2")),
        Change::Upsert(migration("demo", "vm-1", "w3", "")),
        Change::Upsert(migration("other", "vm-2", "w3", "w1")),
    ]);
    let targets = Arc::new(Health::default());
    let inventory = Arc::new(Inventory::default());
    let now = jiff::Timestamp::now();
    inventory.listed(
        Kind::Node,
        ["w1", "w2", "w3", "w9", "overridden", "invalid", "cordoned"],
    );
    inventory.listed(Kind::Namespace, ["demo", "other", "quiet"]);
    inventory.applied(
        Kind::Node,
        "overridden",
        Kept::overridden("firmware, INC-4711", Some("2036-01-01T00:00:00Z"), now),
    );
    inventory.applied(
        Kind::Node,
        "invalid",
        Kept::overridden("disk", Some("2h"), now),
    );
    inventory.applied(
        Kind::Node,
        "cordoned",
        Kept::cordoned("2026-11-01T00:00:00Z".parse().unwrap()),
    );
    let state = served_state(&index, &targets, &inventory);
    let mut out = String::new();
    out.push_str("## Current\n\n");
    read(&state, &mut out, GATES, None).await;
    read(&state, &mut out, GATES, Some(TABLE)).await;
    read(&state, &mut out, GATES, Some(METADATA)).await;
    let scopes = [
        "cluster",
        "component.kubevirt",
        "namespace.demo",
        "namespace.quiet",
        "namespace.gone",
        "node.w1",
        "node.w2",
        "node.w9",
        "node.overridden",
        "node.invalid",
        "node.cordoned",
        "node.gone",
    ];
    for scope in scopes {
        read(&state, &mut out, &format!("{GATES}/{scope}"), None).await;
    }
    read(&state, &mut out, &format!("{GATES}/node.w1"), Some(TABLE)).await;
    read(
        &state,
        &mut out,
        &format!("{GATES}?labelSelector=ifo.kubevirt.io%2Fscope%3Dnode"),
        Some(TABLE),
    )
    .await;

    out.push_str("## A watch of node.w1 while its operations end\n\n");
    let uri = format!("{GATES}?watch=true&fieldSelector=metadata.name%3Dnode.w1");
    let response = crate::api::tests::answer(router(state.clone()), &uri, None).await;
    writeln!(out, "### GET {uri}\n{}", response.status()).unwrap();
    let mut events = Events::of(response);
    out.push_str(&events.line().await);
    index.writer.apply(vec![
        Change::Remove(migration("demo", "vm-0", "w1", "w2")),
        Change::Remove(migration("other", "vm-2", "w3", "w1")),
    ]);
    out.push_str(&events.line().await);
    out.push('\n');

    out.push_str("## Detection not current\n\n");
    let t = Target::of("kubevirt.io", "v1", "virtualmachines");
    targets.watching(&t, None);
    targets.resolved(&t, true, &[None]);
    read(&state, &mut out, GATES, Some(TABLE)).await;
    for scope in ["cluster", "namespace.demo", "node.w1", "node.w9"] {
        read(&state, &mut out, &format!("{GATES}/{scope}"), None).await;
    }
    targets.listed(&t, &None, now);

    out.push_str("## The cluster's nodes not listed\n\n");
    inventory.failed(Kind::Node, "nodes is forbidden".to_owned());
    read(&state, &mut out, GATES, Some(TABLE)).await;
    for scope in ["node.w3", "node.w9", "node.gone"] {
        read(&state, &mut out, &format!("{GATES}/{scope}"), None).await;
    }
    timeless(&out)
}

#[tokio::test]
async fn served_gates_are_the_recording() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(RECORDING);
    let served = recording().await;
    if std::env::var_os("IFO_RECORD").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &served).unwrap();
        return;
    }
    let recorded = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; IFO_RECORD=1 writes it", path.display()));
    if served != recorded {
        let at = served
            .bytes()
            .zip(recorded.bytes())
            .position(|(a, b)| a != b)
            .unwrap_or(served.len().min(recorded.len()));
        let line = served[..at].lines().count();
        let around = |text: &str| {
            let from = text.floor_char_boundary(at.saturating_sub(100));
            let to = text.ceil_char_boundary((at + 100).min(text.len()));
            text[from..to].to_owned()
        };
        panic!(
            "served gates differ from {RECORDING} at its line {line}:\n  served:   …{}…\n  \
             recorded: …{}…\n(IFO_RECORD=1 writes the recording anew, for review with the change)",
            around(&served),
            around(&recorded),
        );
    }
}
