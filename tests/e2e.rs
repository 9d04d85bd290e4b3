//! End-to-end tests: the real kubectl → a real kube-apiserver (aggregation layer) → our server.

#[path = "e2e/aggregation.rs"]
mod aggregation;
#[path = "e2e/harness.rs"]
mod harness;
