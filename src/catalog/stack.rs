//! Validating the merged layers into a [`Catalog`]: one step per family of the stack
//! (drivers, CUDA, GPUs, libraries, Python, torch, vLLM, DeepSpeed), then the extras and
//! the deployment families, then the checks across families. Steps run in a fixed order,
//! so diagnostics keep theirs.

use std::collections::{BTreeMap, BTreeSet};

use super::deploy::{build_deploy, DeployLayers};
use super::extras::build_extras;
use super::ingest::Layers;
use super::model::*;
use super::validate::{has_control, is_sha256_hex, newest_first, safe_url, unsourced, valid_id, V};
use super::wire::*;
use crate::core::arch::{Suffix, Target};
use crate::core::version::Version;
use crate::error::Diagnostic;
use toml::Spanned;

/// The validated catalog of the merged layers; every problem is pushed to `diags`.
pub(super) fn build(l: Layers, diags: &mut Vec<Diagnostic>) -> Catalog {
    let mut v = V { diags };
    let mut c = Catalog::default();
    drivers(&mut v, &mut c, l.branch);
    cuda_compat(&mut v, &mut c, l.minor_compat, l.forward_compat, l.targets);
    gpus(&mut v, &mut c, l.gpu);
    kernel_modules(&mut v, &mut c, l.kernel_modules);
    gpu_facts(
        &mut v,
        &mut c,
        GpuFacts {
            generation: l.generation,
            gpu_support: l.gpu_support,
            torch_minimum: l.torch_minimum,
            tested: l.tested,
            os: l.os,
        },
    );
    let torch_rel = releases(&mut v, &mut c, l.release);
    wheels(&mut v, &mut c, l.wheel, &torch_rel);
    build_extras(&mut v, l.extra, &mut c);
    torch_sources(&mut v, &mut c, l.source, &torch_rel);
    sort_releases(&mut v, &mut c, torch_rel);
    cross_references(&mut v, &c);
    build_deploy(
        &mut v,
        &mut c,
        DeployLayers {
            image: l.image,
            no_image: l.no_image,
            package: l.package,
            instance: l.instance,
            cloud: l.cloud,
            bandwidth: l.bandwidth,
            env: l.env,
        },
    );
    target_overlaps(&mut v, &c);
    c
}

/// Driver branches and the releases listed under them, newest first.
fn drivers(
    v: &mut V<'_>,
    c: &mut Catalog,
    branch: BTreeMap<String, (Spanned<DriverBranchWire>, Origin)>,
) {
    let mut seen_drivers = BTreeSet::new();
    let mut branch_rows: Vec<(DriverBranch, Vec<Version>)> = Vec::new();
    for (_, (b, o)) in branch {
        let b = b.into_inner();
        v.source(&o);
        let Some(number) = v.branch(&o, &b.branch) else {
            continue;
        };
        let kind = match b.kind.as_str() {
            "ltsb" => BranchKind::Ltsb,
            "pb" => BranchKind::Pb,
            "nfb" => BranchKind::Nfb,
            other => {
                v.fail(
                    &o,
                    format!("driver branch type `{other}` is not one of `ltsb`, `pb`, `nfb`"),
                );
                continue;
            }
        };
        let supported = match b.status.as_str() {
            "supported" => true,
            "eol" => false,
            other => {
                v.fail(
                    &o,
                    format!("driver branch status `{other}` is not `supported` or `eol`"),
                );
                continue;
            }
        };
        let mut versions = Vec::new();
        for s in &b.versions {
            if let Some(ver) = v.version(&o, "driver version", s) {
                if ver.major() != number {
                    v.fail(
                        &o,
                        format!("driver `{ver}` is listed under branch `{}`", b.branch),
                    );
                } else if !seen_drivers.insert(ver.clone()) {
                    v.fail(&o, format!("driver `{ver}` is listed twice"));
                } else {
                    versions.push(ver);
                }
            }
        }
        branch_rows.push((
            DriverBranch {
                number,
                kind,
                supported,
                eol: b.eol.clone(),
                origin: o,
            },
            versions,
        ));
    }
    branch_rows.sort_by_key(|r| std::cmp::Reverse(r.0.number));
    for (i, (b, versions)) in branch_rows.into_iter().enumerate() {
        c.branches.push(b);
        for ver in versions {
            c.drivers.push(DriverRelease {
                version: ver,
                branch: i,
            });
        }
    }
    newest_first(&mut c.drivers, |d| &d.version);
}

