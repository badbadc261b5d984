//! The compatibility rules, each with an id and the catalog facts it uses.
//!
//! A rule looks at one, two or three chosen candidates and either accepts them or returns
//! a [`Violation`] in the user's words, naming the facts (with their sources) that decide.

use std::collections::BTreeMap;

use crate::catalog::{Catalog, CudaRelease, Origin};
use crate::core::arch::{best_way, Cc, RunsVia, Target};
use crate::core::version::{Version, VersionReq};
use crate::core::{extra_pattern, Component};
use crate::spec::Spec;

pub use crate::error::{Fact, Rule, Violation};

/// How a driver runs a CUDA release.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Compat {
    /// The driver meets the release's full-feature minimum.
    Full,
    /// Minor-version compatibility: same major, driver ≥ the major's floor; no PTX JIT of
    /// newer PTX, some new APIs unavailable.
    MinorVersion,
    /// Forward compatibility through the `cuda-compat` package (data center GPUs only).
    Forward {
        /// `cuda-compat-13-0`.
        package: String,
    },
    /// No driver is in the stack (cannot happen in a resolved lock).
    Unchecked,
}

impl Compat {
    /// `full`, `minor-version`, `forward`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Compat::Full => "full",
            Compat::MinorVersion => "minor-version",
            Compat::Forward { .. } => "forward",
            Compat::Unchecked => "unchecked",
        }
    }
}

/// A candidate for one component: an index into the catalog list of that family, or the
/// host driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Cand {
    Host,
    Idx(usize),
}

/// The rule context: catalog, spec and the derived hardware facts.
pub(crate) struct Ctx<'c> {
    pub(crate) cat: &'c Catalog,
    pub(crate) spec: &'c Spec,
    pub(crate) ccs: Vec<Cc>,
    pub(crate) targets: Vec<Target>,
    pub(crate) all_datacenter: bool,
    pub(crate) host_driver: Option<Version>,
    /// Build violation messages and fact lists. Off during search (the hot path), on when
    /// explaining or recording `because`.
    pub(crate) verbose: bool,
    /// The existing lock's picks, tried first (stable re-locks, [`super::solve_locked`]).
    pub(crate) locked: BTreeMap<Component, Version>,
    /// With `locked`: what a fresh lock (no picks kept) takes, for the explanations.
    pub(crate) fresh: BTreeMap<Component, Version>,
    /// Per CUDA major.minor: the lowest full-feature driver minimum of its releases, and
    /// the origin of the first (newest) of them. Every driver × wheel check asks for both;
    /// computed once here instead of scanning the CUDA releases on each check.
    runtimes: BTreeMap<(u64, u64), (Option<&'c Version>, &'c Origin)>,
    /// The CUDA releases with an `nvidia/cuda` image for the requested OS (an Ubuntu one
    /// when none is requested: the image `select::base_image` then takes), for rule
    /// `os.cuda-images`.
    imaged: std::collections::BTreeSet<&'c Version>,
    /// Of those, the releases with an image NVIDIA still supports (its supported-tags
    /// list), which rank before releases whose images are all unsupported: a pick should
    /// pass `check --strict` (`unsafe-version`) on the stock catalog.
    pub(crate) supported_images: std::collections::BTreeSet<&'c Version>,
    /// Each requested GPU with its architecture's driver support, when the catalog has it.
    generations: Vec<(&'c crate::catalog::Gpu, &'c crate::catalog::Generation)>,
    /// The newest-GPU floor for cuDNN and NCCL: the release every GPU of the stack needs
    /// at least, with the fact and the compute capability that sets it.
    cudnn_floor: Option<(&'c crate::catalog::GpuSupport, Cc)>,
    nccl_floor: Option<(&'c crate::catalog::GpuSupport, Cc)>,
    /// The OS the wheels must install on (id, glibc) and the hosts' CPU architecture.
    pub(crate) platform: Option<(&'c str, &'c Version)>,
    pub(crate) cpu: &'c str,
    /// CUDA releases some vendor-validated combination ships.
    pub(crate) tested_cuda: std::collections::BTreeSet<&'c Version>,
    /// A torch source build's arch list (the request's `archs`, else the GPUs' list);
    /// `None` for wheels.
    pub(crate) source_archs: Option<Vec<Target>>,
    /// The problem as the unary rules and arc consistency leave it before any search
    /// ([`super::Problem::initial`]): `because` starts each deeper reason from it. Filled
    /// on first use, after `locked` and `fresh` are set.
    pub(crate) initial: std::sync::OnceLock<super::Initial>,
}

/// A catalog entry's origin as an explanation cites it.
/// The first URL of a source (the whole source when it has none).
fn first_url(source: &str) -> &str {
    source.find("https://").map_or(source, |i| {
        source[i..].split_whitespace().next().unwrap_or(source)
    })
}

fn fact_of(o: &Origin) -> Fact {
    Fact {
        file: o.file.clone(),
        line: o.line,
        source: o.source.clone(),
    }
}

/// The support row every GPU of the stack needs: for each GPU, the newest row at or below
/// its compute capability; of those, the one with the newest first release.
fn lib_floor<'c>(
    rows: &'c [crate::catalog::GpuSupport],
    ccs: &[Cc],
) -> Option<(&'c crate::catalog::GpuSupport, Cc)> {
    ccs.iter()
        .filter_map(|cc| rows.iter().rev().find(|r| r.cc <= *cc).map(|r| (r, *cc)))
        .max_by(|a, b| a.0.since.cmp(&b.0.since))
}

