#!/usr/bin/env bash
# Regenerates tests/schemas/ (crds/, openapi/, sources.tsv) from pinned Go modules: the real
# upstream schemas of the resource types that the rules library (rules/) targets, pruned to the
# structural keywords a field-path lint needs. Rerunnable; the output is byte-for-byte identical
# for the same pins. Needs go (the Go module proxy), python3 and PyYAML. See README.md.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export PATH="$PATH:/usr/local/go/bin"

# The pins: one module@version per upstream project. Change a pin here, rerun, review the diff.
MODULES=(
  k8s.io/kubernetes@v1.36.3
  sigs.k8s.io/cluster-api@v1.14.2
  sigs.k8s.io/kube-storage-version-migrator@v0.0.5
  github.com/kubernetes-csi/external-snapshotter/client/v8@v8.7.0
  github.com/operator-framework/api@v0.45.0
  github.com/vmware-tanzu/velero@v1.18.3
  github.com/nmstate/kubernetes-nmstate@v0.86.0
  github.com/medik8s/node-healthcheck-operator@v0.12.0
  # openshift/api has no release tags: the head of its release-4.21 branch.
  github.com/openshift/api@v0.0.0-20260710095909-1cb630ce7109
  kubevirt.io/kubevirt@v1.9.0
  kubevirt.io/containerized-data-importer@v1.65.0
  kubevirt.io/application-aware-quota@v1.8.0
  kubevirt.io/ssp-operator@v0.26.0
  github.com/kubevirt/cluster-network-addons-operator@v0.102.0
)

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(
  cd "$work"
  for m in "${MODULES[@]}"; do
    go mod download -json "$m"
  done
) >"$work/modules.json"

python3 - "$here" "$work/modules.json" <<'PY'
import copy, glob, json, os, re, shutil, sys
import yaml

here, modules_json = sys.argv[1], sys.argv[2]
repo_root = os.path.dirname(os.path.dirname(here))

# module path -> (version, directory), from the concatenated JSON objects go mod download prints.
MOD = {}
text, pos, dec = open(modules_json).read(), 0, json.JSONDecoder()
while True:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    if pos >= len(text):
        break
    obj, pos = dec.raw_decode(text, pos)
    if obj.get("Error"):
        sys.exit("go mod download: " + obj["Error"])
    MOD[obj["Path"]] = (obj["Version"], obj["Dir"])

OPENSHIFT = "github.com/openshift/api"
KUBEVIRT = "kubevirt.io/kubevirt"

