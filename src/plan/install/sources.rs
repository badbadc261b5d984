//! Source builds: the fabric stack and nccl-tests, built from tarballs checked against
//! their published sha256 (or git commits), the same steps in the container image's
//! `fabric`/`validate-build` stages and on the VM (`multinode.sh`, `validate.sh`); and the
//! OS packages those builds need.

use serde::Serialize;

use super::bad;
use crate::error::Error;
use crate::lock::Lock;
use crate::plan::locked::{self, SourcePackage};
use crate::plan::Common;

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

pub(super) fn source_build(p: &SourcePackage, common: &Common) -> Result<SourceBuild, Error> {
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
pub(super) fn fabric_os_packages(
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

/// The base layer's source builds (the fabric stack), each noted when its tarball has no
/// published sha256.
pub(super) fn fabric_builds(
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

/// nccl-tests, built against the locked NCCL (none without an NCCL package).
pub(super) fn nccl_tests_build(
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
