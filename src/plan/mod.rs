//! Plans: per-target view models derived from the lock alone (never the catalog), holding
//! every string a template prints. Templates only lay them out (`crate::render`).
//!
//! [`Common`] is what every target shares, so the values agree across files by
//! construction: the content-addressed image references, the NCCL/fabric environment, the
//! storage mounts, the expected bandwidth, the component versions.

pub mod cluster;
pub mod host;
pub mod install;
pub mod judge;
pub(crate) mod locked;
pub mod network;
pub mod python;
pub mod targets;
pub mod torch_build;
pub mod workload;

pub use targets::{apptainer, docker, k8s, packer, slurm};

use std::collections::BTreeMap;

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::catalog::hex;
use crate::core::{Component, Layer};
use crate::core::{Fabric, StorageRef};
use crate::error::{Diagnostic, Error, Stage};
use crate::lock::Lock;
use crate::render::RenderedFile;

/// Where AWS's EFA installer puts libfabric (with the EFA provider).
pub const EFA_LIBFABRIC: &str = "/opt/amazon/efa";
/// Where AWS's EFA installer puts Open MPI.
pub const EFA_OPENMPI: &str = "/opt/amazon/openmpi";

/// The directory of HPC-X's tarball that holds SHARP (HPC-X's `HPCX_SHARP_DIR`), copied
/// under the fabric prefix when the lock has the NCCL SHARP plugin (`[network].sharp`).
pub const SHARP_DIR: &str = "sharp";

/// Where SHARP's libraries and headers are installed: `/opt/fabric/sharp`.
pub(crate) fn sharp_prefix(fabric_prefix: &str) -> String {
    format!("{fabric_prefix}/{SHARP_DIR}")
}

/// Registry used when the spec has no `[image]` table.
pub const DEFAULT_REGISTRY: &str = "localhost/gpustack";

/// Whether the spec the lock was made from declares `target`'s deployment: Docker and
/// Apptainer always, Packer, Kubernetes and Slurm when their table (`[packer]`, `[k8s]`,
/// `[slurm]`) is present (not merely rendered by default, as [`configured`] renders all
/// three for a spec with none). The images a cluster must pull are judged for these.
#[must_use]
pub fn declared(lock: &Lock, target: Target) -> bool {
    let d = &lock.request.deploy;
    match target {
        Target::Docker | Target::Apptainer => true,
        Target::Packer => d.packer.is_some(),
        Target::K8s => d.k8s.is_some(),
        Target::Slurm => d.slurm.is_some(),
    }
}

/// Why the images of `targets` cannot be pulled by a cluster, when they cannot: the lock
/// names no `[image].registry`, so the Kubernetes pods and the Slurm scripts refer to
/// `localhost/gpustack/…`, which is each node's own image store. `gen` still writes them
/// (a single machine that built the images runs them; the Dockerfiles need no registry)
/// and says so loudly for each target named on its command line or configured by the spec
/// (`gen all` of a spec without `[k8s]` writes its sketch of the manifests without the
/// warning); `gpustack check` repeats it as `unpullable-image` for the deployments the
/// spec configures.
#[must_use]
pub fn unpullable_images(lock: &Lock, targets: &[Target]) -> Option<String> {
    let pulls: Vec<&str> = targets
        .iter()
        .filter(|t| matches!(t, Target::K8s | Target::Slurm))
        .map(|t| t.name())
        .collect();
    if lock.request.deploy.image.is_some() || pulls.is_empty() {
        return None;
    }
    Some(format!(
        "the lock names no image registry, so the {} files refer to {DEFAULT_REGISTRY}/…, which a cluster's nodes cannot pull (ImagePullBackOff, pyxis import failures); set `[image].registry` in the spec, re-lock, push the images there and regenerate",
        pulls.join(" and ")
    ))
}

/// The targets `gpustack gen` knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Target {
    /// `out/docker/`: Dockerfile, bake file, requirements.
    Docker,
    /// `out/apptainer/`: the `.def` file.
    Apptainer,
    /// `out/packer/`.
    Packer,
    /// `out/k8s/`.
    K8s,
    /// `out/slurm/`.
    Slurm,
}

