//! Objects the tests create: VirtualMachines (of the minimal CRD in `tests/cluster/crds/`), a
//! ruleset that detects their states, a namespace with both, operations in flight, and Node
//! objects (the gate of a node exists only while the cluster has the node).

use crate::{Env, Rule, RuleSet, eventually};
use ifo_dev::User;
use serde_json::{Value, json};
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
    RuleSet::vms_of(name, "kubevirt", namespace)
        .label("example.com/team", "virt")
        .label("ifo.kubevirt.io/operation", "ignored")
        .label_expression(
            "example.com/node",
            "object.?status.?nodeName.orValue('none')",
        )
        .rule(
            Rule::new(
                "Migrating",
                "has(object.status) && has(object.status.printableStatus) && \
                 object.status.printableStatus == 'Migrating'",
            )
            .message("'to ' + object.?status.?migrationTarget.orValue('?')")
            .outcome(
                "object.?status.?lastMigration.orValue('') == 'Failed' ? 'Failed' : 'Succeeded'",
            ),
        )
        .rule(Rule::new(
            "Starting",
            "has(object.status) && has(object.status.printableStatus) && \
             object.status.printableStatus == 'Starting'",
        ))
        .to_string()
}

/// An OperationRuleSet of `component` for VirtualMachines in `namespace` that labels each
/// operation with the node in `status.nodeName` (as the shipped VMI rules do) and detects
/// `Migrating`: what a test of a node's gate needs.
pub fn node_vm_ruleset(name: &str, namespace: &str, component: &str) -> String {
    RuleSet::vms_of(name, component, namespace)
        .label_expression(
            "ifo.kubevirt.io/node",
            "object.?status.?nodeName.orValue('')",
        )
        .rule(Rule::new("Migrating", MIGRATING))
        .to_string()
}

/// A VirtualMachine's `Migrating`: its `status.printableStatus` says so.
pub const MIGRATING: &str = "object.?status.?printableStatus.orValue('') == 'Migrating'";

/// The header of a table of operations, as `kubectl get ifos` and `kubectl ifo list` print it
/// (with the spaces between its columns made single).
pub const OPERATION_COLUMNS: &str = "NAME KIND SUBJECT OPERATION PHASE AGE MESSAGE";

/// A rule that is cheap by its compile-time estimate but iterates `object.spec.n` times over a
/// large annotation at run time: over the evaluation budget on a [`heavy_vm`], cheap elsewhere.
pub const HEAVY: &str = "lists.range(object.spec.?n.orValue(0)).exists(i, \
                         object.metadata.annotations['example.com/big'].contains(string(i)))";

/// A ruleset for VirtualMachines in `namespace` detecting `Heavy` with [`HEAVY`].
pub fn heavy_ruleset(name: &str, namespace: &str) -> RuleSet {
    RuleSet::vms_of(name, "test", namespace).rule(Rule::new("Heavy", HEAVY))
}

/// A VirtualMachine `name` in `namespace` on which [`HEAVY`] goes over the evaluation budget.
pub fn heavy_vm(name: &str, namespace: &str) -> String {
    let big = json!({"example.com/big": "x".repeat(64 * 1024)});
    slow_vm(name, namespace, 60_000, big).to_string()
}

/// A running VirtualMachine `name` in `namespace` with `annotations`, on which a rule over
/// `lists.range(object.spec.n)` (as [`HEAVY`]) makes `n` iterations.
pub fn slow_vm(name: &str, namespace: &str, n: u64, annotations: Value) -> Value {
    json!({
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": {"running": true, "n": n},
    })
}

/// A namespace with a ruleset and two VMs in flight (vm1 Migrating, vm2 Starting).
pub fn populated(env: &Env, prefix: &str) -> (String, String) {
    let (ns, rs) = env.vms_with_ruleset(prefix, &["vm1", "vm2"]);
    env.set_vm_status(
        &ns,
        "vm1",
        json!({"printableStatus": "Migrating", "migrationTarget": "node-9"}),
    );
    env.set_vm_status(&ns, "vm2", json!({"printableStatus": "Starting"}));
    eventually(Duration::from_secs(30), "two operations", || {
        Some(env.ifos(&ns)).filter(|o| o.len() == 2)
    });
    (ns, rs)
}

/// A [`populated`] namespace that alice may view ([`Env::grant_alice_view`]).
pub fn populated_for_alice(env: &Env, prefix: &str) -> (String, String) {
    let (ns, rs) = populated(env, prefix);
    env.grant_alice_view(&ns);
    (ns, rs)
}

impl Env {
    /// A fresh namespace (named after `prefix`) and the ruleset `manifest(name, namespace)` for
    /// it, named `<ruleset>-<namespace>` (unique: rulesets are cluster-scoped), applied. Returns
    /// the namespace and the ruleset's name.
    pub fn namespace_with_ruleset(
        &self,
        prefix: &str,
        ruleset: &str,
        manifest: impl FnOnce(&str, &str) -> String,
    ) -> (String, String) {
        let ns = self.namespace(prefix);
        let rs = format!("{ruleset}-{ns}");
        self.apply(&manifest(&rs, &ns));
        (ns, rs)
    }

    /// Patches the status of VirtualMachine `name` in `namespace`, as its controller would.
    pub fn set_vm_status(&self, namespace: &str, name: &str, status: serde_json::Value) {
        self.set_status("vm", namespace, name, status);
    }

    /// A fresh namespace with VirtualMachines `vms` and a [`vm_ruleset`] for it, watching.
    /// Returns the namespace and the ruleset's name.
    pub fn vms_with_ruleset(&self, prefix: &str, vms: &[&str]) -> (String, String) {
        self.vms_watched_by(prefix, "vm-rules", vm_ruleset, vms)
    }

