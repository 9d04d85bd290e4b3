//! Talking to kube-apiserver: the user's kubeconfig, the two resources, lists, gets and watches,
//! and errors turned into messages that say what to do.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use futures::{Stream, StreamExt};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Config};

use super::filter::Filters;
use super::op::{
    APISERVICE, CLUSTER_KIND, CLUSTER_PLURAL, GROUP, NAMESPACED_KIND, NAMESPACED_PLURAL, Op,
    VERSION,
};
use super::warnings::Warnings;

/// The namespaced or the cluster-scoped kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    /// `inflightoperations`: operations on namespaced subjects.
    Namespaced,
    /// `inflightclusteroperations`: operations on cluster-scoped subjects.
    Cluster,
}

impl Resource {
    /// The resource's plural, as in its URL and in RBAC rules.
    pub fn plural(self) -> &'static str {
        match self {
            Resource::Namespaced => NAMESPACED_PLURAL,
            Resource::Cluster => CLUSTER_PLURAL,
        }
    }

    fn api_resource(self) -> ApiResource {
        let kind = match self {
            Resource::Namespaced => NAMESPACED_KIND,
            Resource::Cluster => CLUSTER_KIND,
        };
        api_resource(GROUP, VERSION, kind, self.plural())
    }
}

/// What went wrong when the user asked to `verb` the resource `resource` (`<plural>.<group>`),
/// and on a 403 what reading it `needs`.
pub fn access_error(e: &kube::Error, verb: &str, resource: &str, needs: &str) -> anyhow::Error {
    let plural = resource.split('.').next().unwrap_or(resource);
    match e {
        kube::Error::Api(s) if s.code == 403 => anyhow!(
            "forbidden: you may not {verb} {resource}; {needs}\n  ({})",
            s.message
        ),
        kube::Error::Api(s) => anyhow!("cannot {verb} {plural}: {} ({})", s.message, s.code),
        other => anyhow!("cannot {verb} {plural}: {other}"),
    }
}

/// The resource `plural` (of `kind`) of `group`/`version`, for dynamic requests.
pub fn api_resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// Where to look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Operations on subjects in one namespace.
    Namespace(String),
    /// Every namespace, and operations on cluster-scoped subjects.
    All,
    /// Operations on cluster-scoped subjects only.
    Cluster,
}

impl Scope {
    /// The (resource, namespace) pairs to request.
    pub fn requests(&self) -> Vec<(Resource, Option<&str>)> {
        match self {
            Scope::Namespace(ns) => vec![(Resource::Namespaced, Some(ns.as_str()))],
            Scope::All => vec![(Resource::Namespaced, None), (Resource::Cluster, None)],
            Scope::Cluster => vec![(Resource::Cluster, None)],
        }
    }

    /// Whether rows need a NAMESPACE column.
    pub fn namespace_column(&self) -> bool {
        *self == Scope::All
    }

    /// `in namespace "x"`, for messages.
    pub fn describe(&self) -> String {
        match self {
            Scope::Namespace(ns) => format!("in namespace {ns:?}"),
            Scope::All => "in any namespace or on cluster-scoped subjects".into(),
            Scope::Cluster => "on cluster-scoped subjects".into(),
        }
    }
}

/// Which kubeconfig entries to use and how, from kubectl's flags.
#[derive(Clone, Default)]
pub struct Connection {
    /// `--kubeconfig`.
    pub kubeconfig: Option<PathBuf>,
    /// `--context`, `--cluster` and `--user`: entries of the kubeconfig.
    pub entries: KubeConfigOptions,
    /// `--as`: the user to impersonate.
    pub as_user: Option<String>,
    /// `--as-group`: groups to impersonate.
    pub as_groups: Vec<String>,
    /// `--request-timeout`: the longest a request may take (connecting, for a watch).
    pub request_timeout: Option<Duration>,
    /// Whether the command watches (its requests stay open: only connecting is limited).
    pub watches: bool,
}

