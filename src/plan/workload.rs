//! The workload plan: how training, serving and the acceptance test run, decided once from
//! the lock for every target.
//!
//! A generated file renders a decision; it never makes one. Kubernetes and Slurm (and the
//! images they run) take from here, and only choose syntax:
//!
//! * the launcher and its argv: torchrun's options and what torchrun runs (its
//!   `training_script` contract, [`Entry`]), vLLM's and `all_reduce_perf`'s arguments;
//! * the ports: torchrun's c10d rendezvous on the first node at [`RDZV_PORT`], vLLM at
//!   [`SERVE_PORT`];
//! * the working directory and how the code gets there ([`Code`]), the model and its volume;
//! * the image of each workload: its layer's image when built, or the nearest built layer
//!   below when the lock has no such layer (said in a note); a layer the lock has but
//!   `[image].layers` does not build is refused, since the layers below lack what it adds;
//! * GPUs, CPUs and memory per node ([`Resources`]).
//!
//! `tests/workload.rs` runs the Slurm and Kubernetes renderings of these decisions under a
//! stand-in that implements torchrun's documented command line, and checks that both start
//! the same script with the same arguments in a working directory that holds the code.

use serde::Serialize;

use super::{Common, Mount};
use crate::core::StorageRef;
use crate::core::{Component, Layer};
use crate::error::{Diagnostic, Error, Stage};
use crate::lock::Lock;
use crate::spec::deploy::{Entry, Serve, Train, MODELS_DIR};

/// torchrun's default rendezvous port (`--master-port`/c10d endpoint default), used on
/// every target.
pub const RDZV_PORT: u32 = 29500;
/// vLLM's default port, passed explicitly.
pub const SERVE_PORT: u32 = 8000;
/// Where the training code is inside every container, and the working directory.
pub const CODE_DIR: &str = "/workspace";
/// Worker-group restarts torchrun allows before the job fails (`--max-restarts`).
pub const MAX_RESTARTS: u32 = 3;
/// Default CPUs per GPU when `[cluster].cpus_per_node` is not given: conservative, so the
/// request fits the GPU servers in common use (an 8-GPU server has 64 or more cores).
pub const DEFAULT_CPUS_PER_GPU: u32 = 4;
/// Default memory per GPU, GiB, when `[cluster].memory_gib_per_node` is not given:
/// conservative (8-GPU servers have 512 GiB or more).
pub const DEFAULT_MEMORY_GIB_PER_GPU: u32 = 32;

/// The image a workload runs.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct WorkloadImage {
    /// The layer the workload needs (`training`, `inference`, `validate`).
    pub layer: String,
    /// The layer whose image it runs (the same, or the nearest built one below).
    pub runs: String,
    /// The content-addressed reference ([`Common::images`]).
    pub reference: String,
    /// Why another layer stands in, when one does.
    pub note: Option<String>,
}

/// GPUs, CPUs and memory a workload takes on each node it runs on.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Resources {
    /// GPUs.
    pub gpus: u32,
    /// CPUs.
    pub cpus: u32,
    /// Memory, GiB.
    pub memory_gib: u32,
    /// Whether CPUs and memory come from `[cluster]` (else the conservative defaults).
    pub given: bool,
    /// Where the figures come from, for a comment.
    pub note: String,
}

/// Where the training code comes from.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Code {
    /// The working directory inside every container: [`CODE_DIR`].
    pub dir: String,
    /// `[train].workdir`: shared storage mounted at `dir` on every target. None: Slurm
    /// mounts the directory the job is submitted from, Kubernetes runs the code image.
    pub volume: Option<Mount>,
    /// The code image (the training image with the project directory copied to `dir`),
    /// when the code is not on a volume: what Kubernetes runs.
    pub image: Option<String>,
}

/// How a program is started, as argv words: the same on every target.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Launch {
    /// The program (`torchrun`, `vllm`, `all_reduce_perf`), found on the image's PATH or in
    /// the host venv (bare metal).
    pub program: String,
    /// Its arguments. Runtime values the target must supply (the first node's address, the
    /// job id) are not here: see [`TrainWorkload::rdzv_port`].
    pub args: Vec<String>,
}

