//! The Kubernetes plan (issue 5): `out/k8s/`, one resource per file, applied with
//! `kubectl apply -k`.
//!
//! | file | when | what |
//! |---|---|---|
//! | `namespace.yaml` | always | `[k8s].namespace` (default `gpustack`) |
//! | `nccl-env.yaml` | always | ConfigMap with the NCCL/fabric environment ([`Common::env`], the Dockerfile's `ENV`) |
//! | `expected-bandwidth.yaml` | always | ConfigMap with the published nccl-tests figures and their sources |
//! | `nccl-tests-job.yaml` | the `validate` image is built | Indexed Job, one `all_reduce_perf` per node |
//! | `pytorchjob.yaml` | `[train]` | Kubeflow PyTorchJob (training-operator v1), elastic, c10d rendezvous |
//! | `vllm-{deployment,service,hpa,pdb}.yaml` | `[serve]` | `vllm serve` behind a Service, autoscaled, disruption-budgeted |
//! | `gpu-operator-values.yaml` | always | Helm values for the NVIDIA GPU Operator (not a resource) |
//! | `network/nic-cluster-policy.yaml` | multi-node InfiniBand/RoCE | NVIDIA Network Operator NicClusterPolicy whose RDMA shared device plugin provides the resource the pods request (applied after the Network Operator; not in the kustomization) |
//! | `kustomization.yaml` | always | every resource above |
//!
//! Every image, version and environment value comes from [`Common`] (so it equals what the
//! container target builds) or from the lock's packages; what the lock does not know (RDMA
//! device-plugin resource names, EFA interface counts, image tag suffixes) is said in a
//! generated comment instead of being guessed.

mod acceptance;
mod monitoring;
mod networks;
mod operators;
mod pods;
mod queues;
mod serving;
mod training;

pub use acceptance::{Datum, MpiLaunch, NcclTestsPlan, OsuPlan};
pub use monitoring::{Dashboard, MonitoringPlan};
pub use networks::{NicPolicyImage, NicPolicyPlan, PodNetworksPlan, SecondaryComponents};
pub use operators::{OperatorImage, OperatorPlan, OperatorRdma};
pub use pods::{Pod, Port, Probes, Volume, VolumeKind};
pub use serving::ServePlan;
pub use training::TrainPlan;

use serde::Serialize;

use crate::error::{Diagnostic, Error, Stage};
use crate::lock::Lock;
use crate::plan::cluster::{ClusterPlan, Gang};
use crate::plan::workload::WorkloadPlan;
use crate::plan::Common;
use crate::render::RenderedFile;
use crate::spec::deploy::{GangScheduler, TrainingApi};

use acceptance::{expected_data, nccl_tests_files, nccl_tests_plan};
use monitoring::dashboards;
use networks::{fabric_device_given, nic_policy, pod_networks_plan, render_pod_networks};
use operators::operator_plan;
use pods::{PodSettings, ENV_CONFIG};
use queues::{cluster_plan, kueue_files, Parts};
use serving::serve_plan;
use training::train_plan;

/// Namespace when the spec names none (`[k8s].namespace` left out, or no `[k8s]`).
pub const DEFAULT_NAMESPACE: &str = crate::spec::deploy::DEFAULT_K8S_NAMESPACE;

/// Kubernetes version when the spec names none.
pub const DEFAULT_VERSION: &str = crate::spec::deploy::DEFAULT_K8S_VERSION;

/// Oldest Kubernetes minor with every API written here (`autoscaling/v2` is GA in 1.23).
const MIN_MINOR: u32 = 23;

/// A namespace and its Pod Security level: the least its pods need.
#[derive(Clone, Debug, Serialize)]
pub struct NamespacePlan {
    /// Its name.
    pub name: String,
    /// What runs there (`training and the acceptance test`, `serving`, `everything`).
    pub holds: String,
    /// `privileged` or `baseline` (`pod-security.kubernetes.io/enforce`).
    pub enforce: String,
    /// Why a level above baseline, for comments.
    pub reasons: Vec<String>,
    /// Suffix of its per-namespace files (`""`, `-training`): `namespace<suffix>.yaml`,
    /// `nccl-env<suffix>.yaml`, `resourcequota<suffix>.yaml`, `kueue/local-queue<suffix>.yaml`.
    pub suffix: String,
}

