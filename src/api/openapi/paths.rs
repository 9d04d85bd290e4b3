//! The operations of our group version, described as kube-apiserver describes its own: the same
//! paths, operation ids, `x-kubernetes-action` and `x-kubernetes-group-version-kind`, so
//! `kubectl explain` finds a resource's kind from its path, and the merged cluster document
//! reads like the rest of it.
//!
//! Only paths under `/apis/live.ifo.kubevirt.io/v1alpha1/` are listed: the aggregator drops
//! anything else, and a path also served by another API server would break the cluster's merged
//! `/openapi/v2`.

use super::schema::{PREFIX, reference};
use super::v3;
use crate::api::resource::{GROUP, GROUP_VERSION, Resource, VERSION};
use crate::api::served::SERVED;
use crate::operation::SELECTABLE_FIELDS;
use serde_json::{Map, Value, json};

/// What an operation does, as `x-kubernetes-action` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "lowercase")]
enum Action {
    Get,
    List,
    Watch,
    WatchList,
}

impl Action {
    fn as_str(self) -> &'static str {
        self.into()
    }

    /// Media types of the response: watches (and lists, which `watch=true` turns into one)
    /// stream events; this server writes JSON only.
    fn produces(self) -> &'static [&'static str] {
        match self {
            Action::Get => &["application/json"],
            _ => &["application/json", "application/json;stream=watch"],
        }
    }
}

/// A parameter, with what a v2 document says of it (v3 nests `type` under `schema`).
struct Parameter {
    name: &'static str,
    location: &'static str,
    kind: &'static str,
    description: String,
}

impl Parameter {
    fn v2(&self) -> Value {
        let mut p = json!({
            "description": self.description,
            "in": self.location,
            "name": self.name,
            "type": self.kind,
            "uniqueItems": true,
        });
        if self.location == "path" {
            p["required"] = json!(true);
        }
        p
    }

    fn v3(&self) -> Value {
        let mut p = json!({
            "description": self.description,
            "in": self.location,
            "name": self.name,
            "schema": {"type": self.kind, "uniqueItems": true},
        });
        if self.location == "path" {
            p["required"] = json!(true);
        }
        p
    }
}

fn path_parameter(name: &'static str, description: String) -> Parameter {
    Parameter {
        name,
        location: "path",
        kind: "string",
        description,
    }
}

fn query(name: &'static str, kind: &'static str, description: &str) -> Parameter {
    Parameter {
        name,
        location: "query",
        kind,
        description: description.to_owned(),
    }
}

/// The query parameters of list and watch this server understands (no `pretty`, no
/// `shardSelector`).
fn list_parameters() -> Vec<Parameter> {
    vec![
        query(
            "allowWatchBookmarks",
            "boolean",
            "allowWatchBookmarks requests watch events with type \"BOOKMARK\", which carry the latest resourceVersion so a watch can resume from it. If this is not a watch, this field is ignored.",
        ),
        query(
            "continue",
            "string",
            "The continue token of a previous list response with the same query, to receive the next page (see limit). A token that is no longer valid is answered with 410 Expired; the client must then list again from the start.",
        ),
        Parameter {
            description: format!(
                "A selector to restrict the list of returned objects by their fields, for example status.phase=Active,spec.operation=Migrating. Supported fields: {}; any other field is rejected. Defaults to everything.",
                SELECTABLE_FIELDS.join(", ")
            ),
            ..query("fieldSelector", "string", "")
        },
        query(
            "labelSelector",
            "string",
            "A selector to restrict the list of returned objects by their labels, for example ifo.kubevirt.io/subject-kind=VirtualMachine. Defaults to everything.",
        ),
        query(
            "limit",
            "integer",
            "limit is the maximum number of objects to return from a list. When more exist, the list metadata carries a continue token for the next page; pages are served from one consistent snapshot. This field is not supported if watch is true.",
        ),
        query(
            "resourceVersion",
            "string",
            "resourceVersion sets a constraint on what resource versions a request may be served from. For a watch, events after this version are sent; a version too old to resume from is answered with a 410 Expired event. See https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions for details.\n\nDefaults to unset",
        ),
        query(
            "resourceVersionMatch",
            "string",
            "resourceVersionMatch determines how resourceVersion is applied to list calls: NotOlderThan or Exact. See https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions for details.\n\nDefaults to unset",
        ),
        query(
            "sendInitialEvents",
            "boolean",
            "`sendInitialEvents=true` may be set together with `watch=true` and `resourceVersionMatch=NotOlderThan`. The watch stream then begins with an ADDED event for every current object, followed by a BOOKMARK event annotated with `\"k8s.io/initial-events-end\": \"true\"` that carries the resourceVersion of that state, and goes on with changes after it.",
        ),
        query(
            "timeoutSeconds",
            "integer",
            "Timeout for the list/watch call. This limits the duration of the call, regardless of any activity or inactivity.",
        ),
        query(
            "watch",
            "boolean",
            "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications. Specify resourceVersion.",
        ),
    ]
}

