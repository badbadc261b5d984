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

use serde::Serialize;

use crate::core::Component;
use crate::core::Fabric;
use crate::error::{Diagnostic, Error, Stage};
use crate::lock::Lock;
use crate::plan::cluster::{ClusterPlan, Extended, Gang, PodRequest, PodSet, Provider, Workload};
use crate::plan::locked::{self, HostPackage, PinnedImage};
use crate::plan::workload::{
    Acceptance, MpiSsh, OsuExpected, Resources, ServeWorkload, TrainWorkload, WorkloadPlan,
    MAX_RESTARTS,
};
use crate::plan::{Common, Mount, MountKind};
use crate::render::RenderedFile;
use crate::spec::deploy::{GangScheduler, TrainingApi};

/// Namespace when the spec names none (`[k8s].namespace` left out, or no `[k8s]`).
pub const DEFAULT_NAMESPACE: &str = crate::spec::deploy::DEFAULT_K8S_NAMESPACE;
/// Kubernetes version when the spec names none.
pub const DEFAULT_VERSION: &str = crate::spec::deploy::DEFAULT_K8S_VERSION;
/// Oldest Kubernetes minor with every API written here (`autoscaling/v2` is GA in 1.23).
const MIN_MINOR: u32 = 23;
/// `/dev/shm` size limit: generic (NCCL's shared-memory transport and DataLoader workers
/// outgrow the 64 MiB container default); not a fact of the lock.
const SHM_SIZE: &str = "64Gi";
/// The vLLM queue gauge as the HPA reads it: `vllm:num_requests_waiting` renamed by the
/// prometheus-adapter rule written to `monitoring/prometheus-adapter-values.yaml`
/// (custom-metric names cannot hold `:`).
const HPA_METRIC: &str = "vllm_num_requests_waiting";
/// The MPI hostfile Kubeflow Trainer's MPI plugin mounts in the launcher
/// (`constants.MPIHostfileDir` + `MPIHostfileName`, github.com/kubeflow/trainer
/// `pkg/constants/constants.go`).
const MPI_HOSTFILE: &str = "/etc/mpi/hostfile";

/// A named port.
#[derive(Clone, Debug, Serialize)]
pub struct Port {
    /// `http`, `pytorchjob-port`.
    pub name: String,
    /// Container port.
    pub port: u32,
}

/// What backs a pod [`Volume`]; serialized as `_pod.j2` compares it: `nfs`, `hostpath`,
/// `pvc`, `shm`.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum VolumeKind {
    /// An inline NFS volume.
    Nfs,
    /// A hostPath volume (a host directory, Lustre mounted on the node).
    HostPath,
    /// A PersistentVolumeClaim.
    Pvc,
    /// A memory-backed emptyDir for `/dev/shm`.
    Shm,
}

/// A volume and where the container mounts it.
#[derive(Clone, Debug, Serialize)]
pub struct Volume {
    /// `datasets`, `checkpoints`, `dshm`.
    pub name: String,
    /// NFS, a host path, a PVC or memory.
    pub kind: VolumeKind,
    /// NFS server.
    pub server: Option<String>,
    /// NFS export or host path.
    pub path: Option<String>,
    /// PVC claim.
    pub claim: Option<String>,
    /// Memory size limit (`shm`).
    pub size_limit: Option<String>,
    /// Mount path in the container.
    pub mount_path: String,
    /// Mounted read-only.
    pub read_only: bool,
    /// What the volume is, for a comment.
    pub note: String,
}

/// A startup/readiness/liveness probe on an HTTP path.
#[derive(Clone, Debug, Serialize)]
pub struct Probes {
    /// `/health`.
    pub path: String,
    /// Port name.
    pub port: String,
}

/// The pod spec shared by the PyTorchJob, the vLLM Deployment and the nccl-tests Job
/// (`generators/k8s/_pod.j2`).
#[derive(Clone, Debug, Serialize)]
pub struct Pod {
    /// Container name (`pytorch` is required by the training-operator).
    pub container: String,
    /// Image reference from [`Common::images`].
    pub image: String,
    /// Comments above the image (a fallback layer, a missing layer).
    pub image_notes: Vec<String>,
    /// Entrypoint.
    pub command: Vec<String>,
    /// Arguments.
    pub args: Vec<String>,
    /// Comments above the command.
    pub command_notes: Vec<String>,
    /// Container ports.
    pub ports: Vec<Port>,
    /// What the pod requests (and, requests equal to limits, may use): decided by the
    /// cluster plan's rules, from which the queue and the quota are derived.
    pub request: PodRequest,
    /// Where the CPU and memory figures come from.
    pub resources_note: String,
    /// `workingDir`.
    pub working_dir: Option<String>,
    /// `imagePullPolicy` (`Always` for the code image, whose tag names the lock, not the
    /// code).
    pub image_pull_policy: Option<String>,
    /// Variables the program reads (`DATASETS_DIR`).
    pub env: Vec<(String, String)>,
    /// Comments under `limits` (fabric resources the lock cannot size).
    pub fabric_notes: Vec<String>,
    /// `hostNetwork: true` with `ClusterFirstWithHostNet`.
    pub host_network: bool,
    /// `k8s.v1.cni.cncf.io/networks`: the secondary networks on the fabric the pod
    /// attaches (Multus' JSON form), when `[network].pod_subnets` keeps it off the host
    /// network.
    pub networks: Option<String>,
    /// Add `IPC_LOCK` (RDMA memory registration pins memory).
    pub ipc_lock: bool,
    /// HTTP probes.
    pub probes: Option<Probes>,
    /// Volumes, `/dev/shm` first.
    pub volumes: Vec<Volume>,
    /// `nvidia.com/gpu.product` value.
    pub gfd_product: Option<String>,
    /// `kubernetes.io/arch` of the nodes: the lock's one host CPU ([`Common::node_arch`]).
    pub node_arch: Option<String>,
    /// ConfigMap with the NCCL environment.
    pub env_from: String,
    /// `restartPolicy` (none for Deployments).
    pub restart_policy: Option<String>,
    /// Label value for one-pod-per-node anti-affinity (`app.kubernetes.io/name`).
    pub spread: Option<String>,
    /// The lock hash, annotated on the pod template.
    pub lock_hash: String,
    /// `schedulerName`: the gang scheduler's, when one starts the pods together.
    pub scheduler_name: Option<String>,
    /// Pod-level `runAsUser`/`runAsGroup`/`fsGroup` (the MPI nodes' SSH user).
    pub run_as: Option<u32>,
    /// A TCP readiness probe on this port (the MPI nodes' SSH server).
    pub tcp_ready: Option<u32>,
}

/// `trainjob.yaml` + `trainingruntime.yaml` (Kubeflow Trainer v2), or `pytorchjob.yaml`.
#[derive(Clone, Debug, Serialize)]
pub struct TrainPlan {
    /// Job name (and the TrainingRuntime's).
    pub name: String,
    /// `trainjob` or `pytorchjob` (`[k8s].training_api`).
    pub api: String,
    /// torchrun and its arguments: the TrainJob's `trainer.command`/`args`; the
    /// PyTorchJob's container has them in [`TrainPlan::pod`].
    pub command: Vec<String>,
    /// See [`TrainPlan::command`].
    pub args: Vec<String>,
    /// Comments above the TrainJob's command.
    pub command_notes: Vec<String>,
    /// Kueue's `podset-required-topology` for the training pods (`[k8s].topology`).
    pub topology: Option<String>,
    /// Worker replicas (= nodes).
    pub replicas: u32,
    /// `nprocPerNode`: GPUs per node, as a string per the CRD.
    pub nproc_per_node: String,
    /// `elasticPolicy.maxRestarts`.
    pub max_restarts: u32,
    /// Rendezvous port.
    pub rdzv_port: u32,
    /// How the nodes' pods start together.
    pub gang: Gang,
    /// The pod.
    pub pod: Pod,
}

/// `vllm-*.yaml`.
#[derive(Clone, Debug, Serialize)]
pub struct ServePlan {
    /// Deployment (or LeaderWorkerSet), Service, HPA and PDB name.
    pub name: String,
    /// Nodes per replica: above 1, a LeaderWorkerSet of `nodes` pods per replica.
    pub nodes: u32,
    /// The pods after the first of a replica (LeaderWorkerSet workers).
    pub worker: Option<Pod>,
    /// The HPA's pods metric, as the adapter rule in `monitoring/` serves it.
    pub hpa_metric: String,
    /// How Prometheus finds vLLM's `/metrics`: `servicemonitor` (through the Service, for
    /// a Deployment) or `podmonitor` (the leader pods of a LeaderWorkerSet, directly).
    pub monitor: String,
    /// `[serve].model`.
    pub model: String,
    /// `[serve].replicas`.
    pub replicas: u32,
    /// How a replica's pods start together (a LeaderWorkerSet group).
    pub gang: Gang,
    /// HPA ceiling.
    pub max_replicas: u32,
    /// Service port.
    pub port: u32,
    /// Comments about where the model comes from.
    pub model_notes: Vec<String>,
    /// The pod.
    pub pod: Pod,
}

