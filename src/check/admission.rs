//! The admission check: the generated Kubernetes and Slurm files read back as the cluster
//! would read them, and each contract between them, with the cluster and with the spec's
//! `[cluster]`/`[slurm]` figures, checked with a typed code (issue 31):
//!
//! | code | contract | consumer's rule |
//! |---|---|---|
//! | `uncovered-resource` | every resource a queued pod requests is covered by its ClusterQueue | Kueue's flavor assigner, "resource … unavailable in ClusterQueue" ([`crate::plan::cluster`]) |
//! | `exceeds-quota` | a queued workload's total fits the ClusterQueue's quota | Kueue's `fitsResourceQuota` |
//! | `unprovided-resource` | every extended resource a pod requests is provided by a generated object (the GPU Operator, the NicClusterPolicy) or named by the spec as the site's (`[network]`) | the scheduler's fit: a node must advertise the resource |
//! | `no-gang` | a workload whose pods wait for each other across nodes is gang scheduled (a Kueue queue, a `podGroupPolicy`, a scheduling policy) | partial placement holds GPUs for ever |
//! | `unselected-monitor` | every ServiceMonitor/PodMonitor carries `[k8s].monitor_labels` | the Prometheus's monitor selector |
//! | `unpullable-image` (warning) | an image a cluster pulls names a registry | `localhost/…` resolves on no node |
//! | `no-node-fits` | each pod fits one node of `[cluster]` (GPUs, CPUs, memory) | the scheduler's fit (NodeResourcesFit) |
//! | `exceeds-partition` | a Slurm job's nodes and time are within `[slurm].max_nodes`/`max_time` | slurmctld's partition limits (`MaxNodes`, `MaxTime`) |
//!
//! Everything is read from the files, not recomputed from the lock: a hand edit, a file from
//! another `gen` run or a regenerated neighbour is judged as the cluster would judge it.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::lock::Lock;
use crate::plan::cluster::{admit, NoAdmission, PodRequest, PodSet, ResourceLine, Workload};
use crate::spec::check::Code;

use super::join;
use super::report::Finding;

/// Resources every node has (no device plugin provides them).
fn native(name: &str) -> bool {
    matches!(name, "cpu" | "memory" | "ephemeral-storage") || name.starts_with("hugepages-")
}

/// YAML text as JSON values, one per document (`None`: not YAML gpustack wrote).
pub(crate) fn yaml_docs(text: &str) -> Option<Vec<Value>> {
    let docs = yaml_rust2::YamlLoader::load_from_str(text).ok()?;
    Some(docs.iter().map(to_json).collect())
}

fn to_json(y: &yaml_rust2::Yaml) -> Value {
    use yaml_rust2::Yaml;
    match y {
        Yaml::Real(r) => r
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map_or(Value::Null, Value::Number),
        Yaml::Integer(i) => Value::from(*i),
        Yaml::String(s) => Value::String(s.clone()),
        Yaml::Boolean(b) => Value::Bool(*b),
        Yaml::Array(a) => Value::Array(a.iter().map(to_json).collect()),
        Yaml::Hash(h) => Value::Object(
            h.iter()
                .map(|(k, v)| {
                    let key = match k {
                        Yaml::String(s) => s.clone(),
                        Yaml::Integer(i) => i.to_string(),
                        Yaml::Boolean(b) => b.to_string(),
                        _ => String::new(),
                    };
                    (key, to_json(v))
                })
                .collect(),
        ),
        _ => Value::Null,
    }
}