impl Target {
    /// Every target, in `gen all` order.
    pub const ALL: [Target; 5] = [
        Target::Docker,
        Target::Apptainer,
        Target::Packer,
        Target::K8s,
        Target::Slurm,
    ];

    /// The name on the command line and the output directory.
    pub fn name(self) -> &'static str {
        match self {
            Target::Docker => "docker",
            Target::Apptainer => "apptainer",
            Target::Packer => "packer",
            Target::K8s => "k8s",
            Target::Slurm => "slurm",
        }
    }

    /// Parses a target name.
    pub fn from_name(s: &str) -> Option<Target> {
        Target::ALL.into_iter().find(|t| t.name() == s)
    }
}

/// What `gpustack gen all` renders from a lock: the configured targets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Configured {
    /// Rendered: Docker and Apptainer always, and the deployment targets the request
    /// configures ([`crate::spec::deploy::Deploy::configures`]: each whose table is
    /// present, or all three when the spec has none of their tables).
    pub render: Vec<Target>,
    /// Configured by default (its table absent) but unable to express the request's
    /// storage: left out, with why, in one line.
    pub skipped: Vec<(Target, String)>,
}

/// The targets of `gpustack gen all` (and of the check `gpustack lock` makes that `gen`
/// will render them), in [`Target::ALL`] order.
///
/// ```
/// use gpustack::plan::{configured, Target};
/// let text = std::fs::read_to_string("lockfiles/h100-ib-train-serve.lock").unwrap();
/// let lock = gpustack::Lock::parse("gpustack.lock", &text)?;
/// assert!(configured(&lock).render.contains(&Target::Docker));
/// # Ok::<(), gpustack::Error>(())
/// ```
pub fn configured(lock: &Lock) -> Configured {
    let deploy = &lock.request.deploy;
    let (packer, k8s, slurm) = deploy.configures();
    let mut out = Configured::default();
    for t in Target::ALL {
        let (wanted, table) = match t {
            Target::Docker | Target::Apptainer => (true, true),
            Target::Packer => (packer, deploy.packer.is_some()),
            Target::K8s => (k8s, deploy.k8s.is_some()),
            Target::Slurm => (slurm, deploy.slurm.is_some()),
        };
        if !wanted {
            continue;
        }
        match (table, unexpressible_storage(lock, t)) {
            (false, Some(why)) => out.skipped.push((t, why)),
            _ => out.render.push(t),
        }
    }
    out
}

/// Why `target` cannot express the request's storage, if it cannot: Slurm jobs mount
/// what the nodes mount, so a Kubernetes claim for the vLLM server's models has no Slurm
/// form (`slurm::SlurmPlan` refuses it).
fn unexpressible_storage(lock: &Lock, target: Target) -> Option<String> {
    let deploy = &lock.request.deploy;
    let models = deploy.storage.as_ref()?.models.as_ref()?;
    match (target, models, &deploy.serve) {
        (Target::Slurm, StorageRef::Pvc { .. }, Some(_)) => Some(format!(
            "`[storage].models = \"{models}\"` is a Kubernetes claim, which Slurm jobs cannot mount (add a `[slurm]` table and storage the nodes mount to generate it)"
        )),
        _ => None,
    }
}

/// Renders every file of `target` from `lock`, in memory. Reads the lock only (never the
/// catalog), so a committed `gpustack.lock` renders the same files anywhere.
///
/// ```
/// use gpustack::plan::{generate, Target};
/// let text = std::fs::read_to_string("lockfiles/h100-ib-train-serve.lock").unwrap();
/// let lock = gpustack::Lock::parse("gpustack.lock", &text)?;
/// let files = generate(&lock, Target::K8s)?;
/// let job = files.iter().find(|f| f.path == "trainjob.yaml").unwrap();
/// assert!(job.contents.contains("kind: TrainJob"));
/// # Ok::<(), gpustack::Error>(())
/// ```
pub fn generate(lock: &Lock, target: Target) -> Result<Vec<RenderedFile>, Error> {
    generate_with(lock, &Common::new(lock)?, target)
}

/// Renders several targets, deriving the shared values ([`Common`]) once; the result is in
/// the order of `targets`.
pub fn generate_many(
    lock: &Lock,
    targets: &[Target],
) -> Result<Vec<(Target, Vec<RenderedFile>)>, Error> {
    let common = Common::new(lock)?;
    targets
        .iter()
        .map(|t| Ok((*t, generate_with(lock, &common, *t)?)))
        .collect()
}