/// The acceptance test: `nccl-tests-job.yaml` (an Indexed Job, one `all_reduce_perf` per
/// node, when nccl-tests is built without MPI), or `nccl-tests-runtime.yaml` +
/// `nccl-tests-trainjob.yaml` (a TrainJob on a Kubeflow Trainer MPI runtime: one rank per
/// GPU across every node, as Slurm runs it).
#[derive(Clone, Debug, Serialize)]
pub struct NcclTestsPlan {
    /// Job name (and the TrainingRuntime's).
    pub name: String,
    /// Pods, one per node.
    pub nodes: u32,
    /// The pod of every node: `all_reduce_perf` itself (Job), or the SSH server `mpirun`
    /// reaches (MPI).
    pub pod: Pod,
    /// The MPI launch, when nccl-tests is built with MPI.
    pub mpi: Option<MpiLaunch>,
    /// `osu-trainjob.yaml`: the OSU bandwidth run on the same runtime, one rank on each of
    /// two nodes ([`crate::plan::workload::Acceptance::osu`]).
    pub osu: Option<OsuPlan>,
    /// How the pods of the MPI runs start together (the runtime's `podGroupPolicy`).
    pub gang: Gang,
    /// The run judges its own output ([`crate::plan::judge`]).
    pub judged: bool,
}

/// The OSU point-to-point run (a second TrainJob on the nccl-tests TrainingRuntime).
#[derive(Clone, Debug, Serialize)]
pub struct OsuPlan {
    /// `osu-bw`.
    pub name: String,
    /// 2.
    pub nodes: u32,
    /// `mpirun` and its arguments.
    pub mpi: MpiLaunch,
}

/// `mpirun` in the launcher pod of a Kubeflow Trainer MPI runtime (`mlPolicy.mpi`).
#[derive(Clone, Debug, Serialize)]
pub struct MpiLaunch {
    /// `mlPolicy.mpi.numProcPerNode` (the hostfile's slots): GPUs per node.
    pub procs_per_node: u32,
    /// The SSH set-up of the validate image (user, port, key directory).
    pub ssh: crate::plan::workload::MpiSsh,
    /// `mpirun`.
    pub command: Vec<String>,
    /// mpirun's options, then the workload plan's per-GPU `all_reduce_perf` and its
    /// arguments.
    pub args: Vec<String>,
    /// Comments above the command.
    pub command_notes: Vec<String>,
    /// The validate image (the launcher's, also the TrainJob's `trainer.image`).
    pub image: String,
    /// The launcher pod's request ([`PodRequest::launcher`]).
    pub launcher: PodRequest,
    /// The hostfile the Trainer mounts in the launcher.
    pub hostfile: String,
}

/// One key of the expected-bandwidth ConfigMap.
#[derive(Clone, Debug, Serialize)]
pub struct Datum {
    /// Key.
    pub key: String,
    /// Value.
    pub value: String,
}

/// A Grafana dashboard named by where it is published.
#[derive(Clone, Debug, Serialize)]
pub struct Dashboard {
    /// What it shows.
    pub title: String,
    /// grafana.com ID, when it has one.
    pub grafana_id: Option<u32>,
    /// Where the JSON is.
    pub source: String,
}

/// A component of the GPU Operator values.
#[derive(Clone, Debug, Serialize)]
pub struct OperatorImage {
    /// `toolkit`, `dcgmExporter`.
    pub key: String,
    /// Version/tag to print, when the lock has the package.
    pub version: Option<String>,
    /// Registry path (`nvcr.io/nvidia/k8s`), when the lock names the image.
    pub repository: Option<String>,
    /// Image name (`dcgm-exporter`).
    pub image: Option<String>,
    /// `serviceMonitor.enabled` (the DCGM Exporter's GPU metrics).
    pub service_monitor: bool,
    /// Comments.
    pub notes: Vec<String>,
}

/// `driver.rdma` of the GPU Operator values: written only when GPUDirect RDMA needs the
/// legacy nvidia-peermem module.
#[derive(Clone, Debug, Serialize)]
pub struct OperatorRdma {
    /// `driver.rdma.useHostMofed`: the hosts provide the MLNX_OFED/DOCA-OFED driver
    /// (gpustack's NicClusterPolicy deploys no `ofedDriver`).
    pub use_host_mofed: bool,
    /// Comments.
    pub notes: Vec<String>,
}

/// `network/nic-cluster-policy.yaml`: the RDMA shared device plugin of the NVIDIA Network
/// Operator, providing `rdma/<resource_name>`.
#[derive(Clone, Debug, Serialize)]
pub struct NicPolicyPlan {
    /// The device plugin's image, from the lock; none when the lock has none (a note says
    /// what to set).
    pub image: Option<NicPolicyImage>,
    /// `configList[].resourceName`.
    pub resource_name: String,
    /// The resource pods request (`rdma/<resource_name>`).
    pub resource: String,
    /// The plugin's `config`, JSON text.
    pub config: String,
    /// Comments.
    pub notes: Vec<String>,
    /// `nvIpam` and `secondaryNetwork`, when the pods attach secondary networks.
    pub secondary: Option<SecondaryComponents>,
}

/// The NicClusterPolicy's components for the pods' secondary networks, as the Network
/// Operator's quick starts deploy them (images from the lock).
#[derive(Clone, Debug, Serialize)]
pub struct SecondaryComponents {
    /// `nvIpam` (with `enableWebhook: false`, as the quick starts set it).
    pub nv_ipam: NicPolicyImage,
    /// `secondaryNetwork.multus`.
    pub multus: NicPolicyImage,
    /// `secondaryNetwork.cniPlugins` (macvlan among them).
    pub cni_plugins: NicPolicyImage,
    /// `secondaryNetwork.ipoib`, on InfiniBand.
    pub ipoib: Option<NicPolicyImage>,
}

/// `network/<name>.yaml`: the pods' secondary networks and their IPPools.
#[derive(Clone, Debug, Serialize)]
pub struct PodNetworksPlan {
    /// The networks, one per `[network].interfaces` entry.
    pub networks: Vec<crate::plan::network::PodNetwork>,
    /// `networkNamespace`: where the operator writes the NetworkAttachmentDefinitions
    /// (`[k8s].namespace`; the pods' annotation names it).
    pub network_namespace: String,
    /// Where the IPPools go: the Network Operator's namespace, where nv-ipam runs.
    pub pool_namespace: String,
    /// Comments.
    pub notes: Vec<String>,
}

/// `rdmaSharedDevicePlugin.{repository,image,version}` of the NicClusterPolicy.
#[derive(Clone, Debug, Serialize)]
pub struct NicPolicyImage {
    /// `nvcr.io/nvidia/mellanox`.
    pub repository: String,
    /// `k8s-rdma-shared-dev-plugin`.
    pub image: String,
    /// `network-operator-v26.4.1`.
    pub version: String,
}

/// `gpu-operator-values.yaml`.
#[derive(Clone, Debug, Serialize)]
pub struct OperatorPlan {
    /// Whether the operator installs the driver (false when the lock's driver is installed).
    pub driver_enabled: bool,
    /// The locked driver, or the digest of its container image when the lock read it.
    pub driver_version: String,
    /// `driver.repository` and `driver.image`, written with a digest `version`.
    pub driver_repository: Option<(String, String)>,
    /// Comments on the driver.
    pub driver_notes: Vec<String>,
    /// `driver.kernelModuleType`: the host plan's flavour (`open`, `proprietary`), when the
    /// lock records one.
    pub kernel_module_type: Option<String>,
    /// Why that flavour (comments).
    pub kernel_module_notes: Vec<String>,
    /// `driver.rdma` (nvidia-peermem), only when GPUDirect RDMA needs it.
    pub rdma: Option<OperatorRdma>,
    /// Comments on GPUDirect RDMA where `driver.rdma` stays unset (DMA-BUF, an unknown
    /// kernel-module flavour, a host-installed driver).
    pub rdma_notes: Vec<String>,
    /// The toolkit and DCGM Exporter.
    pub images: Vec<OperatorImage>,
    /// GDRCopy driver (`gdrcopy.enabled`), when the lock has the gdrcopy library.
    pub gdrcopy: Option<String>,
}

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

/// The labels every generated monitor carries (`[k8s].monitor_labels`) and where
/// prometheus-adapter finds the Prometheus that selects them. LOAD-BEARING:
/// `_metadata.j2` (`monitored`), `gpu-operator-values.yaml.j2` and
/// `monitoring/prometheus-adapter-values.yaml.j2` print these fields.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct MonitoringPlan {
    /// `key: value`, sorted by key.
    pub labels: Vec<(String, String)>,
    /// The Prometheus service prometheus-adapter queries, when the labels name a
    /// kube-prometheus-stack release (`release`): `http://<fullname>-prometheus.monitoring.svc`.
    pub prometheus_url: Option<String>,
    /// Its port (the chart's `prometheus.service.port`, 9090).
    pub prometheus_port: u32,
    /// Where the figures come from, for comments.
    pub notes: Vec<String>,
}

