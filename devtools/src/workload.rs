//! A small built-in workload for the demo: a few VirtualMachines whose `/status` moves through
//! the states the shipped rules detect, as KubeVirt's controllers would move them, each with its
//! VirtualMachineInstance; every migration is a VirtualMachineInstanceMigration that goes
//! through its phases and ends `Succeeded`, and the instance's `migrationState` says so, so the
//! migration rules report how it ended.

use super::{Cluster, User};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The namespace the demo's VirtualMachines live in.
pub const NAMESPACE: &str = "demo";

/// The states each VM goes through, with how long it stays in each.
const SCRIPT: &[(&str, u64)] = &[
    ("Starting", 6),
    ("Running", 8),
    ("Migrating", 10),
    ("Running", 8),
    ("Stopping", 5),
    ("Stopped", 8),
];

/// The image of the demo's application pods (nothing runs them).
const PAUSE: &str = "registry.k8s.io/pause:3.10";

/// Nodes the instances run on and migrate between (names only: nothing schedules them).
const NODES: usize = 3;

/// One VM of the workload: where its instance runs and its migration in flight.
struct Vm {
    name: String,
    node: usize,
    migrations: usize,
    /// The migration in flight: its name and target node.
    migrating: Option<(String, usize)>,
}

/// Creates the VMs and drives their status until `stop` is set.
pub fn run(cluster: &Cluster, vms: usize, stop: Arc<AtomicBool>) -> anyhow::Result<()> {
    let _ = cluster.kubectl_run(User::Admin, &["create", "namespace", NAMESPACE], None);
    // A CronJob, whose next runs the gates list ahead (`status.scheduled`, `kubectl ifo plan`,
    // the timeline's first rows). Nothing runs it: the demo has no CronJob controller.
    let backup = json!({"apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": "backup", "namespace": NAMESPACE},
        "spec": {"schedule": "*/30 * * * *", "timeZone": "Europe/Berlin",
                 "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never",
                     "containers": [{"name": "backup", "image": PAUSE}]}}}}}});
    cluster.apply(&backup.to_string())?;
    // The nodes the instances run on, as Node objects (no kubelet behind them): the gate of a
    // node the cluster does not have is NotFound, so `kubectl wait gate/node.node-1` needs them.
    for n in 0..NODES {
        let object = json!({"apiVersion": "v1", "kind": "Node",
                          "metadata": {"name": node(n), "labels": {"ifo.kubevirt.io/demo": "true"}}});
        cluster.apply(&object.to_string())?;
        // A pod on each node, so that `kubectl drain node-1` has one to evict (with the
        // maintenance guard, it waits while the node is busy). Nothing runs it: no grace, so an
        // eviction deletes it at once. It belongs to a ReplicaSet, as an application's pods do:
        // `kubectl drain` refuses pods of no controller without `--force`.
        let app = format!("app-{}", node(n));
        let labels = json!({"app": app});
        let replicaset = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": app, "namespace": NAMESPACE},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "app", "image": PAUSE}]}}}});
        cluster.apply(&replicaset.to_string())?;
        let uid = cluster.kubectl_run(
            User::Admin,
            &[
                "get",
                "replicaset",
                &app,
                "-n",
                NAMESPACE,
                "-o",
                "jsonpath={.metadata.uid}",
            ],
            None,
        )?;
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": app, "namespace": NAMESPACE, "labels": labels,
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                              "name": app, "uid": uid.trim(), "controller": true}]},
            "spec": {"nodeName": node(n), "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "app", "image": PAUSE}]}});
        cluster.apply(&pod.to_string())?;
    }
    let mut fleet = Vec::new();
    for i in 0..vms {
        let name = format!("vm-{i}");
        cluster.apply(&object("VirtualMachine", &name, json!({"running": true})))?;
        cluster.apply(&object("VirtualMachineInstance", &name, json!({})))?;
        let vm = Vm {
            name,
            node: i % NODES,
            migrations: 0,
            migrating: None,
        };
        set_status(
            cluster,
            "vmi",
            &vm.name,
            json!({"phase": "Running", "nodeName": node(vm.node),
                   "conditions": [{"type": "Ready", "status": "True"}]}),
        );
        fleet.push(vm);
    }
    let mut step = 0usize;
    while !stop.load(Ordering::Relaxed) {
        for (i, vm) in fleet.iter_mut().enumerate() {
            // Each VM is offset in the script so something is always happening.
            let (state, _) = SCRIPT[(step + i * 2) % SCRIPT.len()];
            if vm.migrating.is_some() && state != "Migrating" {
                finish_migration(cluster, vm);
            }
            set_status(
                cluster,
                "vm",
                &vm.name,
                json!({"printableStatus": state, "ready": state == "Running"}),
            );
            if state == "Migrating" && vm.migrating.is_none() {
                start_migration(cluster, vm)?;
            }
        }
        let wait = SCRIPT[step % SCRIPT.len()].1;
        for _ in 0..wait * 10 {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        step += 1;
    }
    Ok(())
}

