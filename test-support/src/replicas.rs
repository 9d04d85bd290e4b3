//! Extra replicas of the server on the shared cluster, with leader election on a Lease of the
//! caller's choosing, called directly with an admin client certificate. Short periods (lease
//! 6s, renew 4s, retry 1s) keep the tests quick; the logic is the same at the defaults.
//!
//! A replica runs the same `ifo-apiserver` as the environment ([`crate::server_binary`]), with
//! the settings of [`replica`] and the caller's, not the environment's (no persistence, the
//! server's default debounce, unless the caller sets them).

use std::time::Duration;

use ifo_dev::{Process, User};
use serde_json::Value;

use crate::{Env, eventually};

/// The list of every operation.
pub const LIST: &str = "/apis/live.ifo.kubevirt.io/v1alpha1/inflightoperations";
/// The replicas' lease duration.
pub const LEASE_DURATION: Duration = Duration::from_secs(6);

/// One replica: its port, its process (killed on drop) and its pod object (deleted on drop).
pub struct Replica {
    /// The port it listens on (loopback).
    pub port: u16,
    /// Its process.
    pub process: Process,
    /// The name of its pod object in `ifo-system`.
    pub pod: String,
}

/// A replica with a pod object of its own to label (never scheduled: only its labels matter).
pub fn replica(env: &Env, lease: &str, n: usize) -> Replica {
    replica_with(env, lease, n, &[])
}

/// The Pod object a replica named `pod` runs as (its `POD_NAME`), for the leader election's
/// holder checks: no kubelet runs it, so nothing ever proves its holder gone.
pub fn replica_pod(env: &Env, pod: &str) {
    env.apply(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {pod}, namespace: ifo-system}}\n\
         spec:\n\
         \x20 securityContext: {{runAsNonRoot: true, seccompProfile: {{type: RuntimeDefault}}}}\n\
         \x20 containers:\n\
         \x20 - name: server\n\
         \x20   image: ifo-apiserver:test\n\
         \x20   securityContext: {{allowPrivilegeEscalation: false, capabilities: {{drop: [ALL]}}}}\n"
    ));
}

/// [`replica`] with more settings.
pub fn replica_with(env: &Env, lease: &str, n: usize, settings: &[(&str, &str)]) -> Replica {
    let pod = format!("{lease}-{n}");
    replica_pod(env, &pod);
    let (port, process) = spawn(env, lease, &pod, &format!("{lease}-{n}.log"), settings);
    Replica { port, process, pod }
}

/// Starts one replica's process electing itself on `lease` as pod `pod` (whose object the caller
/// creates: [`replica_pod`]), logging to `log` in the cluster's directory, with the replicas'
/// short periods and then `settings`: its API's port and process.
pub fn spawn(
    env: &Env,
    lease: &str,
    pod: &str,
    log: &str,
    settings: &[(&str, &str)],
) -> (u16, Process) {
    let ports = ifo_dev::Ports::free().unwrap();
    let process = ifo_dev::spawn_server(
        &env.cluster,
        &crate::server_binary(),
        ports,
        &[
            ("LEADER_ELECT", "true"),
            ("LEADER_ELECT_RESOURCE_NAME", lease),
            ("POD_NAMESPACE", "ifo-system"),
            ("POD_NAME", pod),
            ("LEADER_ELECT_LEASE_DURATION", "6s"),
            ("LEADER_ELECT_RENEW_DEADLINE", "4s"),
            ("LEADER_ELECT_RETRY_PERIOD", "1s"),
            ("SHUTDOWN_DELAY", "1s"),
            ("LOG_LEVEL", "info,ifo=debug"),
        ]
        .into_iter()
        .chain(settings.iter().copied())
        .collect::<Vec<_>>(),
        log,
    )
    .unwrap();
    (ports.api, process)
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.process.kill();
        // The environment the replica was started on, whatever its configuration.
        let Some(env) = crate::env::running() else {
            return;
        };
        let _ = env.kubectl(
            User::Admin,
            &[
                "-n",
                "ifo-system",
                "delete",
                "pod",
                &self.pod,
                "--wait=false",
            ],
        );
    }
}

/// Whether the replica's pod carries the leader label the Service selects.
pub fn labelled(env: &Env, replica: &Replica) -> bool {
    marked(env, replica, "leader")
}

/// Whether the replica's pod carries `ifo.kubevirt.io/<mark>=true` (`leader`, `standby`).
pub fn marked(env: &Env, replica: &Replica, mark: &str) -> bool {
    env.kubectl(
        User::Admin,
        &[
            "-n",
            "ifo-system",
            "get",
            "pod",
            &replica.pod,
            "-o",
            &format!("jsonpath={{.metadata.labels.ifo\\.kubevirt\\.io/{mark}}}"),
        ],
    )
    .is_ok_and(|v| v == "true")
}

/// `(HTTP status, body)` of a direct request as the cluster admin (client certificate).
pub fn get(env: &Env, port: u16, path: &str) -> (String, String) {
    let certs = env.client_cert_args(User::Admin);
    let args: Vec<&str> = certs.iter().map(String::as_str).collect();
    env.direct_to(port, path, &args)
}

/// The resourceVersion of a list from the replica on `port` (which must serve). A request
/// that got no answer at all (curl's `000`: the machine too loaded to answer within curl's
/// 10 s, e.g. while kube-apiserver is slow to review the request) is asked again, for up to
/// 30 s; any answer other than 200 fails at once.
pub fn list_rv(env: &Env, port: u16) -> u64 {
    let (code, body) = eventually(Duration::from_secs(30), "an answer to a list", || {
        let (code, body) = get(env, port, LIST);
        (code != "000").then_some((code, body))
    });
    assert_eq!(code, "200", "{body}");
    let list: Value = serde_json::from_str(&body).unwrap();
    list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// Two replicas electing themselves on `lease` with `settings` ([`replica_with`]), once one of
/// them leads: the replicas, and the index of the leader (the other is the standby).
pub fn elected_pair(env: &Env, lease: &str, settings: &[(&str, &str)]) -> ([Replica; 2], usize) {
    let replicas = [
        replica_with(env, lease, 0, settings),
        replica_with(env, lease, 1, settings),
    ];
    let leader = the_leader(env, &replicas);
    (replicas, leader)
}

/// The index of the one replica that answers lists (the other must answer 503).
pub fn the_leader(env: &Env, replicas: &[Replica]) -> usize {
    eventually(
        Duration::from_secs(90),
        "exactly one replica serving",
        || {
            let codes: Vec<String> = replicas.iter().map(|r| get(env, r.port, LIST).0).collect();
            let serving: Vec<usize> = (0..codes.len()).filter(|&i| codes[i] == "200").collect();
            let refusing = codes.iter().filter(|c| *c == "503").count();
            (serving.len() == 1 && refusing == codes.len() - 1).then(|| serving[0])
        },
    )
}