/// Renders `target` with shared values already derived by [`Common::new`]: what
/// [`generate_many`] does per target, for callers that render targets one at a time.
pub fn generate_with(
    lock: &Lock,
    common: &Common,
    target: Target,
) -> Result<Vec<RenderedFile>, Error> {
    let files = match target {
        Target::Docker => docker::render(lock, common),
        Target::Apptainer => apptainer::render(lock, common),
        Target::Packer => packer::render(lock, common),
        Target::K8s => k8s::render(lock, common),
        Target::Slurm => slurm::render(lock, common),
    }?;
    // Every path stays inside the target's directory, whatever the lock holds: checked
    // here, before anything is written, so a bad path fails the whole run.
    if let Some(f) = files
        .iter()
        .find(|f| !crate::core::names::relative_ok(&f.path))
    {
        return Err(Diagnostic::new(
            Stage::Generate,
            format!(
                "refusing to generate `{}`: it would land outside the `{}` directory",
                f.path.escape_debug(),
                target.name()
            ),
        )
        .hint("the lock's names must be plain; regenerate it with `gpustack lock`")
        .into());
    }
    Ok(files)
}

/// An environment variable every target sets.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct EnvVar {
    /// `NCCL_IB_DISABLE`.
    pub name: String,
    /// `0`.
    pub value: String,
    /// Where the value is documented.
    pub source: String,
}

/// What backs a [`Mount`]; serialized as the templates compare it: `nfs`, `lustre`,
/// `hostpath`, `pvc`.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum MountKind {
    /// An NFS export, mounted inline.
    Nfs,
    /// A Lustre file system mounted on every node.
    Lustre,
    /// A directory on every node.
    HostPath,
    /// An existing PersistentVolumeClaim.
    Pvc,
}

impl MountKind {
    /// `nfs`, `lustre`, `hostpath` or `pvc`: the spec's scheme.
    pub fn name(self) -> &'static str {
        match self {
            MountKind::Nfs => "nfs",
            MountKind::Lustre => "lustre",
            MountKind::HostPath => "hostpath",
            MountKind::Pvc => "pvc",
        }
    }
}

/// A storage location mounted into every workload.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Mount {
    /// `datasets` or `checkpoints`.
    pub name: String,
    /// NFS, Lustre, a host path or a PVC.
    pub kind: MountKind,
    /// NFS server.
    pub server: Option<String>,
    /// Path on the host or the NFS export (none for a PVC).
    pub host_path: Option<String>,
    /// PVC claim name.
    pub claim: Option<String>,
    /// Where workloads see it: `/data/datasets`, `/data/checkpoints`.
    pub container_path: String,
    /// Datasets are read-only.
    pub read_only: bool,
}

impl Mount {
    /// The mount of storage `r` named `name` at `container_path`.
    pub fn of(name: &str, r: &StorageRef, container_path: String, read_only: bool) -> Mount {
        let (kind, server, host_path, claim) = match r {
            StorageRef::Nfs { host, path } => {
                (MountKind::Nfs, Some(host.clone()), Some(path.clone()), None)
            }
            StorageRef::Lustre { path } => (MountKind::Lustre, None, Some(path.clone()), None),
            StorageRef::HostPath { path } => (MountKind::HostPath, None, Some(path.clone()), None),
            StorageRef::Pvc { name } => (MountKind::Pvc, None, None, Some(name.clone())),
        };
        Mount {
            name: name.into(),
            kind,
            server,
            host_path,
            claim,
            container_path,
            read_only,
        }
    }
}

/// The expected nccl-tests figure for one scope.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Expected {
    /// `intra-node` or `inter-node`.
    pub scope: String,
    /// GB/s, as published.
    pub busbw_gbps: String,
    /// The job shape of the figure: `8x8`.
    pub shape: String,
    /// `nvlink`, `infiniband`, ….
    pub fabric: String,
    /// Message size of the figure, where stated.
    pub size: Option<String>,
    /// The test that produced it.
    pub test: String,
    /// `with SHARP` / `without SHARP`, where the source says (InfiniBand).
    pub sharp: Option<String>,
    /// Where it is published.
    pub source: String,
}

