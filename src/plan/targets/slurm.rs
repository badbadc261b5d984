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

use crate::error::{Diagnostic, Error, Stage};
use crate::lock::Lock;
use crate::plan::workload::{
    Acceptance, Launch as WorkloadLaunch, OsuExpected, Resources, ServeWorkload, TrainWorkload,
    WorkloadImage, WorkloadPlan,
};
use crate::plan::{Common, Mount, MountKind};
use crate::render::RenderedFile;
use crate::spec::deploy::SlurmContainer;

/// The VM image's paths bare-metal jobs use: decided by the host plan.
pub use crate::plan::host::{HOST_NCCL_TESTS, HOST_VENV};

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

/// How a job step runs its program: which image, in the container runtime's syntax.
#[derive(Clone, Debug, Serialize)]
pub struct Launch {
    /// The workload's image, as the workload plan decided it.
    pub image: WorkloadImage,
    /// The reference in enroot's URI syntax, `REGISTRY#IMAGE:TAG` (pyxis).
    pub pyxis_image: String,
    /// `docker://` + the reference (Apptainer, when the image is not the `.sif`).
    pub docker_uri: String,
    /// Apptainer runs the `.sif` built from `out/apptainer/<stack>.def`.
    pub use_sif: bool,
}

/// `export NAME=…` in a script: `"${VAR}"VALUE` when `var` is set (a host directory on
/// bare metal), else the literal `VALUE`.
#[derive(Clone, Debug, Serialize)]
pub struct Export {
    /// `DATASETS_DIR`.
    pub name: String,
    /// The site variable holding the host directory.
    pub var: Option<String>,
    /// The value, or what follows the variable.
    pub value: String,
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
    /// The working directory inside the container (`--container-workdir`, `--pwd`); on
    /// bare metal the step changes to the code directory's host path.
    pub workdir: Option<String>,
    /// Variables the program reads: container paths, or on bare metal the host
    /// directory's variable.
    pub exports: Vec<Export>,
    /// CPUs per task of the main step: a number, or none for all of the node's CPUs
    /// (`$SLURM_CPUS_ON_NODE`, the node being exclusive).
    pub cpus_per_task: Option<u32>,
    /// Why the job takes what it takes, for a comment.
    pub resources_note: String,
}

/// `[train]`: torchrun.
#[derive(Clone, Debug, Serialize)]
pub struct TrainJob {
    /// The script.
    pub job: Job,
    /// The workload plan's decisions.
    pub workload: TrainWorkload,
    /// The code is on `[train].workdir` (else the directory the job is submitted from).
    pub code_on_volume: bool,
}

/// `[serve]`: vLLM.
#[derive(Clone, Debug, Serialize)]
pub struct ServeJob {
    /// The script.
    pub job: Job,
    /// The workload plan's decisions.
    pub workload: ServeWorkload,
}

/// The acceptance test.
#[derive(Clone, Debug, Serialize)]
pub struct NcclTestsJob {
    /// The script.
    pub job: Job,
    /// nccl-tests is built with MPI (the lock has Open MPI): one task per GPU, launched
    /// through PMIx; otherwise one process per node drives all its GPUs.
    pub mpi: bool,
    /// What each task runs.
    pub run: WorkloadLaunch,
    /// The nccl-tests version in the lock.
    pub version: Option<String>,
    /// The OSU bandwidth run after it, one task on each of two nodes
    /// ([`crate::plan::workload::Acceptance::osu`]).
    pub osu: Option<WorkloadLaunch>,
    /// The filter the run's output goes through ([`crate::plan::judge`]).
    pub judge: Option<crate::plan::judge::Judge>,
    /// The filter the OSU run's output goes through.
    pub osu_judge: Option<crate::plan::judge::Judge>,
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
    /// `train.sbatch`.
    pub train: Option<TrainJob>,
    /// `serve.sbatch`.
    pub serve: Option<ServeJob>,
    /// `nccl-tests.sbatch`, when the lock has nccl-tests.
    pub nccl_tests: Option<NcclTestsJob>,
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

struct Ctx<'a> {
    common: &'a Common,
    container: SlurmContainer,
    partition: Option<&'a str>,
    time: Option<&'a str>,
}

