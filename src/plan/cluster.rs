//! The cluster plan (issue 31): what each pod of the stack requests, decided once, and
//! everything derived from it — the Kueue ClusterQueue's covered resources and quotas,
//! the ResourceQuota's hard limits, the extended resources' providers, and each
//! workload's gang.
//!
//! A pod's request is a [`PodRequest`]: GPUs, CPUs, memory, and the extended resources of
//! the fabric ([`Extended`]: the RDMA shared device, EFA or CXI devices), each with who
//! provides it ([`Provider`]). The Kubernetes plan builds every pod from one, and lists
//! every queued workload as [`Workload`] pod sets. [`ClusterPlan::new`] then derives the
//! queue from the same values: the covered resources are the union of what any queued
//! pod requests, each quota is `nodes × the per-node figure`, plus the largest
//! auxiliary pod that runs beside a node pod (the MPI launcher). Nothing is written twice.
//!
//! [`admit`] is Kueue's admission rule as far as this plan depends on it, so that a test
//! (and `gpustack check`) can re-derive each contract from the typed data or from the
//! generated files read back:
//!
//! * a pod set's resource that no resource group of the ClusterQueue covers stops the
//!   workload: "resource … unavailable in ClusterQueue" (kubernetes-sigs/kueue v0.19.2,
//!   commit 8eab68778fc1b52affe165fdf5af29d1e9b4f3cb, `pkg/scheduler/flavorassigner/
//!   flavorassigner.go`, `findFlavorForPodSets`: `a.cq.RGByResource(resName) == nil`);
//! * the workload's total of a resource (pod sets' count × request, summed) above the
//!   flavor's quota can never fit: "insufficient quota for … > maximum capacity"
//!   (`fitsResourceQuota`: `val.Cmp(maxCapacity) > 0` → `noFit`, reason
//!   `ExceedsMaxQuota`; without a cohort the maximum capacity is the nominal quota).

use serde::Serialize;

/// The MPI launcher pod (nccl-tests and OSU under Kubeflow Trainer's MPI runtime):
/// `mpirun` only waits for the ranks. Generic, not a fact of the lock.
pub const LAUNCHER_CPUS: u32 = 1;
/// See [`LAUNCHER_CPUS`], GiB.
pub const LAUNCHER_MEMORY_GIB: u32 = 2;

/// Who provides an extended resource a pod requests.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(tag = "kind", content = "what", rename_all = "kebab-case")]
pub enum Provider {
    /// `network/nic-cluster-policy.yaml`: the Network Operator's RDMA shared device plugin.
    NicClusterPolicy,
    /// Something the cluster must run that gpustack does not generate (a device plugin),
    /// said in words; `gen k8s` prints it as a prerequisite.
    Prerequisite(String),
}

/// One extended resource a pod requests: `rdma/rdma_shared_device_a: 1`.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Extended {
    /// The Kubernetes resource name.
    pub name: String,
    /// How many, per pod.
    pub count: u32,
    /// Who provides it.
    pub provider: Provider,
}

/// A resource line as a pod spec, a quota or a ClusterQueue writes it. LOAD-BEARING:
/// `_pod.j2`, `trainjob.yaml.j2`, `resourcequota.yaml.j2` and `cluster-queue.yaml.j2`
/// print these fields.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ResourceLine {
    /// `nvidia.com/gpu`, `cpu`, `memory`, `rdma/rdma_shared_device_a`.
    pub name: String,
    /// The amount, in units of [`ResourceLine::gib`] or plain counts.
    pub amount: u64,
    /// Memory, written `<amount>Gi`.
    pub gib: bool,
}

/// What one pod requests (and, requests equal to limits, may use).
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct PodRequest {
    /// `nvidia.com/gpu`.
    pub gpus: u32,
    /// CPUs.
    pub cpus: u32,
    /// Memory, GiB.
    pub memory_gib: u32,
    /// The fabric's devices.
    pub extended: Vec<Extended>,
    /// All of them as resource lines, in the order pods write them: GPUs, CPUs, memory,
    /// then the extended resources (GPUs only when the pod has any).
    pub lines: Vec<ResourceLine>,
}

