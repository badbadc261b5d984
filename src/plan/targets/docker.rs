//! The container plan: a multi-stage Dockerfile (one stage per layer), its requirement
//! files, a bake file, and the Apptainer definition of the same stack.
//!
//! Stages, bottom up (each only when the lock needs it):
//!
//! * `fabric` (devel image): the fabric stack built from source tarballs whose sha256 is
//!   checked before use, installed into `/opt/fabric`;
//! * `base` (runtime image): `/opt/fabric`, NCCL at the locked version, the fabric
//!   environment, labels;
//! * `build` (devel image): a venv with the framework layer, compiling what must be compiled
//!   (DeepSpeed ops, flash-attn) into wheels, with `TORCH_CUDA_ARCH_LIST`, `MAX_JOBS`, ccache
//!   and cache mounts;
//! * `framework` (from `base`): the locked Python (uv) and torch variant;
//! * `inference`, `training` (from `framework`): vLLM, DeepSpeed and the extras of each;
//! * `validate-build` (devel) and `validate` (from `base`): nccl-tests against the locked
//!   NCCL, CUDA and MPI.
//!
//! Every runtime stage descends from `base`, so the environment set there (NCCL, fabric,
//! `PATH`) is never dropped; `tests/docker.rs` checks this on the parsed Dockerfile.

use serde::Serialize;

use crate::error::{Diagnostic, Error, Stage as ErrStage};
use crate::lock::Lock;
use crate::plan::install::{InstallPlan, Manager};
use crate::plan::locked;
use crate::plan::Common;
use crate::render::RenderedFile;

pub use crate::plan::install::{
    ArchFile, Interpreter, PyStage, PylockPick, Requirement, SourceBuild,
};

/// The Dockerfile plan. LOAD-BEARING: `generators/docker/*.j2` print these fields.
#[derive(Clone, Debug, Serialize)]
pub struct DockerPlan {
    /// Shared values.
    pub common: Common,
    /// `nvidia/cuda:<tag>[@digest]` for runtime stages.
    pub runtime_image: String,
    /// The same for devel stages.
    pub devel_image: String,
    /// Whether the base images are pinned by digest.
    pub digest_pinned: bool,
    /// The stage `validate-build` starts from: the devel image, or `fabric` where an
    /// installer put Open MPI outside the fabric prefix.
    pub validate_build_from: String,
    /// Whether `validate-build` copies the fabric prefix in (not when it starts from
    /// `fabric`).
    pub validate_build_copies_fabric: bool,
    /// The `validate` image's SSH server and client for an `mpirun` over SSH (Kubeflow
    /// Trainer's MPI runtime), when nccl-tests is built with MPI.
    pub validate_ssh: Option<ValidateSsh>,
    /// OCI labels.
    pub labels: Vec<(String, String)>,
    /// The code image, when Kubernetes runs the training code from an image (the workload
    /// plan's [`Code::image`](crate::plan::workload::Code)).
    pub code: Option<CodeImage>,
    /// The install plan: every OS package step, pin, source build and Python layer
    /// (its fields print as the plan's own).
    #[serde(flatten)]
    pub install: InstallPlan,
}

/// The `code` stage and bake target: the training workload's image with the project
/// directory copied to the working directory.
#[derive(Clone, Debug, Serialize)]
pub struct CodeImage {
    /// The stage it starts from (the layer the training workload runs).
    pub from: String,
    /// The working directory, `/workspace`.
    pub dir: String,
    /// The tag.
    pub tag: String,
    /// The project directory relative to this directory (`out/docker`), the bake file's
    /// default for the `project` build context.
    pub project_dir: String,
}

fn bad(msg: String, hint: &str) -> Error {
    Diagnostic::new(ErrStage::Generate, msg).hint(hint).into()
}

/// The `nvidia/cuda` base images of the locked CUDA and OS, and the OS's package manager.
struct BaseImages {
    /// `nvidia/cuda:<runtime tag>[@digest]`.
    runtime: String,
    /// `nvidia/cuda:<devel tag>[@digest]`.
    devel: String,
    /// Both pinned by digest.
    digest_pinned: bool,
}