/// CUDA's minor-version compatibility floors, forward-compatibility packages and nvcc
/// target sets.
fn cuda_compat(
    v: &mut V<'_>,
    c: &mut Catalog,
    minor_compat: BTreeMap<String, (MinorCompatWire, Origin)>,
    forward_compat: BTreeMap<String, (ForwardCompatWire, Origin)>,
    targets: BTreeMap<String, (TargetsWire, Origin)>,
) {
    for (_, (m, o)) in minor_compat {
        v.source(&o);
        if let Some(d) = v.version(&o, "driver_min", &m.driver_min) {
            c.minor_compat.push(MinorCompat {
                major: u64::from(m.major),
                driver_min: d,
                origin: o,
            });
        }
    }
    for (_, (f, o)) in forward_compat {
        v.source(&o);
        let Some(cuda) = v.version(&o, "cuda", &f.cuda) else {
            continue;
        };
        let bases = f.bases.iter().filter_map(|b| v.branch(&o, b)).collect();
        c.forward_compat.push(ForwardCompat {
            cuda,
            package: f.package.clone(),
            bases,
            origin: o,
        });
    }
    for (_, (t, o)) in targets {
        v.source(&o);
        let Some(req) = v.req(&o, "cuda", &t.cuda) else {
            continue;
        };
        let mut sm = Vec::new();
        for s in &t.sm {
            match Target::parse(s) {
                Ok(x) if !x.ptx => sm.push(x),
                Ok(_) => v.fail(&o, format!("target `{s}` must be an `sm` target")),
                Err(e) => v.fail(&o, e),
            }
        }
        sm.sort();
        c.targets.push(TargetSet {
            cuda: req,
            sm,
            origin: o,
        });
    }
}

/// GPU products: ids, aliases (unique across GPUs), compute capability, CPU.
fn gpus(v: &mut V<'_>, c: &mut Catalog, gpu: BTreeMap<String, (GpuWire, Origin)>) {
    let mut names = BTreeMap::new();
    for (_, (g, o)) in gpu {
        v.source(&o);
        let id = g.id.to_ascii_lowercase();
        if !valid_id(&id) {
            v.fail(
                &o,
                format!("GPU id `{}` must match [a-z0-9][a-z0-9-]*", g.id),
            );
            continue;
        }
        for n in std::iter::once(&id).chain(g.aliases.iter()) {
            if let Some(prev) = names.insert(n.to_ascii_lowercase(), id.clone()) {
                if prev != id {
                    v.fail(
                        &o,
                        format!("GPU name `{n}` is used by both `{prev}` and `{id}`"),
                    );
                }
            }
        }
        let Some(cc) = v.cc(&o, "cc", &g.cc) else {
            continue;
        };
        match g.nvswitch_generation {
            Some(n) if !(1..=MAX_NVSWITCH_GENERATION).contains(&n) => v.fail(
                &o,
                format!("`nvswitch_generation = {n}`: NVSwitch generations are 1 to {MAX_NVSWITCH_GENERATION} (Fabric Manager user guide)"),
            ),
            Some(n) if !g.nvswitch => v.fail(
                &o,
                format!("`nvswitch_generation = {n}` on a GPU with `nvswitch = false`"),
            ),
            _ => {}
        }
        c.gpus.push(Gpu {
            id,
            name: g.name.clone(),
            aliases: g.aliases.iter().map(|a| a.to_ascii_lowercase()).collect(),
            cc,
            arch: g.arch.clone(),
            datacenter: g.datacenter,
            nvswitch: g.nvswitch,
            memory_gib: g.memory_gib,
            gfd_product: g.gfd_product.clone(),
            smi_names: g.smi_names.clone(),
            min_driver: g
                .min_driver
                .as_deref()
                .and_then(|s| v.version(&o, "min_driver", s)),
            last_driver_branch: g
                .last_driver_branch
                .as_deref()
                .and_then(|s| v.branch(&o, s)),
            cpu: match g.cpu.as_deref() {
                None | Some("x86_64") => "x86_64".to_string(),
                Some("aarch64") => "aarch64".to_string(),
                Some(other) => {
                    v.fail(
                        &o,
                        format!("GPU `cpu = \"{other}\"` is not `x86_64` or `aarch64`"),
                    );
                    continue;
                }
            },
            nvswitch_generation: g.nvswitch_generation,
            origin: o,
        });
    }
}

