//! The Python layers: uv, the interpreter, each layer's requirements or pylock, what is
//! compiled from checked sdists and the environment it is compiled in, and torch built from
//! source. The container image's stages and the VM's scripts install these same steps.

use serde::Serialize;

use super::bad;
use crate::core::compiled::compile_env;
use crate::core::{Component, Layer};
use crate::error::Error;
use crate::lock::{Lock, LockedComponent};
use crate::plan::locked::{self, PyComponent};
use crate::plan::Common;

/// A requirement line: `name==version`, with the wheel's sha256 when known.
#[derive(Clone, Debug, Serialize)]
pub struct Requirement {
    /// PyPI name.
    pub name: String,
    /// Exact version.
    pub version: String,
    /// sha256 of the wheel for the locked Python, when known.
    pub sha256: Option<String>,
    /// The wheel file that hash belongs to.
    pub wheel: Option<String>,
    /// Built in the `build` stage (installed from `/wheels`).
    pub compiled: bool,
}

/// A runtime stage above `base`.
#[derive(Clone, Debug, Serialize)]
pub struct PyStage {
    /// `framework`, `inference`, `training`.
    pub name: String,
    /// Parent stage.
    pub from: String,
    /// Its requirement file: `requirements-framework.lock`.
    pub requirements_file: String,
    /// What it installs.
    pub requirements: Vec<Requirement>,
    /// Indexes besides PyPI (the torch variant's, an extra's own), highest priority first.
    pub indexes: Vec<String>,
    /// Whether it installs wheels compiled in `build`.
    pub uses_build: bool,
    /// The image reference of this layer.
    pub image: String,
    /// The pylock file it installs (a closed lock): no requirement file, no index.
    pub pylock: Option<String>,
    /// Wheels compiled in `build` that it installs with `--no-deps` (a closed lock).
    pub built: Vec<String>,
    /// A closed lock with several platforms: how the stage puts the pylock of the
    /// platform being built under the name [`pylock`](Self::pylock).
    pub pick: Option<PylockPick>,
}

/// How a stage picks the pylock of the platform being built when the lock has several:
/// by BuildKit's automatic `TARGETARCH` build argument
/// (<https://docs.docker.com/reference/dockerfile/#automatic-platform-args-in-the-global-scope>),
/// the mapping [`PythonInstall`](crate::plan::python::PythonInstall) decided.
#[derive(Clone, Debug, Serialize)]
pub struct PylockPick {
    /// Per platform, in the lock's order: the `TARGETARCH` value and the lock's file.
    pub files: Vec<ArchFile>,
    /// The `printf` format of the error for any other `TARGETARCH` (`%s` is its value).
    pub missing: String,
}

/// A `TARGETARCH` value and the pylock file of its platform.
#[derive(Clone, Debug, Serialize)]
pub struct ArchFile {
    /// `amd64`, `arm64`.
    pub arch: String,
    /// `pylock.framework.x86_64.toml`.
    pub file: String,
}

impl PylockPick {
    /// The pick of a layer's install; `None` when the lock has one platform.
    pub(super) fn of(
        l: &crate::plan::python::LayerInstall,
        platforms: &[String],
    ) -> Option<PylockPick> {
        if l.files.len() < 2 {
            return None;
        }
        let archs: Vec<&str> = l.files.iter().map(|f| f.oci_arch.as_str()).collect();
        Some(PylockPick {
            files: l
                .files
                .iter()
                .map(|f| ArchFile {
                    arch: f.oci_arch.clone(),
                    file: f.file.clone(),
                })
                .collect(),
            missing: format!(
                "error: gpustack.lock has no pylock of the {} layer for TARGETARCH=%s (it has {})\\nhint: build with --platform {}\\n",
                l.layer,
                archs.join(", "),
                platforms.join(",")
            ),
        })
    }
}