/// `[train]`.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct TrainWorkload {
    /// The image.
    pub image: WorkloadImage,
    /// Nodes.
    pub nodes: u32,
    /// Per node.
    pub resources: Resources,
    /// torchrun with its cluster-shape options: `--nnodes`, `--nproc-per-node`,
    /// `--rdzv-backend`, `--max-restarts`. Each target appends `--rdzv-endpoint
    /// <first node>:<rdzv_port>` and `--rdzv-id <job id>` in its own naming, then
    /// [`TrainWorkload::entry`].
    pub torchrun: Launch,
    /// What torchrun runs: `train.py ARGS`, `-m pkg.train ARGS` or `--no-python PROG ARGS`.
    pub entry: Vec<String>,
    /// What the entry means, for a comment.
    pub entry_note: String,
    /// The c10d rendezvous port on the first node.
    pub rdzv_port: u32,
    /// The code and the working directory.
    pub code: Code,
    /// Storage mounted (datasets, checkpoints; the code volume is in [`Code`]).
    pub mounts: Vec<Mount>,
    /// Variables the program reads (`DATASETS_DIR=/data/datasets`).
    pub env: Vec<(String, String)>,
}

/// The model of `[serve]` and how it reaches the server.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Model {
    /// `[serve].model`: a path under `/models` or on every node, or a Hugging Face id.
    pub name: String,
    /// The volume that holds it: `[storage].models` at `/models`, or (a path without
    /// `[storage].models`) the model directory itself, expected at the same path on every
    /// node. None for a hub id without `[storage].models`.
    pub volume: Option<Mount>,
    /// Comments on where the model comes from.
    pub notes: Vec<String>,
}

/// `[serve]`.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ServeWorkload {
    /// The image.
    pub image: WorkloadImage,
    /// Per node of a replica.
    pub resources: Resources,
    /// Nodes per replica (`[serve].nodes`).
    pub nodes: u32,
    /// Pipeline-parallel size.
    pub pipeline_parallel: u32,
    /// `vllm serve MODEL --tensor-parallel-size … [--pipeline-parallel-size …]
    /// --max-model-len … --port … [--nnodes N]`. Across nodes (vLLM's multiprocessing
    /// multi-node form, the one vLLM's LeaderWorkerSet guide gives), each target appends
    /// `--node-rank <rank> --master-addr <first node>` in its own naming, and the nodes
    /// after the first also [`ServeWorkload::worker_args`].
    pub vllm: Launch,
    /// What the nodes after the first add (`--headless`: no API server, engine only).
    /// Empty on one node.
    pub worker_args: Vec<String>,
    /// The port.
    pub port: u32,
    /// Replicas.
    pub replicas: u32,
    /// The model.
    pub model: Model,
    /// Storage mounted (datasets, checkpoints).
    pub mounts: Vec<Mount>,
    /// Variables vLLM reads (`HF_HOME` when the hub cache is on `[storage].models`).
    pub env: Vec<(String, String)>,
}

/// The acceptance test: nccl-tests' `all_reduce_perf`.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Acceptance {
    /// The `validate` image.
    pub image: WorkloadImage,
    /// Nodes.
    pub nodes: u32,
    /// Per node.
    pub resources: Resources,
    /// nccl-tests is built with MPI (the lock has Open MPI): one task per GPU under an MPI
    /// launcher; otherwise one process per node drives all its GPUs.
    pub mpi: bool,
    /// One process per node, driving all its GPUs (`-g GPUS`): what runs without MPI.
    pub per_node: Launch,
    /// One process per GPU (`-g 1`): what each MPI task runs.
    pub per_gpu: Launch,
    /// The nccl-tests version.
    pub version: Option<String>,
    /// The fabric environment the test runs with: [`Common::runtime_env`], which every
    /// target delivers to it (the Kubernetes ConfigMap, Slurm's `env/nccl.env`, the VM
    /// profile), the site's `[network]` values included.
    pub env: Vec<super::EnvVar>,
    /// How MPI reaches the other nodes where no workload manager starts the ranks (Kubeflow
    /// Trainer's MPI runtime: `mpirun` over SSH); with `mpi`.
    pub ssh: Option<MpiSsh>,
    /// The OSU point-to-point bandwidth run beside nccl-tests (Slingshot, where the fabric
    /// stack builds the OSU micro-benchmarks): one rank on each of two nodes, GPU buffers
    /// on both sides. Every target runs exactly this argv.
    pub osu: Option<Launch>,
    /// What `osu_bw` is expected to reach, where the OSU run exists and the lock has a
    /// published figure: every target prints exactly these values.
    pub osu_expected: Option<OsuExpected>,
    /// The judgement of `all_reduce_perf`'s output against the lock's figure for the run's
    /// shape (`inter-node` for an MPI run across nodes, else `intra-node`), where the lock
    /// has one that nccl-tests measured: every target pipes the run through exactly this
    /// filter.
    pub judge: Option<super::judge::Judge>,
    /// The judgement of `osu_bw`'s output against [`Acceptance::osu_expected`].
    pub osu_judge: Option<super::judge::Judge>,
}