    /// [`Env::namespace_with_ruleset`] with VirtualMachines `vms` in the namespace, once the
    /// ruleset watches. Returns the namespace and the ruleset's name.
    pub fn vms_watched_by(
        &self,
        prefix: &str,
        ruleset: &str,
        manifest: impl FnOnce(&str, &str) -> String,
        vms: &[&str],
    ) -> (String, String) {
        let (ns, rs) = self.namespace_with_ruleset(prefix, ruleset, manifest);
        for name in vms {
            self.apply(&vm(name, &ns));
        }
        self.wait_watching(&rs);
        (ns, rs)
    }

    /// The copy of [`Env::copying_vm`] in `namespace` reports `pct` percent, `after` it began
    /// (from now): its expected end is extrapolated from that progress.
    pub fn copy_progressed(&self, namespace: &str, pct: u64, after: Duration) {
        std::thread::sleep(after);
        self.set_vm_status(
            namespace,
            "vm-0",
            json!({"printableStatus": "Copying", "pct": pct}),
        );
    }

    /// A namespace of its own (named after `prefix`) whose VirtualMachine `vm-0` is `Copying`,
    /// detected by a ruleset (component `kubevirt`) whose `progress` is the VM's `status.pct`;
    /// waits until the copy is an Active operation. The namespace, the ruleset's name and the
    /// operation.
    pub fn copying_vm(&self, prefix: &str) -> (String, String, Value) {
        let copying = crate::Rule::new(
            "Copying",
            "object.?status.?printableStatus.orValue('') == 'Copying'",
        )
        .set("progress", "object.?status.?pct.orValue('')");
        let ruleset = |rs: &str, ns: &str| {
            crate::RuleSet::vms_of(rs, "kubevirt", ns)
                .rule(copying)
                .to_string()
        };
        let (ns, rs) = self.vms_watched_by(prefix, "copy", ruleset, &["vm-0"]);
        self.set_vm_status(&ns, "vm-0", json!({"printableStatus": "Copying"}));
        let op = self.wait_ifo(&ns, "the copy detected", |o| {
            o["status"]["phase"] == "Active"
        });
        (ns, rs, op)
    }
}

/// A Node object of a test's own (see [`Env::node`]): nothing runs on it (there is no kubelet),
/// but the cluster has it, so its maintenance gate exists. Deleted when dropped.
#[must_use = "the Node is deleted when this guard is dropped"]
pub struct TestNode<'a> {
    env: &'a Env,
    name: String,
}

impl TestNode<'_> {
    /// The node's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for TestNode<'_> {
    fn drop(&mut self) {
        // Nothing to wait for: a Node without a kubelet has no finalizers.
        if let Err(e) = self.env.kubectl(
            User::Admin,
            &[
                "delete",
                "node",
                &self.name,
                "--ignore-not-found",
                "--wait=false",
            ],
        ) {
            eprintln!("could not delete the test's node {}: {e:#}", self.name);
        }
    }
}

impl Env {
    /// Creates the Node `name` (unique to the test: tests share the cluster), a bare object that
    /// no kubelet runs, and waits until the server knows it: its gate `node.<name>` answers
    /// (the gate of a node the cluster does not have is a 404). Deleted when the guard drops.
    pub fn node(&self, name: &str) -> TestNode<'_> {
        self.apply(
            &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}).to_string(),
        );
        let node = TestNode {
            env: self,
            name: name.to_owned(),
        };
        let gate = format!("node.{name}");
        eventually(
            Duration::from_secs(30),
            &format!("the gate {gate} to exist"),
            || {
                self.kubectl(User::Admin, &["get", "gate", &gate, "-o", "name"])
                    .ok()
            },
        );
        node
    }
}

/// A CronJob `name` in `namespace` on `schedule`, in `time_zone` when given (`spec.timeZone`).
/// Nothing runs it: the test cluster has no CronJob controller.
pub fn cronjob(namespace: &str, name: &str, schedule: &str, time_zone: Option<&str>) -> String {
    let mut spec = json!({
        "schedule": schedule,
        "jobTemplate": {"spec": {"template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "work", "image": "busybox"}],
        }}}},
    });
    if let Some(tz) = time_zone {
        spec["timeZone"] = json!(tz);
    }
    json!({
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    })
    .to_string()
}

/// A ruleset named `name`, of component `cron-<namespace>`, with the library's CronJob rule
/// (`rules/kubernetes/cronjob-rules.yaml`) for the CronJobs of `namespace`: a run in flight while
/// the CronJob lists an active Job, succeeded when its last successful time is the last schedule
/// time or later, its next run announced (a suspended CronJob announces nothing; an `@every`
/// schedule runs that long after the last scheduled run, or the creation).
pub fn cronjob_ruleset(name: &str, namespace: &str) -> String {
    RuleSet::new(name)
        .component(&format!("cron-{namespace}"))
        .target("batch", "v1", "cronjobs")
        .namespaces(&[namespace])
        .rule(
            Rule::new("Running", "object.?status.?active.orValue([]).size() > 0")
                .outcome(
                    "object.?status.?lastSuccessfulTime.orValue('') != '' && object.?status.?lastSuccessfulTime.orValue('') >= object.?status.?lastScheduleTime.orValue('') ? 'Succeeded' : 'Unknown'",
                )
                .set("startTime", "object.?status.?lastScheduleTime.orValue('')")
                .set(
                    "schedule",
                    json!({
                        "cron": "object.?spec.?suspend.orValue(false) ? '' : object.?spec.?schedule.orValue('')",
                        "timeZone": "object.?spec.?timeZone.orValue('')",
                        "from": "object.?status.?lastScheduleTime.orValue(object.?metadata.?creationTimestamp.orValue(''))",
                    }),
                ),
        )
        .to_string()
}
