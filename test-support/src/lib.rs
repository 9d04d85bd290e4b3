//! What the server's integration tests share: one real control plane and one `ifo-apiserver`
//! per test binary ([`Env`]), the ways tests talk to them (kubectl, through kube-apiserver or
//! directly, curl, raw watches, commands run to the end: [`Run`]), a test's own names
//! ([`Scope`]), object builders ([`vm`], [`vm_ruleset`], [`RuleSet`], gadgets:
//! [`Env::gadget_scope`], Node objects: [`Env::node`]), readers of gates ([`clear_condition`],
//! [`Env::wait_gate`]), evictions through the guard ([`evict`], [`held_node`]) and the attacks on its doors
//! ([`attacks`]), extra replicas with leader election ([`replicas`]) and [`eventually`].
//!
//! A crate of its own, like linkerd2-proxy's integration test support, rather than files each
//! test binary includes with `#[path]`: it is compiled once for every binary, a binary that uses
//! part of it needs no `#[allow(dead_code)]`, and the environment's configuration is a value
//! ([`Env::builder`]) instead of global switches set before the first start, so a test that asks
//! for another environment than its binary runs is told so instead of silently getting the
//! other one.
//!
//! The environment runs the `ifo-apiserver` that cargo builds for the `ifo` package's
//! integration tests ([`server_binary`]): only those tests (`tests/` of the workspace's root)
//! can start it.

pub mod attacks;
pub mod browser;
mod client;
mod command;
mod door;
mod env;
mod fixtures;
mod gadgets;
mod gate;
mod guard;
pub mod replicas;
mod ruleset;
mod scope;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The object of `kind` named `name` among `objects` (manifests read as JSON); panics naming
/// them when there is none.
pub fn find_object<'a>(
    objects: &'a [serde_json::Value],
    kind: &str,
    name: &str,
) -> &'a serde_json::Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

pub use client::{KeepAliveClient, WatchStream, completion};
pub use command::{Run, Running, follow, lines_of, rss_kib, start};
pub use door::{
    accepted, apply, broken_rules, closed_gadget_crd, denied_by, door_open, job_ruleset,
    not_created, refused, ruleset, ruleset_over, said_all, stored,
};
pub use env::{Builder, Env, MAX_WATCHES_PER_USER, Stop, env};
pub use fixtures::{
    HEAVY, MIGRATING, OPERATION_COLUMNS, TestNode, cronjob, cronjob_ruleset, heavy_ruleset,
    heavy_vm, node_vm_ruleset, populated, populated_for_alice, slow_vm, vm, vm_ruleset,
};
pub use gadgets::{
    BUSY, busy_gadgets, crd_serving, create_gadget_crd, establish_gadget_crd, gadget, gadget_crd,
    gadget_crd_serving, grant_gadgets,
};
pub use gate::{
    clear_condition, clear_status, gate_operations, unknown_only_for_others_first_lists,
};
pub use guard::{
    Attacker, Evicted, UnderAttack, apiserver_metric, evict, evict_with, evictions_under,
    held_node, pod_on, posted, probed, tcp_from, tls_client, tls_from, wait_held,
};
pub use ruleset::{Rule, RuleSet};
pub use scope::{DeletedOnDrop, Scope};

/// Polls `f` until it returns `Some`, or panics with `what` after `timeout`.
pub fn eventually<T>(timeout: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() <= deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Every file under `dir`, in it and in the folders below it that `enter` lets in (depth first;
/// not sorted).
pub fn files_under(dir: &Path, enter: impl Fn(&Path) -> bool) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if !path.is_dir() {
                files.push(path);
            } else if enter(&path) {
                dirs.push(path);
            }
        }
    }
    files
}

/// The `kubectl-ifo` binary of this build (a workspace member of its own: `cargo build
/// --workspace` builds it next to the test binaries' directory).
pub fn plugin_binary() -> PathBuf {
    let path = next_to_test_binaries("kubectl-ifo");
    assert!(
        path.exists(),
        "{} is missing: build the workspace first (cargo build --workspace)",
        path.display()
    );
    path
}

/// The `ifo-apiserver` binary of this build, which cargo builds for the `ifo` package's
/// integration tests: where cargo says it is (`CARGO_BIN_EXE_ifo-apiserver`, set when cargo runs
/// them), else next to the test binaries' directory.
pub fn server_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("CARGO_BIN_EXE_ifo-apiserver") {
        return path.into();
    }
    let path = next_to_test_binaries("ifo-apiserver");
    assert!(
        path.exists(),
        "{} is missing: cargo builds it for the integration tests of the `ifo` package \
         (cargo test -p ifo --test <binary>)",
        path.display()
    );
    path
}

/// `name` in the directory of this build's binaries: target/<profile>/deps/<test> →
/// target/<profile>/<name>.
fn next_to_test_binaries(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.parent()
        .and_then(|deps| deps.parent())
        .expect("the test binary lives in target/<profile>/deps")
        .join(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eventually_returns_the_first_value() {
        let mut calls = 0;
        let v = eventually(Duration::from_secs(5), "the third call", || {
            calls += 1;
            (calls == 3).then_some(calls)
        });
        assert_eq!(v, 3);
    }

    #[test]
    #[should_panic(expected = "timed out after 0ns waiting for nothing")]
    fn eventually_gives_up() {
        eventually(Duration::ZERO, "nothing", || None::<()>);
    }
}