/// The expected `osu_bw` figure, in the unit and at the message size `osu_bw` prints: its
/// output has a `Size` column in bytes and a `Bandwidth (MB/s)` column, where OSU's MB/s
/// is 10^6 bytes per second (`c/mpi/pt2pt/standard/osu_bw.c` of the OSU micro-benchmarks
/// prints `size / 1e6 * iterations * window_size` over the seconds `MPI_Wtime` measured),
/// unlike nccl-tests' busbw in GB/s (10^9 bytes per second).
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct OsuExpected {
    /// The figure in MB/s (10^6 bytes/s), as `osu_bw` prints it: `24000`.
    pub mbps: String,
    /// The same figure in GB/s (10^9 bytes/s), the catalog's unit: `24`.
    pub gbps: String,
    /// The message size in bytes, the row of `osu_bw`'s `Size` column to read: `4194304`
    /// (the catalog's `4M`, a binary multiple as OSU's power-of-two sizes are); the
    /// catalog's text where it is not a size.
    pub size_bytes: Option<String>,
    /// The GPU of the figure.
    pub gpu: String,
    /// The fabric of the figure.
    pub fabric: String,
    /// Where it is published.
    pub source: String,
}

impl OsuExpected {
    /// The lock's `osu_bw` figure, restated in `osu_bw`'s unit.
    fn of(f: super::locked::BandwidthFact) -> OsuExpected {
        OsuExpected {
            mbps: gb_to_mb(&f.busbw_gbps).unwrap_or_else(|| format!("1000 x {}", f.busbw_gbps)),
            gbps: f.busbw_gbps,
            size_bytes: f
                .size
                .as_deref()
                .map(|s| size_bytes(s).unwrap_or_else(|| s.to_string())),
            gpu: f.gpu,
            fabric: f.fabric,
            source: f.source,
        }
    }
}

/// A decimal figure times 1000, exactly (`24` → `24000`, `91.04` → `91040`,
/// `0.0015` → `1.5`): the decimal point moves three places; `None` when it is not a
/// plain decimal.
fn gb_to_mb(gb: &str) -> Option<String> {
    let (int, frac) = gb.split_once('.').unwrap_or((gb, ""));
    if int.is_empty() || !(int.bytes().chain(frac.bytes())).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let frac = format!("{frac:0<3}");
    let (moved, rest) = frac.split_at(3);
    let int = format!("{int}{moved}");
    let int = int.trim_start_matches('0');
    let int = if int.is_empty() { "0" } else { int };
    let rest = rest.trim_end_matches('0');
    Some(if rest.is_empty() {
        int.to_string()
    } else {
        format!("{int}.{rest}")
    })
}

/// A message size in bytes: `4194304` for `4M`; `K`, `M` and `G` are binary multiples (the
/// power-of-two sizes OSU and nccl-tests step through); `None` for anything else.
fn size_bytes(size: &str) -> Option<String> {
    let (n, shift) = match size.as_bytes().last()? {
        b'K' => (&size[..size.len() - 1], 10),
        b'M' => (&size[..size.len() - 1], 20),
        b'G' => (&size[..size.len() - 1], 30),
        _ => (size, 0),
    };
    let n: u64 = n.parse().ok()?;
    n.checked_mul(1u64 << shift).map(|b| b.to_string())
}