/// Suffix of the training namespace's name and files when training and serving are split.
const TRAIN_SUFFIX: &str = "-training";

/// Longest namespace name (an RFC 1123 DNS label).
const MAX_NAMESPACE: usize = 63;

/// Why a set of pods needs more than the baseline Pod Security level (empty: baseline
/// admits them). baseline forbids the host's network, capabilities beyond its list
/// (IPC_LOCK) and hostPath volumes (kubernetes.io/docs/concepts/security/pod-security-standards).
fn privileged_reasons(pods: &[&Pod]) -> Vec<String> {
    let mut reasons = Vec::new();
    if pods.iter().any(|p| p.host_network) {
        reasons.push(
            if pods.iter().any(|p| p.ipc_lock) {
                "the multi-node InfiniBand/RoCE pods use hostNetwork and IPC_LOCK"
            } else {
                "the multi-node InfiniBand/RoCE pods use hostNetwork"
            }
            .to_string(),
        );
    } else if pods.iter().any(|p| p.ipc_lock) {
        reasons.push("the RDMA pods add IPC_LOCK".to_string());
    }
    if pods
        .iter()
        .any(|p| p.volumes.iter().any(|v| v.kind == VolumeKind::HostPath))
    {
        reasons.push("storage on the hosts (lustre:, hostpath:, a model path) is mounted with hostPath volumes".to_string());
    }
    reasons
}

/// The Kubernetes plan. LOAD-BEARING: `generators/k8s/*.j2` print these fields.
#[derive(Clone, Debug, Serialize)]
pub struct K8sPlan {
    /// Shared values.
    pub common: Common,
    /// Namespace.
    pub namespace: String,
    /// Kubernetes version targeted (`1.30`).
    pub version: String,
    /// The namespaces, `[k8s].namespace` first: one, or two when training and serving
    /// need different Pod Security levels (the training side then gets its own).
    pub namespaces: Vec<NamespacePlan>,
    /// Where the training and acceptance objects go (`namespaces[1]` when split).
    pub train_namespace: String,
    /// Where the acceptance test's objects are, for the "run it first" command:
    /// `-f` arguments in order.
    pub acceptance_files: Vec<String>,
    /// ConfigMap with the NCCL environment.
    pub env_config: String,
    /// ConfigMap with the expected bandwidth.
    pub expected_config: String,
    /// Its data.
    pub expected: Vec<Datum>,
    /// `[train]`.
    pub train: Option<TrainPlan>,
    /// `[serve]`.
    pub serve: Option<ServePlan>,
    /// The acceptance test, when the validate image is built.
    pub nccl_tests: Option<NcclTestsPlan>,
    /// Why there is no nccl-tests Job.
    pub nccl_tests_missing: Option<String>,
    /// GPU Operator values.
    pub operator: OperatorPlan,
    /// The NicClusterPolicy providing the pods' RDMA resource, when gpustack can write it.
    pub nic_policy: Option<NicPolicyPlan>,
    /// The pods' secondary networks on the fabric (`[network].pod_subnets`).
    pub pod_networks: Option<PodNetworksPlan>,
    /// What the cluster must provide that no generated object does (an RDMA resource
    /// outside the `rdma/` prefix, EFA and CXI devices).
    pub prerequisites: Vec<String>,
    /// Files listed in `kustomization.yaml`, sorted.
    pub resources: Vec<String>,
    /// GPUs of the cluster (`[cluster]`, or one node of 8 GPUs).
    pub gpus_total: u32,
    /// What each pod requests, the workloads as Kueue sees them, and the quotas derived
    /// from them (the ClusterQueue's and the ResourceQuota's).
    pub cluster: ClusterPlan,
    /// Where the CPU and memory figures come from.
    pub node_note: String,
    /// Kueue LocalQueue the workloads are submitted to (`[k8s].queue`).
    pub queue: Option<String>,
    /// `[k8s].topology`: the node label of the Kueue Topology level.
    pub topology: Option<String>,
    /// Files under `kueue/` (with `queue`).
    pub kueue_files: Vec<String>,
    /// Grafana dashboards to import, with their sources.
    pub dashboards: Vec<Dashboard>,
    /// Whether `[cluster]` is given (else the totals are the defaults).
    pub cluster_given: bool,
    /// How the cluster's Prometheus finds the generated monitors.
    pub monitoring: MonitoringPlan,
}