fn base_images(lock: &Lock, unverified: &mut Vec<String>) -> Result<BaseImages, Error> {
    let img = locked::cuda_image(lock).ok_or_else(|| {
        bad(
            "the lock names no `nvidia/cuda` base image".into(),
            "re-lock with `gpustack lock`",
        )
    })?;
    let repo = img.repository.as_str();
    let tag_ref = |flavour: &str, t: &locked::CudaImageTag| -> Result<String, Error> {
        let tag = t.tag.as_deref().ok_or_else(|| {
            bad(
                format!(
                    "the lock has no `{flavour}` tag of `{repo}` for CUDA {}",
                    img.version
                ),
                "add the tag to the catalog's `[[image]]` entry and re-lock",
            )
        })?;
        Ok(match &t.digest {
            Some(d) => format!("{repo}:{tag}@{d}"),
            None => format!("{repo}:{tag}"),
        })
    };
    let runtime = tag_ref("runtime", &img.runtime)?;
    let devel = tag_ref("devel", &img.devel)?;
    let digest_pinned = runtime.contains('@') && devel.contains('@');
    if !runtime.contains('@') && !devel.contains('@') {
        unverified.push(format!(
            "{repo} base images are pinned by tag only: the catalog knows no sourced digest for them"
        ));
    } else if !digest_pinned {
        let by_tag = if runtime.contains('@') {
            &devel
        } else {
            &runtime
        };
        unverified.push(format!(
            "`{by_tag}` is pinned by tag only: the catalog knows no sourced digest for it"
        ));
    }
    // A digest from the catalog's dated observation, not the registry's answer: said, with
    // the observation (`gpustack lock` with the registry reachable reads the registry's).
    for o in [&img.runtime, &img.devel]
        .into_iter()
        .filter_map(|t| t.observation.as_ref())
    {
        unverified.push(o.clone());
    }
    Ok(BaseImages {
        runtime,
        devel,
        digest_pinned,
    })
}

/// OpenSSH for the `validate` image's `mpirun` over SSH.
fn validate_ssh(manager: Manager, ssh: crate::plan::workload::MpiSsh) -> ValidateSsh {
    let (packages, source) = crate::plan::install::ssh_packages(manager);
    ValidateSsh {
        packages,
        packages_source: source.into(),
        ssh,
    }
}

/// The OCI labels, sorted.
fn labels(common: &Common, runtime_image: &str) -> Vec<(String, String)> {
    let mut labels = vec![
        (
            "org.opencontainers.image.title".to_string(),
            common.stack.clone(),
        ),
        (
            "org.opencontainers.image.description".into(),
            format!("{} GPU stack, generated by gpustack", common.stack),
        ),
        (
            "org.opencontainers.image.base.name".into(),
            runtime_image.to_string(),
        ),
        ("dev.gpustack.lock".into(), common.lock_hash.clone()),
    ];
    for (k, v) in &common.versions {
        labels.push((format!("dev.gpustack.version.{k}"), v.clone()));
    }
    labels.sort();
    labels
}

/// The code image, when the training workload runs its code from one.
fn code_image(lock: &Lock, common: &Common) -> Result<Option<CodeImage>, Error> {
    if lock.request.deploy.train.is_none() {
        return Ok(None);
    }
    let w = crate::plan::workload::WorkloadPlan::new(lock, common)?;
    Ok(w.train.and_then(|t| {
        Some(CodeImage {
            from: t.image.runs.clone(),
            dir: t.code.dir.clone(),
            tag: t.code.image?,
            project_dir: "../..".into(),
        })
    }))
}