/// A client from the kubeconfig (`--kubeconfig`, else `KUBECONFIG`, else `~/.kube/config`, else
/// the in-cluster service account) with kubectl's `--context`, `--cluster`, `--user`, `--as`,
/// `--as-group` and `--request-timeout`; with the context's default namespace, and the warnings
/// the server sends with its answers.
pub async fn connect(conn: &Connection) -> Result<(Client, String, Warnings)> {
    let options = &conn.entries;
    let chosen = options.context.is_some() || options.cluster.is_some() || options.user.is_some();
    let mut config = match (&conn.kubeconfig, chosen) {
        (Some(path), _) => {
            // Errors by their message only: their sources repeat it.
            let file = Kubeconfig::read_from(path)
                .map_err(|e| anyhow!("cannot read kubeconfig {}: {e}", path.display()))?;
            Config::from_custom_kubeconfig(file, options)
                .await
                .map_err(|e| anyhow!("cannot use kubeconfig {}: {e}", path.display()))?
        }
        (None, true) => Config::from_kubeconfig(options)
            .await
            .map_err(|e| anyhow!("cannot use the kubeconfig: {e}"))?,
        (None, false) => Config::infer().await.map_err(|e| {
            anyhow!("no usable kubeconfig (set KUBECONFIG or use --kubeconfig): {e}")
        })?,
    };
    if let Some(user) = &conn.as_user {
        config.auth_info.impersonate = Some(user.clone());
        config.auth_info.impersonate_groups =
            (!conn.as_groups.is_empty()).then(|| conn.as_groups.clone());
    }
    if let Some(timeout) = conn.request_timeout.filter(|t| !t.is_zero()) {
        config.connect_timeout = Some(timeout);
        if !conn.watches {
            config.read_timeout = Some(timeout);
            config.write_timeout = Some(timeout);
        }
    }
    let namespace = config.default_namespace.clone();
    let warnings = Warnings::default();
    let client = kube::client::ClientBuilder::try_from(config)
        .context("cannot build a client from the kubeconfig")?
        .with_layer(&warnings.layer())
        .build();
    Ok((client, namespace, warnings))
}

fn api(client: &Client, resource: Resource, namespace: Option<&str>) -> Api<DynamicObject> {
    let ar = resource.api_resource();
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    }
}

fn where_(resource: Resource, namespace: Option<&str>) -> String {
    match (resource, namespace) {
        (_, Some(ns)) => format!("in namespace {ns:?}"),
        (Resource::Namespaced, None) => "in all namespaces".into(),
        (Resource::Cluster, None) => "(cluster-scoped)".into(),
    }
}

/// Whether a 404 means the resource itself is not served (rather than one object missing).
fn resource_missing(status: &kube::core::Status) -> bool {
    let named = status.details.as_ref().is_some_and(|d| !d.name.is_empty());
    !named
        || status
            .message
            .contains("could not find the requested resource")
}

/// What a refusal to list every namespace suggests (not where every namespace was the question).
pub const ALL_NAMESPACES_HINT: &str = "; use -n NAMESPACE for a namespace you may read";