/// What every target shares. LOAD-BEARING: templates of every target print these fields;
/// renaming one is a template change.
#[derive(Clone, Debug, Serialize)]
pub struct Common {
    /// `[stack].name`.
    pub stack: String,
    /// sha256 of the lock's canonical text: the label every output carries.
    pub lock_hash: String,
    /// Image registry.
    pub registry: String,
    /// Content-addressed image reference per image layer:
    /// `<registry>/<stack>:<layer>-<first 12 hex of the closure hash>` (serialized by
    /// layer name).
    #[serde(serialize_with = "by_layer_name")]
    pub images: BTreeMap<Layer, String>,
    /// Image layers built, bottom first: `[image].layers` (all by default), plus `validate`
    /// whenever the lock has nccl-tests (serialized as names).
    #[serde(serialize_with = "layer_names")]
    pub image_layers: Vec<Layer>,
    /// NCCL/fabric environment, by name.
    pub env: Vec<EnvVar>,
    /// `[cluster].fabric`; `None` without a cluster (serialized as its name, or `none`).
    #[serde(serialize_with = "fabric_name")]
    pub fabric: Option<Fabric>,
    /// Whether the fabric uses RDMA verbs (InfiniBand, RoCE).
    pub rdma: bool,
    /// Where the fabric stack is installed (configure's `--prefix`, the images' `PATH`
    /// and loader path, the VM image's `ld.so.conf.d` entry).
    pub fabric_prefix: String,
    /// Where Open MPI is (`mpirun --prefix`, nccl-tests' `MPI_HOME`): the fabric prefix, or
    /// on EFA the EFA installer's `/opt/amazon/openmpi`; none without an MPI.
    pub mpi_prefix: Option<String>,
    /// The fabric stack's `bin` directories, `:`-joined, for `PATH`.
    pub fabric_bin_path: String,
    /// Its `lib` directories, `:`-joined, for `LD_LIBRARY_PATH`.
    pub fabric_lib_path: String,
    /// The same, one by one (the VM image's `ld.so.conf.d` entry).
    pub fabric_lib_dirs: Vec<String>,
    /// What a job's runtime environment sets (the Kubernetes ConfigMap, Slurm's env file,
    /// the VM image's profile): [`Common::env`], then the site's `[network]` values
    /// ([`network::NetworkPlan::site_env`]), which replace a catalog value of the same name.
    pub runtime_env: Vec<EnvVar>,
    /// The site's network decisions (`[network]`): runtime-only environment, the RDMA
    /// resource, the GPUDirect RDMA path.
    pub network: network::NetworkPlan,
    /// Nodes (1 without `[cluster]`).
    pub nodes: u32,
    /// GPUs per node (8 without `[cluster]`).
    pub gpus_per_node: u32,
    /// Storage mounts.
    pub mounts: Vec<Mount>,
    /// Expected nccl-tests bus bandwidth, intra- then inter-node.
    pub expected: Vec<Expected>,
    /// Locked versions by component name (`torch` → `2.10.0+cu128`).
    pub versions: BTreeMap<String, String>,
    /// Locked package versions by name (`ucx` → `1.22.0`).
    pub packages: BTreeMap<String, String>,
    /// `TORCH_CUDA_ARCH_LIST`: `8.0;9.0+PTX`.
    pub torch_cuda_arch_list: String,
    /// The driver the stack was resolved for.
    pub driver: String,
    /// The first GPU's GPU Feature Discovery product label, where known.
    pub gfd_product: Option<String>,
    /// The Kubernetes node architecture (`kubernetes.io/arch`: `amd64`, `arm64`) every GPU
    /// pod selects when the lock's hosts have one CPU (the CPU its images and VM images
    /// are built for); `None` for a stack of several CPUs, whose images are multi-platform.
    pub node_arch: Option<String>,
}

