//! The shipped rules library against the real cluster: every ruleset of `deploy/rules/bundle.yaml`
//! becomes Ready against the minimal CRDs of its targets (`tests/cluster/crds`), and subjects driven
//! through their states, as their controllers would, produce the operations, messages and outcomes
//! the rules promise, read through the aggregation layer.
//!
//! The bundle is applied once, as shipped except for `spec.namespaces`: the rulesets with a
//! namespaced target are limited to the namespace of these tests, so the library's VM rules add
//! nothing to the VMs the other tests drive in their own namespaces. Rulesets with a cluster-scoped
//! target are applied unchanged (no other test creates such subjects). Every ruleset is renamed
//! `<name>-<namespace>`: rulesets are cluster-scoped, and other tests of the same cluster (the
//! dry run of `deploy/`, which holds the same bundle) must never meet these objects under the
//! shipped names. The tests here share that namespace and tell their subjects apart by name.

use ifo_dev::User;
use ifo_test_support::{WatchStream, clear_status, env};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashSet};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(30);
const LIVE: &str = "/apis/live.ifo.kubevirt.io/v1alpha1";

struct Library {
    namespace: String,
    /// Shipped ruleset name → component, for every ruleset of the bundle.
    rulesets: BTreeMap<String, String>,
}

impl Library {
    /// The name the shipped ruleset `name` was applied under.
    fn applied(&self, name: &str) -> String {
        format!("{name}-{}", self.namespace)
    }
}

