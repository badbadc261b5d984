//! The vLLM service (`vllm-*.yaml`): a Deployment or a LeaderWorkerSet, its Service,
//! autoscaler and disruption budget.

use serde::Serialize;

use crate::error::Error;
use crate::plan::cluster::Gang;
use crate::plan::workload::ServeWorkload;
use crate::plan::Common;

use super::bad;
use super::pods::{pod, volume_of, Pod, PodSettings, Port, Probes};

/// The vLLM queue gauge as the HPA reads it: `vllm:num_requests_waiting` renamed by the
/// prometheus-adapter rule written to `monitoring/prometheus-adapter-values.yaml`
/// (custom-metric names cannot hold `:`).
const HPA_METRIC: &str = "vllm_num_requests_waiting";

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

/// The vLLM service: a Deployment, or a LeaderWorkerSet of leader and worker pods when a
/// group spans nodes.
pub(super) fn serve_plan(
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
