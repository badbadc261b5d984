//! The Slurm plan (issue 6): batch scripts for the stack's workloads on a Slurm cluster.
//!
//! `out/slurm/`:
//!
//! * `train.sbatch` (with `[train]`): one `torchrun` per node, started by `srun` on every
//!   node of the allocation, rendezvous (`c10d`) on the first node;
//! * `serve.sbatch` (with `[serve]`): one vLLM server per job, a job array of
//!   `[serve].replicas` jobs;
//! * `nccl-tests.sbatch`: the acceptance test, `all_reduce_perf` across the allocation,
//!   with the expected bus bandwidth next to it (`expected-bandwidth.txt`);
//! * `env/nccl.env`: the NCCL/fabric environment (`Common::env`, the images' `ENV`),
//!   sourced by every script.
//!
//! How a step runs its program follows `[slurm].container`: pyxis/enroot
//! (`srun --container-image`, the default), Apptainer (`apptainer exec --nv`), or none (the
//! host's environment, as the Packer image installs it). Every `#SBATCH` directive comes
//! before the first command (Slurm ignores later ones); `tests/slurm.rs` checks that by
//! parsing, and runs every script on a throw-away Slurm cluster.

use serde::Serialize;

use super::Common;
use crate::deploy::SlurmContainer;
use crate::error::{Diagnostic, Error, Stage};
use crate::lock::Lock;
use crate::render::RenderedFile;
use crate::spec::{Component, Layer};

/// The VM image's paths bare-metal jobs use: decided by the host plan.
pub use super::host::{HOST_NCCL_TESTS, HOST_VENV};
/// torchrun's default rendezvous port.
pub const MASTER_PORT: u32 = 29500;
/// vLLM's default port.
pub const SERVE_PORT: u32 = 8000;

/// A bind mount of a job, or (bare metal) an exported directory.
#[derive(Clone, Debug, Serialize)]
pub struct JobMount {
    /// The site variable holding the host directory (`GPUSTACK_DATASETS_DIR`); none for a
    /// fixed host path (the model directory).
    pub var: Option<String>,
    /// The host directory: the variable's default, or the fixed path.
    pub host: String,
    /// What the spec said (`lustre:/lustre/datasets`), for the comment.
    pub origin: String,
    /// Where the workload sees it (`/data/datasets`).
    pub target: String,
    /// `:/data/datasets:ro`: what follows the host directory in a mount list.
    pub suffix: String,
    /// `host:target[:ro]` for a fixed host path.
    pub literal: String,
    /// The variable the workload reads the directory from (`DATASETS_DIR`); none for the
    /// model directory.
    pub export: Option<String>,
    /// An NFS export: assumed mounted at the export path on every node.
    pub nfs: bool,
}

/// How a job step runs its program.
#[derive(Clone, Debug, Serialize)]
pub struct Launch {
    /// The image layer it needs (`training`, `inference`, `validate`).
    pub layer: String,
    /// The image reference from the lock (the bake file's tag); none when the layer is not
    /// built or the job runs on the host.
    pub image: Option<String>,
    /// The same in enroot's URI syntax, `REGISTRY#IMAGE:TAG` (pyxis).
    pub pyxis_image: Option<String>,
    /// `docker://` + the reference (Apptainer, when the image is not the `.sif`).
    pub docker_uri: Option<String>,
    /// Apptainer runs the `.sif` built from `out/apptainer/<stack>.def`.
    pub use_sif: bool,
    /// When the lock has the layer but `[image].layers` does not build its image: the
    /// variable the user must set to a reference.
    pub image_var: Option<String>,
}

/// An `#SBATCH` option: `--<option>[=<value>]`.
#[derive(Clone, Debug, Serialize)]
pub struct Directive {
    /// `nodes`.
    pub option: String,
    /// `8`; none for a flag (`--exclusive`).
    pub value: Option<String>,
}

fn dir(option: &str, value: impl ToString) -> Directive {
    Directive {
        option: option.into(),
        value: Some(value.to_string()),
    }
}

