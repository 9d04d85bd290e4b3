//! The InFlightOperation API under test. Every name is configurable so the same benchmark
//! measures any implementation that publishes InFlightOperation objects, whether it serves
//! them from memory through an APIService or writes them as custom resources.

use serde_json::Value;

#[derive(clap::Args, Clone, Debug)]
pub(crate) struct IfoApi {
    /// API group of the watched operations.
    #[arg(long, default_value = "live.ifo.kubevirt.io")]
    pub ifo_group: String,
    #[arg(long, default_value = "v1alpha1")]
    pub ifo_version: String,
    /// Plural resource name.
    #[arg(long, default_value = "inflightoperations")]
    pub ifo_resource: String,
    /// The resource is cluster-scoped: its collection path is watched the same way, and the
    /// subject's namespace is read from --subject-namespace-field (default: namespaced, watched
    /// across all namespaces, the subject's namespace being the operation's own).
    #[arg(long)]
    pub ifo_cluster_scoped: bool,
    /// Where an operation names its subject: a dotted path or a JSON pointer (`/a/b~1c`).
    #[arg(long, default_value = "spec.subject.name")]
    pub subject_field: String,
    /// Where a cluster-scoped operation names its subject's namespace (with
    /// --ifo-cluster-scoped; operations without it are matched by subject name alone).
    #[arg(long, default_value = "spec.subject.namespace")]
    pub subject_namespace_field: String,
    /// Where an operation names what it is (`Starting`, `Migrating`, ...).
    #[arg(long, default_value = "spec.operation")]
    pub operation_field: String,
    /// Where an operation says whether it is still running.
    #[arg(long, default_value = "status.phase")]
    pub phase_field: String,
    /// The phase value of a finished operation. An operation deleted before it is shown in
    /// this phase counts as completed at its DELETE event (for implementations that delete
    /// what has completed).
    #[arg(long, default_value = "Completed")]
    pub completed_phase: String,
}

/// What the benchmark needs from one watched operation.
#[derive(Debug, PartialEq)]
pub(crate) struct Sighting {
    pub uid: String,
    pub resource_version: String,
    /// `(subject name, operation)`: what the driver's transitions are keyed by.
    pub key: (String, String),
    /// The subject's namespace, when the operation says: operations of subjects in other
    /// namespaces are not the benchmark's.
    pub namespace: Option<String>,
    pub completed: bool,
}

impl IfoApi {
    /// The collection path: across all namespaces for a namespaced resource, the resource
    /// itself for a cluster-scoped one (`/apis/<group>/<version>/<resource>` either way).
    pub(crate) fn path(&self) -> String {
        let group = if self.ifo_group.is_empty() {
            format!("/api/{}", self.ifo_version)
        } else {
            format!("/apis/{}/{}", self.ifo_group, self.ifo_version)
        };
        format!("{group}/{}", self.ifo_resource)
    }

    /// Reads one operation; `None` when a configured field is missing.
    pub(crate) fn read(&self, object: &Value) -> Option<Sighting> {
        let text = |path: &str| {
            lookup(object, path)
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        Some(Sighting {
            uid: text("metadata.uid")?,
            resource_version: text("metadata.resourceVersion")?,
            key: (text(&self.subject_field)?, text(&self.operation_field)?),
            namespace: if self.ifo_cluster_scoped {
                text(&self.subject_namespace_field)
            } else {
                text("metadata.namespace")
            },
            completed: text(&self.phase_field).as_deref() == Some(self.completed_phase.as_str()),
        })
    }

    /// True when a write to `group`/`resource` is a write of operations.
    pub(crate) fn is_operation_resource(&self, group: &str, resource: &str) -> bool {
        (group == self.ifo_group && resource == self.ifo_resource)
            || resource.starts_with("inflightoperations")
            || resource.starts_with("inflightclusteroperations")
    }
}

fn lookup<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    if path.starts_with('/') {
        return object.pointer(path);
    }
    path.split('.')
        .try_fold(object, |v, segment| v.get(segment))
}

/// The API named by `args` (flags as on the command line), for tests.
#[cfg(test)]
pub(crate) fn parse(args: &[&str]) -> IfoApi {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        api: IfoApi,
    }
    Cli::parse_from(std::iter::once("bench").chain(args.iter().copied())).api
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn api(args: &[&str]) -> IfoApi {
        parse(args)
    }

    #[test]
    fn reads_the_default_fields_and_label_pointers() {
        let object = json!({
            "metadata": {"uid": "u1", "resourceVersion": "7",
                         "labels": {"ifo.kubevirt.io/operation": "Migrating"}},
            "spec": {"operation": "Migrating", "subject": {"name": "vm-1"}},
            "status": {"phase": "Completed"},
        });
        let seen = api(&[]).read(&object).unwrap();
        assert_eq!(seen.key, ("vm-1".to_string(), "Migrating".to_string()));
        assert!(seen.completed);
        let by_label = api(&["--operation-field=/metadata/labels/ifo.kubevirt.io~1operation"]);
        assert_eq!(by_label.read(&object).unwrap().key.1, "Migrating");
        assert_eq!(api(&["--subject-field=spec.target"]).read(&object), None);
    }

    #[test]
    fn paths_for_core_and_named_groups() {
        assert_eq!(
            api(&[]).path(),
            "/apis/live.ifo.kubevirt.io/v1alpha1/inflightoperations"
        );
        assert_eq!(
            api(&["--ifo-group=", "--ifo-version=v1", "--ifo-resource=ops"]).path(),
            "/api/v1/ops"
        );
    }

    #[test]
    fn subject_namespace_from_metadata_or_the_configured_field() {
        let object = json!({
            "metadata": {"uid": "u1", "resourceVersion": "7", "namespace": "ops"},
            "spec": {"operation": "Starting",
                     "subject": {"name": "vm-1", "namespace": "vms"},
                     "target": {"ns": "elsewhere"}},
        });
        // The flags, and the subject namespace they read off the object.
        let cases: [(&[&str], Option<&str>); 4] = [
            (&[], Some("ops")),
            (&["--ifo-cluster-scoped"], Some("vms")),
            (
                &[
                    "--ifo-cluster-scoped",
                    "--subject-namespace-field=/spec/target/ns",
                ],
                Some("elsewhere"),
            ),
            (
                &[
                    "--ifo-cluster-scoped",
                    "--subject-namespace-field=spec.nope",
                ],
                None,
            ),
        ];
        for (flags, want) in cases {
            let read = api(flags).read(&object).unwrap();
            assert_eq!(read.namespace.as_deref(), want, "{flags:?}");
        }
        assert_eq!(
            api(&["--ifo-group=ifo.kubevirt.io", "--ifo-cluster-scoped"]).path(),
            "/apis/ifo.kubevirt.io/v1alpha1/inflightoperations"
        );
    }
}
