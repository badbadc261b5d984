//! The spec's deployment tables, read by the generators: `[cluster]`, `[network]`, `[image]`,
//! `[train]`, `[serve]`, `[packer]`, `[k8s]`, `[slurm]`, `[storage]`.
//!
//! Every value is validated here, before it can reach a generated file: names and
//! namespaces are DNS labels, registries are plain image references, paths are absolute and
//! free of `..` and shell or template metacharacters, sizes are bounded. Generators still
//! quote every value for their target, so validation and escaping are two independent
//! defences. The lock records these tables inside `[request]`, so `gen` needs only the lock.

pub use crate::core::{Cloud, Fabric, StorageRef};

use serde::Deserialize;
use toml::Spanned;

use crate::core::Layer;
use crate::spec::at::At;

/// `[cluster]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cluster {
    /// Interconnect.
    pub fabric: Fabric,
    /// Nodes in the job.
    pub nodes: u32,
    /// GPUs per node.
    pub gpus_per_node: u32,
    /// CPUs a job may use on each node (`cpus_per_node`); none: the workload plan's
    /// conservative default.
    pub cpus_per_node: Option<u32>,
    /// Memory a job may use on each node, GiB (`memory_gib_per_node`); none: the workload
    /// plan's conservative default.
    pub memory_gib_per_node: Option<u32>,
}

/// `[network]`: the site's network, which only the runtime environment carries (the
/// Kubernetes ConfigMap, Slurm's env file, the VM image's profile), never an image's `ENV`.
/// Which keys a fabric accepts is checked when the spec is read (`gid_index` is RoCE only,
/// `sharp` InfiniBand only, `hcas` and `rdma_resource` need RDMA verbs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Network {
    /// Bootstrap/socket interfaces (`ib0`, `hsn0`), in the order given.
    pub interfaces: Vec<String>,
    /// RDMA devices, each `name` or `name:port` (`mlx5_0`, `mlx5_1:1`), in the order given.
    pub hcas: Vec<String>,
    /// The RoCE GID index (0 to 255); none: NCCL picks the RoCE v2 GID itself.
    pub gid_index: Option<u32>,
    /// The Kubernetes extended resource of the RDMA device plugin
    /// (`rdma/rdma_shared_device_a`); none: that default name.
    pub rdma_resource: Option<String>,
    /// InfiniBand SHARP through NCCL's CollNet plugin.
    pub sharp: bool,
    /// IPv4 subnets (`192.168.4.0/24`), one per `interfaces` entry, of the secondary
    /// networks Kubernetes pods attach on the fabric (IPoIB on InfiniBand, macvlan on RoCE)
    /// instead of the host network; empty: the pods use the host network.
    pub pod_subnets: Vec<String>,
    /// Slingshot: the Kubernetes extended resource of the device plugin that gives pods
    /// the CXI NICs (`beta.hpe.com/cxi`, HPE's CXI Kubernetes device plugin); none:
    /// `gen k8s` refuses a multi-node Slingshot stack.
    pub cxi_resource: Option<String>,
    /// EFA: the EFA interfaces of the instance type each multi-node pod requests
    /// (`vpc.amazonaws.com/efa`, the AWS EFA Kubernetes device plugin); none: `gen k8s`
    /// refuses a multi-node EFA stack.
    pub efa_devices: Option<u32>,
}

/// A Linux interface name as `ip link` accepts it (at most 15 bytes, IFNAMSIZ − 1), limited
/// to letters, digits, `.`, `_` and `-`, not starting with `.` or `-`.
pub fn is_interface(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 15
        && !b[0].is_ascii_punctuation()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
}

/// An RDMA device as NCCL_IB_HCA and UCX_NET_DEVICES name it: a device (`mlx5_0`: lowercase
/// letters, digits, `_`, at most 63 characters, starting with a letter) with an optional
/// `:port` (1 to 255).
pub fn is_hca(s: &str) -> bool {
    let (dev, port) = s.split_once(':').map_or((s, None), |(d, p)| (d, Some(p)));
    let b = dev.as_bytes();
    let dev_ok = !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_');
    dev_ok
        && port.is_none_or(|p| {
            !p.is_empty()
                && p.len() <= 3
                && !p.starts_with('0')
                && p.parse::<u32>().is_ok_and(|n| (1..=255).contains(&n))
        })
}

/// `[image]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    /// Where images are pushed: `registry.example.com/ml`.
    pub registry: String,
    /// Layers to build, bottom first.
    pub layers: Vec<Layer>,
}

/// `[train]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Train {
    /// The training command, one argument per element, as written.
    pub command: Vec<String>,
    /// What the command starts, read once from it (see [`Entry::parse`]).
    pub entry: Entry,
    /// Where the training code is (`workdir`): shared storage mounted as the working
    /// directory on every target; none: the directory the Slurm job is submitted from, and
    /// the code image on Kubernetes.
    pub workdir: Option<StorageRef>,
}

/// What `[train].command` starts, in torchrun's terms: torchrun runs its
/// `training_script` with `python -u`, a module with `python -u -m` (`-m`), or an
/// executable as it is (`--no-python`). A leading interpreter (`python`, `python3`,
/// `python3.12`, with `-u`) is read here and nowhere else: every target's launcher is
/// derived from this value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// A Python script: `python train.py …` or `train.py …`.
    Script {
        /// The script path, relative to the working directory or absolute.
        path: String,
        /// Its arguments.
        args: Vec<String>,
    },
    /// A module: `python -m pkg.train …`.
    Module {
        /// The dotted module name.
        name: String,
        /// Its arguments.
        args: Vec<String>,
    },
    /// Any other program, run as it is once per GPU: `./train.sh …`.
    Executable {
        /// The program.
        program: String,
        /// Its arguments.
        args: Vec<String>,
    },
}

/// Launchers that start one process per GPU themselves: a `[train].command` must not start
/// with one, since gpustack starts torchrun with the cluster's shape.
const LAUNCHERS: [&str; 7] = [
    "torchrun",
    "deepspeed",
    "accelerate",
    "srun",
    "mpirun",
    "mpiexec",
    "horovodrun",
];

fn is_python(word: &str) -> bool {
    let base = word.rsplit('/').next().unwrap_or(word);
    base == "python"
        || base.strip_prefix("python3").is_some_and(|rest| {
            rest.is_empty()
                || rest
                    .strip_prefix('.')
                    .is_some_and(|m| !m.is_empty() && m.bytes().all(|c| c.is_ascii_digit()))
        })
}

impl Entry {
    /// Reads a training command. Errors are (message, hint).
    pub fn parse(command: &[String]) -> Result<Entry, (String, String)> {
        let Some(first) = command.first() else {
            return Err((
                "`command` is empty".into(),
                "like `command = [\"python\", \"train.py\"]`".into(),
            ));
        };
        let base = first.rsplit('/').next().unwrap_or(first);
        if LAUNCHERS.contains(&base)
            || (is_python(first)
                && command
                    .iter()
                    .skip(1)
                    .any(|a| a == "torch.distributed.run" || a == "torch.distributed.launch"))
        {
            return Err((
                format!("`command` starts with the launcher `{}`", base.escape_debug()),
                "gpustack starts torchrun itself, one per node with [cluster].gpus_per_node processes; write the command torchrun runs, like `[\"python\", \"train.py\", \"--lr\", \"3e-4\"]`".into(),
            ));
        }
        if !is_python(first) {
            let rest = command[1..].to_vec();
            return Ok(
                if std::path::Path::new(base)
                    .extension()
                    .is_some_and(|e| e == "py")
                {
                    Entry::Script {
                        path: first.clone(),
                        args: rest,
                    }
                } else {
                    Entry::Executable {
                        program: first.clone(),
                        args: rest,
                    }
                },
            );
        }
        // The interpreter: torchrun runs scripts and modules with `python -u` already, so
        // `-u` is dropped; other interpreter options cannot be passed through torchrun.
        let mut i = 1;
        while command.get(i).is_some_and(|a| a == "-u") {
            i += 1;
        }
        match command.get(i).map(String::as_str) {
            None => Err((
                format!("`command` runs `{}` without a script", first.escape_debug()),
                "name the script or module, like `[\"python\", \"train.py\"]` or `[\"python\", \"-m\", \"pkg.train\"]`".into(),
            )),
            Some("-m") => match command.get(i + 1) {
                Some(m)
                    if !m.is_empty()
                        && m.split('.').all(|p| {
                            !p.is_empty()
                                && !p.starts_with(|c: char| c.is_ascii_digit())
                                && p.chars().all(|c| c.is_alphanumeric() || c == '_')
                        }) =>
                {
                    Ok(Entry::Module {
                        name: m.clone(),
                        args: command[i + 2..].to_vec(),
                    })
                }
                Some(m) => Err((
                    format!("`{}` is not a Python module name", m.escape_debug()),
                    "`-m` takes a dotted module name, like `pkg.train`".into(),
                )),
                None => Err((
                    "`command` ends with `-m`".into(),
                    "name the module, like `[\"python\", \"-m\", \"pkg.train\"]`".into(),
                )),
            },
            Some(opt) if opt.starts_with('-') => Err((
                format!("the interpreter option `{}` cannot be passed through torchrun", opt.escape_debug()),
                "torchrun runs the script with `python -u`; set interpreter options through the environment (e.g. PYTHONOPTIMIZE) or start an executable script".into(),
            )),
            Some(script) => Ok(Entry::Script {
                path: script.to_string(),
                args: command[i + 1..].to_vec(),
            }),
        }
    }