/// One `GET` operation on one path.
struct Operation {
    path: String,
    id: String,
    description: String,
    /// `None` for the group version's resource list, as kube-apiserver has it.
    action: Option<Action>,
    kind: Option<&'static str>,
    /// The definition name of the 200 response.
    response: String,
    parameters: Vec<Parameter>,
}

fn upper_first(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

/// `live.ifo.kubevirt.io` → `LiveIfoKubevirtIo`.
fn group_words() -> String {
    GROUP.split('.').map(upper_first).collect()
}

/// `LiveIfoKubevirtIoV1alpha1`: the operation-id infix.
fn id_infix() -> String {
    group_words() + &upper_first(VERSION)
}

/// `liveIfoKubevirtIo_v1alpha1`: the tag kube-apiserver gives every operation of a group version.
fn tag() -> String {
    let words = group_words();
    let mut chars = words.chars();
    let group: String = chars
        .next()
        .map(|c| c.to_ascii_lowercase().to_string() + chars.as_str())
        .unwrap_or_default();
    format!("{group}_{VERSION}")
}

fn operations_of(resource: &Resource) -> Vec<Operation> {
    let base = format!("/apis/{GROUP_VERSION}");
    let (kind, plural, infix) = (resource.kind, resource.plural, id_infix());
    let name = || path_parameter("name", format!("name of the {kind}"));
    let namespace = || {
        path_parameter(
            "namespace",
            "object name and auth scope, such as for teams and projects".to_owned(),
        )
    };
    let with = |mut first: Vec<Parameter>, rest: Vec<Parameter>| {
        first.extend(rest);
        first
    };
    let object = format!("{PREFIX}{kind}");
    let list = format!("{PREFIX}{kind}List");
    let event = "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent".to_owned();
    let op =
        |path: String, id: String, description: String, action, response, parameters| Operation {
            path,
            id,
            description,
            action: Some(action),
            kind: Some(kind),
            response,
            parameters,
        };
    let list_description = format!("list or watch objects of kind {kind}");
    let read_description = format!("read the specified {kind}");
    let watch_list_description = format!(
        "watch individual changes to a list of {kind}. deprecated: use the 'watch' parameter with a list operation instead."
    );
    let watch_description = format!(
        "watch changes to an object of kind {kind}. deprecated: use the 'watch' parameter with a list operation instead, filtered to a single item with the 'fieldSelector' parameter."
    );
    if resource.namespaced {
        vec![
            op(
                format!("{base}/{plural}"),
                format!("list{infix}{kind}ForAllNamespaces"),
                list_description.clone(),
                Action::List,
                list.clone(),
                list_parameters(),
            ),
            op(
                format!("{base}/namespaces/{{namespace}}/{plural}"),
                format!("list{infix}Namespaced{kind}"),
                list_description,
                Action::List,
                list,
                with(vec![namespace()], list_parameters()),
            ),
            op(
                format!("{base}/namespaces/{{namespace}}/{plural}/{{name}}"),
                format!("read{infix}Namespaced{kind}"),
                read_description,
                Action::Get,
                object,
                vec![name(), namespace()],
            ),
            op(
                format!("{base}/watch/{plural}"),
                format!("watch{infix}{kind}ListForAllNamespaces"),
                watch_list_description.clone(),
                Action::WatchList,
                event.clone(),
                list_parameters(),
            ),
            op(
                format!("{base}/watch/namespaces/{{namespace}}/{plural}"),
                format!("watch{infix}Namespaced{kind}List"),
                watch_list_description,
                Action::WatchList,
                event.clone(),
                with(vec![namespace()], list_parameters()),
            ),
            op(
                format!("{base}/watch/namespaces/{{namespace}}/{plural}/{{name}}"),
                format!("watch{infix}Namespaced{kind}"),
                watch_description,
                Action::Watch,
                event,
                with(vec![name(), namespace()], list_parameters()),
            ),
        ]
    } else {
        vec![
            op(
                format!("{base}/{plural}"),
                format!("list{infix}{kind}"),
                list_description,
                Action::List,
                list,
                list_parameters(),
            ),
            op(
                format!("{base}/{plural}/{{name}}"),
                format!("read{infix}{kind}"),
                read_description,
                Action::Get,
                object,
                vec![name()],
            ),
            op(
                format!("{base}/watch/{plural}"),
                format!("watch{infix}{kind}List"),
                watch_list_description,
                Action::WatchList,
                event.clone(),
                list_parameters(),
            ),
            op(
                format!("{base}/watch/{plural}/{{name}}"),
                format!("watch{infix}{kind}"),
                watch_description,
                Action::Watch,
                event,
                with(vec![name()], list_parameters()),
            ),
        ]
    }
}

fn operations() -> Vec<Operation> {
    let resource_list = Operation {
        path: format!("/apis/{GROUP_VERSION}/"),
        id: format!("get{}APIResources", id_infix()),
        description: "get available resources".to_owned(),
        action: None,
        kind: None,
        response: "io.k8s.apimachinery.pkg.apis.meta.v1.APIResourceList".to_owned(),
        parameters: Vec::new(),
    };
    std::iter::once(resource_list)
        .chain(SERVED.iter().flat_map(|r| operations_of(r)))
        .collect()
}

impl Operation {
    /// The fields v2 and v3 share.
    fn common(&self) -> Map<String, Value> {
        let mut get = Map::new();
        get.insert("description".into(), json!(self.description));
        get.insert("operationId".into(), json!(self.id));
        get.insert("tags".into(), json!([tag()]));
        if let Some(action) = self.action {
            get.insert("x-kubernetes-action".into(), json!(action.as_str()));
        }
        if let Some(kind) = self.kind {
            get.insert(
                "x-kubernetes-group-version-kind".into(),
                json!({"group": GROUP, "kind": kind, "version": VERSION}),
            );
        }
        get
    }

    fn produces(&self) -> &'static [&'static str] {
        self.action.map_or(&["application/json"], Action::produces)
    }

    fn v2(&self) -> Value {
        let mut get = self.common();
        get.insert("consumes".into(), json!(["*/*"]));
        get.insert("produces".into(), json!(self.produces()));
        get.insert("schemes".into(), json!(["https"]));
        get.insert(
            "responses".into(),
            json!({
                "200": {"description": "OK", "schema": {"$ref": reference(&self.response)}},
                "401": {"description": "Unauthorized"},
            }),
        );
        let parameters: Vec<Value> = self.parameters.iter().map(Parameter::v2).collect();
        path_item(get, parameters)
    }

    fn v3(&self) -> Value {
        let mut get = self.common();
        let schema = json!({"$ref": v3::reference(&reference(&self.response))});
        let content: Map<String, Value> = self
            .produces()
            .iter()
            .map(|media| (media.to_string(), json!({"schema": schema})))
            .collect();
        get.insert(
            "responses".into(),
            json!({
                "200": {"description": "OK", "content": content},
                "401": {"description": "Unauthorized"},
            }),
        );
        let parameters: Vec<Value> = self.parameters.iter().map(Parameter::v3).collect();
        path_item(get, parameters)
    }
}