/// A message saying what went wrong and what to do, for an error of `verb` on `resource`.
pub fn explain(
    err: &kube::Error,
    verb: &str,
    resource: Resource,
    namespace: Option<&str>,
) -> String {
    let plural = resource.plural();
    let place = where_(resource, namespace);
    match err {
        kube::Error::Api(s) if s.code == 403 => {
            let hint = match (resource, namespace) {
                (Resource::Namespaced, None) => ALL_NAMESPACES_HINT.to_string(),
                (Resource::Cluster, None) => {
                    "; without -A, only the current namespace is listed".to_string()
                }
                (_, Some(ns)) => format!(
                    "; you need a role that grants {verb} on {plural}.{GROUP} in {ns:?} (e.g. view)"
                ),
            };
            format!(
                "forbidden: you may not {verb} {plural}.{GROUP} {place}{hint}\n  ({})",
                s.message
            )
        }
        kube::Error::Api(s) if s.code == 404 && resource_missing(s) => format!(
            "the API {GROUP}/{VERSION} is not served: the APIService {APISERVICE} isn't available \
             (is ifo-apiserver installed? see `kubectl get apiservice {APISERVICE}`)"
        ),
        kube::Error::Api(s) if s.code == 503 => format!(
            "the APIService {APISERVICE} isn't available: its server does not answer \
             (see `kubectl get apiservice {APISERVICE}`): {}",
            s.message
        ),
        kube::Error::Api(s) if s.code == 401 => format!(
            "unauthorized: the cluster rejected your credentials ({})",
            s.message
        ),
        kube::Error::Api(s) => {
            format!("cannot {verb} {plural} {place}: {} ({})", s.message, s.code)
        }
        other => format!("cannot {verb} {plural} {place}: {other}"),
    }
}

fn params(filters: &Filters) -> ListParams {
    let mut lp = ListParams::default();
    if let Some(f) = filters.field_selector() {
        lp = lp.fields(&f);
    }
    if let Some(l) = filters.label_selector() {
        lp = lp.labels(l);
    }
    lp
}

fn to_op(obj: DynamicObject) -> Op {
    Op::from_json(serde_json::to_value(obj).unwrap_or_default())
}

/// Every operation in `scope` that matches `filters` (server-side selectors; the node here).
pub async fn list(client: &Client, scope: &Scope, filters: &Filters) -> Result<Vec<Op>> {
    let lp = params(filters);
    let mut ops = Vec::new();
    for (resource, namespace) in scope.requests() {
        let list = api(client, resource, namespace)
            .list(&lp)
            .await
            .map_err(|e| anyhow!(explain(&e, "list", resource, namespace)))?;
        ops.extend(
            list.items
                .into_iter()
                .map(to_op)
                .filter(|op| filters.on_node(op)),
        );
    }
    Ok(ops)
}

/// One operation by name; `None` if there is none.
pub async fn get(
    client: &Client,
    resource: Resource,
    namespace: Option<&str>,
    name: &str,
) -> Result<Option<Op>> {
    match api(client, resource, namespace).get(name).await {
        Ok(obj) => Ok(Some(to_op(obj))),
        Err(kube::Error::Api(s)) if s.code == 404 && !resource_missing(&s) => Ok(None),
        Err(e) => Err(anyhow!(explain(&e, "get", resource, namespace))),
    }
}

/// A watch event, reduced to what the plugin needs.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A (re)list starts: what follows until `InitDone` is the complete set.
    Init,
    /// One object of the (re)list.
    InitApply(Op),
    /// The (re)list is complete: what was not in it is gone.
    InitDone,
    /// An object was added or modified.
    Apply(Op),
    /// An object was deleted (the object as last seen).
    Delete(Op),
}

/// Events of every resource in `scope`, tagged with the index of their stream. Transient errors
/// are retried with backoff (and reported as `Err(message, fatal=false)`); forbidden and
/// not-served are fatal.
pub fn watch(
    client: &Client,
    scope: &Scope,
    filters: &Filters,
) -> impl Stream<Item = (usize, Result<Event, (String, bool)>)> + use<> {
    let mut config = watcher::Config::default();
    if let Some(f) = filters.field_selector() {
        config = config.fields(&f);
    }
    if let Some(l) = filters.label_selector() {
        config = config.labels(l);
    }
    let streams = scope
        .requests()
        .into_iter()
        .enumerate()
        .map(|(i, (resource, namespace))| {
            let namespace = namespace.map(str::to_owned);
            let api = api(client, resource, namespace.as_deref());
            watcher(api, config.clone())
                .default_backoff()
                .map(move |ev| {
                    let ev = match ev {
                        Ok(watcher::Event::Init) => Ok(Event::Init),
                        Ok(watcher::Event::InitApply(o)) => Ok(Event::InitApply(to_op(o))),
                        Ok(watcher::Event::InitDone) => Ok(Event::InitDone),
                        Ok(watcher::Event::Apply(o)) => Ok(Event::Apply(to_op(o))),
                        Ok(watcher::Event::Delete(o)) => Ok(Event::Delete(to_op(o))),
                        Err(e) => Err(watch_error(&e, resource, namespace.as_deref())),
                    };
                    (i, ev)
                })
                .boxed()
        })
        .collect::<Vec<_>>();
    futures::stream::select_all(streams)
}