/// One batch script.
#[derive(Clone, Debug, Serialize)]
pub struct Job {
    /// `train.sbatch`.
    pub file: String,
    /// `#SBATCH` options, in order.
    pub directives: Vec<Directive>,
    /// Nodes.
    pub nodes: u32,
    /// GPUs per node.
    pub gpus: u32,
    /// Tasks per node of the main step.
    pub tasks_per_node: u32,
    /// How the step runs its program.
    pub launch: Launch,
    /// Mounts (container) or exported directories (bare metal).
    pub mounts: Vec<JobMount>,
}

/// `[train]`: torchrun.
#[derive(Clone, Debug, Serialize)]
pub struct TrainJob {
    /// The script.
    pub job: Job,
    /// `[train].command`, one word each.
    pub command: Vec<String>,
}

/// `[serve]`: vLLM.
#[derive(Clone, Debug, Serialize)]
pub struct ServeJob {
    /// The script.
    pub job: Job,
    /// Model path or Hugging Face id.
    pub model: String,
    /// `--tensor-parallel-size`.
    pub tensor_parallel: u32,
    /// `--max-model-len`.
    pub max_model_len: u32,
    /// `[serve].replicas`: the size of the job array.
    pub replicas: u32,
}

/// The acceptance test.
#[derive(Clone, Debug, Serialize)]
pub struct NcclTestsJob {
    /// The script.
    pub job: Job,
    /// nccl-tests is built with MPI (the lock has Open MPI): one task per GPU, launched
    /// through PMIx; otherwise one process per node drives all its GPUs.
    pub mpi: bool,
    /// `all_reduce_perf -g`: GPUs each task drives.
    pub gpus_per_task: u32,
    /// The nccl-tests version in the lock.
    pub version: Option<String>,
}

/// An `srun` option the fabric environment needs.
#[derive(Clone, Debug, Serialize)]
pub struct SrunOption {
    /// `network=disable_rdzv_get` (printed after `--`).
    pub option: String,
    /// The environment variable that needs it, as `NAME=value`.
    pub because: String,
    /// Where it is documented.
    pub source: String,
}

/// The Slurm plan. LOAD-BEARING: `generators/slurm/*.j2` print these fields.
#[derive(Clone, Debug, Serialize)]
pub struct SlurmPlan {
    /// Shared values.
    pub common: Common,
    /// `pyxis`, `apptainer` or `none`.
    pub container: String,
    /// `[slurm].partition`; none without `[slurm]` (the cluster's default partition).
    pub partition: Option<String>,
    /// `[slurm].time`; none without `[slurm]` (the partition's default limit).
    pub time: Option<String>,
    /// Options every `srun` gets.
    pub srun_options: Vec<SrunOption>,
    /// `[storage]` entries Slurm jobs cannot mount (Kubernetes claims): (name, spec value).
    pub unmounted: Vec<(String, String)>,
    /// The `.sif` default path, relative to this directory (Apptainer).
    pub sif: Option<String>,
    /// The layer the Apptainer definition file builds.
    pub sif_layer: Option<String>,
    /// Bare metal: the virtual environment.
    pub venv: String,
    /// Bare metal: nccl-tests' binaries.
    pub nccl_tests_dir: String,
    /// torchrun's rendezvous port.
    pub master_port: u32,
    /// vLLM's port.
    pub serve_port: u32,
    /// `train.sbatch`.
    pub train: Option<TrainJob>,
    /// `serve.sbatch`.
    pub serve: Option<ServeJob>,
    /// `nccl-tests.sbatch`.
    pub nccl_tests: NcclTestsJob,
    /// `expected-bandwidth.txt`, line by line; the test script echoes the same lines.
    pub expected: Vec<String>,
}

fn bad(msg: String, hint: &str) -> Error {
    Diagnostic::new(Stage::Generate, msg).hint(hint).into()
}

/// `registry.example.com/ml/x:tag` in enroot's URI syntax: `registry.example.com#ml/x:tag`.
/// enroot (and so pyxis) reads `[USER@][REGISTRY#]IMAGE[:TAG]`: without the `#`, the whole
/// reference is taken for an image on Docker Hub. The first path component is a registry
/// host when it has a `.` or a `:` or is `localhost`, as in Docker's own references.
pub fn enroot_uri(reference: &str) -> String {
    match reference.split_once('/') {
        Some((host, rest)) if host.contains(['.', ':']) || host == "localhost" => {
            format!("{host}#{rest}")
        }
        _ => reference.to_string(),
    }
}