impl MonitoringPlan {
    /// From `[k8s].monitor_labels` (the default when the lock has no `[k8s]`).
    #[must_use]
    pub fn new(labels: Vec<(String, String)>) -> MonitoringPlan {
        let mut notes = vec![format!(
            "the labels a Prometheus selects monitors by ([k8s].monitor_labels); kube-prometheus-stack's Prometheus selects `release: <its Helm release>` by default (serviceMonitorSelectorNilUsesHelmValues: true; {KPS_PROMETHEUS})"
        )];
        let prometheus_url = labels.iter().find(|(k, _)| k == "release").map(|(_, r)| {
            notes.push(format!(
                "prometheus-adapter queries the Prometheus of the kube-prometheus-stack release `{r}` installed in the namespace `monitoring`: its service is the chart's fullname (the release name when it contains `kube-prometheus-stack`, else `<release>-kube-prometheus-stack`, cut to 26 characters; {KPS_HELPERS}) suffixed `-prometheus`, port 9090"
            ));
            format!("http://{}-prometheus.monitoring.svc", kps_fullname(r))
        });
        MonitoringPlan {
            labels,
            prometheus_url,
            prometheus_port: 9090,
            notes,
        }
    }
}

/// kube-prometheus-stack's Prometheus template (its monitor selectors).
const KPS_PROMETHEUS: &str = "https://github.com/prometheus-community/helm-charts/blob/1514b96530e0e85ae1bf89eb256c029d0cf8ce03/charts/kube-prometheus-stack/templates/prometheus/prometheus.yaml";
/// kube-prometheus-stack's `_helpers.tpl` (`kube-prometheus-stack.fullname`).
const KPS_HELPERS: &str = "https://github.com/prometheus-community/helm-charts/blob/082861babe110452fca71989c1e410bdec966170/charts/kube-prometheus-stack/templates/_helpers.tpl";

/// `kube-prometheus-stack.fullname` for a release (no overrides): the release when it
/// contains the chart's name, else `<release>-kube-prometheus-stack`, cut to 26
/// characters and stripped of a trailing `-`.
fn kps_fullname(release: &str) -> String {
    const CHART: &str = "kube-prometheus-stack";
    let full = if release.contains(CHART) {
        release.to_string()
    } else {
        format!("{release}-{CHART}")
    };
    let cut: String = full.chars().take(26).collect();
    cut.trim_end_matches('-').to_string()
}

fn bad(msg: String, hint: &str) -> Error {
    Diagnostic::new(Stage::Generate, msg).hint(hint).into()
}

/// The volume of a mount.
fn volume_of(m: &Mount) -> Volume {
    let (kind, note) = match m.kind {
        MountKind::Nfs => (
            VolumeKind::Nfs,
            "NFS, mounted inline: no cluster-scoped PersistentVolume to own",
        ),
        MountKind::Pvc => (VolumeKind::Pvc, "an existing PersistentVolumeClaim"),
        MountKind::Lustre => (
            VolumeKind::HostPath,
            "Lustre, mounted on every GPU node at this path (hostPath)",
        ),
        MountKind::HostPath => (
            VolumeKind::HostPath,
            "a directory on every GPU node (hostPath)",
        ),
    };
    Volume {
        name: m.name.clone(),
        kind,
        server: m.server.clone(),
        path: m.host_path.clone(),
        claim: m.claim.clone(),
        size_limit: None,
        mount_path: m.container_path.clone(),
        read_only: m.read_only,
        note: format!("{}{}", note, if m.read_only { "; read-only" } else { "" }),
    }
}

fn shm() -> Volume {
    Volume {
        name: "dshm".into(),
        kind: VolumeKind::Shm,
        server: None,
        path: None,
        claim: None,
        size_limit: Some(SHM_SIZE.into()),
        mount_path: "/dev/shm".into(),
        read_only: false,
        note: "NCCL's shared-memory transport and DataLoader workers need more than the 64 MiB default /dev/shm".into(),
    }
}

/// Fabric-specific pod settings for a multi-node pod: (the fabric's devices, host network,
/// IPC_LOCK, comments). The RDMA resource is the network plan's.
fn fabric_settings(common: &Common) -> (Vec<Extended>, bool, bool, Vec<String>) {
    if common.nodes < 2 {
        return (Vec::new(), false, false, Vec::new());
    }
    match common.fabric {
        Some(Fabric::Infiniband | Fabric::Roce) => {
            let r = common.network.rdma_resource.clone();
            let extended = r
                .iter()
                .map(|name| Extended {
                    name: name.clone(),
                    count: 1,
                    provider: match &common.network.rdma_resource_name {
                        Some(_) => Provider::NicClusterPolicy,
                        None => Provider::Prerequisite(format!(
                            "{name}: a device plugin of the cluster must provide this resource ([network].rdma_resource is not an rdma/ resource of the Network Operator's RDMA shared device plugin)"
                        )),
                    },
                })
                .collect();
            let note = match (&r, &common.network.rdma_resource_name) {
                (Some(r), Some(n)) => format!(
                    "{r}: provided by network/nic-cluster-policy.yaml (the Network Operator's RDMA shared device plugin, resourceName {n})"
                ),
                (Some(r), None) => format!(
                    "{r}: the cluster's own device plugin must provide it (prerequisite; gpustack writes the NicClusterPolicy only for rdma/ resources)"
                ),
                (None, _) => String::new(),
            };
            let on_host = common.network.pod_networks.is_empty();
            let how = if on_host {
                HOST_NETWORK_NOTE.to_string()
            } else {
                pod_networks_note(common)
            };
            (extended, on_host, true, vec![note, how])
        }
        Some(Fabric::Efa | Fabric::Slingshot) => {
            let device = common.network.device.clone();
            let notes = device
                .iter()
                .map(|d| match &d.provider {
                    Provider::Prerequisite(p) => p.clone(),
                    Provider::NicClusterPolicy => d.name.clone(),
                })
                .collect();
            (device.into_iter().collect(), false, false, notes)
        }
        _ => (Vec::new(), false, false, Vec::new()),
    }
}

/// Why the MPI pods check their locked-memory limit before starting sshd.
const MEMLOCK_NOTE: &str = "before sshd: the ranks inherit its locked-memory limit (RLIMIT_MEMLOCK), which RDMA memory registration needs unlimited; Kubernetes has no per-pod limit, containers inherit the container runtime's, and containerd's unit sets none (the VM image's performance.sh adds LimitMEMLOCK=infinity for containerd); the pod fails at once with the limit it found instead of NCCL failing to register memory later";

/// Why multi-node InfiniBand/RoCE pods need no secondary network: they run on the host
/// network, where the HCAs' IP interfaces (IPoIB, the RoCE NIC's) already are; the RDMA
/// device itself comes from the shared device plugin. `[network].pod_subnets` takes the
/// alternative of the Network Operator's IPoIB and macvlan quick starts (a secondary
/// network per interface, [`pod_networks_plan`]).
const HOST_NETWORK_NOTE: &str = "no secondary network: the pods use the host network (hostNetwork: true), so NCCL's bootstrap interface and the HCAs' IPoIB/RoCE addresses are the node's own; to keep pods off the host network, give [network].pod_subnets and gpustack writes the Network Operator's IPoIBNetwork or MacvlanNetwork per interface (https://github.com/Mellanox/network-operator-docs/blob/0c0ecad430c9281c0924fa7434a88f1380ba3d7a/docs/quick-start/ipoib-rdma-shared.rst)";

/// What the pods of `[network].pod_subnets` attach, for comments.
fn pod_networks_note(common: &Common) -> String {
    let nets: Vec<String> = (common.network.pod_networks.iter())
        .map(|n| {
            format!(
                "{} {} (on {}, named so in the pod too; nv-ipam pool {})",
                n.kind_name(),
                n.name,
                n.interface,
                n.pool
            )
        })
        .collect();
    format!(
        "secondary networks on the fabric ([network].pod_subnets): {}; files network/<name>.yaml, applied after the NicClusterPolicy (source: {}; the annotation's JSON form: {})",
        nets.join(", "),
        crate::plan::network::POD_NETWORK_DOCS.join(", "),
        crate::plan::network::MULTUS_ANNOTATION
    )
}

/// `k8s.v1.cni.cncf.io/networks` for the pods on the fabric: Multus' JSON list naming each
/// network's NetworkAttachmentDefinition (the operator writes it into `namespace`, the
/// networks' `networkNamespace`) and the pod's interface, named as on the host so the
/// site's `NCCL_SOCKET_IFNAME` holds in the pod.
fn networks_annotation(common: &Common, namespace: &str) -> Option<String> {
    let nets = &common.network.pod_networks;
    if nets.is_empty() || common.nodes < 2 {
        return None;
    }
    let list: Vec<serde_json::Value> = nets
        .iter()
        .map(|n| serde_json::json!({"name": n.name, "namespace": namespace, "interface": n.interface}))
        .collect();
    Some(serde_json::Value::Array(list).to_string())
}

