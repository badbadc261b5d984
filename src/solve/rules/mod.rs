//! The compatibility rules, each with an id and the catalog facts it uses.
//!
//! A rule looks at one, two or three chosen candidates and either accepts them or returns
//! a [`Violation`] in the user's words, naming the facts (with their sources) that decide.

use std::collections::BTreeMap;

use crate::catalog::{Catalog, Origin};
use crate::core::arch::{Cc, Target};
use crate::core::version::{Version, VersionReq};
use crate::core::{extra_pattern, Component};
use crate::spec::Spec;

pub use crate::error::{Fact, Rule, Violation};

mod cuda_libs;
mod driver_cuda;
mod gpu;
mod os;
mod python;
mod torch;
mod unary;

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
    /// when none is requested: the image `select::base_image` then takes) that lists the
    /// runtime and devel tags, for rule `os.cuda-images`.
    imaged: std::collections::BTreeSet<&'c Version>,
    /// Of those, the releases with an image NVIDIA still supports (its supported-tags
    /// list), which rank before releases whose images are all unsupported: a pick should
    /// pass `check --strict` (`unsafe-version`) on the stock catalog.
    pub(crate) supported_images: std::collections::BTreeSet<&'c Version>,
    /// Of those imaged, the releases whose images no NVIDIA list files (status `observed`:
    /// tags seen in public files only). They rank with the unsupported ones, after the
    /// supported.
    pub(crate) observed_images: std::collections::BTreeSet<&'c Version>,
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
    /// ([`super::Problem::initial`]): `because` starts each deeper reason from it. Set by
    /// [`super::solve_locked`] from its quiet search (removals unworded: see
    /// [`super::Removal::reason`]), else filled on first use.
    pub(crate) initial: std::sync::OnceLock<super::Initial>,
}

