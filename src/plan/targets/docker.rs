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

use crate::core::compiled::compile_env;
use crate::core::{Component, Layer};
use crate::error::{Diagnostic, Error, Stage as ErrStage};
use crate::lock::{Lock, LockedComponent};
use crate::plan::locked::{self, HostPackage, PyComponent, SourcePackage};
use crate::plan::Common;
use crate::render::RenderedFile;

/// A source tarball built in the `fabric` or `validate-build` stage.
#[derive(Clone, Debug, Serialize)]
pub struct SourceBuild {
    /// `ucx`.
    pub name: String,
    /// `1.22.0`.
    pub version: String,
    /// Download URL.
    pub url: String,
    /// Local file name: `ucx-1.22.0.tar.gz`.
    pub file: String,
    /// The published sha256, when the catalog has it.
    pub sha256: Option<String>,
    /// The git commit when `url` is a repository: fetched by commit and checked out, so
    /// git verifies the content by its hash (a source without a published checksum).
    pub commit: Option<String>,
    /// `autotools`, `cmake`, `make`, `headers` (directories of the tarball copied into
    /// the fabric prefix) or `installer` (AWS's `efa_installer.sh`, run in the `fabric`
    /// stage, the `base` stage and on the VM).
    pub recipe: String,
    /// Arguments to `./configure`, `cmake`, `make` or the installer (one shell word each).
    pub args: Vec<String>,
    /// The installer's arguments on a VM image (recipe `installer`), where the kernel
    /// module is installed too; the container's otherwise.
    pub vm_args: Vec<String>,
    /// `make` target that installs (recipe `make`).
    pub install_target: Option<String>,
    /// Where the catalog found it.
    pub source: String,
    /// Where the build flags come from (the project's configure script or a reference
    /// build), when gpustack passes more than the prefix and CUDA.
    pub flags_source: Option<&'static str>,
}