    /// The arguments the program receives.
    pub fn args(&self) -> &[String] {
        match self {
            Entry::Script { args, .. }
            | Entry::Module { args, .. }
            | Entry::Executable { args, .. } => args,
        }
    }
}

/// `[serve]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Serve {
    /// Model path or Hugging Face id.
    pub model: String,
    /// Tensor-parallel size.
    pub tensor_parallel: u32,
    /// Maximum model length.
    pub max_model_len: u32,
    /// Replicas.
    pub replicas: u32,
    /// Nodes per replica (`nodes`, default 1): above one, each replica is a group of nodes
    /// (a LeaderWorkerSet on Kubernetes).
    pub nodes: u32,
    /// Pipeline-parallel size (`pipeline_parallel`, default 1, or `nodes` when only `nodes`
    /// is given).
    pub pipeline_parallel: u32,
}

impl Serve {
    /// GPUs of one replica: tensor × pipeline parallel.
    pub fn gpus(&self) -> u32 {
        self.tensor_parallel.saturating_mul(self.pipeline_parallel)
    }
}

/// How training runs on Kubernetes (`[k8s].training_api`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrainingApi {
    /// Kubeflow Trainer v2: a `TrainJob` referencing a `TrainingRuntime` (the default).
    TrainJob,
    /// The legacy Kubeflow training-operator v1 `PyTorchJob`.
    PyTorchJob,
}

impl TrainingApi {
    /// The spec spelling.
    pub fn name(self) -> &'static str {
        match self {
            TrainingApi::TrainJob => "trainjob",
            TrainingApi::PyTorchJob => "pytorchjob",
        }
    }
}

/// `[packer]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packer {
    /// Clouds to build for.
    pub clouds: Vec<Cloud>,
}

/// `[k8s]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct K8s {
    /// Namespace.
    pub namespace: String,
    /// Kubernetes version targeted, `1.30`.
    pub version: String,
    /// The training API (`training_api`, default `trainjob`).
    pub training_api: TrainingApi,
    /// Kueue `LocalQueue` every workload is submitted to (`queue`).
    pub queue: Option<String>,
    /// Node label of the topology level the training pods must share (`topology`, needs
    /// `queue`).
    pub topology: Option<String>,
    /// The gang scheduler of multi-node workloads without `queue` (`gang`, default
    /// `coscheduling`).
    pub gang: GangScheduler,
    /// The labels of the generated ServiceMonitor/PodMonitor (and the DCGM exporter's),
    /// which the cluster's Prometheus selects them by (`monitor_labels`, default
    /// [`DEFAULT_MONITOR_LABELS`]), sorted by key.
    pub monitor_labels: Vec<(String, String)>,
}

/// `[k8s].namespace` when the key is left out (also without a `[k8s]` table).
pub const DEFAULT_K8S_NAMESPACE: &str = "gpustack";
/// `[k8s].version` when the key is left out: the Kubernetes minor the manifests are
/// validated against (tests/k8s.rs, kubernetes-validate 1.30.0).
pub const DEFAULT_K8S_VERSION: &str = "1.30";

/// kube-prometheus-stack's default selector: its Prometheus selects ServiceMonitors and
/// PodMonitors labelled `release: <the Helm release>`
/// (`serviceMonitorSelectorNilUsesHelmValues: true`; prometheus-community/helm-charts
/// commit 1514b96530e0e85ae1bf89eb256c029d0cf8ce03,
/// `charts/kube-prometheus-stack/templates/prometheus/prometheus.yaml`), with the release
/// named as the chart, as its install commands name it.
pub const DEFAULT_MONITOR_LABELS: [(&str, &str); 1] = [("release", "kube-prometheus-stack")];

/// A Kubernetes label value: empty, or at most 63 characters of letters, digits, `-`, `_`
/// and `.`, starting and ending with a letter or digit.
pub fn is_label_value(s: &str) -> bool {
    let b = s.as_bytes();
    b.is_empty()
        || (b.len() <= 63
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.')))
}

/// Who starts a multi-node workload's pods all together when no Kueue queue admits it
/// (`[k8s].gang`): Kubeflow Trainer's `podGroupPolicy` plugins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GangScheduler {
    /// The scheduler-plugins Coscheduling plugin (the default).
    Coscheduling,
    /// The Volcano scheduler.
    Volcano,
}

impl GangScheduler {
    /// The spec spelling.
    pub fn name(self) -> &'static str {
        match self {
            GangScheduler::Coscheduling => "coscheduling",
            GangScheduler::Volcano => "volcano",
        }
    }
}

/// How Slurm jobs run the stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlurmContainer {
    /// pyxis/enroot (`srun --container-image`).
    Pyxis,
    /// `apptainer exec --nv`.
    Apptainer,
    /// Bare metal, on the VM image's environment.
    None,
}

impl SlurmContainer {
    /// Every container runtime.
    pub const ALL: [SlurmContainer; 3] = [
        SlurmContainer::Pyxis,
        SlurmContainer::Apptainer,
        SlurmContainer::None,
    ];

    /// The spec spelling.
    pub fn name(self) -> &'static str {
        match self {
            SlurmContainer::Pyxis => "pyxis",
            SlurmContainer::Apptainer => "apptainer",
            SlurmContainer::None => "none",
        }
    }
}

/// `[slurm]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slurm {
    /// Partition.
    pub partition: String,
    /// Container runtime.
    pub container: SlurmContainer,
    /// Time limit, `HH:MM:SS` or `D-HH:MM:SS`.
    pub time: String,
    /// The partition's `MaxNodes` (`scontrol show partition`), when the spec declares it:
    /// `check` reports a job that asks for more.
    pub max_nodes: Option<u32>,
    /// The partition's `MaxTime`, in sbatch's time format, when the spec declares it.
    pub max_time: Option<String>,
}

/// `[storage]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Storage {
    /// Datasets, mounted read-only.
    pub datasets: Option<StorageRef>,
    /// Checkpoints, mounted read-write.
    pub checkpoints: Option<StorageRef>,
    /// Models, mounted at `/models` for the vLLM server (read-only when `[serve].model` is
    /// a path there, read-write as the Hugging Face cache when it is a hub id).
    pub models: Option<StorageRef>,
}

/// All deployment tables of a spec.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Deploy {
    /// `[cluster]`.
    pub cluster: Option<Cluster>,
    /// `[network]`.
    pub network: Option<Network>,
    /// `[image]`.
    pub image: Option<Image>,
    /// `[train]`.
    pub train: Option<Train>,
    /// `[serve]`.
    pub serve: Option<Serve>,
    /// `[packer]`.
    pub packer: Option<Packer>,
    /// `[k8s]`.
    pub k8s: Option<K8s>,
    /// `[slurm]`.
    pub slurm: Option<Slurm>,
    /// `[storage]`.
    pub storage: Option<Storage>,
    /// `[resolve]`: where `gpustack lock` resolves digests and package versions.
    pub resolve: Option<crate::spec::resolve::Resolve>,
    /// `[python]`: the user's own Python requirements per layer.
    pub python: crate::spec::python::PythonReqs,
}

type S<T> = Spanned<T>;

