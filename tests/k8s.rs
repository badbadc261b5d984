//! `gpustack gen k8s`: for every example spec, the manifests pass the real validators
//! (kubernetes-validate with strict schemas for built-in kinds, check-jsonschema with the
//! Kubeflow PyTorchJob CRD schema, yamllint), agree with the lock and with the container
//! target (images, driver, NCCL environment), keep hostile spec values as data, and the
//! validators are shown to reject broken manifests (so a green run means they ran).
//!
//! YAML is parsed by the validators' Python (PyYAML, in `.venv-validate`) into JSON, then
//! checked here with serde_json; there is no YAML crate in the dependency tree.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::*;
use serde_json::Value;

/// Files that are not Kubernetes resources (Helm values, kustomize's own file).
const NOT_RESOURCES: &[&str] = &[
    "kustomization.yaml",
    "gpu-operator-values.yaml",
    "monitoring/prometheus-adapter-values.yaml",
];

/// The CRD (under `fixtures/schemas/`, copied unchanged from the projects' release tags; its
/// README lists each file's upstream URL and sha256) and version a custom resource file is
/// validated against. The PyTorchJob keeps its committed strict schema.
fn crd_of(file: &str) -> Option<(&'static str, &'static str)> {
    Some(match file {
        "trainjob.yaml" => ("trainer.kubeflow.org_trainjobs.v2.3.0.yaml", "v1alpha1"),
        "trainingruntime.yaml" | "nccl-tests-runtime.yaml" => (
            "trainer.kubeflow.org_trainingruntimes.v2.3.0.yaml",
            "v1alpha1",
        ),
        "nccl-tests-trainjob.yaml" => ("trainer.kubeflow.org_trainjobs.v2.3.0.yaml", "v1alpha1"),
        "osu-trainjob.yaml" => ("trainer.kubeflow.org_trainjobs.v2.3.0.yaml", "v1alpha1"),
        "vllm-leaderworkerset.yaml" => (
            "leaderworkerset.x-k8s.io_leaderworkersets.v0.10.0.yaml",
            "v1",
        ),
        "monitoring/vllm-servicemonitor.yaml" => {
            ("monitoring.coreos.com_servicemonitors.v0.93.0.yaml", "v1")
        }
        "monitoring/vllm-podmonitor.yaml" => {
            ("monitoring.coreos.com_podmonitors.v0.93.0.yaml", "v1")
        }
        "kueue/resource-flavor.yaml" => ("kueue.x-k8s.io_resourceflavors.v0.19.2.yaml", "v1beta2"),
        "kueue/cluster-queue.yaml" => ("kueue.x-k8s.io_clusterqueues.v0.19.2.yaml", "v1beta2"),
        // `local-queue-training.yaml` too, when training has a namespace of its own.
        f if f.starts_with("kueue/local-queue") => {
            ("kueue.x-k8s.io_localqueues.v0.19.2.yaml", "v1beta2")
        }
        "kueue/topology.yaml" => ("kueue.x-k8s.io_topologies.v0.19.2.yaml", "v1beta2"),
        "network/nic-cluster-policy.yaml" => {
            ("mellanox.com_nicclusterpolicies.v26.4.1.yaml", "v1alpha1")
        }
        // The pods' secondary networks: `network/<stack>-{ipoib,macvlan,pool}-<i>.yaml`.
        f if f.starts_with("network/") => {
            let stem = f.strip_suffix(".yaml")?;
            let (head, index) = stem.rsplit_once('-')?;
            index.parse::<u32>().ok()?;
            match head.rsplit_once('-')?.1 {
                "ipoib" => ("mellanox.com_ipoibnetworks.v26.4.1.yaml", "v1alpha1"),
                "macvlan" => ("mellanox.com_macvlannetworks.v26.4.1.yaml", "v1alpha1"),
                "pool" => ("nv-ipam.nvidia.com_ippools.v26.4.1.yaml", "v1alpha1"),
                _ => return None,
            }
        }
        _ => return None,
    })
}

/// Every `*.yaml` under `dir`, as `/`-separated relative paths, sorted.
fn yaml_files(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, d: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(base, &p, out);
            } else if p.extension().is_some_and(|x| x == "yaml") {
                out.push(
                    p.strip_prefix(base)
                        .unwrap()
                        .to_string_lossy()
                        .replace('\\', "/"),
                );
            }
        }
    }
    let mut v = Vec::new();
    walk(dir, dir, &mut v);
    v.sort();
    v
}

/// A CRD's `openAPIV3Schema` for one version as a strict JSON Schema: unknown fields are
/// errors wherever the CRD declares properties (as `kubectl apply --validate=strict`
/// rejects them) and `x-kubernetes-preserve-unknown-fields` is absent, `apiVersion` and
/// `kind` are pinned, and `metadata` holds what gpustack writes. Written once per run.
const CRD_TO_SCHEMA: &str = r#"
import json, sys, yaml
crd, version, out = sys.argv[1:4]
d = yaml.safe_load(open(crd))
v = [x for x in d["spec"]["versions"] if x["name"] == version][0]
s = v["schema"]["openAPIV3Schema"]
def strict(n):
    if isinstance(n, dict):
        if "properties" in n and not n.get("x-kubernetes-preserve-unknown-fields") and "additionalProperties" not in n:
            n["additionalProperties"] = False
        for x in n.values():
            strict(x)
    elif isinstance(n, list):
        for x in n:
            strict(x)
strict(s)
s["properties"]["apiVersion"] = {"const": d["spec"]["group"] + "/" + version}
s["properties"]["kind"] = {"const": d["spec"]["names"]["kind"]}
s["required"] = sorted(set(s.get("required", [])) | {"apiVersion", "kind", "metadata"})
strs = {"type": "object", "additionalProperties": {"type": "string"}}
s["properties"]["metadata"] = {
    "type": "object", "required": ["name"], "additionalProperties": False,
    "properties": {"name": {"type": "string"}, "namespace": {"type": "string"},
                   "labels": strs, "annotations": strs},
}
s["$schema"] = "http://json-schema.org/draft-07/schema#"
json.dump(s, open(out, "w"))
"#;

/// The strict schema of a CRD (see [`CRD_TO_SCHEMA`]), converted once per test run.
fn crd_schema(py: &Path, crd: &str, version: &str) -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    let dir = DIR.get_or_init(|| tempdir("crd-schemas"));
    let out = dir.join(format!("{crd}.{version}.json"));
    if !out.exists() {
        let src = root().join("fixtures/schemas").join(crd);
        assert!(
            src.exists(),
            "{} is missing: every CRD the tests use is vendored in fixtures/schemas \
             (fixtures/schemas/README.md)",
            src.display()
        );
        let tmp = dir.join(format!(
            "{crd}.{version}.{:?}.tmp",
            std::thread::current().id()
        ));
        let (code, o) = run_tool(
            py,
            &[
                "-c",
                CRD_TO_SCHEMA,
                src.to_str().unwrap(),
                version,
                tmp.to_str().unwrap(),
            ],
            dir,
        );
        assert_eq!(code, 0, "{crd}: {o}");
        std::fs::rename(&tmp, &out).unwrap();
    }
    out
}

/// check-jsonschema of one custom resource against its CRD's strict schema.
fn check_crd(t: &Tools, dir: &Path, file: &str) -> Result<(), String> {
    let (crd, version) = crd_of(file).unwrap();
    let schema = crd_schema(&t.py, crd, version);
    let (code, out) = run_tool(
        &t.cj,
        &["--schemafile", schema.to_str().unwrap(), file],
        dir,
    );
    if code != 0 {
        return Err(format!(
            "check-jsonschema {file} against {crd} ({version}):\n{out}"
        ));
    }
    Ok(())
}

/// `[k8s].version` of a lock as kubernetes-validate wants it (`1.30.0`).
fn k8s_version(lock: &toml::Table) -> String {
    let v = lock
        .get("request")
        .and_then(|r| r.get("k8s"))
        .and_then(|k| k.get("version"))
        .and_then(|v| v.as_str())
        .unwrap_or("1.30");
    format!("{v}.0")
}

fn namespace(lock: &toml::Table) -> String {
    lock.get("request")
        .and_then(|r| r.get("k8s"))
        .and_then(|k| k.get("namespace"))
        .and_then(|v| v.as_str())
        .unwrap_or("gpustack")
        .to_string()
}

fn read_lock(path: &Path) -> toml::Table {
    std::fs::read_to_string(path)
        .unwrap()
        .parse::<toml::Table>()
        .unwrap()
}

/// Strict kubernetes-validate over the built-in resources. Its CLI only warns (exit 0) for
/// a kind it has no schema for, so any WARN is a failure here.
fn check_builtin(tool: &Path, dir: &Path, files: &[String], version: &str) -> Result<(), String> {
    let mut args = vec!["--strict", "-k", version];
    args.extend(files.iter().map(String::as_str));
    let (code, out) = run_tool(tool, &args, dir);
    let passed = out.lines().filter(|l| l.contains(" passed ")).count();
    if code != 0 || out.contains("WARN") || out.contains("ERROR") || passed != files.len() {
        return Err(format!(
            "kubernetes-validate --strict -k {version} (exit {code}, {passed}/{} passed):\n{out}",
            files.len()
        ));
    }
    Ok(())
}

fn check_pytorchjob(tool: &Path, file: &Path) -> Result<(), String> {
    let schema = root().join("fixtures/schemas/pytorchjob-kubeflow-v1-strict.json");
    let (code, out) = run_tool(
        tool,
        &[
            "--schemafile",
            schema.to_str().unwrap(),
            file.to_str().unwrap(),
        ],
        file.parent().unwrap(),
    );
    if code != 0 {
        return Err(format!("check-jsonschema {}:\n{out}", file.display()));
    }
    Ok(())
}

fn check_yamllint(tool: &Path, dir: &Path) -> Result<(), String> {
    let config = root().join("fixtures/schemas/yamllint.yaml");
    let (code, out) = run_tool(tool, &["-s", "-c", config.to_str().unwrap(), "."], dir);
    if code != 0 {
        return Err(format!("yamllint -s {}:\n{out}", dir.display()));
    }
    Ok(())
}

/// Every `*.yaml` under `dir`, parsed by PyYAML: relative path → its documents.
fn parse_yaml(python: &Path, dir: &Path) -> BTreeMap<String, Vec<Value>> {
    const SCRIPT: &str = r#"
import json, os, sys, yaml
d = sys.argv[1]
out = {}
for base, _, files in os.walk(d):
    for f in sorted(files):
        if f.endswith('.yaml'):
            p = os.path.join(base, f)
            with open(p) as fh:
                out[os.path.relpath(p, d)] = list(yaml.safe_load_all(fh))
print(json.dumps(out))
"#;
    let (code, out) = run_tool(python, &["-c", SCRIPT, dir.to_str().unwrap()], dir);
    assert_eq!(code, 0, "PyYAML could not parse {}:\n{out}", dir.display());
    serde_json::from_str(&out).unwrap()
}