/// The library, applied once for the whole test binary.
fn library() -> &'static Library {
    static LIBRARY: OnceLock<Library> = OnceLock::new();
    LIBRARY.get_or_init(|| {
        let env = env();
        let namespace = env.namespace("library");
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/rules/bundle.yaml");
        let text = std::fs::read_to_string(path).unwrap();
        let mut rulesets: Vec<Value> = serde_saphyr::from_multiple(&text)
            .unwrap_or_else(|e| panic!("{path} is not a YAML stream of rulesets: {e}"));
        // `resource.group` of every namespaced resource the cluster serves, as kubectl names them.
        let namespaced: HashSet<String> = env
            .kubectl(
                User::Admin,
                &["api-resources", "--namespaced=true", "-o", "name"],
            )
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect();
        for ruleset in &mut rulesets {
            let target = &ruleset["spec"]["target"];
            let (group, resource) = (
                target["group"].as_str().unwrap_or_default(),
                target["resource"].as_str().unwrap(),
            );
            let name = if group.is_empty() {
                resource.to_string()
            } else {
                format!("{resource}.{group}")
            };
            if namespaced.contains(&name) {
                ruleset["spec"]["namespaces"] = json!([namespace]);
            }
        }
        let shipped: BTreeMap<String, String> = rulesets
            .iter()
            .map(|r| {
                (
                    r["metadata"]["name"].as_str().unwrap().to_string(),
                    r["spec"]["component"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let library = Library {
            namespace,
            rulesets: shipped,
        };
        for ruleset in &mut rulesets {
            let name = ruleset["metadata"]["name"].as_str().unwrap().to_string();
            ruleset["metadata"]["name"] = json!(library.applied(&name));
        }
        env.apply(&json!({"apiVersion": "v1", "kind": "List", "items": rulesets}).to_string());
        library
    })
}

/// Polls `f` until it returns `Ok`; after `WAIT`, panics with `what` and the last `Err`.
fn wait_for<T>(what: &str, mut f: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        match f() {
            Ok(v) => return v,
            Err(last) if Instant::now() > deadline => {
                panic!("timed out after {WAIT:?} waiting for {what}; last seen:\n{last}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(250)),
        }
    }
}

fn pretty(v: &impl serde::Serialize) -> String {
    serde_json::to_string_pretty(v).unwrap()
}

/// A subject of the library's rules: created in the library namespace, or cluster-wide.
struct Subject {
    /// What kubectl calls its resource (`plans.forklift.konveyor.io`).
    resource: &'static str,
    kind: String,
    name: String,
    namespace: Option<String>,
}

impl Subject {
    /// Creates the object of `manifest` of the namespaced `resource`, in the library namespace.
    fn create(resource: &'static str, manifest: Value) -> Subject {
        Subject::create_in(resource, true, manifest)
    }

    /// Creates the object of `manifest`, in the library namespace when `resource` is namespaced.
    fn create_in(resource: &'static str, namespaced: bool, mut manifest: Value) -> Subject {
        let namespace = namespaced.then(|| library().namespace.clone());
        if let Some(ns) = &namespace {
            manifest["metadata"]["namespace"] = json!(ns);
        }
        env().apply(&manifest.to_string());
        Subject {
            resource,
            kind: manifest["kind"].as_str().unwrap().to_string(),
            name: manifest["metadata"]["name"].as_str().unwrap().to_string(),
            namespace,
        }
    }

    /// `kubectl <verb> <resource> <name> <args>` as admin, in the subject's namespace if it has
    /// one.
    fn kubectl(&self, verb: &str, args: &[&str]) {
        let mut all = vec![verb, self.resource, &self.name];
        all.extend(args);
        if let Some(ns) = &self.namespace {
            all.extend(["-n", ns]);
        }
        env().kubectl(User::Admin, &all).unwrap();
    }

    /// Merge-patches the status subresource, as the subject's controller would.
    fn set_status(&self, status: Value) {
        let patch = json!({"status": status}).to_string();
        self.kubectl(
            "patch",
            &["--subresource=status", "--type=merge", "-p", &patch],
        );
    }

    fn delete(&self) {
        self.kubectl("delete", &[]);
    }

    fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }

    /// `kubectl get ifos -n <ns> -o json` (or `ifcos`), as a list and its resourceVersion.
    fn list(&self) -> (Vec<Value>, String) {
        let list = match &self.namespace {
            Some(ns) => env().get_json(User::Admin, &["get", "ifos", "-n", ns]),
            None => env().get_json(User::Admin, &["get", "ifcos"]),
        };
        let items = list["items"].as_array().cloned().unwrap_or_default();
        let rv = list["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_string();
        (items, rv)
    }

    /// The operations on this subject that the live API lists.
    fn ops(&self) -> Vec<Value> {
        self.list()
            .0
            .into_iter()
            .filter(|o| {
                o["spec"]["subject"]["kind"] == self.kind.as_str()
                    && o["spec"]["subject"]["name"] == self.name.as_str()
            })
            .collect()
    }

    /// A watch of this subject's operations, from now on.
    fn watch(&self) -> WatchStream {
        let (_, rv) = self.list();
        let path = match &self.namespace {
            Some(ns) => format!("{LIVE}/namespaces/{ns}/inflightoperations"),
            None => format!("{LIVE}/inflightclusteroperations"),
        };
        env().watch(&format!(
            "{path}?watch=true&resourceVersion={rv}&fieldSelector=spec.subject.name%3D{}",
            self.name
        ))
    }

    /// Waits until the live API lists `operation` of `ruleset` on this subject as `Active` with
    /// `message`, checks what identifies it, and returns it. `ruleset` is the shipped name.
    fn expect_active(&self, ruleset: &str, operation: &str, message: &str) -> Value {
        let applied = library().applied(ruleset);
        let what = format!(
            "{operation} (ruleset {ruleset}) active on {} with message {message:?}",
            self.describe()
        );
        let op = wait_for(&what, || {
            let ops = self.ops();
            ops.iter()
                .find(|o| {
                    o["spec"]["operation"] == operation
                        && o["spec"]["ruleSet"] == applied.as_str()
                        && o["status"]["phase"] == "Active"
                        && o["status"]["message"] == message
                })
                .cloned()
                .ok_or_else(|| pretty(&ops))
        });
        let kind = if self.namespace.is_some() {
            "InFlightOperation"
        } else {
            "InFlightClusterOperation"
        };
        assert_eq!(op["kind"], kind, "{}", pretty(&op));
        assert_eq!(
            op["metadata"]["labels"]["ifo.kubevirt.io/operation"],
            operation,
            "{}",
            pretty(&op)
        );
        assert_eq!(
            op["spec"]["component"],
            library().rulesets[ruleset].as_str(),
            "{}",
            pretty(&op)
        );
        let subject = &op["spec"]["subject"];
        assert_eq!(subject["kind"], self.kind.as_str(), "{}", pretty(&op));
        assert_eq!(subject["name"], self.name.as_str(), "{}", pretty(&op));
        assert_eq!(
            op["metadata"]["namespace"].as_str(),
            self.namespace.as_deref(),
            "{}",
            pretty(&op)
        );
        op
    }

    /// Waits on `watch` for `operation` on this subject to be shown `Completed`, and checks its
    /// outcome.
    fn expect_completed(&self, watch: &WatchStream, operation: &str, outcome: &str) -> Value {
        let events = watch.until(
            WAIT,
            &format!("{operation} on {} to complete", self.describe()),
            |e| {
                e["type"] == "MODIFIED"
                    && e["object"]["spec"]["operation"] == operation
                    && e["object"]["status"]["phase"] == "Completed"
            },
        );
        let done = events.last().unwrap()["object"].clone();
        assert_eq!(
            done["status"]["outcome"],
            outcome,
            "{operation} on {} completed with another outcome: {}",
            self.describe(),
            pretty(&done)
        );
        assert!(done["status"]["completed"].is_string(), "{}", pretty(&done));
        done
    }

    /// Waits until `operation` of `ruleset` on this subject shows a `Stalled` condition with
    /// `reason` and `message`, and returns the operation.
    fn expect_stalled(&self, ruleset: &str, operation: &str, reason: &str, message: &str) -> Value {
        let applied = library().applied(ruleset);
        let what = format!(
            "{operation} on {} stalled ({reason}: {message})",
            self.describe()
        );
        wait_for(&what, || {
            let ops = self.ops();
            ops.iter()
                .find(|o| {
                    o["spec"]["operation"] == operation
                        && o["spec"]["ruleSet"] == applied.as_str()
                        && o["status"]["conditions"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .any(|c| {
                                c["type"] == "Stalled"
                                    && c["status"] == "True"
                                    && c["reason"] == reason
                                    && c["message"] == message
                                    && c["lastTransitionTime"].is_string()
                            })
                })
                .cloned()
                .ok_or_else(|| pretty(&ops))
        })
    }

    /// [`Subject::expect_completed`], and then [`Subject::expect_nothing_in_flight`].
    fn expect_ended(&self, watch: &WatchStream, operation: &str, outcome: &str) {
        self.expect_completed(watch, operation, outcome);
        self.expect_nothing_in_flight();
    }

    /// Waits until no operation on this subject is listed any more.
    fn expect_nothing_in_flight(&self) {
        wait_for(&format!("no operation on {}", self.describe()), || {
            let ops = self.ops();
            if ops.is_empty() {
                Ok(())
            } else {
                Err(pretty(&ops))
            }
        });
    }
}

#[test]
fn every_ruleset_of_the_library_becomes_ready_and_reads_what_its_target_has() {
    let library = library();
    assert!(
        library.rulesets.len() >= 40,
        "the bundle has {} rulesets",
        library.rulesets.len()
    );
    wait_for("every ruleset of the library to be Ready", || {
        let list = env().get_json(User::Admin, &["get", "ors"]);
        let items = list["items"].as_array().cloned().unwrap_or_default();
        let not_ready: Vec<String> = library
            .rulesets
            .keys()
            .filter_map(|name| {
                let applied = library.applied(name);
                let Some(ors) = items
                    .iter()
                    .find(|o| o["metadata"]["name"] == applied.as_str())
                else {
                    return Some(format!("{name}: not found"));
                };
                let conditions = &ors["status"]["conditions"];
                let ready = conditions.as_array().into_iter().flatten().any(|c| {
                    c["type"] == "Ready"
                        && c["status"] == "True"
                        && c["observedGeneration"] == ors["metadata"]["generation"]
                });
                let watching = ors["status"]["watchActive"] == true;
                // What it reads is in its target's schema, where the cluster has one (the
                // built-in types' are kube-apiserver's own; the test CRDs take any field).
                let in_schema = conditions.as_array().into_iter().flatten().any(|c| {
                    c["type"] == "SchemaChecked"
                        && c["status"] == "True"
                        && c["observedGeneration"] == ors["metadata"]["generation"]
                });
                (!(ready && watching && in_schema)).then(|| {
                    format!(
                        "{name}: watchActive={} conditions={conditions}",
                        ors["status"]["watchActive"]
                    )
                })
            })
            .collect();
        if not_ready.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "{} of {} rulesets not Ready:\n{}",
                not_ready.len(),
                library.rulesets.len(),
                not_ready.join("\n")
            ))
        }
    });
}

#[test]
fn vm_live_migration_is_seen_on_the_vmi_and_on_the_migration() {
    let vmi = virtual_machine_instance("vm-migrate");
    let vmi_watch = vmi.watch();
    // A new VMI is starting until it runs.
    vmi.expect_active(
        "vmi-lifecycle-rules",
        "Starting",
        "starting vm [vm-migrate]",
    );
    vmi.set_status(json!({"phase": "Running", "nodeName": "node-1",
        "conditions": [{"type": "Ready", "status": "True"}]}));
    vmi.expect_completed(&vmi_watch, "Starting", "Succeeded");

    let vmim = Subject::create(
        "virtualmachineinstancemigrations.kubevirt.io",
        json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
               "metadata": {"name": "vm-migrate-mig"}, "spec": {"vmiName": "vm-migrate"}}),
    );
    let vmim_watch = vmim.watch();
    let started = "2025-01-15T10:10:09Z";
    let state = json!({"sourceNode": "node-1", "targetNode": "node-2", "startTimestamp": started});
    vmim.set_status(json!({"phase": "Running", "migrationState": state}));
    vmi.set_status(json!({"migrationState": state}));

    let op = vmim.expect_active(
        "vmim-rules",
        "Running",
        "migrating vmi [vm-migrate] from node-1 to node-2",
    );
    assert_eq!(op["metadata"]["labels"]["ifo.kubevirt.io/vm"], "vm-migrate");
    assert_eq!(op["metadata"]["creationTimestamp"], started);
    let op = vmi.expect_active(
        "vmi-lifecycle-rules",
        "LiveMigrating",
        "live migrating vm [vm-migrate] from node-1 to node-2",
    );
    assert_eq!(op["metadata"]["labels"]["ifo.kubevirt.io/vm"], "vm-migrate");
    assert_eq!(op["metadata"]["labels"]["ifo.kubevirt.io/node"], "node-1");
    assert_eq!(op["metadata"]["creationTimestamp"], started);

    let done = json!({"sourceNode": "node-1", "targetNode": "node-2", "startTimestamp": started,
        "endTimestamp": "2025-01-15T10:11:00Z", "completed": true});
    vmim.set_status(json!({"phase": "Succeeded", "migrationState": done}));
    vmi.set_status(json!({"nodeName": "node-2", "migrationState": done}));
    vmim.expect_ended(&vmim_watch, "Running", "Succeeded");
    vmi.expect_ended(&vmi_watch, "LiveMigrating", "Succeeded");
}