/// The deployment tables as written; embedded (flattened by hand) in the spec's and the
/// lock request's wire types.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct DeployWire {
    pub(crate) cluster: Option<S<ClusterWire>>,
    pub(crate) network: Option<S<NetworkWire>>,
    pub(crate) image: Option<S<ImageWire>>,
    pub(crate) train: Option<S<TrainWire>>,
    pub(crate) serve: Option<S<ServeWire>>,
    pub(crate) packer: Option<S<PackerWire>>,
    pub(crate) k8s: Option<S<K8sWire>>,
    pub(crate) slurm: Option<S<SlurmWire>>,
    pub(crate) storage: Option<S<StorageWire>>,
    pub(crate) resolve: Option<S<crate::spec::resolve::ResolveWire>>,
    pub(crate) python: Option<S<crate::spec::python::PythonWire>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ClusterWire {
    fabric: Option<S<String>>,
    nodes: Option<S<i64>>,
    gpus_per_node: Option<S<i64>>,
    cpus_per_node: Option<S<i64>>,
    memory_gib_per_node: Option<S<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NetworkWire {
    interfaces: Option<S<Vec<String>>>,
    hcas: Option<S<Vec<String>>>,
    gid_index: Option<S<i64>>,
    rdma_resource: Option<S<String>>,
    sharp: Option<S<bool>>,
    pod_subnets: Option<S<Vec<String>>>,
    cxi_resource: Option<S<String>>,
    efa_devices: Option<S<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ImageWire {
    registry: Option<S<String>>,
    layers: Option<S<Vec<String>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TrainWire {
    command: Option<S<Vec<String>>>,
    workdir: Option<S<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ServeWire {
    model: Option<S<String>>,
    tensor_parallel: Option<S<i64>>,
    max_model_len: Option<S<i64>>,
    replicas: Option<S<i64>>,
    nodes: Option<S<i64>>,
    pipeline_parallel: Option<S<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PackerWire {
    clouds: Option<S<Vec<String>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct K8sWire {
    namespace: Option<S<String>>,
    version: Option<S<String>>,
    training_api: Option<S<String>>,
    queue: Option<S<String>>,
    topology: Option<S<String>>,
    gang: Option<S<String>>,
    monitor_labels: Option<S<std::collections::BTreeMap<String, String>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SlurmWire {
    partition: Option<S<String>>,
    container: Option<S<String>>,
    time: Option<S<String>>,
    max_nodes: Option<S<i64>>,
    max_time: Option<S<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StorageWire {
    datasets: Option<S<String>>,
    checkpoints: Option<S<String>>,
    models: Option<S<String>>,
}

/// [`K8sWire`] with its required keys present (or placeholders, reported).
struct K8sFields {
    namespace: S<String>,
    version: S<String>,
    training_api: Option<S<String>>,
    queue: Option<S<String>>,
    topology: Option<S<String>>,
    gang: Option<S<String>>,
    monitor_labels: Option<S<std::collections::BTreeMap<String, String>>>,
}

/// [`SlurmWire`] with its required key present (or a placeholder, reported).
struct SlurmFields {
    partition: S<String>,
    container: Option<S<String>>,
    time: Option<S<String>>,
}

/// Where every target mounts `[storage].models`.
pub const MODELS_DIR: &str = "/models";

/// A DNS-1123 label: `[a-z0-9]([a-z0-9-]*[a-z0-9])?`, at most 63 characters.
pub fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

/// A Kubernetes label key: an optional DNS-subdomain prefix and `/`, then a name of at most
/// 63 letters, digits, `-`, `_` and `.`, starting and ending with a letter or digit.
pub fn is_label_key(s: &str) -> bool {
    let (prefix, name) = s.rsplit_once('/').map_or((None, s), |(p, n)| (Some(p), n));
    let nb = name.as_bytes();
    let name_ok = !nb.is_empty()
        && nb.len() <= 63
        && nb[0].is_ascii_alphanumeric()
        && nb[nb.len() - 1].is_ascii_alphanumeric()
        && nb
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'));
    name_ok && prefix.is_none_or(|p| p.len() <= 253 && p.split('.').all(is_dns_label))
}

/// An image registry prefix: `host[:port]/path`, lowercase, no tag or digest.
pub fn is_registry(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 200
        && !s.starts_with(['/', '.', '-', ':'])
        && !s.ends_with('/')
        && !s.contains("//")
        && !s.contains("..")
        && s.bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || b"._-/:".contains(&c))
        && s.split('/').skip(1).all(|seg| !seg.contains(':'))
        && crate::core::url::port_ok(s.split('/').next().unwrap_or(""))
}

/// An absolute path without `..`, whitespace or shell/template metacharacters.
pub fn is_safe_path(s: &str) -> bool {
    s.starts_with('/')
        && s.len() <= 512
        && !s.split('/').any(|seg| seg == "..")
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"/._-+@=,".contains(&c))
}

/// A model: a safe absolute path or a Hugging Face id (`org/name`).
pub fn is_model(s: &str) -> bool {
    is_safe_path(s)
        || (s.len() <= 200
            && s.split('/').count() <= 2
            && !s.starts_with(['.', '-', '/'])
            && !s.contains("..")
            && s.bytes()
                .all(|c| c.is_ascii_alphanumeric() || b"/._-".contains(&c)))
}

/// A Slurm time limit in one of the formats sbatch(1) documents for `--time`: "minutes",
/// "minutes:seconds", "hours:minutes:seconds", "days-hours", "days-hours:minutes" and
/// "days-hours:minutes:seconds" (<https://slurm.schedmd.com/sbatch.html#OPT_time>).
/// Seconds and minutes after the first field are below 60, hours after days below 24. Slurm
/// reads a zero limit as no limit at all, so zero is refused: no limit is written
/// `UNLIMITED` (or `INFINITE`), explicitly.
pub fn is_slurm_time(s: &str) -> bool {
    if matches!(s, "UNLIMITED" | "unlimited" | "INFINITE" | "infinite") {
        return true;
    }
    let num = |p: &str| -> Option<u64> {
        (!p.is_empty() && p.len() <= 6 && p.bytes().all(|c| c.is_ascii_digit()))
            .then(|| p.parse().ok())
            .flatten()
    };
    let fields = |r: &str| -> Option<Vec<u64>> { r.split(':').map(num).collect() };
    let seconds = match s.split_once('-') {
        Some((d, rest)) => {
            let Some(days) = num(d) else { return false };
            let Some(f) = fields(rest) else { return false };
            match f.as_slice() {
                [h] if *h < 24 => ((days * 24 + h) * 60) * 60,
                [h, m] if *h < 24 && *m < 60 => ((days * 24 + h) * 60 + m) * 60,
                [h, m, sec] if *h < 24 && *m < 60 && *sec < 60 => {
                    ((days * 24 + h) * 60 + m) * 60 + sec
                }
                _ => return false,
            }
        }
        None => {
            let Some(f) = fields(s) else { return false };
            match f.as_slice() {
                [m] => m * 60,
                [m, sec] if *sec < 60 => m * 60 + sec,
                [h, m, sec] if *m < 60 && *sec < 60 => (h * 60 + m) * 60 + sec,
                _ => return false,
            }
        }
    };
    seconds > 0
}

/// Parses a storage reference.
pub fn parse_storage(s: &str) -> Result<StorageRef, String> {
    let bad = || {
        format!("`{}` is not a storage location: use nfs://host/path, lustre:/mount/path, hostpath:/path or pvc:name", s.escape_debug())
    };
    if let Some(rest) = s.strip_prefix("nfs://") {
        let (host, path) = rest.split_once('/').ok_or_else(bad)?;
        let path = format!("/{path}");
        let host_ok = !host.is_empty()
            && host.len() <= 253
            && host
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'.' || c == b'-');
        if host_ok && is_safe_path(&path) {
            return Ok(StorageRef::Nfs {
                host: host.to_string(),
                path,
            });
        }
        return Err(bad());
    }
    if let Some(p) = s.strip_prefix("lustre:") {
        return if is_safe_path(p) {
            Ok(StorageRef::Lustre {
                path: p.to_string(),
            })
        } else {
            Err(bad())
        };
    }
    if let Some(p) = s.strip_prefix("hostpath:") {
        if let Some(why) = crate::core::url::host_path_problem(p).filter(|_| is_safe_path(p)) {
            return Err(format!(
                "`{}` cannot be mounted from the nodes: {why}; name a data directory such as `hostpath:/data/ckpt`",
                s.escape_debug()
            ));
        }
        return if is_safe_path(p) {
            Ok(StorageRef::HostPath {
                path: p.to_string(),
            })
        } else {
            Err(bad())
        };
    }
    if let Some(n) = s.strip_prefix("pvc:") {
        return if is_dns_label(n) {
            Ok(StorageRef::Pvc {
                name: n.to_string(),
            })
        } else {
            Err(bad())
        };
    }
    Err(bad())
}

impl Deploy {
    /// Whether the request configures the Packer, Kubernetes and Slurm targets, which
    /// `gpustack lock` then makes sure render: a target with its table, or all three when
    /// the spec has none of their tables (`gpustack gen all` renders each with its
    /// defaults). A spec written for Kubernetes alone is not refused for what only Slurm
    /// cannot do. Docker and Apptainer have no table and are always configured.
    pub fn configures(&self) -> (bool, bool, bool) {
        let none = self.packer.is_none() && self.k8s.is_none() && self.slurm.is_none();
        (
            none || self.packer.is_some(),
            none || self.k8s.is_some(),
            none || self.slurm.is_some(),
        )
    }

    /// What the generators need of several tables together, checked at lock time so that
    /// `gen` never refuses a lock (each at the value's line).
    fn cross_check(
        &self,
        at: &mut At<'_>,
        tp_span: Option<std::ops::Range<usize>>,
        model_span: Option<std::ops::Range<usize>>,
        workdir_span: Option<std::ops::Range<usize>>,
        storage_spans: &[(&'static str, std::ops::Range<usize>)],
    ) {
        if let (Some(serve), Some(span)) = (&self.serve, tp_span.or(model_span.clone())) {
            self.check_serve_fits(serve, span, at);
        }
        self.check_slurm_mounts(at, model_span, workdir_span, storage_spans);
    }

    /// `[serve]` against the nodes it runs on.
    fn check_serve_fits(&self, serve: &Serve, span: std::ops::Range<usize>, at: &mut At<'_>) {
        // A replica of the server spans `nodes` nodes, each running an equal share of its
        // tensor × pipeline parallel GPUs.
        let per_node = self.cluster.as_ref().map_or(8, |c| c.gpus_per_node);
        let gpus = serve.gpus();
        if serve.nodes == 1 && serve.pipeline_parallel == 1 && serve.tensor_parallel > per_node {
            at.fail(
                span.clone(),
                format!(
                    "`tensor_parallel = {}` is more than the {per_node} GPUs of a node",
                    serve.tensor_parallel
                ),
                &format!("lower `tensor_parallel` to at most {per_node} (`[cluster].gpus_per_node`, 8 when there is no [cluster]), or spread the server over nodes (`nodes`, `pipeline_parallel`)"),
            );
        } else if gpus.div_ceil(serve.nodes) > per_node {
            at.fail(
                span.clone(),
                format!("[serve].tensor_parallel × pipeline_parallel = {} × {} = {gpus} GPUs do not fit {} node(s) of {per_node} GPUs", serve.tensor_parallel, serve.pipeline_parallel, serve.nodes),
                "lower `tensor_parallel` to at most [cluster].gpus_per_node, or raise `nodes` and `pipeline_parallel` together",
            );
        } else if serve.nodes > 1 && !gpus.is_multiple_of(serve.nodes) {
            at.fail(
                span.clone(),
                format!(
                    "[serve] needs {gpus} GPUs, which do not split evenly over {} nodes",
                    serve.nodes
                ),
                "make tensor_parallel × pipeline_parallel a multiple of `nodes`",
            );
        }
        if serve.nodes > 1 && self.configures().2 {
            at.fail(
                span.clone(),
                format!("[serve].nodes = {}: a vLLM server across nodes is generated for Kubernetes only (a LeaderWorkerSet), not yet as a Slurm job", serve.nodes),
                "leave [slurm] out of a spec that serves across nodes (and keep [k8s]), or serve on one node (`nodes = 1`)",
            );
        }
        if let Some(c) = &self.cluster {
            if serve.nodes > c.nodes {
                at.fail(
                    span,
                    format!(
                        "[serve].nodes = {} is more than the {} nodes of [cluster]",
                        serve.nodes, c.nodes
                    ),
                    "lower `nodes` or raise [cluster].nodes",
                );
            }
        }
    }

    /// Pyxis and Apptainer mount syntax against the paths `gen slurm` mounts.
    fn check_slurm_mounts(
        &self,
        at: &mut At<'_>,
        model_span: Option<std::ops::Range<usize>>,
        workdir_span: Option<std::ops::Range<usize>>,
        storage_spans: &[(&'static str, std::ops::Range<usize>)],
    ) {
        // Pyxis (`--container-mounts`) and Apptainer (`--bind`) separate mounts with `,`
        // and their fields with `:`; `gen slurm` mounts the storage, the training code's
        // directory and a model path.
        if !self.configures().2 {
            return;
        }
        let container = self
            .slurm
            .as_ref()
            .map_or(SlurmContainer::Pyxis, |s| s.container);
        if container == SlurmContainer::None {
            return;
        }
        let hint = format!(
            "{} separates mounts with `,` and their fields with `:`: use a path without them, or `[slurm].container = \"none\"`",
            container.name()
        );
        let host_path = |r: &StorageRef| match r {
            StorageRef::Nfs { path, .. }
            | StorageRef::Lustre { path }
            | StorageRef::HostPath { path } => Some(path.clone()),
            StorageRef::Pvc { .. } => None,
        };
        let mut check = |what: String, r: Option<&StorageRef>, span: std::ops::Range<usize>| {
            if let Some(path) = r.and_then(host_path) {
                if path.contains([',', ':']) {
                    at.fail(
                        span,
                        format!(
                            "{what} path `{path}` cannot be mounted by {}",
                            container.name()
                        ),
                        &hint,
                    );
                }
            }
        };
        if let Some(st) = &self.storage {
            for (name, span) in storage_spans {
                let r = match *name {
                    "datasets" => st.datasets.as_ref(),
                    "checkpoints" => st.checkpoints.as_ref(),
                    _ => st.models.as_ref(),
                };
                check(format!("`[storage].{name}`"), r, span.clone());
            }
        }
        if let (Some(t), Some(span)) = (&self.train, workdir_span) {
            check("`[train].workdir`".into(), t.workdir.as_ref(), span);
        }
        if let (Some(s), Some(span)) = (&self.serve, model_span) {
            if s.model.starts_with('/') && s.model.contains([',', ':']) {
                at.fail(
                    span,
                    format!(
                        "model path `{}` cannot be mounted by {}",
                        s.model,
                        container.name()
                    ),
                    &hint,
                );
            }
        }
    }
}

/// Checks a list of names: not empty, each `ok`, no repeats.
fn names(
    at: &mut At<'_>,
    v: Option<&S<Vec<String>>>,
    key: &str,
    ok: fn(&str) -> bool,
    what: &str,
    hint: &str,
) -> Vec<String> {
    let Some(v) = v else { return Vec::new() };
    let list = v.get_ref();
    if list.is_empty() || list.len() > 64 {
        at.fail(
            v.span(),
            format!("`[network].{key}` must list 1 to 64 names"),
            &format!("{hint}, or leave `{key}` out"),
        );
        return Vec::new();
    }
    let mut out: Vec<String> = Vec::new();
    for x in list {
        if !ok(x) {
            at.fail(
                v.span(),
                format!("`{}` in `[network].{key}` is not {what}", x.escape_debug()),
                hint,
            );
        } else if out.contains(x) {
            at.fail(
                v.span(),
                format!(
                    "`{}` is listed twice in `[network].{key}`",
                    x.escape_debug()
                ),
                "list each name once",
            );
        } else {
            out.push(x.clone());
        }
    }
    out
}

/// A `[network]` key naming a Kubernetes extended resource (`<domain>/<name>`) of the
/// fabrics in `only`; `None` when it does not apply (reported) or is malformed (reported).
fn extended_resource(
    fabric: Fabric,
    at: &mut At<'_>,
    (key, r): (&str, &S<String>),
    only: &[Fabric],
    why: &str,
    hint: &str,
) -> Option<String> {
    if !applies(fabric, at, key, r.span(), only, why) {
        return None;
    }
    let v = r.get_ref();
    if v.contains('/') && is_label_key(v) && !v.starts_with("kubernetes.io/") {
        return Some(v.clone());
    }
    at.fail(
        r.span(),
        format!(
            "`{}` is not a Kubernetes extended resource name",
            v.escape_debug()
        ),
        hint,
    );
    None
}

/// An integer key within `range`; `None` (reported at its span) outside it.
fn bounded(
    at: &mut At<'_>,
    (key, v): (&str, &S<i64>),
    range: std::ops::RangeInclusive<i64>,
    hint: &str,
) -> Option<u32> {
    let n = *v.get_ref();
    if range.contains(&n) {
        return u32::try_from(n).ok();
    }
    at.fail(
        v.span(),
        format!(
            "`{key}` must be between {} and {}, not {n}",
            range.start(),
            range.end()
        ),
        hint,
    );
    None
}

/// `[network]`, checked against the cluster's fabric (none: `[cluster]` is missing, which
/// is reported here).
fn validate_network(
    n: S<NetworkWire>,
    fabric: Option<Fabric>,
    nodes: u32,
    at: &mut At<'_>,
) -> Network {
    let span = n.span();
    let n = n.into_inner();
    let Some(fabric) = fabric else {
        at.fail(
            span,
            "`[network]` describes the fabric of `[cluster]`, but the spec has no `[cluster]`"
                .into(),
            "add `[cluster]` with `fabric`, `nodes` and `gpus_per_node`, or remove `[network]`",
        );
        return Network::default();
    };
    let interfaces = names(
        at,
        n.interfaces.as_ref(),
        "interfaces",
        is_interface,
        "a network interface name (at most 15 letters, digits, `.`, `_`, `-`)",
        "list the hosts' interface names, like `interfaces = [\"ib0\"]`",
    );
    let mut hcas = Vec::new();
    if let Some(h) = &n.hcas {
        if applies(
            fabric,
            at,
            "hcas",
            h.span(),
            &[Fabric::Infiniband, Fabric::Roce],
            "RDMA devices are read by NCCL's IB verbs transport and UCX",
        ) {
            hcas = names(
                at,
                Some(h),
                "hcas",
                is_hca,
                "an RDMA device (`mlx5_0`, or `mlx5_0:1` with a port from 1 to 255)",
                "list the devices `ibv_devices` shows, like `hcas = [\"mlx5_0\", \"mlx5_1\"]`",
            );
        }
    }
    let gid_index = n.gid_index.as_ref().and_then(|g| {
        let only = (&[Fabric::Roce][..], "the GID index selects a RoCE address");
        applies(fabric, at, "gid_index", g.span(), only.0, only.1).then(|| {
            bounded(at, ("gid_index", g), 0..=255, "use the index `show_gids` lists for the RoCE v2 address, or leave `gid_index` out to let NCCL pick it")
        })?
    });
    let rdma_resource = n.rdma_resource.as_ref().and_then(|r| {
        extended_resource(
            fabric,
            at,
            ("rdma_resource", r),
            &[Fabric::Infiniband, Fabric::Roce],
            "it is the Kubernetes resource of the RDMA shared device plugin",
            "write `<domain>/<name>`, like `rdma/rdma_shared_device_a`",
        )
    });
    let mut sharp = false;
    if let Some(s) = &n.sharp {
        if *s.get_ref()
            && applies(
                fabric,
                at,
                "sharp",
                s.span(),
                &[Fabric::Infiniband],
                "SHARP is in-network reduction on InfiniBand switches",
            )
        {
            sharp = true;
        }
    }
    let pod_subnets = n
        .pod_subnets
        .as_ref()
        .map(|p| pod_subnets(p, fabric, nodes, &interfaces, gid_index, at))
        .unwrap_or_default();
    let cxi_resource = n.cxi_resource.as_ref().and_then(|r| {
        extended_resource(
            fabric,
            at,
            ("cxi_resource", r),
            &[Fabric::Slingshot],
            "it is the Kubernetes resource of the device plugin that gives pods the CXI NICs",
            "write `<domain>/<name>`, like `beta.hpe.com/cxi` (HPE's CXI Kubernetes device plugin)",
        )
    });
    let efa_devices = n.efa_devices.as_ref().and_then(|d| {
        let only = (&[Fabric::Efa][..], "it is the number of EFA interfaces a pod requests from the EFA device plugin");
        applies(fabric, at, "efa_devices", d.span(), only.0, only.1).then(|| {
            bounded(at, ("efa_devices", d), 1..=64, "give the instance type's maximum number of EFA interfaces (AWS: https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa.html#efa-instance-types)")
        })?
    });
    Network {
        interfaces,
        hcas,
        gid_index,
        rdma_resource,
        sharp,
        pod_subnets,
        cxi_resource,
        efa_devices,
    }
}

/// A multi-node EFA or Slingshot stack with `[k8s]` names the device its pods request
/// (`[network].efa_devices`, `[network].cxi_resource`): without it the pods would reach no
/// fabric NIC, and `gen k8s` refuses the lock (`plan::targets::k8s`); here the spec says
/// so at `[k8s]`, before anything is locked. A spec rule only: a lock written before the
/// keys existed still reads (and renders every other target).
pub(crate) fn fabric_device(d: &Deploy, k8s: std::ops::Range<usize>, at: &mut At<'_>) {
    let Some(c) = d.cluster.as_ref().filter(|c| c.nodes > 1) else {
        return;
    };
    let n = d.network.clone().unwrap_or_default();
    match c.fabric {
        Fabric::Efa if n.efa_devices.is_none() => at.fail(
            k8s,
            format!("the Kubernetes pods of this {}-node EFA stack would request no EFA device: `[network].efa_devices` is not set", c.nodes),
            "set `[network].efa_devices` to the instance type's number of EFA interfaces (the column Maximum EFA interfaces of https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa.html#efa-instance-types), which the pods then request from the AWS EFA device plugin; or leave `[k8s]` out",
        ),
        Fabric::Slingshot if n.cxi_resource.is_none() => at.fail(
            k8s,
            format!("the Kubernetes pods of this {}-node Slingshot stack would request no CXI device: `[network].cxi_resource` is not set", c.nodes),
            "set `[network].cxi_resource` to the resource of the device plugin that gives pods the CXI NICs, like `beta.hpe.com/cxi` (HPE's CXI Kubernetes device plugin); or leave `[k8s]` out",
        ),
        _ => {}
    }
}

/// An IPv4 subnet in CIDR form with its host bits zero and a prefix from 8 to 30
/// (`192.168.4.0/24`): the `subnet` of an nv-ipam IPPool.
pub fn is_ipv4_subnet(s: &str) -> bool {
    let Some((a, l)) = s.split_once('/') else {
        return false;
    };
    let (Ok(addr), Ok(len)) = (a.parse::<std::net::Ipv4Addr>(), l.parse::<u32>()) else {
        return false;
    };
    // Canonical text only (no `010.0.0.0`, no `/024`), so the IPPool shows what was written.
    (8..=30).contains(&len)
        && addr.to_string() == a
        && len.to_string() == l
        && u32::from(addr) & (u32::MAX >> len) == 0
}

/// The interface of a pod's default network, which a secondary network cannot take
/// (Multus' usage guide: `eth0`, "Default network interface";
/// <https://github.com/k8snetworkplumbingwg/multus-cni/blob/041e3ce46b5ac0237efd70b6d284869e7c497a73/docs/how-to-use.md>).
pub const POD_INTERFACE: &str = "eth0";

/// Addresses each node takes from a pod subnet (the nv-ipam IPPool's `perNodeBlockSize`):
/// a pod of the stack takes a node's GPUs whole, so a node runs one at a time; the rest
/// leave room for a replaced pod still terminating and for the acceptance job.
pub const POD_BLOCK: u32 = 8;

/// Host addresses of a valid [`is_ipv4_subnet`] (without the network and broadcast
/// addresses).
pub fn subnet_hosts(s: &str) -> u32 {
    let len: u32 = s
        .split_once('/')
        .and_then(|(_, l)| l.parse().ok())
        .unwrap_or(32);
    (1u32 << (32 - len.min(31))) - 2
}

/// `[network].pod_subnets`: RDMA fabrics only, one subnet per interface, and no fixed GID
/// index beside them (a pod's RoCE address has its own).
fn pod_subnets(
    p: &S<Vec<String>>,
    fabric: Fabric,
    nodes: u32,
    interfaces: &[String],
    gid_index: Option<u32>,
    at: &mut At<'_>,
) -> Vec<String> {
    if !applies(
        fabric,
        at,
        "pod_subnets",
        p.span(),
        &[Fabric::Infiniband, Fabric::Roce],
        "they are the IPoIB or macvlan secondary networks of the NVIDIA Network Operator",
    ) {
        return Vec::new();
    }
    let subnets = names(
        at,
        Some(p),
        "pod_subnets",
        is_ipv4_subnet,
        "an IPv4 subnet (`192.168.4.0/24`, host bits zero, prefix /8 to /30)",
        "give one subnet per interface, like `pod_subnets = [\"192.168.4.0/24\"]`",
    );
    if subnets.len() != p.get_ref().len() {
        return Vec::new();
    }
    if subnets.len() != interfaces.len() {
        at.fail(
            p.span(),
            format!(
                "`[network].pod_subnets` has {} subnets for {} interfaces",
                subnets.len(),
                interfaces.len()
            ),
            "give one subnet per `[network].interfaces` entry, in the same order: each interface gets a secondary network of its own",
        );
        return Vec::new();
    }
    if interfaces.iter().any(|i| i == POD_INTERFACE) {
        at.fail(
            p.span(),
            format!("with `[network].pod_subnets`, each interface becomes a pod interface of the same name, but `{POD_INTERFACE}` is the pod's own (Kubernetes' default network)"),
            "list the host interfaces of the fabric NICs (`ip link`: `ib0`, `ens1f0np0`), or leave `pod_subnets` out to keep the host network",
        );
        return Vec::new();
    }
    if nodes < 2 {
        at.fail(
            p.span(),
            "`[network].pod_subnets` is for multi-node jobs, but `[cluster].nodes` is 1".into(),
            "leave `pod_subnets` out: the pods of one node talk over NVLink and shared memory",
        );
        return Vec::new();
    }
    if let Some(small) = subnets.iter().find(|s| subnet_hosts(s) < nodes * POD_BLOCK) {
        at.fail(
            p.span(),
            format!(
                "`{small}` has {} addresses, but {nodes} nodes take {POD_BLOCK} each",
                subnet_hosts(small)
            ),
            "use a larger subnet (a /24 holds 31 nodes)",
        );
        return Vec::new();
    }
    if gid_index.is_some() {
        at.fail(
            p.span(),
            "`[network].gid_index` is the host's RoCE address; a pod on a secondary network has its own, at another index".into(),
            "leave `gid_index` out, so NCCL picks the RoCE v2 GID of the pod's address, or leave `pod_subnets` out to keep the host network",
        );
        return Vec::new();
    }
    subnets
}

/// Whether a `[network]` key applies to the fabric; when not, reported at the key, naming the
/// fabrics it fits.
fn applies(
    fabric: Fabric,
    at: &mut At<'_>,
    key: &str,
    span: std::ops::Range<usize>,
    fits: &[Fabric],
    why: &str,
) -> bool {
    if fits.contains(&fabric) {
        return true;
    }
    at.fail(
        span,
        format!(
            "`[network].{key}` does not apply to fabric `{}`: {why}",
            fabric.name()
        ),
        &format!(
            "remove `{key}`, or set `[cluster].fabric` to {}",
            fits.iter()
                .map(|f| format!("`{}`", f.name()))
                .collect::<Vec<_>>()
                .join(" or ")
        ),
    );
    false
}

impl DeployWire {
    pub(crate) fn validate(self, at: &mut At<'_>) -> Deploy {
        // Where the values that the cross-table checks below look at were written.
        let tp_span = self
            .serve
            .as_ref()
            .and_then(|s| s.get_ref().tensor_parallel.as_ref().map(Spanned::span));
        let model_span = self
            .serve
            .as_ref()
            .and_then(|s| s.get_ref().model.as_ref().map(Spanned::span));
        let workdir_span = self
            .train
            .as_ref()
            .and_then(|t| t.get_ref().workdir.as_ref().map(Spanned::span));
        let storage_spans: Vec<(&'static str, std::ops::Range<usize>)> = self
            .storage
            .as_ref()
            .map(|s| {
                let s = s.get_ref();
                [
                    ("datasets", &s.datasets),
                    ("checkpoints", &s.checkpoints),
                    ("models", &s.models),
                ]
                .into_iter()
                .filter_map(|(n, v)| v.as_ref().map(|v| (n, v.span())))
                .collect()
            })
            .unwrap_or_default();
        let d = self.validate_tables(at);
        d.cross_check(at, tp_span, model_span, workdir_span, &storage_spans);
        d
    }

    fn validate_tables(self, at: &mut At<'_>) -> Deploy {
        let mut d = Deploy::default();
        if let Some(c) = self.cluster {
            d.cluster = Some(validate_cluster(c, at));
        }
        if let Some(n) = self.network {
            let fabric = d.cluster.as_ref().map(|c| c.fabric);
            let nodes = d.cluster.as_ref().map_or(1, |c| c.nodes);
            d.network = Some(validate_network(n, fabric, nodes, at));
        }
        if let Some(i) = self.image {
            d.image = Some(validate_image(i, at));
        }
        if let Some(t) = self.train {
            d.train = Some(validate_train(t, at));
        }
        let mut model_span = None;
        if let Some(s) = self.serve {
            let (serve, span) = validate_serve(s, at);
            model_span = Some(span);
            d.serve = Some(serve);
        }
        if let Some(p) = self.packer {
            d.packer = Some(validate_packer(p, at));
        }
        if let Some(k) = self.k8s {
            d.k8s = Some(validate_k8s(k, at));
        }
        if let Some(s) = self.slurm {
            d.slurm = Some(validate_slurm(s, at));
        }
        if let Some(s) = self.storage {
            d.storage = Some(validate_storage(s, at));
        }
        // A model path is served from `[storage].models`, which every target mounts at
        // `/models`: the path must lie there.
        if let (Some(serve), Some(span)) = (&d.serve, model_span) {
            let models = d.storage.as_ref().and_then(|s| s.models.as_ref());
            if models.is_some()
                && serve.model.starts_with('/')
                && !serve.model.starts_with(&format!("{MODELS_DIR}/"))
            {
                at.fail(
                    span,
                    format!("`model = \"{}\"` is not under {MODELS_DIR}, where [storage].models is mounted", serve.model.escape_debug()),
                    "name the model by its path under /models (`/models/<dir>`), or by a Hugging Face id",
                );
            }
        }
        // `[resolve]` last, as the spec and the lock write it.
        Deploy {
            resolve: self.resolve.map(|r| r.into_inner().validate(at)),
            python: self
                .python
                .map(|p| p.into_inner().validate(at))
                .unwrap_or_default(),
            ..d
        }
    }
}

/// `[cluster]`, validated.
fn validate_cluster(c: S<ClusterWire>, at: &mut At<'_>) -> Cluster {
    let span = c.span();
    let t = ("cluster", &span);
    let c = c.into_inner();
    let fabric_v = at.need(c.fabric, t, "fabric", "\"infiniband\"", "infiniband".into());
    let nodes_v = at.need(c.nodes, t, "nodes", "2", 1);
    let gpus_v = at.need(c.gpus_per_node, t, "gpus_per_node", "8", 8);
    let fabric = match Fabric::ALL
        .into_iter()
        .find(|f| f.name() == fabric_v.get_ref())
    {
        Some(f) => f,
        None => {
            at.fail(
                fabric_v.span(),
                format!("unknown fabric `{}`", fabric_v.get_ref().escape_debug()),
                "`fabric` is one of: infiniband, roce, efa, slingshot, ethernet",
            );
            Fabric::Ethernet
        }
    };
    let nodes = at.count(&nodes_v, "nodes", 4096);
    let gpus_per_node = at.count(&gpus_v, "gpus_per_node", 16);
    let cpus_per_node = c
        .cpus_per_node
        .as_ref()
        .map(|v| at.count(v, "cpus_per_node", 4096));
    let memory_gib_per_node = c
        .memory_gib_per_node
        .as_ref()
        .map(|v| at.count(v, "memory_gib_per_node", 65_536));
    Cluster {
        fabric,
        nodes,
        gpus_per_node,
        cpus_per_node,
        memory_gib_per_node,
    }
}

/// `[image]`, validated.
fn validate_image(i: S<ImageWire>, at: &mut At<'_>) -> Image {
    let span = i.span();
    let i = i.into_inner();
    let registry = at.need(
        i.registry,
        ("image", &span),
        "registry",
        "\"registry.example.com/ml\"",
        String::new(),
    );
    if !registry.get_ref().is_empty() && !is_registry(registry.get_ref()) {
        at.fail(
            registry.span(),
            format!("invalid registry `{}`", registry.get_ref().escape_debug()),
            "write a lowercase registry prefix without tag, like `registry.example.com/ml`",
        );
    }
    let mut layers = Vec::new();
    match &i.layers {
        None => layers.extend(Layer::ALL),
        Some(ls) => {
            for l in ls.get_ref() {
                match Layer::from_name(l) {
                    Some(x) if !layers.contains(&x) => layers.push(x),
                    Some(_) => {}
                    None => at.fail(
                        ls.span(),
                        format!("unknown layer `{}`", l.escape_debug()),
                        "layers are: base, framework, inference, training, validate",
                    ),
                }
            }
            layers.sort();
            if !layers.contains(&Layer::Base) {
                layers.insert(0, Layer::Base);
            }
        }
    }
    Image {
        registry: registry.into_inner(),
        layers,
    }
}

/// `[train]`, validated.
fn validate_train(t: S<TrainWire>, at: &mut At<'_>) -> Train {
    let span = t.span();
    let t = t.into_inner();
    let missing = t.command.is_none();
    let command = at.need(
        t.command,
        ("train", &span),
        "command",
        "[\"python\", \"train.py\"]",
        Vec::new(),
    );
    let cmd = command.get_ref();
    if !missing && (cmd.is_empty() || cmd.len() > 256) {
        at.fail(
            command.span(),
            "`command` must list 1 to 256 arguments".into(),
            "like `command = [\"python\", \"train.py\"]`",
        );
    }
    if let Some(bad) = cmd
        .iter()
        .find(|a| a.is_empty() || a.len() > 1024 || a.chars().any(|c| c.is_control()))
    {
        at.fail(
            command.span(),
            format!(
                "command argument `{}` is empty, too long or contains control characters",
                bad.escape_debug()
            ),
            "each argument is passed as one word; newlines and control characters are not allowed",
        );
    }
    let entry = match Entry::parse(cmd) {
        Ok(e) => e,
        // Reported above.
        Err(_) if missing => Entry::Executable {
            program: String::new(),
            args: Vec::new(),
        },
        Err((msg, hint)) => {
            at.fail(command.span(), msg, &hint);
            Entry::Executable {
                program: String::new(),
                args: Vec::new(),
            }
        }
    };
    let workdir = t.workdir.as_ref().and_then(|w| match parse_storage(w.get_ref()) {
            Ok(StorageRef::Pvc { .. }) => {
                at.fail(
                    w.span(),
                    format!("`workdir = \"{}\"`: a PersistentVolumeClaim cannot be mounted by Slurm jobs", w.get_ref().escape_debug()),
                    "use storage every node reaches (`nfs://host/path`, `lustre:/path`, `hostpath:/path`), or leave `workdir` out: Slurm then uses the directory the job is submitted from and Kubernetes the code image",
                );
                None
            }
            Ok(r) => Some(r),
            Err(e) => {
                at.fail(w.span(), e, "like `workdir = \"lustre:/lustre/home/me/project\"`");
                None
            }
        });
    Train {
        command: command.into_inner(),
        entry,
        workdir,
    }
}

/// `[serve]`, validated.
fn validate_serve(s: S<ServeWire>, at: &mut At<'_>) -> (Serve, std::ops::Range<usize>) {
    let span = s.span();
    let s = s.into_inner();
    let model = at.need(
        s.model,
        ("serve", &span),
        "model",
        "\"meta-llama/Llama-3.1-8B\"",
        "model".into(),
    );
    let model_span = model.span();
    if !is_model(model.get_ref()) {
        at.fail(model.span(), format!("invalid model `{}`", model.get_ref().escape_debug()), "use an absolute path like `/models/llama-3-70b` or a Hugging Face id like `meta-llama/Llama-3.1-8B`");
    }
    let tp = s
        .tensor_parallel
        .as_ref()
        .map_or(1, |v| at.count(v, "tensor_parallel", 16));
    let len = s
        .max_model_len
        .as_ref()
        .map_or(4096, |v| at.count(v, "max_model_len", 10_000_000));
    let replicas = s
        .replicas
        .as_ref()
        .map_or(1, |v| at.count(v, "replicas", 1000));
    let nodes = s.nodes.as_ref().map_or(1, |v| at.count(v, "nodes", 64));
    let pp = s
        .pipeline_parallel
        .as_ref()
        .map_or(nodes, |v| at.count(v, "pipeline_parallel", 64));
    (
        Serve {
            model: model.into_inner(),
            tensor_parallel: tp,
            max_model_len: len,
            replicas,
            nodes,
            pipeline_parallel: pp,
        },
        model_span,
    )
}

/// `[packer]`, validated.
fn validate_packer(p: S<PackerWire>, at: &mut At<'_>) -> Packer {
    let span = p.span();
    let p = p.into_inner();
    let missing = p.clouds.is_none();
    let p_clouds = at.need(
        p.clouds,
        ("packer", &span),
        "clouds",
        "[\"aws\"]",
        Vec::new(),
    );
    let mut clouds = Vec::new();
    for c in p_clouds.get_ref() {
        match Cloud::ALL.into_iter().find(|x| x.name() == c) {
            Some(x) if !clouds.contains(&x) => clouds.push(x),
            Some(_) => {}
            None => at.fail(
                p_clouds.span(),
                format!("unknown cloud `{}`", c.escape_debug()),
                "clouds are: aws, gcp, azure, qemu",
            ),
        }
    }
    if !missing && clouds.is_empty() && p_clouds.get_ref().is_empty() {
        at.fail(
            p_clouds.span(),
            "`clouds` is empty".into(),
            "list at least one of: aws, gcp, azure, qemu",
        );
    }
    clouds.sort();
    Packer { clouds }
}

/// `[k8s]`, validated.
fn validate_k8s(k: S<K8sWire>, at: &mut At<'_>) -> K8s {
    let span = k.span();
    let k = k.into_inner();
    let k = K8sFields {
        namespace: k
            .namespace
            .unwrap_or_else(|| S::new(span.clone(), DEFAULT_K8S_NAMESPACE.into())),
        version: k
            .version
            .unwrap_or_else(|| S::new(span.clone(), DEFAULT_K8S_VERSION.into())),
        training_api: k.training_api,
        queue: k.queue,
        topology: k.topology,
        gang: k.gang,
        monitor_labels: k.monitor_labels,
    };
    if !is_dns_label(k.namespace.get_ref()) {
        at.fail(
            k.namespace.span(),
            format!(
                "invalid namespace `{}`",
                k.namespace.get_ref().escape_debug()
            ),
            "a namespace is a DNS label: lowercase letters, digits and `-`, at most 63",
        );
    }
    let v = k.version.get_ref();
    let ok = v
        .strip_prefix("1.")
        .is_some_and(|m| !m.is_empty() && m.len() <= 2 && m.bytes().all(|c| c.is_ascii_digit()));
    if !ok {
        at.fail(
            k.version.span(),
            format!("invalid Kubernetes version `{}`", v.escape_debug()),
            "write the minor version, like `1.30`",
        );
    }
    if matches!(
        k.namespace.get_ref().as_str(),
        "default" | "kube-system" | "kube-public" | "kube-node-lease"
    ) {
        at.fail(
                k.namespace.span(),
                format!("namespace `{}` is a system namespace", k.namespace.get_ref()),
                "name a namespace of its own, like `llm`: gen k8s labels it with the Pod Security level its workloads need",
            );
    }
    let training_api = match k.training_api.as_ref().map(|t| t.get_ref().as_str()) {
        None | Some("trainjob") => TrainingApi::TrainJob,
        Some("pytorchjob") => TrainingApi::PyTorchJob,
        Some(other) => {
            let t = k.training_api.as_ref().map(S::span).unwrap_or_default();
            at.fail(
                    t,
                    format!("unknown training API `{}`", other.escape_debug()),
                    "`training_api` is `trainjob` (Kubeflow Trainer v2) or `pytorchjob` (training-operator v1)",
                );
            TrainingApi::TrainJob
        }
    };
    let gang = match k.gang.as_ref().map(|t| t.get_ref().as_str()) {
        None | Some("coscheduling") => GangScheduler::Coscheduling,
        Some("volcano") => GangScheduler::Volcano,
        Some(other) => {
            let t = k.gang.as_ref().map(S::span).unwrap_or_default();
            at.fail(
                t,
                format!("unknown gang scheduler `{}`", other.escape_debug()),
                "`gang` is `coscheduling` (the scheduler-plugins Coscheduling plugin) or `volcano` (the Volcano scheduler): Kubeflow Trainer's podGroupPolicy plugins",
            );
            GangScheduler::Coscheduling
        }
    };
    let mut label = |v: &Option<S<String>>, what: &str, ok: fn(&str) -> bool, hint: &str| {
        let v = v.as_ref()?;
        if !ok(v.get_ref()) {
            at.fail(
                v.span(),
                format!("invalid {what} `{}`", v.get_ref().escape_debug()),
                hint,
            );
        }
        Some(v.get_ref().clone())
    };
    let queue = label(
        &k.queue,
        "queue",
        is_dns_label,
        "a LocalQueue name is a DNS label: lowercase letters, digits and `-`",
    );
    let topology = label(
        &k.topology,
        "topology label",
        is_label_key,
        "a node label key, like `cloud.provider.com/topology-block`",
    );
    let monitor_labels = monitor_labels(k.monitor_labels.as_ref(), at);
    K8s {
        namespace: k.namespace.into_inner(),
        version: k.version.into_inner(),
        training_api,
        queue,
        topology,
        gang,
        monitor_labels,
    }
}

/// [`DEFAULT_MONITOR_LABELS`] as the owned pairs [`K8s::monitor_labels`] holds.
fn default_monitor_labels() -> Vec<(String, String)> {
    DEFAULT_MONITOR_LABELS
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect()
}

/// The monitor labels of a lock's `[k8s]`, or the default without the table: what the
/// generated monitors carry and what `check` expects them to carry.
#[must_use]
pub fn monitor_labels_of(k8s: Option<&K8s>) -> Vec<(String, String)> {
    k8s.map_or_else(default_monitor_labels, |k| k.monitor_labels.clone())
}

/// `[k8s].monitor_labels`, validated; the kube-prometheus-stack default when absent.
fn monitor_labels(
    labels: Option<&S<std::collections::BTreeMap<String, String>>>,
    at: &mut At<'_>,
) -> Vec<(String, String)> {
    match labels {
        None => default_monitor_labels(),
        Some(m) => {
            if m.get_ref().is_empty() {
                at.fail(
                    m.span(),
                    "`monitor_labels` is empty: the Prometheus would select the monitors by no label".into(),
                    "give the labels your Prometheus's serviceMonitorSelector/podMonitorSelector matches, like `monitor_labels = { release = \"kube-prometheus-stack\" }`, or leave the key out for that default",
                );
            }
            for (key, value) in m.get_ref() {
                if !is_label_key(key) || !is_label_value(value) {
                    at.fail(
                        m.span(),
                        format!(
                            "`{} = \"{}\"` in `monitor_labels` is not a Kubernetes label",
                            key.escape_debug(),
                            value.escape_debug()
                        ),
                        "a label key is `[prefix/]name` (letters, digits, `-`, `_`, `.`), a value at most 63 such characters",
                    );
                }
            }
            m.get_ref().clone().into_iter().collect()
        }
    }
}

/// `[slurm]`, validated.
fn validate_slurm(s: S<SlurmWire>, at: &mut At<'_>) -> Slurm {
    let span = s.span();
    let s = s.into_inner();
    let (max_nodes, max_time) = (s.max_nodes, s.max_time);
    let missing = s.partition.is_none();
    let s = SlurmFields {
        partition: at.need(
            s.partition,
            ("slurm", &span),
            "partition",
            "\"gpu\"",
            "gpu".into(),
        ),
        container: s.container,
        time: s.time,
    };
    let p = s.partition.get_ref();
    // A leading `-` would be read as an option of sbatch or srun.
    let plain = p
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-');
    let leads = p.bytes().next().is_some_and(|c| c.is_ascii_alphanumeric());
    if !(p.is_empty() || (plain && leads)) {
        at.fail(
            s.partition.span(),
            format!(
                "invalid partition `{}`",
                s.partition.get_ref().escape_debug()
            ),
            "letters, digits, `-` and `_` only, starting with a letter or digit",
        );
    }
    let container = match s.container.as_ref().map(|c| c.get_ref().as_str()) {
        None | Some("pyxis") => SlurmContainer::Pyxis,
        Some("apptainer") => SlurmContainer::Apptainer,
        Some("none") => SlurmContainer::None,
        Some(other) => {
            let span = s.container.as_ref().map(Spanned::span).unwrap_or_default();
            at.fail(
                span,
                format!("unknown container runtime `{}`", other.escape_debug()),
                "`container` is one of: pyxis, apptainer, none",
            );
            SlurmContainer::None
        }
    };
    let time = s
        .time
        .as_ref()
        .map_or_else(|| "24:00:00".to_string(), |t| t.get_ref().clone());
    if let Some(t) = &s.time {
        if !is_slurm_time(t.get_ref()) {
            at.fail(
                    t.span(),
                    format!("invalid time limit `{}`", t.get_ref().escape_debug()),
                    "write one of sbatch's formats: `MM`, `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM` or `D-HH:MM:SS`, like `48:00:00` (minutes and seconds below 60, hours after days below 24); a zero limit is no limit in Slurm: write `UNLIMITED` if that is meant",
                );
        }
    }
    if !missing && (s.partition.get_ref().is_empty() || s.partition.get_ref().len() > 64) {
        at.fail(
            s.partition.span(),
            "`partition` must be 1 to 64 characters".into(),
            "name the Slurm partition the jobs run in, like `partition = \"gpu\"`",
        );
    }
    let max_nodes = max_nodes.and_then(|n| {
        let v = *n.get_ref();
        if (1..=1_000_000).contains(&v) {
            u32::try_from(v).ok()
        } else {
            at.fail(
                n.span(),
                format!("`max_nodes` must be a positive number of nodes, not {v}"),
                "give the partition's MaxNodes as `scontrol show partition` prints it, like `max_nodes = 64`, or leave it out",
            );
            None
        }
    });
    let max_time = max_time.and_then(|t| {
        if is_slurm_time(t.get_ref())
            && !["unlimited", "infinite"]
                .iter()
                .any(|u| t.get_ref().eq_ignore_ascii_case(u))
        {
            Some(t.into_inner())
        } else {
            at.fail(
                t.span(),
                format!("invalid partition time limit `{}`", t.get_ref().escape_debug()),
                "give the partition's MaxTime as `scontrol show partition` prints it, like `max_time = \"2-00:00:00\"`, or leave it out for no limit",
            );
            None
        }
    });
    Slurm {
        partition: s.partition.into_inner(),
        container,
        time,
        max_nodes,
        max_time,
    }
}

/// `[storage]`, validated.
fn validate_storage(s: S<StorageWire>, at: &mut At<'_>) -> Storage {
    let s = s.into_inner();
    let mut one = |v: &Option<S<String>>| -> Option<StorageRef> {
        let v = v.as_ref()?;
        match parse_storage(v.get_ref()) {
            Ok(r) => Some(r),
            Err(e) => {
                at.fail(
                        v.span(),
                        e,
                        "like `nfs://nfs.example.com/datasets`, `lustre:/lustre/ckpt`, `hostpath:/data` or `pvc:datasets`",
                    );
                None
            }
        }
    };
    Storage {
        datasets: one(&s.datasets),
        checkpoints: one(&s.checkpoints),
        models: one(&s.models),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurm_time_is_sbatch_s_grammar() {
        // sbatch(1), --time: "minutes", "minutes:seconds", "hours:minutes:seconds",
        // "days-hours", "days-hours:minutes" and "days-hours:minutes:seconds".
        for ok in [
            "30",
            "90",
            "30:15",
            "48:00:00",
            "1:30:00",
            "2-0",
            "2-12",
            "2-12:30",
            "2-12:30:15",
            "0:30",
            "UNLIMITED",
            "infinite",
        ] {
            assert!(is_slurm_time(ok), "{ok}");
        }
        for bad in [
            "0",
            "00:00",
            "0:0:0",
            "0-0",
            "0-00:00:00",
            "99:99:99",
            "24:60:00",
            "1:00:60",
            "1-24",
            "1-1:60",
            "1-1:1:60",
            "",
            "-1",
            "1-",
            ":30",
            "1::2",
            "1:2:3:4",
            "1-2-3",
            "forever",
            "1h",
            " 30",
            "1234567",
            "+5",
        ] {
            assert!(!is_slurm_time(bad), "{bad}");
        }
    }

    #[test]
    fn validators() {
        assert!(is_registry("registry.example.com/ml"));
        assert!(is_registry("localhost:5000/team/ml"));
        for bad in [
            "",
            "Registry.io/x",
            "r.io/x:tag",
            "r.io/x\n",
            "r.io/$(id)",
            "r.io//x",
            "/x",
            "r.io/../x",
        ] {
            assert!(!is_registry(bad), "{bad:?}");
        }
        assert!(is_safe_path("/models/llama-3-70b"));
        for bad in [
            "models", "/a/../b", "/a b", "/a;rm", "/a$(x)", "/a\n", "/{{x}}", "/a'b",
        ] {
            assert!(!is_safe_path(bad), "{bad:?}");
        }
        assert!(is_model("meta-llama/Llama-3.1-8B"));
        assert!(!is_model("a/b/c"));
        assert!(
            is_slurm_time("48:00:00") && is_slurm_time("2-00:00:00") && !is_slurm_time("forever")
        );
        assert_eq!(
            parse_storage("nfs://nfs.example.com/datasets")
                .unwrap()
                .to_string(),
            "nfs://nfs.example.com/datasets"
        );
        assert!(parse_storage("lustre:/lustre/scratch/ckpt").is_ok());
        assert!(parse_storage("pvc:ckpt").is_ok());
        for bad in [
            "nfs://host",
            "lustre:rel",
            "s3://x/y",
            "pvc:Bad_Name",
            "hostpath:/x;y",
        ] {
            assert!(parse_storage(bad).is_err(), "{bad}");
        }
    }
}