/// The layer `gen apptainer` writes the definition file for (see
/// `docker::render_apptainer`): the highest built of training, inference, framework, base.
/// `tests/slurm.rs` checks that the two agree.
fn apptainer_layer(common: &Common) -> Option<&'static str> {
    ["training", "inference", "framework", "base"]
        .into_iter()
        .find(|l| common.images.contains_key(*l))
}

struct Ctx<'a> {
    lock: &'a Lock,
    common: &'a Common,
    container: SlurmContainer,
    partition: Option<&'a str>,
    time: Option<&'a str>,
}

impl Ctx<'_> {
    fn launch(&self, layer: Layer) -> Launch {
        let name = layer.name().to_string();
        if self.container == SlurmContainer::None {
            return Launch {
                layer: name,
                image: None,
                pyxis_image: None,
                docker_uri: None,
                use_sif: false,
                image_var: None,
            };
        }
        // The layer's own image when the lock has the layer (none when [image].layers does
        // not build it: the layers below lack what it adds); otherwise the nearest built
        // layer below, which has everything the lock has (no DeepSpeed: no training layer,
        // and the framework image runs torchrun).
        let image = if self.lock.layer(layer).is_some() {
            self.common.images.get(layer.name()).cloned()
        } else {
            self.common.image(layer).map(str::to_string)
        };
        let image_var = image
            .is_none()
            .then(|| format!("GPUSTACK_{}_IMAGE", name.to_uppercase()));
        let use_sif = self.container == SlurmContainer::Apptainer
            && image.is_some()
            && apptainer_layer(self.common)
                .and_then(|l| self.common.images.get(l))
                .is_some_and(|top| Some(top) == image.as_ref());
        Launch {
            layer: name,
            pyxis_image: image.as_deref().map(enroot_uri),
            docker_uri: image.as_ref().map(|i| format!("docker://{i}")),
            image,
            use_sif,
            image_var,
        }
    }

    fn directives(
        &self,
        name: &str,
        nodes: u32,
        tasks: u32,
        gpus: u32,
        array: Option<u32>,
    ) -> Vec<Directive> {
        let mut d = vec![
            dir("job-name", format!("{}-{name}", self.common.stack)),
            dir("nodes", nodes),
            dir("ntasks-per-node", tasks),
            dir("gres", format!("gpu:{gpus}")),
            Directive {
                option: "exclusive".into(),
                value: None,
            },
        ];
        if let Some(p) = self.partition {
            d.push(dir("partition", p));
        }
        if let Some(t) = self.time {
            d.push(dir("time", t));
        }
        match array {
            Some(n) if n > 1 => {
                d.push(dir("array", format!("0-{}", n - 1)));
                d.push(dir("output", "%x-%A_%a.out"));
                d.push(dir("error", "%x-%A_%a.err"));
            }
            _ => {
                d.push(dir("output", "%x-%j.out"));
                d.push(dir("error", "%x-%j.err"));
            }
        }
        d
    }
}

type Unmounted = Vec<(String, String)>;

fn storage_mounts(
    common: &Common,
    container: SlurmContainer,
) -> Result<(Vec<JobMount>, Unmounted), Error> {
    let mut mounts = Vec::new();
    let mut unmounted = Vec::new();
    for m in &common.mounts {
        let origin = match (m.kind.as_str(), &m.server, &m.host_path, &m.claim) {
            ("nfs", Some(s), Some(p), _) => format!("nfs://{s}{p}"),
            (k, _, Some(p), _) => format!("{k}:{p}"),
            (k, _, _, Some(c)) => format!("{k}:{c}"),
            (k, _, _, _) => k.to_string(),
        };
        let Some(host) = m.host_path.clone() else {
            unmounted.push((m.name.clone(), origin));
            continue;
        };
        if container != SlurmContainer::None && host.contains([',', ':']) {
            return Err(bad(
                format!(
                    "[storage].{} = {origin}: {} cannot mount a path with `,` or `:` (it separates mounts with `,` and their fields with `:`)",
                    m.name,
                    container.name()
                ),
                "mount the storage at a path without `,` and `:`, and re-lock",
            ));
        }
        let suffix = format!(
            ":{}{}",
            m.container_path,
            if m.read_only { ":ro" } else { "" }
        );
        mounts.push(JobMount {
            var: Some(format!("GPUSTACK_{}_DIR", m.name.to_uppercase())),
            literal: format!("{host}{suffix}"),
            host,
            origin,
            target: m.container_path.clone(),
            suffix,
            export: Some(format!("{}_DIR", m.name.to_uppercase())),
            nfs: m.kind == "nfs",
        });
    }
    Ok((mounts, unmounted))
}