impl PodRequest {
    /// A request of `gpus`, `cpus`, `memory_gib` and the fabric's `extended` resources.
    #[must_use]
    pub fn new(gpus: u32, cpus: u32, memory_gib: u32, extended: Vec<Extended>) -> PodRequest {
        let mut lines = Vec::new();
        if gpus > 0 {
            lines.push(line(GPU, u64::from(gpus), false));
        }
        lines.push(line("cpu", u64::from(cpus), false));
        lines.push(line("memory", u64::from(memory_gib), true));
        for e in &extended {
            lines.push(line(&e.name, u64::from(e.count), false));
        }
        PodRequest {
            gpus,
            cpus,
            memory_gib,
            extended,
            lines,
        }
    }

    /// The MPI launcher's request: no GPU, no device.
    #[must_use]
    pub fn launcher() -> PodRequest {
        PodRequest::new(0, LAUNCHER_CPUS, LAUNCHER_MEMORY_GIB, Vec::new())
    }
}

/// The GPU resource of NVIDIA's device plugin.
pub const GPU: &str = "nvidia.com/gpu";

fn line(name: &str, amount: u64, gib: bool) -> ResourceLine {
    ResourceLine {
        name: name.to_string(),
        amount,
        gib,
    }
}

/// `count` pods alike within a workload: a Kueue pod set.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct PodSet {
    /// `node`, `launcher`, `worker`, `main`.
    pub name: String,
    /// Pods.
    pub count: u32,
    /// Each pod's request.
    pub request: PodRequest,
}

/// How the pods of a workload that spans nodes are started all together or not at all.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Gang {
    /// One pod per workload, or pods that do not wait for each other (the per-node
    /// nccl-tests Job).
    NotNeeded,
    /// Kueue admits the whole workload or none of it (`[k8s].queue`).
    Kueue,
    /// Kubeflow Trainer's `podGroupPolicy.coscheduling` (scheduler-plugins).
    Coscheduling,
    /// Kubeflow Trainer's `podGroupPolicy.volcano`, or Volcano's PodGroup.
    Volcano,
}

/// A workload as Kueue admits it: its file, name and pod sets.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Workload {
    /// The generated file (`trainjob.yaml`).
    pub file: String,
    /// The object's name.
    pub name: String,
    /// Its pod sets.
    pub pod_sets: Vec<PodSet>,
    /// Whether it names the queue (`kueue.x-k8s.io/queue-name`).
    pub queued: bool,
    /// How its pods start together.
    pub gang: Gang,
}

impl Gang {
    /// The gang of a workload of `pods` pods: Kueue's when it is queued, else the
    /// `[k8s].gang` scheduler's when its pods wait for each other (more than one).
    #[must_use]
    pub fn of(queued: bool, pods: u32, scheduler: crate::spec::deploy::GangScheduler) -> Gang {
        use crate::spec::deploy::GangScheduler;
        match (queued, pods > 1, scheduler) {
            (true, _, _) => Gang::Kueue,
            (false, false, _) => Gang::NotNeeded,
            (false, true, GangScheduler::Coscheduling) => Gang::Coscheduling,
            (false, true, GangScheduler::Volcano) => Gang::Volcano,
        }
    }

    /// The pods' `schedulerName`: the scheduler-plugins scheduler installed beside the
    /// default one, as its install guide names it (Kubeflow Trainer v2.3.0,
    /// `docs/legacy-v1/user-guides/job-scheduling.md`: `schedulerName:
    /// scheduler-plugins-scheduler` "if you install the Scheduler Plugins in your cluster
    /// as a secondary scheduler"), or Volcano's.
    #[must_use]
    pub fn scheduler_name(&self) -> Option<&'static str> {
        match self {
            Gang::Coscheduling => Some("scheduler-plugins-scheduler"),
            Gang::Volcano => Some("volcano"),
            Gang::NotNeeded | Gang::Kueue => None,
        }
    }
}

