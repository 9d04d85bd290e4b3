//! The Argo CD health check of docs/operating.md (`deploy/argocd/maintenancegate-health.lua`),
//! run as Argo CD runs it, on gates the server serves: Lua 5.1 (Argo CD's gopher-lua speaks
//! 5.1) with the base, package and table libraries only, the gate as the global `obj` (JSON
//! null as nil, arrays as plain tables), the answer the returned table's `status` and `message`.

use std::path::Path;
use std::time::Duration;

use ifo_dev::User;
use mlua::serde::SerializeOptions;
use mlua::{Lua, LuaOptions, LuaSerdeExt, StdLib, Table};
use serde_json::{Value, json};

use ifo_test_support::{Env, busy_gadgets, create_gadget_crd, env, eventually};

const WAIT: Duration = Duration::from_secs(30);
const SCRIPT: &str = "deploy/argocd/maintenancegate-health.lua";
/// Where argocd-cm holds a health check of `live.ifo.kubevirt.io/MaintenanceGate`.
const CONFIG_KEY: &str = "resource.customizations.health.live.ifo.kubevirt.io_MaintenanceGate";

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Argo CD's health of `gate`: (`hs.status`, `hs.message`, "" when it has none).
fn health(gate: &Value) -> (String, String) {
    let lua = Lua::new_with(StdLib::PACKAGE | StdLib::TABLE, LuaOptions::new()).unwrap();
    let options = SerializeOptions::new()
        .serialize_none_to_null(false)
        .serialize_unit_to_null(false)
        .set_array_metatable(false);
    let obj = lua.to_value_with(gate, options).unwrap();
    lua.globals().set("obj", obj).unwrap();
    let hs: Table = lua
        .load(read(SCRIPT))
        .set_name(SCRIPT)
        .call(())
        .unwrap_or_else(|e| panic!("{SCRIPT} failed on {gate}: {e}"));
    let message: Option<String> = hs.get("message").unwrap();
    (hs.get("status").unwrap(), message.unwrap_or_default())
}

/// The gate `name` once its `Clear` condition reads `status` (tests share the server: another
/// test's new ruleset may make a gate Unknown for a moment), with that condition's message.
fn gate_in(env: &Env, name: &str, status: &str) -> (Value, String) {
    eventually(WAIT, &format!("gate/{name} Clear={status}"), || {
        let gate = env.get_json(User::Admin, &["get", "gate", name]);
        let clear = gate["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "Clear" && c["status"] == status)?;
        let message = clear["message"].as_str()?.to_owned();
        Some((gate, message))
    })
}

/// Clear=True is Healthy, Clear=False (an operation in flight) Progressing, Clear=Unknown (a
/// target the server may not read) Unknown, each with the gate's message; a gate without its
/// condition is Progressing, waiting for the gate.
#[test]
fn the_argocd_health_check_reads_served_gates_in_each_state() {
    let env = env();
    let ns = env.namespace("gate-argocd");
    let (node, rs) = (format!("w-{ns}"), format!("rs-{ns}"));
    env.apply(&ifo_test_support::node_vm_ruleset(
        &rs,
        &ns,
        &format!("c-{ns}"),
    ));
    env.apply(&ifo_test_support::vm("vm-0", &ns));
    env.wait_watching(&rs);
    let _node = env.node(&node);
    let gate = format!("node.{node}");

    let (clear, message) = gate_in(env, &gate, "True");
    assert_eq!(health(&clear), ("Healthy".to_owned(), message));
    // What an Argo CD sync of the gate would do, apply it, is refused: a gate is only read.
    let manifest = json!({"apiVersion": "live.ifo.kubevirt.io/v1alpha1", "kind": "MaintenanceGate",
                          "metadata": {"name": gate}});
    let refused = env.cluster.apply(&manifest.to_string()).unwrap_err();
    assert!(
        format!("{refused:#}").contains("(MethodNotAllowed)"),
        "{refused:#}"
    );

    env.set_status(
        "vm",
        &ns,
        "vm-0",
        json!({"nodeName": node, "printableStatus": "Migrating"}),
    );
    let (busy, message) = gate_in(env, &gate, "False");
    assert!(message.contains(&format!("{ns}/vm-0 Migrating")), "{busy}");
    assert_eq!(health(&busy), ("Progressing".to_owned(), message));

    // A component whose target the server may not read (nothing grants it): its gate is Unknown.
    let group = format!("{ns}.gates.example.com");
    let (component, blind) = (format!("blind-{ns}"), format!("rs-blind-{ns}"));
    create_gadget_crd(env, &group);
    env.apply(&busy_gadgets(&blind, &component, &group, &ns));
    let (unknown, message) = gate_in(env, &format!("component.{component}"), "Unknown");
    assert!(message.contains("is not being watched"), "{unknown}");
    assert_eq!(health(&unknown), ("Unknown".to_owned(), message));

    let mut bare = unknown;
    bare.as_object_mut().unwrap().remove("status");
    assert_eq!(
        health(&bare),
        ("Progressing".to_owned(), "waiting for the gate".to_owned())
    );

    env.kubectl(User::Admin, &["delete", "ors", &rs, &blind])
        .unwrap();
}

/// The argocd-cm of docs/operating.md holds the tested script, as it is.
#[test]
fn the_documented_argocd_cm_holds_the_tested_health_check() {
    let docs = read("docs/operating.md");
    let block = docs
        .split("```yaml\n")
        .skip(1)
        .filter_map(|b| b.split_once("\n```").map(|(yaml, _)| yaml))
        .find(|yaml| yaml.contains(CONFIG_KEY))
        .unwrap_or_else(|| panic!("docs/operating.md has no argocd-cm with {CONFIG_KEY}"));
    let config_map: Value = serde_saphyr::from_str(block).unwrap();
    assert_eq!(config_map["metadata"]["name"], "argocd-cm");
    assert_eq!(config_map["data"][CONFIG_KEY], read(SCRIPT));
}