/// Where the OSU micro-benchmarks install `osu_bw` under the fabric prefix
/// (`libexec/osu-micro-benchmarks/mpi/pt2pt`, the directory Spack's recipe puts on PATH:
/// `setup_run_environment` of spack-packages' osu_micro_benchmarks/package.py).
pub const OSU_BW: &str = "libexec/osu-micro-benchmarks/mpi/pt2pt/osu_bw";

/// `osu_bw`'s options for device buffers on both ranks: `-d cuda D D` (the OSU
/// micro-benchmarks README, "CUDA Extensions to OMB": `-d cuda` selects CUDA buffers, the
/// two positional letters the buffer location of each rank, `D` device or `H` host;
/// <https://mvapich.cse.ohio-state.edu/benchmarks/>).
pub const OSU_BW_ARGS: [&str; 4] = ["-d", "cuda", "D", "D"];

/// Where Open MPI is installed in the images (the `fabric` stage's prefix, copied into
/// `base` and so into `validate`). `mpirun --prefix` makes the remote side find `prted`
/// and its libraries in a non-interactive SSH session.
pub const MPI_PREFIX: &str = "/opt/fabric";

/// The SSH set-up of the `validate` image for an `mpirun` launched over SSH, as the
/// Kubeflow MPI runtimes expect it, and what the Kubernetes acceptance TrainJob relies on.
/// The user, port and `sshd_config` lines follow the MPI Operator's base image
/// (github.com/kubeflow/mpi-operator `build/base/Dockerfile` and `build/base/sshd_config`),
/// which Kubeflow Trainer's own MPI runtimes run (`manifests/base/runtimes/
/// deepspeed_distributed.yaml`: `sshd -De -f /home/mpiuser/.sshd_config`, port 2222), except
/// the uid (see [`MpiSsh::uid`]). A non-root user is required, not a choice: the Trainer mounts the generated
/// key with mode 0640 (`pkg/runtime/framework/plugins/mpi/mpi.go`), and `ssh` refuses a
/// private key its own user could share with a group, so only a user other than the file's
/// owner (root) can use it.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct MpiSsh {
    /// `mpiuser`.
    pub user: String,
    /// `runAsUser`/`fsGroup` on Kubernetes, `useradd -u` in the image: 1001, not the
    /// MPI Operator's 1000, which Ubuntu's container images from 23.04 on (24.04 among the
    /// catalog's OSes) give their own `ubuntu` user
    /// (<https://bugs.launchpad.net/cloud-images/+bug/2005129>), so `useradd -u 1000` fails
    /// there.
    pub uid: u32,
    /// `/home/mpiuser/.ssh`: where the Trainer mounts the key pair and `authorized_keys`
    /// (`mlPolicy.mpi.sshAuthMountPath`).
    pub auth_dir: String,
    /// `/home/mpiuser/.sshd_config`: the per-user daemon configuration the image writes.
    pub sshd_config: String,
    /// Its lines.
    pub sshd_config_lines: Vec<String>,
    /// 2222: an unprivileged port, also clear of the host's own sshd when the pods use the
    /// host network.
    pub port: u32,
    /// Lines appended to the system-wide `/etc/ssh/ssh_config` (client side: the port, and
    /// no host-key prompt or known-hosts file, since the pods' host keys are new every run).
    pub ssh_config_lines: Vec<String>,
    /// `sshd -De -f <sshd_config>`: what every node pod runs.
    pub sshd: Launch,
    /// Where this set-up is documented.
    pub source: String,
}

/// The SSH set-up when nccl-tests is built with MPI (the lock has Open MPI): the `validate`
/// image gets it, and the Kubernetes acceptance TrainJob uses it.
pub fn mpi_ssh(common: &Common) -> Option<MpiSsh> {
    common.mpi_prefix.is_some().then(MpiSsh::new)
}