/// Kernel-module flavours, of an architecture or a product the catalog knows.
fn kernel_modules(
    v: &mut V<'_>,
    c: &mut Catalog,
    kernel_modules: BTreeMap<String, (KernelModulesWire, Origin)>,
) {
    for (_, (k, o)) in kernel_modules {
        v.source(&o);
        let open = match k.open.as_str() {
            "required" => OpenModules::Required,
            "supported" => OpenModules::Supported,
            "unsupported" => OpenModules::Unsupported,
            x => {
                v.fail(
                    &o,
                    format!("`open = \"{x}\"` must be `required`, `supported` or `unsupported`"),
                );
                continue;
            }
        };
        if k.arch.is_some() == k.gpu.is_some() {
            v.fail(
                &o,
                "a `[[kernel_modules]]` entry names exactly one of `arch` and `gpu`".into(),
            );
            continue;
        }
        if let Some(g) = &k.gpu {
            if !c.gpus.iter().any(|x| x.id == *g) {
                v.fail(
                    &o,
                    format!("`gpu = \"{g}\"` is not a GPU id of the catalog"),
                );
            }
        }
        if let Some(a) = &k.arch {
            if !c.gpus.iter().any(|x| x.arch == *a) {
                v.fail(&o, format!("`arch = \"{a}\"` is not the `arch` of any GPU"));
            }
        }
        let open_default_from = k.open_default_from.as_deref().and_then(|b| v.branch(&o, b));
        if (open == OpenModules::Supported) != open_default_from.is_some() {
            v.fail(
                &o,
                "`open_default_from` (a branch, `R560`) goes with `open = \"supported\"`, and only there"
                    .into(),
            );
        }
        c.kernel_modules.push(KernelModules {
            arch: k.arch.clone(),
            gpu: k.gpu.clone(),
            open,
            open_default_from,
            origin: o,
        });
    }
}

/// The smaller per-GPU and per-release facts, validated by [`gpu_facts`].
struct GpuFacts {
    generation: BTreeMap<String, (GenerationWire, Origin)>,
    gpu_support: BTreeMap<String, (GpuSupportWire, Origin)>,
    torch_minimum: BTreeMap<String, (TorchMinimumWire, Origin)>,
    tested: BTreeMap<String, (TestedWire, Origin)>,
    os: BTreeMap<String, (OsWire, Origin)>,
}

/// Generations, cuDNN/NCCL GPU support, DeepSpeed's torch minimums, tested combinations
/// and operating systems.
fn gpu_facts(v: &mut V<'_>, c: &mut Catalog, l: GpuFacts) {
    for (_, (g, o)) in l.generation {
        v.source(&o);
        c.generations.push(Generation {
            arch: g.arch.clone(),
            min_driver: g
                .min_driver
                .as_deref()
                .and_then(|s| v.version(&o, "min_driver", s)),
            last_driver_branch: g
                .last_driver_branch
                .as_deref()
                .and_then(|s| v.branch(&o, s)),
            origin: o,
        });
    }
    for (key, (g, o)) in l.gpu_support {
        v.source(&o);
        let (Some(cc), Some(since)) = (v.cc(&o, "cc", &g.cc), v.version(&o, "since", &g.since))
        else {
            continue;
        };
        let row = GpuSupport {
            cc,
            since,
            origin: o,
        };
        if key.starts_with("cudnn/") {
            c.cudnn_gpu_support.push(row);
        } else {
            c.nccl_gpu_support.push(row);
        }
    }
    c.cudnn_gpu_support.sort_by_key(|r| r.cc);
    c.nccl_gpu_support.sort_by_key(|r| r.cc);
    for (_, (m, o)) in l.torch_minimum {
        v.source(&o);
        let (Some(t), Some(ds)) = (
            v.version(&o, "torch", &m.torch),
            v.version(&o, "deepspeed", &m.deepspeed),
        ) else {
            continue;
        };
        if t.parts().len() != 2 {
            v.fail(
                &o,
                format!("`torch = \"{t}\"` must name a torch minor, like `2.4`"),
            );
            continue;
        }
        c.deepspeed_torch_minimum.push(DeepspeedTorchMinimum {
            torch: (t.major(), t.minor()),
            deepspeed: ds,
            origin: o,
        });
    }
    for (_, (t, o)) in l.tested {
        v.source(&o);
        let mut ver =
            |what: &str, s: &Option<String>| s.as_deref().and_then(|s| v.version(&o, what, s));
        let row = Tested {
            name: t.name.clone(),
            cuda: ver("cuda", &t.cuda),
            cudnn: ver("cudnn", &t.cudnn),
            nccl: ver("nccl", &t.nccl),
            python: ver("python", &t.python),
            torch: ver("torch", &t.torch),
            origin: o.clone(),
        };
        c.tested.push(row);
    }
    for (_, (os, o)) in l.os {
        v.source(&o);
        let glibc = os.glibc.as_deref().and_then(|s| v.version(&o, "glibc", s));
        let (releases, images) = os_releases(v, &o, &os);
        if let Some(req) = v.req(&o, "cuda", &os.cuda) {
            c.os.push(Os {
                id: os.id.clone(),
                cuda: req,
                glibc,
                releases,
                images,
                origin: o,
            });
        }
    }
}

