//! The local real cluster shared by the demo, the end-to-end tests and the benchmarks.

mod binaries;
mod cluster;
pub mod pki;
mod process;
mod server;
pub mod workload;

pub use binaries::{Binaries, source_dir};
pub use cluster::{
    Cluster, SERVER_USER, SERVICE_NAME, SERVICE_NAMESPACE, ServingCert, User, free_port,
};
pub use pki::{KeyPair, Usage};
pub use process::Process;
pub use server::spawn_server;