fn vlist(vs: &[&Version]) -> String {
    vs.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

impl<'c> Ctx<'c> {
    pub(crate) fn new(cat: &'c Catalog, spec: &'c Spec) -> Ctx<'c> {
        let ccs = spec.capabilities(cat);
        let targets = spec.arch_list(cat);
        let gpus: Vec<_> = spec.gpus.iter().filter_map(|g| cat.gpu(g)).collect();
        let all_datacenter = !gpus.is_empty() && gpus.iter().all(|g| g.datacenter);
        let mut runtimes: BTreeMap<(u64, u64), (Option<&Version>, &Origin)> = BTreeMap::new();
        for r in &cat.cuda {
            let e = runtimes
                .entry((r.version.major(), r.version.minor()))
                .or_insert((None, &r.origin));
            if let Some(m) = &r.driver_min {
                if e.0.is_none_or(|x| m < x) {
                    e.0 = Some(m);
                }
            }
        }
        let for_os = |im: &&crate::catalog::BaseImage| match spec.os.as_deref() {
            Some(os) => im.os == os,
            None => im.os.starts_with("ubuntu"),
        };
        let imaged = cat
            .images
            .iter()
            .filter(for_os)
            .map(|im| &im.cuda)
            .collect();
        let supported_images = cat
            .images
            .iter()
            .filter(for_os)
            .filter(|im| im.supported)
            .map(|im| &im.cuda)
            .collect();
        let generations = gpus
            .iter()
            .filter_map(|g| {
                cat.generations
                    .iter()
                    .find(|x| x.arch == g.arch)
                    .map(|x| (*g, x))
            })
            .collect();
        let platform = spec.os.as_deref().and_then(|id| {
            cat.os
                .iter()
                .find(|o| o.id == id)
                .and_then(|o| o.glibc.as_ref().map(|g| (o.id.as_str(), g)))
        });
        let cpu = if gpus.iter().any(|g| g.cpu == "aarch64") {
            "aarch64"
        } else {
            "x86_64"
        };
        let tested_cuda = cat.tested.iter().filter_map(|t| t.cuda.as_ref()).collect();
        let source_archs = spec.torch_source.as_ref().map(|s| {
            if s.archs.is_empty() {
                targets.clone()
            } else {
                s.archs.clone()
            }
        });
        Ctx {
            source_archs,
            generations,
            cudnn_floor: lib_floor(&cat.cudnn_gpu_support, &ccs),
            nccl_floor: lib_floor(&cat.nccl_gpu_support, &ccs),
            platform,
            cpu,
            tested_cuda,
            cat,
            spec,
            ccs,
            targets,
            all_datacenter,
            host_driver: spec.driver.clone(),
            verbose: true,
            locked: BTreeMap::new(),
            fresh: BTreeMap::new(),
            runtimes,
            imaged,
            supported_images,
            initial: std::sync::OnceLock::new(),
        }
    }

    /// A context that builds no violation messages: for the search's hot path.
    pub(crate) fn quiet(cat: &'c Catalog, spec: &'c Spec) -> Ctx<'c> {
        Ctx {
            verbose: false,
            ..Ctx::new(cat, spec)
        }
    }

    /// A violation whose message and facts are built only in verbose mode.
    fn violation(
        &self,
        rule: Rule,
        message: impl FnOnce() -> String,
        facts: impl FnOnce() -> Vec<Origin>,
    ) -> Violation {
        if self.verbose {
            Violation {
                rule,
                message: message(),
                facts: facts().iter().map(fact_of).collect(),
            }
        } else {
            Violation {
                rule,
                message: String::new(),
                facts: Vec::new(),
            }
        }
    }

    /// The version a candidate stands for, as written in the lock.
    pub(crate) fn version(&self, c: Component, k: Cand) -> &Version {
        let i = match k {
            Cand::Host => {
                return self
                    .host_driver
                    .as_ref()
                    .expect("host candidate without host driver")
            }
            Cand::Idx(i) => i,
        };
        match c {
            Component::Driver => &self.cat.drivers[i].version,
            Component::Cuda => &self.cat.cuda[i].version,
            Component::Cudnn => &self.cat.cudnn[i].version,
            Component::Nccl => &self.cat.nccl[i].version,
            Component::Python => &self.cat.python[i].version,
            Component::Torch => &self.cat.torch[i].full,
            Component::Vllm => &self.cat.vllm[i].version,
            Component::Deepspeed => &self.cat.deepspeed[i].version,
            extra_pattern!() => &self.cat.extras[i].version,
        }
    }

    /// How a candidate is named in messages: its version, and for an extra whose
    /// distribution is not the component's own PyPI project, that distribution
    /// (`14.2.0 (cupy-cuda13x)`), so that two candidates never read the same.
    pub(crate) fn label(&self, c: Component, k: Cand) -> String {
        match (c, k) {
            (extra_pattern!(), Cand::Idx(i)) => self.cat.extras[i].label(),
            _ => self.version(c, k).to_string(),
        }
    }

    /// The catalog entry behind a candidate.
    pub(crate) fn origin(&self, c: Component, k: Cand) -> Option<&Origin> {
        let Cand::Idx(i) = k else { return None };
        Some(match c {
            Component::Driver => &self.cat.branches[self.cat.drivers[i].branch].origin,
            Component::Cuda => &self.cat.cuda[i].origin,
            Component::Cudnn => &self.cat.cudnn[i].origin,
            Component::Nccl => &self.cat.nccl[i].origin,
            Component::Python => &self.cat.python[i].origin,
            Component::Torch => match (
                &self.source_archs,
                self.cat.torch_source(&self.cat.torch[i].version),
            ) {
                // A source build comes from the release's `[[source]]` entry.
                (Some(_), Some(src)) => &src.origin,
                _ => &self.cat.torch[i].origin,
            },
            Component::Vllm => &self.cat.vllm[i].origin,
            Component::Deepspeed => &self.cat.deepspeed[i].origin,
            extra_pattern!() => &self.cat.extras[i].origin,
        })
    }

    /// All candidates of a component, best first (before any filtering).
    pub(crate) fn candidates(&self, c: Component) -> Vec<Cand> {
        let n = match c {
            Component::Driver => {
                if self.host_driver.is_some() {
                    return vec![Cand::Host];
                }
                let mut v: Vec<usize> = (0..self.cat.drivers.len()).collect();
                // Prefer supported production/LTS branches, then newest (the catalog's
                // order, which the stable sort keeps).
                v.sort_by_key(|&i| {
                    let b = &self.cat.branches[self.cat.drivers[i].branch];
                    !(b.supported && b.kind != crate::catalog::BranchKind::Nfb)
                });
                return v.into_iter().map(Cand::Idx).collect();
            }
            Component::Torch => {
                let mut v: Vec<usize> = (0..self.cat.torch.len()).collect();
                if let Some(h) = &self.host_driver {
                    // With an installed driver: builds it runs without the cuda-compat
                    // package first; then newest release; then builds it runs with full
                    // support; then the PyPI default; then newest CUDA.
                    v.sort_by_cached_key(|&i| {
                        let b = &self.cat.torch[i];
                        let mode = self.compat_for(
                            h,
                            &b.cuda,
                            self.full_min_for_runtime(&b.cuda),
                            self.needs_ptx(self.torch_archs(i)),
                        );
                        let forward = matches!(mode, Compat::Forward { .. });
                        (
                            forward,
                            std::cmp::Reverse(&b.version),
                            mode != Compat::Full,
                            !b.pypi_default,
                            std::cmp::Reverse(&b.cuda),
                        )
                    });
                }
                return v.into_iter().map(Cand::Idx).collect();
            }
            Component::Vllm => {
                let mut v: Vec<usize> = (0..self.cat.vllm.len()).collect();
                if let Some(h) = &self.host_driver {
                    // vLLM wheels the installed driver runs without cuda-compat first.
                    v.sort_by_cached_key(|&i| {
                        let r = &self.cat.vllm[i];
                        let mode =
                            self.compat_for(h, &r.cuda, self.full_min_for_runtime(&r.cuda), false);
                        (matches!(mode, Compat::Forward { .. }), i)
                    });
                }
                return v.into_iter().map(Cand::Idx).collect();
            }
            extra_pattern!() => {
                // Newest first, but a differently named distribution (flash-attn 3.0.0 is
                // the separate `flash_attn_3` package, with its own import name) only after
                // every release of the component's own PyPI project.
                let mut v: Vec<(bool, usize)> = self
                    .cat
                    .extras_of(c)
                    .map(|(i, e)| (!e.is_own_project(), i))
                    .collect();
                v.sort();
                return v.into_iter().map(|(_, i)| Cand::Idx(i)).collect();
            }
            Component::Cuda => self.cat.cuda.len(),
            Component::Cudnn => self.cat.cudnn.len(),
            Component::Nccl => self.cat.nccl.len(),
            Component::Python => self.cat.python.len(),
            Component::Deepspeed => self.cat.deepspeed.len(),
        };
        (0..n).map(Cand::Idx).collect()
    }

    /// The lowest full-feature driver minimum of any release of a CUDA major.minor.
    pub(crate) fn full_min_for_runtime(&self, cuda: &Version) -> Option<&'c Version> {
        self.runtimes
            .get(&(cuda.major(), cuda.minor()))
            .and_then(|r| r.0)
    }

    /// The origin of the newest CUDA release of a major.minor.
    fn cuda_release_origin(&self, cuda: &Version) -> Option<&'c Origin> {
        self.runtimes
            .get(&(cuda.major(), cuda.minor()))
            .map(|r| r.1)
    }

    /// Unary rules: the request, the host and the GPUs.
    pub(crate) fn check_unary(&self, c: Component, k: Cand) -> Result<(), Violation> {
        let v = self.version(c, k);
        if let Some(req) = self.spec.components.get(&c) {
            if k == Cand::Host && !req.matches(v) {
                return Err(Violation {
                    rule: Rule::HostDriver,
                    message: format!("the installed driver {v} does not satisfy your requirement `driver = \"{req}\"`"),
                    facts: vec![],
                });
            }
            if !req.matches(v) {
                return Err(Violation {
                    rule: Rule::Request,
                    message: if self.verbose {
                        format!(
                            "{} {v} does not match your request `{} = \"{req}\"`",
                            c.display(),
                            c.name()
                        )
                    } else {
                        String::new()
                    },
                    facts: vec![],
                });
            }
        }
        let Cand::Idx(i) = k else { return Ok(()) };
        match c {
            Component::Driver => self.driver_fits_gpus(&self.cat.drivers[i].version),
            Component::Cuda => self.unary_cuda(i),
            Component::Torch if self.source_archs.is_some() => self.unary_torch_source(i),
            Component::Torch => self.unary_torch_wheel(i),
            Component::Vllm => self.unary_vllm(i),
            Component::Cudnn | Component::Nccl => self.unary_lib(c, i),
            Component::Deepspeed => {
                let d = &self.cat.deepspeed[i];
                self.wheel_installs(
                    &[],
                    &d.install,
                    || format!("DeepSpeed {}", d.version),
                    || d.origin.clone(),
                )
            }
            extra_pattern!() => self.unary_extra(c, i),
            _ => Ok(()),
        }
    }

    /// A CUDA release: never a redistrib-only one; nvcc accepts every GPU; the OS has
    /// images for it.
    fn unary_cuda(&self, i: usize) -> Result<(), Violation> {
        let r = &self.cat.cuda[i];
        if r.redist_only {
            return Err(self.violation(
                Rule::CudaRedistOnly,
                || {
                    format!(
                        "CUDA {} is known only from NVIDIA's redistrib manifest: the release notes give it no driver minimum and no install package or image is recorded, so it is never locked",
                        r.version
                    )
                },
                || vec![r.origin.clone()],
            ));
        }
        let Some(ts) = self.cat.targets_for(&r.version) else {
            return Err(self.violation(
                Rule::NvccTargets,
                || {
                    format!(
                        "the catalog does not know which GPU targets CUDA {} accepts",
                        r.version
                    )
                },
                || vec![r.origin.clone()],
            ));
        };
        let missing: Vec<&Target> = self
            .targets
            .iter()
            .filter(|t| !ts.sm.iter().any(|s| s.cc == t.cc && s.suffix == t.suffix))
            .collect();
        if !missing.is_empty() {
            let names = missing
                .iter()
                .map(|t| format!("`{t}`"))
                .collect::<Vec<_>>()
                .join(", ");
            let first = ts.sm.first().map(|t| t.to_string()).unwrap_or_default();
            let last = ts.sm.last().map(|t| t.to_string()).unwrap_or_default();
            return Err(self.violation(
                Rule::NvccTargets,
                || {
                    format!(
                        "nvcc of CUDA {} does not accept {names} (it accepts {first} … {last})",
                        r.version
                    )
                },
                || vec![ts.origin.clone()],
            ));
        }
        if let Some(os_id) = &self.spec.os {
            if let Some(os) = self.cat.os.iter().find(|o| &o.id == os_id) {
                if !os.cuda.matches(&r.version) {
                    return Err(self.violation(Rule::OsImages, || format!("NVIDIA publishes CUDA {} for {os_id} only in `{}`; {} is not among them", r.version, os.cuda, r.version), || vec![os.origin.clone()]));
                }
            }
        }
        self.cuda_has_image(r)
    }

    /// Every target builds on an `nvidia/cuda` image of the locked CUDA release (the
    /// requested OS's, else the newest Ubuntu's: `select::base_image`), so a release whose
    /// tags the catalog does not record for that OS is never locked (it once only ranked
    /// last, and `lock` then failed in the generators).
    fn cuda_has_image(&self, r: &CudaRelease) -> Result<(), Violation> {
        let found = self.imaged.contains(&r.version);
        if found {
            return Ok(());
        }
        let os = self.spec.os.as_deref().unwrap_or("Ubuntu");
        // The OS entry is where the catalog says which images NVIDIA publishes for it.
        let origin = self
            .cat
            .os
            .iter()
            .find(|o| Some(&o.id) == self.spec.os.as_ref())
            .map_or(&r.origin, |o| &o.origin);
        Err(self.violation(
            Rule::OsImages,
            || format!("the catalog records no `nvidia/cuda` image tags for CUDA {} on {os} (catalog/images.toml), and every target builds on one", r.version),
            || vec![origin.clone()],
        ))
    }

    /// torch built from source: a source entry, and the requested arch list covers every GPU.
    fn unary_torch_source(&self, i: usize) -> Result<(), Violation> {
        let b = &self.cat.torch[i];
        let Some(src) = self.cat.torch_source(&b.version) else {
            return Err(self.violation(
                Rule::TorchSource,
                || format!("the catalog has no source entry (`[[source]]`: tag, build requirements) for torch {}, so it cannot be built from source", b.version),
                || vec![b.release_origin.clone()],
            ));
        };
        let archs = self.torch_archs(i);
        for cc in &self.ccs {
            if best_way(archs, *cc).is_none() {
                return Err(self.violation(Rule::TorchSourceArchs, || format!("the requested arch list `{}` has no kernels for compute capability {cc}{}, and a source build has no other", crate::core::arch::torch_list(archs).join(";"), self.gpu_names_for(*cc)), Vec::new));
            }
        }
        if let Some(forms) = &src.cmake_archs {
            if let Some(t) = archs.iter().find(|t| !forms.accepts(t)) {
                return Err(self.violation(Rule::TorchSourceArchNames, || format!("PyTorch {}'s CMake does not accept `{}` in TORCH_CUDA_ARCH_LIST: its select_compute_arch.cmake takes {}", b.version, t.torch_form(), cmake_forms(forms)), || vec![src.origin.clone()]));
            }
        }
        self.torch_source_compiler(i)
    }

    /// The OS's GCC builds torch from source: at least PyTorch's minimum, at most the
    /// newest GCC the candidate's nvcc accepts. Unchecked where the catalog lacks a fact.
    fn torch_source_compiler(&self, i: usize) -> Result<(), Violation> {
        let b = &self.cat.torch[i];
        let (Some(src), Some(os)) = (self.cat.torch_source(&b.version), self.spec.os.as_deref())
        else {
            return Ok(());
        };
        let Some(gcc) = src.compiler.os_gcc(os) else {
            return Ok(());
        };
        if let Some(min) = src.compiler.gcc_min.as_ref().filter(|m| gcc < *m) {
            return Err(self.violation(Rule::TorchSourceCompiler, || format!("{os} compiles with GCC {gcc}, older than the GCC {min} PyTorch requires to build {} from source", b.version), || vec![src.origin.clone()]));
        }
        if let Some(max) = src
            .compiler
            .nvcc_gcc_max(&b.cuda)
            .filter(|m| gcc.major() > u64::from(*m))
        {
            return Err(self.violation(Rule::TorchSourceCompiler, || format!("{os} compiles with GCC {gcc}, newer than GCC {max}, the newest nvcc of CUDA {} accepts as its host compiler", b.cuda), || vec![src.origin.clone()]));
        }
        Ok(())
    }

    /// A torch wheel: it installs on the platform and its arch list covers every GPU.
    fn unary_torch_wheel(&self, i: usize) -> Result<(), Violation> {
        let b = &self.cat.torch[i];
        self.wheel_installs(
            &b.platforms,
            &b.install,
            || format!("torch {}", b.full),
            || b.release_origin.clone(),
        )?;
        if b.arch_list.is_empty() {
            return Err(self.violation(
                Rule::TorchArchList,
                || {
                    format!(
                        "the catalog has no verified arch list for torch {}, so it is never picked",
                        b.full
                    )
                },
                || vec![b.origin.clone()],
            ));
        }
        for cc in &self.ccs {
            if best_way(&b.arch_list, *cc).is_none() {
                // The list is formatted only for a message (not in the quiet search).
                return Err(self.violation(Rule::TorchArchList, || format!("torch {} is built for `{}`, which has no kernels for compute capability {cc}{}", b.full, crate::core::arch::torch_list(&b.arch_list).join(";"), self.gpu_names_for(*cc)), || vec![b.origin.clone()]));
            }
        }
        Ok(())
    }

    /// A vLLM wheel: it installs on the platform and runs on every GPU.
    fn unary_vllm(&self, i: usize) -> Result<(), Violation> {
        let r = &self.cat.vllm[i];
        self.wheel_installs(
            &r.platforms,
            &r.install,
            || format!("vLLM {}", r.version),
            || r.origin.clone(),
        )?;
        if let Some(min) = r.min_cc {
            if let Some(cc) = self.ccs.iter().find(|cc| **cc < min) {
                return Err(self.violation(
                    Rule::VllmMinCc,
                    || {
                        format!(
                            "vLLM {} needs compute capability ≥ {min}, but {cc}{} is older",
                            r.version,
                            self.gpu_names_for(*cc)
                        )
                    },
                    || vec![r.origin.clone()],
                ));
            }
        }
        Ok(())
    }

    /// cuDNN or NCCL: kernels for every GPU.
    fn unary_lib(&self, c: Component, i: usize) -> Result<(), Violation> {
        let r = if c == Component::Cudnn {
            &self.cat.cudnn[i]
        } else {
            &self.cat.nccl[i]
        };
        self.wheel_installs(
            &r.platforms,
            &r.install,
            || format!("{} {}", c.display(), r.version),
            || r.origin.clone(),
        )?;
        let floor = if c == Component::Cudnn {
            self.cudnn_floor
        } else {
            self.nccl_floor
        };
        if let Some((row, cc)) = floor {
            if r.version < row.since {
                return Err(self.violation(
                    Rule::LibGpuSupport,
                    || {
                        format!(
                            "{} {} has no kernels for compute capability {cc}{}: support for compute capability ≥ {} starts with {} {}",
                            c.display(),
                            r.version,
                            self.gpu_names_for(cc),
                            row.cc,
                            c.display(),
                            row.since
                        )
                    },
                    || vec![row.origin.clone()],
                ));
            }
        }
        if let Some(min) = r.min_cc {
            if let Some(cc) = self.ccs.iter().find(|cc| **cc < min) {
                return Err(self.violation(
                    Rule::LibMinCc,
                    || {
                        format!(
                            "{} {} supports compute capability ≥ {min} only, not {cc}{}",
                            c.display(),
                            r.version,
                            self.gpu_names_for(*cc)
                        )
                    },
                    || vec![r.origin.clone()],
                ));
            }
        }
        Ok(())
    }

    /// An extra: it installs on the platform and runs on every GPU.
    fn unary_extra(&self, c: Component, i: usize) -> Result<(), Violation> {
        let e = &self.cat.extras[i];
        self.wheel_installs(
            &e.platforms,
            &e.install,
            || format!("{} {}", c.display(), e.label()),
            || e.origin.clone(),
        )?;
        if let Some(min) = e.min_cc {
            if let Some(cc) = self.ccs.iter().find(|cc| **cc < min) {
                return Err(self.violation(
                    Rule::ExtraMinCc,
                    || {
                        format!(
                            "{} {} needs compute capability ≥ {min}, but {cc}{} is older",
                            c.display(),
                            e.label(),
                            self.gpu_names_for(*cc)
                        )
                    },
                    || vec![e.origin.clone()],
                ));
            }
        }
        Ok(())
    }

    fn gpu_names_for(&self, cc: Cc) -> String {
        let names: Vec<&str> = self
            .spec
            .gpus
            .iter()
            .filter_map(|g| self.cat.gpu(g))
            .filter(|g| g.cc == cc)
            .map(|g| g.id.as_str())
            .collect();
        if names.is_empty() {
            String::new()
        } else {
            format!(" ({})", names.join(", "))
        }
    }

    /// GPU-specific driver floors and ceilings; also applied to the host driver.
    pub(crate) fn driver_fits_gpus(&self, d: &Version) -> Result<(), Violation> {
        for g in self.spec.gpus.iter().filter_map(|g| self.cat.gpu(g)) {
            if let Some(last) = g.last_driver_branch {
                if d.major() > last {
                    return Err(self.violation(Rule::GpuLastBranch, || format!("driver {d} is from branch R{}, but {} ({}) is supported only up to branch R{last}", d.major(), g.id, g.arch), || vec![g.origin.clone()]));
                }
            }
            if let Some(min) = &g.min_driver {
                if d < min {
                    return Err(self.violation(
                        Rule::GpuMinDriver,
                        || format!("{} needs driver ≥ {min}, and driver {d} is older", g.id),
                        || vec![g.origin.clone()],
                    ));
                }
            }
        }
        for (g, x) in &self.generations {
            if let Some(last) = x.last_driver_branch {
                if d.major() > last {
                    return Err(self.violation(
                        Rule::GpuGenerationDriver,
                        || format!("driver {d} is from branch R{}, but {} GPUs ({}) are supported only up to branch R{last}", d.major(), x.arch, g.id),
                        || vec![x.origin.clone()],
                    ));
                }
            }
            if let Some(min) = &x.min_driver {
                if d < min {
                    return Err(self.violation(
                        Rule::GpuGenerationDriver,
                        || format!("driver {d} predates {} support: {} GPUs ({}) need driver ≥ {min} (branch R{})", x.arch, x.arch, g.id, min.major()),
                        || vec![x.origin.clone()],
                    ));
                }
            }
        }
        Ok(())
    }

    /// The facts of the generation, GPU-support, DeepSpeed-minimum and tested tables that
    /// a resolution relied on (for `catalog-digest`).
    pub(crate) fn rule_facts(&self, picks: &[(Component, usize)]) -> Vec<Origin> {
        let mut out: Vec<Origin> = self
            .generations
            .iter()
            .map(|(_, x)| x.origin.clone())
            .collect();
        let has = |c: Component| picks.iter().find(|(x, _)| *x == c).map(|(_, i)| *i);
        if has(Component::Cudnn).is_some() {
            out.extend(self.cudnn_floor.map(|(r, _)| r.origin.clone()));
        }
        if has(Component::Nccl).is_some() {
            out.extend(self.nccl_floor.map(|(r, _)| r.origin.clone()));
        }
        if let (Some(t), Some(_)) = (has(Component::Torch), has(Component::Deepspeed)) {
            let v = &self.cat.torch[t].version;
            out.extend(
                self.cat
                    .deepspeed_torch_minimum
                    .iter()
                    .filter(|m| m.torch == (v.major(), v.minor()))
                    .map(|m| m.origin.clone()),
            );
        }
        for t in &self.cat.tested {
            if picks.iter().any(|&(c, i)| {
                t.version_of(c)
                    .is_some_and(|v| v == self.version(c, Cand::Idx(i)))
            }) {
                out.push(t.origin.clone());
            }
        }
        out
    }

    /// Whether a PyPI release installs at all, and on the OS:
    /// * [`Rule::Yanked`]: a release yanked on PyPI is never locked;
    /// * [`Rule::WheelPlatform`]: a release with Windows/macOS wheels only is never locked,
    ///   and with `[stack].os` some wheel must install on the OS's glibc and the hosts' CPU
    ///   (releases whose platform tags the catalog does not record pass);
    /// * [`Rule::DependencyGlibc`]: with `[stack].os`, the glibc floor of the release's
    ///   install (its dependencies' wheels included), where recorded, must not be newer
    ///   than the OS's glibc.
    fn wheel_installs(
        &self,
        platforms: &[crate::catalog::WheelPlatform],
        install: &crate::catalog::Installability,
        what: impl Fn() -> String,
        fact: impl Fn() -> Origin,
    ) -> Result<(), Violation> {
        if let Some(y) = &install.yanked {
            return Err(self.violation(
                Rule::Yanked,
                || {
                    format!(
                        "{} is yanked on PyPI (seen {}): {}",
                        what(),
                        y.observed,
                        y.reason.as_deref().unwrap_or("no reason given")
                    )
                },
                || vec![fact()],
            ));
        }
        if !platforms.is_empty() && !platforms.iter().any(|p| p.is_linux()) {
            return Err(self.violation(
                Rule::WheelPlatform,
                || {
                    let tags: Vec<String> =
                        platforms.iter().map(|p| format!("`{}`", p.tag)).collect();
                    format!(
                        "{} has no Linux wheel on PyPI, only {}",
                        what(),
                        tags.join(", ")
                    )
                },
                || vec![fact()],
            ));
        }
        let Some((os, glibc)) = self.platform else {
            return Ok(());
        };
        if !platforms.is_empty() && !platforms.iter().any(|p| p.installs_on(self.cpu, glibc)) {
            return Err(self.platform_violation(platforms, &what, &fact, os, glibc));
        }
        if let Some(f) = install.floor_above(self.cpu, glibc) {
            return Err(self.violation(
                Rule::DependencyGlibc,
                || {
                    format!(
                        "{} needs glibc ≥ {} on {}, and {os} ships glibc {glibc}: {} ({})",
                        what(),
                        f.glibc,
                        f.cpu,
                        f.by,
                        first_url(&f.source)
                    )
                },
                || vec![fact()],
            ));
        }
        Ok(())
    }

    /// [`Rule::WheelPlatform`]: no wheel of the release installs on the OS and CPU.
    fn platform_violation(
        &self,
        platforms: &[crate::catalog::WheelPlatform],
        what: &impl Fn() -> String,
        fact: &impl Fn() -> Origin,
        os: &str,
        glibc: &Version,
    ) -> Violation {
        self.violation(
            Rule::WheelPlatform,
            || {
                let tags: Vec<String> = platforms.iter().map(|p| format!("`{}`", p.tag)).collect();
                let on_cpu = platforms.iter().any(|p| p.cpu == self.cpu);
                format!(
                    "{}'s wheels are built for {} only; {os} ships glibc {glibc}{}",
                    what(),
                    tags.join(", "),
                    if on_cpu {
                        String::new()
                    } else {
                        format!(" and the hosts are {}", self.cpu)
                    }
                )
            },
            || vec![fact()],
        )
    }

    /// How a driver runs code built against CUDA `cuda` (major.minor or full release).
    /// `needs_ptx_jit` excludes minor-version compatibility, which does not cover JIT of
    /// newer PTX.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn driver_runs(
        &self,
        driver: &Version,
        cuda: &Version,
        full_min: Option<&Version>,
        needs_ptx_jit: bool,
        rule: Rule,
        what: impl FnOnce() -> String,
        fact: Option<&Origin>,
    ) -> Result<Compat, Violation> {
        if full_min.is_some_and(|m| driver >= m) {
            return Ok(Compat::Full);
        }
        let mvc = self.cat.minor_compat_for(cuda.major());
        let mut facts: Vec<Origin> = fact.into_iter().cloned().collect();
        if let Some(m) = mvc {
            facts.push(m.origin.clone());
            if driver >= &m.driver_min && !needs_ptx_jit {
                return Ok(Compat::MinorVersion);
            }
        }
        let fc = self.cat.forward_compat_for(cuda);
        if let Some(f) = fc {
            facts.push(f.origin.clone());
            if self.all_datacenter
                && f.bases.contains(&driver.major())
                && cuda.major() >= driver_cuda_major(self, driver)
            {
                return Ok(Compat::Forward {
                    package: f.package.clone(),
                });
            }
        }
        if !self.verbose {
            return Err(Violation {
                rule,
                message: String::new(),
                facts: Vec::new(),
            });
        }
        let what = what();
        let mut msg = match full_min {
            Some(m) => format!("{what} needs driver ≥ {m}"),
            None => format!("{what} has no published full-support driver minimum"),
        };
        match mvc {
            Some(m) if needs_ptx_jit && driver >= &m.driver_min => msg.push_str(&format!("; driver {driver} would run it only through minor-version compatibility, which does not cover the PTX JIT this stack needs")),
            Some(m) if full_min == Some(&m.driver_min) => msg.push_str(&format!(" (also the CUDA {} minor-version-compatibility floor); driver {driver} is older", cuda.major())),
            Some(m) => msg.push_str(&format!(", or ≥ {} through CUDA {} minor-version compatibility; driver {driver} is older", m.driver_min, cuda.major())),
            None => msg.push_str(&format!("; driver {driver} is older")),
        }
        if let Some(f) = fc {
            if !self.all_datacenter {
                msg.push_str(&format!(
                    " (forward compatibility with `{}` is for data center GPUs only)",
                    f.package
                ));
            } else if !f.bases.contains(&driver.major()) {
                let bases = f
                    .bases
                    .iter()
                    .map(|b| format!("R{b}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                msg.push_str(&format!(
                    " (forward compatibility with `{}` supports base branches {} only, not R{})",
                    f.package,
                    if bases.is_empty() {
                        "none".into()
                    } else {
                        bases
                    },
                    driver.major()
                ));
            }
        }
        Err(Violation {
            rule,
            message: msg,
            facts: facts.iter().map(fact_of).collect(),
        })
    }

    /// Pairwise rules between `a` (component `ca`) and `b` (component `cb`), with `ca < cb`
    /// in [`Component`] order.
    pub(crate) fn check_pair(
        &self,
        ca: Component,
        a: Cand,
        cb: Component,
        b: Cand,
    ) -> Result<(), Violation> {
        use Component as C;
        let (Some(ia), ib) = (idx(a), idx(b)) else {
            // `a` is the host driver.
            return self.check_pair_driver(self.version(ca, a), ca, cb, b);
        };
        match (ca, cb) {
            (C::Driver, _) => self.check_pair_driver(&self.cat.drivers[ia].version, ca, cb, b),
            (C::Cuda, C::Cudnn) | (C::Cuda, C::Nccl) => self.pair_cuda_lib(ia, cb, ib.unwrap_or(0)),
            (C::Cuda, C::Torch) if self.source_archs.is_some() => {
                self.pair_cuda_torch_source(ia, ib.unwrap_or(0))
            }
            (C::Cuda, C::Torch) => self.pair_cuda_torch(ia, ib.unwrap_or(0)),
            (C::Cudnn, C::Torch) | (C::Nccl, C::Torch) if self.source_archs.is_some() => {
                self.pair_lib_torch_source(ca, ia, ib.unwrap_or(0))
            }
            (C::Cudnn, C::Torch) | (C::Nccl, C::Torch) => {
                self.pair_lib_torch(ca, ia, ib.unwrap_or(0))
            }
            (C::Python, C::Torch) => self.pair_python_torch(ia, ib.unwrap_or(0)),
            (C::Python, C::Vllm) => self.pair_python_vllm(ia, ib.unwrap_or(0)),
            (C::Python, C::Deepspeed) => self.pair_python_deepspeed(ia, ib.unwrap_or(0)),
            (C::Torch, C::Vllm) => self.pair_torch_vllm(ia, ib.unwrap_or(0)),
            (C::Python, extra_pattern!()) => self.pair_python_extra(ia, cb, ib.unwrap_or(0)),
            (C::Torch, extra_pattern!()) => self.pair_torch_extra(ia, cb, ib.unwrap_or(0)),
            (C::Torch, C::Deepspeed) => self.pair_torch_deepspeed(ia, ib.unwrap_or(0)),
            _ => Ok(()),
        }
    }

    /// The toolkit and cuDNN or NCCL: a build for its CUDA major.
    fn pair_cuda_lib(&self, ia: usize, cb: Component, ib: usize) -> Result<(), Violation> {
        use Component as C;
        let cu = &self.cat.cuda[ia];
        let lib = if cb == C::Cudnn {
            &self.cat.cudnn[ib]
        } else {
            &self.cat.nccl[ib]
        };
        if lib.cuda_majors.contains(&cu.version.major()) {
            Ok(())
        } else {
            Err(self.violation(
                Rule::LibCudaMajor,
                || {
                    format!(
                        "{} {} ships builds for CUDA {} only, not CUDA {}",
                        cb.display(),
                        lib.version,
                        lib.cuda_majors
                            .iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join(", "),
                        cu.version.major()
                    )
                },
                || vec![lib.origin.clone()],
            ))
        }
    }

    /// The toolkit and a torch source build: the same CUDA minor, and nvcc accepts every arch.
    fn pair_cuda_torch_source(&self, ia: usize, ib: usize) -> Result<(), Violation> {
        let cu = &self.cat.cuda[ia];
        let t = &self.cat.torch[ib];
        if (cu.version.major(), cu.version.minor()) != (t.cuda.major(), t.cuda.minor()) {
            return Err(self.violation(
                Rule::TorchSourceToolkit,
                || {
                    format!(
                        "torch {} is built from source with the CUDA {} toolkit, not CUDA {}",
                        t.full, t.cuda, cu.version
                    )
                },
                || vec![t.origin.clone()],
            ));
        }
        let archs = self.source_archs.as_deref().unwrap_or_default();
        let Some(ts) = self.cat.targets_for(&cu.version) else {
            return Err(self.violation(
                Rule::TorchSourceToolkit,
                || {
                    format!(
                        "the catalog does not know which GPU targets nvcc of CUDA {} accepts",
                        cu.version
                    )
                },
                || vec![cu.origin.clone()],
            ));
        };
        let missing: Vec<&Target> = archs
            .iter()
            .filter(|a| !ts.sm.iter().any(|s| s.cc == a.cc && s.suffix == a.suffix))
            .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(self.violation(Rule::TorchSourceToolkit, || format!("nvcc of CUDA {} does not accept {}, which the torch source build compiles for", cu.version, missing.iter().map(|t| format!("`{}`", t.torch_form())).collect::<Vec<_>>().join(", ")), || vec![ts.origin.clone()]))
        }
    }

    /// The toolkit and a torch wheel: the same CUDA major, and the wheel's runtime not newer.
    fn pair_cuda_torch(&self, ia: usize, ib: usize) -> Result<(), Violation> {
        let cu = &self.cat.cuda[ia];
        let t = &self.cat.torch[ib];
        let same_major = cu.version.major() == t.cuda.major();
        let not_newer =
            (t.cuda.major(), t.cuda.minor()) <= (cu.version.major(), cu.version.minor());
        if same_major && not_newer {
            Ok(())
        } else {
            Err(self.violation(
                Rule::TorchToolkit,
                || {
                    if same_major {
                        format!(
                            "torch {} bundles the CUDA {} runtime, newer than the CUDA {} toolkit",
                            t.full, t.cuda, cu.version
                        )
                    } else {
                        format!(
                            "torch {} is a CUDA {} build, but the toolkit is CUDA {}",
                            t.full,
                            t.cuda.major(),
                            cu.version
                        )
                    }
                },
                || vec![t.origin.clone()],
            ))
        }
    }

    /// cuDNN or NCCL and a torch source build: a build for its CUDA major, and the cuDNN it needs.
    fn pair_lib_torch_source(&self, ca: Component, ia: usize, ib: usize) -> Result<(), Violation> {
        use Component as C;
        let lib = if ca == C::Cudnn {
            &self.cat.cudnn[ia]
        } else {
            &self.cat.nccl[ia]
        };
        let t = &self.cat.torch[ib];
        if !lib.cuda_majors.contains(&t.cuda.major()) {
            return Err(self.violation(
                Rule::LibCudaMajor,
                || {
                    format!(
                        "{} {} ships builds for CUDA {} only, not CUDA {}",
                        ca.display(),
                        lib.version,
                        lib.cuda_majors
                            .iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join(", "),
                        t.cuda.major()
                    )
                },
                || vec![lib.origin.clone()],
            ));
        }
        match self.cat.torch_source(&t.version) {
            Some(src) if ca == C::Cudnn && lib.version < src.cudnn_min => Err(self.violation(
                Rule::TorchSourceCudnn,
                || {
                    format!(
                        "building torch {} from source needs cuDNN ≥ {}, not {}",
                        t.version, src.cudnn_min, lib.version
                    )
                },
                || vec![src.origin.clone()],
            )),
            _ => Ok(()),
        }
    }

    /// cuDNN or NCCL and a torch wheel: the wheel's pin, or a build for its CUDA major.
    fn pair_lib_torch(&self, ca: Component, ia: usize, ib: usize) -> Result<(), Violation> {
        use Component as C;
        let lib = if ca == C::Cudnn {
            &self.cat.cudnn[ia]
        } else {
            &self.cat.nccl[ia]
        };
        let t = &self.cat.torch[ib];
        let pin = if ca == C::Cudnn { &t.cudnn } else { &t.nccl };
        let rule = if ca == C::Cudnn {
            Rule::TorchCudnnPin
        } else {
            Rule::TorchNcclPin
        };
        match pin {
            Some(p) if *p != lib.version => Err(Violation {
                rule,
                message: if self.verbose {
                    format!(
                        "torch {} pins {} {p}, not {}",
                        t.full,
                        ca.display(),
                        lib.version
                    )
                } else {
                    String::new()
                },
                facts: if self.verbose {
                    vec![fact_of(&t.origin)]
                } else {
                    Vec::new()
                },
            }),
            Some(_) => Ok(()),
            None if lib.cuda_majors.contains(&t.cuda.major()) => Ok(()),
            None => Err(self.violation(
                Rule::LibCudaMajor,
                || {
                    format!(
                        "{} {} has no CUDA {} build for torch {}",
                        ca.display(),
                        lib.version,
                        t.cuda.major(),
                        t.full
                    )
                },
                || vec![lib.origin.clone()],
            )),
        }
    }

    /// Python and torch: the wheel's Python range.
    fn pair_python_torch(&self, ia: usize, ib: usize) -> Result<(), Violation> {
        let py = &self.cat.python[ia].version;
        let t = &self.cat.torch[ib];
        if t.python.matches(py) {
            Ok(())
        } else {
            Err(self.violation(
                Rule::WheelPython,
                || {
                    format!(
                        "torch {} publishes wheels for Python `{}` only, not {py}",
                        t.full, t.python
                    )
                },
                || vec![t.python_origin.clone()],
            ))
        }
    }

    /// Python and vLLM: its Python range.
    fn pair_python_vllm(&self, ia: usize, ib: usize) -> Result<(), Violation> {
        let py = &self.cat.python[ia].version;
        let r = &self.cat.vllm[ib];
        if r.python.matches(py) {
            Ok(())
        } else {
            Err(self.violation(
                Rule::WheelPython,
                || {
                    format!(
                        "vLLM {} supports Python `{}` only, not {py}",
                        r.version, r.python
                    )
                },
                || vec![r.origin.clone()],
            ))
        }
    }

    /// Python and DeepSpeed: its Python range.
    fn pair_python_deepspeed(&self, ia: usize, ib: usize) -> Result<(), Violation> {
        let py = &self.cat.python[ia].version;
        let r = &self.cat.deepspeed[ib];
        match &r.python {
            Some(req) if !req.matches(py) => Err(self.violation(
                Rule::WheelPython,
                || {
                    format!(
                        "DeepSpeed {} supports Python `{req}` only, not {py}",
                        r.version
                    )
                },
                || vec![r.origin.clone()],
            )),
            _ => Ok(()),
        }
    }

    /// torch and vLLM: the exact torch pin and the wheel's CUDA major.
    fn pair_torch_vllm(&self, ia: usize, ib: usize) -> Result<(), Violation> {
        let t = &self.cat.torch[ia];
        let r = &self.cat.vllm[ib];
        if t.version.cmp_release(&r.torch).is_ne() {
            Err(self.violation(
                Rule::VllmTorchPin,
                || {
                    format!(
                        "vLLM {} pins torch =={}, not {}",
                        r.version, r.torch, t.version
                    )
                },
                || vec![r.origin.clone()],
            ))
        } else if t.cuda.major() != r.cuda.major() {
            Err(self.violation(Rule::VllmTorchPin, || format!("vLLM {}'s wheel is built with CUDA {}, so torch must be a CUDA {} build, not {}", r.version, r.cuda, r.cuda.major(), t.full), || vec![r.origin.clone()]))
        } else {
            Ok(())
        }
    }

    /// Python and an extra: its Python range.
    fn pair_python_extra(&self, ia: usize, cb: Component, ib: usize) -> Result<(), Violation> {
        let py = &self.cat.python[ia].version;
        let e = &self.cat.extras[ib];
        match &e.python {
            Some(req) if !req.matches(py) => Err(self.violation(
                Rule::ExtraPython,
                || {
                    format!(
                        "{} {} requires Python `{req}`, not {py}",
                        cb.display(),
                        e.label()
                    )
                },
                || vec![e.origin.clone()],
            )),
            _ => Ok(()),
        }
    }

    /// torch and an extra: its torch requirement and CUDA majors.
    fn pair_torch_extra(&self, ia: usize, cb: Component, ib: usize) -> Result<(), Violation> {
        let t = &self.cat.torch[ia];
        let e = &self.cat.extras[ib];
        if let Some(req) = &e.torch {
            // `t.version` is the release without its `+cuXXX` label.
            if !req.matches(&t.version) {
                return Err(self.violation(
                    Rule::ExtraTorch,
                    || {
                        format!(
                            "{} {} requires torch `{req}`, not {}",
                            cb.display(),
                            e.label(),
                            t.version
                        )
                    },
                    || vec![e.origin.clone()],
                ));
            }
        }
        match &e.cuda_majors {
            Some(majors) if !majors.contains(&t.cuda.major()) => Err(self.violation(
                Rule::ExtraCudaMajor,
                || {
                    format!(
                        "{} {} ships builds for CUDA {} only, but torch {} is a CUDA {} build",
                        cb.display(),
                        e.label(),
                        majors
                            .iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join(", "),
                        t.full,
                        t.cuda.major()
                    )
                },
                || vec![e.origin.clone(), t.origin.clone()],
            )),
            _ => Ok(()),
        }
    }

    /// torch and DeepSpeed: its torch requirement and the oldest release per torch minor.
    fn pair_torch_deepspeed(&self, ia: usize, ib: usize) -> Result<(), Violation> {
        let t = &self.cat.torch[ia];
        let r = &self.cat.deepspeed[ib];
        if let Some(m) = self
            .cat
            .deepspeed_torch_minimum
            .iter()
            .find(|m| m.torch == (t.version.major(), t.version.minor()))
        {
            if r.version < m.deepspeed {
                return Err(self.violation(
                    Rule::DeepspeedTorchMinimum,
                    || {
                        format!(
                            "DeepSpeed {} does not work with torch {}.{} (torch {}): the oldest DeepSpeed that does is {}",
                            r.version, m.torch.0, m.torch.1, t.version, m.deepspeed
                        )
                    },
                    || vec![m.origin.clone()],
                ));
            }
        }
        match &r.torch {
            Some(req) if !req.matches(&t.version) => Err(self.violation(
                Rule::DeepspeedTorch,
                || {
                    format!(
                        "DeepSpeed {} requires torch `{req}`, not {}",
                        r.version, t.version
                    )
                },
                || vec![r.origin.clone()],
            )),
            _ => Ok(()),
        }
    }

    /// What the pairwise rules between `c` and `other` read of candidate `k` of `c`, as a
    /// key: two candidates of `c` with equal keys pass or fail the same checks against
    /// every candidate of `other` (only their messages may differ). `None` where no key is
    /// defined: such candidates are compared one by one. Arc consistency checks one
    /// candidate per key, so that a neighbour's many releases that the rules cannot tell
    /// apart (every patch of one CUDA minor, to a driver) cost one check, not one each.
    ///
    /// Must read everything [`Ctx::check_pair`] reads; the solver's tests check that equal
    /// keys give equal results over whole catalogs.
    pub(crate) fn pair_key(&self, c: Component, k: Cand, other: Component) -> Option<PairKey<'c>> {
        use Component as C;
        use KeyPart::{Num, Req, Ver};
        let i = idx(k)?;
        let cat = self.cat;
        let req_text = |r: &'c Option<VersionReq>| Req(r.as_ref());
        let parts = match (c, other) {
            // What a driver check reads of CUDA code: its major.minor (the full-support
            // minimum of the minor, minor-version and forward compatibility), the release's
            // own minimum, and whether PTX JIT is needed.
            (C::Cuda, C::Driver) => {
                let r = &cat.cuda[i];
                let m = r.driver_min.as_ref().map_or(Num(u64::MAX), Ver);
                vec![Num(r.version.major()), Num(r.version.minor()), m]
            }
            (C::Torch, C::Driver) => {
                let t = &cat.torch[i];
                let ptx = u64::from(self.needs_ptx(self.torch_archs(i)));
                vec![Num(t.cuda.major()), Num(t.cuda.minor()), Num(ptx)]
            }
            (C::Vllm, C::Driver) => {
                let r = &cat.vllm[i];
                vec![Num(r.cuda.major()), Num(r.cuda.minor())]
            }
            (C::Cuda, C::Torch) if self.source_archs.is_some() => {
                // The source rules also read the release's nvcc targets.
                let r = &cat.cuda[i];
                let ts = cat
                    .targets
                    .iter()
                    .position(|t| t.cuda.matches(&r.version))
                    .map_or(u64::MAX, |p| p as u64);
                vec![Num(r.version.major()), Num(r.version.minor()), Num(ts)]
            }
            (C::Cuda, C::Cudnn | C::Nccl | C::Torch) => {
                let r = &cat.cuda[i];
                vec![Num(r.version.major()), Num(r.version.minor())]
            }
            (C::Cudnn | C::Nccl, C::Cuda) => {
                let l = self.lib(c, i);
                l.cuda_majors.iter().map(|m| Num(*m)).collect()
            }
            (C::Torch, C::Cuda) => {
                let t = &cat.torch[i];
                vec![Num(t.cuda.major()), Num(t.cuda.minor())]
            }
            (C::Torch, C::Cudnn | C::Nccl) if self.source_archs.is_some() => {
                // The source rules read the release (its cuDNN minimum) and the CUDA major.
                let t = &cat.torch[i];
                vec![Ver(&t.version), Num(t.cuda.major())]
            }
            (C::Torch, C::Cudnn | C::Nccl) => {
                let t = &cat.torch[i];
                let pin = if other == C::Cudnn { &t.cudnn } else { &t.nccl };
                vec![pin.as_ref().map_or(Num(u64::MAX), Ver), Num(t.cuda.major())]
            }
            (C::Torch, C::Python) => vec![Req(Some(&cat.torch[i].python))],
            (C::Vllm, C::Python) => vec![Req(Some(&cat.vllm[i].python))],
            (C::Deepspeed, C::Python) => vec![req_text(&cat.deepspeed[i].python)],
            (extra_pattern!(), C::Python) => vec![req_text(&cat.extras[i].python)],
            (C::Deepspeed, C::Torch) => {
                let r = &cat.deepspeed[i];
                let mut v = vec![req_text(&r.torch)];
                // Which torch minors' minimums it meets.
                v.extend(
                    cat.deepspeed_torch_minimum
                        .iter()
                        .map(|m| Num(u64::from(r.version >= m.deepspeed))),
                );
                v
            }
            (extra_pattern!(), C::Torch) => {
                let e = &cat.extras[i];
                let mut v = vec![req_text(&e.torch)];
                if let Some(m) = &e.cuda_majors {
                    v.extend(m.iter().map(|m| Num(*m)));
                }
                v
            }
            (C::Torch, extra_pattern!() | C::Deepspeed) => {
                let t = &cat.torch[i];
                vec![Ver(&t.version), Num(t.cuda.major())]
            }
            (C::Python, _) => vec![Ver(&cat.python[i].version)],
            // No rule between the two: every candidate behaves alike.
            (a, b) if !has_rule(a, b) => Vec::new(),
            _ => return None,
        };
        Some(PairKey(parts))
    }

    /// A necessary condition of the exact pins among the pairwise rules, as a key: a
    /// candidate of `c` whose join is [`Join::Key`] passes the checks against a candidate
    /// of `other` only if that one's join is the same key or [`Join::Any`]. vLLM pins one
    /// torch release (and its wheel's CUDA major), a torch wheel pins one cuDNN and one
    /// NCCL, an extra may require `==` one torch release. Arc consistency looks supports
    /// up by this key instead of scanning the neighbour's whole domain.
    pub(crate) fn join(&self, c: Component, k: Cand, other: Component) -> Join {
        use Component as C;
        let Some(i) = idx(k) else { return Join::Any };
        let cat = self.cat;
        // Releases equal under `cmp_release` have equal numeric parts once trailing zeros
        // are dropped (the phase is left to the check itself).
        let release = |v: &Version, tag: u64| {
            let p = v.parts();
            let n = p.iter().rposition(|x| *x != 0).map_or(0, |n| n + 1);
            let mut key = vec![tag];
            key.extend_from_slice(&p[..n]);
            Join::Key(key)
        };
        let exact = |v: &Version| {
            let mut key = vec![u64::MAX, v.parts().len() as u64];
            key.extend_from_slice(v.parts());
            Join::Key(key)
        };
        match (c, other) {
            (C::Torch, C::Vllm) => {
                let t = &cat.torch[i];
                release(&t.version, t.cuda.major())
            }
            (C::Vllm, C::Torch) => {
                let r = &cat.vllm[i];
                release(&r.torch, r.cuda.major())
            }
            (C::Cudnn | C::Nccl, C::Torch) => exact(&self.lib(c, i).version),
            // A source build uses the system libraries: no pin.
            (C::Torch, C::Cudnn | C::Nccl) if self.source_archs.is_some() => Join::Any,
            (C::Torch, C::Cudnn | C::Nccl) => {
                let t = &cat.torch[i];
                let pin = if other == C::Cudnn { &t.cudnn } else { &t.nccl };
                pin.as_ref().map_or(Join::Any, exact)
            }
            (C::Torch, extra_pattern!()) => release(&cat.torch[i].version, 0),
            (extra_pattern!(), C::Torch) => match cat.extras[i].torch.as_ref().map(|r| r.clauses())
            {
                Some([crate::core::version::Clause::Eq(v)]) => release(v, 0),
                _ => Join::Any,
            },
            _ => Join::Any,
        }
    }

    fn lib(&self, c: Component, i: usize) -> &'c crate::catalog::LibRelease {
        if c == Component::Cudnn {
            &self.cat.cudnn[i]
        } else {
            &self.cat.nccl[i]
        }
    }

    fn check_pair_driver(
        &self,
        d: &Version,
        _ca: Component,
        cb: Component,
        b: Cand,
    ) -> Result<(), Violation> {
        let Cand::Idx(i) = b else { return Ok(()) };
        match cb {
            Component::Cuda => {
                let r = &self.cat.cuda[i];
                self.driver_runs(
                    d,
                    &r.version,
                    r.driver_min.as_ref(),
                    false,
                    Rule::DriverCuda,
                    || format!("CUDA {}", r.version),
                    Some(&r.origin),
                )
                .map(|_| ())
            }
            Component::Torch => {
                let t = &self.cat.torch[i];
                let ptx = self.needs_ptx(self.torch_archs(i));
                self.driver_runs(
                    d,
                    &t.cuda,
                    self.full_min_for_runtime(&t.cuda),
                    ptx,
                    Rule::WheelRuntimeDriver,
                    || format!("torch {} (CUDA {} runtime)", t.full, t.cuda),
                    self.cuda_release_origin(&t.cuda),
                )
                .map(|_| ())
            }
            Component::Vllm => {
                let r = &self.cat.vllm[i];
                self.driver_runs(
                    d,
                    &r.cuda,
                    self.full_min_for_runtime(&r.cuda),
                    false,
                    Rule::WheelRuntimeDriver,
                    || format!("vLLM {} (CUDA {} wheel)", r.version, r.cuda),
                    self.cuda_release_origin(&r.cuda),
                )
                .map(|_| ())
            }
            _ => Ok(()),
        }
    }

    /// The arch list torch build `i` has: the source build's, or the wheel's.
    pub(crate) fn torch_archs(&self, i: usize) -> &[Target] {
        match &self.source_archs {
            Some(a) => a,
            None => &self.cat.torch[i].arch_list,
        }
    }

    /// `true` when some GPU runs this arch list only through PTX JIT.
    pub(crate) fn needs_ptx(&self, arch_list: &[Target]) -> bool {
        self.ccs
            .iter()
            .any(|cc| best_way(arch_list, *cc) == Some(RunsVia::PtxJit))
    }

    /// Rules over three components: DeepSpeed's nvcc-vs-torch CUDA check.
    pub(crate) fn check_triple(
        &self,
        cuda: usize,
        torch: usize,
        ds: usize,
    ) -> Result<(), Violation> {
        let cu = &self.cat.cuda[cuda].version;
        let t = &self.cat.torch[torch];
        let r = &self.cat.deepspeed[ds];
        if (cu.major(), cu.minor()) == (t.cuda.major(), t.cuda.minor()) {
            return Ok(());
        }
        let in_list = |v: &Version| {
            r.cuda_mismatch_ok
                .iter()
                .any(|m| m.major() == v.major() && m.minor() == v.minor())
        };
        if cu.major() == t.cuda.major() && in_list(cu) && in_list(&t.cuda) {
            return Ok(());
        }
        Err(self.violation(Rule::DeepspeedNvcc, || format!(
                "DeepSpeed {} builds its ops with nvcc from CUDA {cu}, which must match torch {}'s CUDA {} (its allowed mismatches: {})",
                r.version,
                t.full,
                t.cuda,
                if r.cuda_mismatch_ok.is_empty() { "none".to_string() } else { vlist(&r.cuda_mismatch_ok.iter().collect::<Vec<_>>()) }
            ), || vec![r.origin.clone()]))
    }

    /// The compatibility the lock relies on for the driver and a CUDA version.
    pub(crate) fn compat_for(
        &self,
        driver: &Version,
        cuda: &Version,
        full_min: Option<&Version>,
        ptx: bool,
    ) -> Compat {
        self.driver_runs(
            driver,
            cuda,
            full_min,
            ptx,
            Rule::DriverCuda,
            String::new,
            None,
        )
        .unwrap_or(Compat::Unchecked)
    }
}