struct Tools {
    kv: PathBuf,
    cj: PathBuf,
    yl: PathBuf,
    py: PathBuf,
}

#[allow(clippy::print_stderr)] // a loud skip notice, as `common::validator` prints
fn tools() -> Option<Tools> {
    let kv = validator("kubernetes-validate");
    let cj = validator("check-jsonschema");
    let yl = validator("yamllint");
    let py = validator("python");
    if let Some(py) = &py {
        let (code, out) = run_tool(py, &["-c", "import yaml"], &root());
        if code != 0 {
            let msg = format!(
                "\n!!! VALIDATOR MISSING: PyYAML for {} — k8s checks are SKIPPED.\n{out}",
                py.display()
            );
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("{msg}");
            }
            eprintln!("{msg}");
            return None;
        }
    }
    Some(Tools {
        kv: kv?,
        cj: cj?,
        yl: yl?,
        py: py?,
    })
}

/// Runs every validator over one generated `k8s/` directory.
fn validate_dir(t: &Tools, dir: &Path, version: &str) -> Result<(), String> {
    validate_files(t, dir, &yaml_files(dir), version)
}

/// Runs the validators over some of the files of a generated `k8s/` directory.
fn validate_files(t: &Tools, dir: &Path, files: &[String], version: &str) -> Result<(), String> {
    let builtin: Vec<String> = files
        .iter()
        .filter(|f| {
            !NOT_RESOURCES.contains(&f.as_str()) && crd_of(f).is_none() && *f != "pytorchjob.yaml"
        })
        .cloned()
        .collect();
    if !builtin.is_empty() {
        check_builtin(&t.kv, dir, &builtin, version)?;
    }
    if files.iter().any(|f| f == "pytorchjob.yaml") {
        check_pytorchjob(&t.cj, &dir.join("pytorchjob.yaml"))?;
    }
    for f in files.iter().filter(|f| crd_of(f).is_some()) {
        check_crd(t, dir, f)?;
    }
    check_yamllint(&t.yl, dir)
}