fn bad(msg: String, hint: &str) -> Error {
    Diagnostic::new(Stage::Generate, msg).hint(hint).into()
}

/// `[k8s].namespace` and `[k8s].version`, the version checked against the API versions
/// gen k8s writes.
fn namespace_and_version(lock: &Lock) -> Result<(String, String), Error> {
    let (namespace, version) = lock.request.deploy.k8s.as_ref().map_or_else(
        || (DEFAULT_NAMESPACE.to_string(), DEFAULT_VERSION.to_string()),
        |k| (k.namespace.clone(), k.version.clone()),
    );
    let minor: u32 = version
        .strip_prefix("1.")
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    if minor < MIN_MINOR {
        return Err(bad(
            format!("`[k8s].version = \"{version}\"`: gen k8s writes autoscaling/v2 and policy/v1 resources, which need Kubernetes 1.{MIN_MINOR} or newer"),
            "set `[k8s].version` to the cluster's version (1.23 or newer) and re-lock",
        ));
    }
    Ok((namespace, version))
}

/// The workload files of the main namespace (before the per-namespace files are added).
fn workload_files(
    nccl_tests: Option<&NcclTestsPlan>,
    train: Option<&TrainPlan>,
    serve: Option<&ServePlan>,
) -> Vec<String> {
    let mut resources = vec![
        "expected-bandwidth.yaml".to_string(),
        "namespace.yaml".into(),
        "nccl-env.yaml".into(),
    ];
    resources.extend(nccl_tests_files(nccl_tests));
    if let Some(t) = train {
        if t.api == TrainingApi::TrainJob.name() {
            resources.push("trainingruntime.yaml".into());
            resources.push("trainjob.yaml".into());
        } else {
            resources.push("pytorchjob.yaml".into());
        }
    }
    if let Some(s) = serve {
        let kind = if s.nodes > 1 {
            "leaderworkerset"
        } else {
            "deployment"
        };
        for f in [kind, "hpa", "pdb", "service"] {
            resources.push(format!("vllm-{f}.yaml"));
        }
    }
    resources.push("resourcequota.yaml".into());
    resources
}

/// Pod Security: each namespace's level is the least its pods need. Training and the
/// acceptance test (jobs on the fabric) and serving are judged apart; when they need
/// different levels, training gets its own namespace, so serving is not admitted at the
/// level the host network of training needs.
fn namespaces(
    namespace: &str,
    train: Option<&TrainPlan>,
    serve: Option<&ServePlan>,
    nccl_tests: Option<&NcclTestsPlan>,
) -> Result<Vec<NamespacePlan>, Error> {
    let train_pods: Vec<&Pod> = train
        .iter()
        .map(|t| &t.pod)
        .chain(nccl_tests.iter().map(|n| &n.pod))
        .collect();
    let serve_pods: Vec<&Pod> = serve
        .iter()
        .flat_map(|s| std::iter::once(&s.pod).chain(s.worker.iter()))
        .collect();
    let train_reasons = privileged_reasons(&train_pods);
    let serve_reasons = privileged_reasons(&serve_pods);
    let level = |r: &[String]| {
        if r.is_empty() {
            "baseline"
        } else {
            "privileged"
        }
    };
    let split = !train_pods.is_empty()
        && !serve_pods.is_empty()
        && level(&train_reasons) != level(&serve_reasons);
    if !split {
        let mut reasons = train_reasons;
        for r in serve_reasons {
            if !reasons.contains(&r) {
                reasons.push(r);
            }
        }
        return Ok(vec![NamespacePlan {
            name: namespace.to_string(),
            holds: "every workload".into(),
            enforce: level(&reasons).into(),
            reasons,
            suffix: String::new(),
        }]);
    }
    let train_ns = format!("{namespace}{TRAIN_SUFFIX}");
    if train_ns.len() > MAX_NAMESPACE {
        return Err(bad(
            format!("`[k8s].namespace = \"{namespace}\"`: training needs its own namespace `{train_ns}` (a Pod Security level other than serving's), which is longer than {MAX_NAMESPACE} characters"),
            "choose a `[k8s].namespace` of at most 54 characters and re-lock",
        ));
    }
    Ok(vec![
        NamespacePlan {
            name: namespace.to_string(),
            holds: "serving".into(),
            enforce: level(&serve_reasons).into(),
            reasons: serve_reasons,
            suffix: String::new(),
        },
        NamespacePlan {
            name: train_ns,
            holds: "training and the acceptance test".into(),
            enforce: level(&train_reasons).into(),
            reasons: train_reasons,
            suffix: TRAIN_SUFFIX.into(),
        },
    ])
}

