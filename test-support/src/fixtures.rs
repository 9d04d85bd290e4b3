//! Objects the tests create: VirtualMachines (of the minimal CRD in `tests/cluster/crds/`), a
//! ruleset that detects their states, and a namespace with both, operations in flight.

use crate::{Env, eventually};
use serde_json::json;
use std::time::Duration;

/// A VirtualMachine `name` in `namespace`, owned by a VirtualMachinePool (`pool-1`).
pub fn vm(name: &str, namespace: &str) -> String {
    format!(
        r#"{{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{{"name":"{name}","namespace":"{namespace}",
"ownerReferences":[{{"apiVersion":"pool.kubevirt.io/v1alpha1","kind":"VirtualMachinePool","name":"pool-1","uid":"00000000-0000-0000-0000-00000000beef"}}]}},
"spec":{{"running":true}}}}"#
    )
}

/// An OperationRuleSet for VirtualMachines in `namespace`, detecting `printableStatus` states.
pub fn vm_ruleset(name: &str, namespace: &str) -> String {
    format!(
        r#"{{"apiVersion":"ifo.kubevirt.io/v1alpha1","kind":"OperationRuleSet","metadata":{{"name":"{name}"}},
"spec":{{"component":"kubevirt","target":{{"group":"kubevirt.io","version":"v1","resource":"virtualmachines"}},
 "namespaces":["{namespace}"],
 "labels":{{"example.com/team":"virt","ifo.kubevirt.io/operation":"ignored"}},
 "labelExpressions":[{{"key":"example.com/node","expression":"object.?status.?nodeName.orValue('none')"}}],
 "rules":[
  {{"operation":"Migrating","expression":"has(object.status) && has(object.status.printableStatus) && object.status.printableStatus == 'Migrating'",
    "message":"'to ' + object.?status.?migrationTarget.orValue('?')",
    "outcome":"object.?status.?lastMigration.orValue('') == 'Failed' ? 'Failed' : 'Succeeded'"}},
  {{"operation":"Starting","expression":"has(object.status) && has(object.status.printableStatus) && object.status.printableStatus == 'Starting'"}}
 ]}}}}"#
    )
}

/// A namespace with a ruleset and two VMs in flight (vm1 Migrating, vm2 Starting).
pub fn populated(env: &Env, prefix: &str) -> (String, String) {
    let (ns, rs) = env.vms_with_ruleset(prefix, &["vm1", "vm2"]);
    env.set_status(
        "vm",
        &ns,
        "vm1",
        json!({"printableStatus": "Migrating", "migrationTarget": "node-9"}),
    );
    env.set_status("vm", &ns, "vm2", json!({"printableStatus": "Starting"}));
    eventually(Duration::from_secs(30), "two operations", || {
        Some(env.ifos(&ns)).filter(|o| o.len() == 2)
    });
    (ns, rs)
}

impl Env {
    /// A fresh namespace with VirtualMachines `vms` and a [`vm_ruleset`] for it, watching.
    /// Returns the namespace and the ruleset's name.
    pub fn vms_with_ruleset(&self, prefix: &str, vms: &[&str]) -> (String, String) {
        let ns = self.namespace(prefix);
        let rs = format!("vm-rules-{ns}");
        self.apply(&vm_ruleset(&rs, &ns));
        for name in vms {
            self.apply(&vm(name, &ns));
        }
        self.wait_watching(&rs);
        (ns, rs)
    }
}