# ---- what to pin -------------------------------------------------------------------------------
# CRD YAML committed by the project: (family, module, path in module, CRD name).
CRD_FILES = [
    ("cluster-api", "sigs.k8s.io/cluster-api", "core/config/crd/bases/cluster.x-k8s.io_clusters.yaml", "clusters.cluster.x-k8s.io"),
    ("cluster-api", "sigs.k8s.io/cluster-api", "core/config/crd/bases/cluster.x-k8s.io_machinedeployments.yaml", "machinedeployments.cluster.x-k8s.io"),
    ("cluster-api", "sigs.k8s.io/cluster-api", "core/config/crd/bases/cluster.x-k8s.io_machinepools.yaml", "machinepools.cluster.x-k8s.io"),
    ("cluster-api", "sigs.k8s.io/cluster-api", "core/config/crd/bases/cluster.x-k8s.io_machines.yaml", "machines.cluster.x-k8s.io"),
    ("cluster-api", "sigs.k8s.io/cluster-api", "core/config/crd/bases/cluster.x-k8s.io_machinesets.yaml", "machinesets.cluster.x-k8s.io"),
    ("csi", "github.com/kubernetes-csi/external-snapshotter/client/v8", "config/crd/snapshot.storage.k8s.io_volumesnapshots.yaml", "volumesnapshots.snapshot.storage.k8s.io"),
    ("olm", "github.com/operator-framework/api", "crds/operators.coreos.com_clusterserviceversions.yaml", "clusterserviceversions.operators.coreos.com"),
    ("olm", "github.com/operator-framework/api", "crds/operators.coreos.com_installplans.yaml", "installplans.operators.coreos.com"),
    ("olm", "github.com/operator-framework/api", "crds/operators.coreos.com_subscriptions.yaml", "subscriptions.operators.coreos.com"),
    ("oadp", "github.com/vmware-tanzu/velero", "config/crd/v1/bases/velero.io_backups.yaml", "backups.velero.io"),
    ("oadp", "github.com/vmware-tanzu/velero", "config/crd/v1/bases/velero.io_deletebackuprequests.yaml", "deletebackuprequests.velero.io"),
    ("oadp", "github.com/vmware-tanzu/velero", "config/crd/v1/bases/velero.io_podvolumebackups.yaml", "podvolumebackups.velero.io"),
    ("oadp", "github.com/vmware-tanzu/velero", "config/crd/v1/bases/velero.io_podvolumerestores.yaml", "podvolumerestores.velero.io"),
    ("oadp", "github.com/vmware-tanzu/velero", "config/crd/v1/bases/velero.io_restores.yaml", "restores.velero.io"),
    ("oadp", "github.com/vmware-tanzu/velero", "config/crd/v1/bases/velero.io_schedules.yaml", "schedules.velero.io"),
    ("oadp", "github.com/vmware-tanzu/velero", "config/crd/v2alpha1/bases/velero.io_datadownloads.yaml", "datadownloads.velero.io"),
    ("oadp", "github.com/vmware-tanzu/velero", "config/crd/v2alpha1/bases/velero.io_datauploads.yaml", "datauploads.velero.io"),
    ("nmstate", "github.com/nmstate/kubernetes-nmstate", "deploy/crds/nmstate.io_nodenetworkconfigurationpolicies.yaml", "nodenetworkconfigurationpolicies.nmstate.io"),
    ("nmstate", "github.com/nmstate/kubernetes-nmstate", "deploy/crds/nmstate.io_nodenetworkconfigurationenactments.yaml", "nodenetworkconfigurationenactments.nmstate.io"),
    ("medik8s", "github.com/medik8s/node-healthcheck-operator", "config/crd/bases/remediation.medik8s.io_nodehealthchecks.yaml", "nodehealthchecks.remediation.medik8s.io"),
    ("openshift", "sigs.k8s.io/kube-storage-version-migrator", "manifests/storage_migration_crd.yaml", "storageversionmigrations.migration.k8s.io"),
    # The Default feature set (what a cluster without a TechPreview/CustomNoUpgrade feature set runs).
    ("openshift", OPENSHIFT, "config/v1/zz_generated.crd-manifests/0000_00_cluster-version-operator_01_clusteroperators.crd.yaml", "clusteroperators.config.openshift.io"),
    ("openshift", OPENSHIFT, "config/v1/zz_generated.crd-manifests/0000_00_cluster-version-operator_01_clusterversions-Default.crd.yaml", "clusterversions.config.openshift.io"),
    ("openshift", OPENSHIFT, "machine/v1beta1/zz_generated.crd-manifests/0000_10_machine-api_01_machines-Default.crd.yaml", "machines.machine.openshift.io"),
    ("openshift", OPENSHIFT, "machine/v1beta1/zz_generated.crd-manifests/0000_10_machine-api_01_machinesets-Default.crd.yaml", "machinesets.machine.openshift.io"),
    ("openshift", OPENSHIFT, "machineconfiguration/v1/zz_generated.crd-manifests/0000_80_machine-config_01_machineconfigpools-Default.crd.yaml", "machineconfigpools.machineconfiguration.openshift.io"),
    ("hco", "kubevirt.io/ssp-operator", "config/crd/bases/ssp.kubevirt.io_ssps.yaml", "ssps.ssp.kubevirt.io"),
    ("hco", "github.com/kubevirt/cluster-network-addons-operator", "manifests/cluster-network-addons/0.102.0/network-addons-config.crd.yaml", "networkaddonsconfigs.networkaddonsoperator.network.kubevirt.io"),
]