/// The shipped `vm-lifecycle-rules` take a VM's node from its VMI (`spec.related`, namespaced
/// like the ruleset): a migration of the VM is on the source and target nodes while it runs, on
/// the new node once the VMI moved, and ends `Succeeded` when the VM runs again.
#[test]
fn vm_operations_are_on_the_nodes_of_their_vmi() {
    let vm = virtual_machine("vm-related", "Always");
    let vmi = virtual_machine_instance("vm-related");
    let state = json!({"sourceNode": "node-1", "targetNode": "node-2",
                       "startTimestamp": "2025-01-15T10:10:09Z"});
    vmi.set_status(json!({"phase": "Running", "nodeName": "node-1", "migrationState": state}));
    vm.set_status(json!({"printableStatus": "Migrating"}));
    let watch = vm.watch();
    let labels_are = |node: &str, target: Option<&str>| {
        let what = format!("the VM's migration on node {node}, target {target:?}");
        wait_for(&what, || {
            let ops = vm.ops();
            let found = ops.iter().any(|o| {
                let labels = &o["metadata"]["labels"];
                o["spec"]["operation"] == "Migrating"
                    && labels["ifo.kubevirt.io/node"] == node
                    && labels["ifo.kubevirt.io/target-node"].as_str() == target
            });
            if found { Ok(()) } else { Err(pretty(&ops)) }
        })
    };
    vm.expect_active(
        "vm-lifecycle-rules",
        "Migrating",
        "migrating vm [vm-related]",
    );
    labels_are("node-1", Some("node-2"));

    // The VMI moved: the VM's migration is on the new node alone.
    let done = json!({"sourceNode": "node-1", "targetNode": "node-2",
                      "startTimestamp": "2025-01-15T10:10:09Z",
                      "endTimestamp": "2025-01-15T10:11:00Z", "completed": true});
    vmi.set_status(json!({"nodeName": "node-2", "migrationState": done}));
    labels_are("node-2", None);
    vm.set_status(json!({"printableStatus": "Running"}));
    let completed = vm.expect_completed(&watch, "Migrating", "Succeeded");
    assert_eq!(
        completed["metadata"]["labels"]["ifo.kubevirt.io/node"],
        "node-2",
        "{}",
        pretty(&completed)
    );
    vm.expect_nothing_in_flight();
}