/// `[[release]]` entries of every family; torch's are returned by release, for the
/// wheels and sources that name them.
fn releases(
    v: &mut V<'_>,
    c: &mut Catalog,
    release: BTreeMap<(String, String), (ReleaseWire, Origin)>,
) -> BTreeMap<String, TorchRelease> {
    let mut torch_rel: BTreeMap<String, TorchRelease> = BTreeMap::new();
    for ((fam, _), (r, o)) in release {
        v.source(&o);
        let Some(version) = v.version(&o, "version", &r.version) else {
            continue;
        };
        match fam.as_str() {
            "cuda" => {
                let driver_min = r
                    .driver_min
                    .as_deref()
                    .and_then(|s| v.version(&o, "driver_min", s));
                c.cuda.push(CudaRelease {
                    version,
                    driver_min,
                    redist_only: r.redist_only,
                    origin: o,
                });
            }
            "python" => c.python.push(PythonRelease {
                version,
                eol: r.eol.clone(),
                origin: o,
            }),
            "cudnn" | "nccl" => lib_release(v, c, &fam, version, &r, o),
            "torch" => {
                if let Some(t) = torch_release(v, version, &r, o) {
                    torch_rel.insert(r.version.clone(), t);
                }
            }
            "vllm" => vllm_release(v, c, version, &r, o),
            "deepspeed" => {
                let torch = r.torch.as_deref().and_then(|s| v.req(&o, "torch", s));
                let python = r.python.as_deref().and_then(|s| v.req(&o, "python", s));
                let cuda_mismatch_ok = r
                    .cuda_mismatch_ok
                    .iter()
                    .filter_map(|s| v.version(&o, "cuda_mismatch_ok", s))
                    .collect();
                let install = v.installability(&o, r.yanked.as_ref(), &r.glibc_floor);
                c.deepspeed.push(DeepspeedRelease {
                    version,
                    torch,
                    python,
                    cuda_mismatch_ok,
                    install,
                    origin: o,
                });
            }
            _ => {}
        }
    }
    torch_rel
}

/// A cuDNN or NCCL release.
fn lib_release(
    v: &mut V<'_>,
    c: &mut Catalog,
    fam: &str,
    version: Version,
    r: &ReleaseWire,
    o: Origin,
) {
    if r.cuda_majors.is_empty() {
        v.fail(&o, format!("{fam} `{version}` needs `cuda_majors`"));
    }
    let cuda_builds = r
        .cuda_builds
        .iter()
        .filter_map(|b| v.version(&o, "cuda_builds", b))
        .collect();
    let lib = LibRelease {
        version,
        cuda_majors: r.cuda_majors.iter().map(|m| u64::from(*m)).collect(),
        cuda_builds,
        min_cc: r.min_cc.as_deref().and_then(|s| v.cc(&o, "min_cc", s)),
        platforms: v.platforms(&o, &r.platforms),
        install: v.installability(&o, r.yanked.as_ref(), &r.glibc_floor),
        origin: o,
    };
    if fam == "cudnn" {
        c.cudnn.push(lib)
    } else {
        c.nccl.push(lib)
    }
}

/// A torch release (its wheels come from `[[wheel]]`), or none when it cannot be used.
fn torch_release(
    v: &mut V<'_>,
    version: Version,
    r: &ReleaseWire,
    o: Origin,
) -> Option<TorchRelease> {
    let (Some(py), Some(pv)) = (r.python.as_deref(), r.pypi_variant.as_deref()) else {
        v.fail(
            &o,
            format!("torch `{version}` needs `python` and `pypi_variant`"),
        );
        return None;
    };
    let python = v.req(&o, "python", py)?;
    let mut pypi_cuda_cpus = if r.pypi_cuda_cpus.is_empty() {
        vec!["x86_64".to_string()]
    } else {
        r.pypi_cuda_cpus.clone()
    };
    if let Some(bad) = pypi_cuda_cpus
        .iter()
        .find(|c| !matches!(c.as_str(), "x86_64" | "aarch64"))
    {
        v.fail(
            &o,
            format!(
                "torch `{version}`: `pypi_cuda_cpus` takes `x86_64` and `aarch64`, not `{bad}`"
            ),
        );
        return None;
    }
    pypi_cuda_cpus.sort();
    pypi_cuda_cpus.dedup();
    Some(TorchRelease {
        version,
        python,
        pypi_variant: pv.to_string(),
        pypi_cuda_cpus,
        platforms: v.platforms(&o, &r.platforms),
        install: v.installability(&o, r.yanked.as_ref(), &r.glibc_floor),
        triton: r.triton.as_deref().and_then(|t| {
            v.req(&o, "triton", t)?;
            Some(t.to_string())
        }),
        origin: o,
    })
}