impl Workload {
    /// Pods across its pod sets.
    #[must_use]
    pub fn pods(&self) -> u32 {
        self.pod_sets.iter().map(|p| p.count).sum()
    }
}

/// The ClusterQueue's covered resources with their quotas, and the ResourceQuota's hard
/// requests. LOAD-BEARING: `kueue/cluster-queue.yaml.j2` and `resourcequota.yaml.j2`
/// print these fields.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ClusterPlan {
    /// Nodes.
    pub nodes: u32,
    /// What one node gives a workload pod of the stack: its GPUs, the `[cluster]` CPUs and
    /// memory, one of each fabric device the pods request.
    pub node: PodRequest,
    /// The largest pod that runs beside the node pods (the MPI launcher), when one does.
    pub auxiliary: Option<PodRequest>,
    /// The quota of every resource a queued pod requests, in the order pods write them:
    /// `nodes × node` plus the auxiliary pod. The ClusterQueue's `coveredResources` are
    /// their names.
    pub quotas: Vec<ResourceLine>,
    /// Every workload, queued or not.
    pub workloads: Vec<Workload>,
    /// Why the quotas are what they are, for a comment.
    pub note: String,
}

impl ClusterPlan {
    /// Derives the quotas from the node's figure and the workloads' pod sets.
    #[must_use]
    pub fn new(nodes: u32, node: PodRequest, workloads: Vec<Workload>) -> ClusterPlan {
        let auxiliary = workloads
            .iter()
            .flat_map(|w| &w.pod_sets)
            .filter(|p| p.request.gpus == 0)
            .map(|p| &p.request)
            .max_by_key(|r| (r.cpus, r.memory_gib))
            .cloned();
        let mut quotas: Vec<ResourceLine> = Vec::new();
        let mut add = |l: &ResourceLine, times: u32| {
            let amount = l.amount.saturating_mul(u64::from(times));
            match quotas.iter_mut().find(|q| q.name == l.name) {
                Some(q) => q.amount = q.amount.saturating_add(amount),
                None => quotas.push(ResourceLine {
                    amount,
                    ..l.clone()
                }),
            }
        };
        for l in &node.lines {
            add(l, nodes);
        }
        if let Some(a) = &auxiliary {
            for l in &a.lines {
                add(l, 1);
            }
        }
        // A resource some pod requests that the node figure does not hold (none today):
        // covered with the largest workload's total, so the queue never lacks it.
        for w in &workloads {
            for (name, total) in totals(w) {
                if !quotas.iter().any(|q| q.name == name) {
                    let gib = name == "memory";
                    quotas.push(ResourceLine {
                        name,
                        amount: total,
                        gib,
                    });
                }
            }
        }
        let note = match &auxiliary {
            Some(a) => format!(
                "{nodes} nodes × the per-node figure, plus {} CPU and {} GiB for the MPI launcher pod, which runs beside a node pod",
                a.cpus, a.memory_gib
            ),
            None => format!("{nodes} nodes × the per-node figure"),
        };
        ClusterPlan {
            nodes,
            node,
            auxiliary,
            quotas,
            workloads,
            note,
        }
    }

    /// The queued workloads.
    pub fn queued(&self) -> impl Iterator<Item = &Workload> {
        self.workloads.iter().filter(|w| w.queued)
    }
}

/// A workload's total of each resource: Σ count × request over its pod sets (what Kueue
/// compares with the quota, `workload.Info.TotalRequests`).
#[must_use]
pub fn totals(w: &Workload) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = Vec::new();
    for p in &w.pod_sets {
        for l in &p.request.lines {
            let amount = l.amount.saturating_mul(u64::from(p.count));
            match out.iter_mut().find(|(n, _)| *n == l.name) {
                Some((_, t)) => *t = t.saturating_add(amount),
                None => out.push((l.name.clone(), amount)),
            }
        }
    }
    out
}