impl K8sPlan {
    /// Plans the manifests from the lock.
    pub fn new(lock: &Lock, common: &Common) -> Result<K8sPlan, Error> {
        let (namespace, version) = namespace_and_version(lock)?;
        fabric_device_given(common)?;
        let workloads = WorkloadPlan::new(lock, common)?;
        let settings = PodSettings::new(common, &namespace);
        let k8s = lock.request.deploy.k8s.as_ref();
        let api = k8s.map_or(TrainingApi::TrainJob, |k| k.training_api);
        let queue = k8s.and_then(|k| k.queue.clone());
        let topology = k8s.and_then(|k| k.topology.clone());
        let scheduler = k8s.map_or(GangScheduler::Coscheduling, |k| k.gang);
        let gang = |pods: u32| Gang::of(queue.is_some(), pods, scheduler);
        let train = (workloads.train.as_ref())
            .map(|w| train_plan(common, w, api, topology.clone(), &settings, gang(w.nodes)));
        let serve = (workloads.serve.as_ref())
            .map(|w| serve_plan(common, w, &settings, gang(w.nodes)))
            .transpose()?;
        let nccl_tests =
            (workloads.acceptance.as_ref()).map(|a| nccl_tests_plan(common, a, &settings, &gang));
        let nccl_tests_missing = nccl_tests
            .is_none()
            .then(|| "the lock has no nccl-tests package (no NCCL is locked)".to_string());
        let operator = operator_plan(lock, common);
        let (nic_policy, prerequisites) = nic_policy(common, lock);
        let pod_networks = pod_networks_plan(common, &namespace);
        let mut resources = workload_files(nccl_tests.as_ref(), train.as_ref(), serve.as_ref());
        let namespaces = namespaces(
            &namespace,
            train.as_ref(),
            serve.as_ref(),
            nccl_tests.as_ref(),
        )?;
        let train_namespace = namespaces
            .last()
            .map(|n| n.name.clone())
            .unwrap_or_default();
        for n in namespaces.iter().skip(1) {
            for f in ["namespace", "nccl-env", "resourcequota"] {
                resources.push(format!("{f}{}.yaml", n.suffix));
            }
        }
        resources.sort();
        let train_suffix = namespaces
            .last()
            .map(|n| n.suffix.clone())
            .unwrap_or_default();
        let mut acceptance_files = vec![
            format!("namespace{train_suffix}.yaml"),
            format!("nccl-env{train_suffix}.yaml"),
            "expected-bandwidth.yaml".to_string(),
        ];
        acceptance_files.extend(nccl_tests_files(nccl_tests.as_ref()));
        let kueue_files = kueue_files(queue.as_ref(), topology.as_ref(), &namespaces);
        let node = &workloads.node;
        let cluster = cluster_plan(
            common,
            node,
            &settings,
            Parts {
                train: train.as_ref(),
                serve: serve.as_ref(),
                nccl_tests: nccl_tests.as_ref(),
            },
            queue.is_some(),
        );
        Ok(K8sPlan {
            common: common.clone(),
            namespace,
            version,
            namespaces,
            train_namespace,
            acceptance_files,
            env_config: ENV_CONFIG.to_string(),
            expected_config: "nccl-tests-expected".to_string(),
            expected: expected_data(
                common,
                (workloads.acceptance.as_ref()).and_then(|a| a.osu_expected.as_ref()),
            ),
            train,
            serve,
            nccl_tests,
            nccl_tests_missing,
            operator,
            nic_policy,
            pod_networks,
            prerequisites,
            resources,
            gpus_total: common.nodes.saturating_mul(common.gpus_per_node),
            cluster,
            node_note: node.note.clone(),
            cluster_given: lock.request.deploy.cluster.is_some(),
            queue,
            topology,
            kueue_files,
            dashboards: dashboards(),
            monitoring: MonitoringPlan::new(crate::spec::deploy::monitor_labels_of(k8s)),
        })
    }
}