/// In an exclusive ruleset, a VM that goes straight from one operation to the next whose outcome
/// its rule does not name (deleted while provisioning) shows the first one `Superseded`, at
/// once.
#[test]
fn a_vm_deleted_while_provisioning_shows_provisioning_superseded() {
    let vm = virtual_machine("vm-superseded", "Halted");
    vm.set_status(json!({"printableStatus": "Provisioning"}));
    let watch = vm.watch();
    vm.expect_active(
        "vm-lifecycle-rules",
        "Provisioning",
        "provisioning volumes of vm [vm-superseded]",
    );
    vm.set_status(json!({"printableStatus": "Terminating"}));
    // What `kubectl get ifos -w` shows: the operation MODIFIED to Completed, Superseded.
    vm.expect_completed(&watch, "Provisioning", "Superseded");
    vm.expect_active(
        "vm-lifecycle-rules",
        "Terminating",
        "terminating vm [vm-superseded]",
    );
}

#[test]
fn csv_being_replaced_is_superseded_when_olm_deletes_it() {
    let csv = Subject::create(
        "clusterserviceversions.operators.coreos.com",
        json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
               "metadata": {"name": "demo-operator.v1.0.0"},
               "spec": {"displayName": "Demo Operator", "version": "1.0.0"}}),
    );
    let watch = csv.watch();
    csv.expect_active("csv-rules", "Installing", "phase []: ");
    csv.set_status(json!({"phase": "Succeeded", "reason": "InstallSucceeded",
        "message": "install strategy completed with no errors"}));
    csv.expect_completed(&watch, "Installing", "Succeeded");

    csv.set_status(json!({"phase": "Replacing", "reason": "BeingReplaced",
        "message": "being replaced by csv: demo-operator.v1.1.0"}));
    csv.expect_active(
        "csv-rules",
        "Replacing",
        "phase [Replacing]: being replaced by csv: demo-operator.v1.1.0",
    );
    csv.set_status(json!({"phase": "Deleting", "reason": "Replaced",
        "message": "has been replaced by a newer ClusterServiceVersion that has successfully installed."}));
    csv.expect_completed(&watch, "Replacing", "Superseded");
    csv.expect_active(
        "csv-rules",
        "Deleting",
        "phase [Deleting]: has been replaced by a newer ClusterServiceVersion that has successfully installed.",
    );
    csv.delete();
    csv.expect_completed(&watch, "Deleting", "SubjectDeleted");
}