/// A vLLM release.
fn vllm_release(v: &mut V<'_>, c: &mut Catalog, version: Version, r: &ReleaseWire, o: Origin) {
    let (Some(t), Some(cu), Some(py)) =
        (r.torch.as_deref(), r.cuda.as_deref(), r.python.as_deref())
    else {
        v.fail(
            &o,
            format!("vllm `{version}` needs `torch`, `cuda` and `python`"),
        );
        return;
    };
    let (Some(torch), Some(cuda), Some(python)) = (
        v.version(&o, "torch", t),
        v.version(&o, "cuda", cu),
        v.req(&o, "python", py),
    ) else {
        return;
    };
    let files = v.files(&o, &r.files);
    let min_cc = r.min_cc.as_deref().and_then(|s| v.cc(&o, "min_cc", s));
    c.vllm.push(VllmRelease {
        version,
        torch,
        cuda,
        python,
        min_cc,
        files,
        platforms: v.platforms(&o, &r.platforms),
        install: v.installability(&o, r.yanked.as_ref(), &r.glibc_floor),
        origin: o,
    });
}

/// Torch wheels: one build per release and CUDA variant, checked against its release.
fn wheels(
    v: &mut V<'_>,
    c: &mut Catalog,
    wheel: BTreeMap<String, (TorchWheelWire, Origin)>,
    torch_rel: &BTreeMap<String, TorchRelease>,
) {
    let mut bad_index = std::collections::BTreeSet::new();
    for (key, (w, o)) in wheel {
        v.source(&o);
        let t = &w.torch[0];
        let Some(rel) = torch_rel.get(t) else {
            v.fail(
                &o,
                format!(
                    "torch wheel `{key}` names release `{t}`, which has no `[[release]]` entry"
                ),
            );
            continue;
        };
        let (Some(cuda), Some(full)) =
            (v.version(&o, "cuda", &w.cuda), v.version(&o, "torch", &key))
        else {
            continue;
        };
        if !w.variant.starts_with("cu")
            || !w.variant[2..].bytes().all(|b| b.is_ascii_digit())
            || w.variant.len() < 4
        {
            v.fail(
                &o,
                format!("torch variant `{}` must look like `cu124`", w.variant),
            );
            continue;
        }
        // One `[[wheel]]` entry serves several releases: report its URL once, and keep the
        // build so that the releases it serves do not also report a missing wheel.
        if !safe_url(&w.index_url) && bad_index.insert((o.file.clone(), o.line)) {
            v.fail_hint(
                &o,
                format!(
                    "torch `index_url` `{}` must be an https:// URL without spaces, quotes or `$`",
                    w.index_url.escape_debug()
                ),
                "write the wheel index as one plain URL, like `https://download.pytorch.org/whl/cu124`".into(),
            );
        }
        let mut arch_list = Vec::new();
        for a in &w.arch_list {
            match crate::core::arch::parse_torch_entry(a) {
                Ok(x) => arch_list.extend(x),
                Err(e) => v.fail(&o, e),
            }
        }
        arch_list.sort();
        let (python, python_origin) = match w.python.as_deref() {
            Some(p) => (
                v.req(&o, "python", p).unwrap_or_else(|| rel.python.clone()),
                o.clone(),
            ),
            None => (rel.python.clone(), rel.origin.clone()),
        };
        let pin = |v: &mut V<'_>, what: &str, s: &Option<String>| {
            s.as_deref().and_then(|s| v.version(&o, what, s))
        };
        let files = v
            .files(&o, &w.files)
            .into_iter()
            .filter(|f| f.version.as_ref().is_none_or(|fv| fv == &rel.version))
            .collect();
        c.torch.push(TorchBuild {
            version: rel.version.clone(),
            variant: w.variant.clone(),
            full,
            cuda,
            index_url: w.index_url.clone(),
            arch_list,
            cudnn: pin(v, "cudnn", &w.cudnn),
            nccl: pin(v, "nccl", &w.nccl),
            cusparselt: pin(v, "cusparselt", &w.cusparselt),
            python,
            python_origin,
            pypi_default: rel.pypi_variant == w.variant,
            pypi_cpus: if rel.pypi_variant == w.variant {
                rel.pypi_cuda_cpus.clone()
            } else {
                Vec::new()
            },
            platforms: if rel.pypi_variant == w.variant {
                rel.platforms.clone()
            } else {
                Vec::new()
            },
            install: rel.install.clone(),
            files,
            origin: o.clone(),
            release_origin: rel.origin.clone(),
        });
    }
}