impl MpiSsh {
    fn new() -> MpiSsh {
        let user = "mpiuser";
        let home = format!("/home/{user}");
        let port = 2222;
        let sshd_config = format!("{home}/.sshd_config");
        MpiSsh {
            user: user.into(),
            uid: 1001,
            auth_dir: format!("{home}/.ssh"),
            sshd_config_lines: vec![
                format!("PidFile {home}/sshd.pid"),
                format!("HostKey {home}/.ssh/id_rsa"),
                "StrictModes no".into(),
                format!("Port {port}"),
            ],
            ssh_config_lines: vec![
                "Host *".into(),
                format!("    Port {port}"),
                "    StrictHostKeyChecking no".into(),
                "    UserKnownHostsFile /dev/null".into(),
            ],
            sshd: Launch {
                program: "/usr/sbin/sshd".into(),
                args: vec!["-De".into(), "-f".into(), sshd_config.clone()],
            },
            sshd_config,
            port,
            source: "https://github.com/kubeflow/mpi-operator/blob/master/build/base/Dockerfile ; https://github.com/kubeflow/mpi-operator/blob/master/build/base/sshd_config ; https://github.com/kubeflow/trainer/blob/master/manifests/base/runtimes/deepspeed_distributed.yaml".into(),
        }
    }
}

/// Every workload of the lock. LOAD-BEARING: the Slurm and Kubernetes plans carry it and
/// their templates print its fields.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct WorkloadPlan {
    /// `[train]`.
    pub train: Option<TrainWorkload>,
    /// `[serve]`.
    pub serve: Option<ServeWorkload>,
    /// The acceptance test, when the lock has nccl-tests.
    pub acceptance: Option<Acceptance>,
    /// A whole node: what the cluster's quota and queue are made of (nodes × this).
    pub node: Resources,
}

fn bad(msg: String, hint: &str) -> Error {
    Diagnostic::new(Stage::Generate, msg).hint(hint).into()
}

/// The image of `layer`: decided once for every target.
fn image_for(lock: &Lock, common: &Common, layer: Layer) -> Result<WorkloadImage, Error> {
    if let Some(r) = common.images.get(&layer) {
        return Ok(WorkloadImage {
            layer: layer.name().into(),
            runs: layer.name().into(),
            reference: r.clone(),
            note: None,
        });
    }
    if lock.layer(layer).is_some() {
        return Err(bad(
            format!(
                "the `{0}` image is not built ([image].layers leaves it out), but a workload needs it and the layers below lack what it adds",
                layer.name()
            ),
            &format!("add \"{}\" to [image].layers and re-lock", layer.name()),
        ));
    }
    let mut l = layer.parent();
    while let Some(x) = l {
        if let Some(r) = common.images.get(&x) {
            return Ok(WorkloadImage {
                layer: layer.name().into(),
                runs: x.name().into(),
                reference: r.clone(),
                note: Some(format!(
                    "the lock has no `{}` layer (nothing it would add is locked): the `{}` image has everything the workload needs",
                    layer.name(),
                    x.name()
                )),
            });
        }
        l = x.parent();
    }
    Err(bad(
        format!("the lock has no image for the `{}` workload", layer.name()),
        "re-lock with `gpustack lock`",
    ))
}

/// Per-node resources for `gpus` of a node's GPUs: the node's CPUs and memory shared out
/// by GPU.
fn resources(lock: &Lock, common: &Common, gpus: u32) -> Resources {
    let cluster = lock.request.deploy.cluster.as_ref();
    let per_node = common.gpus_per_node.max(1);
    let share = |total: u32| (u64::from(total) * u64::from(gpus) / u64::from(per_node)).max(1);
    let cpus_given = cluster.and_then(|c| c.cpus_per_node);
    let mem_given = cluster.and_then(|c| c.memory_gib_per_node);
    let cpus = cpus_given.map_or(gpus * DEFAULT_CPUS_PER_GPU, |c| {
        u32::try_from(share(c)).unwrap_or(u32::MAX)
    });
    let memory_gib = mem_given.map_or(gpus * DEFAULT_MEMORY_GIB_PER_GPU, |m| {
        u32::try_from(share(m)).unwrap_or(u32::MAX)
    });
    let given = cpus_given.is_some() && mem_given.is_some();
    let note = match (cpus_given, mem_given) {
        (Some(_), Some(_)) if gpus == per_node => {
            "[cluster].cpus_per_node and memory_gib_per_node".to_string()
        }
        (Some(_), Some(_)) => format!(
            "[cluster].cpus_per_node and memory_gib_per_node, shared out by GPU ({gpus} of {per_node})"
        ),
        _ => format!(
            "conservative defaults ({DEFAULT_CPUS_PER_GPU} CPUs and {DEFAULT_MEMORY_GIB_PER_GPU} GiB per GPU) for what [cluster] does not say: set cpus_per_node and memory_gib_per_node to what a job may use on your nodes"
        ),
    };
    Resources {
        gpus,
        cpus: cpus.max(1),
        memory_gib: memory_gib.max(1),
        given,
        note,
    }
}