/// The CPython build `uv python install` downloads: uv checks it against the sha256 of its
/// own download table, which the lock records.
#[derive(Clone, Debug, Serialize)]
pub struct Interpreter {
    /// `3.12.13`.
    pub version: String,
    /// python-build-standalone's archive.
    pub url: String,
    /// Its sha256.
    pub sha256: String,
    /// The CPU the build is for, as `uname -m` prints it (`x86_64`, `aarch64`).
    pub cpu: String,
    /// The closure's other CPUs, where the same stage runs on several: there the locked uv
    /// installs the same version from its own download table, which the lock does not copy.
    pub other_cpus: Vec<String>,
}

/// `FLASH_ATTN_CUDA_ARCHS` for the locked arch list: flash-attn's `setup.py` emits SASS
/// for `80`, `90`, `100`, `110` and `120` only (`add_cuda_gencodes`), so each locked target
/// maps to its major's entry (an sm_80 cubin runs on sm_86 and sm_89); flash-attn 2 does not
/// build for architectures older than Ampere. `None` when no locked target qualifies.
fn flash_attn_archs(arch_list: &[crate::core::arch::Target]) -> Option<String> {
    let mut out: Vec<u32> = arch_list
        .iter()
        .filter_map(|t| match t.cc.major {
            m @ (8..=12) => Some(m * 10),
            _ => None,
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    (!out.is_empty()).then(|| {
        out.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(";")
    })
}

/// The tools the images are built with: uv, the Dockerfile frontend, the Python uv
/// installs.
pub(super) struct Tools {
    pub(super) uv_image: Option<String>,
    pub(super) frontend: String,
    pub(super) python: Option<String>,
    pub(super) interpreter: Option<Interpreter>,
}

pub(super) fn tools(lock: &Lock) -> Result<Tools, Error> {
    let uv_image = locked::uv(lock).and_then(|u| u.by_version());
    let frontend = locked::dockerfile_frontend(lock)
        .and_then(|f| f.by_version())
        // Locks written before the frontend was locked: the tag this template needs.
        .unwrap_or_else(|| "docker/dockerfile:1.7".to_string());
    // The exact CPython build the locked uv installs (`cpython`: patch, URL and sha256
    // of uv's download table), else the locked minor.
    let interpreter = locked::cpython(lock).map(|p| Interpreter {
        version: p.version,
        url: p.url,
        sha256: p.sha256,
        cpu: p.cpu,
        other_cpus: Vec::new(),
    });
    let python = lock.component(Component::Python).map(|p| {
        interpreter
            .as_ref()
            .map_or_else(|| p.version.to_string(), |i| i.version.clone())
    });
    if python.is_some() && uv_image.is_none() {
        return Err(bad(
            "the lock has a Python but no `uv` package to install it with".into(),
            "re-lock with `gpustack lock`",
        ));
    }
    Ok(Tools {
        uv_image,
        frontend,
        python,
        interpreter,
    })
}

/// torch's source build, which compiles against the system NCCL.
pub(super) fn torch_source_build(
    lock: &Lock,
    has_nccl_dev: bool,
    unverified: &mut Vec<String>,
) -> Result<Option<crate::plan::torch_build::TorchBuildPlan>, Error> {
    let torch_build = crate::plan::torch_build::TorchBuildPlan::new(lock)?;
    if let Some(tb) = &torch_build {
        if !has_nccl_dev {
            return Err(bad(
                "a torch source build compiles against the system NCCL, but the lock pins no NCCL package".into(),
                "add `nccl = \"*\"` to [components] and re-lock",
            ));
        }
        if tb.commit.is_none() && tb.archive.is_none() {
            unverified.push(format!(
                "torch {} source: git tag {} only (the catalog records no commit or archive digest for it)",
                tb.version, tb.tag
            ));
        }
    }
    Ok(torch_build)
}

/// The Python stages above `base`, what `build` compiles, and the compilers' environment.
#[derive(Default)]
pub(super) struct PyStages {
    pub(super) stages: Vec<PyStage>,
    pub(super) compiled: Vec<Requirement>,
    pub(super) build_env: Vec<(String, String)>,
}

/// A component's requirement line: torch keeps the pin that selects the file its hash
/// belongs to; a compiled package's hash is its sdist's.
fn requirement(c: &LockedComponent, compiled: bool) -> Requirement {
    let py = PyComponent::of(c);
    let mut version = c.version.to_string();
    let mut sha256 = py.sha256.clone();
    if c.name == Component::Torch {
        // The hash belongs to one file: keep the pin that selects that file.
        // A PyPI wheel without a local version is the PyPI-default variant.
        let release = version.split('+').next().unwrap_or_default().to_string();
        let pypi = py.pypi_default
            && py
                .wheel_index
                .as_deref()
                .is_some_and(|i| i.starts_with("https://pypi.org/"));
        match py.wheel.as_deref() {
            Some(w) if w.starts_with(&format!("torch-{version}-")) => {}
            Some(w) if pypi && w.starts_with(&format!("torch-{release}-")) => {
                version = release;
            }
            _ => sha256 = None,
        }
    }
    Requirement {
        name: py.pypi_name,
        version,
        // A compiled package's hash is its sdist's (checked in `build`).
        sha256: if compiled && py.sdist.is_none() {
            None
        } else {
            sha256
        },
        wheel: py.wheel.or(py.sdist),
        compiled,
    }
}

/// One layer's requirements, its extra indexes and whether it uses `build`; what it
/// compiles joins `out`.
fn layer_requirements(
    comps: &[&LockedComponent],
    torch_built: bool,
    out: &mut PyStages,
    unverified: &mut Vec<String>,
) -> (Vec<Requirement>, Vec<String>, bool) {
    let mut reqs = Vec::new();
    let mut indexes: Vec<String> = Vec::new();
    let mut uses_build = false;
    for c in comps {
        if c.name == Component::Torch && torch_built {
            // Built in `torch-build`, installed from its wheel.
            continue;
        }
        let env = compile_env(&PyComponent::of(c).pypi_name);
        let r = requirement(c, env.is_some());
        let from_pypi = c.name == Component::Torch && !r.version.contains('+');
        if let Some(i) = PyComponent::of(c).index_url.filter(|_| !from_pypi) {
            if !i.starts_with("https://pypi.org/") && !indexes.contains(&i) {
                indexes.push(i);
            }
        }
        if let Some(env) = env {
            uses_build = true;
            for (k, v) in env {
                out.build_env.push((k.to_string(), v.to_string()));
            }
            if r.sha256.is_none() {
                unverified.push(format!(
                    "{}=={} source distribution compiled in `build` (no sha256 in the lock)",
                    r.name, r.version
                ));
            }
            out.compiled.push(r.clone());
        } else if r.sha256.is_none() {
            unverified.push(format!(
                "{}=={} wheel (no sha256 in the lock)",
                r.name, r.version
            ));
        }
        reqs.push(r);
    }
    (reqs, indexes, uses_build)
}

/// Upper layers keep torch where the framework layer put it: its pin first, and its index
/// when the pin names a variant.
fn keep_torch(
    lock: &Lock,
    stages: &[PyStage],
    reqs: &mut Vec<Requirement>,
    indexes: &mut Vec<String>,
) {
    let Some(t) = lock.component(Component::Torch) else {
        return;
    };
    let pinned = stages
        .iter()
        .find(|s| s.name == "framework")
        .and_then(|s| s.requirements.iter().find(|r| r.name == "torch"))
        .map_or_else(|| t.version.to_string(), |r| r.version.clone());
    reqs.insert(
        0,
        Requirement {
            name: "torch".into(),
            version: pinned.clone(),
            sha256: None,
            wheel: None,
            compiled: false,
        },
    );
    if let Some(i) = PyComponent::of(t)
        .index_url
        .filter(|_| pinned.contains('+'))
    {
        if !indexes.contains(&i) {
            indexes.insert(0, i);
        }
    }
}

pub(super) fn py_stages(
    lock: &Lock,
    common: &Common,
    torch_built: bool,
    unverified: &mut Vec<String>,
) -> PyStages {
    let mut out = PyStages::default();

    for layer in [Layer::Framework, Layer::Inference, Layer::Training] {
        let comps: Vec<&LockedComponent> = lock
            .components
            .iter()
            .filter(|c| c.layer == layer && c.name != Component::Python)
            .collect();
        if comps.is_empty() {
            continue;
        }
        let (mut reqs, mut indexes, uses_build) =
            layer_requirements(&comps, torch_built, &mut out, unverified);
        if layer != Layer::Framework && !torch_built {
            keep_torch(lock, &out.stages, &mut reqs, &mut indexes);
        }
        if !common.image_layers.contains(&layer) && layer != Layer::Framework {
            continue;
        }
        let name = layer.name().to_string();
        out.stages.push(PyStage {
            requirements_file: format!("requirements-{name}.lock"),
            from: layer.parent().map_or("base", Layer::name).to_string(),
            image: common.image(layer).unwrap_or_default().to_string(),
            name,
            requirements: reqs,
            indexes,
            uses_build,
            pylock: None,
            built: Vec::new(),
            pick: None,
        });
    }
    out
}

/// The lock's arch list, ccache around every compiler of the source builds and flash-attn's
/// arch list join the build environment (sorted, deduplicated); the ccache masquerade
/// directory when anything is compiled. Docker's `build` stage and Packer's compile steps
/// both pass this environment as it is.
pub(super) fn finish_build_env(
    lock: &Lock,
    common: &Common,
    pkg: &str,
    py: &mut PyStages,
) -> Option<String> {
    let build_env = &mut py.build_env;
    let ccache_path = (!py.compiled.is_empty()).then(|| {
        // The arch list of every torch extension built here (DeepSpeed's op builders read
        // it too), explicit on the build's command line rather than left to a detected
        // GPU: a build step has none.
        build_env.push((
            "TORCH_CUDA_ARCH_LIST".into(),
            common.torch_cuda_arch_list.clone(),
        ));
        // ccache wraps every compiler of the source builds: CMake projects through the
        // launcher variables, torch extensions through PYTORCH_NVCC (nvcc) and the
        // masquerade directory on PATH (gcc/g++).
        for (k, v) in [
            ("CMAKE_C_COMPILER_LAUNCHER", "ccache"),
            ("CMAKE_CXX_COMPILER_LAUNCHER", "ccache"),
            ("CMAKE_CUDA_COMPILER_LAUNCHER", "ccache"),
            ("PYTORCH_NVCC", "ccache nvcc"),
        ] {
            build_env.push((k.to_string(), v.to_string()));
        }
        if pkg == "apt" {
            "/usr/lib/ccache"
        } else {
            "/usr/lib64/ccache"
        }
        .to_string()
    });
    if py.compiled.iter().any(|r| r.name == "flash-attn") {
        // flash-attn reads its own list, not TORCH_CUDA_ARCH_LIST (setup.py `cuda_archs()`).
        if let Some(archs) = flash_attn_archs(&lock.hardware.arch_list) {
            build_env.push(("FLASH_ATTN_CUDA_ARCHS".into(), archs));
        }
    }
    build_env.sort();
    build_env.dedup();
    ccache_path
}

/// A closed lock: every stage installs its pylock, and what `build` compiles comes from its
/// locked sdist, so nothing above is unverified any more.
pub(super) fn python_install(
    lock: &Lock,
    stages: &mut [PyStage],
    unverified: &mut Vec<String>,
) -> Result<Option<crate::plan::python::PythonInstall>, Error> {
    let python_install = crate::plan::python::PythonInstall::new(lock)?;
    if let Some(pi) = &python_install {
        unverified.retain(|u| {
            !u.contains("wheel (no sha256") && !u.contains("source distribution compiled")
        });
        for s in stages.iter_mut() {
            if let Some(l) = pi.layer(&s.name) {
                s.pylock = Some(l.file.clone());
                s.pick = PylockPick::of(l, &pi.oci_platforms());
                s.built = l.built.clone();
                s.uses_build = !l.built.is_empty();
                s.indexes.clear();
            }
        }
    } else if !stages.is_empty() {
        unverified.push(
            "transitive Python dependencies: the lock has no Python closure (pylock files), so requirement files resolve them at build time".into(),
        );
    }
    Ok(python_install)
}