fn node(n: usize) -> String {
    format!("node-{n}")
}

fn object(kind: &str, name: &str, spec: Value) -> String {
    json!({"apiVersion": "kubevirt.io/v1", "kind": kind,
           "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec})
    .to_string()
}

/// Patches `/status` as the object's controller would; a failed patch is skipped (the next step
/// patches again).
fn set_status(cluster: &Cluster, resource: &str, name: &str, status: Value) {
    let patch = json!({ "status": status }).to_string();
    let _ = cluster.kubectl_run(
        User::Admin,
        &[
            "patch",
            resource,
            name,
            "-n",
            NAMESPACE,
            "--subresource=status",
            "--type=merge",
            "-p",
            &patch,
        ],
        None,
    );
}

/// A new migration of `vm` to the next node: the migration object goes through its phases to
/// `Running`, and the instance's `migrationState` shows it in flight. The VM's previous
/// migration object is deleted, so the demo's objects stay few.
fn start_migration(cluster: &Cluster, vm: &mut Vm) -> anyhow::Result<()> {
    if vm.migrations > 0 {
        let previous = format!("{}-migration-{}", vm.name, vm.migrations - 1);
        let _ = cluster.kubectl_run(
            User::Admin,
            &["delete", "vmim", &previous, "-n", NAMESPACE, "--wait=false"],
            None,
        );
    }
    let name = format!("{}-migration-{}", vm.name, vm.migrations);
    vm.migrations += 1;
    let target = (vm.node + 1) % NODES;
    cluster.apply(&object(
        "VirtualMachineInstanceMigration",
        &name,
        json!({"vmiName": vm.name}),
    ))?;
    let state = json!({"sourceNode": node(vm.node), "targetNode": node(target),
                       "startTimestamp": jiff::Timestamp::now().to_string()});
    for phase in ["Scheduling", "PreparingTarget"] {
        set_status(cluster, "vmim", &name, json!({"phase": phase}));
    }
    set_status(
        cluster,
        "vmim",
        &name,
        json!({"phase": "Running", "migrationState": state}),
    );
    // A new migration replaces the instance's migrationState, as KubeVirt does: a merge patch
    // would keep the previous one's end, and the migration would never be seen in flight.
    let mut fresh = state.clone();
    for ended in ["endTimestamp", "completed", "failed", "abortStatus"] {
        fresh[ended] = Value::Null;
    }
    set_status(cluster, "vmi", &vm.name, json!({"migrationState": fresh}));
    vm.migrating = Some((name, target));
    Ok(())
}

/// The migration in flight completed: the migration object `Succeeded`, the instance on its
/// target node with a completed `migrationState`.
fn finish_migration(cluster: &Cluster, vm: &mut Vm) {
    let Some((name, target)) = vm.migrating.take() else {
        return;
    };
    let end = json!({"endTimestamp": jiff::Timestamp::now().to_string(), "completed": true});
    set_status(
        cluster,
        "vmim",
        &name,
        json!({"phase": "Succeeded", "migrationState": end}),
    );
    set_status(
        cluster,
        "vmi",
        &vm.name,
        json!({"nodeName": node(target), "migrationState": end}),
    );
    vm.node = target;
}