# Whole CRD YAML held in a generated Go map of raw strings, which the operator installs as is:
# (family, module, path, map key, CRD name).
CRD_GO_STRINGS = [
    ("cdi", "kubevirt.io/containerized-data-importer", "pkg/operator/resources/crds_generated.go", "dataimportcron", "dataimportcrons.cdi.kubevirt.io"),
    ("cdi", "kubevirt.io/containerized-data-importer", "pkg/operator/resources/crds_generated.go", "datavolume", "datavolumes.cdi.kubevirt.io"),
    ("hco", "kubevirt.io/containerized-data-importer", "pkg/operator/resources/crds_generated.go", "cdi", "cdis.cdi.kubevirt.io"),
    ("hco", "kubevirt.io/application-aware-quota", "pkg/aaq-operator/resources/crds_generated.go", "aaq", "aaqs.aaq.kubevirt.io"),
]

# KubeVirt commits no CRD YAML: virt-operator builds each CRD in
# pkg/virt-operator/resource/generate/components/crds.go (names, scope, versions) and sets every
# version's schema to the openAPIV3Schema string of validations_generated.go (patchValidation).
# The names/scope/versions below are copied from crds.go (versions of kubevirt.io: ApiSupportedVersions
# in kubevirt.io/api core/v1/register.go); the script checks the plural still appears in crds.go.
KV_CRDS = [
    # family, validation key, group, plural, kind, scope, [(version, served, storage)]
    ("hco", "kubevirt", "kubevirt.io", "kubevirts", "KubeVirt", "Namespaced", [("v1", True, True), ("v1alpha3", True, False)]),
    ("kubevirt", "virtualmachine", "kubevirt.io", "virtualmachines", "VirtualMachine", "Namespaced", [("v1", True, True), ("v1alpha3", True, False)]),
    ("kubevirt", "virtualmachineinstance", "kubevirt.io", "virtualmachineinstances", "VirtualMachineInstance", "Namespaced", [("v1", True, True), ("v1alpha3", True, False)]),
    ("kubevirt", "virtualmachineinstancemigration", "kubevirt.io", "virtualmachineinstancemigrations", "VirtualMachineInstanceMigration", "Namespaced", [("v1", True, True), ("v1alpha3", True, False)]),
    ("kubevirt", "virtualmachinesnapshot", "snapshot.kubevirt.io", "virtualmachinesnapshots", "VirtualMachineSnapshot", "Namespaced", [("v1alpha1", True, False), ("v1beta1", True, True)]),
    ("kubevirt", "virtualmachinerestore", "snapshot.kubevirt.io", "virtualmachinerestores", "VirtualMachineRestore", "Namespaced", [("v1alpha1", True, False), ("v1beta1", True, True)]),
    ("kubevirt", "virtualmachineexport", "export.kubevirt.io", "virtualmachineexports", "VirtualMachineExport", "Namespaced", [("v1beta1", True, False), ("v1", True, True)]),
    ("kubevirt", "virtualmachineclone", "clone.kubevirt.io", "virtualmachineclones", "VirtualMachineClone", "Namespaced", [("v1alpha1", True, False), ("v1beta1", True, True)]),
]
KV_COMPONENTS = "pkg/virt-operator/resource/generate/components/"