/// The NicClusterPolicy for the network plan's RDMA resource, or the prerequisite when
/// gpustack cannot write one.
fn nic_policy(common: &Common, lock: &Lock) -> (Option<NicPolicyPlan>, Vec<String>) {
    let plugin = locked::rdma_shared_dev_plugin(lock);
    let plugin = plugin.as_ref();
    let net = &common.network;
    let mut prerequisites = net.prerequisites.clone();
    let policy = match (&net.rdma_resource, &net.rdma_resource_name) {
        (Some(resource), Some(name)) => {
            // The example config of the Network Operator docs: Mellanox/NVIDIA NICs (PCI
            // vendor 15b3), up to 63 pods sharing each HCA.
            let config = serde_json::json!({
                "configList": [{
                    "resourceName": name,
                    "rdmaHcaMax": 63,
                    "selectors": { "vendors": ["15b3"] },
                }]
            });
            let mut notes = vec![
                format!("provides {resource}, the resource every multi-node pod of this stack requests"),
                format!("source: {}", crate::plan::network::NIC_CLUSTER_POLICY),

                "no `ofedDriver`: the hosts keep their RDMA driver (inbox rdma-core, or DOCA-OFED where GPUDirect RDMA uses nvidia-peermem)".into(),
                if net.pod_networks.is_empty() {
                    HOST_NETWORK_NOTE.into()
                } else {
                    pod_networks_note(common)
                },
            ];
            if !net.hcas.is_empty() {
                notes.push(format!(
                    "[network].hcas ({}) are RDMA device names; the plugin selects by PCI vendor, so every NVIDIA NIC of a node is shared",
                    net.hcas.join(", ")
                ));
            }
            let image = plugin.map(|p| policy_image(p, &mut notes));
            let secondary = secondary_components(common, lock, &mut notes, &mut prerequisites);
            if image.is_none() {
                notes.push("the lock has no k8s-rdma-shared-dev-plugin image: set `repository` and `version` to those of your Network Operator release before applying".into());
            }
            Some(NicPolicyPlan {
                image,
                resource_name: name.clone(),
                resource: resource.clone(),
                config: config.to_string(),
                notes,
                secondary,
            })
        }
        (Some(resource), None) => {
            prerequisites.push(format!(
                "{resource}: a device plugin of the cluster must provide this resource ([network].rdma_resource is not an rdma/ resource of the Network Operator's RDMA shared device plugin)"
            ));
            if !net.pod_networks.is_empty() {
                prerequisites.push(SECONDARY_PREREQUISITE.into());
            }
            None
        }
        (None, _) => None,
    };
    if let Some(Extended {
        provider: Provider::Prerequisite(p),
        ..
    }) = &net.device
    {
        prerequisites.push(p.clone());
    }
    (policy, prerequisites)
}

/// What must run when gpustack writes no NicClusterPolicy but the pods attach networks.
const SECONDARY_PREREQUISITE: &str = "the pods' secondary networks (network/*.yaml) need the Network Operator's Multus, CNI plugins, IPoIB CNI (InfiniBand) and nv-ipam, deployed by the cluster's own NicClusterPolicy (`secondaryNetwork`, `nvIpam`)";

/// `{repository, image, version}` of a locked Network Operator image, noting its source.
fn policy_image(p: &PinnedImage, notes: &mut Vec<String>) -> NicPolicyImage {
    let full = p.image.as_deref().unwrap_or_default();
    let (repository, image) = full.rsplit_once('/').unwrap_or(("", full));
    let tag = p.tag.as_deref().unwrap_or_default();
    notes.push(format!("{image} {tag}: source {}", p.source));
    NicPolicyImage {
        repository: repository.to_string(),
        image: image.to_string(),
        version: tag.to_string(),
    }
}

/// `nvIpam` and `secondaryNetwork` of the NicClusterPolicy, when the pods attach secondary
/// networks; a prerequisite when the lock lacks one of their images.
fn secondary_components(
    common: &Common,
    lock: &Lock,
    notes: &mut Vec<String>,
    prerequisites: &mut Vec<String>,
) -> Option<SecondaryComponents> {
    let nets = &common.network.pod_networks;
    if nets.is_empty() {
        return None;
    }
    let ib = common.fabric == Some(Fabric::Infiniband);
    let find = |name: &str| locked::network_operator_image(lock, name);
    let (Some(ipam), Some(multus), Some(cni)) = (
        find("nvidia-k8s-ipam"),
        find("multus-cni"),
        find("cni-plugins"),
    ) else {
        prerequisites.push(SECONDARY_PREREQUISITE.into());
        return None;
    };
    let ipoib = find("ipoib-cni");
    if ib && ipoib.is_none() {
        prerequisites.push(SECONDARY_PREREQUISITE.into());
        return None;
    }
    Some(SecondaryComponents {
        nv_ipam: policy_image(&ipam, notes),
        multus: policy_image(&multus, notes),
        cni_plugins: policy_image(&cni, notes),
        ipoib: ipoib.filter(|_| ib).map(|p| policy_image(&p, notes)),
    })
}

/// The pods' secondary networks and their IPPools.
fn pod_networks_plan(common: &Common, namespace: &str) -> Option<PodNetworksPlan> {
    let nets = &common.network.pod_networks;
    if nets.is_empty() {
        return None;
    }
    Some(PodNetworksPlan {
        networks: nets.clone(),
        network_namespace: namespace.to_string(),
        pool_namespace: crate::plan::network::NETWORK_OPERATOR_NAMESPACE.into(),
        notes: vec![
            format!("one network per [network].interfaces entry, each with an nv-ipam IPPool of its [network].pod_subnets entry; every node takes a block of {} addresses (a pod of this stack takes a node's GPUs whole, so a node runs one at a time)", crate::spec::deploy::POD_BLOCK),
            "apply after the NicClusterPolicy (the operator must run; not in kustomization.yaml): kubectl apply -f network/".into(),
            format!("source: {}", crate::plan::network::POD_NETWORK_DOCS.join(", ")),
        ],
    })
}

/// The ConfigMap every GPU pod takes its NCCL/fabric environment from.
const ENV_CONFIG: &str = "nccl-env";

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

/// A multi-node EFA or Slingshot stack names the device its pods request: without it, a pod
/// has no EFA or CXI device and NCCL aborts at communicator init (the environment forces
/// the fabric's libfabric provider). The error says which `[network]` key gives it.
fn fabric_device_given(common: &Common) -> Result<(), Error> {
    if common.nodes < 2 || common.network.device.is_some() {
        return Ok(());
    }
    match common.fabric {
        Some(Fabric::Efa) => Err(bad(
            format!("the pods of this {}-node EFA stack would request no EFA device: `[network].efa_devices` is not set, and NCCL's libfabric (FI_PROVIDER=efa) then finds no EFA interface in the pod", common.nodes),
            &format!("set `[network].efa_devices` to the instance type's number of EFA interfaces (the column Maximum EFA interfaces of https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa.html#efa-instance-types); the pods then request `{}` from the AWS EFA Kubernetes device plugin", crate::plan::network::EFA_RESOURCE),
        )),
        Some(Fabric::Slingshot) => Err(bad(
            format!("the pods of this {}-node Slingshot stack would request no CXI device: `[network].cxi_resource` is not set, and NCCL's libfabric (FI_PROVIDER=cxi) then finds no CXI NIC in the pod", common.nodes),
            &format!("set `[network].cxi_resource` to the resource of the device plugin that gives pods the CXI NICs, like `beta.hpe.com/cxi` (HPE's CXI Kubernetes device plugin, {}); or generate the other targets only (`gpustack gen docker slurm`)", crate::plan::network::CXI_PLUGIN),
        )),
        _ => Ok(()),
    }
}

/// What a multi-node pod on the fabric adds ([`fabric_settings`]), and the storage every
/// workload pod mounts.
struct PodSettings {
    extended: Vec<Extended>,
    host_network: bool,
    networks: Option<String>,
    ipc_lock: bool,
    fabric_notes: Vec<String>,
    storage: Vec<Volume>,
}

impl PodSettings {
    fn new(common: &Common, namespace: &str) -> PodSettings {
        let (extended, host_network, ipc_lock, fabric_notes) = fabric_settings(common);
        PodSettings {
            extended,
            host_network,
            networks: networks_annotation(common, namespace),
            ipc_lock,
            fabric_notes,
            storage: common.mounts.iter().map(volume_of).collect(),
        }
    }

    /// The fabric's resource, host network, IPC_LOCK and notes on `p`.
    fn on_fabric(&self, p: &mut Pod) {
        self.devices(p);
        p.fabric_notes = self.fabric_notes.clone();
        p.host_network = self.host_network;
        p.networks = self.networks.clone();
        p.ipc_lock = self.ipc_lock;
    }