/// A Kubernetes quantity in its resource's base unit ×1000 (millicores, milli-bytes,
/// milli-devices), so that `500m`, `2`, `1536Gi` and `8` compare exactly.
pub(crate) fn quantity(v: &Value) -> Option<u64> {
    let s = match v {
        Value::Number(n) => return n.as_u64().map(|n| n.saturating_mul(1000)),
        Value::String(s) => s.as_str(),
        _ => return None,
    };
    let suffixes: [(&str, u64); 12] = [
        ("Ki", 1 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("Ti", 1 << 40),
        ("Pi", 1 << 50),
        ("k", 1_000),
        ("M", 1_000_000),
        ("G", 1_000_000_000),
        ("T", 1_000_000_000_000),
        ("P", 1_000_000_000_000_000),
        ("m", 0),
        ("", 1),
    ];
    for (suffix, factor) in suffixes {
        let Some(n) = s.strip_suffix(suffix) else {
            continue;
        };
        let n: u64 = n.parse().ok()?;
        return Some(if factor == 0 {
            n
        } else {
            n.saturating_mul(factor).saturating_mul(1000)
        });
    }
    None
}

/// A quantity of [`quantity`] as a person reads it: `769`, `500m`, `12290Gi`.
fn shown(name: &str, milli: u64) -> String {
    if name == "memory" || name == "ephemeral-storage" || name.starts_with("hugepages-") {
        let bytes = milli / 1000;
        if bytes.is_multiple_of(1 << 30) {
            return format!("{}Gi", bytes >> 30);
        }
        if bytes.is_multiple_of(1 << 20) {
            return format!("{}Mi", bytes >> 20);
        }
        return bytes.to_string();
    }
    if milli.is_multiple_of(1000) {
        (milli / 1000).to_string()
    } else {
        format!("{milli}m")
    }
}

/// A pod template's request as Kueue and the scheduler count it: each container's requests,
/// its limits where it has no request (`requests` defaults to `limits`), summed; amounts
/// in [`quantity`]'s unit.
fn pod_request(spec: &Value) -> PodRequest {
    let mut lines: Vec<ResourceLine> = Vec::new();
    for c in spec["containers"].as_array().into_iter().flatten() {
        let res = &c["resources"];
        let mut merged = res["limits"].as_object().cloned().unwrap_or_default();
        for (k, v) in res["requests"].as_object().cloned().unwrap_or_default() {
            merged.insert(k, v);
        }
        for (name, v) in merged {
            let amount = quantity(&v).unwrap_or(0);
            match lines.iter_mut().find(|l| l.name == name) {
                Some(l) => l.amount = l.amount.saturating_add(amount),
                None => lines.push(ResourceLine {
                    name,
                    amount,
                    gib: false,
                }),
            }
        }
    }
    PodRequest {
        gpus: 0,
        cpus: 0,
        memory_gib: 0,
        extended: Vec::new(),
        lines,
    }
}

fn pod_set(name: &str, count: u64, template: &Value) -> PodSet {
    PodSet {
        name: name.into(),
        count: u32::try_from(count).unwrap_or(u32::MAX),
        request: pod_request(&template["spec"]),
    }
}

/// A workload read back from the files: what Kueue and the scheduler see.
pub(crate) struct ReadWorkload {
    /// Its kind (`TrainJob`).
    pub kind: String,
    /// Its namespace.
    pub namespace: String,
    /// `kueue.x-k8s.io/queue-name`.
    pub queue: Option<String>,
    /// Pods that wait for each other across nodes (a job's ranks, a vLLM group), and
    /// whether something starts them all or none (other than a queue).
    pub spans_nodes: bool,
    /// A `podGroupPolicy`, a `schedulingPolicy`, or Volcano as the pods' scheduler.
    pub gang_policy: bool,
    /// The pod sets (queued or not), as [`Workload`] for [`admit`].
    pub workload: Workload,
}

/// Every workload of the generated Kubernetes files: Jobs, Deployments, PyTorchJobs,
/// LeaderWorkerSets and TrainJobs (with their TrainingRuntime's replicated jobs).
pub(crate) fn workloads(docs: &BTreeMap<String, Vec<Value>>) -> Vec<ReadWorkload> {
    let mut out = Vec::new();
    for (file, objs) in docs {
        for o in objs {
            let spec = &o["spec"];
            let mut sets = Vec::new();
            let (spans_nodes, gang_policy) = match o["kind"].as_str().unwrap_or_default() {
                "Job" => {
                    let n = spec["parallelism"].as_u64().unwrap_or(1);
                    sets.push(pod_set("main", n, &spec["template"]));
                    // Indexed or not, a Job's pods do not wait for each other.
                    (false, false)
                }
                "Deployment" => {
                    // Kueue's pod integration: each pod of a Deployment is a workload.
                    sets.push(pod_set("main", 1, &spec["template"]));
                    (false, false)
                }
                "PyTorchJob" => {
                    let mut pods = 0;
                    for role in ["Master", "Worker"] {
                        let r = &spec["pytorchReplicaSpecs"][role];
                        if r.is_object() {
                            let n = r["replicas"].as_u64().unwrap_or(1);
                            pods += n;
                            sets.push(pod_set(&role.to_lowercase(), n, &r["template"]));
                        }
                    }
                    (pods > 1, spec["runPolicy"]["schedulingPolicy"].is_object())
                }
                "LeaderWorkerSet" => {
                    let l = &spec["leaderWorkerTemplate"];
                    let size = l["size"].as_u64().unwrap_or(1);
                    sets.push(pod_set("leader", 1, &l["leaderTemplate"]));
                    if size > 1 {
                        sets.push(pod_set("worker", size - 1, &l["workerTemplate"]));
                    }
                    let volcano = ["leaderTemplate", "workerTemplate"]
                        .iter()
                        .all(|t| l[*t]["spec"]["schedulerName"] == "volcano");
                    (size > 1, volcano)
                }
                "TrainJob" => {
                    let rt_name = spec["runtimeRef"]["name"].as_str().unwrap_or_default();
                    let Some(rt) = docs.values().flatten().find(|d| {
                        d["kind"] == "TrainingRuntime" && d["metadata"]["name"] == rt_name
                    }) else {
                        continue;
                    };
                    let nodes = spec["trainer"]["numNodes"].as_u64().unwrap_or(1);
                    for j in rt["spec"]["template"]["spec"]["replicatedJobs"]
                        .as_array()
                        .into_iter()
                        .flatten()
                    {
                        let name = j["name"].as_str().unwrap_or_default();
                        let mut t = j["template"]["spec"]["template"].clone();
                        let count = if name == "node" {
                            if let Some(r) = spec["trainer"].get("resourcesPerNode") {
                                t["spec"]["containers"][0]["resources"] = r.clone();
                            }
                            nodes
                        } else {
                            j["replicas"].as_u64().unwrap_or(1)
                        };
                        sets.push(pod_set(name, count, &t));
                    }
                    (nodes > 1, rt["spec"]["podGroupPolicy"].is_object())
                }
                _ => continue,
            };
            let queue = o["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
                .as_str()
                .map(str::to_string);
            out.push(ReadWorkload {
                kind: o["kind"].as_str().unwrap_or_default().to_string(),
                namespace: o["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                spans_nodes,
                gang_policy,
                workload: Workload {
                    file: file.clone(),
                    name: o["metadata"]["name"].as_str().unwrap_or_default().into(),
                    pod_sets: sets,
                    queued: queue.is_some(),
                    gang: crate::plan::cluster::Gang::NotNeeded,
                },
                queue,
            });
        }
    }
    out
}

/// The ClusterQueue a LocalQueue of `namespace` named `queue` points at, and its first
/// flavor's quotas (gpustack writes one resource group with one flavor).
fn cluster_queue<'a>(
    docs: &'a BTreeMap<String, Vec<Value>>,
    namespace: &str,
    queue: &str,
) -> Option<(&'a str, Vec<ResourceLine>)> {
    let all = || docs.values().flatten();
    let lq = all().find(|d| {
        d["kind"] == "LocalQueue"
            && d["metadata"]["name"] == queue
            && d["metadata"]["namespace"] == namespace
    })?;
    let cq_name = lq["spec"]["clusterQueue"].as_str()?;
    let cq = all().find(|d| d["kind"] == "ClusterQueue" && d["metadata"]["name"] == cq_name)?;
    let mut quotas = Vec::new();
    for g in cq["spec"]["resourceGroups"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let covered: BTreeSet<&str> = (g["coveredResources"].as_array().into_iter().flatten())
            .filter_map(Value::as_str)
            .collect();
        let Some(flavor) = g["flavors"].as_array().and_then(|f| f.first()) else {
            continue;
        };
        for r in flavor["resources"].as_array().into_iter().flatten() {
            let name = r["name"].as_str().unwrap_or_default();
            if covered.contains(name) {
                quotas.push(ResourceLine {
                    name: name.to_string(),
                    amount: quantity(&r["nominalQuota"]).unwrap_or(0),
                    gib: false,
                });
            }
        }
    }
    let file = docs
        .iter()
        .find(|(_, objs)| objs.iter().any(|d| std::ptr::eq(d, cq)))
        .map_or("", |(f, _)| f.as_str());
    Some((file, quotas))
}

/// What the generated objects provide and what the spec names as the site's: the GPU
/// Operator's `nvidia.com/gpu` (its values file), the NicClusterPolicy's RDMA resources
/// (`rdma/` + each `resourceName` of the shared device plugin's config: the plugin's
/// default resource prefix), and `[network]`'s site resources.
fn providers(lock: &Lock, docs: &BTreeMap<String, Vec<Value>>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if docs.contains_key("k8s/gpu-operator-values.yaml") {
        out.insert(
            crate::plan::cluster::GPU.to_string(),
            "the GPU Operator's device plugin (gpu-operator-values.yaml)".to_string(),
        );
    }
    for d in docs.values().flatten() {
        if d["kind"] != "NicClusterPolicy" {
            continue;
        }
        let config = d["spec"]["rdmaSharedDevicePlugin"]["config"]
            .as_str()
            .and_then(|c| serde_json::from_str::<Value>(c).ok())
            .unwrap_or_default();
        for c in config["configList"].as_array().into_iter().flatten() {
            if let Some(n) = c["resourceName"].as_str() {
                out.insert(
                    format!("rdma/{n}"),
                    "the NicClusterPolicy's RDMA shared device plugin".to_string(),
                );
            }
        }
    }
    if let Some(n) = &lock.request.deploy.network {
        let site = "the site's device plugin, named in [network]";
        if let Some(r) = n.rdma_resource.as_ref().filter(|r| !r.starts_with("rdma/")) {
            out.insert(r.clone(), site.to_string());
        }
        if let Some(r) = &n.cxi_resource {
            out.insert(r.clone(), site.to_string());
        }
        if n.efa_devices.is_some() {
            out.insert(
                crate::plan::network::EFA_RESOURCE.to_string(),
                site.to_string(),
            );
        }
    }
    out
}

/// The first line of `file` that holds `needle`, 1-based.
fn line_of(files: &BTreeMap<String, Vec<u8>>, file: &str, needle: &str) -> Option<usize> {
    let text = String::from_utf8_lossy(files.get(file)?);
    text.lines().position(|l| l.contains(needle)).map(|i| i + 1)
}

/// Runs every admission contract over the generated files.
pub(super) fn admission(
    lock: &Lock,
    dir: &str,
    files: &BTreeMap<String, Vec<u8>>,
    f: &mut Vec<Finding>,
) {
    let mut docs: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for (p, b) in files {
        if p.starts_with("k8s/") && p.ends_with(".yaml") {
            if let Some(d) = yaml_docs(&String::from_utf8_lossy(b)) {
                docs.insert(p.clone(), d);
            }
        }
    }
    let read = workloads(&docs);
    queues(&docs, &read, dir, files, f);
    provided(lock, &docs, &read, dir, files, f);
    gangs(&read, dir, files, f);
    monitors(lock, &docs, dir, files, f);
    node_fit(lock, &read, dir, files, f);
    images(lock, dir, files, &docs, f);
    partition(lock, dir, files, f);
}

fn queues(
    docs: &BTreeMap<String, Vec<Value>>,
    read: &[ReadWorkload],
    dir: &str,
    files: &BTreeMap<String, Vec<u8>>,
    f: &mut Vec<Finding>,
) {
    for w in read {
        let Some(queue) = &w.queue else { continue };
        let file = join(dir, &w.workload.file);
        let line = line_of(files, &w.workload.file, "kueue.x-k8s.io/queue-name");
        let Some((cq_file, quotas)) = cluster_queue(docs, &w.namespace, queue) else {
            f.push(
                Finding::new(
                    Code::UncoveredResource,
                    format!(
                        "{file}: {} {} names the queue {queue}, but no generated LocalQueue {queue} in namespace {} points at a ClusterQueue",
                        w.kind, w.workload.name, w.namespace
                    ),
                )
                .at(&file, line)
                .hint("regenerate every target from the one lock (`gpustack gen all`): kueue/ holds the LocalQueue and ClusterQueue"),
            );
            continue;
        };
        for no in admit(&quotas, &w.workload) {
            let (code, message) = match &no {
                NoAdmission::Uncovered { resource } => (
                    Code::UncoveredResource,
                    format!(
                        "{file}: Kueue never admits {} {}: its pods request {resource}, which the ClusterQueue ({}) does not cover (\"resource {resource} unavailable in ClusterQueue\")",
                        w.kind, w.workload.name, join(dir, cq_file)
                    ),
                ),
                NoAdmission::ExceedsQuota { resource, need, quota } => (
                    Code::ExceedsQuota,
                    format!(
                        "{file}: Kueue never admits {} {}: it requests {} {resource} in all, above the ClusterQueue's quota of {} ({})",
                        w.kind,
                        w.workload.name,
                        shown(resource, *need),
                        shown(resource, *quota),
                        join(dir, cq_file)
                    ),
                ),
            };
            f.push(
                Finding::new(code, message)
                    .at(&file, line)
                    .source("kubernetes-sigs/kueue v0.19.2 pkg/scheduler/flavorassigner/flavorassigner.go (findFlavorForPodSets, fitsResourceQuota)")
                    .hint("the ClusterQueue's covered resources and quotas are derived from the pods' requests: regenerate both from the one lock (`gpustack gen k8s`) instead of editing either"),
            );
        }
    }
}

fn provided(
    lock: &Lock,
    docs: &BTreeMap<String, Vec<Value>>,
    read: &[ReadWorkload],
    dir: &str,
    files: &BTreeMap<String, Vec<u8>>,
    f: &mut Vec<Finding>,
) {
    let providers = providers(lock, docs);
    for w in read {
        let mut seen = BTreeSet::new();
        for p in &w.workload.pod_sets {
            for l in &p.request.lines {
                if native(&l.name) || providers.contains_key(&l.name) || !seen.insert(&l.name) {
                    continue;
                }
                let file = join(dir, &w.workload.file);
                let hint = if l.name.starts_with("rdma/") {
                    "the NicClusterPolicy (network/nic-cluster-policy.yaml) provides the pods' RDMA resource: regenerate both from the one lock (`gpustack gen k8s`)".to_string()
                } else {
                    format!("name the site's device plugin resource in the spec's `[network]` (`rdma_resource`, `cxi_resource`, `efa_devices`) and re-lock, or remove {} from the pods", l.name)
                };
                f.push(
                    Finding::new(
                        Code::UnprovidedResource,
                        format!(
                            "{file}: the pods of {} {} request {}, which no generated object provides and the spec does not name as the site's; no node advertises it, so they stay Pending",
                            w.kind, w.workload.name, l.name
                        ),
                    )
                    .at(&file, line_of(files, &w.workload.file, &format!("{}:", l.name)))
                    .detail(
                        providers
                            .iter()
                            .map(|(r, by)| format!("{r}: {by}"))
                            .collect(),
                    )
                    .hint(hint),
                );
            }
        }
    }
}

fn gangs(
    read: &[ReadWorkload],
    dir: &str,
    files: &BTreeMap<String, Vec<u8>>,
    f: &mut Vec<Finding>,
) {
    for w in read {
        if !w.spans_nodes || w.queue.is_some() || w.gang_policy {
            continue;
        }
        let file = join(dir, &w.workload.file);
        f.push(
            Finding::new(
                Code::NoGang,
                format!(
                    "{file}: {} {} runs {} pods that wait for each other, but nothing starts them all or none (no Kueue queue, no podGroupPolicy or scheduling policy): a partial placement holds GPUs indefinitely",
                    w.kind,
                    w.workload.name,
                    w.workload.pods()
                ),
            )
            .at(&file, line_of(files, &w.workload.file, "kind:"))
            .hint("gpustack gang-schedules every multi-node workload (`[k8s].queue` for Kueue, else `[k8s].gang`): regenerate it from the lock (`gpustack gen k8s`)"),
        );
    }
}

fn monitors(
    lock: &Lock,
    docs: &BTreeMap<String, Vec<Value>>,
    dir: &str,
    files: &BTreeMap<String, Vec<u8>>,
    f: &mut Vec<Finding>,
) {
    let want = crate::spec::deploy::monitor_labels_of(lock.request.deploy.k8s.as_ref());
    for (file, objs) in docs {
        for o in objs {
            let kind = o["kind"].as_str().unwrap_or_default();
            if kind != "ServiceMonitor" && kind != "PodMonitor" {
                continue;
            }
            let labels = &o["metadata"]["labels"];
            let missing: Vec<String> = want
                .iter()
                .filter(|(k, v)| labels[k.as_str()].as_str() != Some(v.as_str()))
                .map(|(k, v)| format!("{k}: {v}"))
                .collect();
            if missing.is_empty() {
                continue;
            }
            let shown = join(dir, file);
            f.push(
                Finding::new(
                    Code::UnselectedMonitor,
                    format!(
                        "{shown}: the {kind} lacks the label{} {} that the cluster's Prometheus selects monitors by ([k8s].monitor_labels): it is never scraped, and the metrics built on it never appear",
                        if missing.len() == 1 { "" } else { "s" },
                        missing.join(", ")
                    ),
                )
                .at(&shown, line_of(files, file, "labels:"))
                .source("prometheus-community/helm-charts 1514b96530e0e85ae1bf89eb256c029d0cf8ce03 charts/kube-prometheus-stack/templates/prometheus/prometheus.yaml (serviceMonitorSelector, podMonitorSelector)")
                .hint("set `[k8s].monitor_labels` to what your Prometheus selects, re-lock and regenerate (`gpustack gen k8s`)"),
            );
        }
    }
}

fn node_fit(
    lock: &Lock,
    read: &[ReadWorkload],
    dir: &str,
    files: &BTreeMap<String, Vec<u8>>,
    f: &mut Vec<Finding>,
) {
    let Some(c) = &lock.request.deploy.cluster else {
        return;
    };
    let mut node: Vec<(&str, u64)> = vec![(
        crate::plan::cluster::GPU,
        u64::from(c.gpus_per_node).saturating_mul(1000),
    )];
    if let Some(cpus) = c.cpus_per_node {
        node.push(("cpu", u64::from(cpus).saturating_mul(1000)));
    }
    if let Some(m) = c.memory_gib_per_node {
        node.push(("memory", (u64::from(m) << 30).saturating_mul(1000)));
    }
    for w in read {
        for p in &w.workload.pod_sets {
            for (name, cap) in &node {
                let Some(l) = p.request.lines.iter().find(|l| l.name == *name) else {
                    continue;
                };
                if l.amount <= *cap {
                    continue;
                }
                let file = join(dir, &w.workload.file);
                f.push(
                    Finding::new(
                        Code::NoNodeFits,
                        format!(
                            "{file}: a {} pod of {} {} requests {} {name}, more than a node of [cluster] has ({}): the scheduler finds no node that fits it",
                            p.name,
                            w.kind,
                            w.workload.name,
                            shown(name, l.amount),
                            shown(name, *cap)
                        ),
                    )
                    .at(&file, line_of(files, &w.workload.file, &format!("{name}:")))
                    .source("the scheduler's NodeResourcesFit plugin: a pod's requests must fit one node's allocatable resources")
                    .hint("the pods' requests come from [cluster] (gpus_per_node, cpus_per_node, memory_gib_per_node): regenerate them from the lock (`gpustack gen k8s`), or correct [cluster] and re-lock"),
                );
            }
        }
    }
}

/// Image references a cluster pulls: the pods' `image:` and the Slurm scripts' images, of
/// the deployments the spec configures (`[k8s]`, `[slurm]`; `gen all` writes a sketch of
/// the others, which nobody said would run on a cluster).
fn images(
    lock: &Lock,
    dir: &str,
    files: &BTreeMap<String, Vec<u8>>,
    docs: &BTreeMap<String, Vec<Value>>,
    f: &mut Vec<Finding>,
) {
    let mut refs: BTreeMap<(String, String), ()> = BTreeMap::new();
    for (file, objs) in docs {
        for o in objs {
            collect_images(o, &mut |i| {
                refs.insert((file.clone(), i.to_string()), ());
            });
        }
    }
    for (p, b) in files {
        if p.starts_with("slurm/") && p.ends_with(".sbatch") {
            for l in String::from_utf8_lossy(b).lines() {
                if let Some(v) = l.strip_prefix("image=") {
                    let v = v.trim().trim_matches(['"', '\'']).replacen('#', "/", 1);
                    refs.insert((p.clone(), v), ());
                }
            }
        }
    }
    let k8s = crate::plan::declared(lock, crate::plan::Target::K8s);
    let slurm = crate::plan::declared(lock, crate::plan::Target::Slurm);
    for (file, image) in refs.keys() {
        let judged = if file.starts_with("slurm/") {
            slurm
        } else {
            k8s
        };
        if !judged || !image.starts_with("localhost/") {
            continue;
        }
        let shown = join(dir, file);
        let effect = if file.starts_with("slurm/") {
            "the job's container import fails on every node"
        } else {
            "the pods go to ImagePullBackOff"
        };
        f.push(
            Finding::new(
                Code::UnpullableImage,
                format!(
                    "{shown}: image {image} names no registry the nodes can pull from (`localhost/` is each node's own image store): {effect}"
                ),
            )
            .at(&shown, line_of(files, file, image))
            .hint("set `[image].registry` in the spec to the registry the nodes pull from (`registry.example.com/ml`), re-lock, build and push the images, and regenerate"),
        );
    }
}

fn collect_images(v: &Value, out: &mut impl FnMut(&str)) {
    match v {
        Value::Object(m) => {
            let is_container =
                m.contains_key("name") && m.get("image").is_some_and(Value::is_string);
            for (k, x) in m {
                if k == "image" && is_container {
                    if let Some(s) = x.as_str() {
                        out(s);
                    }
                } else {
                    collect_images(x, out);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| collect_images(x, out)),
        _ => {}
    }
}

/// `D-HH:MM:SS`, `HH:MM:SS`, `MM:SS`, `MM` or `D-HH` as Slurm reads a time limit, in
/// minutes (rounded up).
pub(crate) fn slurm_minutes(s: &str) -> Option<u64> {
    let (days, rest) = match s.split_once('-') {
        Some((d, r)) => (d.parse::<u64>().ok()?, r),
        None => (0, s),
    };
    let parts: Vec<u64> = rest
        .split(':')
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    let (h, m, sec) = match (s.contains('-'), parts.as_slice()) {
        (true, [h]) => (*h, 0, 0),
        (true, [h, m]) => (*h, *m, 0),
        (_, [h, m, sec]) => (*h, *m, *sec),
        (false, [m, sec]) => (0, *m, *sec),
        (false, [m]) => (0, *m, 0),
        _ => return None,
    };
    Some(days * 1440 + h * 60 + m + sec.div_ceil(60))
}

fn partition(lock: &Lock, dir: &str, files: &BTreeMap<String, Vec<u8>>, f: &mut Vec<Finding>) {
    let Some(s) = &lock.request.deploy.slurm else {
        return;
    };
    if s.max_nodes.is_none() && s.max_time.is_none() {
        return;
    }
    for (p, b) in files {
        if !(p.starts_with("slurm/") && p.ends_with(".sbatch")) {
            continue;
        }
        let text = String::from_utf8_lossy(b);
        for (i, l) in text.lines().enumerate() {
            let shown = join(dir, p);
            if let (Some(v), Some(max)) = (l.strip_prefix("#SBATCH --nodes="), s.max_nodes) {
                let nodes: u64 = v
                    .trim()
                    .split('-')
                    .next_back()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0);
                if nodes > u64::from(max) {
                    f.push(
                        Finding::new(
                            Code::ExceedsPartition,
                            format!("{shown}: the job asks for {nodes} nodes, above the partition {}'s MaxNodes of {max} ([slurm].max_nodes): sbatch refuses it", s.partition),
                        )
                        .at(&shown, Some(i + 1))
                        .source("slurm.conf(5), PartitionName: MaxNodes (https://slurm.schedmd.com/slurm.conf.html#OPT_MaxNodes)")
                        .hint("run on a partition that allows the job's nodes, or lower [cluster].nodes, re-lock and regenerate"),
                    );
                }
            }
            if let (Some(v), Some(max)) = (l.strip_prefix("#SBATCH --time="), s.max_time.as_deref())
            {
                let (Some(want), Some(limit)) = (slurm_minutes(v.trim()), slurm_minutes(max))
                else {
                    continue;
                };
                if want > limit {
                    f.push(
                        Finding::new(
                            Code::ExceedsPartition,
                            format!("{shown}: the job asks for {} of wall time, above the partition {}'s MaxTime of {max} ([slurm].max_time): it stays pending (PartitionTimeLimit)", v.trim(), s.partition),
                        )
                        .at(&shown, Some(i + 1))
                        .source("slurm.conf(5), PartitionName: MaxTime (https://slurm.schedmd.com/slurm.conf.html#OPT_MaxTime)")
                        .hint("lower [slurm].time to the partition's limit, re-lock and regenerate"),
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_compare_in_one_unit() {
        assert_eq!(quantity(&Value::from(8)), Some(8000));
        assert_eq!(quantity(&Value::from("500m")), Some(500));
        assert_eq!(quantity(&Value::from("96")), Some(96_000));
        assert_eq!(quantity(&Value::from("2Gi")), Some((2u64 << 30) * 1000));
        assert_eq!(quantity(&Value::from("1G")), Some(1_000_000_000_000));
        assert_eq!(quantity(&Value::from("x")), None);
        assert_eq!(shown("memory", (12290u64 << 30) * 1000), "12290Gi");
        assert_eq!(shown("cpu", 769_000), "769");
        assert_eq!(shown("cpu", 500), "500m");
    }

    #[test]
    fn slurm_time_limits_read_as_slurm_reads_them() {
        assert_eq!(slurm_minutes("12:00:00"), Some(720));
        assert_eq!(slurm_minutes("1-00:00:00"), Some(1440));
        assert_eq!(slurm_minutes("2-12"), Some(3600));
        assert_eq!(slurm_minutes("30"), Some(30));
        assert_eq!(slurm_minutes("30:01"), Some(31));
        assert_eq!(slurm_minutes("x"), None);
    }
}