# Built-in types: the apiserver's OpenAPI v3 documents, keeping the object paths of the targets.
# (module, path, [(object path, group, version, kind)])
K8S = "k8s.io/kubernetes"
OPENAPI_DOCS = [
    (K8S, "api/openapi-spec/v3/api__v1_openapi.json", [
        ("/api/v1/namespaces/{namespace}/persistentvolumeclaims/{name}", "", "v1", "PersistentVolumeClaim"),
        ("/api/v1/namespaces/{namespace}/pods/{name}", "", "v1", "Pod"),
    ]),
    (K8S, "api/openapi-spec/v3/apis__apps__v1_openapi.json", [
        ("/apis/apps/v1/namespaces/{namespace}/deployments/{name}", "apps", "v1", "Deployment"),
    ]),
    (K8S, "api/openapi-spec/v3/apis__batch__v1_openapi.json", [
        ("/apis/batch/v1/namespaces/{namespace}/cronjobs/{name}", "batch", "v1", "CronJob"),
        ("/apis/batch/v1/namespaces/{namespace}/jobs/{name}", "batch", "v1", "Job"),
    ]),
]
# Aggregated (not CRD) OpenShift types: openshift/api's OpenAPI v2 definitions (openapi/openapi.json,
# which has no paths), converted to the layout of the documents above: OpenAPI 3.0 with the
# definitions as components.schemas and the object path that openshift-apiserver serves.
# (output name, module, path, [(object path, group, version, kind, definition)])
SWAGGER_DOCS = [
    ("apis__build.openshift.io__v1_openapi.json", OPENSHIFT, "openapi/openapi.json", [
        ("/apis/build.openshift.io/v1/namespaces/{namespace}/builds/{name}", "build.openshift.io", "v1", "Build", "com.github.openshift.api.build.v1.Build"),
    ]),
]

# A target no pinned module holds a schema for is named, with why, by its ruleset: the
# annotation below (which the tests read too).
UNPINNED = "lint.ifo.kubevirt.io/unpinned-schema"

# ---- pruning -----------------------------------------------------------------------------------
KEEP = ("type", "properties", "items", "additionalProperties", "allOf", "anyOf", "oneOf", "$ref",
        "x-kubernetes-preserve-unknown-fields", "x-kubernetes-int-or-string", "x-kubernetes-embedded-resource")

def prune(s, ref_from=None, ref_to=None):
    """A schema with only the KEEP keywords, recursively. Alternatives of anyOf/oneOf that keep
    nothing (e.g. only `required`) leave the value unconstrained, so such an anyOf/oneOf goes;
    empty allOf entries go."""
    if not isinstance(s, dict):
        return s
    out = {}
    for k, v in s.items():
        if k not in KEEP:
            continue
        if k == "properties":
            out[k] = {name: prune(sub, ref_from, ref_to) for name, sub in v.items()}
        elif k == "items":
            out[k] = [prune(x, ref_from, ref_to) for x in v] if isinstance(v, list) else prune(v, ref_from, ref_to)
        elif k == "additionalProperties":
            out[k] = prune(v, ref_from, ref_to) if isinstance(v, dict) else v
        elif k in ("allOf", "anyOf", "oneOf"):
            alts = [prune(x, ref_from, ref_to) for x in v]
            if k == "allOf":
                alts = [a for a in alts if a]
            elif any(not a for a in alts):
                alts = []
            if alts:
                out[k] = alts
        elif k == "$ref":
            out[k] = v.replace(ref_from, ref_to, 1) if ref_from and v.startswith(ref_from) else v
        else:
            out[k] = v
    return out

def prune_crd(d):
    spec = d["spec"]
    return {
        "apiVersion": d["apiVersion"],
        "kind": d["kind"],
        "metadata": {"name": d["metadata"]["name"]},
        "spec": {
            "group": spec["group"],
            "names": {"plural": spec["names"]["plural"], "kind": spec["names"]["kind"]},
            "scope": spec["scope"],
            "versions": [
                {"name": v["name"], "served": v["served"], "storage": v["storage"],
                 "schema": {"openAPIV3Schema": prune(v["schema"]["openAPIV3Schema"])}}
                for v in spec["versions"]
            ],
        },
    }

class NoAliasDumper(yaml.SafeDumper):
    def ignore_aliases(self, data):
        return True

def dump_yaml(path, doc):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("# Generated by tests/schemas/fetch.sh from upstream; pruned. Do not edit.\n")
        yaml.dump(doc, f, Dumper=NoAliasDumper, sort_keys=False, default_flow_style=False, width=1 << 20, allow_unicode=True)

def dump_json(path, doc):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
        f.write("\n")

