//! The schemas rules are checked against, read from kube-apiserver: a CRD target's
//! `openAPIV3Schema` (the CustomResourceDefinition `<resource>.<group>`), each read bounded by
//! [`FETCH_DEADLINE`] and kept [`KEPT_FOR`] (or until [`Schemas::forget`]) in a cache of at most
//! [`MAX_KEPT`] targets and [`MAX_KEPT_BYTES`] of schemas (a KubeVirt CRD's schema is hundreds of
//! kilobytes). The rulesets' admission door reads them for each review; the controller for the
//! rulesets' status, again when a CRD changes.
//!
//! Built-in types (the core group, and groups without a dot) are not looked up: their schemas
//! are in kube-apiserver's `/openapi/v3`, documents of megabytes, too much for a door that must
//! answer within seconds. What is not found, or not read in time, is said (the review's
//! warnings, the ruleset's `SchemaChecked` condition), and the ruleset is not refused for it.

use super::{Schema, of_crd};
use crate::ruleset::Target;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Longest a CRD is waited for: kube-apiserver gives the whole review 5 s.
pub(crate) const FETCH_DEADLINE: Duration = Duration::from_secs(2);

/// How long a CRD read (or found absent) is kept: a CRD changed or installed since is seen
/// after this at most.
pub(crate) const KEPT_FOR: Duration = Duration::from_secs(30);

/// Most targets kept.
pub(crate) const MAX_KEPT: u64 = 64;

/// Most bytes of schemas kept (as JSON; their size in memory is a few times that).
pub(crate) const MAX_KEPT_BYTES: u64 = 8 << 20;

/// Most targets looked up for one review (its own and its related parts').
pub(crate) const MAX_LOOKUPS: usize = 4;

/// What was found of one target's schema.
#[derive(Debug, Clone)]
pub(crate) enum Lookup {
    Found(Arc<Schema>),
    /// Not to be had: why, as the warning says it.
    Absent(String),
}

/// The schemas found for one review's targets.
#[derive(Debug, Default, Clone)]
pub(crate) struct Found {
    pub by_target: HashMap<Target, Lookup>,
}

impl Found {
    /// The schema of `target`, when found.
    pub(crate) fn schema(&self, target: &Target) -> Option<&Schema> {
        match self.by_target.get(target) {
            Some(Lookup::Found(s)) => Some(s),
            _ => None,
        }
    }
}

/// Reads and keeps CRD schemas.
pub(crate) struct Schemas {
    client: kube::Client,
    kept: moka::future::Cache<Target, Lookup>,
}

impl Schemas {
    pub(crate) fn new(client: kube::Client) -> Schemas {
        Schemas {
            client,
            // Weighed in bytes, each entry at least a 64th of the bytes, so that both bounds
            // hold.
            kept: moka::future::Cache::builder()
                .max_capacity(MAX_KEPT_BYTES)
                .weigher(|_, lookup: &Lookup| {
                    let floor = MAX_KEPT_BYTES / MAX_KEPT;
                    let bytes = match lookup {
                        Lookup::Found(schema) => schema.json_bytes().max(floor),
                        Lookup::Absent(_) => floor,
                    };
                    u32::try_from(bytes).unwrap_or(u32::MAX)
                })
                .time_to_live(KEPT_FOR)
                .build(),
        }
    }

    /// Forgets what was read of every target of the CRD named `crd` (`<resource>.<group>`),
    /// whatever its version, so that the next lookup reads it again (it changed, or appeared).
    pub(crate) async fn forget_crd(&self, crd: &str) {
        let stale: Vec<Target> = self
            .kept
            .iter()
            .filter(|(t, _)| t.crd_name() == crd)
            .map(|(t, _)| (*t).clone())
            .collect();
        for target in stale {
            self.kept.invalidate(&target).await;
        }
    }

    /// The schemas of `targets` (the first [`MAX_LOOKUPS`]), read at once.
    pub(crate) async fn lookup(&self, targets: &[Target]) -> Found {
        let mut unique: Vec<&Target> = Vec::new();
        for t in targets {
            if !unique.contains(&t) && unique.len() < MAX_LOOKUPS {
                unique.push(t);
            }
        }
        let found = futures::future::join_all(unique.iter().map(|t| self.one(t))).await;
        Found {
            by_target: unique.into_iter().cloned().zip(found).collect(),
        }
    }

    async fn one(&self, target: &Target) -> Lookup {
        if is_built_in(target) {
            return Lookup::Absent(format!(
                "{target} is a built-in type: only the schemas of CRDs are checked here"
            ));
        }
        if let Some(kept) = self.kept.get(target).await {
            return kept;
        }
        let (lookup, keep) = self.fetch(target).await;
        if keep {
            self.kept.insert(target.clone(), lookup.clone()).await;
        }
        lookup
    }

    /// The CRD's schema of `target`'s version, and whether the answer is worth keeping (not a
    /// timeout or an error that may pass).
    async fn fetch(&self, target: &Target) -> (Lookup, bool) {
        let name = target.crd_name();
        let crds: Api<DynamicObject> = Api::all_with(
            self.client.clone(),
            &ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
                "customresourcedefinitions",
            ),
        );
        match tokio::time::timeout(FETCH_DEADLINE, crds.get_opt(&name)).await {
            Err(_) => (
                Lookup::Absent(format!(
                    "the CustomResourceDefinition {name} was not read within {FETCH_DEADLINE:?}"
                )),
                false,
            ),
            Ok(Err(e)) => (
                Lookup::Absent(format!(
                    "the CustomResourceDefinition {name} could not be read: {}",
                    short(&e.to_string())
                )),
                false,
            ),
            Ok(Ok(None)) => (
                Lookup::Absent(format!("no CustomResourceDefinition {name} is installed")),
                true,
            ),
            Ok(Ok(Some(crd))) => {
                let crd = serde_json::to_value(&crd).unwrap_or_default();
                let schema = of_crd(&crd)
                    .into_iter()
                    .find_map(|(t, s)| (t == *target).then_some(s));
                match schema {
                    Some(s) => (Lookup::Found(Arc::new(s)), true),
                    None => (
                        Lookup::Absent(format!(
                            "the CustomResourceDefinition {name} has no schema for version {}",
                            target.version
                        )),
                        true,
                    ),
                }
            }
        }
    }
}

/// The core group, and the groups without a dot (`apps`, `batch`, `policy`), are
/// kube-apiserver's own.
fn is_built_in(target: &Target) -> bool {
    !target.group.contains('.')
}

fn short(text: &str) -> String {
    crate::evaluate::truncated(text.to_owned(), 120)
}