/// The newest CUDA major a driver runs natively (from the minor-compat floors).
fn driver_cuda_major(ctx: &Ctx<'_>, driver: &Version) -> u64 {
    ctx.cat
        .minor_compat
        .iter()
        .filter(|m| driver >= &m.driver_min)
        .map(|m| m.major)
        .max()
        .unwrap_or(0)
}

fn idx(c: Cand) -> Option<usize> {
    match c {
        Cand::Host => None,
        Cand::Idx(i) => Some(i),
    }
}

/// A part of a [`PairKey`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum KeyPart<'c> {
    Num(u64),
    Ver(&'c Version),
    /// A requirement, or none; compared by its clauses.
    Req(Option<&'c VersionReq>),
}

impl Ord for KeyPart<'_> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        use crate::core::version::Clause;
        fn clause(c: &Clause) -> (u8, Option<&Version>) {
            match c {
                Clause::Any => (0, None),
                Clause::Prefix(v) => (1, Some(v)),
                Clause::Eq(v) => (2, Some(v)),
                Clause::Ne(v) => (3, Some(v)),
                Clause::Ge(v) => (4, Some(v)),
                Clause::Gt(v) => (5, Some(v)),
                Clause::Le(v) => (6, Some(v)),
                Clause::Lt(v) => (7, Some(v)),
            }
        }
        let rank = |p: &KeyPart<'_>| match p {
            KeyPart::Num(_) => 0,
            KeyPart::Ver(_) => 1,
            KeyPart::Req(_) => 2,
        };
        match (self, other) {
            (KeyPart::Num(a), KeyPart::Num(b)) => a.cmp(b),
            (KeyPart::Ver(a), KeyPart::Ver(b)) => a.cmp(b),
            (KeyPart::Req(a), KeyPart::Req(b)) => match (a, b) {
                (Some(x), Some(y)) => x
                    .clauses()
                    .iter()
                    .map(clause)
                    .cmp(y.clauses().iter().map(clause)),
                _ => a.is_some().cmp(&b.is_some()),
            },
            _ => rank(self).cmp(&rank(other)),
        }
    }
}

