//! End-to-end tests: the real kubectl → a real kube-apiserver (aggregation layer) → our server.
//! The cluster, the server and the fixtures the tests share come from `ifo-test-support`.

mod admission;
mod aggregation;
mod argocd;
mod cost;
mod deploy;
mod detection;
mod flood;
mod gates;
mod guard;
mod guard_boundary;
mod hostile;
mod leader;
mod library;
mod live_api;
mod metrics;
mod openapi;
mod operator;
mod plan;
mod plugin;
mod prometheus;
mod related;
mod rule_schemas;
mod rules;
mod security;
mod staleness;
mod supervision;
mod tenancy;
mod ui;