/// The documents the build flags of [`source_build`] follow (on the CXI stack, UCX's and
/// Open MPI's are the Alps build's).
fn flags_source(name: &str, common: &Common) -> Option<&'static str> {
    let cxi = common.packages.contains_key("libcxi");
    Some(match name {
        "ucx" if cxi => "https://github.com/eth-cscs/alps-extended-images/blob/5cb95a6df1dfd10016bb07b15a0a2296a4b661bb/Alps-Images/common/install-alps-hpc-stack.sh (build_ucx)",
        "ucc" => "https://github.com/eth-cscs/alps-extended-images/blob/5cb95a6df1dfd10016bb07b15a0a2296a4b661bb/Alps-Images/common/install-alps-hpc-stack.sh (build_ucc) ; https://github.com/openucx/ucc/blob/87ee888b78d12d797ac8288c8214c7cb86c8bd8c/config/m4/nccl.m4 (--with-nccl)",
        "openmpi" if cxi => "https://github.com/eth-cscs/alps-extended-images/blob/5cb95a6df1dfd10016bb07b15a0a2296a4b661bb/Alps-Images/common/install-alps-hpc-stack.sh (build_ompi5)",
        "cassini-headers" | "cxi-driver" | "libcxi" => "https://github.com/eth-cscs/alps-extended-images/blob/f305f43d9dd0fee4d2761b705eafea90a0b531b1/Alps-Images/common/install-alps-hpc-stack.sh (build_cxi_bits) ; https://github.com/HewlettPackard/shs-libcxi/blob/4b7fc964bf5065539a631abf425ba5a1a340e5ba/configure.ac",
        "libfabric" => "https://github.com/ofiwg/libfabric/blob/main/prov/cxi/configure.m4 ; https://github.com/eth-cscs/alps-extended-images/blob/f305f43d9dd0fee4d2761b705eafea90a0b531b1/Alps-Images/common/install-alps-hpc-stack.sh (build_libfabric)",
        "xpmem" => "https://github.com/eth-cscs/alps-extended-images/blob/f305f43d9dd0fee4d2761b705eafea90a0b531b1/Alps-Images/common/install-alps-hpc-stack.sh (build_xpmem) ; https://github.com/hpc/xpmem/blob/3bcab55479489fdd93847fa04c58ab16e9c0b3fd/m4/ac_path_kernel_source.m4",
        "osu-micro-benchmarks" => "https://github.com/spack/spack-packages/blob/00caeea401b3dc9b5daa89f23d5edab008fabd99/repos/spack_repo/builtin/packages/osu_micro_benchmarks/package.py (configure_args, setup_build_environment)",
        "ucx" => "https://openucx.readthedocs.io/en/master/running.html (./contrib/configure-release --with-verbs --with-rdmacm)",
        "nccl-rdma-sharp-plugins" => "https://github.com/Mellanox/nccl-rdma-sharp-plugins/blob/2f5ac02e164336044388b7f1f6242cc0db575fec/m4/sharp.m4 (--with-sharp=DIR) ; https://github.com/Mellanox/nccl-rdma-sharp-plugins/blob/2f5ac02e164336044388b7f1f6242cc0db575fec/.ci/build_nccl_rdma_sharp_plugins.sh",
        "hpcx" => "https://docs.nvidia.com/networking/display/SHARPv320/Setting+up+NVIDIA+SHARP+Environment (HPCX_SHARP_DIR: HPC-X's sharp directory)",
        "efa-installer" => "https://github.com/aws-samples/awsome-distributed-training/blob/7988de6df1a319c47e2c927cc97fa285ea5a1d56/micro-benchmarks/nccl-tests/nccl-tests.Dockerfile (container) ; https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-start-nccl.html (VM: ./efa_installer.sh -y)",
        _ => return None,
    })
}

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
    fn of(l: &crate::plan::python::LayerInstall, platforms: &[String]) -> Option<PylockPick> {
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
    /// `apt` or `dnf`.
    pub pkg: String,
    /// NCCL runtime package pin (`libnccl2=2.27.5-1+cuda12.8`).
    pub nccl_runtime: Option<String>,
    /// NCCL development package pin.
    pub nccl_dev: Option<String>,
    /// The fabric stack.
    pub fabric: Vec<SourceBuild>,
    /// Installers of the fabric stack that also run in the `base` stage: their system
    /// packages (rdma-core, libfabric, Open MPI of the EFA installer) are not under the
    /// prefix the `fabric` stage's copy carries.
    pub runtime_installers: Vec<SourceBuild>,
    /// The stage `validate-build` starts from: the devel image, or `fabric` where an
    /// installer put Open MPI outside the fabric prefix.
    pub validate_build_from: String,
    /// Whether `validate-build` copies the fabric prefix in (not when it starts from
    /// `fabric`).
    pub validate_build_copies_fabric: bool,
    /// OS packages the fabric build needs (unpinned build tools).
    pub fabric_build_deps: Vec<String>,
    /// The `fabric` stage installs the locked NCCL ([`nccl_runtime`](Self::nccl_runtime),
    /// [`nccl_dev`](Self::nccl_dev)): UCC's NCCL layer (`--with-nccl`) builds against it.
    pub fabric_nccl: bool,
    /// OS packages the fabric stack needs at run time.
    pub fabric_runtime_deps: Vec<String>,
    /// `uv` image with digest.
    pub uv_image: Option<String>,
    /// The Dockerfile syntax frontend (`# syntax=`), by digest where the lock has one: the
    /// lock's `dockerfile-frontend` package, or the tag the Dockerfile was written for.
    pub frontend: String,
    /// The Python `uv python install` installs: the exact patch the lock pins (`3.12.13`),
    /// else the locked minor (`3.12`).
    pub python: Option<String>,
    /// The CPython build of that patch, when the lock pins one.
    pub interpreter: Option<Interpreter>,
    /// Framework, inference, training stages present.
    pub stages: Vec<PyStage>,
    /// Components compiled in `build`, with their build environment.
    pub compiled: Vec<Requirement>,
    /// What the `build` stage installs before compiling: the framework layer without the
    /// compiled components.
    pub build_requirements: Vec<Requirement>,
    /// Build environment of every source build of Python packages (the Dockerfile's
    /// `build` stage, Packer's `install.sh`): the components' own switches
    /// (`DS_BUILD_FUSED_ADAM=1`), ccache as the compiler launcher (CMake's
    /// `CMAKE_<LANG>_COMPILER_LAUNCHER`, torch's `PYTORCH_NVCC`) and flash-attn's
    /// `FLASH_ATTN_CUDA_ARCHS` from the lock's arch list.
    pub build_env: Vec<(String, String)>,
    /// ccache's compiler masquerade directory, put first on `PATH` in every source build
    /// (`/usr/lib/ccache` on Debian/Ubuntu, `/usr/lib64/ccache` on EL); `None` when nothing
    /// is compiled.
    pub ccache_path: Option<String>,
    /// nccl-tests build.
    pub nccl_tests: Option<SourceBuild>,
    /// The `validate` image's SSH server and client for an `mpirun` over SSH (Kubeflow
    /// Trainer's MPI runtime), when nccl-tests is built with MPI.
    pub validate_ssh: Option<ValidateSsh>,
    /// OCI labels.
    pub labels: Vec<(String, String)>,
    /// Lines saying what is not verified (printed as comments).
    pub unverified: Vec<String>,
    /// The code image, when Kubernetes runs the training code from an image (the workload
    /// plan's [`Code::image`](crate::plan::workload::Code)).
    pub code: Option<CodeImage>,
    /// The Python closure's install plan (a closed lock); `None` for an open lock, whose
    /// stages install requirement files.
    pub python_install: Option<crate::plan::python::PythonInstall>,
    /// A closed lock with several platforms: how the `build` and `torch-build` stages pick
    /// the platform's `pylock.build.toml`.
    pub build_pick: Option<PylockPick>,
    /// The OCI platforms the bake file builds every image for (a closed lock: its
    /// closure's platforms); empty for an open lock, which records no CPU architecture.
    pub platforms: Vec<String>,
    /// torch built from source in the `torch-build` stage (`build = "source"` in the lock);
    /// the framework stage installs its wheel with `--no-deps`.
    pub torch_build: Option<crate::plan::torch_build::TorchBuildPlan>,
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

fn bad(msg: String, hint: &str) -> Error {
    Diagnostic::new(ErrStage::Generate, msg).hint(hint).into()
}

fn source_build(p: &SourcePackage, common: &Common) -> Result<SourceBuild, Error> {
    let url = p.url.as_deref().ok_or_else(|| {
        bad(
            format!(
                "package `{}` {} has no download URL in the lock",
                p.name, p.version
            ),
            "add `url` to its catalog entry and re-lock",
        )
    })?;
    let ext = [".tar.gz", ".tar.bz2", ".tgz", ".tbz", ".tar.xz"]
        .iter()
        .find(|e| url.ends_with(*e))
        .copied()
        .unwrap_or(".tar.gz");
    let file = format!("{}-{}{ext}", p.name, p.version);
    let Some((recipe, args, install_target)) = cxi_stack_recipe(&p.name, common)
        .or_else(|| host_stack_recipe(&p.name, common))
        .or_else(|| comm_recipe(&p.name, common))
    else {
        return Err(bad(
            format!(
                "gpustack does not know how to build `{}` from source",
                p.name
            ),
            "report this: every package the lock selects needs a build recipe",
        ));
    };
    // On a VM image the installer installs everything, as AWS's "Get started with EFA
    // and NCCL" runs it; every other recipe builds the same way on a VM.
    let vm_args = if p.name == "efa-installer" {
        vec!["-y".to_string()]
    } else {
        args.clone()
    };
    Ok(SourceBuild {
        name: p.name.clone(),
        version: p.version.clone(),
        url: url.to_string(),
        file,
        sha256: p.sha256.clone(),
        commit: p.commit.clone(),
        recipe: recipe.into(),
        install_target: install_target.map(str::to_string),
        source: p.source.clone(),
        flags_source: flags_source(&p.name, common),
        vm_args,
        args,
    })
}

/// A build recipe: `autotools`, `cmake`, `make`, `headers` or `installer`, its arguments,
/// and the `make` target that installs (recipe `make`).
type Recipe = (&'static str, Vec<String>, Option<&'static str>);

/// The recipes of the host-facing stack: the EFA installer, rdma-core, the CXI headers and
/// libcxi, UCX and GDRCopy, each installed into the fabric prefix.
fn host_stack_recipe(name: &str, common: &Common) -> Option<Recipe> {
    let f = common.fabric_prefix.as_str();
    let has = |name: &str| common.packages.contains_key(name);
    let prefix = format!("--prefix={f}");
    Some(match name {
        // In a container: no kernel module, no ulimit configuration, no check of the
        // (absent) device; GPUDirect-capable packages (AWS's container sample). On a VM
        // image: everything, as AWS's "Get started with EFA and NCCL" runs it.
        "efa-installer" => (
            "installer",
            [
                "-y",
                "-g",
                "-d",
                "--skip-kmod",
                "--skip-limit-conf",
                "--no-verify",
            ]
            .map(String::from)
            .to_vec(),
            None,
        ),
        "rdma-core" => (
            "cmake",
            vec![
                format!("-DCMAKE_INSTALL_PREFIX={f}"),
                "-DNO_PYVERBS=1".into(),
                "-DNO_MAN_PAGES=1".into(),
                "-DCMAKE_BUILD_TYPE=Release".into(),
            ],
            None,
        ),
        // Headers only (the Alps build copies these directories): `include` and `share`
        // of the Cassini headers, `include` of the CXI driver (its UAPI headers).
        "cassini-headers" => ("headers", vec!["include".into(), "share".into()], None),
        "cxi-driver" => ("headers", vec!["include".into()], None),
        // libcxi's configure.ac takes the CUDA directory; the headers above are found
        // through CPPFLAGS (Alps installs them into /usr/include instead).
        "libcxi" => (
            "autotools",
            vec![
                prefix,
                "--with-cuda=/usr/local/cuda".into(),
                format!("CPPFLAGS=-I{f}/include"),
            ],
            None,
        ),
        "ucx" => {
            // Verbs and RDMA CM from the distribution's rdma-core (the one rdma-core).
            let mut a = vec![
                prefix,
                "--with-cuda=/usr/local/cuda".to_string(),
                "--enable-mt".into(),
                "--disable-assertions".into(),
                "--with-verbs".into(),
                "--with-rdmacm".into(),
            ];
            if has("gdrcopy") {
                a.push(format!("--with-gdrcopy={f}"));
            }
            ("autotools", a, None)
        }
        // The library only, as the Alps build configures it: the kernel module is the
        // host's.
        "xpmem" => (
            "autotools",
            vec![prefix, "--disable-kernel-module".into()],
            None,
        ),
        "gdrcopy" => (
            "make",
            vec![format!("prefix={f}"), "CUDA=/usr/local/cuda".into()],
            Some("lib_install"),
        ),
        // SHARP (`[network].sharp`): only HPC-X's `sharp` directory (SHARP's libraries and
        // headers) is copied, to the plan's SHARP prefix; the plugin is built against it.
        "hpcx" => ("headers", vec![crate::plan::SHARP_DIR.into()], None),
        // NVIDIA's NCCL SHARP plugin (configure.ac and m4/sharp.m4 at the pinned commit):
        // `--with-sharp=DIR` requires SHARP (configure fails without it rather than build
        // the IB plugin alone); verbs from the distribution's rdma-core (the default
        // `/usr`); no UCX plugin (`--without-ucx`: NCCL's transport is the plugin's IB one).
        // The SHARP libraries find each other at link time through `-rpath-link`, as the
        // plugin's CI finds them through HPC-X's loaded environment (`hpcx_load`).
        "nccl-rdma-sharp-plugins" => {
            let sharp = crate::plan::sharp_prefix(f);
            (
                "autotools",
                vec![
                    prefix,
                    "--with-cuda=/usr/local/cuda".into(),
                    format!("--with-sharp={sharp}"),
                    "--without-ucx".into(),
                    format!("LDFLAGS=-Wl,-rpath-link,{sharp}/lib"),
                ],
                None,
            )
        }
        _ => return None,
    })
}

/// The recipes the CXI stack builds as the Alps images do and no other stack builds that
/// way: UCX (ahead of the host stack's InfiniBand UCX) and UCC.
fn cxi_stack_recipe(name: &str, common: &Common) -> Option<Recipe> {
    let f = common.fabric_prefix.as_str();
    let has = |name: &str| common.packages.contains_key(name);
    if !has("libcxi") {
        return None;
    }
    let prefix = format!("--prefix={f}");
    Some(match name {
        // UCX on the CXI stack, as the Alps build configures it (build_ucx): CUDA,
        // GDRCopy, thread support and the development headers; no verbs (no rdma-core on
        // Slingshot). UCX carries UCC's point-to-point layer, not NCCL's or MPI's traffic
        // over CXI (Open MPI takes the OFI MTL there).
        "ucx" => {
            let mut a = vec![prefix, "--with-cuda=/usr/local/cuda".to_string()];
            if has("gdrcopy") {
                a.push(format!("--with-gdrcopy={f}"));
            }
            a.push("--enable-mt".into());
            a.push("--enable-devel-headers".into());
            ("autotools", a, None)
        }
        // UCC as the Alps build configures it (build_ucc): over UCX, with its CUDA and NCCL
        // transport layers (`--with-nccl`: the locked NCCL, which the `fabric` stage
        // installs for it, in the compiler's default paths; configure fails without it);
        // kernels for the locked GPUs (Alps names sm_90 and sm_90a, its GH200s).
        "ucc" => (
            "autotools",
            vec![
                prefix,
                format!("--with-ucx={f}"),
                "--with-cuda=/usr/local/cuda".into(),
                format!("--with-nvcc-gencode={}", common_gencode(common)),
                "--with-nccl".into(),
            ],
            None,
        ),
        _ => return None,
    })
}

/// The recipes of the communication stack and its tests: Open MPI, libfabric,
/// aws-ofi-nccl, the OSU micro-benchmarks and nccl-tests.
fn comm_recipe(name: &str, common: &Common) -> Option<Recipe> {
    let f = common.fabric_prefix.as_str();
    let has = |name: &str| common.packages.contains_key(name);
    let prefix = format!("--prefix={f}");
    Some(match name {
        "openmpi" => {
            let mut a = vec![prefix, "--with-cuda=/usr/local/cuda".to_string()];
            if has("ucx") {
                a.push(format!("--with-ucx={f}"));
            }
            if has("libfabric") {
                a.push(format!("--with-ofi={f}"));
            }
            if has("libcxi") {
                // The rest of the Alps build's flags (build_ompi5): UCC's collectives,
                // OpenSHMEM (over UCX), libcuda from CUDA's stubs (no driver in a build).
                if has("ucc") {
                    a.push(format!("--with-ucc={f}"));
                }
                a.push("--enable-oshmem".into());
                a.push("--with-cuda-libdir=/usr/local/cuda/lib64/stubs".into());
            }
            ("autotools", a, None)
        }
        "libfabric" => {
            let mut a = vec![prefix, "--with-cuda=/usr/local/cuda".to_string()];
            if has("libcxi") {
                // The CXI provider (libfabric's prov/cxi/configure.m4): libcxi's prefix,
                // the Cassini and CXI UAPI header directories; CUDA and GDRCopy loaded
                // at run time, as the Alps build configures it.
                a.extend([
                    format!("--enable-cxi={f}"),
                    format!("--with-cassini-headers={f}"),
                    format!("--with-cxi-uapi-headers={f}"),
                    "--enable-cuda-dlopen".into(),
                ]);
                if has("gdrcopy") {
                    a.push(format!("--with-gdrcopy={f}"));
                    a.push("--enable-gdrcopy-dlopen".into());
                }
                if has("xpmem") {
                    a.push(format!("--enable-xpmem={f}"));
                }
            }
            ("autotools", a, None)
        }
        "aws-ofi-nccl" if has("efa-installer") => (
            "autotools",
            vec![
                prefix,
                format!("--with-libfabric={}", crate::plan::EFA_LIBFABRIC),
                "--with-cuda=/usr/local/cuda".into(),
                format!("--with-mpi={}", crate::plan::EFA_OPENMPI),
                "--enable-platform-aws".into(),
            ],
            None,
        ),
        "aws-ofi-nccl" => (
            "autotools",
            vec![
                prefix,
                format!("--with-libfabric={f}"),
                "--with-cuda=/usr/local/cuda".into(),
                format!("--with-mpi={f}"),
            ],
            None,
        ),
        // Spack's configure_args with +cuda: the MPI compiler wrappers and CUDA; the
        // driver's libcuda from CUDA's stubs at link time (no driver in a build).
        "osu-micro-benchmarks" => (
            "autotools",
            vec![
                prefix,
                format!("CC={f}/bin/mpicc"),
                format!("CXX={f}/bin/mpicxx"),
                "--enable-cuda".into(),
                "--with-cuda=/usr/local/cuda".into(),
                "LDFLAGS=-L/usr/local/cuda/lib64/stubs".into(),
            ],
            None,
        ),
        "nccl-tests" => {
            let mut a = vec![
                "CUDA_HOME=/usr/local/cuda".to_string(),
                "NCCL_HOME=/usr".into(),
                format!("NVCC_GENCODE={}", common_gencode(common)),
            ];
            if let Some(m) = &common.mpi_prefix {
                a.push("MPI=1".into());
                a.push(format!("MPI_HOME={m}"));
            }
            ("make", a, None)
        }
        _ => return None,
    })
}

/// The OS packages the fabric stack needs to build and to run, from the base image's OS
/// release (unpinned: build tools, and the libraries the pinned stack links against).
///
/// * every stack: the autotools/CMake tool chain, libnl and libudev;
/// * InfiniBand/RoCE: the one rdma-core, the distribution's (`libibverbs-dev`,
///   `librdmacm-dev`; `ibverbs-providers` and `librdmacm1` at run time), which UCX and
///   Open MPI build against (<https://packages.ubuntu.com/noble/rdma-core>);
/// * aws-ofi-nccl: hwloc (<https://packages.ubuntu.com/noble/libhwloc15>);
/// * Slingshot: what libcxi's configure.ac checks for (libconfig, libuv, fuse, yaml, libnl,
///   numa, sensors) and the CXI provider's libcurl and json-c (libfabric's
///   prov/cxi/configure.m4), as the Alps build installs them (`apt_install_build_deps` of
///   install-alps-hpc-stack.sh).
fn fabric_os_packages(
    fabric: &[SourceBuild],
    common: &Common,
    pkg: &str,
) -> (Vec<String>, Vec<String>) {
    if fabric.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let cxi = fabric.iter().any(|b| b.name == "libcxi");
    let installer = fabric.iter().any(|b| b.recipe == "installer");
    let apt = pkg == "apt";
    let (mut build, mut run) = base_os_packages(apt);
    if common.rdma {
        if apt {
            build.extend(["libibverbs-dev", "librdmacm-dev"]);
            run.extend(["ibverbs-providers", "libibverbs1", "librdmacm1"]);
        } else {
            build.push("rdma-core-devel");
            run.extend(["libibverbs", "librdmacm"]);
        }
    }
    if installer {
        // The base stage downloads and checks the installer itself.
        run.push("curl");
    }
    if fabric.iter().any(|b| b.name == "aws-ofi-nccl") {
        // aws-ofi-nccl needs hwloc (the catalog's `requires`: Spack's dependencies; AWS's
        // container sample installs libhwloc-dev before building it).
        if apt {
            build.push("libhwloc-dev");
            run.push("libhwloc15");
        } else {
            build.push("hwloc-devel");
            run.push("hwloc-libs");
        }
    }
    if fabric.iter().any(|b| b.commit.is_some()) {
        // A source pinned by git commit is fetched with git (same name on both).
        build.push("git");
    }
    if cxi {
        let (b, r) = cxi_os_packages(apt);
        build.extend(b);
        run.extend(r);
    }
    (
        build.into_iter().map(String::from).collect(),
        run.into_iter().map(String::from).collect(),
    )
}

/// What every fabric build needs: the autotools/CMake tool chain, libnl and libudev (and
/// their run-time libraries, with the SSH client MPI starts ranks through).
fn base_os_packages(apt: bool) -> (Vec<&'static str>, Vec<&'static str>) {
    let build: Vec<&'static str> = if apt {
        vec![
            "autoconf",
            "automake",
            "libtool",
            "make",
            "cmake",
            "ninja-build",
            "pkg-config",
            "python3",
            "libnl-3-dev",
            "libnl-route-3-dev",
            "libudev-dev",
            "ca-certificates",
            "curl",
            "bzip2",
            "xz-utils",
            "file",
        ]
    } else {
        vec![
            "autoconf",
            "automake",
            "libtool",
            "make",
            "cmake",
            "ninja-build",
            "pkgconf-pkg-config",
            "python3",
            "libnl3-devel",
            "systemd-devel",
            "ca-certificates",
            "curl",
            "bzip2",
            "xz",
            "file",
        ]
    };
    let run: Vec<&'static str> = if apt {
        vec![
            "libnl-3-200",
            "libnl-route-3-200",
            "libudev1",
            "openssh-client",
        ]
    } else {
        vec!["libnl3", "systemd-libs", "openssh-clients"]
    };
    (build, run)
}