fn watch_error(e: &watcher::Error, resource: Resource, namespace: Option<&str>) -> (String, bool) {
    let (inner, verb) = match e {
        watcher::Error::InitialListFailed(k) => (Some(k), "list"),
        watcher::Error::WatchStartFailed(k) | watcher::Error::WatchFailed(k) => (Some(k), "watch"),
        _ => (None, "watch"),
    };
    match inner {
        Some(k) => {
            let fatal = matches!(k, kube::Error::Api(s) if matches!(s.code, 401 | 403 | 404));
            (explain(k, verb, resource, namespace), fatal)
        }
        None => (
            format!("watch of {} interrupted: {e}", resource.plural()),
            false,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16, message: &str, name: Option<&str>) -> kube::Error {
        let details = name.map(|n| {
            serde_json::from_value(serde_json::json!({"name": n, "kind": "inflightoperations"}))
                .unwrap()
        });
        kube::Error::Api(Box::new(kube::core::Status {
            code,
            message: message.into(),
            details,
            ..Default::default()
        }))
    }

    #[test]
    fn scopes_pick_resources() {
        assert_eq!(
            Scope::Namespace("a".into()).requests(),
            [(Resource::Namespaced, Some("a"))]
        );
        assert_eq!(
            Scope::All.requests(),
            [(Resource::Namespaced, None), (Resource::Cluster, None)]
        );
        assert_eq!(Scope::Cluster.requests(), [(Resource::Cluster, None)]);
        assert!(Scope::All.namespace_column());
        assert!(!Scope::Cluster.namespace_column());
    }

    #[test]
    fn errors_say_what_to_do() {
        let missing = status(
            404,
            "the server could not find the requested resource",
            None,
        );
        let text = explain(&missing, "list", Resource::Namespaced, Some("ns"));
        assert!(
            text.contains("the APIService v1alpha1.live.ifo.kubevirt.io isn't available"),
            "{text}"
        );
        let unavailable = status(
            503,
            "the server is currently unable to handle the request",
            None,
        );
        let text = explain(&unavailable, "list", Resource::Cluster, None);
        assert!(
            text.contains("v1alpha1.live.ifo.kubevirt.io isn't available"),
            "{text}"
        );

        let forbidden = status(403, "User \"alice\" cannot list ...", None);
        let text = explain(&forbidden, "list", Resource::Namespaced, None);
        assert!(
            text.starts_with(
                "forbidden: you may not list inflightoperations.live.ifo.kubevirt.io in all namespaces; use -n NAMESPACE"
            ),
            "{text}"
        );
        let text = explain(&forbidden, "watch", Resource::Namespaced, Some("ns1"));
        assert!(
            text.starts_with("forbidden: you may not watch inflightoperations.live.ifo.kubevirt.io in namespace \"ns1\""),
            "{text}"
        );
        assert!(text.contains("User \"alice\" cannot list"), "{text}");
    }

    #[test]
    fn a_missing_object_is_not_a_missing_api() {
        let kube::Error::Api(s) = status(404, "inflightoperations \"x\" not found", Some("x"))
        else {
            unreachable!()
        };
        assert!(!resource_missing(&s));
        let kube::Error::Api(s) = status(
            404,
            "the server could not find the requested resource",
            None,
        ) else {
            unreachable!()
        };
        assert!(resource_missing(&s));
    }
}