impl Common {
    /// Derives the shared values from a lock.
    pub fn new(lock: &Lock) -> Result<Common, Error> {
        check_base_image(lock)?;
        let stack = lock.request.name.clone();
        let registry = lock
            .request
            .deploy
            .image
            .as_ref()
            .map_or_else(|| DEFAULT_REGISTRY.to_string(), |i| i.registry.clone());
        let (images, image_layers) = built_images(lock, &registry, &stack);
        let cluster = lock.request.deploy.cluster.as_ref();
        let env: Vec<EnvVar> = locked::env(lock)
            .into_iter()
            .map(|f| EnvVar {
                name: f.name,
                value: f.value,
                source: f.source,
            })
            .collect();
        let mounts = storage_mounts(lock);
        let expected = expected(lock);
        let versions = lock
            .components
            .iter()
            .map(|c| (c.name.name().to_string(), c.version.to_string()))
            .collect();
        let packages: BTreeMap<String, String> = lock
            .packages
            .iter()
            .map(|p| (p.name.clone(), p.version.clone()))
            .collect();
        let torch_cuda_arch_list =
            crate::core::arch::torch_list(&lock.hardware.arch_list).join(";");
        let lock_hash = format!("sha256:{}", hex(&Sha256::digest(lock.to_toml().as_bytes())));
        let network = network::NetworkPlan::new(lock);
        let runtime_env = env
            .iter()
            .filter(|e| !network.site_env.iter().any(|s| s.name == e.name))
            .chain(&network.site_env)
            .cloned()
            .collect();
        // The EFA installer's libfabric and Open MPI (its default install locations, as AWS's
        // container sample uses them: LD_LIBRARY_PATH and PATH of
        // aws-samples/awsome-distributed-training micro-benchmarks/nccl-tests/nccl-tests.Dockerfile).
        let efa = locked::has_efa_installer(lock);
        let mut fabric_dirs = vec![workload::MPI_PREFIX.to_string()];
        if efa {
            fabric_dirs.extend([EFA_LIBFABRIC.to_string(), EFA_OPENMPI.to_string()]);
        }
        // The NCCL SHARP plugin links SHARP's libraries: their directory is on the loader's
        // path (and its tools on PATH), as HPC-X's `hpcx_load` puts it.
        if packages.contains_key("nccl-rdma-sharp-plugins") {
            fabric_dirs.push(sharp_prefix(workload::MPI_PREFIX));
        }
        let mpi_prefix = if efa {
            Some(EFA_OPENMPI.to_string())
        } else {
            packages
                .contains_key("openmpi")
                .then(|| workload::MPI_PREFIX.to_string())
        };
        Ok(Common {
            stack,
            lock_hash,
            registry,
            images,
            image_layers,
            env,
            fabric: cluster.map(|c| c.fabric),
            rdma: cluster.is_some_and(|c| matches!(c.fabric, Fabric::Infiniband | Fabric::Roce)),
            fabric_prefix: workload::MPI_PREFIX.to_string(),
            mpi_prefix,
            fabric_bin_path: fabric_dirs
                .iter()
                .map(|d| format!("{d}/bin"))
                .collect::<Vec<_>>()
                .join(":"),
            fabric_lib_path: fabric_dirs
                .iter()
                .map(|d| format!("{d}/lib"))
                .collect::<Vec<_>>()
                .join(":"),
            fabric_lib_dirs: fabric_dirs.iter().map(|d| format!("{d}/lib")).collect(),
            runtime_env,
            network,
            nodes: cluster.map_or(1, |c| c.nodes),
            gpus_per_node: cluster.map_or(8, |c| c.gpus_per_node),
            mounts,
            expected,
            versions,
            packages,
            torch_cuda_arch_list,
            driver: lock.hardware.driver.to_string(),
            gfd_product: lock
                .hardware
                .gpus
                .first()
                .and_then(|g| g.gfd_product.clone()),
            node_arch: match locked::host_cpus(lock).as_slice() {
                [one] => Some(
                    match one.as_str() {
                        "aarch64" => "arm64",
                        _ => "amd64",
                    }
                    .to_string(),
                ),
                _ => None,
            },
        })
    }

    /// The image reference of a layer (the nearest built layer below it when it is not
    /// built).
    pub fn image(&self, layer: Layer) -> Option<&str> {
        let mut l = Some(layer);
        while let Some(x) = l {
            if let Some(r) = self.images.get(&x) {
                return Some(r);
            }
            l = x.parent();
        }
        None
    }
}