    /// The fabric's devices added to `p`'s request.
    fn devices(&self, p: &mut Pod) {
        let r = &p.request;
        p.request = PodRequest::new(r.gpus, r.cpus, r.memory_gib, self.extended.clone());
    }
}

/// A pod of the stack, with what every GPU pod has: the locked image, GPUs, CPUs and memory
/// as requests and limits, the NCCL environment, /dev/shm.
fn pod(
    common: &Common,
    container: &str,
    image: &crate::plan::workload::WorkloadImage,
    res: &Resources,
) -> Pod {
    Pod {
        container: container.into(),
        image: image.reference.clone(),
        image_notes: image.note.iter().cloned().collect(),
        command: Vec::new(),
        args: Vec::new(),
        command_notes: Vec::new(),
        ports: Vec::new(),
        request: PodRequest::new(res.gpus, res.cpus, res.memory_gib, Vec::new()),
        resources_note: res.note.clone(),
        working_dir: None,
        image_pull_policy: None,
        env: Vec::new(),
        fabric_notes: Vec::new(),
        host_network: false,
        networks: None,
        ipc_lock: false,
        probes: None,
        volumes: vec![shm()],
        gfd_product: common.gfd_product.clone(),
        node_arch: common.node_arch.clone(),
        env_from: ENV_CONFIG.to_string(),
        restart_policy: None,
        spread: None,
        lock_hash: common.lock_hash.clone(),
        scheduler_name: None,
        run_as: None,
        tcp_ready: None,
    }
}

/// The training job: torchrun on every node, under the Trainer (TrainJob) or the
/// training-operator (PyTorchJob).
fn train_plan(
    common: &Common,
    w: &TrainWorkload,
    api: TrainingApi,
    topology: Option<String>,
    settings: &PodSettings,
    gang: Gang,
) -> TrainPlan {
    let name = "train".to_string();
    let trainjob = api == TrainingApi::TrainJob;
    // The Trainer requires the trainer container to be named `node`; the
    // training-operator, `pytorch`.
    let mut p = pod(
        common,
        if trainjob { "node" } else { "pytorch" },
        &w.image,
        &w.resources,
    );
    p.command = vec![w.torchrun.program.clone()];
    p.args = w.torchrun.args.clone();
    // The first node, as each operator names it: the Trainer's JobSet gives pod 0
    // of the `node` job the hostname `<job>-node-0-0` under the headless Service
    // `<job>`; the training-operator names worker 0's Service `<job>-worker-0`.
    let first = if trainjob {
        format!("{name}-node-0-0.{name}")
    } else {
        format!("{name}-worker-0")
    };
    p.args
        .push(format!("--rdzv-endpoint={first}:{}", w.rdzv_port));
    p.args.push(format!("--rdzv-id={name}"));
    p.args.extend(w.entry.iter().cloned());
    p.command_notes = vec![format!(
        "torchrun, one per node, {} processes each; what it runs: {}",
        w.resources.gpus, w.entry_note
    )];
    p.ports = vec![Port {
        name: if trainjob { "c10d" } else { "pytorchjob-port" }.into(),
        port: w.rdzv_port,
    }];
    p.working_dir = Some(w.code.dir.clone());
    match (&w.code.image, &w.code.volume) {
        (Some(code), _) => {
            p.image = code.clone();
            p.image_notes = vec![format!(
                "the code image: the training image ({}) with the project directory copied to {} (out/docker, bake target `code`); its tag names the lock, not the code, so it is pulled on every start",
                w.image.reference, w.code.dir
            )];
            p.image_pull_policy = Some("Always".into());
        }
        (None, Some(v)) => {
            p.image_notes.push(format!(
                "the code is on [train].workdir, mounted at {}",
                w.code.dir
            ));
            p.volumes.push(volume_of(v));
        }
        (None, None) => {}
    }
    p.env = w.env.clone();
    p.scheduler_name = gang.scheduler_name().map(String::from);
    settings.on_fabric(&mut p);
    p.volumes.extend(settings.storage.iter().cloned());
    let (command, args, command_notes) = if trainjob {
        // The TrainJob carries what starts (`trainer.command`/`args`, `env`); the
        // runtime's container the rest.
        (
            std::mem::take(&mut p.command),
            std::mem::take(&mut p.args),
            std::mem::take(&mut p.command_notes),
        )
    } else {
        (Vec::new(), Vec::new(), Vec::new())
    };
    TrainPlan {
        api: api.name().into(),
        command,
        args,
        command_notes,
        topology,
        replicas: w.nodes,
        nproc_per_node: w.resources.gpus.to_string(),
        max_restarts: MAX_RESTARTS,
        gang,
        rdzv_port: w.rdzv_port,
        name,
        pod: p,
    }
}

/// The vLLM service: a Deployment, or a LeaderWorkerSet of leader and worker pods when a
/// group spans nodes.
fn serve_plan(
    common: &Common,
    w: &ServeWorkload,
    settings: &PodSettings,
    gang: Gang,
) -> Result<ServePlan, Error> {
    if gang == Gang::Coscheduling {
        return Err(bad(
            format!("[serve].nodes = {}: a vLLM server across nodes needs its pods started together, and the LeaderWorkerSet controller (v0.10) gang-schedules only with Volcano (`gangSchedulingManagement.schedulerProvider`, github.com/kubernetes-sigs/lws v0.10.0 pkg/schedulerprovider), not with the Coscheduling plugin", w.nodes),
            "set `[k8s].queue` to have Kueue admit each group whole, or `[k8s].gang = \"volcano\"` with the LeaderWorkerSet controller configured for Volcano, and re-lock",
        ));
    }
    let mut p = pod(common, "vllm", &w.image, &w.resources);
    p.command = vec![w.vllm.program.clone()];
    p.args = w.vllm.args.clone();
    if w.nodes > 1 {
        // vLLM's LeaderWorkerSet form: LWS gives every pod of a group its index
        // and the leader's address; Kubernetes expands `$(VAR)` in args.
        p.args.extend([
            "--node-rank".to_string(),
            "$(LWS_WORKER_INDEX)".into(),
            "--master-addr".into(),
            "$(LWS_LEADER_ADDRESS)".into(),
        ]);
        p.command_notes = vec![format!(
            "one vLLM server over the {} nodes of a group (tensor parallel {}, pipeline parallel {}); the leader (index 0) serves the API",
            w.nodes,
            w.vllm.args.get(3).cloned().unwrap_or_default(),
            w.pipeline_parallel
        )];
        settings.on_fabric(&mut p);
        p.scheduler_name = gang.scheduler_name().map(String::from);
    }
    p.ports = vec![Port {
        name: "http".into(),
        port: w.port,
    }];
    p.probes = Some(Probes {
        path: "/health".into(),
        port: "http".into(),
    });
    p.env = w.env.clone();
    p.volumes.extend(settings.storage.iter().cloned());
    if let Some(v) = &w.model.volume {
        p.volumes.push(volume_of(v));
    }
    let worker = (w.nodes > 1).then(|| {
        let mut q = p.clone();
        q.container = "vllm-worker".into();
        q.args.extend(w.worker_args.iter().cloned());
        q.ports = Vec::new();
        q.probes = None;
        q.command_notes = vec![format!(
            "the other nodes of the group: the same server, `{}` (no API server)",
            w.worker_args.join(" ")
        )];
        q
    });
    if worker.is_some() {
        p.container = "vllm-leader".into();
    }
    Ok(ServePlan {
        name: "vllm".into(),
        nodes: w.nodes,
        // A LeaderWorkerSet's pods are not alike: only each group's leader runs the
        // API server and its /metrics; the workers (`--headless`) have neither. A
        // PodMonitor scrapes the leaders by their label, one target per group, so a
        // group's metrics stay with its leader pod (the HPA reads them per pod)
        // whatever fronts the Service.
        monitor: if w.nodes > 1 {
            "podmonitor"
        } else {
            "servicemonitor"
        }
        .into(),
        worker,
        hpa_metric: HPA_METRIC.into(),
        model: w.model.name.clone(),
        replicas: w.replicas,
        gang,
        max_replicas: w.replicas.saturating_mul(2),
        port: w.port,
        model_notes: w.model.notes.clone(),
        pod: p,
    })
}

/// `mpirun`'s options for `np` ranks, `per_node` on each node: Open MPI's prefix, the
/// Trainer's hostfile, and every variable the ranks need (processes started over SSH do
/// not inherit the pod's environment).
fn mpirun_args(common: &Common, np: u32, per_node: u32) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "--prefix".into(),
        common.mpi_prefix.clone().unwrap_or_default(),
        "--hostfile".into(),
        MPI_HOSTFILE.into(),
        "-np".into(),
        np.to_string(),
        "-N".into(),
        per_node.to_string(),
    ];
    // Processes started over SSH do not inherit the pod's
    // environment: pass the image's paths and every NCCL/fabric
    // variable.
    for name in ["PATH", "LD_LIBRARY_PATH"]
        .into_iter()
        .map(String::from)
        .chain(common.env.iter().map(|e| e.name.clone()))
    {
        args.push("-x".into());
        args.push(name);
    }
    args
}

