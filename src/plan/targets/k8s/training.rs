//! The training job: torchrun on every node under Kubeflow Trainer (`trainjob.yaml` +
//! `trainingruntime.yaml`) or the training-operator (`pytorchjob.yaml`).

use serde::Serialize;

use crate::plan::cluster::Gang;
use crate::plan::workload::{TrainWorkload, MAX_RESTARTS};
use crate::plan::Common;
use crate::spec::deploy::TrainingApi;

use super::pods::{pod, volume_of, Pod, PodSettings, Port};

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

/// The training job: torchrun on every node, under the Trainer (TrainJob) or the
/// training-operator (PyTorchJob).
pub(super) fn train_plan(
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