fn path_item(get: Map<String, Value>, parameters: Vec<Value>) -> Value {
    let mut item = json!({"get": get});
    if !parameters.is_empty() {
        item["parameters"] = json!(parameters);
    }
    item
}

/// The `paths` object of the v2 document.
pub(super) fn v2() -> Map<String, Value> {
    operations()
        .iter()
        .map(|o| (o.path.clone(), o.v2()))
        .collect()
}

/// The `paths` object of the v3 document.
pub(super) fn v3() -> Map<String, Value> {
    operations()
        .iter()
        .map(|o| (o.path.clone(), o.v3()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_kube_apiserver() {
        assert_eq!(id_infix(), "LiveIfoKubevirtIoV1alpha1");
        assert_eq!(tag(), "liveIfoKubevirtIo_v1alpha1");
        let paths = v2();
        let list = &paths["/apis/live.ifo.kubevirt.io/v1alpha1/namespaces/{namespace}/inflightoperations"]
            ["get"];
        assert_eq!(
            list["operationId"],
            "listLiveIfoKubevirtIoV1alpha1NamespacedInFlightOperation"
        );
        assert_eq!(list["x-kubernetes-action"], "list");
        assert_eq!(
            list["x-kubernetes-group-version-kind"],
            json!({"group": "live.ifo.kubevirt.io", "kind": "InFlightOperation", "version": "v1alpha1"})
        );
        let read =
            &paths["/apis/live.ifo.kubevirt.io/v1alpha1/inflightclusteroperations/{name}"]["get"];
        assert_eq!(
            read["operationId"],
            "readLiveIfoKubevirtIoV1alpha1InFlightClusterOperation"
        );
        assert_eq!(read["x-kubernetes-action"], "get");
    }
}