impl PartialOrd for KeyPart<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// See [`Ctx::pair_key`].
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct PairKey<'c>(Vec<KeyPart<'c>>);

/// See [`Ctx::join`].
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Join {
    /// May pass against any candidate.
    Any,
    /// Passes only against candidates with the same key, or [`Join::Any`].
    Key(Vec<u64>),
}

/// Whether [`Ctx::check_pair`] has a rule between two components (in either order).
pub(crate) fn has_rule(a: Component, b: Component) -> bool {
    use Component as C;
    let (a, b) = if a < b { (a, b) } else { (b, a) };
    matches!(
        (a, b),
        (C::Driver, C::Cuda | C::Torch | C::Vllm)
            | (C::Cuda, C::Cudnn | C::Nccl | C::Torch)
            | (C::Cudnn | C::Nccl, C::Torch)
            | (
                C::Python,
                C::Torch | C::Vllm | C::Deepspeed | extra_pattern!()
            )
            | (C::Torch, C::Vllm | C::Deepspeed | extra_pattern!())
    )
}

/// The entry forms a release's CMake accepts, for messages: `` `N.N`, `N.Na` or `N.Nf` (each
/// with or without `+PTX`)``.
pub(crate) fn cmake_forms(forms: &crate::catalog::CmakeArchs) -> String {
    let mut all = vec!["`N.N`".to_string()];
    all.extend(forms.suffixes.iter().map(|s| match s {
        crate::core::arch::Suffix::A => "`N.Na`".to_string(),
        crate::core::arch::Suffix::F => "`N.Nf`".to_string(),
        crate::core::arch::Suffix::None => "`N.N`".to_string(),
    }));
    let last = all.pop().unwrap_or_default();
    let head = if all.is_empty() {
        last
    } else {
        format!("{} or {last}", all.join(", "))
    };
    format!("{head} (each with or without `+PTX`)")
}