/// Torch `[[source]]` entries, for source builds.
fn torch_sources(
    v: &mut V<'_>,
    c: &mut Catalog,
    source: BTreeMap<String, (TorchSourceWire, Origin)>,
    torch_rel: &BTreeMap<String, TorchRelease>,
) {
    for (key, (w, o)) in source {
        v.source(&o);
        let Some(rel) = torch_rel.get(&key) else {
            v.fail(
                &o,
                format!("torch `[[source]]` `{key}` names no release with a `[[release]]` entry"),
            );
            continue;
        };
        let Some(cudnn_min) = v.version(&o, "cudnn_min", &w.cudnn_min) else {
            continue;
        };
        if !torch_source_fields_ok(v, &o, &w) {
            continue;
        }
        let Some(compiler) = host_compiler(v, c, &o, &w) else {
            continue;
        };
        let Some(cmake_archs) = cmake_archs(v, &o, &w) else {
            continue;
        };
        c.torch_sources.push(TorchSource {
            version: rel.version.clone(),
            repository: w.repository.clone(),
            tag: w.tag.clone(),
            commit: w.commit.clone(),
            archive: w.archive.as_ref().map(|a| SourceArchive {
                url: a.url.clone(),
                sha256: a.sha256.clone(),
            }),
            compiler,
            cmake_archs,
            cudnn_min,
            build_requires: w.build_requires.clone(),
            runtime_requires: w.runtime_requires.clone(),
            origin: o,
        });
    }
    newest_first(&mut c.torch_sources, |t| &t.version);
}

/// A `[[source]]` entry's host compiler facts: versions parse, CUDA minors and OS ids are
/// unique, every OS is an `[[os]]` entry, every fact is sourced.
fn host_compiler(
    v: &mut V<'_>,
    c: &Catalog,
    o: &Origin,
    w: &TorchSourceWire,
) -> Option<HostCompiler> {
    let mut hc = HostCompiler {
        gcc_min: match &w.gcc_min {
            Some(g) => Some(v.version(o, "torch source `gcc_min`", g)?),
            None => None,
        },
        ..HostCompiler::default()
    };
    let sourced = |s: &str| !unsourced(s);
    if !w
        .nvcc_host_gcc
        .iter()
        .map(|n| &n.source)
        .chain(w.os_gcc.iter().map(|g| &g.source))
        .all(|s| sourced(s))
    {
        v.fail(
            o,
            "every `nvcc_host_gcc` and `os_gcc` row of a torch source needs a one-line `source`"
                .into(),
        );
        return None;
    }
    for n in &w.nvcc_host_gcc {
        let cuda = v.version(o, "torch source `nvcc_host_gcc.cuda`", &n.cuda)?;
        if hc.nvcc_gcc_max(&cuda).is_some() {
            v.fail(
                o,
                format!("torch source `nvcc_host_gcc` lists CUDA {} twice", n.cuda),
            );
            return None;
        }
        hc.nvcc_gcc_max.push((cuda, n.gcc_max));
    }
    for g in &w.os_gcc {
        if !c.os.iter().any(|os| os.id == g.os) || hc.os_gcc(&g.os).is_some() {
            v.fail(o, format!("torch source `os_gcc` names `{}`, which is not an `[[os]]` entry or is listed twice", g.os.escape_debug()));
            return None;
        }
        let gcc = v.version(o, "torch source `os_gcc.gcc`", &g.gcc)?;
        hc.os_gcc.push((g.os.clone(), gcc));
    }
    Some(hc)
}

/// A `[[source]]` entry's `[source.cmake_archs]`: known suffixes, each once, and a source.
/// `Some(None)` where the table is absent (the rule does not check).
fn cmake_archs(v: &mut V<'_>, o: &Origin, w: &TorchSourceWire) -> Option<Option<CmakeArchs>> {
    let Some(a) = &w.cmake_archs else {
        return Some(None);
    };
    if unsourced(&a.source) {
        v.fail(
            o,
            "`[source.cmake_archs]` of a torch source needs a one-line `source`".into(),
        );
        return None;
    }
    let mut suffixes = Vec::new();
    for s in &a.suffixes {
        let suffix = match s.as_str() {
            "a" => Suffix::A,
            "f" => Suffix::F,
            _ => {
                v.fail(o, format!("torch source `cmake_archs.suffixes` lists `{}`; the suffixes are `a` and `f`", s.escape_debug()));
                return None;
            }
        };
        if suffixes.contains(&suffix) {
            v.fail(
                o,
                format!("torch source `cmake_archs.suffixes` lists `{s}` twice"),
            );
            return None;
        }
        suffixes.push(suffix);
    }
    Some(Some(CmakeArchs {
        suffixes,
        source: a.source.clone(),
    }))
}