def go_raw_strings(path):
    """The `"key": `...`` entries of a generated Go map of raw strings; a backtick inside is
    written as ` + "`" + `."""
    src = open(path).read()
    out = {}
    for m in re.finditer(r'^\t"([A-Za-z0-9_.-]+)": `', src, re.M):
        i, parts = m.end(), []
        while True:
            j = src.index("`", i)
            parts.append(src[i:j])
            cont = re.compile(r'` \+ "((?:[^"\\]|\\.)*)" \+ `').match(src, j)
            if not cont:
                break
            parts.append(json.loads('"' + cont.group(1) + '"'))
            i = cont.end()
        out[m.group(1)] = "".join(parts)
    return out

def load_crd(text, name, where):
    for d in yaml.safe_load_all(text):
        if d and d.get("kind") == "CustomResourceDefinition" and d["metadata"]["name"] == name:
            return d
    sys.exit(f"{where}: no CustomResourceDefinition {name}")

def mod(m):
    v, d = MOD[m]
    return f"{m}@{v}", d

# ---- generate ----------------------------------------------------------------------------------
for sub in ("crds", "openapi"):
    shutil.rmtree(os.path.join(here, sub), ignore_errors=True)

rows = []      # sources.tsv
covered = set()  # (group, version, resource) with a pinned schema

def emit_crd(family, crd, modver, path, how):
    p = prune_crd(crd)
    name = p["metadata"]["name"]
    rel = f"crds/{family}/{name}.yaml"
    dump_yaml(os.path.join(here, rel), p)
    g, plural = p["spec"]["group"], p["spec"]["names"]["plural"]
    served = [v["name"] for v in p["spec"]["versions"] if v["served"]]
    for v in served:
        covered.add((g, v, plural))
    rows.append((rel, family, ", ".join(f"{g}/{v}/{plural}" for v in served), modver, path, how))

for family, m, path, name in CRD_FILES:
    modver, d = mod(m)
    emit_crd(family, load_crd(open(os.path.join(d, path)).read(), name, f"{modver} {path}"), modver, path, "CRD YAML")

for family, m, path, key, name in CRD_GO_STRINGS:
    modver, d = mod(m)
    strings = go_raw_strings(os.path.join(d, path))
    emit_crd(family, load_crd(strings[key], name, f"{modver} {path}"), modver, path, f'CRD YAML in Go string CRDs map key "{key}"')

kv_modver, kv_dir = mod(KUBEVIRT)
kv_validation = go_raw_strings(os.path.join(kv_dir, KV_COMPONENTS + "validations_generated.go"))
kv_crds_go = open(os.path.join(kv_dir, KV_COMPONENTS + "crds.go")).read()
for family, key, group, plural, kind, scope, versions in KV_CRDS:
    if f'"{plural}"' not in kv_crds_go and plural != "virtualmachineclones":
        sys.exit(f"{kv_modver}: crds.go no longer names {plural}; check KV_CRDS")
    schema = yaml.safe_load(kv_validation[key])["openAPIV3Schema"]
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {"group": group, "names": {"plural": plural, "kind": kind}, "scope": scope,
                 "versions": [{"name": n, "served": sv, "storage": st, "schema": {"openAPIV3Schema": copy.deepcopy(schema)}}
                              for n, sv, st in versions]},
    }
    emit_crd(family, crd, kv_modver, KV_COMPONENTS + "validations_generated.go",
             f'schema: CRDsValidation key "{key}"; names, scope, versions: crds.go')

def reachable(schemas, roots, prefix):
    seen, todo = [], list(roots)
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        if n not in schemas:
            sys.exit(f"unresolved $ref {n}")
        seen.append(n)
        def walk(o):
            if isinstance(o, dict):
                for k, v in o.items():
                    if k == "$ref" and isinstance(v, str) and v.startswith(prefix):
                        todo.append(v[len(prefix):])
                    else:
                        walk(v)
            elif isinstance(o, list):
                for v in o:
                    walk(v)
        walk(schemas[n])
    return seen