/// The code image reference: `<registry>/<stack>-code:<training layer's short hash>`.
fn code_image(common: &Common, image: &WorkloadImage) -> String {
    let tag = image
        .reference
        .rsplit_once(':')
        .map_or("latest", |(_, t)| t);
    format!("{}/{}-code:{tag}", common.registry, common.stack)
}

/// What torchrun runs for `[train].entry`, and what that means (for a comment).
fn torchrun_entry(entry: &Entry) -> (Vec<String>, String) {
    match entry {
        Entry::Script { path, args } => {
            let mut v = vec![path.clone()];
            v.extend(args.iter().cloned());
            (
                v,
                format!("the script `{path}`, which torchrun runs with `python -u` once per GPU"),
            )
        }
        Entry::Module { name, args } => {
            let mut v = vec!["-m".to_string(), name.clone()];
            v.extend(args.iter().cloned());
            (
                v,
                format!(
                    "the module `{name}`, which torchrun runs with `python -u -m` once per GPU"
                ),
            )
        }
        Entry::Executable { program, args } => {
            let mut v = vec!["--no-python".to_string(), program.clone()];
            v.extend(args.iter().cloned());
            (v, format!("the program `{program}`, which torchrun runs as it is (`--no-python`) once per GPU"))
        }
    }
}

/// The training workload of `[train]`.
fn train_workload(
    lock: &Lock,
    common: &Common,
    t: &Train,
    data_env: &[(String, String)],
) -> Result<TrainWorkload, Error> {
    if lock.component(Component::Torch).is_none() {
        return Err(bad(
            "[train] runs torchrun, but the lock has no torch".into(),
            "add `torch = \"*\"` to [components] and re-lock",
        ));
    }
    let gpus = common.gpus_per_node;
    let image = image_for(lock, common, Layer::Training)?;
    let (entry, entry_note) = torchrun_entry(&t.entry);
    let volume = t
        .workdir
        .as_ref()
        .map(|r| Mount::of("code", r, CODE_DIR.to_string(), false));
    let code = Code {
        dir: CODE_DIR.into(),
        image: volume.is_none().then(|| code_image(common, &image)),
        volume,
    };
    Ok(TrainWorkload {
        nodes: common.nodes,
        resources: resources(lock, common, gpus),
        torchrun: Launch {
            program: "torchrun".into(),
            args: vec![
                format!("--nnodes={}", common.nodes),
                format!("--nproc-per-node={gpus}"),
                "--rdzv-backend=c10d".into(),
                format!("--max-restarts={MAX_RESTARTS}"),
            ],
        },
        entry,
        entry_note,
        rdzv_port: RDZV_PORT,
        code,
        mounts: common.mounts.clone(),
        env: data_env.to_vec(),
        image,
    })
}