/// Why Kueue would never admit a workload into a ClusterQueue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoAdmission {
    /// A pod requests a resource no resource group covers: "resource … unavailable in
    /// ClusterQueue".
    Uncovered {
        /// The resource.
        resource: String,
    },
    /// The workload's total exceeds the quota: "insufficient quota … > maximum capacity".
    ExceedsQuota {
        /// The resource.
        resource: String,
        /// The workload's total.
        need: u64,
        /// The quota.
        quota: u64,
    },
}

impl std::fmt::Display for NoAdmission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoAdmission::Uncovered { resource } => {
                write!(f, "resource {resource} unavailable in ClusterQueue")
            }
            NoAdmission::ExceedsQuota {
                resource,
                need,
                quota,
            } => write!(
                f,
                "insufficient quota for {resource}: the workload requests {need}, the maximum capacity is {quota}"
            ),
        }
    }
}

/// Kueue's admission rule for one workload against one ClusterQueue flavor's quotas
/// (module doc): every resource the pods request is covered, and each total fits its
/// quota. Empty: admissible once the quota is free.
#[must_use]
pub fn admit(quotas: &[ResourceLine], workload: &Workload) -> Vec<NoAdmission> {
    let mut out = Vec::new();
    for (resource, need) in totals(workload) {
        match quotas.iter().find(|q| q.name == resource) {
            None => out.push(NoAdmission::Uncovered { resource }),
            Some(q) if need > q.amount => out.push(NoAdmission::ExceedsQuota {
                resource,
                need,
                quota: q.amount,
            }),
            Some(_) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rdma() -> Extended {
        Extended {
            name: "rdma/rdma_shared_device_a".into(),
            count: 1,
            provider: Provider::NicClusterPolicy,
        }
    }

    fn mpi_job(nodes: u32, node: &PodRequest) -> Workload {
        Workload {
            file: "nccl-tests-trainjob.yaml".into(),
            name: "nccl-tests".into(),
            pod_sets: vec![
                PodSet {
                    name: "node".into(),
                    count: nodes,
                    request: node.clone(),
                },
                PodSet {
                    name: "launcher".into(),
                    count: 1,
                    request: PodRequest::launcher(),
                },
            ],
            queued: true,
            gang: Gang::Kueue,
        }
    }

    #[test]
    fn the_queue_covers_what_the_pods_request_and_fits_the_launcher() {
        let node = PodRequest::new(8, 96, 1536, vec![rdma()]);
        let plan = ClusterPlan::new(8, node.clone(), vec![mpi_job(8, &node)]);
        let names: Vec<&str> = plan.quotas.iter().map(|q| q.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "nvidia.com/gpu",
                "cpu",
                "memory",
                "rdma/rdma_shared_device_a"
            ]
        );
        let amounts: Vec<u64> = plan.quotas.iter().map(|q| q.amount).collect();
        assert_eq!(amounts, [64, 769, 12290, 8]);
        for w in plan.queued() {
            assert_eq!(admit(&plan.quotas, w), Vec::new(), "{}", w.file);
        }
    }

    #[test]
    fn the_admission_model_refuses_what_kueue_refuses() {
        let node = PodRequest::new(8, 96, 1536, vec![rdma()]);
        let w = mpi_job(8, &node);
        // The queue gpustack wrote before: cpu, memory and GPUs, the node figure only.
        let old = vec![
            line("cpu", 768, false),
            line("memory", 12288, true),
            line(GPU, 64, false),
        ];
        let got: Vec<String> = admit(&old, &w).iter().map(ToString::to_string).collect();
        insta::assert_snapshot!(got.join("\n"), @r"
        insufficient quota for cpu: the workload requests 769, the maximum capacity is 768
        insufficient quota for memory: the workload requests 12290, the maximum capacity is 12288
        resource rdma/rdma_shared_device_a unavailable in ClusterQueue
        ");
    }
}
