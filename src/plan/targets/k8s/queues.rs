//! Kueue: its queues, flavor and topology (`kueue/*.yaml`), and the cluster plan that says
//! how Kueue admits every workload onto the nodes.

use crate::plan::cluster::{ClusterPlan, PodRequest, PodSet, Workload};
use crate::plan::workload::Resources;
use crate::plan::Common;
use crate::spec::deploy::TrainingApi;

use super::acceptance::NcclTestsPlan;
use super::pods::{Pod, PodSettings};
use super::serving::ServePlan;
use super::training::TrainPlan;
use super::NamespacePlan;

/// Kueue's files, when `[k8s].queue` is set: the queues (one local queue per namespace),
/// the flavor and the topology.
pub(super) fn kueue_files(
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

/// The workloads of the plan, for [`cluster_plan`].
pub(super) struct Parts<'a> {
    pub(super) train: Option<&'a TrainPlan>,
    pub(super) serve: Option<&'a ServePlan>,
    pub(super) nccl_tests: Option<&'a NcclTestsPlan>,
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
pub(super) fn cluster_plan(
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