/// How the served model reaches vLLM: from `[storage].models` (a path on it, or the
/// Hugging Face cache there), from the same path on every node, or downloaded at start.
/// `env` receives `HF_HOME` where the cache is on storage.
fn served_model(
    model_name: &str,
    store: Option<&StorageRef>,
    env: &mut Vec<(String, String)>,
) -> Model {
    let hub = !model_name.starts_with('/');
    let name = model_name.to_string();
    match (store, hub) {
        (Some(r), false) => Model {
            name,
            volume: Some(Mount::of("models", r, MODELS_DIR.into(), true)),
            notes: vec![format!(
                "{model_name} on [storage].models ({r}), mounted read-only at {MODELS_DIR}"
            )],
        },
        (Some(r), true) => {
            env.push(("HF_HOME".to_string(), format!("{MODELS_DIR}/huggingface")));
            Model {
                name,
                volume: Some(Mount::of("models", r, MODELS_DIR.into(), false)),
                notes: vec![format!(
                    "a Hugging Face id: vLLM downloads it into HF_HOME={MODELS_DIR}/huggingface on [storage].models ({r}), read-write, so replicas share one copy; gated models need HF_TOKEN"
                )],
            }
        }
        (None, false) => Model {
            name,
            volume: Some(Mount {
                name: "model".into(),
                kind: super::MountKind::HostPath,
                server: None,
                host_path: Some(model_name.to_string()),
                claim: None,
                container_path: model_name.to_string(),
                read_only: true,
            }),
            notes: vec![format!(
                "{model_name} is expected at the same path on every node (mounted read-only); set [storage].models to serve it from shared storage"
            )],
        },
        (None, true) => Model {
            name,
            volume: None,
            notes: vec!["a Hugging Face id: vLLM downloads it at start into the container; set [storage].models to keep one copy on shared storage; gated models need HF_TOKEN".into()],
        },
    }
}

/// `vllm serve`'s arguments for `[serve]` over `nodes` nodes.
fn vllm_args(s: &Serve, nodes: u32) -> Vec<String> {
    let mut args = vec![
        "serve".to_string(),
        s.model.clone(),
        "--tensor-parallel-size".into(),
        s.tensor_parallel.to_string(),
    ];
    if s.pipeline_parallel > 1 {
        args.extend([
            "--pipeline-parallel-size".to_string(),
            s.pipeline_parallel.to_string(),
        ]);
    }
    args.extend([
        "--max-model-len".to_string(),
        s.max_model_len.to_string(),
        "--port".into(),
        SERVE_PORT.to_string(),
    ]);
    if nodes > 1 {
        args.extend(["--nnodes".to_string(), nodes.to_string()]);
    }
    args
}

/// The serving workload of `[serve]`.
fn serve_workload(
    lock: &Lock,
    common: &Common,
    s: &Serve,
    data_env: &[(String, String)],
) -> Result<ServeWorkload, Error> {
    if lock.component(Component::Vllm).is_none() {
        return Err(bad(
            "[serve] runs vLLM, but the lock has no vllm".into(),
            "add `vllm = \"*\"` to [components] and re-lock, or remove [serve]",
        ));
    }
    // [serve].nodes and the parallelism were checked against [cluster] when
    // the spec was read (lock time): the GPUs split evenly over the nodes.
    let nodes = s.nodes.max(1);
    let gpus_per_server_node = s.gpus() / nodes;
    let image = image_for(lock, common, Layer::Inference)?;
    let deploy = &lock.request.deploy;
    let store = deploy.storage.as_ref().and_then(|st| st.models.as_ref());
    let mut env = Vec::new();
    let model = served_model(&s.model, store, &mut env);
    env.extend(data_env.iter().cloned());
    Ok(ServeWorkload {
        resources: resources(lock, common, gpus_per_server_node),
        nodes,
        pipeline_parallel: s.pipeline_parallel,
        vllm: Launch {
            program: "vllm".into(),
            args: vllm_args(s, nodes),
        },
        worker_args: if nodes > 1 {
            vec!["--headless".into()]
        } else {
            Vec::new()
        },
        port: SERVE_PORT,
        replicas: s.replicas,
        model,
        mounts: common.mounts.clone(),
        env,
        image,
    })
}