impl DockerPlan {
    /// Plans the container build from the lock: the install plan's steps, laid out as
    /// stages.
    pub fn new(lock: &Lock, common: &Common) -> Result<DockerPlan, Error> {
        let mut unverified = Vec::new();
        let base = base_images(lock, &mut unverified)?;
        let mut install = InstallPlan::new(lock, common)?;
        // The base images' notes first, then the install plan's.
        unverified.append(&mut install.unverified);
        install.unverified = unverified;
        let validate_ssh = install
            .nccl_tests
            .as_ref()
            .and(crate::plan::workload::mpi_ssh(common))
            .map(|ssh| validate_ssh(install.os.manager, ssh));
        let labels = labels(common, &base.runtime);
        let code = code_image(lock, common)?;
        let installer = install.fabric.iter().any(|b| b.recipe == "installer");
        Ok(DockerPlan {
            code,
            common: common.clone(),
            validate_build_from: if installer {
                "fabric".to_string()
            } else {
                base.devel.clone()
            },
            runtime_image: base.runtime,
            devel_image: base.devel,
            digest_pinned: base.digest_pinned,
            validate_build_copies_fabric: !install.fabric.is_empty() && !installer,
            validate_ssh,
            labels,
            install,
        })
    }
}

/// OpenSSH in the `validate` image.
#[derive(Clone, Debug, Serialize)]
pub struct ValidateSsh {
    /// The OS packages (unpinned, from the base image's OS release, like the build tools).
    pub packages: Vec<String>,
    /// Where the package names are listed.
    pub packages_source: String,
    /// The user, port and configuration.
    pub ssh: crate::plan::workload::MpiSsh,
}

/// `out/docker/`: Dockerfile, requirement files, bake file, .dockerignore.
pub fn render(lock: &Lock, common: &Common) -> Result<Vec<RenderedFile>, Error> {
    let plan = DockerPlan::new(lock, common)?;
    #[derive(Serialize)]
    struct Top<'a> {
        plan: &'a DockerPlan,
    }
    let top = crate::render::Context::new(&Top { plan: &plan });
    let t = |name: &str| crate::render::render_with(name, &top);
    let mut files = vec![
        RenderedFile::new("Dockerfile", t("docker/Dockerfile.j2")?),
        RenderedFile::new("docker-bake.hcl", t("docker/docker-bake.hcl.j2")?),
        RenderedFile::new(".dockerignore", t("docker/dockerignore.j2")?),
    ];
    // A named prebuilt wheel is fetched, not built: no build script in the context.
    if let Some(tb) = plan
        .install
        .torch_build
        .as_ref()
        .filter(|tb| tb.builds_here())
    {
        files.push(RenderedFile::new(
            crate::plan::torch_build::SCRIPT,
            tb.script()?,
        ));
    }
    if let Some(pi) = &plan.install.python_install {
        for f in pi.layers.iter().flat_map(|l| &l.files) {
            files.push(RenderedFile::new(f.file.clone(), f.contents.clone()));
        }
        files.sort_by(|a, b| a.path.cmp(&b.path));
        return Ok(files);
    }
    if !plan.install.compiled.is_empty() {
        let compiled = PyStage {
            name: "compiled".into(),
            from: String::new(),
            requirements_file: "requirements-compiled.lock".into(),
            requirements: plan
                .install
                .compiled
                .iter()
                .filter(|r| r.sha256.is_some())
                .cloned()
                .collect(),
            indexes: Vec::new(),
            uses_build: false,
            image: String::new(),
            pylock: None,
            built: Vec::new(),
            pick: None,
        };
        if !compiled.requirements.is_empty() {
            files.push(RenderedFile::new(
                "requirements-compiled.lock",
                crate::render::render_with(
                    "docker/requirements.lock.j2",
                    &top.with("stage", &compiled),
                )?,
            ));
        }
        let fw = plan.install.stages.iter().find(|s| s.name == "framework");
        let stage = PyStage {
            name: "build".into(),
            from: String::new(),
            requirements_file: "requirements-build.lock".into(),
            requirements: plan.install.build_requirements.clone(),
            indexes: fw.map(|s| s.indexes.clone()).unwrap_or_default(),
            uses_build: false,
            image: String::new(),
            pylock: None,
            built: Vec::new(),
            pick: None,
        };
        files.push(RenderedFile::new(
            "requirements-build.lock",
            crate::render::render_with("docker/requirements.lock.j2", &top.with("stage", &stage))?,
        ));
    }
    for s in &plan.install.stages {
        files.push(RenderedFile::new(
            s.requirements_file.clone(),
            crate::render::render_with("docker/requirements.lock.j2", &top.with("stage", s))?,
        ));
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}