impl Ctx<'_> {
    fn launch(&self, image: &WorkloadImage) -> Launch {
        let use_sif = self.container == SlurmContainer::Apptainer
            // The layer `gen apptainer` writes the definition file for
            // ([`Common::top_image_layer`]); `tests/slurm.rs` checks that the two agree.
            && self
                .common
                .top_image_layer()
                .and_then(|l| self.common.images.get(&l))
                .is_some_and(|top| *top == image.reference);
        Launch {
            pyxis_image: enroot_uri(&image.reference),
            docker_uri: format!("docker://{}", image.reference),
            image: image.clone(),
            use_sif,
        }
    }

    fn directives(
        &self,
        name: &str,
        nodes: u32,
        tasks: u32,
        res: &Resources,
        array: Option<u32>,
    ) -> Vec<Directive> {
        let mut d = vec![
            dir("job-name", format!("{}-{name}", self.common.stack)),
            dir("nodes", nodes),
            dir("ntasks-per-node", tasks),
            dir("gres", format!("gpu:{}", res.gpus)),
            Directive {
                option: "exclusive".into(),
                value: None,
            },
        ];
        if res.given {
            d.push(dir("mem", format!("{}G", res.memory_gib)));
        }
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

    /// What the main step of a job takes, and why.
    fn cpus(res: &Resources, tasks: u32) -> (Option<u32>, String) {
        if res.given {
            (
                Some((res.cpus / tasks.max(1)).max(1)),
                format!(
                    "{} CPUs and {} GiB per node ({})",
                    res.cpus, res.memory_gib, res.note
                ),
            )
        } else {
            (
                None,
                "[cluster] gives no cpus_per_node and memory_gib_per_node: the job takes whole nodes (--exclusive), all of their CPUs and memory".into(),
            )
        }
    }

    /// Variables the program reads, in this runtime: container paths, or on bare metal the
    /// host directory's variable in place of the mount point.
    fn exports(&self, env: &[(String, String)], mounts: &[JobMount]) -> Vec<Export> {
        env.iter()
            .map(|(k, v)| {
                let host = (self.container == SlurmContainer::None)
                    .then(|| {
                        mounts.iter().find_map(|m| {
                            let rest = v.strip_prefix(&m.target)?;
                            let var = m.var.as_ref()?;
                            (rest.is_empty() || rest.starts_with('/'))
                                .then(|| (var.clone(), rest.to_string()))
                        })
                    })
                    .flatten();
                match host {
                    Some((var, rest)) => Export {
                        name: k.clone(),
                        var: Some(var),
                        value: rest,
                    },
                    None => Export {
                        name: k.clone(),
                        var: None,
                        value: v.clone(),
                    },
                }
            })
            .collect()
    }
}

type Unmounted = Vec<(String, String)>;