impl SlurmPlan {
    /// Plans the batch scripts from the lock.
    pub fn new(lock: &Lock, common: &Common) -> Result<SlurmPlan, Error> {
        let deploy = &lock.request.deploy;
        let slurm = deploy.slurm.as_ref();
        let container = slurm.map_or(SlurmContainer::Pyxis, |s| s.container);
        let (mounts, unmounted) = storage_mounts(common, container)?;
        let ctx = Ctx {
            lock,
            common,
            container,
            partition: slurm.map(|s| s.partition.as_str()),
            time: slurm.map(|s| s.time.as_str()),
        };

        let mut srun_options = Vec::new();
        if let Some(e) = common
            .env
            .iter()
            .find(|e| e.name == "FI_CXI_RDZV_PROTO" && e.value == "alt_read")
        {
            srun_options.push(SrunOption {
                option: "network=disable_rdzv_get".into(),
                because: format!("{}={}", e.name, e.value),
                source: e.source.clone(),
            });
        }

        let gpus = common.gpus_per_node;
        let nodes = common.nodes;

        let train = match &deploy.train {
            None => None,
            Some(t) => {
                if lock.component(Component::Torch).is_none() {
                    return Err(bad(
                        "[train] runs torchrun, but the lock has no torch".into(),
                        "add `torch = \"*\"` to [components] and re-lock",
                    ));
                }
                Some(TrainJob {
                    job: Job {
                        file: "train.sbatch".into(),
                        directives: ctx.directives("train", nodes, 1, gpus, None),
                        nodes,
                        gpus,
                        tasks_per_node: 1,
                        launch: ctx.launch(Layer::Training),
                        mounts: mounts.clone(),
                    },
                    command: t.command.clone(),
                })
            }
        };

        let serve = match &deploy.serve {
            None => None,
            Some(s) => {
                if lock.component(Component::Vllm).is_none() {
                    return Err(bad(
                        "[serve] runs vLLM, but the lock has no vllm".into(),
                        "add `vllm = \"*\"` to [components] and re-lock",
                    ));
                }
                if s.tensor_parallel > gpus {
                    return Err(bad(
                        format!(
                            "[serve].tensor_parallel = {} is more than the {gpus} GPUs of a node: gen slurm runs each vLLM server on one node",
                            s.tensor_parallel
                        ),
                        "lower `tensor_parallel` to at most [cluster].gpus_per_node",
                    ));
                }
                let mut job_mounts = mounts.clone();
                if s.model.starts_with('/') {
                    if container != SlurmContainer::None && s.model.contains([',', ':']) {
                        return Err(bad(
                            format!(
                                "[serve].model = {}: {} cannot mount a path with `,` or `:`",
                                s.model,
                                container.name()
                            ),
                            "move the model to a path without `,` and `:`",
                        ));
                    }
                    job_mounts.push(JobMount {
                        var: None,
                        host: s.model.clone(),
                        origin: "[serve].model".into(),
                        target: s.model.clone(),
                        suffix: format!(":{}:ro", s.model),
                        literal: format!("{0}:{0}:ro", s.model),
                        export: None,
                        nfs: false,
                    });
                }
                Some(ServeJob {
                    job: Job {
                        file: "serve.sbatch".into(),
                        directives: ctx.directives(
                            "serve",
                            1,
                            1,
                            s.tensor_parallel,
                            Some(s.replicas),
                        ),
                        nodes: 1,
                        gpus: s.tensor_parallel,
                        tasks_per_node: 1,
                        launch: ctx.launch(Layer::Inference),
                        mounts: job_mounts,
                    },
                    model: s.model.clone(),
                    tensor_parallel: s.tensor_parallel,
                    max_model_len: s.max_model_len,
                    replicas: s.replicas,
                })
            }
        };

        // nccl-tests is built with MPI when the lock has Open MPI (see the Dockerfile's
        // validate stage): then one task per GPU, wired up by PMIx.
        let mpi = common.packages.contains_key("openmpi");
        let tasks = if mpi { gpus } else { 1 };
        let per_task_gpus = if mpi { 1 } else { gpus };
        let nccl_tests = NcclTestsJob {
            job: Job {
                file: "nccl-tests.sbatch".into(),
                directives: ctx.directives("nccl-tests", nodes, tasks, gpus, None),
                nodes,
                gpus,
                tasks_per_node: tasks,
                launch: ctx.launch(Layer::Validate),
                mounts: Vec::new(),
            },
            mpi,
            gpus_per_task: per_task_gpus,
            version: common.packages.get("nccl-tests").cloned(),
        };

        let mut expected = vec![
            format!(
                "Expected all-reduce bus bandwidth for stack {} ({nodes} node(s) x {gpus} GPU(s), fabric {}), from gpustack.lock;",
                common.stack, common.fabric
            ),
            "each figure names the test and job shape that measured it. Compare with the busbw column".into(),
            "of all_reduce_perf at the largest message sizes.".into(),
        ];
        if common.expected.is_empty() {
            expected.push("The lock has no published figure for this GPU and fabric: record the first run as the baseline.".into());
        }
        for e in &common.expected {
            let size = e
                .size
                .as_deref()
                .map_or_else(String::new, |s| format!(", messages up to {s}"));
            expected.push(format!(
                "{}: {} GB/s busbw ({}{size}, over {}, measured on a {} job, nodes x GPUs)",
                e.scope, e.busbw_gbps, e.test, e.fabric, e.shape
            ));
            expected.push(format!("  source: {}", e.source));
        }

        let sif_layer = if container == SlurmContainer::Apptainer {
            apptainer_layer(common).map(str::to_string)
        } else {
            None
        };
        Ok(SlurmPlan {
            common: common.clone(),
            container: container.name().to_string(),
            partition: ctx.partition.map(str::to_string),
            time: ctx.time.map(str::to_string),
            srun_options,
            unmounted,
            sif: sif_layer
                .as_ref()
                .map(|_| format!("../apptainer/{}.sif", common.stack)),
            sif_layer,
            venv: HOST_VENV.into(),
            nccl_tests_dir: HOST_NCCL_TESTS.into(),
            master_port: MASTER_PORT,
            serve_port: SERVE_PORT,
            train,
            serve,
            nccl_tests,
            expected,
        })
    }
}

