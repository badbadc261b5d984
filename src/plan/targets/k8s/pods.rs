//! The pod spec every workload shares (`_pod.j2`): image, requests and limits, volumes,
//! probes, the NCCL environment, and what a multi-node pod on the fabric adds.

use serde::Serialize;

use crate::plan::cluster::{Extended, PodRequest};
use crate::plan::workload::Resources;
use crate::plan::{Common, Mount, MountKind};

use super::networks::{fabric_settings, networks_annotation};

/// `/dev/shm` size limit: generic (NCCL's shared-memory transport and DataLoader workers
/// outgrow the 64 MiB container default); not a fact of the lock.
const SHM_SIZE: &str = "64Gi";

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

/// The volume of a mount.
pub(super) fn volume_of(m: &Mount) -> Volume {
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

/// The ConfigMap every GPU pod takes its NCCL/fabric environment from.
pub(super) const ENV_CONFIG: &str = "nccl-env";

/// What a multi-node pod on the fabric adds ([`fabric_settings`]), and the storage every
/// workload pod mounts.
pub(super) struct PodSettings {
    pub(super) extended: Vec<Extended>,
    pub(super) host_network: bool,
    pub(super) networks: Option<String>,
    pub(super) ipc_lock: bool,
    pub(super) fabric_notes: Vec<String>,
    pub(super) storage: Vec<Volume>,
}

impl PodSettings {
    pub(super) fn new(common: &Common, namespace: &str) -> PodSettings {
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
    pub(super) fn on_fabric(&self, p: &mut Pod) {
        self.devices(p);
        p.fabric_notes = self.fabric_notes.clone();
        p.host_network = self.host_network;
        p.networks = self.networks.clone();
        p.ipc_lock = self.ipc_lock;
    }

    /// The fabric's devices added to `p`'s request.
    pub(super) fn devices(&self, p: &mut Pod) {
        let r = &p.request;
        p.request = PodRequest::new(r.gpus, r.cpus, r.memory_gib, self.extended.clone());
    }
}

/// A pod of the stack, with what every GPU pod has: the locked image, GPUs, CPUs and memory
/// as requests and limits, the NCCL environment, /dev/shm.
pub(super) fn pod(
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