/// The checks of one torch `[[source]]` entry's fields (repository, tag, commit, archive,
/// requirements); failures are reported on `v`.
fn torch_source_fields_ok(v: &mut V<'_>, o: &Origin, w: &TorchSourceWire) -> bool {
    if crate::core::url::has_credentials(&w.repository) {
        v.fail_hint(
            o,
            "torch source `repository` holds credentials (`user:token@` before the host)".into(),
            crate::core::url::CREDENTIALS_HINT.into(),
        );
        return false;
    }
    if !safe_url(&w.repository) {
        v.fail(o, format!("torch source `repository` `{}` must be an https:// URL without spaces, quotes or `$`", w.repository.escape_debug()));
        return false;
    }
    if w.tag.is_empty()
        || !w
            .tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
    {
        v.fail(
            o,
            format!(
                "torch source `tag` `{}` must be a plain git tag like `v2.10.0`",
                w.tag.escape_debug()
            ),
        );
        return false;
    }
    if let Some(c) = &w.commit {
        if c.len() != 40
            || !c
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        {
            v.fail(
                o,
                format!(
                    "torch source `commit` `{}` must be 40 lowercase hex digits",
                    c.escape_debug()
                ),
            );
            return false;
        }
    }
    if let Some(a) = &w.archive {
        if !safe_url(&a.url) || !is_sha256_hex(&a.sha256) {
            v.fail(
                o,
                format!(
                    "torch source `archive` needs an https:// `url` and a `sha256` of 64 lowercase hex digits, not `{}` / `{}`",
                    a.url.escape_debug(),
                    a.sha256.escape_debug()
                ),
            );
            return false;
        }
    }
    let mut reqs_ok = true;
    for r in w.build_requires.iter().chain(&w.runtime_requires) {
        if r.is_empty()
            || r.chars()
                .any(|ch| ch.is_control() || matches!(ch, '`' | '$' | '\\'))
        {
            v.fail(
                o,
                format!(
                    "torch source requirement `{}` is not a plain PEP 508 requirement",
                    r.escape_debug()
                ),
            );
            reqs_ok = false;
        }
    }
    reqs_ok
}

/// Every release list in its order (newest first); each torch release must have its PyPI
/// wheel.
fn sort_releases(v: &mut V<'_>, c: &mut Catalog, torch_rel: BTreeMap<String, TorchRelease>) {
    c.torch_releases = torch_rel.into_values().collect();
    newest_first(&mut c.torch_releases, |t| &t.version);
    // Lookups by set, not by scanning a list per entry: loading stays linear in the
    // catalog's size (`benches/scale.rs`).
    let wheels: BTreeSet<(&Version, &str)> = c
        .torch
        .iter()
        .map(|b| (&b.version, b.variant.as_str()))
        .collect();
    for r in &c.torch_releases {
        if !wheels.contains(&(&r.version, r.pypi_variant.as_str())) {
            v.fail(&r.origin, format!("torch `{}` says its PyPI wheel is `{}`, but no `[[wheel]]` entry has that variant", r.version, r.pypi_variant));
        }
    }
    c.torch.sort_by(|a, b| {
        b.version
            .cmp(&a.version)
            .then_with(|| b.pypi_default.cmp(&a.pypi_default))
            .then_with(|| b.cuda.cmp(&a.cuda))
    });
    newest_first(&mut c.cuda, |r| &r.version);
    newest_first(&mut c.python, |r| &r.version);
    newest_first(&mut c.cudnn, |r| &r.version);
    newest_first(&mut c.nccl, |r| &r.version);
    newest_first(&mut c.vllm, |r| &r.version);
    newest_first(&mut c.deepspeed, |r| &r.version);
    c.minor_compat.sort_by_key(|m| m.major);
    c.forward_compat.sort_by(|a, b| a.cuda.cmp(&b.cuda));
}

/// Pins that name another family's release: torch's cuDNN and NCCL, vLLM's torch.
fn cross_references(v: &mut V<'_>, c: &Catalog) {
    let cudnn: BTreeSet<&Version> = c.cudnn.iter().map(|r| &r.version).collect();
    let nccl: BTreeSet<&Version> = c.nccl.iter().map(|r| &r.version).collect();
    let torch_releases: BTreeSet<&Version> = c.torch_releases.iter().map(|t| &t.version).collect();
    for b in &c.torch {
        for (what, pin, list) in [("cudnn", &b.cudnn, &cudnn), ("nccl", &b.nccl, &nccl)] {
            if let Some(p) = pin {
                if !list.contains(p) {
                    v.fail(
                        &b.origin,
                        format!(
                            "torch `{}` pins {what} `{p}`, which the catalog does not list",
                            b.full
                        ),
                    );
                }
            }
        }
    }
    for r in &c.vllm {
        if !torch_releases.contains(&r.torch) {
            v.fail(
                &r.origin,
                format!(
                    "vllm `{}` pins torch `{}`, which the catalog does not list",
                    r.version, r.torch
                ),
            );
        }
    }
}