fn fact_of(o: &Origin) -> Fact {
    Fact {
        file: o.file.to_string(),
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
        // Every target builds on the runtime and devel images: an entry without both tags
        // does not make its release lockable.
        let imaged = cat
            .images
            .iter()
            .filter(for_os)
            .filter(|im| im.has_base_tags())
            .map(|im| &im.cuda)
            .collect();
        let supported_images = cat
            .images
            .iter()
            .filter(for_os)
            .filter(|im| im.status == crate::catalog::ImageStatus::Supported)
            .map(|im| &im.cuda)
            .collect();
        let listed: std::collections::BTreeSet<&Version> = cat
            .images
            .iter()
            .filter(for_os)
            .filter(|im| im.status != crate::catalog::ImageStatus::Observed)
            .map(|im| &im.cuda)
            .collect();
        let observed_images = cat
            .images
            .iter()
            .filter(for_os)
            .map(|im| &im.cuda)
            .filter(|v| !listed.contains(v))
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
            observed_images,
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
        let parts: PairKey<'c> = match (c, other) {
            // What a driver check reads of CUDA code: its major.minor (the full-support
            // minimum of the minor, minor-version and forward compatibility), the release's
            // own minimum, and whether PTX JIT is needed.
            (C::Cuda, C::Driver) => {
                let r = &cat.cuda[i];
                let m = r.driver_min.as_ref().map_or(Num(u64::MAX), Ver);
                key([Num(r.version.major()), Num(r.version.minor()), m])
            }
            (C::Torch, C::Driver) => {
                let t = &cat.torch[i];
                let ptx = u64::from(self.needs_ptx(self.torch_archs(i)));
                key([Num(t.cuda.major()), Num(t.cuda.minor()), Num(ptx)])
            }
            (C::Vllm, C::Driver) => {
                let r = &cat.vllm[i];
                key([Num(r.cuda.major()), Num(r.cuda.minor())])
            }
            (C::Cuda, C::Torch) if self.source_archs.is_some() => {
                // The source rules also read the release's nvcc targets.
                let r = &cat.cuda[i];
                let ts = cat
                    .targets
                    .iter()
                    .position(|t| t.cuda.matches(&r.version))
                    .map_or(u64::MAX, |p| p as u64);
                key([Num(r.version.major()), Num(r.version.minor()), Num(ts)])
            }
            (C::Cuda, C::Cudnn | C::Nccl | C::Torch) => {
                let r = &cat.cuda[i];
                key([Num(r.version.major()), Num(r.version.minor())])
            }
            (C::Cudnn | C::Nccl, C::Cuda) => {
                let l = self.lib(c, i);
                l.cuda_majors.iter().map(|m| Num(*m)).collect()
            }
            (C::Torch, C::Cuda) => {
                let t = &cat.torch[i];
                key([Num(t.cuda.major()), Num(t.cuda.minor())])
            }
            (C::Torch, C::Cudnn | C::Nccl) if self.source_archs.is_some() => {
                // The source rules read the release (its cuDNN minimum) and the CUDA major.
                let t = &cat.torch[i];
                key([Ver(&t.version), Num(t.cuda.major())])
            }
            (C::Torch, C::Cudnn | C::Nccl) => {
                let t = &cat.torch[i];
                let pin = if other == C::Cudnn { &t.cudnn } else { &t.nccl };
                key([pin.as_ref().map_or(Num(u64::MAX), Ver), Num(t.cuda.major())])
            }
            (C::Torch, C::Python) => key([Req(Some(&cat.torch[i].python))]),
            (C::Vllm, C::Python) => key([Req(Some(&cat.vllm[i].python))]),
            (C::Deepspeed, C::Python) => key([req_text(&cat.deepspeed[i].python)]),
            (extra_pattern!(), C::Python) => key([req_text(&cat.extras[i].python)]),
            (C::Deepspeed, C::Torch) => {
                let r = &cat.deepspeed[i];
                // Which torch minors' minimums it meets.
                let met = cat
                    .deepspeed_torch_minimum
                    .iter()
                    .map(|m| Num(u64::from(r.version >= m.deepspeed)));
                std::iter::once(req_text(&r.torch)).chain(met).collect()
            }
            (extra_pattern!(), C::Torch) => {
                let e = &cat.extras[i];
                let majors = e.cuda_majors.iter().flatten().map(|m| Num(*m));
                std::iter::once(req_text(&e.torch)).chain(majors).collect()
            }
            (C::Torch, extra_pattern!() | C::Deepspeed) => {
                let t = &cat.torch[i];
                key([Ver(&t.version), Num(t.cuda.major())])
            }
            (C::Python, _) => key([Ver(&cat.python[i].version)]),
            // No rule between the two: every candidate behaves alike.
            (a, b) if !has_rule(a, b) => PairKey::default(),
            _ => return None,
        };
        Some(parts)
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
        // Keys are zero-padded to a fixed length (a version has at most six parts): equal
        // keys are equal versions, as before, without an allocation per candidate.
        let release = |v: &Version, tag: u64| {
            let p = v.parts();
            let mut key = [0; 8];
            key[0] = tag;
            key[1..=p.len()].copy_from_slice(p);
            Join::Key(key)
        };
        let exact = |v: &Version| {
            let p = v.parts();
            let mut key = [0; 8];
            key[0] = u64::MAX;
            key[1] = p.len() as u64;
            key[2..2 + p.len()].copy_from_slice(p);
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

    /// The cuDNN (`c` is [`Component::Cudnn`]) or NCCL release at index `i`.
    pub(super) fn lib(&self, c: Component, i: usize) -> &'c crate::catalog::LibRelease {
        if c == Component::Cudnn {
            &self.cat.cudnn[i]
        } else {
            &self.cat.nccl[i]
        }
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

/// See [`Ctx::pair_key`]: a sequence of parts, compared as one (lexicographically). The
/// first four are held inline (arc consistency builds a key per candidate and neighbour, and
/// nearly every key is one to three parts long); a longer key keeps the rest on the heap.
#[derive(Clone, Debug, Default)]
pub(crate) struct PairKey<'c> {
    head: [Option<KeyPart<'c>>; 4],
    tail: Vec<KeyPart<'c>>,
}

impl<'c> PairKey<'c> {
    fn parts(&self) -> impl Iterator<Item = &KeyPart<'c>> {
        self.head.iter().map_while(Option::as_ref).chain(&self.tail)
    }
}

impl<'c> FromIterator<KeyPart<'c>> for PairKey<'c> {
    fn from_iter<I: IntoIterator<Item = KeyPart<'c>>>(parts: I) -> PairKey<'c> {
        let mut key = PairKey::default();
        let mut parts = parts.into_iter();
        for (slot, part) in key.head.iter_mut().zip(parts.by_ref()) {
            *slot = Some(part);
        }
        key.tail.extend(parts);
        key
    }
}

/// A [`PairKey`] of the given parts.
fn key<const N: usize>(parts: [KeyPart<'_>; N]) -> PairKey<'_> {
    parts.into_iter().collect()
}

impl PartialEq for PairKey<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.parts().eq(other.parts())
    }
}

impl Eq for PairKey<'_> {}

impl Ord for PairKey<'_> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.parts().cmp(other.parts())
    }
}

impl PartialOrd for PairKey<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// See [`Ctx::join`].
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Join {
    /// May pass against any candidate.
    Any,
    /// Passes only against candidates with the same key, or [`Join::Any`].
    Key([u64; 8]),
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
mod tests;