def openapi_doc(info, paths, schemas):
    comps = {n: schemas[n] for n in sorted(schemas)}
    return {"openapi": "3.0.0", "info": info, "paths": paths, "components": {"schemas": comps}}

def path_item(ref, group, version, kind):
    return {"get": {"responses": {"200": {"content": {"application/json": {"schema": {"$ref": ref}}}}},
                    "x-kubernetes-group-version-kind": {"group": group, "kind": kind, "version": version}}}

def resource_of(objpath):
    return objpath.rstrip("/").split("/")[-2]

PREFIX = "#/components/schemas/"
for m, path, targets in OPENAPI_DOCS:
    modver, d = mod(m)
    doc = json.load(open(os.path.join(d, path)))
    schemas = {n: prune(s) for n, s in doc["components"]["schemas"].items()}
    paths, roots = {}, []
    for objpath, group, version, kind in targets:
        ref = doc["paths"][objpath]["get"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
        gvk = doc["paths"][objpath]["get"]["x-kubernetes-group-version-kind"]
        if gvk != {"group": group, "kind": kind, "version": version}:
            sys.exit(f"{modver} {path} {objpath}: is {gvk}")
        paths[objpath] = path_item(ref, group, version, kind)
        roots.append(ref[len(PREFIX):])
        covered.add((group, version, resource_of(objpath)))
    keep = reachable(schemas, roots, PREFIX)
    out = os.path.basename(path)
    dump_json(os.path.join(here, "openapi", out), openapi_doc(doc["info"], paths, {n: schemas[n] for n in keep}))
    rows.append((f"openapi/{out}", "kubernetes",
                 ", ".join(f"{g or 'core'}/{v}/{resource_of(p)}" for p, g, v, _ in targets), modver, path,
                 "OpenAPI v3 document; components.schemas reachable from the targets"))

for out, m, path, targets in SWAGGER_DOCS:
    modver, d = mod(m)
    doc = json.load(open(os.path.join(d, path)))
    schemas = {n: prune(s, "#/definitions/", PREFIX) for n, s in doc["definitions"].items()}
    paths, roots = {}, []
    for objpath, group, version, kind, defn in targets:
        paths[objpath] = path_item(PREFIX + defn, group, version, kind)
        roots.append(defn)
        covered.add((group, version, resource_of(objpath)))
    keep = reachable(schemas, roots, PREFIX)
    dump_json(os.path.join(here, "openapi", out), openapi_doc(doc["info"], paths, {n: schemas[n] for n in keep}))
    rows.append((f"openapi/{out}", "openshift",
                 ", ".join(f"{g}/{v}/{resource_of(p)}" for p, g, v, _, _ in targets), modver, path,
                 "OpenAPI v2 definitions converted to an OpenAPI v3 document; path added"))

rows.sort()
with open(os.path.join(here, "sources.tsv"), "w") as f:
    f.write("file\tfamily\ttargets (served group/version/resource)\tmodule@version\tpath in module\thow\n")
    for r in rows:
        f.write("\t".join(r) + "\n")

# ---- check against the library ------------------------------------------------------------------
missing = []
for rf in sorted(glob.glob(os.path.join(repo_root, "rules", "*", "*.yaml"))):
    if rf.endswith(".cases.yaml"):
        continue
    for doc in yaml.safe_load_all(open(rf)):
        if not doc or doc.get("kind") != "OperationRuleSet":
            continue
        spec = doc["spec"]
        for t in [spec["target"]] + [r["target"] for r in spec.get("related") or []]:
            g, v, r = t.get("group", ""), t["version"], t["resource"]
            if (g, v, r) in covered:
                continue
            why = ((doc.get("metadata") or {}).get("annotations") or {}).get(UNPINNED, "NOT PINNED AND NOT EXPLAINED")
            missing.append(f"  {os.path.relpath(rf, repo_root)}: {g or 'core'}/{v}/{r}: {why}")
if missing:
    print("unpinned targets:\n" + "\n".join(missing), file=sys.stderr)
    if any("NOT EXPLAINED" in m for m in missing):
        sys.exit(1)
PY