/// A KubeVirt VirtualMachine `name` with `runStrategy`.
fn virtual_machine(name: &str, run_strategy: &str) -> Subject {
    Subject::create(
        "virtualmachines.kubevirt.io",
        json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
               "metadata": {"name": name}, "spec": {"runStrategy": run_strategy}}),
    )
}

/// A KubeVirt VirtualMachineInstance `name`.
fn virtual_machine_instance(name: &str) -> Subject {
    Subject::create(
        "virtualmachineinstances.kubevirt.io",
        json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
               "metadata": {"name": name}, "spec": {"domain": {"devices": {}}}}),
    )
}

/// A Pod of `metadata` whose one container is a pause image, with the rest of its `spec`.
fn pod(metadata: Value, mut spec: Value) -> Subject {
    spec["containers"] = json!([{"name": "c", "image": "registry.k8s.io/pause:3.10"}]);
    Subject::create(
        "pods",
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}),
    )
}

fn deployment(name: &str) -> Subject {
    Subject::create(
        "deployments.apps",
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
               "spec": {"replicas": 3, "selector": {"matchLabels": {"app": name}},
                        "template": {"metadata": {"labels": {"app": name}},
                                     "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}}),
    )
}

#[test]
fn deployment_rollout_follows_its_replicas_and_stalls_past_its_deadline() {
    // Nothing runs the deployment controller: the test writes the status it would write.
    let web = deployment("web");
    let stuck = deployment("web-stuck");
    let (web_watch, stuck_watch) = (web.watch(), stuck.watch());
    web.expect_active(
        "deployment-rules",
        "Rollout",
        "waiting for the new generation to be observed",
    );
    web.set_status(json!({"observedGeneration": 1, "replicas": 3, "updatedReplicas": 1}));
    web.expect_active("deployment-rules", "Rollout", "1 of 3 new replicas updated");
    web.set_status(
        json!({"observedGeneration": 1, "replicas": 3, "updatedReplicas": 3,
        "readyReplicas": 2, "availableReplicas": 2}),
    );
    web.expect_active(
        "deployment-rules",
        "Rollout",
        "2 of 3 updated replicas available",
    );
    web.set_status(json!({"observedGeneration": 1, "replicas": 3, "updatedReplicas": 3,
        "readyReplicas": 3, "availableReplicas": 3,
        "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
                       {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}]}));

    stuck.set_status(json!({"observedGeneration": 1, "replicas": 3, "updatedReplicas": 1}));
    stuck.expect_active("deployment-rules", "Rollout", "1 of 3 new replicas updated");
    stuck.set_status(json!({"observedGeneration": 1, "replicas": 3, "updatedReplicas": 1,
        "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
                        "message": "ReplicaSet \"web-stuck-5d4f\" has timed out progressing."}]}));

    // Past its deadline the rollout is not over: it stays in flight, stalled.
    stuck.expect_stalled(
        "deployment-rules",
        "Rollout",
        "ProgressDeadlineExceeded",
        "ProgressDeadlineExceeded",
    );
    // Scaled to nothing while past its deadline: it ends, failed.
    stuck.kubectl("scale", &["--replicas=0"]);
    stuck.set_status(json!({"observedGeneration": 2, "replicas": 0, "updatedReplicas": 0,
        "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
                        "message": "ReplicaSet \"web-stuck-5d4f\" has timed out progressing."}]}));

    web.expect_ended(&web_watch, "Rollout", "Succeeded");
    stuck.expect_ended(&stuck_watch, "Rollout", "Failed");
}