#[cfg(test)]
mod key_tests {
    //! [`Ctx::pair_key`] and [`Ctx::join`] must agree with [`Ctx::check_pair`]: arc
    //! consistency trusts them to skip checks.
    use super::*;
    use std::collections::BTreeMap;

    fn pair(ctx: &Ctx<'_>, x: Component, a: Cand, y: Component, b: Cand) -> bool {
        if x < y {
            ctx.check_pair(x, a, y, b).is_ok()
        } else {
            ctx.check_pair(y, b, x, a).is_ok()
        }
    }

    fn check(cat: &Catalog, hardware: &str) {
        let mut text = format!("[stack]\nname = \"keys\"\n[hardware]\n{hardware}\n[components]\n");
        for c in ["cudnn", "nccl", "python", "torch", "vllm", "deepspeed"] {
            text.push_str(&format!("{c} = \"*\"\n"));
        }
        for c in Component::EXTRAS {
            text.push_str(&format!("{} = \"*\"\n", c.name()));
        }
        let spec = Spec::parse("keys.toml", &text, cat).unwrap();
        let ctx = Ctx::quiet(cat, &spec);
        let mut checked = 0;
        for x in Component::ALL {
            for y in Component::ALL {
                if x == y {
                    continue;
                }
                let (xs, ys) = (ctx.candidates(x), ctx.candidates(y));
                if !has_rule(x, y) {
                    assert!(xs
                        .iter()
                        .all(|&a| ys.iter().all(|&b| pair(&ctx, x, a, y, b))));
                    continue;
                }
                // Candidates of `x` with one key: the same answers against every `y`.
                let mut rows: BTreeMap<PairKey<'_>, Vec<bool>> = BTreeMap::new();
                for &a in &xs {
                    let row: Vec<bool> = ys.iter().map(|&b| pair(&ctx, x, a, y, b)).collect();
                    checked += row.len();
                    // Candidates of `y` with one key: the same answer against `a`.
                    let mut cols: BTreeMap<PairKey<'_>, bool> = BTreeMap::new();
                    for (&b, &ok) in ys.iter().zip(&row) {
                        if let Some(k) = ctx.pair_key(y, b, x) {
                            let first = *cols.entry(k).or_insert(ok);
                            assert_eq!(first, ok, "{x:?} {a:?} vs {y:?} {b:?}");
                        }
                        // A pin: a pass needs equal keys, or an `Any`.
                        let (ja, jb) = (ctx.join(x, a, y), ctx.join(y, b, x));
                        if ok {
                            assert!(
                                ja == jb || ja == Join::Any || jb == Join::Any,
                                "{x:?} {a:?} vs {y:?} {b:?}: {ja:?} {jb:?}"
                            );
                        }
                    }
                    if let Some(k) = ctx.pair_key(x, a, y) {
                        let first = rows.entry(k).or_insert_with(|| row.clone());
                        assert_eq!(*first, row, "{x:?} {a:?} against {y:?}");
                    }
                }
            }
        }
        assert!(checked > 10_000, "{checked}");
    }

    #[test]
    fn keys_and_pins_agree_with_the_rules_on_the_stock_catalog() {
        let cat = Catalog::stock().unwrap();
        for hardware in [
            "gpus = [\"h100\"]",
            "gpus = [\"v100\"]\ndriver = \"535.54.03\"",
            "gpus = [\"rtx-4090\"]\ndriver = \"550.144.03\"",
            "gpus = [\"t4\", \"a100\"]",
        ] {
            check(&cat, hardware);
        }
    }

    #[test]
    fn keys_and_pins_agree_with_the_rules_on_a_synthetic_catalog() {
        // Copies share every field but their versions and pins: keys must tell them apart
        // where a rule does, and group them where none does.
        let cat = Catalog::from_layers(&[crate::synth::scaled_catalog(2)]).unwrap();
        check(&cat, "gpus = [\"h100\"]\ndriver = \"550.54.15\"");
    }
}
