//! End-to-end tests: the real kubectl → a real kube-apiserver (aggregation layer) → our server.

#[path = "e2e/aggregation.rs"]
mod aggregation;
#[path = "e2e/cost.rs"]
mod cost;
#[path = "e2e/deploy.rs"]
mod deploy;
#[path = "e2e/detection.rs"]
mod detection;
#[path = "e2e/gates.rs"]
mod gates;
#[path = "e2e/harness.rs"]
#[allow(dead_code)] // shared with the restart binary; this one uses part of it
mod harness;
#[path = "e2e/hostile.rs"]
mod hostile;
#[path = "e2e/leader.rs"]
mod leader;
#[path = "e2e/library.rs"]
mod library;
#[path = "e2e/live_api.rs"]
mod live_api;
#[path = "e2e/metrics.rs"]
mod metrics;
#[path = "e2e/openapi.rs"]
mod openapi;
#[path = "e2e/operator.rs"]
mod operator;
#[path = "e2e/plugin.rs"]
mod plugin;
#[path = "e2e/prometheus.rs"]
mod prometheus;
#[path = "e2e/replicas.rs"]
mod replicas;
#[path = "e2e/rules.rs"]
mod rules;
#[path = "e2e/security.rs"]
mod security;
#[path = "e2e/staleness.rs"]
mod staleness;
#[path = "e2e/supervision.rs"]
mod supervision;
#[path = "e2e/ui.rs"]
mod ui;