#[test]
fn datavolume_import_shows_its_progress_and_stalls_on_an_import_error() {
    let dv = Subject::create(
        "datavolumes.cdi.kubevirt.io",
        json!({"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
               "metadata": {"name": "dv-import"},
               "spec": {"source": {"http": {"url": "http://images.example/fedora.qcow2"}}}}),
    );
    // Just created, before CDI wrote any status: already in flight.
    dv.expect_active("datavolume-rules", "Pending", "pending");
    dv.set_status(json!({"phase": "ImportInProgress", "progress": "45%"}));
    let op = dv.expect_active("datavolume-rules", "ImportInProgress", "importing 45%");
    assert_eq!(op["status"]["progress"], 45.0, "{}", pretty(&op));
    assert!(op["status"]["conditions"] == json!([]), "{}", pretty(&op));
    // As kubectl prints it, and in the -o wide table.
    let ns = &library().namespace;
    let name = op["metadata"]["name"].as_str().unwrap();
    let progress = env()
        .kubectl(
            User::Admin,
            &[
                "get",
                "ifo",
                name,
                "-n",
                ns,
                "-o",
                "jsonpath={.status.progress}",
            ],
        )
        .unwrap();
    assert_eq!(progress.trim(), "45");
    let wide = env()
        .kubectl(User::Admin, &["get", "ifo", name, "-n", ns, "-o", "wide"])
        .unwrap();
    let header = wide.lines().next().unwrap_or_default();
    assert!(
        header.contains("PROGRESS") && header.contains("EXPECTED") && header.contains("STALLED"),
        "{wide}"
    );
    assert!(
        wide.lines().nth(1).unwrap_or_default().contains("45%"),
        "{wide}"
    );

    let error = "Unable to connect to http data source: expected status code 200, got 404. Status: 404 Not Found";
    dv.set_status(json!({"phase": "ImportInProgress", "progress": "45%",
        "conditions": [{"type": "Running", "status": "False", "reason": "Error", "message": error}]}));
    let op = dv.expect_stalled(
        "datavolume-rules",
        "ImportInProgress",
        "ReportedByRule",
        error,
    );
    assert_eq!(op["status"]["phase"], "Active", "{}", pretty(&op));
    let wide = env()
        .kubectl(User::Admin, &["get", "ifo", name, "-n", ns, "-o", "wide"])
        .unwrap();
    assert!(
        wide.lines()
            .nth(1)
            .unwrap_or_default()
            .contains("ReportedByRule"),
        "{wide}"
    );
    // The namespace's gate says it holds a stalled operation, and which.
    let gate = format!("namespace.{ns}");
    let op_name = op["metadata"]["name"].clone();
    wait_for(&format!("{gate} Stalled=True naming {op_name}"), || {
        let g = env().get_json(User::Admin, &["get", "gate", &gate]);
        let stalled = g["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Stalled" && c["status"] == "True");
        let listed = g["status"]["operations"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|o| o["name"] == op_name && o["stalled"] == true && o["progress"] == 45.0);
        if stalled && listed {
            Ok(())
        } else {
            Err(pretty(&g))
        }
    });
    dv.delete();
    dv.expect_nothing_in_flight();
}

#[test]
fn pending_pvc_completes_when_bound() {
    let pvc = Subject::create(
        "persistentvolumeclaims",
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
               "spec": {"storageClassName": "fast", "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1Gi"}}}}),
    );
    let watch = pvc.watch();
    pvc.set_status(json!({"phase": "Pending"}));
    pvc.expect_active(
        "pvc-rules",
        "Pending",
        "waiting for a volume of storage class fast",
    );
    pvc.set_status(json!({"phase": "Bound", "accessModes": ["ReadWriteOnce"],
        "capacity": {"storage": "1Gi"}}));
    pvc.expect_ended(&watch, "Pending", "Succeeded");
}

/// Forklift's status of a plan migrating ten VMs, `done` of them completed, `failed` of those
/// with an error.
fn plan_status(conditions: Value, done: usize, failed: usize) -> Value {
    let vms: Vec<Value> = (1..=10)
        .map(|i| {
            let mut vm = json!({"id": format!("vm-{i}"), "name": format!("web-{i}"),
                "started": "2025-01-15T10:00:00Z", "phase": "CopyDisks"});
            if i <= done {
                vm["phase"] = json!("Completed");
                vm["completed"] = json!("2025-01-15T10:30:00Z");
            }
            if i <= failed {
                vm["error"] = json!({"phase": "CopyDisks", "reasons": ["disk transfer failed"]});
            }
            vm
        })
        .collect();
    json!({"conditions": conditions,
           "migration": {"started": "2025-01-15T10:00:00Z", "vms": vms}})
}

#[test]
fn forklift_plan_counts_its_vms_and_ends_with_the_outcome_of_its_conditions() {
    let ready = json!({"type": "Ready", "status": "True", "category": "Required",
        "message": "The migration plan is ready."});
    let executing = json!([ready, {"type": "Executing", "status": "True", "reason": "Started",
        "category": "Advisory", "message": "The plan is EXECUTING."}]);
    let vms: Vec<Value> = (1..=10).map(|i| json!({"id": format!("vm-{i}")})).collect();
    let plans: Vec<(Subject, &str, &str)> = [
        ("plan-succeeded", "Succeeded", "Succeeded"),
        ("plan-failed", "Failed", "Failed"),
        ("plan-canceled", "Canceled", "Canceled"),
    ]
    .into_iter()
    .map(|(name, condition, outcome)| {
        let plan = Subject::create(
            "plans.forklift.konveyor.io",
            json!({"apiVersion": "forklift.konveyor.io/v1beta1", "kind": "Plan",
                   "metadata": {"name": name},
                   "spec": {"targetNamespace": "web", "warm": false, "vms": vms}}),
        );
        (plan, condition, outcome)
    })
    .collect();
    let watches: Vec<WatchStream> = plans.iter().map(|(plan, _, _)| plan.watch()).collect();

    for (plan, _, _) in &plans {
        plan.set_status(plan_status(executing.clone(), 3, 0));
        let op = plan.expect_active("plan-rules", "Executing", "3/10 VMs done");
        assert_eq!(op["metadata"]["creationTimestamp"], "2025-01-15T10:00:00Z");
    }
    let (failed_plan, _, _) = &plans[1];
    failed_plan.set_status(plan_status(executing.clone(), 10, 2));
    failed_plan.expect_active("plan-rules", "Executing", "10/10 VMs done, 2 failed");

    for (plan, condition, _) in &plans {
        let done = json!([ready, {"type": condition, "status": "True", "category": "Advisory",
            "message": format!("The plan is {}.", condition.to_uppercase())}]);
        let failed = if *condition == "Failed" { 2 } else { 0 };
        plan.set_status(plan_status(done, 10, failed));
    }
    for ((plan, _, outcome), watch) in plans.iter().zip(&watches) {
        plan.expect_ended(watch, "Executing", outcome);
    }
}