/// The acceptance test over SSH: every node's pod runs the SSH server, mpirun starts
/// all_reduce_perf (and osu_bw across two nodes, its arguments returned beside).
fn mpi_acceptance(
    common: &Common,
    a: &Acceptance,
    ssh: &MpiSsh,
    p: &mut Pod,
    settings: &PodSettings,
) -> (MpiLaunch, Option<Vec<String>>) {
    // Every node runs the SSH server mpirun reaches; the ranks are
    // started by it, as the SSH user.
    p.command_notes = vec![format!(
        "the SSH server mpirun starts the ranks through (port {}, the key pair the Trainer generates, mounted in {})",
        ssh.port, ssh.auth_dir
    )];
    if settings.extended.is_empty() {
        p.command = vec![ssh.sshd.program.clone()];
        p.args = ssh.sshd.args.clone();
    } else {
        // The ranks inherit sshd's locked-memory limit, and RDMA registers every buffer
        // NCCL and UCX use: a limit below unlimited fails at communicator init with a
        // memory-registration error far from its cause. The pod stops first, saying so.
        let sshd: Vec<String> = std::iter::once(ssh.sshd.program.clone())
            .chain(ssh.sshd.args.iter().cloned())
            .map(|a| crate::render::sh_quote(&a))
            .collect();
        p.command = vec!["/bin/sh".into(), "-c".into()];
        p.args = vec![format!(
            "if [ \"$(ulimit -l)\" != unlimited ]; then echo \"gpustack: the locked-memory limit is $(ulimit -l) KiB; RDMA needs it unlimited: give the node's container runtime LimitMEMLOCK=infinity (the VM image sets it for containerd)\" >&2; exit 1; fi; exec {}",
            sshd.join(" ")
        )];
        p.command_notes.push(MEMLOCK_NOTE.to_string());
    }
    p.run_as = Some(ssh.uid);
    p.tcp_ready = Some(ssh.port);
    p.host_network = settings.host_network;
    p.networks = settings.networks.clone();
    settings.devices(p);
    p.fabric_notes = settings.fabric_notes.clone();
    if !p.request.extended.is_empty() {
        p.fabric_notes.push(format!(
            "the ranks run as uid {}: a capability such as IPC_LOCK would not reach them (Kubernetes sets no ambient capabilities), so none is added; RDMA memory registration needs the container runtime's locked-memory limit (`ulimit -l` in a pod) to be unlimited",
            ssh.uid
        ));
    }
    let gpus = a.resources.gpus;
    let mut args = mpirun_args(common, a.nodes.saturating_mul(gpus), gpus);
    let osu_args = a.osu.as_ref().map(|o| {
        let mut args = mpirun_args(common, 2, 1);
        args.push(o.program.clone());
        args.extend(o.args.iter().cloned());
        args
    });
    args.push(a.per_gpu.program.clone());
    args.extend(a.per_gpu.args.iter().cloned());
    let (command, args) = judged(a.judge.as_ref(), vec!["mpirun".into()], args);
    let launch = MpiLaunch {
        procs_per_node: gpus,
        ssh: ssh.clone(),
        command,
        args,
        command_notes: vec![
            format!(
                "all_reduce_perf, one rank per GPU ({} nodes x {gpus}), 8 B to 8 GiB, as the Slurm acceptance test runs it; the form of the nccl-tests README (\"mpirun -np 64 -N 8 ./build/all_reduce_perf -b 8 -e 8G -f 2 -g 1\", github.com/NVIDIA/nccl-tests)",
                a.nodes
            ),
            format!(
                "--prefix: where the validate image has Open MPI, so the other nodes find it in a non-interactive SSH session; --hostfile: the one the Trainer writes ({MPI_HOSTFILE}), given explicitly rather than through the Trainer's OMPI_MCA_orte_default_hostfile, an ORTE parameter: Open MPI 5 replaced ORTE with PRRTE (open-mpi.org/software/ompi/major-changes.php)"
            ),
        ],
        image: a.image.reference.clone(),
        launcher: PodRequest::launcher(),
        hostfile: MPI_HOSTFILE.into(),
    };
    (launch, osu_args)
}

/// A command judged by its output ([`crate::plan::judge`]): `bash -c` runs it through the
/// same filter the Slurm script pipes it into; unchanged when the lock has no figure.
fn judged(
    judge: Option<&crate::plan::judge::Judge>,
    command: Vec<String>,
    args: Vec<String>,
) -> (Vec<String>, Vec<String>) {
    match judge {
        None => (command, args),
        Some(j) => (
            vec![
                "bash".into(),
                "-c".into(),
                j.wrap(),
                "gpustack-acceptance".into(),
            ],
            command.into_iter().chain(args).collect(),
        ),
    }
}

/// The acceptance test: all_reduce_perf on one node, or under mpirun over SSH across
/// the nodes (with osu_bw between two).
fn nccl_tests_plan(
    common: &Common,
    a: &Acceptance,
    settings: &PodSettings,
    gang: &dyn Fn(u32) -> Gang,
) -> NcclTestsPlan {
    // The Trainer's MPI plugin mounts the SSH keys only in containers named
    // `node` (`pkg/runtime/framework/plugins/mpi/mpi.go`).
    let container = if a.ssh.is_some() {
        "node"
    } else {
        "nccl-tests"
    };
    let mut p = pod(common, container, &a.image, &a.resources);
    p.restart_policy = Some("Never".into());
    p.spread = (a.nodes > 1).then(|| "nccl-tests".to_string());
    let (mpi, osu_args) = match &a.ssh {
        None => {
            (p.command, p.args) = judged(
                a.judge.as_ref(),
                vec![a.per_node.program.clone()],
                a.per_node.args.clone(),
            );
            p.command_notes = vec![format!(
                "all_reduce_perf over the {} GPUs of one node, 8 B to 8 GiB; compare the busbw column with the intra-node figure in expected-bandwidth.yaml",
                a.resources.gpus
            )];
            (None, None)
        }
        Some(ssh) => {
            let (launch, osu_args) = mpi_acceptance(common, a, ssh, &mut p, settings);
            (Some(launch), osu_args)
        }
    };
    // Under MPI, the node pods and the launcher wait for each other; the per-node Job's
    // pods run alone.
    let gang = if mpi.is_some() {
        gang(a.nodes + 1)
    } else {
        gang(1)
    };
    p.scheduler_name = gang.scheduler_name().map(String::from);
    let osu = mpi.as_ref().zip(osu_args).map(|(m, args)| {
        let (command, args) = judged(a.osu_judge.as_ref(), vec!["mpirun".into()], args);
        OsuPlan {
        name: "osu-bw".into(),
        nodes: 2,
        mpi: MpiLaunch {
            command,
            args,
            command_notes: vec![
                "osu_bw, one rank on each of two nodes, GPU buffers on both sides (-d cuda D D), as the Slurm acceptance test runs it after nccl-tests".into(),
            ],
            ..m.clone()
        },
    }
    });
    NcclTestsPlan {
        judged: a.judge.is_some(),
        name: "nccl-tests".into(),
        nodes: a.nodes,
        pod: p,
        mpi,
        osu,
        gang,
    }
}

/// The expected bandwidths as ConfigMap data: `<scope>.<field>`; the `osu_bw` figure where
/// the acceptance test runs OSU, in `osu_bw`'s unit (`osu_bw.mbps`) and at its message size
/// (`osu_bw.size-bytes`).
fn expected_data(common: &Common, osu: Option<&OsuExpected>) -> Vec<Datum> {
    let mut expected = Vec::new();
    for e in &common.expected {
        let mut push = |k: &str, v: &str| {
            expected.push(Datum {
                key: format!("{}.{k}", e.scope),
                value: v.to_string(),
            });
        };
        push("busbw-gbps", &e.busbw_gbps);
        push("shape", &e.shape);
        push("fabric", &e.fabric);
        if let Some(s) = &e.size {
            push("size", s);
        }
        push("test", &e.test);
        if let Some(s) = &e.sharp {
            push("sharp", s);
        }
        push("source", &e.source);
    }
    if let Some(o) = osu {
        let mut push = |k: &str, v: &str| {
            expected.push(Datum {
                key: format!("osu_bw.{k}"),
                value: v.to_string(),
            });
        };
        push("mbps", &o.mbps);
        push("gbps", &o.gbps);
        push(
            "unit",
            "MB/s as osu_bw prints it: 10^6 bytes/s, point-to-point (not a busbw)",
        );
        if let Some(b) = &o.size_bytes {
            push("size-bytes", b);
        }
        push(
            "shape",
            "2x1: one rank on each of two nodes, GPU buffers on both sides",
        );
        push("gpu", &o.gpu);
        push("fabric", &o.fabric);
        push("source", &o.source);
    }
    expected
}