impl WorkloadPlan {
    /// Decides every workload of the lock.
    pub fn new(lock: &Lock, common: &Common) -> Result<WorkloadPlan, Error> {
        let deploy = &lock.request.deploy;
        let data_env: Vec<(String, String)> = common
            .mounts
            .iter()
            .map(|m| {
                (
                    format!("{}_DIR", m.name.to_uppercase()),
                    m.container_path.clone(),
                )
            })
            .collect();
        let train = (deploy.train.as_ref())
            .map(|t| train_workload(lock, common, t, &data_env))
            .transpose()?;
        let serve = (deploy.serve.as_ref())
            .map(|s| serve_workload(lock, common, s, &data_env))
            .transpose()?;
        let acceptance = acceptance(lock, common)?;
        Ok(WorkloadPlan {
            train,
            serve,
            acceptance,
            node: resources(lock, common, common.gpus_per_node),
        })
    }
}

/// The acceptance test of the lock (nccl-tests' `all_reduce_perf`), when it has nccl-tests:
/// what the Slurm and Kubernetes jobs run, and what the VM image's validate script names.
pub fn acceptance(lock: &Lock, common: &Common) -> Result<Option<Acceptance>, Error> {
    if super::locked::nccl_tests(lock).is_none() {
        return Ok(None);
    }
    let gpus = common.gpus_per_node;
    let ssh = mpi_ssh(common);
    let mpi = ssh.is_some();
    let osu = mpi && common.nodes >= 2 && common.packages.contains_key("osu-micro-benchmarks");
    let run = |g: u32| Launch {
        program: "all_reduce_perf".into(),
        args: ["-b", "8", "-e", "8G", "-f", "2", "-g"]
            .map(String::from)
            .into_iter()
            .chain([g.to_string()])
            .collect(),
    };
    // The figure of the run's shape: one MPI run across the nodes is the inter-node
    // figure; a run on one node (or one per node, without MPI) the intra-node one.
    let scope = if mpi && common.nodes > 1 {
        "inter-node"
    } else {
        "intra-node"
    };
    let judge = common
        .expected
        .iter()
        .find(|e| e.scope == scope)
        // Only a figure nccl-tests measured is a pass mark for it: another benchmark's
        // (gh200-hpc's PyTorch all-reduce) stays a printed yardstick.
        .filter(|e| e.test.starts_with("all_reduce_perf"))
        .and_then(|e| {
            super::judge::Judge::nccl(
                &e.busbw_gbps,
                &format!("the lock's {scope} figure"),
                &e.source,
            )
        });
    let osu_expected = osu
        .then(|| super::locked::osu_bandwidth(lock).map(OsuExpected::of))
        .flatten();
    let osu_judge = osu_expected.as_ref().and_then(|o| {
        super::judge::Judge::osu(
            &o.mbps,
            "the lock's osu_bw figure",
            o.size_bytes.as_deref(),
            &o.source,
        )
    });
    Ok(Some(Acceptance {
        judge,
        osu_judge,
        image: image_for(lock, common, Layer::Validate)?,
        nodes: common.nodes,
        resources: resources(lock, common, gpus),
        mpi,
        per_node: run(gpus),
        per_gpu: run(1),
        version: common.packages.get("nccl-tests").cloned(),
        env: common.runtime_env.clone(),
        osu: osu.then(|| Launch {
            program: format!("{}/{OSU_BW}", common.fabric_prefix),
            args: OSU_BW_ARGS.map(String::from).to_vec(),
        }),
        osu_expected,
        ssh,
    }))
}

#[cfg(test)]
mod tests {
    use super::{gb_to_mb, size_bytes};

    #[test]
    fn a_gb_figure_restates_exactly_in_mb() {
        for (gb, mb) in [
            ("24", Some("24000")),
            ("91.04", Some("91040")),
            ("0.0015", Some("1.5")),
            ("386.56", Some("386560")),
            ("1.23456", Some("1234.56")),
            ("0", Some("0")),
            ("", None),
            ("24 GB/s", None),
            (".5", None),
        ] {
            assert_eq!(gb_to_mb(gb).as_deref(), mb, "{gb}");
        }
    }

    #[test]
    fn sizes_are_binary_multiples_in_bytes() {
        for (size, bytes) in [
            ("4M", Some("4194304")),
            ("16G", Some("17179869184")),
            ("8K", Some("8192")),
            ("512", Some("512")),
            ("4MB", None),
            ("M", None),
        ] {
            assert_eq!(size_bytes(size).as_deref(), bytes, "{size}");
        }
    }
}