fn get<'a>(v: &'a Value, path: &str) -> &'a Value {
    let mut cur = v;
    for seg in path.split('.') {
        cur = match seg.parse::<usize>() {
            Ok(i) => &cur[i],
            Err(_) => &cur[seg],
        };
    }
    cur
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or(&Vec::new())
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn every_example_passes_the_validators() {
    let Some(t) = tools() else { return };
    let mut failures = Vec::new();
    let mut pytorchjobs = 0;
    for name in example_names() {
        let lock = read_lock(&root().join("lockfiles").join(format!("{name}.lock")));
        let dir = generate(&name, "k8s");
        if dir.join("pytorchjob.yaml").exists() || dir.join("trainjob.yaml").exists() {
            pytorchjobs += 1;
        }
        if let Err(e) = validate_dir(&t, &dir, &k8s_version(&lock)) {
            failures.push(format!("{name}: {e}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(
        pytorchjobs >= 2,
        "expected TrainJobs or PyTorchJobs from the examples with [train]"
    );
}

/// The kustomization lists every resource written, namespaced; the Helm values are not one.
#[test]
fn kustomization_lists_every_resource() {
    let Some(t) = tools() else { return };
    for name in example_names() {
        let lock = read_lock(&root().join("lockfiles").join(format!("{name}.lock")));
        let dir = generate(&name, "k8s");
        let docs = parse_yaml(&t.py, &dir);
        check_pod_security(&name, &docs);
        let k = &docs["kustomization.yaml"][0];
        // kueue/ (cluster-scoped, applied by an admin first) and monitoring/ (needs the
        // prometheus-operator CRDs) are applied on their own.
        let mut want: Vec<String> = docs
            .keys()
            .filter(|f| !f.contains('/') && !NOT_RESOURCES.contains(&f.as_str()))
            .cloned()
            .collect();
        want.sort();
        assert_eq!(strs(&k["resources"]), want, "{name}");
        let ns = namespace(&lock);
        let namespaces = namespaces_of(&docs);
        assert_eq!(namespaces[0], ns, "{name}: [k8s].namespace first");
        // One namespace: kustomize sets it; several: each file names its own.
        if namespaces.len() == 1 {
            assert_eq!(k["namespace"], ns.as_str(), "{name}");
        } else {
            assert!(k.get("namespace").is_none(), "{name}");
        }
        for (f, d) in &docs {
            assert_eq!(d.len(), 1, "{name}/{f}: one document per file");
            if NOT_RESOURCES.contains(&f.as_str()) {
                continue;
            }
            let meta = &d[0]["metadata"];
            if [
                "ResourceFlavor",
                "ClusterQueue",
                "Topology",
                "NicClusterPolicy",
            ]
            .contains(&d[0]["kind"].as_str().unwrap())
            {
                assert!(
                    meta.get("namespace").is_none(),
                    "{name}/{f}: cluster-scoped"
                );
            } else if d[0]["kind"] != "Namespace" {
                let m = meta["namespace"].as_str().unwrap().to_string();
                assert!(namespaces.contains(&m), "{name}/{f}: {m} is not written");
            }
        }
    }
}

/// The namespaces written (`namespace*.yaml`), `[k8s].namespace` (namespace.yaml) first.
fn namespaces_of(docs: &BTreeMap<String, Vec<Value>>) -> Vec<String> {
    let mut files: Vec<&String> = docs
        .iter()
        .filter(|(f, d)| !f.contains('/') && d[0]["kind"] == "Namespace")
        .map(|(f, _)| f)
        .collect();
    files.sort_by_key(|f| (*f != "namespace.yaml", (*f).clone()));
    files
        .into_iter()
        .map(|f| docs[f][0]["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

/// Every pod spec in a document (objects with `containers`), with the path to it.
fn pod_specs<'a>(v: &'a Value, path: &str, out: &mut Vec<(String, &'a Value)>) {
    match v {
        Value::Object(m) => {
            if m.get("containers").is_some_and(Value::is_array) {
                out.push((path.to_string(), v));
            }
            for (k, x) in m {
                pod_specs(x, &format!("{path}.{k}"), out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                pod_specs(x, &format!("{path}.{i}"), out);
            }
        }
        _ => {}
    }
}

/// What a pod spec does that the Pod Security Standards' baseline level forbids
/// (kubernetes.io/docs/concepts/security/pod-security-standards: host namespaces, host
/// paths, host ports, privileged containers, capabilities beyond the baseline list).
fn beyond_baseline(pod: &Value) -> Vec<String> {
    const ALLOWED: &[&str] = &[
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    ];
    let mut out = Vec::new();
    for k in ["hostNetwork", "hostPID", "hostIPC"] {
        if pod[k].as_bool() == Some(true) {
            out.push(k.to_string());
        }
    }
    for v in pod["volumes"].as_array().into_iter().flatten() {
        if v.get("hostPath").is_some() {
            out.push(format!("hostPath volume {}", v["name"]));
        }
    }
    for c in pod["containers"].as_array().into_iter().flatten() {
        let sc = &c["securityContext"];
        if sc["privileged"].as_bool() == Some(true) {
            out.push("privileged container".into());
        }
        for cap in sc["capabilities"]["add"].as_array().into_iter().flatten() {
            if !ALLOWED.contains(&cap.as_str().unwrap()) {
                out.push(format!("capability {cap}"));
            }
        }
        for p in c["ports"].as_array().into_iter().flatten() {
            if p.get("hostPort").is_some() {
                out.push("hostPort".into());
            }
        }
    }
    out
}

/// Least privilege, per workload: every namespace written enforces baseline exactly when
/// all its pods pass baseline (privileged only where some pod needs it), never a system
/// namespace; the training side (training and the acceptance test) and serving are judged
/// apart, so when only training needs the host network it gets its own namespace and
/// serving stays at baseline.
fn check_pod_security(name: &str, docs: &BTreeMap<String, Vec<Value>>) -> Vec<String> {
    let namespaces = namespaces_of(docs);
    let mut levels = BTreeMap::new();
    for (f, d) in docs {
        if d[0]["kind"] == "Namespace" {
            let labels = &d[0]["metadata"]["labels"];
            levels.insert(
                d[0]["metadata"]["name"].as_str().unwrap().to_string(),
                labels["pod-security.kubernetes.io/enforce"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{name}/{f}: no Pod Security level"))
                    .to_string(),
            );
        }
    }
    for n in &namespaces {
        assert!(
            !["default", "kube-system", "kube-public", "kube-node-lease"].contains(&n.as_str()),
            "{name}: {n}"
        );
    }
    let mut needs: BTreeMap<String, Vec<String>> =
        namespaces.iter().map(|n| (n.clone(), Vec::new())).collect();
    for (f, d) in docs {
        let Some(ns) = d[0]["metadata"]["namespace"].as_str() else {
            continue;
        };
        let mut pods = Vec::new();
        pod_specs(&d[0], "", &mut pods);
        for (path, pod) in pods {
            for why in beyond_baseline(pod) {
                needs
                    .get_mut(ns)
                    .unwrap_or_else(|| panic!("{name}/{f}: namespace {ns} is not written"))
                    .push(format!("{f}{path}: {why}"));
            }
        }
    }
    for (n, why) in &needs {
        let want = if why.is_empty() {
            "baseline"
        } else {
            "privileged"
        };
        assert_eq!(levels[n], want, "{name}: namespace {n}: {why:?}");
    }
    namespaces
}

/// Images, driver, toolkit, DCGM Exporter, NCCL environment and expected bandwidth in the
/// manifests equal the lock's, and the images and environment equal the container target's.
#[test]
fn manifests_agree_with_the_lock_and_the_images() {
    let Some(t) = tools() else { return };
    let mut checked_images = 0;
    for name in example_names() {
        let lock = read_lock(&root().join("lockfiles").join(format!("{name}.lock")));
        let dir = generate(&name, "k8s");
        let docs = parse_yaml(&t.py, &dir);
        let docker = generate(&name, "docker");
        let bake = std::fs::read_to_string(docker.join("docker-bake.hcl")).unwrap();
        let dockerfile = std::fs::read_to_string(docker.join("Dockerfile")).unwrap();
        let tags: Vec<String> = bake
            .lines()
            .filter(|l| l.trim_start().starts_with("tags"))
            .flat_map(|l| l.split('"').skip(1).step_by(2).map(str::to_string))
            .collect();
        assert!(!tags.is_empty(), "{name}: no tags in docker-bake.hcl");

        let facts = lock
            .get("fact")
            .and_then(|f| f.as_array())
            .cloned()
            .unwrap_or_default();
        let packages = lock
            .get("package")
            .and_then(|f| f.as_array())
            .cloned()
            .unwrap_or_default();
        let package = |n: &str| {
            packages
                .iter()
                .find(|p| p["name"].as_str() == Some(n))
                .cloned()
        };

        // NCCL/fabric environment: lock = ConfigMap = Dockerfile ENV.
        let env: BTreeMap<String, String> = facts
            .iter()
            .filter(|f| f["kind"].as_str() == Some("env"))
            .map(|f| {
                (
                    f["key"].as_str().unwrap().to_string(),
                    f["value"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let cm = &docs["nccl-env.yaml"][0]["data"];
        let got: BTreeMap<String, String> = cm
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
            .collect();
        assert_eq!(
            got, env,
            "{name}: nccl-env ConfigMap vs the lock's env facts"
        );
        for (k, v) in &env {
            let line = format!("{k}={}", serde_json::to_string(v).unwrap());
            assert!(
                dockerfile.contains(&line),
                "{name}: the Dockerfile has no `{line}`"
            );
        }

        // Every pod: a built image, the env ConfigMap, the GFD label of the lock.
        let gfd = lock["hardware"]
            .get("gpu")
            .and_then(|g| g.as_array())
            .and_then(|g| g.first())
            .and_then(|g| g.get("gfd-product"))
            .and_then(|g| g.as_str())
            .map(str::to_string);
        let pods: Vec<(&str, &str, &Value)> = [
            (
                "pytorchjob.yaml",
                "spec.pytorchReplicaSpecs.Worker.template.spec",
                ":training-",
            ),
            (
                "trainingruntime.yaml",
                "spec.template.spec.replicatedJobs.0.template.spec.template.spec",
                ":training-",
            ),
            ("vllm-deployment.yaml", "spec.template.spec", ":inference-"),
            ("nccl-tests-job.yaml", "spec.template.spec", ":validate-"),
            (
                "nccl-tests-runtime.yaml",
                "spec.template.spec.replicatedJobs.0.template.spec.template.spec",
                ":validate-",
            ),
        ]
        .iter()
        .filter_map(|(f, p, layer)| docs.get(*f).map(|d| (*f, *layer, get(&d[0], p))))
        .collect();
        for (f, layer, pod) in &pods {
            let c = &pod["containers"][0];
            let image = c["image"].as_str().unwrap();
            assert!(
                tags.iter().any(|t| t == image),
                "{name}/{f}: image {image} is not built by docker-bake.hcl {tags:?}"
            );
            let layer_built = tags.iter().any(|t| t.contains(layer));
            assert!(
                !layer_built || image.contains(layer),
                "{name}/{f}: {image} is not the {layer} image"
            );
            assert_eq!(
                c["envFrom"][0]["configMapRef"]["name"], "nccl-env",
                "{name}/{f}"
            );
            match &gfd {
                Some(g) => assert_eq!(
                    pod["nodeSelector"]["nvidia.com/gpu.product"],
                    g.as_str(),
                    "{name}/{f}"
                ),
                None => assert!(
                    pod["nodeSelector"].get("nvidia.com/gpu.product").is_none(),
                    "{name}/{f}"
                ),
            }
            let shm = pod["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|v| v["name"] == "dshm")
                .unwrap();
            assert_eq!(shm["emptyDir"]["medium"], "Memory", "{name}/{f}");
            checked_images += 1;
        }

        // The acceptance test (an Indexed Job, or an MPI TrainJob when nccl-tests is built
        // with Open MPI) exists exactly when the validate image is built.
        let validate_built = tags.iter().any(|t| t.contains(":validate-"));
        let mpi = package("openmpi").is_some();
        assert_eq!(
            docs.contains_key("nccl-tests-job.yaml"),
            validate_built && !mpi,
            "{name}"
        );
        assert_eq!(
            docs.contains_key("nccl-tests-trainjob.yaml")
                && docs.contains_key("nccl-tests-runtime.yaml"),
            validate_built && mpi,
            "{name}"
        );
        if let Some(j) = docs.get("nccl-tests-job.yaml") {
            let c = get(&j[0], "spec.template.spec.containers.0");
            let gpn = lock["request"]
                .get("cluster")
                .map_or(8, |c| c["gpus_per_node"].as_integer().unwrap());
            let nodes = lock["request"]
                .get("cluster")
                .map_or(1, |c| c["nodes"].as_integer().unwrap());
            // Judged (the lock has a figure nccl-tests measured): `bash -c JUDGE
            // gpustack-acceptance` runs the args and pipes them through the judge.
            let command = strs(&c["command"]);
            let mut args = strs(&c["args"]);
            if command[0] == "bash" {
                assert_eq!(command.len(), 4, "{name}: {command:?}");
                assert_eq!(command[3], "gpustack-acceptance", "{name}");
                assert!(command[2].contains("gpustack acceptance"), "{name}");
            } else {
                assert_eq!(command, ["all_reduce_perf"], "{name}");
                args.insert(0, "all_reduce_perf".to_string());
            }
            assert_eq!(args[0], "all_reduce_perf", "{name}");
            assert_eq!(
                args[1..],
                [
                    "-b",
                    "8",
                    "-e",
                    "8G",
                    "-f",
                    "2",
                    "-g",
                    gpn.to_string().as_str()
                ]
            );
            assert_eq!(c["resources"]["limits"]["nvidia.com/gpu"], gpn, "{name}");
            assert_eq!(j[0]["spec"]["completions"], nodes, "{name}");
            assert_eq!(j[0]["spec"]["parallelism"], nodes, "{name}");
        }

        // Expected bandwidth: the lock's figures and sources.
        let exp = &docs["expected-bandwidth.yaml"][0]["data"];
        let bw: Vec<&toml::Value> = facts
            .iter()
            .filter(|f| f["kind"].as_str() == Some("bandwidth"))
            .collect();
        assert_eq!(exp.as_object().unwrap().is_empty(), bw.is_empty(), "{name}");
        for f in bw {
            let key = f["key"].as_str().unwrap();
            // The osu_bw figure is a point-to-point bandwidth, not a busbw (tests/fabric.rs
            // checks its MB/s and size keys).
            let field = if key == "osu_bw" {
                "gbps"
            } else {
                "busbw-gbps"
            };
            assert_eq!(
                exp[format!("{key}.{field}")],
                f["busbw-gbps"].as_str().unwrap(),
                "{name}"
            );
            assert_eq!(
                exp[format!("{key}.source")],
                f["source"].as_str().unwrap(),
                "{name}"
            );
        }

        // GPU Operator values: the locked driver (or none when it is installed), toolkit,
        // DCGM Exporter.
        let v = &docs["gpu-operator-values.yaml"][0];
        let driver = lock["hardware"]["driver"].as_str().unwrap();
        let installed = lock["hardware"]["driver-source"].as_str() == Some("installed");
        assert_eq!(v["driver"]["enabled"], !installed, "{name}");
        if installed {
            assert!(v["driver"].get("version").is_none(), "{name}");
        } else {
            assert_eq!(v["driver"]["version"], driver, "{name}");
        }
        let driver_component = lock["component"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"].as_str() == Some("driver"));
        if let Some(d) = driver_component {
            assert_eq!(d["version"].as_str(), Some(driver), "{name}");
        }
        if let Some(p) = package("nvidia-container-toolkit") {
            // By the image's digest where the lock has one (the operator pulls
            // `repository/image@version` for a `sha256:` version), else the version's tag.
            let want = p.get("image-digest").and_then(|d| d.as_str()).map_or_else(
                || format!("v{}", p["version"].as_str().unwrap()),
                str::to_string,
            );
            assert_eq!(v["toolkit"]["version"], want, "{name}");
        }
        if let Some(p) = package("dcgm-exporter") {
            // The digest where the lock has one, else the tag NVIDIA publishes for the
            // version (`-distroless` flavour), else the version.
            let tag = p
                .get("image-digest")
                .or_else(|| p.get("image-tag"))
                .or_else(|| p.get("version"))
                .and_then(|t| t.as_str())
                .unwrap();
            assert_eq!(v["dcgmExporter"]["version"], tag, "{name}");
            if let Some(img) = p.get("image").and_then(|i| i.as_str()) {
                let joined = format!(
                    "{}/{}",
                    v["dcgmExporter"]["repository"].as_str().unwrap(),
                    v["dcgmExporter"]["image"].as_str().unwrap()
                );
                assert_eq!(joined, img, "{name}");
            }
        }

        // Storage: every pod that runs work mounts it; datasets read-only.
        if let Some(st) = lock["request"].get("storage") {
            for (f, _, pod) in pods
                .iter()
                .filter(|(f, _, _)| !f.starts_with("nccl-tests-"))
            {
                let mounts = pod["containers"][0]["volumeMounts"].as_array().unwrap();
                for (which, ro) in [("datasets", true), ("checkpoints", false)] {
                    let Some(loc) = st.get(which).and_then(|s| s.as_str()) else {
                        continue;
                    };
                    let m = mounts
                        .iter()
                        .find(|m| m["name"] == which)
                        .unwrap_or_else(|| panic!("{name}/{f}: no {which} mount"));
                    assert_eq!(m["mountPath"], format!("/data/{which}"), "{name}/{f}");
                    assert_eq!(
                        m.get("readOnly").and_then(Value::as_bool).unwrap_or(false),
                        ro,
                        "{name}/{f}"
                    );
                    let vol = pod["volumes"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|v| v["name"] == which)
                        .unwrap();
                    if let Some(rest) = loc.strip_prefix("nfs://") {
                        let (host, path) = rest.split_once('/').unwrap();
                        assert_eq!(vol["nfs"]["server"], host, "{name}/{f}");
                        assert_eq!(vol["nfs"]["path"], format!("/{path}"), "{name}/{f}");
                    } else if let Some(p) = loc
                        .strip_prefix("lustre:")
                        .or_else(|| loc.strip_prefix("hostpath:"))
                    {
                        assert_eq!(vol["hostPath"]["path"], p, "{name}/{f}");
                    } else if let Some(c) = loc.strip_prefix("pvc:") {
                        assert_eq!(vol["persistentVolumeClaim"]["claimName"], c, "{name}/{f}");
                    }
                }
            }
        }

        // Train and serve: the shape of the request.
        let req = &lock["request"];
        let nodes = req
            .get("cluster")
            .map_or(1, |c| c["nodes"].as_integer().unwrap());
        let gpn = req
            .get("cluster")
            .map_or(8, |c| c["gpus_per_node"].as_integer().unwrap());
        assert_eq!(
            docs.contains_key("pytorchjob.yaml") || docs.contains_key("trainjob.yaml"),
            req.get("train").is_some(),
            "{name}"
        );
        if let Some(j) = docs.get("trainjob.yaml") {
            let s = &j[0]["spec"];
            assert_eq!(s["trainer"]["numNodes"], nodes, "{name}");
            assert_eq!(s["runtimeRef"]["kind"], "TrainingRuntime", "{name}");
            let r = &docs["trainingruntime.yaml"][0];
            assert_eq!(s["runtimeRef"]["name"], r["metadata"]["name"], "{name}");
            assert_eq!(r["spec"]["mlPolicy"]["numNodes"], nodes, "{name}");
            let pod = get(
                r,
                "spec.template.spec.replicatedJobs.0.template.spec.template.spec",
            );
            let c = &pod["containers"][0];
            assert_eq!(c["name"], "node", "{name}: the Trainer's trainer container");
            // The TrainJob's resources are the runtime container's.
            assert_eq!(s["trainer"]["resourcesPerNode"], c["resources"], "{name}");
            assert_eq!(c["resources"]["limits"]["nvidia.com/gpu"], gpn, "{name}");
            assert_eq!(s["trainer"]["image"], c["image"], "{name}");
            let fabric = req
                .get("cluster")
                .and_then(|c| c["fabric"].as_str())
                .unwrap_or("none");
            let rdma = nodes > 1 && (fabric == "infiniband" || fabric == "roce");
            assert_eq!(
                pod["hostNetwork"].as_bool().unwrap_or(false),
                rdma,
                "{name}"
            );
            let queue = req
                .get("k8s")
                .and_then(|k| k.get("queue"))
                .and_then(|q| q.as_str());
            assert_eq!(
                j[0]["metadata"]["labels"]["kueue.x-k8s.io/queue-name"].as_str(),
                queue,
                "{name}"
            );
        }
        if let Some(j) = docs.get("pytorchjob.yaml") {
            let s = &j[0]["spec"];
            assert_eq!(s["nprocPerNode"], gpn.to_string(), "{name}");
            assert_eq!(
                s["pytorchReplicaSpecs"]["Worker"]["replicas"], nodes,
                "{name}"
            );
            assert_eq!(s["elasticPolicy"]["rdzvBackend"], "c10d", "{name}");
            assert_eq!(s["elasticPolicy"]["minReplicas"], nodes, "{name}");
            assert_eq!(s["elasticPolicy"]["maxReplicas"], nodes, "{name}");
            let c = get(s, "pytorchReplicaSpecs.Worker.template.spec.containers.0");
            assert_eq!(c["resources"]["limits"]["nvidia.com/gpu"], gpn, "{name}");
            // What the container starts is checked across targets, by running it:
            // tests/workload.rs.
            let fabric = req
                .get("cluster")
                .and_then(|c| c["fabric"].as_str())
                .unwrap_or("none");
            let pod = get(s, "pytorchReplicaSpecs.Worker.template.spec");
            let rdma = nodes > 1 && (fabric == "infiniband" || fabric == "roce");
            assert_eq!(
                pod["hostNetwork"].as_bool().unwrap_or(false),
                rdma,
                "{name}"
            );
            assert_eq!(
                c["resources"]["limits"]
                    .get("rdma/rdma_shared_device_a")
                    .is_some(),
                rdma,
                "{name}"
            );
        }
        assert_eq!(
            docs.contains_key("vllm-deployment.yaml"),
            req.get("serve").is_some(),
            "{name}"
        );
        if let Some(d) = docs.get("vllm-deployment.yaml") {
            let s = &req["serve"];
            let tp = s
                .get("tensor_parallel")
                .map_or(1, |v| v.as_integer().unwrap());
            let len = s
                .get("max_model_len")
                .map_or(4096, |v| v.as_integer().unwrap());
            let replicas = s.get("replicas").map_or(1, |v| v.as_integer().unwrap());
            let c = get(&d[0], "spec.template.spec.containers.0");
            assert_eq!(strs(&c["command"]), ["vllm"]);
            assert_eq!(
                strs(&c["args"]),
                [
                    "serve",
                    s["model"].as_str().unwrap(),
                    "--tensor-parallel-size",
                    tp.to_string().as_str(),
                    "--max-model-len",
                    len.to_string().as_str(),
                    "--port",
                    "8000"
                ]
            );
            assert_eq!(c["resources"]["limits"]["nvidia.com/gpu"], tp, "{name}");
            assert_eq!(d[0]["spec"]["replicas"], replicas, "{name}");
            assert_eq!(
                docs["vllm-hpa.yaml"][0]["spec"]["minReplicas"], replicas,
                "{name}"
            );
            for probe in ["readinessProbe", "livenessProbe", "startupProbe"] {
                assert_eq!(c[probe]["httpGet"]["path"], "/health", "{name}");
            }
            assert_eq!(
                docs["vllm-service.yaml"][0]["spec"]["ports"][0]["port"],
                8000
            );
        }
    }
    assert!(checked_images >= 10, "only {checked_images} pods checked");
}

/// Writes `spec` into a fresh directory, locks and generates k8s; returns the `k8s/` dir.
fn lock_and_generate(tag: &str, spec: &str) -> PathBuf {
    let dir = tempdir(tag);
    std::fs::write(dir.join("gpustack.toml"), spec).unwrap();
    let out = run_in(&dir, &["lock"]);
    assert_eq!(out.code, 0, "lock: {}", out.stderr);
    let out = run_in(
        &dir,
        &["gen", "k8s", "--lock", "gpustack.lock", "--out", "out"],
    );
    assert_eq!(out.code, 0, "gen k8s: {}", out.stderr);
    dir.join("out/k8s")
}

fn hostile_spec(command: &[&str], model: &str) -> String {
    let base =
        std::fs::read_to_string(root().join("fixtures/specs/h100-ib-train-serve.toml")).unwrap();
    let cmd: Vec<String> = command
        .iter()
        .map(|a| toml::Value::String((*a).to_string()).to_string())
        .collect();
    let mut out = String::new();
    for line in base.lines() {
        if line.starts_with("command = ") {
            out.push_str(&format!("command = [{}]\n", cmd.join(", ")));
        } else if line.starts_with("model = ") {
            out.push_str(&format!("model = {}\n", toml::Value::String(model.into())));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Hostile but valid spec values stay data: the manifests still validate, and the command
/// and model come back from the parsed YAML exactly as written.
#[test]
fn hostile_values_stay_data() {
    let Some(t) = tools() else { return };
    let hostile: &[&str] = &[
        "print('x'); import os",
        "$(id)",
        "`id`",
        "a\"b: c",
        "- d",
        "{e}",
        "[f]",
        "#g",
        "&h *i",
        "!!python/object:os.system",
        "--flag='q'",
        "{{ x }}",
        "{% y %}",
        "${z}",
        "\\",
        "yes",
        "null",
        "0x10",
        "~",
        "@at",
        "key: value",
        "x; rm -rf /",
        "é ü 中",
    ];
    for (variant, first) in [
        ("executable", vec!["./run.sh"]),
        ("torchrun", vec!["python", "train.py"]),
    ] {
        let mut command: Vec<&str> = first.clone();
        command.extend_from_slice(hostile);
        let dir = lock_and_generate(
            &format!("hostile-{variant}"),
            &hostile_spec(&command, "1e3"),
        );
        validate_dir(&t, &dir, "1.30.0").unwrap_or_else(|e| panic!("{variant}: {e}"));
        let docs = parse_yaml(&t.py, &dir);
        // The TrainJob's trainer says what starts.
        let c = get(&docs["trainjob.yaml"][0], "spec.trainer");
        let mut got = strs(&c["command"]);
        got.extend(strs(&c["args"]));
        // What torchrun runs comes last, every argument exactly as written.
        let tail: Vec<String> = if variant == "torchrun" {
            command[1..].iter().map(|s| s.to_string()).collect()
        } else {
            std::iter::once("--no-python")
                .chain(command.iter().copied())
                .map(str::to_string)
                .collect()
        };
        assert_eq!(got[0], "torchrun", "{variant}");
        assert!(got.ends_with(&tail), "{variant}: {got:?}");
        let v = get(
            &docs["vllm-deployment.yaml"][0],
            "spec.template.spec.containers.0.args.1",
        );
        assert_eq!(
            v, "1e3",
            "{variant}: a model id that YAML would read as a number"
        );
        // Nothing hostile leaks into a comment or a key: every occurrence is inside a quoted
        // scalar of the command/args lists.
        let text = std::fs::read_to_string(dir.join("trainjob.yaml")).unwrap();
        for h in hostile {
            let quoted = serde_json::to_string(h).unwrap();
            assert!(
                text.contains(&format!("- {quoted}")),
                "{variant}: {h:?} not quoted"
            );
        }
        let _ = std::fs::remove_dir_all(dir.parent().unwrap().parent().unwrap());
    }
}

fn corrupt(dir: &Path, file: &str, from: &str, to: &str) {
    let p = dir.join(file);
    let text = std::fs::read_to_string(&p).unwrap();
    assert!(text.contains(from), "{file} has no `{from}`");
    std::fs::write(&p, text.replacen(from, to, 1)).unwrap();
}

/// The example spec with a vLLM server over two nodes per replica (a LeaderWorkerSet),
/// for Kubernetes alone (Slurm does not write a multi-node server).
fn lws_spec() -> String {
    std::fs::read_to_string(root().join("fixtures/specs/h100-ib-train-serve.toml"))
        .unwrap()
        .replace("replicas = 2\n", "replicas = 1\nnodes = 2\n")
        .replace(
            "[slurm]\npartition = \"gpu\"\ncontainer = \"pyxis\"\ntime = \"48:00:00\"\n",
            "",
        )
}

/// The validators really run: broken copies of generated manifests are rejected, one of
/// every kind written (built-in, each custom resource against its CRD, YAML style).
#[test]
fn validators_reject_broken_manifests() {
    let Some(t) = tools() else { return };
    let sources = [
        ("h100", generate("h100-ib-train-serve", "k8s"), "1.30.0"),
        ("gh200", generate("gh200-hpc", "k8s"), "1.31.0"),
        (
            "lws",
            lock_and_generate("broken-lws", &lws_spec()),
            "1.30.0",
        ),
    ];
    for (_, dir, v) in &sources {
        validate_dir(&t, dir, v).unwrap();
    }
    // (source, what, file, text, replacement, a word the rejection must name)
    let cases: &[(&str, &str, &str, &str, &str, &str)] = &[
        (
            "h100",
            "replicas as a word",
            "vllm-deployment.yaml",
            "replicas: 2",
            "replicas: two",
            "'two' is not of type 'integer'",
        ),
        (
            "h100",
            "unknown field",
            "vllm-service.yaml",
            "type: ClusterIP",
            "typo: ClusterIP",
            "'typo' was unexpected",
        ),
        (
            "h100",
            "unknown kind (kubernetes-validate only warns)",
            "vllm-pdb.yaml",
            "kind: PodDisruptionBudget",
            "kind: PodDisruptionBudgit",
            "WARN",
        ),
        (
            "h100",
            "quota typo",
            "resourcequota.yaml",
            "hard:",
            "hardd:",
            "'hardd' was unexpected",
        ),
        (
            "h100",
            "TrainJob nodes as a word",
            "trainjob.yaml",
            "numNodes: 8",
            "numNodes: eight",
            "'eight' is not of type 'integer'",
        ),
        (
            "h100",
            "TrainJob unknown trainer field",
            "trainjob.yaml",
            "resourcesPerNode:",
            "resourcesPerNod:",
            "'resourcesPerNod' was unexpected",
        ),
        (
            "h100",
            "TrainingRuntime unknown policy field",
            "trainingruntime.yaml",
            "numNodes: 8",
            "numNodez: 8",
            "'numNodez' was unexpected",
        ),
        (
            "h100",
            "TrainingRuntime container typo",
            "trainingruntime.yaml",
            "workingDir:",
            "workingDirr:",
            "'workingDirr' was unexpected",
        ),
        (
            "h100",
            "MPI runtime: an MPI implementation the Trainer does not know",
            "nccl-tests-runtime.yaml",
            "mpiImplementation: OpenMPI",
            "mpiImplementation: MVAPICH",
            "'MVAPICH' is not one of",
        ),
        (
            "h100",
            "MPI runtime: slots as a word",
            "nccl-tests-runtime.yaml",
            "numProcPerNode: 8",
            "numProcPerNode: eight",
            "'eight' is not of type 'integer'",
        ),
        (
            "h100",
            "MPI runtime: dependsOn on a status JobSet does not have",
            "nccl-tests-runtime.yaml",
            "status: Ready",
            "status: Running",
            "'Running' is not one of",
        ),
        (
            "h100",
            "acceptance TrainJob: runtime reference typo",
            "nccl-tests-trainjob.yaml",
            "runtimeRef:",
            "runtimeReff:",
            "'runtimeReff' was unexpected",
        ),
        (
            "h100",
            "ServiceMonitor typo",
            "monitoring/vllm-servicemonitor.yaml",
            "interval: 30s",
            "intervall: 30s",
            "'intervall' was unexpected",
        ),
        (
            "h100",
            "ResourceFlavor typo",
            "kueue/resource-flavor.yaml",
            "nodeLabels:",
            "nodeLabelz:",
            "'nodeLabelz' was unexpected",
        ),
        (
            "h100",
            "ClusterQueue quota typo",
            "kueue/cluster-queue.yaml",
            "nominalQuota: 64",
            "nominalQuotaa: 64",
            "'nominalQuotaa' was unexpected",
        ),
        (
            "h100",
            "LocalQueue queue as a number",
            "kueue/local-queue.yaml",
            "clusterQueue: \"gpu\"",
            "clusterQueue: 7",
            "7 is not of type 'string'",
        ),
        (
            "h100",
            "Topology typo",
            "kueue/topology.yaml",
            "- nodeLabel: kubernetes.io/hostname",
            "- nodeLabell: kubernetes.io/hostname",
            "'nodeLabell' was unexpected",
        ),
        (
            "h100",
            "wrong API version",
            "kueue/topology.yaml",
            "kueue.x-k8s.io/v1beta2",
            "kueue.x-k8s.io/v1",
            "was expected",
        ),
        (
            "lws",
            "LeaderWorkerSet size as a word",
            "vllm-leaderworkerset.yaml",
            "size: 2",
            "size: two",
            "'two' is not of type 'integer'",
        ),
        (
            "lws",
            "PodMonitor endpoint list typo",
            "monitoring/vllm-podmonitor.yaml",
            "podMetricsEndpoints:",
            "podMetricEndpoints:",
            "'podMetricEndpoints' was unexpected",
        ),
        (
            "lws",
            "PodMonitor without a selector",
            "monitoring/vllm-podmonitor.yaml",
            "  selector:",
            "  selectorr:",
            "'selector' is a required property",
        ),
        (
            "lws",
            "LeaderWorkerSet rollout typo",
            "vllm-leaderworkerset.yaml",
            "maxSurge: 0",
            "maxSurges: 0",
            "'maxSurges' was unexpected",
        ),
        (
            "gh200",
            "nprocPerNode as a number",
            "pytorchjob.yaml",
            "nprocPerNode: \"4\"",
            "nprocPerNode: 4",
            "is not of type 'string'",
        ),
        (
            "gh200",
            "replica spec typo",
            "pytorchjob.yaml",
            "restartPolicy: OnFailure",
            "restartPolicyy: OnFailure",
            "'restartPolicyy' was unexpected",
        ),
        (
            "gh200",
            "GPU quantity as a word",
            "pytorchjob.yaml",
            "nvidia.com/gpu: 4",
            "nvidia.com/gpu: four",
            "'four' does not match",
        ),
        (
            "h100",
            "duplicate key",
            "gpu-operator-values.yaml",
            "toolkit:\n",
            "toolkit:\n  enabled: true\n",
            "key-duplicates",
        ),
        (
            "h100",
            "truthy value",
            "gpu-operator-values.yaml",
            "enabled: true",
            "enabled: yes",
            "truthy",
        ),
    ];
    for (source, what, file, from, to, why) in cases {
        let (_, good, v) = sources.iter().find(|(n, _, _)| n == source).unwrap();
        let dir = tempdir(&format!("broken-{}", file.replace(['.', '/'], "-")));
        copy_dir(good, &dir);
        corrupt(&dir, file, from, to);
        // The broken file alone: the whole directory passed above.
        match validate_files(&t, &dir, &[(*file).to_string()], v) {
            Ok(()) => panic!("{what} in {file} was accepted"),
            Err(e) => assert!(
                e.contains(why),
                "{what} in {file}: rejected, but not for `{why}`:\n{e}"
            ),
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Specs without deployment tables still get the cluster-wide files, with defaults.
#[test]
fn defaults_without_deployment_tables() {
    let dir = generate("a100-pytorch", "k8s");
    let files = yaml_files(&dir);
    assert_eq!(
        files,
        [
            "expected-bandwidth.yaml",
            "gpu-operator-values.yaml",
            "kustomization.yaml",
            "namespace.yaml",
            "nccl-env.yaml",
            "nccl-tests-job.yaml",
            "resourcequota.yaml",
        ]
    );
    let ns = std::fs::read_to_string(dir.join("namespace.yaml")).unwrap();
    assert!(ns.contains("name: \"gpustack\""), "{ns}");
    // Nothing here needs the host: the baseline Pod Security level.
    assert!(
        ns.contains("pod-security.kubernetes.io/enforce: baseline"),
        "{ns}"
    );
}

/// A server that does not fit its nodes is refused when the spec is locked, with the
/// reason; spread over nodes it is accepted and becomes a LeaderWorkerSet.
#[test]
fn serve_parallelism_is_checked_at_lock_time() {
    let base = hostile_spec(&["python", "train.py"], "/models/x");
    for (what, from, to, why) in [
        (
            "tp 16 on one node",
            "tensor_parallel = 8",
            "tensor_parallel = 16",
            "`tensor_parallel = 16` is more than the 8 GPUs of a node",
        ),
        (
            "pp 3 over 2 nodes of 8",
            "replicas = 2\n",
            "replicas = 1\nnodes = 2\npipeline_parallel = 3\n",
            "do not fit 2 node(s)",
        ),
        (
            "uneven split",
            "tensor_parallel = 8",
            "tensor_parallel = 3\nnodes = 2\npipeline_parallel = 1",
            "do not split evenly over 2 nodes",
        ),
        (
            "more nodes than the cluster",
            "replicas = 2\n",
            "replicas = 1\nnodes = 16\n",
            "more than the 8 nodes of [cluster]",
        ),
        (
            "a system namespace",
            "namespace = \"llm\"",
            "namespace = \"kube-system\"",
            "system namespace",
        ),
    ] {
        let dir = tempdir("serve-shape");
        assert!(base.contains(from), "{what}");
        std::fs::write(dir.join("gpustack.toml"), base.replacen(from, to, 1)).unwrap();
        let out = run_in(&dir, &["lock"]);
        assert_ne!(out.code, 0, "{what}: locked");
        assert!(out.stderr.contains(why), "{what}: {}", out.stderr);
        let _ = std::fs::remove_dir_all(&dir);
    }
    let spec = lws_spec();
    assert!(!spec.contains("[slurm]"));
    let dir = lock_and_generate("serve-lws", &spec);
    assert!(dir.join("vllm-leaderworkerset.yaml").exists());
    assert!(!dir.join("vllm-deployment.yaml").exists());
    // With [slurm], the lock says Slurm does not write a multi-node server, rather than
    // gen writing a wrong one.
    let dir = tempdir("serve-lws-slurm");
    let with_slurm = base.replacen("replicas = 2\n", "replicas = 1\nnodes = 2\n", 1);
    std::fs::write(dir.join("gpustack.toml"), with_slurm).unwrap();
    let out = run_in(&dir, &["lock"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("Kubernetes only"), "{}", out.stderr);
    assert!(out.stderr.contains("--> gpustack.toml:"), "{}", out.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A request gen k8s cannot satisfy fails with a diagnostic at its line.
#[test]
fn tensor_parallel_beyond_a_node_is_refused() {
    let spec = hostile_spec(&["python", "train.py"], "/models/x")
        .replace("tensor_parallel = 8", "tensor_parallel = 16");
    let dir = tempdir("tp16");
    std::fs::write(dir.join("gpustack.toml"), spec).unwrap();
    // Refused when locking, at its line (issue 17: lock refuses what gen would).
    let out = run_in(&dir, &["lock"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("tensor_parallel"), "{}", out.stderr);
    assert!(out.stderr.contains("--> gpustack.toml:"), "{}", out.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The fabrics and shapes the example specs do not cover (EFA, RoCE, Ethernet, one node;
/// PVC and hostPath storage) validate too, with RDMA settings exactly where they belong.
#[test]
fn fabric_variants_validate() {
    let Some(t) = tools() else { return };
    let base = hostile_spec(&["python", "train.py"], "meta-llama/Llama-3.1-8B");
    for (fabric, nodes) in [("efa", 2), ("roce", 2), ("ethernet", 2), ("infiniband", 1)] {
        let spec: String = base
            .lines()
            .map(|l| {
                if l == "[image]" && fabric == "efa" {
                    // Multi-node EFA on Kubernetes names the device plugin's resource count
                    // (rule deploy::fabric_device).
                    "[network]\nefa_devices = 32\n\n[image]".into()
                } else if l.starts_with("fabric = ") {
                    format!("fabric = \"{fabric}\"")
                } else if l.starts_with("nodes = ") {
                    format!("nodes = {nodes}")
                } else if l.starts_with("datasets = ") {
                    "datasets = \"pvc:datasets\"".into()
                } else if l.starts_with("checkpoints = ") {
                    "checkpoints = \"hostpath:/mnt/ckpt\"".into()
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        let dir = lock_and_generate(&format!("fabric-{fabric}-{nodes}"), &spec);
        validate_dir(&t, &dir, "1.30.0").unwrap_or_else(|e| panic!("{fabric}×{nodes}: {e}"));
        let docs = parse_yaml(&t.py, &dir);
        let pod = get(
            &docs["trainingruntime.yaml"][0],
            "spec.template.spec.replicatedJobs.0.template.spec.template.spec",
        );
        let rdma = nodes > 1 && (fabric == "infiniband" || fabric == "roce");
        assert_eq!(
            pod["hostNetwork"].as_bool().unwrap_or(false),
            rdma,
            "{fabric}"
        );
        assert_eq!(
            pod["dnsPolicy"] == "ClusterFirstWithHostNet",
            rdma,
            "{fabric}"
        );
        let limits = &pod["containers"][0]["resources"]["limits"];
        assert_eq!(
            limits.get("rdma/rdma_shared_device_a").is_some(),
            rdma,
            "{fabric}"
        );
        // Multi-node EFA pods request the instance's EFA interfaces ([network].efa_devices).
        assert_eq!(
            limits.get("vpc.amazonaws.com/efa").and_then(|v| v.as_i64()),
            (fabric == "efa").then_some(32),
            "{fabric}"
        );
        let ns = &docs["namespace.yaml"][0]["metadata"]["labels"];
        // Pod Security: privileged only where a pod needs the host network or a host
        // path; these variants mount checkpoints from a host path.
        let host_path = pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v.get("hostPath").is_some());
        assert!(host_path, "{fabric}");
        assert_eq!(
            ns["pod-security.kubernetes.io/enforce"], "privileged",
            "{fabric}"
        );
        let why = std::fs::read_to_string(dir.join("namespace.yaml")).unwrap();
        assert_eq!(why.contains("hostNetwork and IPC_LOCK"), rdma, "{fabric}");
        assert!(why.contains("hostPath volumes"), "{fabric}");
        let text = std::fs::read_to_string(dir.join("trainingruntime.yaml")).unwrap();
        assert_eq!(
            text.contains("vpc.amazonaws.com/efa"),
            fabric == "efa",
            "{fabric}: the EFA comment"
        );
        let vols = pod["volumes"].as_array().unwrap();
        let v = |n: &str| vols.iter().find(|v| v["name"] == n).unwrap();
        assert_eq!(
            v("datasets")["persistentVolumeClaim"]["claimName"],
            "datasets"
        );
        assert_eq!(v("datasets")["persistentVolumeClaim"]["readOnly"], true);
        assert_eq!(v("checkpoints")["hostPath"]["path"], "/mnt/ckpt");
        let serve = std::fs::read_to_string(dir.join("vllm-deployment.yaml")).unwrap();
        assert!(serve.contains("Hugging Face id"), "{serve}");
        let _ = std::fs::remove_dir_all(dir.parent().unwrap().parent().unwrap());
    }
}

/// The pods' secondary networks (`[network].pod_subnets`, fixtures/fabrics/*-pod-networks):
/// every object validates against the Network Operator's CRDs; the pods leave the host
/// network and annotate exactly the generated networks, under their interface names; each
/// network's IPAM names a generated IPPool of its subnet; the NicClusterPolicy deploys
/// what those objects need (nv-ipam, Multus, the CNI plugins, the IPoIB CNI on InfiniBand).
#[test]
fn pod_networks_validate_and_agree() {
    let Some(t) = tools() else { return };
    for (fabric, kind, interfaces, subnets) in [
        (
            "infiniband",
            "IPoIBNetwork",
            &["ib0", "ib1"][..],
            &["192.168.5.0/24", "192.168.6.0/24"][..],
        ),
        (
            "roce",
            "MacvlanNetwork",
            &["ens1f0np0"][..],
            &["192.168.4.0/24"][..],
        ),
    ] {
        let spec = std::fs::read_to_string(
            root().join(format!("fixtures/fabrics/{fabric}-pod-networks.toml")),
        )
        .unwrap();
        let dir = lock_and_generate(&format!("pod-networks-{fabric}"), &spec);
        validate_dir(&t, &dir, "1.30.0").unwrap_or_else(|e| panic!("{fabric}: {e}"));
        let docs = parse_yaml(&t.py, &dir);
        let of_kind = |k: &str| -> Vec<&Value> {
            docs.values().flatten().filter(|d| d["kind"] == k).collect()
        };
        let nets = of_kind(kind);
        let pools = of_kind("IPPool");
        assert_eq!(
            nets.len(),
            interfaces.len(),
            "{fabric}: one network per interface"
        );
        for (i, net) in nets.iter().enumerate() {
            assert_eq!(net["spec"]["master"], interfaces[i], "{fabric}");
            assert_eq!(net["spec"]["networkNamespace"], "train", "{fabric}");
            let ipam: Value = serde_json::from_str(net["spec"]["ipam"].as_str().unwrap()).unwrap();
            assert_eq!(ipam["type"], "nv-ipam", "{fabric}");
            let pool = pools
                .iter()
                .find(|p| p["metadata"]["name"] == ipam["poolName"])
                .unwrap_or_else(|| panic!("{fabric}: {ipam} names no generated IPPool"));
            assert_eq!(pool["spec"]["subnet"], subnets[i], "{fabric}");
            assert_eq!(pool["metadata"]["namespace"], "nvidia-network-operator");
        }
        // Every GPU pod on the fabric annotates exactly those networks and leaves the
        // host network.
        let names: Vec<&str> = nets
            .iter()
            .map(|n| n["metadata"]["name"].as_str().unwrap())
            .collect();
        let mut on_fabric = 0;
        for (file, ds) in &docs {
            let text = serde_json::to_string(ds).unwrap();
            assert!(!text.contains("\"hostNetwork\":true"), "{fabric}: {file}");
            for d in ds {
                walk_pod_templates(d, &mut |meta: &Value, pod: &Value| {
                    let rdma = serde_json::to_string(&pod["containers"])
                        .unwrap()
                        .contains("rdma/rdma_shared_device_a");
                    let Some(v) = meta["annotations"].get("k8s.v1.cni.cncf.io/networks") else {
                        assert!(!rdma, "{fabric}: {file}: an RDMA pod without the networks");
                        return;
                    };
                    assert!(rdma, "{fabric}: {file}: networks on a pod without RDMA");
                    on_fabric += 1;
                    let list: Vec<Value> = serde_json::from_str(v.as_str().unwrap()).unwrap();
                    let got: Vec<&str> = list.iter().map(|e| e["name"].as_str().unwrap()).collect();
                    assert_eq!(got, names, "{fabric}: {file}");
                    let ifs: Vec<&str> = list
                        .iter()
                        .map(|e| e["interface"].as_str().unwrap())
                        .collect();
                    assert_eq!(ifs, interfaces, "{fabric}: {file}");
                    assert!(list.iter().all(|e| e["namespace"] == "train"), "{file}");
                });
            }
        }
        // The training pods and the acceptance test's nodes.
        assert!(
            on_fabric >= 2,
            "{fabric}: {on_fabric} pod templates on the fabric"
        );
        let policy = &docs["network/nic-cluster-policy.yaml"][0]["spec"];
        assert_eq!(policy["nvIpam"]["image"], "nvidia-k8s-ipam", "{fabric}");
        let sec = &policy["secondaryNetwork"];
        assert_eq!(sec["multus"]["image"], "multus-cni", "{fabric}");
        assert_eq!(sec["cniPlugins"]["image"], "plugins", "{fabric}");
        assert_eq!(
            sec.get("ipoib").is_some(),
            fabric == "infiniband",
            "{fabric}"
        );
        // The CRDs do reject: a field the network kind lacks, a pool without its block size.
        for (file, from, to) in [
            (
                format!("network/{}.yaml", names[0]),
                "  master: ",
                "  vlan: 5\n  master: ",
            ),
            (
                format!(
                    "network/{}-pool-0.yaml",
                    names[0]
                        .rsplit_once('-')
                        .unwrap()
                        .0
                        .rsplit_once('-')
                        .unwrap()
                        .0
                ),
                "  perNodeBlockSize: 8\n",
                "",
            ),
        ] {
            let path = dir.join(&file);
            let good = std::fs::read_to_string(&path).unwrap();
            assert!(good.contains(from), "{file}");
            std::fs::write(&path, good.replace(from, to)).unwrap();
            assert!(
                check_crd(&t, &dir, &file).is_err(),
                "{fabric}: broken {file} passed"
            );
            std::fs::write(&path, good).unwrap();
        }
        let _ = std::fs::remove_dir_all(dir.parent().unwrap().parent().unwrap());
    }
}

/// Calls `f` with `(metadata, spec)` of every pod template (or pod) under `v`.
fn walk_pod_templates(v: &Value, f: &mut dyn FnMut(&Value, &Value)) {
    match v {
        Value::Object(m) => {
            if let (Some(meta), Some(spec)) = (m.get("metadata"), m.get("spec")) {
                if spec.get("containers").is_some() {
                    f(meta, spec);
                }
            }
            m.values().for_each(|x| walk_pod_templates(x, f));
        }
        Value::Array(a) => a.iter().for_each(|x| walk_pod_templates(x, f)),
        _ => {}
    }
}

/// Monitoring reaches what serves the metrics: a Deployment's ServiceMonitor selects the
/// vllm Service and names one of its ports; a LeaderWorkerSet's PodMonitor selects the
/// leader pods (which have the `http` port) and not the workers (which have none); the
/// HPA's metric is the one the prometheus-adapter rule serves, and the HPA names the
/// monitor file; the GPU Operator values switch the DCGM exporter's ServiceMonitor on.
#[test]
fn monitors_select_the_pods_that_serve_metrics() {
    let Some(t) = tools() else { return };
    let subset = |sel: &Value, labels: &Value| {
        sel.as_object()
            .unwrap()
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
    };
    for (what, dir) in [
        ("deployment", generate("h100-ib-train-serve", "k8s")),
        ("lws", lock_and_generate("monitor-lws", &lws_spec())),
    ] {
        let docs = parse_yaml(&t.py, &dir);
        let hpa = &docs["vllm-hpa.yaml"][0];
        let metric = get(hpa, "spec.metrics.0.pods.metric.name");
        let adapter = &docs["monitoring/prometheus-adapter-values.yaml"][0];
        assert_eq!(
            &adapter["rules"]["custom"][0]["name"]["as"], metric,
            "{what}"
        );
        let hpa_text = std::fs::read_to_string(dir.join("vllm-hpa.yaml")).unwrap();
        let ops = &docs["gpu-operator-values.yaml"][0];
        assert_eq!(
            ops["dcgmExporter"]["serviceMonitor"]["enabled"], true,
            "{what}"
        );
        if what == "deployment" {
            assert!(!docs.contains_key("monitoring/vllm-podmonitor.yaml"));
            assert!(hpa_text.contains("monitoring/vllm-servicemonitor.yaml"));
            let sm = &docs["monitoring/vllm-servicemonitor.yaml"][0];
            let svc = &docs["vllm-service.yaml"][0];
            assert!(subset(
                get(sm, "spec.selector.matchLabels"),
                get(svc, "metadata.labels")
            ));
            let port = get(sm, "spec.endpoints.0.port");
            assert!(svc["spec"]["ports"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| &p["name"] == port));
        } else {
            assert!(!docs.contains_key("monitoring/vllm-servicemonitor.yaml"));
            assert!(hpa_text.contains("monitoring/vllm-podmonitor.yaml"));
            let pm = &docs["monitoring/vllm-podmonitor.yaml"][0];
            let sel = get(pm, "spec.selector.matchLabels");
            let lws = &docs["vllm-leaderworkerset.yaml"][0];
            let leader = get(lws, "spec.leaderWorkerTemplate.leaderTemplate");
            let worker = get(lws, "spec.leaderWorkerTemplate.workerTemplate");
            assert!(
                subset(sel, &leader["metadata"]["labels"]),
                "leaders selected"
            );
            assert!(
                !subset(sel, &worker["metadata"]["labels"]),
                "workers left out"
            );
            let port = get(pm, "spec.podMetricsEndpoints.0.port");
            assert!(leader["spec"]["containers"][0]["ports"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| &p["name"] == port));
        }
    }
}

/// Training on InfiniBand needs the host network; serving one node from NFS does not: the
/// training side gets `<namespace>-training` (privileged), serving stays in `<namespace>`
/// at baseline, each with the NCCL ConfigMap, a ResourceQuota and a Kueue LocalQueue, the
/// ClusterQueue admits both, and everything validates.
#[test]
fn training_and_serving_get_the_pod_security_each_needs() {
    let Some(t) = tools() else { return };
    let spec = std::fs::read_to_string(root().join("fixtures/specs/h100-ib-train-serve.toml"))
        .unwrap()
        .replace(
            "checkpoints = \"lustre:/lustre/scratch/ckpt\"",
            "checkpoints = \"nfs://nfs.example.com/ckpt\"",
        )
        .replace(
            "model = \"/models/llama-3-70b\"",
            "model = \"meta-llama/Llama-3.1-70B-Instruct\"",
        );
    assert!(spec.contains("nfs.example.com/ckpt") && spec.contains("meta-llama/"));
    let dir = lock_and_generate("pod-security-split", &spec);
    validate_dir(&t, &dir, "1.30.0").unwrap();
    let docs = parse_yaml(&t.py, &dir);
    let namespaces = check_pod_security("split", &docs);
    assert_eq!(namespaces, ["llm", "llm-training"]);
    let ns_of = |f: &str| {
        docs[f][0]["metadata"]["namespace"]
            .as_str()
            .unwrap()
            .to_string()
    };
    for f in [
        "trainjob.yaml",
        "trainingruntime.yaml",
        "nccl-tests-runtime.yaml",
        "nccl-tests-trainjob.yaml",
        "expected-bandwidth.yaml",
        "nccl-env-training.yaml",
        "resourcequota-training.yaml",
        "kueue/local-queue-training.yaml",
    ] {
        assert_eq!(ns_of(f), "llm-training", "{f}");
    }
    for f in [
        "vllm-deployment.yaml",
        "vllm-service.yaml",
        "vllm-hpa.yaml",
        "vllm-pdb.yaml",
        "nccl-env.yaml",
        "resourcequota.yaml",
        "kueue/local-queue.yaml",
        "monitoring/vllm-servicemonitor.yaml",
    ] {
        assert_eq!(ns_of(f), "llm", "{f}");
    }
    assert_eq!(
        docs["nccl-env.yaml"][0]["data"],
        docs["nccl-env-training.yaml"][0]["data"]
    );
    let levels: Vec<&str> = ["namespace.yaml", "namespace-training.yaml"]
        .iter()
        .map(|f| {
            docs[*f][0]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(levels, ["baseline", "privileged"]);
    let cq = &docs["kueue/cluster-queue.yaml"][0]["spec"]["namespaceSelector"];
    assert_eq!(
        strs(&cq["matchExpressions"][0]["values"]),
        ["llm", "llm-training"]
    );
    let k = &docs["kustomization.yaml"][0];
    let listed = strs(&k["resources"]);
    for f in [
        "namespace-training.yaml",
        "nccl-env-training.yaml",
        "resourcequota-training.yaml",
    ] {
        assert!(listed.iter().any(|l| l == f), "{f}");
    }
    let text = std::fs::read_to_string(dir.join("kustomization.yaml")).unwrap();
    assert!(text.contains(
        "kubectl apply -f namespace-training.yaml -f nccl-env-training.yaml -f expected-bandwidth.yaml -f nccl-tests-runtime.yaml -f nccl-tests-trainjob.yaml"
    ));
}

// ----- Kueue admission (issue 31) ------------------------------------------------------

/// A Kubernetes quantity as the cluster plan counts it: whole units, memory in GiB.
fn quantity(v: &Value) -> (u64, bool) {
    match v {
        Value::Number(n) => (n.as_u64().unwrap(), false),
        Value::String(s) => match s.strip_suffix("Gi") {
            Some(g) => (g.parse().unwrap(), true),
            None => (s.parse().unwrap(), false),
        },
        _ => panic!("not a quantity: {v}"),
    }
}

/// A pod template's request as Kueue counts it: each container's requests, its limits
/// where it has no request (`resources.requests` defaults to `limits`), summed.
fn pod_request(spec: &Value) -> gpustack::plan::cluster::PodRequest {
    let mut lines: Vec<gpustack::plan::cluster::ResourceLine> = Vec::new();
    for c in spec["containers"].as_array().unwrap() {
        let res = &c["resources"];
        let mut merged = res["limits"].as_object().cloned().unwrap_or_default();
        for (k, v) in res["requests"].as_object().cloned().unwrap_or_default() {
            merged.insert(k, v);
        }
        for (name, v) in merged {
            let (amount, gib) = quantity(&v);
            match lines.iter_mut().find(|l| l.name == name) {
                Some(l) => l.amount += amount,
                None => lines.push(gpustack::plan::cluster::ResourceLine { name, amount, gib }),
            }
        }
    }
    gpustack::plan::cluster::PodRequest {
        gpus: 0,
        cpus: 0,
        memory_gib: 0,
        extended: Vec::new(),
        lines,
    }
}

/// `count` pods of a pod template.
fn read_pod_set(name: &str, count: u64, template: &Value) -> gpustack::plan::cluster::PodSet {
    gpustack::plan::cluster::PodSet {
        name: name.into(),
        count: u32::try_from(count).unwrap(),
        request: pod_request(&template["spec"]),
    }
}

/// Every object that names a Kueue queue, read back as Kueue builds its workload: (file,
/// namespace, queue, pod sets, the pod templates' nodeSelectors).
fn queued_workloads(
    docs: &BTreeMap<String, Vec<Value>>,
) -> Vec<(
    String,
    String,
    String,
    gpustack::plan::cluster::Workload,
    Vec<Value>,
)> {
    use gpustack::plan::cluster::{Gang, Workload};
    let mut out = Vec::new();
    for (file, objs) in docs {
        for o in objs {
            let Some(queue) = o["metadata"]["labels"]["kueue.x-k8s.io/queue-name"].as_str() else {
                continue;
            };
            let ns = o["metadata"]["namespace"].as_str().unwrap().to_string();
            let spec = &o["spec"];
            let mut sets = Vec::new();
            let mut selectors = Vec::new();
            match o["kind"].as_str().unwrap() {
                "Job" => {
                    let t = &spec["template"];
                    sets.push(read_pod_set(
                        "main",
                        spec["parallelism"].as_u64().unwrap(),
                        t,
                    ));
                    selectors.push(t["spec"]["nodeSelector"].clone());
                }
                "Deployment" => {
                    // Kueue's pod integration: each pod of a Deployment is a workload.
                    let t = &spec["template"];
                    sets.push(read_pod_set("main", 1, t));
                    selectors.push(t["spec"]["nodeSelector"].clone());
                }
                "PyTorchJob" => {
                    let w = &spec["pytorchReplicaSpecs"]["Worker"];
                    sets.push(read_pod_set(
                        "worker",
                        w["replicas"].as_u64().unwrap(),
                        &w["template"],
                    ));
                    selectors.push(w["template"]["spec"]["nodeSelector"].clone());
                }
                "LeaderWorkerSet" => {
                    let l = &spec["leaderWorkerTemplate"];
                    let size = l["size"].as_u64().unwrap();
                    sets.push(read_pod_set("leader", 1, &l["leaderTemplate"]));
                    sets.push(read_pod_set("worker", size - 1, &l["workerTemplate"]));
                    selectors.push(l["leaderTemplate"]["spec"]["nodeSelector"].clone());
                }
                "TrainJob" => {
                    // The runtime's replicated jobs; the `node` job runs numNodes pods with
                    // the TrainJob's resourcesPerNode, when given, in its `node` container.
                    let rt_name = spec["runtimeRef"]["name"].as_str().unwrap();
                    let rt = docs
                        .values()
                        .flatten()
                        .find(|d| {
                            d["kind"] == "TrainingRuntime" && d["metadata"]["name"] == rt_name
                        })
                        .unwrap_or_else(|| panic!("{file}: no TrainingRuntime {rt_name}"));
                    for j in rt["spec"]["template"]["spec"]["replicatedJobs"]
                        .as_array()
                        .unwrap()
                    {
                        let name = j["name"].as_str().unwrap();
                        let mut t = j["template"]["spec"]["template"].clone();
                        let count = if name == "node" {
                            if let Some(r) = spec["trainer"].get("resourcesPerNode") {
                                t["spec"]["containers"][0]["resources"] = r.clone();
                            }
                            spec["trainer"]["numNodes"].as_u64().unwrap()
                        } else {
                            j["replicas"].as_u64().unwrap_or(1)
                        };
                        selectors.push(t["spec"]["nodeSelector"].clone());
                        sets.push(read_pod_set(name, count, &t));
                    }
                }
                k => panic!("{file}: a queued {k}, which this model does not read"),
            }
            let w = Workload {
                file: file.clone(),
                name: o["metadata"]["name"].as_str().unwrap().into(),
                pod_sets: sets,
                queued: true,
                gang: Gang::Kueue,
            };
            out.push((file.clone(), ns, queue.to_string(), w, selectors));
        }
    }
    out
}

/// Kueue admits every queued workload of every example with a queue: its LocalQueue is in
/// its namespace and points at the ClusterQueue, whose namespaceSelector takes the
/// namespace; every resource any of its pods requests is covered, and its total fits the
/// quota (`gpustack::plan::cluster::admit`, Kueue v0.19.2's flavor assigner); the flavor's
/// nodeLabels agree with the pods' nodeSelector. The generated queue of before (cpu,
/// memory and GPUs, the node figure alone) is shown to fail the same model.
#[test]
fn kueue_admits_every_queued_workload() {
    let Some(t) = tools() else { return };
    let mut dirs: Vec<(String, PathBuf)> = Vec::new();
    for e in std::fs::read_dir(root().join("lockfiles")).unwrap() {
        let p = e.unwrap().path();
        let lock = read_lock(&p);
        let queued = lock
            .get("request")
            .and_then(|r| r.get("k8s"))
            .and_then(|k| k.get("queue"))
            .is_some();
        if queued {
            let name = p.file_stem().unwrap().to_str().unwrap().to_string();
            dirs.push((name.clone(), generate(&name, "k8s")));
        }
    }
    assert!(!dirs.is_empty(), "no example has a queue");
    let base =
        std::fs::read_to_string(root().join("fixtures/specs/h100-ib-train-serve.toml")).unwrap();
    dirs.push(("lws".into(), lock_and_generate("kueue-lws", &lws_spec())));
    dirs.push((
        "pytorchjob".into(),
        lock_and_generate(
            "kueue-pytorchjob",
            &base.replace(
                "version = \"1.30\"\n",
                "version = \"1.30\"\ntraining_api = \"pytorchjob\"\n",
            ),
        ),
    ));
    for (name, dir) in &dirs {
        let docs = parse_yaml(&t.py, dir);
        let cq = &docs["kueue/cluster-queue.yaml"][0];
        let group = &cq["spec"]["resourceGroups"][0];
        assert_eq!(cq["spec"]["resourceGroups"].as_array().unwrap().len(), 1);
        let covered = strs(&group["coveredResources"]);
        let flavor = &group["flavors"][0];
        let quotas: Vec<gpustack::plan::cluster::ResourceLine> = flavor["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let (amount, gib) = quantity(&r["nominalQuota"]);
                gpustack::plan::cluster::ResourceLine {
                    name: r["name"].as_str().unwrap().into(),
                    amount,
                    gib,
                }
            })
            .collect();
        let names: Vec<String> = quotas.iter().map(|q| q.name.clone()).collect();
        assert_eq!(
            covered, names,
            "{name}: each covered resource has its quota"
        );
        let rf = &docs["kueue/resource-flavor.yaml"][0];
        assert_eq!(rf["metadata"]["name"], flavor["name"], "{name}");
        let workloads = queued_workloads(&docs);
        assert!(!workloads.is_empty(), "{name}: nothing queued");
        for (file, ns, queue, w, selectors) in &workloads {
            let lq = docs
                .values()
                .flatten()
                .find(|d| {
                    d["kind"] == "LocalQueue"
                        && d["metadata"]["name"] == queue.as_str()
                        && d["metadata"]["namespace"] == ns.as_str()
                })
                .unwrap_or_else(|| panic!("{name}/{file}: no LocalQueue {queue} in {ns}"));
            assert_eq!(
                lq["spec"]["clusterQueue"], cq["metadata"]["name"],
                "{name}/{file}"
            );
            let sel = &cq["spec"]["namespaceSelector"];
            let selected = sel["matchLabels"]["kubernetes.io/metadata.name"] == ns.as_str()
                || sel["matchExpressions"]
                    .as_array()
                    .is_some_and(|m| m.iter().any(|e| strs(&e["values"]).contains(ns)));
            assert!(
                selected,
                "{name}/{file}: the ClusterQueue does not select namespace {ns}"
            );
            let refused = gpustack::plan::cluster::admit(&quotas, w);
            assert!(
                refused.is_empty(),
                "{name}/{file}: Kueue would not admit it: {}",
                refused
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; ")
            );
            for s in selectors {
                for (k, v) in rf["spec"]["nodeLabels"]
                    .as_object()
                    .cloned()
                    .unwrap_or_default()
                {
                    if let Some(p) = s.get(&k) {
                        assert_eq!(
                            p, &v,
                            "{name}/{file}: nodeSelector {k} against the flavor's nodeLabels"
                        );
                    }
                }
            }
        }
        // The queue written before issue 31: the node figure alone, no RDMA device.
        if name == "h100-ib-train-serve" {
            let old: Vec<_> = quotas
                .iter()
                .filter(|q| ["cpu", "memory", "nvidia.com/gpu"].contains(&q.name.as_str()))
                .map(|q| gpustack::plan::cluster::ResourceLine {
                    amount: if q.name == "cpu" {
                        768
                    } else if q.name == "memory" {
                        12288
                    } else {
                        q.amount
                    },
                    ..q.clone()
                })
                .collect();
            let (_, _, _, w, _) = workloads
                .iter()
                .find(|(f, ..)| f == "nccl-tests-trainjob.yaml")
                .unwrap();
            let refused: Vec<String> = gpustack::plan::cluster::admit(&old, w)
                .iter()
                .map(ToString::to_string)
                .collect();
            assert!(
                refused
                    .iter()
                    .any(|r| r == "resource rdma/rdma_shared_device_a unavailable in ClusterQueue"),
                "{refused:?}"
            );
        }
    }
}

// ----- Gang scheduling (issue 31) ------------------------------------------------------

/// Every workload whose pods wait for each other is started whole or not at all: named to
/// Kueue's queue, or (without `[k8s].queue`) a TrainJob whose runtime has the
/// `podGroupPolicy` of `[k8s].gang` and whose pods name its scheduler, a PyTorchJob with
/// `schedulingPolicy.minAvailable` = its workers. Checked on the files read back, for every
/// example and for Volcano and PyTorchJob variants, which also pass the validators (the
/// Trainer v2.3.0 CRD schemas).
#[test]
fn every_multi_node_workload_is_gang_scheduled() {
    let Some(t) = tools() else { return };
    let mut dirs: Vec<(String, PathBuf, &str)> = Vec::new();
    for e in std::fs::read_dir(root().join("lockfiles")).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_stem().unwrap().to_str().unwrap().to_string();
        dirs.push((
            name.clone(),
            generate(&name, "k8s"),
            "scheduler-plugins-scheduler",
        ));
    }
    let base = std::fs::read_to_string(root().join("fixtures/specs/h100-ib-train-serve.toml"))
        .unwrap()
        .replace(
            "queue = \"gpu\"\ntopology = \"cloud.provider.com/topology-block\"\n",
            "",
        );
    let volcano = lock_and_generate(
        "gang-volcano",
        &base.replace(
            "version = \"1.30\"\n",
            "version = \"1.30\"\ngang = \"volcano\"\n",
        ),
    );
    validate_dir(&t, &volcano, "1.30").unwrap();
    dirs.push(("volcano".into(), volcano, "volcano"));
    let pytorchjob = lock_and_generate(
        "gang-pytorchjob",
        &base.replace(
            "version = \"1.30\"\n",
            "version = \"1.30\"\ntraining_api = \"pytorchjob\"\n",
        ),
    );
    validate_dir(&t, &pytorchjob, "1.30").unwrap();
    dirs.push((
        "pytorchjob".into(),
        pytorchjob,
        "scheduler-plugins-scheduler",
    ));
    let mut gangs = 0;
    for (name, dir, scheduler) in &dirs {
        let docs = parse_yaml(&t.py, dir);
        for (file, objs) in &docs {
            for o in objs {
                let queued = o["metadata"]["labels"]["kueue.x-k8s.io/queue-name"].is_string();
                let spec = &o["spec"];
                let mut templates = Vec::new();
                let pods = match o["kind"].as_str().unwrap_or_default() {
                    "TrainJob" => {
                        let rt = docs
                            .values()
                            .flatten()
                            .find(|d| {
                                d["kind"] == "TrainingRuntime"
                                    && d["metadata"]["name"] == spec["runtimeRef"]["name"]
                            })
                            .unwrap();
                        let jobs = rt["spec"]["template"]["spec"]["replicatedJobs"]
                            .as_array()
                            .unwrap();
                        for j in jobs {
                            templates.push(j["template"]["spec"]["template"]["spec"].clone());
                        }
                        if !queued
                            && spec["trainer"]["numNodes"].as_u64().unwrap() + jobs.len() as u64 > 2
                        {
                            let policy = rt["spec"]["podGroupPolicy"].as_object();
                            let want = if *scheduler == "volcano" {
                                "volcano"
                            } else {
                                "coscheduling"
                            };
                            assert!(
                                policy.is_some_and(|p| p.contains_key(want)),
                                "{name}/{file}: no podGroupPolicy.{want} in its runtime"
                            );
                        }
                        spec["trainer"]["numNodes"].as_u64().unwrap()
                    }
                    "PyTorchJob" => {
                        let w = &spec["pytorchReplicaSpecs"]["Worker"];
                        templates.push(w["template"]["spec"].clone());
                        let n = w["replicas"].as_u64().unwrap();
                        if !queued && n > 1 {
                            assert_eq!(
                                spec["runPolicy"]["schedulingPolicy"]["minAvailable"].as_u64(),
                                Some(n),
                                "{name}/{file}"
                            );
                        }
                        n
                    }
                    "LeaderWorkerSet" => {
                        let l = &spec["leaderWorkerTemplate"];
                        templates.push(l["leaderTemplate"]["spec"].clone());
                        templates.push(l["workerTemplate"]["spec"].clone());
                        l["size"].as_u64().unwrap()
                    }
                    _ => continue,
                };
                if pods > 1 && !queued {
                    gangs += 1;
                    for tpl in &templates {
                        assert_eq!(
                            tpl["schedulerName"], *scheduler,
                            "{name}/{file}: schedulerName"
                        );
                    }
                } else if queued {
                    for tpl in &templates {
                        assert!(
                            tpl.get("schedulerName").is_none(),
                            "{name}/{file}: Kueue admits it whole"
                        );
                    }
                }
            }
        }
    }
    assert!(gangs > 0, "no unqueued multi-node workload was checked");

    // A bad `gang` is refused at its line; a multi-node server without a queue needs Volcano.
    let dir = tempdir("gang-bad");
    std::fs::write(
        dir.join("gpustack.toml"),
        base.replace(
            "version = \"1.30\"\n",
            "version = \"1.30\"\ngang = \"slurm\"\n",
        ),
    )
    .unwrap();
    let out = run_in(&dir, &["lock"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("unknown gang scheduler `slurm`")
            && out.stderr.contains("gpustack.toml:"),
        "{}",
        out.stderr
    );
    let lws = lws_spec().replace(
        "queue = \"gpu\"\ntopology = \"cloud.provider.com/topology-block\"\n",
        "",
    );
    std::fs::write(dir.join("gpustack.toml"), &lws).unwrap();
    let out = run_in(&dir, &["lock"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("gang-schedules only with Volcano") && out.stderr.contains("hint:"),
        "{}",
        out.stderr
    );
}