impl Common {
    /// `[cluster].fabric` as the spec spells it, or `none`.
    pub fn fabric_name(&self) -> &'static str {
        self.fabric.map_or("none", Fabric::name)
    }

    /// The highest layer built of training, inference, framework and base: the one the
    /// Apptainer definition builds and Slurm's Apptainer jobs run.
    pub fn top_image_layer(&self) -> Option<Layer> {
        [
            Layer::Training,
            Layer::Inference,
            Layer::Framework,
            Layer::Base,
        ]
        .into_iter()
        .find(|l| self.images.contains_key(l))
    }
}

fn fabric_name<S: serde::Serializer>(f: &Option<Fabric>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(f.map_or("none", Fabric::name))
}

fn layer_names<S: serde::Serializer>(layers: &[Layer], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(layers.iter().map(|l| l.name()))
}

/// The map by layer name, so the templates index it as before (`images["base"]`) and its
/// order is the names' order.
fn by_layer_name<S: serde::Serializer>(
    images: &BTreeMap<Layer, String>,
    s: S,
) -> Result<S::Ok, S::Error> {
    let named: BTreeMap<&str, &String> = images.iter().map(|(l, r)| (l.name(), r)).collect();
    s.collect_map(named)
}

/// A lock that locks CUDA but names no `nvidia/cuda` base image cannot be built on.
fn check_base_image(lock: &Lock) -> Result<(), Error> {
    if !locked::has_cuda_image(lock) && lock.component(Component::Cuda).is_some() {
        let has_any = !lock.packages.is_empty();
        return Err(Diagnostic::new(
            Stage::Generate,
            if has_any {
                "the lock names no `nvidia/cuda` base image for its CUDA release and OS".to_string()
            } else {
                "the lock has no deployment picks (it was written by an older gpustack)".to_string()
            },
        )
        .hint(if has_any {
            "the catalog knows no image tags for this CUDA × OS; pick another `os`, or add an `[[image]]` entry in a catalog overlay, then re-lock"
        } else {
            "re-lock with `gpustack lock`"
        })
        .into());
    }
    Ok(())
}

/// The image reference of every built layer (`[image].layers`, plus `validate` always),
/// bottom first.
fn built_images(lock: &Lock, registry: &str, stack: &str) -> (BTreeMap<Layer, String>, Vec<Layer>) {
    let wanted: Vec<Layer> = lock
        .request
        .deploy
        .image
        .as_ref()
        .map_or_else(|| Layer::ALL.to_vec(), |i| i.layers.clone());
    let mut images = BTreeMap::new();
    let mut image_layers = Vec::new();
    for l in Layer::ALL {
        let Some(ll) = lock.layer(l) else { continue };
        // The validate image is the acceptance test of every target: always built.
        if !wanted.contains(&l) && l != Layer::Validate {
            continue;
        }
        let short = ll.hash.trim_start_matches("sha256:");
        let short = &short[..short.len().min(12)];
        images.insert(l, format!("{registry}/{stack}:{}-{short}", l.name()));
        image_layers.push(l);
    }
    (images, image_layers)
}

/// The datasets and checkpoints mounts of `[storage]`.
fn storage_mounts(lock: &Lock) -> Vec<Mount> {
    let mut mounts = Vec::new();
    if let Some(st) = &lock.request.deploy.storage {
        for (name, r, ro) in [
            ("datasets", &st.datasets, true),
            ("checkpoints", &st.checkpoints, false),
        ] {
            if let Some(r) = r {
                mounts.push(Mount::of(name, r, format!("/data/{name}"), ro));
            }
        }
    }
    mounts
}

/// The expected nccl-tests bandwidths, intra- then inter-node.
fn expected(lock: &Lock) -> Vec<Expected> {
    locked::bandwidth(lock)
        .into_iter()
        .map(|f| Expected {
            shape: format!("{}x{}", f.nodes, f.gpus_per_node),
            scope: f.scope,
            busbw_gbps: f.busbw_gbps,
            fabric: f.fabric,
            size: f.size,
            test: f.test,
            sharp: f
                .sharp
                .map(|on| if on { "with SHARP" } else { "without SHARP" }.to_string()),
            source: f.source,
        })
        .collect()
}