/// `out/k8s/`.
pub fn render(lock: &Lock, common: &Common) -> Result<Vec<RenderedFile>, Error> {
    let plan = K8sPlan::new(lock, common)?;
    #[derive(Serialize)]
    struct Top<'a> {
        plan: &'a K8sPlan,
        /// The namespace a per-namespace file is rendered for (the first elsewhere).
        ns: &'a NamespacePlan,
    }
    let first = plan.namespaces.first().ok_or_else(|| {
        bad(
            "the Kubernetes plan has no namespace".into(),
            "this is a bug in gpustack",
        )
    })?;
    let top = crate::render::Context::new(&Top {
        plan: &plan,
        ns: first,
    });
    let t = |name: &str| crate::render::render_with(&format!("k8s/{name}.j2"), &top);
    let mut files = vec![
        RenderedFile::new("kustomization.yaml", t("kustomization.yaml")?),
        RenderedFile::new("expected-bandwidth.yaml", t("expected-bandwidth.yaml")?),
        RenderedFile::new("gpu-operator-values.yaml", t("gpu-operator-values.yaml")?),
    ];
    if plan.nic_policy.is_some() {
        files.push(RenderedFile::new(
            "network/nic-cluster-policy.yaml",
            t("network/nic-cluster-policy.yaml")?,
        ));
    }
    files.extend(render_pod_networks(&plan)?);
    for ns in &plan.namespaces {
        let top = top.with("ns", ns);
        let mut names = vec!["namespace", "nccl-env", "resourcequota"];
        if plan.queue.is_some() {
            names.push("kueue/local-queue");
        }
        for f in names {
            files.push(RenderedFile::new(
                format!("{f}{}.yaml", ns.suffix),
                crate::render::render_with(&format!("k8s/{f}.yaml.j2"), &top)?,
            ));
        }
    }
    if let Some(n) = &plan.nccl_tests {
        let names: &[&str] = if n.mpi.is_some() {
            &["nccl-tests-runtime.yaml", "nccl-tests-trainjob.yaml"]
        } else {
            &["nccl-tests-job.yaml"]
        };
        for f in names {
            files.push(RenderedFile::new(*f, t(f)?));
        }
        if n.osu.is_some() {
            files.push(RenderedFile::new(
                "osu-trainjob.yaml",
                t("osu-trainjob.yaml")?,
            ));
        }
    }
    if let Some(tr) = &plan.train {
        if tr.api == TrainingApi::TrainJob.name() {
            for f in ["trainjob.yaml", "trainingruntime.yaml"] {
                files.push(RenderedFile::new(f, t(f)?));
            }
        } else {
            files.push(RenderedFile::new("pytorchjob.yaml", t("pytorchjob.yaml")?));
        }
    }
    if let Some(s) = &plan.serve {
        let kind = if s.nodes > 1 {
            "leaderworkerset"
        } else {
            "deployment"
        };
        for f in [kind, "service", "hpa", "pdb"] {
            let name = format!("vllm-{f}.yaml");
            files.push(RenderedFile::new(name.clone(), t(&name)?));
        }
        for f in [
            format!("vllm-{}.yaml", s.monitor),
            "prometheus-adapter-values.yaml".to_string(),
        ] {
            files.push(RenderedFile::new(
                format!("monitoring/{f}"),
                t(&format!("monitoring/{f}"))?,
            ));
        }
    }
    for f in plan
        .kueue_files
        .iter()
        .filter(|f| !f.starts_with("local-queue"))
    {
        files.push(RenderedFile::new(
            format!("kueue/{f}"),
            t(&format!("kueue/{f}"))?,
        ));
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}