#[test]
fn deckhouse_vm_operation_superseded_in_either_representation() {
    let vmop = |name: &str, type_: &str| {
        Subject::create(
            "virtualmachineoperations.virtualization.deckhouse.io",
            json!({"apiVersion": "virtualization.deckhouse.io/v1alpha2",
                   "kind": "VirtualMachineOperation", "metadata": {"name": name},
                   "spec": {"type": type_, "virtualMachineName": "vm-deckhouse"}}),
        )
    };
    let start = vmop("start-vm-deckhouse", "Start");
    let restart = vmop("restart-vm-deckhouse", "Restart");
    let (start_watch, restart_watch) = (start.watch(), restart.watch());
    start.set_status(
        json!({"phase": "Pending", "conditions": [{"type": "Completed",
        "status": "Unknown", "reason": "NotReadyToBeExecuted"}]}),
    );
    restart.set_status(
        json!({"phase": "InProgress", "conditions": [{"type": "Completed",
        "status": "False", "reason": "RestartInProgress"}]}),
    );
    let op = start.expect_active(
        "vmop-rules",
        "Starting",
        "Start vm-deckhouse: NotReadyToBeExecuted",
    );
    assert_eq!(
        op["metadata"]["labels"]["ifo.kubevirt.io/vm"],
        "vm-deckhouse"
    );
    restart.expect_active(
        "vmop-rules",
        "Restarting",
        "Restart vm-deckhouse: RestartInProgress",
    );

    // A Stop supersedes both: the current representation (phase Superseded) and the older one
    // (phase Completed, Completed condition with reason Superseded).
    let superseded = |phase: &str| {
        json!({"phase": phase, "conditions": [{"type": "Completed", "status": "True",
            "reason": "Superseded", "message": "Superseded by stop-vm-deckhouse with type Stop"}]})
    };
    start.set_status(superseded("Superseded"));
    restart.set_status(superseded("Completed"));
    start.expect_ended(&start_watch, "Starting", "Superseded");
    restart.expect_ended(&restart_watch, "Restarting", "Superseded");
}

#[test]
fn node_maintenance_drain_is_a_cluster_operation() {
    let name = format!("maintenance-{}", library().namespace);
    let maintenance = Subject::create_in(
        "nodemaintenances.nodemaintenance.medik8s.io",
        false,
        json!({"apiVersion": "nodemaintenance.medik8s.io/v1beta1", "kind": "NodeMaintenance",
               "metadata": {"name": name},
               "spec": {"nodeName": "worker-1", "reason": "kernel update"}}),
    );
    let watch = maintenance.watch();
    maintenance.set_status(json!({"phase": "Running", "drainProgress": 40,
        "pendingPods": ["web-1", "web-2"], "totalpods": 5, "evictionPods": 3}));
    let op = maintenance.expect_active(
        "nodemaintenance-rules",
        "Draining",
        "draining node worker-1: 40%, 2 pod(s) pending eviction",
    );
    assert_eq!(op["metadata"]["labels"]["ifo.kubevirt.io/node"], "worker-1");
    maintenance.set_status(json!({"phase": "Succeeded", "drainProgress": 100, "pendingPods": []}));
    maintenance.expect_ended(&watch, "Draining", "Succeeded");
}

/// The operations `gate/<gate>` names, as `kind name` of their subjects, and its `Clear` status.
fn gate_holds(gate: &str) -> (Vec<String>, String) {
    let gate = env().gate(gate);
    let held = ifo_test_support::gate_operations(&gate)
        .into_iter()
        .map(|[kind, _, name, operation]| format!("{kind} {name} {operation}"))
        .collect();
    (held, clear_status(&gate).to_owned())
}

/// Waits until `subject` has `operation` of `ruleset` active with `message`, and `gate` holds
/// for it.
fn expect_active_and_held(
    gate: &str,
    subject: &Subject,
    ruleset: &str,
    operation: &str,
    message: &str,
) {
    subject.expect_active(ruleset, operation, message);
    expect_held(gate, subject, operation);
}

/// Waits until `gate` is not clear (`Clear=False`) and names `operation` on `subject`'s object.
fn expect_held(gate: &str, subject: &Subject, operation: &str) {
    let wanted = format!("{} {} {operation}", subject.kind, subject.name);
    wait_for(&format!("{gate} held by {wanted}"), || {
        let (held, clear) = gate_holds(gate);
        if clear == "False" && held.contains(&wanted) {
            Ok(())
        } else {
            Err(format!("Clear={clear}, operations: {held:?}"))
        }
    });
}

