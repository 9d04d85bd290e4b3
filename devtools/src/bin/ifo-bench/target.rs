//! The InFlightOperation API under test. Every name is configurable so the same benchmark
//! measures any implementation that publishes InFlightOperation objects, whether it serves
//! them from memory through an APIService or writes them as custom resources.

use serde_json::Value;

#[derive(clap::Args, Clone, Debug)]
pub struct IfoApi {
    /// API group of the watched operations.
    #[arg(long, default_value = "live.ifo.kubevirt.io")]
    pub ifo_group: String,
    #[arg(long, default_value = "v1alpha1")]
    pub ifo_version: String,
    /// Plural resource name.
    #[arg(long, default_value = "inflightoperations")]
    pub ifo_resource: String,
    /// The resource is cluster-scoped (default: namespaced, watched across all namespaces).
    #[arg(long)]
    pub ifo_cluster_scoped: bool,
    /// Where an operation names its subject: a dotted path or a JSON pointer (`/a/b~1c`).
    #[arg(long, default_value = "spec.subject.name")]
    pub subject_field: String,
    /// Where an operation names what it is (`Starting`, `Migrating`, ...).
    #[arg(long, default_value = "spec.operation")]
    pub operation_field: String,
    /// Where an operation says whether it is still running.
    #[arg(long, default_value = "status.phase")]
    pub phase_field: String,
    /// The phase value of a finished operation.
    #[arg(long, default_value = "Completed")]
    pub completed_phase: String,
}

/// What the benchmark needs from one watched operation.
#[derive(Debug, PartialEq)]
pub struct Sighting {
    pub uid: String,
    pub resource_version: String,
    /// `(subject name, operation)`: what the driver's transitions are keyed by.
    pub key: (String, String),
    pub completed: bool,
}

impl IfoApi {
    /// The collection path across all namespaces.
    pub fn path(&self) -> String {
        let group = if self.ifo_group.is_empty() {
            format!("/api/{}", self.ifo_version)
        } else {
            format!("/apis/{}/{}", self.ifo_group, self.ifo_version)
        };
        format!("{group}/{}", self.ifo_resource)
    }

    /// Reads one operation; `None` when a configured field is missing.
    pub fn read(&self, object: &Value) -> Option<Sighting> {
        let text = |path: &str| {
            lookup(object, path)
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        Some(Sighting {
            uid: text("metadata.uid")?,
            resource_version: text("metadata.resourceVersion")?,
            key: (text(&self.subject_field)?, text(&self.operation_field)?),
            completed: text(&self.phase_field).as_deref() == Some(self.completed_phase.as_str()),
        })
    }

    /// True when a write to `group`/`resource` is a write of operations.
    pub fn is_operation_resource(&self, group: &str, resource: &str) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use serde_json::json;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        api: IfoApi,
    }

    fn api(args: &[&str]) -> IfoApi {
        Cli::parse_from(std::iter::once("bench").chain(args.iter().copied())).api
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
}
