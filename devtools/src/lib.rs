//! The local real cluster shared by the demo, the end-to-end tests and the benchmarks.
//!
//! It controls processes (a parent-death signal for each child, signals to stop or freeze them),
//! which takes `libc` calls: the only unsafe code of the project, and none of it in the server.
#![allow(unsafe_code)]

mod binaries;
mod cluster;
pub mod helm;
mod host;
pub mod install;
mod node;
pub mod pki;
mod port;
mod process;
mod server;
pub mod workload;

pub use binaries::{Binaries, NodeBinaries, oldest_release, pinned, source_dir};
pub use cluster::{
    Cluster, GUARD_WEBHOOK, RULESET_WEBHOOK, SERVER_USER, SERVICE_NAME, SERVICE_NAMESPACE,
    ServingCert, User, WEBHOOK_CLIENT_NAME,
};
pub use host::put_back_after_a_killed_node;
pub use node::{NODE_IP, Node};
pub use pki::{KeyPair, Usage};
pub use port::free_port;
pub use process::Process;
pub use server::{Ports, spawn_server};
