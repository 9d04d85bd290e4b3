//! Related objects (`spec.related`) against the real cluster: a ruleset on VirtualMachines takes
//! its operations' node from the VirtualMachineInstance of the same name, so the gate of the node
//! a VM stops on waits for it, and follows the VMI when it moves to another node.
//!
//! Tests share the cluster: the namespace, the nodes and the ruleset are this test's own.

use ifo_dev::User;
use ifo_test_support::{Env, MIGRATING, Rule, RuleSet, clear_condition, env, eventually, vm};
use serde_json::{Value, json};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);
/// How soon a gate follows a VMI that moves: a relabel is one change of the index.
const MOVE: Duration = Duration::from_secs(10);

/// VM rules for `ns`, whose node labels come from the VMI of the same name.
fn related_ruleset(name: &str, ns: &str) -> String {
    RuleSet::vms_of(name, &format!("c-{ns}"), ns)
        .spec("exclusive", true)
        .label_expression("ifo.kubevirt.io/vm", "object.metadata.name")
        .spec(
            "related",
            json!([{
                "target": {"group": "kubevirt.io", "version": "v1", "resource": "virtualmachineinstances"},
                "match": "SameName",
                "labelExpressions": [
                    {"key": "ifo.kubevirt.io/node", "expression": "object.?status.?nodeName.orValue('')"},
                    {"key": "ifo.kubevirt.io/target-node",
                     "expression": "object.?status.?migrationState.?targetNode.orValue('')"},
                ],
            }]),
        )
        .rule(Rule::new(
            "Stopping",
            "object.?status.?printableStatus.orValue('') == 'Stopping'",
        ))
        .rule(Rule::new("Migrating", MIGRATING))
        .to_string()
}

/// A VirtualMachineInstance `name` in `namespace` (of the test cluster's minimal CRD).
fn vmi(name: &str, namespace: &str) -> String {
    json!({
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"domain": {"devices": {}}},
    })
    .to_string()
}

/// The `Clear` condition of gate `name`: (status, message).
fn clear(env: &Env, name: &str) -> (String, String) {
    let gate = env.gate(name);
    let condition = clear_condition(&gate);
    let text = |field: &str| condition[field].as_str().unwrap_or_default().to_owned();
    (text("status"), text("message"))
}

/// Waits until gate `name` reads `Clear=False` naming `operation`, or `Clear=True` for `None`.
fn wait_gate(env: &Env, name: &str, operation: Option<&str>, within: Duration) {
    let want = match operation {
        Some(op) => format!("gate {name} Clear=False naming {op}"),
        None => format!("gate {name} Clear=True"),
    };
    eventually(within, &want, || {
        let (status, message) = clear(env, name);
        let done = match operation {
            Some(op) => status == "False" && message.contains(op),
            None => status == "True",
        };
        done.then_some(())
    });
}

/// The operations in `ns` whose node label is `node`, by `-l`, as (operation, subject name).
fn on_node(env: &Env, ns: &str, node: &str) -> Vec<(String, String)> {
    let selector = format!("ifo.kubevirt.io/node={node}");
    let list = env.get_json(User::Admin, &["get", "ifos", "-n", ns, "-l", &selector]);
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
            (
                text(&o["spec"]["operation"]),
                text(&o["spec"]["subject"]["name"]),
            )
        })
        .collect()
}

#[test]
fn a_vm_s_operation_is_on_the_node_of_its_vmi_and_follows_it() {
    let env = env();
    let (ns, rs) = env.namespace_with_ruleset("related", "related", related_ruleset);
    let (node_a, node_b) = (format!("ra-{ns}"), format!("rb-{ns}"));
    let _a = env.node(&node_a);
    let _b = env.node(&node_b);
    env.apply(&vm("vm1", &ns));
    env.apply(&vmi("vm1", &ns));
    env.set_status(
        "vmi",
        &ns,
        "vm1",
        json!({"phase": "Running", "nodeName": node_a}),
    );
    // Watching means both watches: the VMs' and, for the related part, the VMIs'.
    env.wait_watching(&rs);
    wait_gate(env, &format!("node.{node_a}"), None, WAIT);

    // The VM stops: its operation is on its VMI's node.
    env.set_vm_status(&ns, "vm1", json!({"printableStatus": "Stopping"}));
    eventually(WAIT, "the VM's operation listed on its VMI's node", || {
        let found = on_node(env, &ns, &node_a);
        (found == [("Stopping".to_owned(), "vm1".to_owned())]).then_some(())
    });
    let op = &env.ifos(&ns)[0];
    assert_eq!(op["spec"]["ruleSet"], rs.as_str(), "{op:#}");
    assert_eq!(
        op["metadata"]["labels"]["ifo.kubevirt.io/vm"], "vm1",
        "{op:#}"
    );
    assert!(
        op["metadata"]["labels"]
            .get("ifo.kubevirt.io/target-node")
            .is_none(),
        "an empty related value sets no label: {op:#}"
    );
    wait_gate(env, &format!("node.{node_a}"), Some("vm1"), WAIT);
    assert_eq!(clear(env, &format!("node.{node_b}")).0, "True");

    // The VMI moves to node b: the operation follows within seconds.
    env.set_status("vmi", &ns, "vm1", json!({"nodeName": node_b}));
    wait_gate(env, &format!("node.{node_b}"), Some("vm1"), MOVE);
    wait_gate(env, &format!("node.{node_a}"), None, MOVE);
    assert!(on_node(env, &ns, &node_a).is_empty());

    // The VM stopped: the operation ends, and both gates are clear.
    env.set_vm_status(&ns, "vm1", json!({"printableStatus": "Stopped"}));
    eventually(WAIT, "the VM's operation to end", || {
        env.ifos(&ns).is_empty().then_some(())
    });
    wait_gate(env, &format!("node.{node_a}"), None, WAIT);
    wait_gate(env, &format!("node.{node_b}"), None, WAIT);
    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}