/// The acceptance test's files: its Job, or its runtime and TrainJobs under mpirun.
fn nccl_tests_files(nccl_tests: Option<&NcclTestsPlan>) -> Vec<String> {
    let mut files = Vec::new();
    if let Some(n) = nccl_tests {
        if n.mpi.is_some() {
            files.push("nccl-tests-runtime.yaml".into());
            files.push("nccl-tests-trainjob.yaml".into());
            if n.osu.is_some() {
                files.push("osu-trainjob.yaml".into());
            }
        } else {
            files.push("nccl-tests-job.yaml".into());
        }
    }
    files
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

/// Kueue's files, when `[k8s].queue` is set: the queues (one local queue per namespace),
/// the flavor and the topology.
fn kueue_files(
    queue: Option<&String>,
    topology: Option<&String>,
    namespaces: &[NamespacePlan],
) -> Vec<String> {
    if queue.is_none() {
        return Vec::new();
    }
    let mut kueue_files = vec![
        "cluster-queue.yaml".to_string(),
        "local-queue.yaml".into(),
        "resource-flavor.yaml".into(),
    ];
    for n in namespaces.iter().skip(1) {
        kueue_files.push(format!("local-queue{}.yaml", n.suffix));
    }
    if topology.is_some() {
        kueue_files.push("topology.yaml".into());
    }
    kueue_files.sort();
    kueue_files
}

/// The Grafana dashboards the README points at.
fn dashboards() -> Vec<Dashboard> {
    vec![
        Dashboard {
            title: "NVIDIA DCGM Exporter Dashboard (GPU utilization, memory, power, temperature per GPU)".into(),
            grafana_id: Some(12239),
            source: "https://grafana.com/grafana/dashboards/12239 (github.com/NVIDIA/dcgm-exporter grafana/README.md: \"A published variant is also available on Grafana.com as dashboard 12239\"; the checked-in JSON is grafana/dcgm-exporter-dashboard.json)".into(),
        },
        Dashboard {
            title: "vLLM (latency, throughput, queue, KV cache)".into(),
            grafana_id: None,
            source: "github.com/vllm-project/vllm examples/observability/dashboards/grafana/ (vLLM / Overview, Instances, KV Cache, Speculative Decoding; import the JSON as its README says; releases before the move: examples/online_serving/prometheus_grafana/grafana.json); vLLM publishes no grafana.com ID and gpustack names none".into(),
        },
    ]
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

/// The workloads of the plan, for [`cluster_plan`].
struct Parts<'a> {
    train: Option<&'a TrainPlan>,
    serve: Option<&'a ServePlan>,
    nccl_tests: Option<&'a NcclTestsPlan>,
}

/// One pod set.
fn pod_set(name: &str, count: u32, pod: &Pod) -> PodSet {
    PodSet {
        name: name.into(),
        count,
        request: pod.request.clone(),
    }
}

/// The cluster plan: the node's figure (its GPUs, the workload plan's whole-node CPUs and
/// memory, one of each fabric device the multi-node pods request) and every workload as
/// Kueue admits it.
fn cluster_plan(
    common: &Common,
    node: &Resources,
    settings: &PodSettings,
    parts: Parts<'_>,
    queued: bool,
) -> ClusterPlan {
    let mut workloads = Vec::new();
    if let Some(n) = parts.nccl_tests {
        match &n.mpi {
            Some(m) => {
                let mut push = |file: &str, name: &str, nodes: u32| {
                    workloads.push(Workload {
                        file: file.into(),
                        name: name.into(),
                        pod_sets: vec![
                            pod_set("node", nodes, &n.pod),
                            PodSet {
                                name: "launcher".into(),
                                count: 1,
                                request: m.launcher.clone(),
                            },
                        ],
                        queued,
                        gang: n.gang.clone(),
                    });
                };
                push("nccl-tests-trainjob.yaml", &n.name, n.nodes);
                if let Some(o) = &n.osu {
                    push("osu-trainjob.yaml", &o.name, o.nodes);
                }
            }
            // One all_reduce_perf per node, each on its own: no pod waits for another.
            None => workloads.push(Workload {
                file: "nccl-tests-job.yaml".into(),
                name: n.name.clone(),
                pod_sets: vec![pod_set("main", n.nodes, &n.pod)],
                queued,
                gang: n.gang.clone(),
            }),
        }
    }
    if let Some(t) = parts.train {
        let (file, set) = if t.api == TrainingApi::TrainJob.name() {
            ("trainjob.yaml", "node")
        } else {
            ("pytorchjob.yaml", "worker")
        };
        workloads.push(Workload {
            file: file.into(),
            name: t.name.clone(),
            pod_sets: vec![pod_set(set, t.replicas, &t.pod)],
            queued,
            gang: t.gang.clone(),
        });
    }
    if let Some(s) = parts.serve {
        // Kueue admits each pod of a Deployment on its own, and each group of a
        // LeaderWorkerSet as one workload.
        let (file, pod_sets) = match &s.worker {
            Some(w) => (
                "vllm-leaderworkerset.yaml",
                vec![
                    pod_set("leader", 1, &s.pod),
                    pod_set("worker", s.nodes - 1, w),
                ],
            ),
            None => ("vllm-deployment.yaml", vec![pod_set("main", 1, &s.pod)]),
        };
        workloads.push(Workload {
            file: file.into(),
            name: s.name.clone(),
            pod_sets,
            queued,
            gang: s.gang.clone(),
        });
    }
    let node = PodRequest::new(
        common.gpus_per_node,
        node.cpus,
        node.memory_gib,
        settings.extended.clone(),
    );
    ClusterPlan::new(common.nodes, node, workloads)
}

/// The driver the operator installs (or not, when the hosts have one): its version or
/// digest, its repository when pulled by digest, and the notes that explain it.
struct OperatorDriver {
    installed: bool,
    version: String,
    repository: Option<(String, String)>,
    notes: Vec<String>,
}

fn operator_driver(lock: &Lock, common: &Common) -> OperatorDriver {
    let driver = lock.component(Component::Driver);
    let installed = lock.hardware.driver_installed;
    let mut driver_notes = Vec::new();
    if installed {
        driver_notes.push(format!(
            "the stack was resolved for the driver installed on the hosts ({}): the operator must not install another",
            common.driver
        ));
    } else {
        driver_notes.push(format!(
            "the stack was resolved for driver {}: the operator must install exactly this one (the CUDA compatibility mode in the lock depends on it)",
            common.driver
        ));
    }
    // The driver container: by the digest the lock read from the registry (the operator
    // then uses it as is: NVIDIA/gpu-operator `resolveDriverTag`), else the version the
    // operator appends the node's OS to.
    let driver_image = locked::gpu_operator_driver(lock)
        .filter(|_| !installed)
        .and_then(|p| {
            let image = p.image.as_deref()?;
            let tag = p.tag.clone()?;
            let (repository, name) = image.rsplit_once('/')?;
            Some((repository.to_string(), name.to_string(), tag, p.digest))
        });
    let mut driver_version = common.driver.clone();
    let mut driver_repository = None;
    if !installed {
        match &driver_image {
            Some((repository, name, tag, Some(digest))) => {
                driver_notes.push(format!(
                    "`{repository}/{name}:{tag}`, pulled by the digest the lock read from the registry (the operator appends no OS tag to a digest)"
                ));
                driver_version = digest.clone();
                driver_repository = Some((repository.clone(), name.clone()));
            }
            Some((repository, name, tag, None)) => driver_notes.push(format!(
                "`{repository}/{name}:{tag}` is pinned by tag only: the lock could not read its digest from the registry (lock with nvcr.io or a `[resolve] registries` mirror reachable)"
            )),
            None => driver_notes.push("the operator appends the node OS to the driver image tag (`<version>-<os>`); the catalog knows that tag form for Ubuntu and Rocky Linux nodes only, so the lock records no digest for it".into()),
        }
    }
    if let Some(d) = driver {
        driver_notes.push(format!("source: {}", d.source));
    }
    if let Some(fm) = locked::host_package(lock, HostPackage::FabricManager) {
        driver_notes.push(if installed {
            format!(
                "NVSwitch: Fabric Manager {} must run on the hosts, matching the driver exactly",
                fm.version
            )
        } else {
            format!(
                "NVSwitch: the driver container runs Fabric Manager ({}), which matches the driver",
                fm.version
            )
        });
    }
    let reqs = locked::host_requirements(lock);
    if !reqs.is_empty() {
        let what: Vec<String> = reqs
            .iter()
            .flat_map(|r| r.apt.iter().map(|p| format!("`{p}`")))
            .chain(
                reqs.iter()
                    .flat_map(|r| &r.kernel_modules)
                    .map(|m| format!("the `{m}` kernel module loaded at boot")),
            )
            .collect();
        driver_notes.push(if installed {
            format!(
                "NVSwitch: Fabric Manager starts NVLSM on these boards; the hosts also need {} (the lock's {})",
                what.join(", "),
                reqs.iter().map(|r| format!("`{}`", r.name)).collect::<Vec<_>>().join(", ")
            )
        } else {
            format!(
                "NVSwitch: the driver container installs nvlsm and infiniband-diags itself and, on boards with a CX7 bridge for NVLink management, waits for the hosts' mlx5_core and ib_umad modules before it starts Fabric Manager with NVLSM: the hosts need {} (source: {DRIVER_CONTAINER_NVLINK5})",
                what.iter().filter(|w| w.contains("kernel module")).cloned().collect::<Vec<_>>().join(", ")
            )
        });
    }
    OperatorDriver {
        installed,
        version: driver_version,
        repository: driver_repository,
        notes: driver_notes,
    }
}

/// Where NVIDIA's GPU Operator driver container installs NVLSM and waits for `ib_umad` on
/// fourth-generation NVSwitch (NVLink5) boards.
const DRIVER_CONTAINER_NVLINK5: &str = "https://github.com/NVIDIA/gpu-driver-container/blob/06a208ca9747c82b1ba99b76ecdcf2469b0a0207/ubuntu24.04/nvidia-driver (_start_daemons, _ensure_nvlink5_prerequisites) and ubuntu24.04/install.sh (nvlink5_pkgs_install)";

/// The Container Toolkit and DCGM Exporter images the operator deploys: the lock's, else
/// the chart's defaults.
fn operator_images(lock: &Lock, host: &crate::plan::host::HostPlan) -> Vec<OperatorImage> {
    let tag_note = "image tag suffixes (e.g. `-ubuntu22.04`, `-ubi9`) are not verified by the catalog: append the one NVIDIA publishes for this version if the bare tag does not exist";
    let mut images = Vec::new();
    let toolkit_image = locked::container_toolkit_image(lock).and_then(|i| {
        let image = i.image.clone()?;
        let (repository, name) = image.rsplit_once('/')?;
        Some(pinned_operator_image("toolkit", repository, name, &i))
    });
    match (
        locked::host_package(lock, HostPackage::ContainerToolkit),
        toolkit_image,
    ) {
        (Some(p), Some(mut t)) => {
            t.notes.insert(
                0,
                format!(
                    "nvidia-container-toolkit {}, the lock's host package; source: {}",
                    p.version, p.source
                ),
            );
            images.push(t);
        }
        (Some(p), None) => images.push(OperatorImage {
            key: "toolkit".into(),
            version: Some(format!("v{}", p.version)),
            repository: None,
            image: None,
            service_monitor: false,
            notes: vec![
                format!(
                    "nvidia-container-toolkit {}, the lock's host package; source: {}",
                    p.version, p.source
                ),
                tag_note.into(),
            ],
        }),
        (None, _) => images.push(OperatorImage {
            key: "toolkit".into(),
            version: None,
            repository: None,
            image: None,
            service_monitor: false,
            notes: vec![
                "the lock has no nvidia-container-toolkit package: the chart's default is used"
                    .into(),
            ],
        }),
    }
    match &host.exporter {
        // The host plan's reference: the image Packer's dcgm-exporter service runs.
        Some(e) => {
            let mut notes = vec![format!("DCGM Exporter {}; source: {}", e.version, e.source)];
            notes.extend(e.unverified.iter().cloned());
            // The operator pulls `repository/image@version` when `version` is a digest
            // (NVIDIA/gpu-operator, api/nvidia/v1/clusterpolicy_types.go, `imagePath`).
            if e.digest.is_some() {
                notes.push(format!(
                    "tag `{}`, pulled by the digest the lock resolved",
                    e.tag
                ));
            }
            notes.extend(locked::dcgm_exporter(lock).and_then(|p| p.observation));
            images.push(OperatorImage {
                key: "dcgmExporter".into(),
                version: Some(e.digest.clone().unwrap_or_else(|| e.tag.clone())),
                repository: Some(e.repository.clone()),
                image: Some(e.name.clone()),
                service_monitor: true,
                notes,
            });
        }
        None => images.push(OperatorImage {
            key: "dcgmExporter".into(),
            version: None,
            repository: None,
            image: None,
            service_monitor: true,
            notes: vec![
                "the lock has no dcgm-exporter package: the chart's default is used".into(),
            ],
        }),
    }
    images
}

/// An operator component image the lock names (`repository/name:tag`): by its digest
/// where the lock has one (the operator pulls `repository/image@version` when `version`
/// is a `sha256:` digest: NVIDIA/gpu-operator, api/nvidia/v1/clusterpolicy_types.go,
/// `imagePath`), else by its tag.
fn pinned_operator_image(
    key: &str,
    repository: &str,
    name: &str,
    i: &locked::PinnedImage,
) -> OperatorImage {
    let tag = i.tag.clone().unwrap_or_else(|| i.version.clone());
    let mut notes = Vec::new();
    match &i.digest {
        Some(_) => notes.push(format!(
            "`{repository}/{name}:{tag}`, pulled by the digest the lock records"
        )),
        None => notes.push(format!(
            "`{repository}/{name}:{tag}` is pinned by tag only: the lock could not read its digest from the registry (lock with nvcr.io or a `[resolve] registries` mirror reachable)"
        )),
    }
    notes.extend(i.observation.clone());
    OperatorImage {
        key: key.into(),
        version: Some(i.digest.clone().unwrap_or(tag)),
        repository: Some(repository.into()),
        image: Some(name.into()),
        service_monitor: false,
        notes,
    }
}

fn operator_plan(lock: &Lock, common: &Common) -> OperatorPlan {
    let driver = operator_driver(lock, common);
    let host = crate::plan::host::HostPlan::new(lock);
    let images = operator_images(lock, &host);
    let (kernel_module_type, kernel_module_notes) = match &host.kernel_modules {
        Some(k) => (
            Some(k.name.clone()),
            k.because
                .iter()
                .filter(|b| !b.contains("Packer"))
                .cloned()
                .chain([format!("source: {}", k.source)])
                .collect(),
        ),
        None => (None, Vec::new()),
    };
    let (rdma, rdma_notes) = operator_rdma(common, driver.installed);
    OperatorPlan {
        driver_enabled: !driver.installed,
        driver_version: driver.version,
        driver_repository: driver.repository,
        driver_notes: driver.notes,
        kernel_module_type,
        kernel_module_notes,
        rdma,
        rdma_notes,
        images,
        gdrcopy: locked::host_package(lock, HostPackage::Gdrcopy).map(|p| p.version),
    }
}

/// `driver.rdma`: set only when GPUDirect RDMA needs nvidia-peermem (the proprietary
/// kernel modules); DMA-BUF (the open modules) needs no operator setting.
fn operator_rdma(common: &Common, installed: bool) -> (Option<OperatorRdma>, Vec<String>) {
    use crate::plan::network::{GpuDirect, GPU_OPERATOR_RDMA};
    if !(common.rdma && common.nodes > 1) {
        return (None, Vec::new());
    }
    let source = format!("source: {GPU_OPERATOR_RDMA}");
    match common.network.gpudirect {
        Some(GpuDirect::DmaBuf) => (
            None,
            vec![
                "GPUDirect RDMA uses DMA-BUF (the lock's open kernel modules): driver.rdma stays unset, no nvidia-peermem module is loaded".into(),
                source,
            ],
        ),
        Some(GpuDirect::PeerMem) if !installed => (
            Some(OperatorRdma {
                use_host_mofed: true,
                notes: vec![
                    "GPUDirect RDMA through nvidia-peermem (the lock's proprietary kernel modules): it needs the MLNX_OFED/DOCA-OFED driver, which the hosts provide (gpustack's NicClusterPolicy deploys no ofedDriver)".into(),
                    source,
                ],
            }),
            Vec::new(),
        ),
        Some(GpuDirect::PeerMem) => (
            None,
            vec![
                "GPUDirect RDMA through nvidia-peermem (proprietary kernel modules): the hosts' driver must load it (`modprobe nvidia-peermem`), with DOCA-OFED installed".into(),
                source,
            ],
        ),
        None => (
            None,
            vec![
                "the lock records no kernel-module flavour, so gpustack cannot say whether GPUDirect RDMA uses DMA-BUF or nvidia-peermem: driver.rdma stays unset".into(),
                source,
            ],
        ),
    }
}

/// `network/<network>.yaml` and `network/<pool>.yaml` for each secondary network.
fn render_pod_networks(plan: &K8sPlan) -> Result<Vec<RenderedFile>, Error> {
    #[derive(Serialize)]
    struct One<'a> {
        plan: &'a K8sPlan,
        nets: &'a PodNetworksPlan,
        net: &'a crate::plan::network::PodNetwork,
    }
    let mut files = Vec::new();
    let Some(nets) = &plan.pod_networks else {
        return Ok(files);
    };
    for net in &nets.networks {
        let ctx = crate::render::Context::new(&One { plan, nets, net });
        for (file, template) in [(&net.name, "pod-network"), (&net.pool, "ippool")] {
            files.push(RenderedFile::new(
                format!("network/{file}.yaml"),
                crate::render::render_with(&format!("k8s/network/{template}.yaml.j2"), &ctx)?,
            ));
        }
    }
    Ok(files)
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
        let top = crate::render::Context::new(&Top { plan: &plan, ns });
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
