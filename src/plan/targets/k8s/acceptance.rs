//! The acceptance test: nccl-tests' all_reduce_perf as an Indexed Job or under mpirun on a
//! Trainer MPI runtime (with osu_bw between two nodes), and the expected-bandwidth ConfigMap.

use serde::Serialize;

use crate::plan::cluster::{Gang, PodRequest};
use crate::plan::workload::{Acceptance, MpiSsh, OsuExpected};
use crate::plan::Common;

use super::pods::{pod, Pod, PodSettings};

/// The MPI hostfile Kubeflow Trainer's MPI plugin mounts in the launcher
/// (`constants.MPIHostfileDir` + `MPIHostfileName`, github.com/kubeflow/trainer
/// `pkg/constants/constants.go`).
const MPI_HOSTFILE: &str = "/etc/mpi/hostfile";

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

/// Why the MPI pods check their locked-memory limit before starting sshd.
const MEMLOCK_NOTE: &str = "before sshd: the ranks inherit its locked-memory limit (RLIMIT_MEMLOCK), which RDMA memory registration needs unlimited; Kubernetes has no per-pod limit, containers inherit the container runtime's, and containerd's unit sets none (the VM image's performance.sh adds LimitMEMLOCK=infinity for containerd); the pod fails at once with the limit it found instead of NCCL failing to register memory later";

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
pub(super) fn nccl_tests_plan(
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
pub(super) fn expected_data(common: &Common, osu: Option<&OsuExpected>) -> Vec<Datum> {
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
pub(super) fn nccl_tests_files(nccl_tests: Option<&NcclTestsPlan>) -> Vec<String> {
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