/// `out/slurm/`: the batch scripts, the NCCL environment, the expected bandwidth.
pub fn render(lock: &Lock, common: &Common) -> Result<Vec<RenderedFile>, Error> {
    let plan = SlurmPlan::new(lock, common)?;
    #[derive(Serialize)]
    struct Top<'a> {
        plan: &'a SlurmPlan,
    }
    let top = crate::render::Context::new(&Top { plan: &plan });
    let r = crate::render::render_with;
    let mut files = vec![
        RenderedFile::new("env/nccl.env", r("slurm/nccl.env.j2", &top)?),
        // Plain text, not interpreted by anything: the same lines the test script echoes.
        RenderedFile::new("expected-bandwidth.txt", plan.expected.join("\n") + "\n"),
        RenderedFile::new(
            plan.nccl_tests.job.file.clone(),
            r("slurm/nccl-tests.sbatch.j2", &top)?,
        ),
    ];
    if let Some(t) = &plan.train {
        files.push(RenderedFile::new(
            t.job.file.clone(),
            r("slurm/train.sbatch.j2", &top)?,
        ));
    }
    if let Some(s) = &plan.serve {
        files.push(RenderedFile::new(
            s.job.file.clone(),
            r("slurm/serve.sbatch.j2", &top)?,
        ));
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::enroot_uri;

    #[test]
    fn enroot_uris_separate_the_registry() {
        assert_eq!(
            enroot_uri("registry.example.com/ml/x:training-abc"),
            "registry.example.com#ml/x:training-abc"
        );
        assert_eq!(
            enroot_uri("localhost/gpustack/x:base-1"),
            "localhost#gpustack/x:base-1"
        );
        assert_eq!(enroot_uri("localhost:5000/x:y"), "localhost:5000#x:y");
        assert_eq!(enroot_uri("team/x:y"), "team/x:y");
    }
}
