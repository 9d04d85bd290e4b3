//! The local real cluster shared by the demo, the end-to-end tests and the benchmarks.

mod binaries;
mod cluster;
mod pki;
mod process;
pub mod workload;

pub use binaries::{Binaries, source_dir};
pub use cluster::{Cluster, SERVER_USER, SERVICE_NAME, SERVICE_NAMESPACE, ServingCert, User};
pub use pki::{KeyPair, Usage};
pub use process::Process;