/// Each CUDA release matches exactly one `[[targets]]` range.
fn target_overlaps(v: &mut V<'_>, c: &Catalog) {
    let mut overlaps: Vec<(String, String)> = Vec::new();
    for cu in &c.cuda {
        let matching: Vec<&TargetSet> = c
            .targets
            .iter()
            .filter(|t| t.cuda.matches(&cu.version))
            .collect();
        if matching.len() > 1
            && !overlaps.contains(&(matching[0].cuda.to_string(), matching[1].cuda.to_string()))
        {
            overlaps.push((matching[0].cuda.to_string(), matching[1].cuda.to_string()));
            v.fail(&matching[1].origin, format!("CUDA `{}` matches two `[[targets]]` entries (`{}` and `{}`); their ranges must not overlap", cu.version, matching[0].cuda, matching[1].cuda));
        }
        if c.targets_for(&cu.version).is_none() {
            v.fail(
                &cu.origin,
                format!(
                    "CUDA `{}` has no `[[targets]]` entry listing the GPU targets nvcc accepts",
                    cu.version
                ),
            );
        }
    }
}

/// An OS's `[[os.release]]` (dates `YYYY-MM-DD` or `YYYY-MM`, a vault https URL, a source,
/// sorted oldest first, no duplicates) and `[[os.image]]` entries (a known release, CPU
/// `x86_64` or `aarch64`, one image per release and CPU, an https URL that names a dated
/// image, a hex sha256, an https source).
fn os_releases(v: &mut V<'_>, o: &Origin, os: &OsWire) -> (Vec<OsRelease>, Vec<OsImage>) {
    use super::validate::is_date;
    let id = &os.id;
    let month_or_day = |d: &str| is_date(d) || is_date(&format!("{d}-01"));
    let mut releases: Vec<OsRelease> = Vec::new();
    for r in &os.release {
        let Some(version) = v.version(o, "os.release version", &r.version) else {
            continue;
        };
        for (what, d) in [("released", &r.released), ("eol", &r.eol)] {
            if let Some(d) = d.as_deref().filter(|d| !month_or_day(d)) {
                v.fail(
                    o,
                    format!("{id} {version}: `{what} = \"{d}\"` is not a date (`YYYY-MM-DD` or `YYYY-MM`)"),
                );
            }
        }
        if let Some(u) = r
            .vault
            .as_deref()
            .filter(|u| !u.starts_with("https://") || !safe_url(u))
        {
            v.fail(
                o,
                format!("{id} {version}: vault `{u}` is not an https URL"),
            );
        }
        if unsourced(&r.source) {
            v.fail(
                o,
                format!("{id} {version}: every release needs a source on one line"),
            );
        }
        if releases.iter().any(|x| x.version == version) {
            v.fail(o, format!("{id}: release {version} is listed twice"));
            continue;
        }
        releases.push(OsRelease {
            version,
            released: r.released.clone(),
            eol: r.eol.clone(),
            vault: r.vault.clone(),
            source: r.source.clone(),
        });
    }
    releases.sort_by(|a, b| a.version.cmp(&b.version));
    let mut images: Vec<OsImage> = Vec::new();
    for i in &os.image {
        let Some(release) = v.version(o, "os.image release", &i.release) else {
            continue;
        };
        if !releases.iter().any(|r| r.version == release) {
            v.fail(
                o,
                format!("{id}: image of release {release}, which has no `[[os.release]]`"),
            );
        }
        if !matches!(i.cpu.as_str(), "x86_64" | "aarch64") {
            v.fail(
                o,
                format!(
                    "{id} {release}: image CPU `{}` is not `x86_64` or `aarch64`",
                    i.cpu
                ),
            );
        }
        if !i.url.starts_with("https://") || !safe_url(&i.url) {
            v.fail(
                o,
                format!("{id} {release}: image URL `{}` is not an https URL", i.url),
            );
        }
        // A moving name (`release/`, `latest`) would change under the digest.
        if i.url.contains("/release/") || i.url.contains("latest") {
            v.fail(
                o,
                format!(
                    "{id} {release}: image URL `{}` names a moving image, not a dated one",
                    i.url
                ),
            );
        }
        if !is_sha256_hex(&i.sha256) {
            v.fail(
                o,
                format!(
                    "{id} {release} {}: image sha256 must be 64 lowercase hex digits",
                    i.cpu
                ),
            );
        }
        if !i.source.starts_with("https://") || has_control(&i.source) {
            v.fail(
                o,
                format!(
                    "{id} {release} {}: image source must be an https URL on one line",
                    i.cpu
                ),
            );
        }
        if images
            .iter()
            .any(|x| x.release == release && x.cpu == i.cpu)
        {
            v.fail(o, format!("{id} {release}: two images for {}", i.cpu));
            continue;
        }
        images.push(OsImage {
            release,
            cpu: i.cpu.clone(),
            url: i.url.clone(),
            sha256: i.sha256.clone(),
            source: i.source.clone(),
        });
    }
    (releases, images)
}