/// What libcxi's configure.ac checks for (libconfig, libuv, fuse, yaml, libnl, numa,
/// sensors) and the CXI provider's libcurl and json-c, as the Alps build installs them.
fn cxi_os_packages(apt: bool) -> (Vec<&'static str>, Vec<&'static str>) {
    if apt {
        (
            vec![
                "libconfig-dev",
                "libuv1-dev",
                "libfuse-dev",
                "libyaml-dev",
                "libnuma-dev",
                "libsensors-dev",
                "libcurl4-openssl-dev",
                "libjson-c-dev",
            ],
            vec![
                "libconfig9",
                "libuv1",
                "libfuse2",
                "libyaml-0-2",
                "libnuma1",
                "libsensors5",
                "libcurl4",
                "libjson-c5",
            ],
        )
    } else {
        (
            vec![
                "libconfig-devel",
                "libuv-devel",
                "fuse-devel",
                "libyaml-devel",
                "numactl-devel",
                "lm_sensors-devel",
                "libcurl-devel",
                "json-c-devel",
            ],
            vec![
                "libconfig",
                "libuv",
                "fuse-libs",
                "libyaml",
                "numactl-libs",
                "lm_sensors-libs",
                "libcurl",
                "json-c",
            ],
        )
    }
}

fn common_gencode(common: &Common) -> String {
    common
        .torch_cuda_arch_list
        .split(';')
        .map(|t| {
            let ptx = t.ends_with("+PTX");
            let cc: String = t
                .trim_end_matches("+PTX")
                .chars()
                .filter(|c| *c != '.')
                .collect();
            if ptx {
                format!("-gencode=arch=compute_{cc},code=[sm_{cc},compute_{cc}]")
            } else {
                format!("-gencode=arch=compute_{cc},code=sm_{cc}")
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
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

/// The `nvidia/cuda` base images of the locked CUDA and OS, and the OS's package manager.
struct BaseImages {
    /// `nvidia/cuda:<runtime tag>[@digest]`.
    runtime: String,
    /// `nvidia/cuda:<devel tag>[@digest]`.
    devel: String,
    /// Both pinned by digest.
    digest_pinned: bool,
    /// `apt` or `dnf`.
    pkg: String,
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
    let os = img.os.as_deref().unwrap_or("ubuntu22.04");
    let pkg = if os.starts_with("rocky") {
        "dnf"
    } else {
        "apt"
    }
    .to_string();
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
        pkg,
    })
}

/// The NCCL runtime and development package pins: the lock's OS pins, else the CUDA build
/// the host plan chose, else NVIDIA's naming for the locked CUDA minor.
fn nccl_packages(
    lock: &Lock,
    pkg: &str,
    unverified: &mut Vec<String>,
) -> (Option<String>, Option<String>) {
    let cuda = lock.component(Component::Cuda);
    let nccl = lock.component(Component::Nccl);
    // NCCL: the locked component, else the version the torch wheel pins.
    let nccl_version = nccl
        .map(|n| n.version.to_string())
        .or_else(|| locked::torch_nccl(lock));
    let nccl_build = crate::plan::host::HostPlan::new(lock)
        .nccl
        .filter(|b| nccl_version.as_deref() == Some(b.version.as_str()));
    let locked_nccl = crate::plan::host::OsPins::of(lock, HostPackage::Nccl, pkg)
        .filter(|o| o.pins.len() == 2 && cuda.is_some());
    match (nccl_version, cuda) {
        _ if locked_nccl.is_some() => {
            // The lock's NCCL packages (the nccl-build fact's CUDA build, read from the
            // repository's index where `gpustack lock` could).
            let o = locked_nccl.expect("checked above");
            unverified.extend(o.unverified);
            (Some(o.pins[0].clone()), Some(o.pins[1].clone()))
        }
        (Some(_), Some(_)) if nccl_build.is_some() => {
            // The lock chose the package's CUDA build (host plan): one NVIDIA publishes.
            let b = nccl_build.as_ref().expect("checked above");
            if !b.known {
                unverified.push(format!(
                    "NCCL {} as a `+cuda{}` package: the catalog lists no such build",
                    b.version, b.cuda
                ));
            }
            let (r, d) = b.pins(pkg == "apt");
            (Some(r), Some(d))
        }
        (Some(n), Some(c)) => {
            let mm = format!("{}.{}", c.version.major(), c.version.minor());
            unverified.push(format!(
                "NCCL {n} as a `+cuda{mm}` package: NVIDIA does not build every NCCL release for every CUDA minor, and the catalog does not record which exist"
            ));
            if pkg == "apt" {
                (
                    Some(format!("libnccl2={n}-1+cuda{mm}")),
                    Some(format!("libnccl-dev={n}-1+cuda{mm}")),
                )
            } else {
                (
                    Some(format!("libnccl-{n}-1+cuda{mm}")),
                    Some(format!("libnccl-devel-{n}-1+cuda{mm}")),
                )
            }
        }
        _ => (None, None),
    }
}

/// The base layer's source builds (the fabric stack), each noted when its tarball has no
/// published sha256.
fn fabric_builds(
    lock: &Lock,
    common: &Common,
    unverified: &mut Vec<String>,
) -> Result<Vec<SourceBuild>, Error> {
    let mut fabric = Vec::new();
    for p in locked::fabric_sources(lock) {
        let b = source_build(&p, common)?;
        if b.sha256.is_none() && b.commit.is_none() {
            unverified.push(format!(
                "{} {} source tarball (no published sha256)",
                b.name, b.version
            ));
        }
        fabric.push(b);
    }
    Ok(fabric)
}

/// The tools the images are built with: uv, the Dockerfile frontend, the Python uv
/// installs.
struct Tools {
    uv_image: Option<String>,
    frontend: String,
    python: Option<String>,
    interpreter: Option<Interpreter>,
}

fn tools(lock: &Lock) -> Result<Tools, Error> {
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
fn torch_source_build(
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
struct PyStages {
    stages: Vec<PyStage>,
    compiled: Vec<Requirement>,
    build_env: Vec<(String, String)>,
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

fn py_stages(
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
fn finish_build_env(lock: &Lock, common: &Common, pkg: &str, py: &mut PyStages) -> Option<String> {
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
fn python_install(
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

/// nccl-tests, built against the locked NCCL (none without an NCCL package).
fn nccl_tests_build(
    lock: &Lock,
    common: &Common,
    has_nccl_dev: bool,
    unverified: &mut Vec<String>,
) -> Result<Option<SourceBuild>, Error> {
    let nccl_tests = if has_nccl_dev {
        locked::nccl_tests(lock)
            .map(|p| source_build(&p, common))
            .transpose()?
    } else {
        unverified
            .push("no validate stage: the lock pins no NCCL to build nccl-tests against".into());
        None
    };
    if let Some(n) = &nccl_tests {
        if n.sha256.is_none() {
            unverified.push(format!(
                "nccl-tests {} source tarball (no published sha256)",
                n.version
            ));
        }
    }
    Ok(nccl_tests)
}

/// OpenSSH for the `validate` image's `mpirun` over SSH.
fn validate_ssh(pkg: &str, ssh: crate::plan::workload::MpiSsh) -> ValidateSsh {
    let apt = pkg == "apt";
    ValidateSsh {
        packages: if apt {
            vec!["openssh-client".into(), "openssh-server".into()]
        } else {
            vec!["openssh-clients".into(), "openssh-server".into()]
        },
        packages_source: if apt {
            "https://packages.ubuntu.com/jammy/openssh-server ; https://packages.ubuntu.com/noble/openssh-server ; https://packages.ubuntu.com/noble/openssh-client".into()
        } else {
            "https://dl.rockylinux.org/pub/rocky/9/BaseOS/x86_64/os/Packages/o/ (openssh-server, openssh-clients)".into()
        },
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
    /// Plans the container build from the lock.
    pub fn new(lock: &Lock, common: &Common) -> Result<DockerPlan, Error> {
        let mut unverified = Vec::new();
        let base = base_images(lock, &mut unverified)?;
        let pkg = base.pkg;
        let (nccl_runtime, nccl_dev) = nccl_packages(lock, &pkg, &mut unverified);
        let fabric = fabric_builds(lock, common, &mut unverified)?;
        let (fabric_build_deps, fabric_runtime_deps) = fabric_os_packages(&fabric, common, &pkg);
        let fabric_nccl = nccl_dev.is_some() && fabric.iter().any(|b| b.name == "ucc");
        let tools = tools(lock)?;
        let torch_build = torch_source_build(lock, nccl_dev.is_some(), &mut unverified)?;
        let mut py = py_stages(lock, common, torch_build.is_some(), &mut unverified);
        let ccache_path = finish_build_env(lock, common, &pkg, &mut py);
        let build_requirements: Vec<Requirement> = py
            .stages
            .iter()
            .find(|s| s.name == "framework")
            .map(|s| {
                s.requirements
                    .iter()
                    .filter(|r| !r.compiled)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        let python_install = python_install(lock, &mut py.stages, &mut unverified)?;
        let mut tools = tools;
        if let (Some(i), Some(p)) = (tools.interpreter.as_mut(), python_install.as_ref()) {
            i.other_cpus = p
                .platforms
                .iter()
                .map(|x| x.machine.clone())
                .filter(|m| *m != i.cpu)
                .collect();
        }
        let nccl_tests = nccl_tests_build(lock, common, nccl_dev.is_some(), &mut unverified)?;
        let validate_ssh = nccl_tests
            .as_ref()
            .and(crate::plan::workload::mpi_ssh(common))
            .map(|ssh| validate_ssh(&pkg, ssh));
        let labels = labels(common, &base.runtime);
        let code = code_image(lock, common)?;
        let installer = fabric.iter().any(|b| b.recipe == "installer");
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
            pkg,
            nccl_runtime,
            nccl_dev,
            runtime_installers: fabric
                .iter()
                .filter(|b| b.recipe == "installer")
                .cloned()
                .collect(),
            validate_build_copies_fabric: !fabric.is_empty() && !installer,
            fabric,
            fabric_nccl,
            fabric_build_deps,
            fabric_runtime_deps,
            uv_image: tools.uv_image,
            frontend: tools.frontend,
            python: tools.python,
            interpreter: tools.interpreter,
            stages: py.stages,
            compiled: py.compiled,
            build_requirements,
            build_env: py.build_env,
            ccache_path,
            validate_ssh,
            nccl_tests,
            labels,
            unverified,
            build_pick: python_install.as_ref().and_then(|pi| {
                pi.layer("build")
                    .and_then(|l| PylockPick::of(l, &pi.oci_platforms()))
            }),
            platforms: python_install
                .as_ref()
                .map(crate::plan::python::PythonInstall::oci_platforms)
                .unwrap_or_default(),
            python_install,
            torch_build,
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
    if let Some(tb) = plan.torch_build.as_ref().filter(|tb| tb.builds_here()) {
        files.push(RenderedFile::new(
            crate::plan::torch_build::SCRIPT,
            tb.script()?,
        ));
    }
    if let Some(pi) = &plan.python_install {
        for f in pi.layers.iter().flat_map(|l| &l.files) {
            files.push(RenderedFile::new(f.file.clone(), f.contents.clone()));
        }
        files.sort_by(|a, b| a.path.cmp(&b.path));
        return Ok(files);
    }
    if !plan.compiled.is_empty() {
        #[derive(Serialize)]
        struct Ctx<'a> {
            plan: &'a DockerPlan,
            stage: PyStage,
        }
        let compiled = PyStage {
            name: "compiled".into(),
            from: String::new(),
            requirements_file: "requirements-compiled.lock".into(),
            requirements: plan
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
                crate::render::render(
                    "docker/requirements.lock.j2",
                    &Ctx {
                        plan: &plan,
                        stage: compiled,
                    },
                )?,
            ));
        }
        let fw = plan.stages.iter().find(|s| s.name == "framework");
        let stage = PyStage {
            name: "build".into(),
            from: String::new(),
            requirements_file: "requirements-build.lock".into(),
            requirements: plan.build_requirements.clone(),
            indexes: fw.map(|s| s.indexes.clone()).unwrap_or_default(),
            uses_build: false,
            image: String::new(),
            pylock: None,
            built: Vec::new(),
            pick: None,
        };
        files.push(RenderedFile::new(
            "requirements-build.lock",
            crate::render::render("docker/requirements.lock.j2", &Ctx { plan: &plan, stage })?,
        ));
    }
    for s in &plan.stages {
        #[derive(Serialize)]
        struct Ctx<'a> {
            plan: &'a DockerPlan,
            stage: &'a PyStage,
        }
        files.push(RenderedFile::new(
            s.requirements_file.clone(),
            crate::render::render(
                "docker/requirements.lock.j2",
                &Ctx {
                    plan: &plan,
                    stage: s,
                },
            )?,
        ));
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}
