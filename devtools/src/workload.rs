//! A small built-in workload for the demo: a few VirtualMachines whose `/status` moves through
//! the states the shipped rules detect, as KubeVirt's controllers would move them.

use super::{Cluster, User};
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

/// Creates the VMs and drives their status until `stop` is set.
pub fn run(cluster: &Cluster, vms: usize, stop: Arc<AtomicBool>) -> anyhow::Result<()> {
    let _ = cluster.kubectl_run(User::Admin, &["create", "namespace", NAMESPACE], None);
    for i in 0..vms {
        cluster.apply(&format!(
            r#"{{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{{"name":"vm-{i}","namespace":"{NAMESPACE}"}},"spec":{{"running":true}}}}"#
        ))?;
    }
    let mut step = 0usize;
    while !stop.load(Ordering::Relaxed) {
        for i in 0..vms {
            // Each VM is offset in the script so something is always happening.
            let (state, _) = SCRIPT[(step + i * 2) % SCRIPT.len()];
            let status = serde_json::json!({"status": {
                "printableStatus": state,
                "ready": state == "Running",
                "migrationState": if state == "Migrating" {
                    serde_json::json!({"targetNode": format!("node-{}", (i + step) % 3), "startTimestamp": jiff::Timestamp::now().to_string()})
                } else { serde_json::Value::Null },
            }})
            .to_string();
            let name = format!("vm-{i}");
            let _ = cluster.kubectl_run(
                User::Admin,
                &[
                    "patch",
                    "vm",
                    &name,
                    "-n",
                    NAMESPACE,
                    "--subresource=status",
                    "--type=merge",
                    "-p",
                    &status,
                ],
                None,
            );
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