/// A storage mount of a job: a site variable holding the host directory (defaulting to
/// the spec's path), bind-mounted at the container path.
fn job_mount(m: &Mount, container: SlurmContainer) -> Result<Option<JobMount>, Error> {
    let origin = match (m.kind, &m.server, &m.host_path, &m.claim) {
        (MountKind::Nfs, Some(s), Some(p), _) => format!("nfs://{s}{p}"),
        (k, _, Some(p), _) => format!("{}:{p}", k.name()),
        (k, _, _, Some(c)) => format!("{}:{c}", k.name()),
        (k, _, _, _) => k.name().to_string(),
    };
    let Some(host) = m.host_path.clone() else {
        return Ok(None);
    };
    if container != SlurmContainer::None && host.contains([',', ':']) {
        return Err(bad(
            format!(
                "{} = {origin}: {} cannot mount a path with `,` or `:` (it separates mounts with `,` and their fields with `:`)",
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
    Ok(Some(JobMount {
        var: Some(format!("GPUSTACK_{}_DIR", m.name.to_uppercase())),
        literal: format!("{host}{suffix}"),
        host,
        origin,
        target: m.container_path.clone(),
        suffix,
        export: None,
        nfs: m.kind == MountKind::Nfs,
    }))
}

fn storage_mounts(
    mounts: &[Mount],
    container: SlurmContainer,
) -> Result<(Vec<JobMount>, Unmounted), Error> {
    let mut out = Vec::new();
    let mut unmounted = Vec::new();
    for m in mounts {
        match job_mount(m, container)? {
            Some(j) => out.push(j),
            None => unmounted.push((
                m.name.clone(),
                format!("pvc:{}", m.claim.clone().unwrap_or_default()),
            )),
        }
    }
    Ok((out, unmounted))
}

/// `srun` options the lock's environment needs: Slingshot's `alt_read` rendezvous
/// protocol needs the NIC's rendezvous get disabled.
fn srun_options(common: &Common) -> Vec<SrunOption> {
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
    srun_options
}

/// The expected-bandwidth file's lines: the nccl-tests figures, then the `osu_bw` figure
/// where the test runs OSU, in the unit and at the message size `osu_bw` prints.
fn expected_lines(common: &Common, osu: Option<&OsuExpected>) -> Vec<String> {
    let (nodes, gpus) = (common.nodes, common.gpus_per_node);
    let mut expected = vec![
        format!(
            "Expected all-reduce bus bandwidth for stack {} ({nodes} node(s) x {gpus} GPU(s), fabric {}), from gpustack.lock;",
            common.stack, common.fabric_name()
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
        let sharp = e
            .sharp
            .as_deref()
            .map_or_else(String::new, |s| format!(" {s}"));
        expected.push(format!(
            "{}: {} GB/s busbw ({}{size}, over {}{sharp}, measured on a {} job, nodes x GPUs)",
            e.scope, e.busbw_gbps, e.test, e.fabric, e.shape
        ));
        expected.push(format!("  source: {}", e.source));
    }
    if let Some(o) = osu {
        let size = o.size_bytes.as_deref().map_or_else(String::new, |s| {
            format!(" in the {s}-byte row of its Size column")
        });
        expected.push(format!(
            "osu_bw (one rank on each of 2 nodes, GPU buffers on both sides): {} MB/s{size} (osu_bw's MB/s is 10^6 bytes/s: {} GB/s; {} over {}, point-to-point, not a busbw)",
            o.mbps, o.gbps, o.gpu, o.fabric
        ));
        expected.push(format!("  source: {}", o.source));
    }
    expected
}

impl Ctx<'_> {
    /// The training job: the storage mounts plus the code directory.
    fn train_job(&self, w: TrainWorkload, mounts: &[JobMount]) -> Result<TrainJob, Error> {
        let mut job_mounts = mounts.to_vec();
        let code_on_volume = w.code.volume.is_some();
        let code = match &w.code.volume {
            Some(v) => job_mount(v, self.container)?,
            None => None,
        };
        // The code directory: `[train].workdir`'s host path, or the directory the job
        // is submitted from (the template's default for GPUSTACK_CODE_DIR).
        job_mounts.push(code.unwrap_or_else(|| JobMount {
            var: Some("GPUSTACK_CODE_DIR".into()),
            host: String::new(),
            origin: "the directory the job is submitted from".into(),
            target: w.code.dir.clone(),
            suffix: format!(":{}", w.code.dir),
            literal: String::new(),
            export: None,
            nfs: false,
        }));
        let (cpus_per_task, resources_note) = Ctx::cpus(&w.resources, 1);
        Ok(TrainJob {
            job: Job {
                file: "train.sbatch".into(),
                directives: self.directives("train", w.nodes, 1, &w.resources, None),
                nodes: w.nodes,
                gpus: w.resources.gpus,
                tasks_per_node: 1,
                launch: self.launch(&w.image),
                exports: self.exports(&w.env, &job_mounts),
                mounts: job_mounts,
                workdir: Some(w.code.dir.clone()),
                cpus_per_task,
                resources_note,
            },
            code_on_volume,
            workload: w,
        })
    }

    /// The vLLM job (one node): the storage mounts plus the model's.
    fn serve_job(&self, w: ServeWorkload, mounts: &[JobMount]) -> Result<ServeJob, Error> {
        if w.nodes > 1 {
            return Err(bad(
                format!("[serve].nodes = {}: a vLLM server across nodes is generated for Kubernetes only (a LeaderWorkerSet), not yet as a Slurm job", w.nodes),
                "generate `k8s` for this spec, or serve on one node (`nodes = 1`) on Slurm",
            ));
        }
        let mut job_mounts = mounts.to_vec();
        if let Some(v) = &w.model.volume {
            let mut m = job_mount(v, self.container)?.ok_or_else(|| {
                bad(
                    "[storage].models is a Kubernetes claim: Slurm jobs cannot mount it".into(),
                    "put the models on storage the nodes mount (nfs://, lustre:, hostpath:)",
                )
            })?;
            if v.name == "model" {
                // The model directory itself, at the same path: no site variable.
                m.var = None;
            }
            job_mounts.push(m);
        }
        let (cpus_per_task, resources_note) = Ctx::cpus(&w.resources, 1);
        Ok(ServeJob {
            job: Job {
                file: "serve.sbatch".into(),
                directives: self.directives("serve", 1, 1, &w.resources, Some(w.replicas)),
                nodes: 1,
                gpus: w.resources.gpus,
                tasks_per_node: 1,
                launch: self.launch(&w.image),
                exports: self.exports(&w.env, &job_mounts),
                mounts: job_mounts,
                workdir: None,
                cpus_per_task,
                resources_note,
            },
            workload: w,
        })
    }

    /// The acceptance job: all_reduce_perf, one task per GPU under MPI.
    fn nccl_tests_job(&self, a: Acceptance) -> NcclTestsJob {
        let gpus = a.resources.gpus;
        let tasks = if a.mpi { gpus } else { 1 };
        let (cpus_per_task, resources_note) = Ctx::cpus(&a.resources, tasks);
        NcclTestsJob {
            job: Job {
                file: "nccl-tests.sbatch".into(),
                directives: self.directives("nccl-tests", a.nodes, tasks, &a.resources, None),
                nodes: a.nodes,
                gpus,
                tasks_per_node: tasks,
                launch: self.launch(&a.image),
                mounts: Vec::new(),
                workdir: None,
                exports: Vec::new(),
                cpus_per_task,
                resources_note,
            },
            mpi: a.mpi,
            run: if a.mpi { a.per_gpu } else { a.per_node },
            version: a.version,
            osu: a.osu,
            judge: a.judge,
            osu_judge: a.osu_judge,
        }
    }
}

impl SlurmPlan {
    /// Plans the batch scripts from the lock and its workload plan.
    pub fn new(lock: &Lock, common: &Common) -> Result<SlurmPlan, Error> {
        let workloads = WorkloadPlan::new(lock, common)?;
        let slurm = lock.request.deploy.slurm.as_ref();
        let container = slurm.map_or(SlurmContainer::Pyxis, |s| s.container);
        let (mounts, unmounted) = storage_mounts(&common.mounts, container)?;
        let ctx = Ctx {
            common,
            container,
            partition: slurm.map(|s| s.partition.as_str()),
            time: slurm.map(|s| s.time.as_str()),
        };
        let train = (workloads.train)
            .map(|w| ctx.train_job(w, &mounts))
            .transpose()?;
        let serve = (workloads.serve)
            .map(|w| ctx.serve_job(w, &mounts))
            .transpose()?;
        let osu_expected = (workloads.acceptance.as_ref()).and_then(|a| a.osu_expected.clone());
        let nccl_tests = workloads.acceptance.map(|a| ctx.nccl_tests_job(a));
        let sif_layer = if container == SlurmContainer::Apptainer {
            common.top_image_layer().map(|l| l.name().to_string())
        } else {
            None
        };
        Ok(SlurmPlan {
            common: common.clone(),
            container: container.name().to_string(),
            partition: ctx.partition.map(str::to_string),
            time: ctx.time.map(str::to_string),
            srun_options: srun_options(common),
            unmounted,
            sif: sif_layer
                .as_ref()
                .map(|_| format!("../apptainer/{}.sif", common.stack)),
            sif_layer,
            venv: HOST_VENV.into(),
            nccl_tests_dir: HOST_NCCL_TESTS.into(),
            train,
            serve,
            nccl_tests,
            expected: expected_lines(common, osu_expected.as_ref()),
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
    ];
    if let Some(n) = &plan.nccl_tests {
        files.push(RenderedFile::new(
            n.job.file.clone(),
            r("slurm/nccl-tests.sbatch.j2", &top)?,
        ));
    }
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