/// Waits until `gate` no longer names an operation on `subject`'s object.
fn expect_released(gate: &str, subject: &Subject) {
    let prefix = format!("{} {} ", subject.kind, subject.name);
    wait_for(
        &format!("{gate} released by {}", subject.describe()),
        || {
            let (held, clear) = gate_holds(gate);
            if held.iter().any(|h| h.starts_with(&prefix)) {
                Err(format!("Clear={clear}, operations: {held:?}"))
            } else {
                Ok(())
            }
        },
    );
}

/// What holds maintenance outside KubeVirt, from the library's `cluster-api` and `kubernetes`
/// rulesets: a Cluster API Machine being deleted (its node drained), a pod of a Job once it runs,
/// and a pod labelled `ifo.kubevirt.io/protect-from-maintenance` once it runs (in a namespace
/// `protected-pod-rules` lists: here, the library's), each on node X, make `gate/node.X` not
/// clear, naming the operation; each releases the gate when it ends, and `kubectl wait` for
/// `Clear=True` then succeeds. A pod bound to the node that has not started holds nothing.
#[test]
fn machines_jobs_and_protected_pods_hold_the_gate_of_their_node() {
    let namespace = library().namespace.clone();
    let node_name = format!("lib-{namespace}");
    let _node = env().node(&node_name);
    let gate = format!("node.{node_name}");

    // A Machine of that node, deleted: Cluster API drains the node before it deletes it (a
    // finalizer holds the object, as Cluster API's does).
    let machine = Subject::create(
        "machines.cluster.x-k8s.io",
        json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Machine",
               "metadata": {"name": "md-0-lib", "finalizers": ["machine.cluster.x-k8s.io"]},
               "spec": {"clusterName": "prod"}}),
    );
    machine.set_status(json!({"phase": "Running",
        "nodeRef": {"apiVersion": "v1", "kind": "Node", "name": node_name}}));
    machine.kubectl("delete", &["--wait=false"]);
    machine.set_status(json!({"phase": "Deleting"}));
    let op = machine.expect_active(
        "capi-machine-rules",
        "Deleting",
        &format!("deleting machine [md-0-lib] and draining node {node_name}"),
    );
    assert_eq!(
        op["metadata"]["labels"]["ifo.kubevirt.io/node"],
        node_name.as_str()
    );
    expect_held(&gate, &machine, "Deleting");
    // The drain is done, the finalizer goes, and the Machine with it.
    machine.kubectl(
        "patch",
        &["--type=merge", "-p", r#"{"metadata":{"finalizers":null}}"#],
    );
    expect_released(&gate, &machine);

    // A pod of a Job, bound to the node by the scheduler (kube-apiserver makes it Pending): it
    // holds nothing until it starts there, then until it succeeds.
    let job_pod = pod(
        json!({"name": "db-migrate-lib",
               "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "db-migrate",
                                    "uid": "2f4e6a8c-0b1d-5f3e-9a7c-5e1d3b9f7a2c", "controller": true}]}),
        json!({"restartPolicy": "Never"}),
    );
    // The scheduler's binding (no scheduler runs here).
    env().bind(&namespace, "db-migrate-lib", &node_name);
    job_pod.expect_nothing_in_flight();
    job_pod.set_status(json!({"phase": "Running"}));
    expect_active_and_held(
        &gate,
        &job_pod,
        "pod-rules",
        "JobRunning",
        &format!("pod of job [db-migrate] running on node {node_name}"),
    );
    let watch = job_pod.watch();
    job_pod.set_status(json!({"phase": "Succeeded"}));
    job_pod.expect_completed(&watch, "JobRunning", "Succeeded");
    expect_released(&gate, &job_pod);

    // A pod its owners protect from maintenance, until they take the label off.
    let protected = pod(
        json!({"name": "ledger-lib",
               "labels": {"ifo.kubevirt.io/protect-from-maintenance": "true"},
               "annotations": {"ifo.kubevirt.io/protect-from-maintenance": "replica catching up"}}),
        json!({"nodeName": node_name}),
    );
    protected.set_status(json!({"phase": "Running"}));
    expect_active_and_held(
        &gate,
        &protected,
        "protected-pod-rules",
        "Protected",
        &format!("protected from maintenance on node {node_name}: replica catching up"),
    );
    protected.kubectl("label", &["ifo.kubevirt.io/protect-from-maintenance-"]);
    expect_released(&gate, &protected);

    // Nothing holds the node any more: the wait a drain script runs succeeds.
    let wait = env().kubectl(
        User::Admin,
        &[
            "wait",
            "--for=condition=Clear=True",
            &format!("gate/{gate}"),
            "--timeout=60s",
        ],
    );
    assert!(wait.is_ok(), "{wait:?}");
    for pod in [job_pod, protected] {
        pod.kubectl("delete", &["--grace-period=0", "--force"]);
    }
}
