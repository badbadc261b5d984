//! The solver: a pure function from (catalog, spec) to a [`Resolution`] or an
//! [`Explanation`].
//!
//! # Method
//!
//! The stack is a small constraint problem: one variable per component, each with a
//! domain of catalog candidates, and the rules of [`rules`] between them (unary: the
//! request and the hardware; pairwise: driver × CUDA, torch × vLLM, torch × an extra, …;
//! one ternary: DeepSpeed's nvcc-vs-torch CUDA check). An extra (flash-attn, xformers, …)
//! is a variable like any other, whose domain is its `[[extra]]` catalog entries.
//!
//! 1. **Filter** each domain by the unary rules, remembering why each candidate went.
//! 2. **Arc consistency** (AC-3) removes candidates that no candidate of a neighbour
//!    accepts, again remembering why. An emptied domain is a conflict with a derivation.
//! 3. **Depth-first search** in the priority order below, candidates best first, checking
//!    every rule among assigned components and forward-checking the others. The first
//!    complete assignment is the lexicographically best one; the search is exhaustive, so
//!    if any stack exists it is found.
//!
//! # Preferences (documented order)
//!
//! Components are decided in this order, each taking its best remaining candidate:
//! vLLM, DeepSpeed, torch, Python, the extras (in [`Component`] order: flash-attn, xformers,
//! transformers, accelerate, bitsandbytes, tensorrt-llm, cupy, nvidia-dali), CUDA, cuDNN,
//! NCCL, driver. The extras come after torch and Python because they are add-ons that fit
//! the framework, not the other way round: an extra takes the newest release that accepts
//! the chosen torch and Python, and makes torch older only when no release of it accepts a
//! newer one. "Best" is the newest version, except:
//! * torch: newest release; with an installed driver, variants it runs with full support
//!   first; then the PyPI default variant; then the newest CUDA;
//! * CUDA: with an installed driver, releases it fully supports first; then the release
//!   whose major.minor matches torch's CUDA variant; then the newest;
//! * driver (when not installed): supported production/LTS branches first, then newest;
//! * an extra: releases of the component's own PyPI project first (`flash-attn`), then a
//!   differently named distribution (`flash_attn_3`, FlashAttention-3, a separate package);
//!   within each, newest first, then by distribution name.

mod because;
mod explain;
pub mod matrix;
pub mod rules;

use std::collections::{BTreeMap, BTreeSet};

use crate::catalog::{Catalog, Origin};
use crate::core::arch::{Cc, Target};
use crate::core::version::Version;
use crate::core::Component;
use crate::error::Error;
use crate::spec::Spec;

use because::because;
pub use explain::{Cause, Explanation};
use rules::{Cand, Ctx, Join, PairKey};
pub use rules::{Compat, Rule, Violation};

/// Decision order.
pub(crate) const ORDER: [Component; 16] = [
    Component::Vllm,
    Component::Deepspeed,
    Component::Torch,
    Component::Python,
    Component::FlashAttn,
    Component::Xformers,
    Component::Transformers,
    Component::Accelerate,
    Component::Bitsandbytes,
    Component::TensorrtLlm,
    Component::Cupy,
    Component::NvidiaDali,
    Component::Cuda,
    Component::Cudnn,
    Component::Nccl,
    Component::Driver,
];

/// A resolved component.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pick {
    /// Which component.
    pub component: Component,
    /// The exact catalog string (torch with its variant: `2.5.1+cu124`).
    pub version: Version,
    /// What the user asked: the requirement, `host` or `implied by torch`.
    pub requested: String,
    /// The catalog entry it comes from (`None` for a host driver the catalog lacks).
    pub origin: Option<Origin>,
    /// Rules and facts that bound this pick, in the user's words.
    pub because: Vec<String>,
    /// The catalog records the pick stands on, copied out of the catalog: the lock is
    /// built from these, never from positions in a catalog (`None` for the host driver's
    /// own version, Python, and hand-built picks).
    pub record: Option<Record>,
}

/// Two records are equal when they name the same catalog entry: the same kind, version
/// and (for an extra) distribution, or for the driver the same branch.
impl PartialEq for Record {
    fn eq(&self, other: &Record) -> bool {
        match (self, other) {
            (Record::Driver { branch: a }, Record::Driver { branch: b }) => {
                a.as_ref().map(|x| x.number) == b.as_ref().map(|x| x.number)
            }
            (Record::Extra(a), Record::Extra(b)) => {
                a.pypi_name == b.pypi_name && a.version == b.version
            }
            (a, b) => {
                std::mem::discriminant(a) == std::mem::discriminant(b) && a.version() == b.version()
            }
        }
    }
}

impl Eq for Record {}

/// The catalog records behind a [`Pick`]: what the lock writes about a component beyond
/// its version (branch, minimum drivers, wheel index and files, source build). A
/// [`Resolution`] carries them so that [`crate::Lock::from_resolution`] reads no catalog
/// positions, and another catalog cannot make it return another entry's data.
#[derive(Clone, Debug)]
#[non_exhaustive]
// A dozen records per lock, built once and read in place: boxing the large variants would
// add an allocation each and buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum Record {
    /// The driver's branch, when the catalog knows it.
    Driver {
        /// The branch.
        branch: Option<crate::catalog::DriverBranch>,
    },
    /// A CUDA toolkit release and the minor-version compatibility of its major.
    Cuda {
        /// The release.
        release: crate::catalog::CudaRelease,
        /// Minor-version compatibility for the release's major, when the catalog has it.
        minor_compat: Option<crate::catalog::MinorCompat>,
    },
    /// A cuDNN or NCCL release.
    Lib(crate::catalog::LibRelease),
    /// A torch build and, when the catalog has one, its release's source build.
    Torch {
        /// The build (wheel variant).
        build: Box<crate::catalog::TorchBuild>,
        /// The release's source build.
        source: Option<crate::catalog::TorchSource>,
    },
    /// A vLLM release.
    Vllm(Box<crate::catalog::VllmRelease>),
    /// An extra's release (FlashAttention, xformers, CuPy, …).
    Extra(Box<crate::catalog::ExtraRelease>),
    /// A DeepSpeed release.
    Deepspeed(crate::catalog::DeepspeedRelease),
}

impl Record {
    /// The catalog entry's version as a pick names it (torch with its variant); the
    /// driver's branch has none of its own.
    pub fn version(&self) -> Option<&Version> {
        match self {
            Record::Driver { .. } => None,
            Record::Cuda { release, .. } => Some(&release.version),
            Record::Lib(l) => Some(&l.version),
            Record::Torch { build, .. } => Some(&build.full),
            Record::Vllm(v) => Some(&v.version),
            Record::Extra(e) => Some(&e.version),
            Record::Deepspeed(d) => Some(&d.version),
        }
    }

    /// The record of candidate `k` for `c` in the catalog the solver read.
    fn of(cat: &Catalog, c: Component, k: Cand, version: &Version) -> Option<Record> {
        let i = match k {
            Cand::Idx(i) => Some(i),
            Cand::Host => None,
        };
        Some(match (c, i) {
            (Component::Driver, _) => Record::Driver {
                branch: cat.branch_of(version).cloned(),
            },
            (Component::Cuda, Some(i)) => Record::Cuda {
                release: cat.cuda[i].clone(),
                minor_compat: cat.minor_compat_for(cat.cuda[i].version.major()).cloned(),
            },
            (Component::Cudnn, Some(i)) => Record::Lib(cat.cudnn[i].clone()),
            (Component::Nccl, Some(i)) => Record::Lib(cat.nccl[i].clone()),
            (Component::Torch, Some(i)) => Record::Torch {
                build: Box::new(cat.torch[i].clone()),
                source: cat.torch_source(&cat.torch[i].version).cloned(),
            },
            (Component::Vllm, Some(i)) => Record::Vllm(Box::new(cat.vllm[i].clone())),
            (crate::core::extra_pattern!(), Some(i)) => {
                Record::Extra(Box::new(cat.extras[i].clone()))
            }
            (Component::Deepspeed, Some(i)) => Record::Deepspeed(cat.deepspeed[i].clone()),
            _ => return None,
        })
    }
}

/// The result of solving: every component of the stack, with the facts used.
#[derive(Clone, Debug)]
pub struct Resolution {
    /// The request.
    pub spec: Spec,
    /// The arch list (sorted): each GPU's `sm_XY` plus the listed archs.
    pub arch_list: Vec<Target>,
    /// The compute capabilities the stack runs on.
    pub capabilities: Vec<Cc>,
    /// The picks, in [`Component`] order.
    pub picks: Vec<Pick>,
    /// How the driver runs the CUDA toolkit, when both are in the stack.
    pub cuda_compat: Option<Compat>,
    /// How the driver runs torch's bundled CUDA runtime.
    pub torch_compat: Option<Compat>,
    /// How the driver runs vLLM's wheel CUDA.
    pub vllm_compat: Option<Compat>,
    /// Digest of the catalog entries this resolution used.
    pub catalog_digest: String,
    /// Facts used, for `catalog-digest` and provenance.
    #[allow(dead_code)]
    pub(crate) used: Vec<Origin>,
    /// The requested GPUs' catalog records, in the request's order.
    pub gpus: Vec<crate::catalog::Gpu>,
    /// Positions in the catalog the solver read: solver tests only. Nothing downstream
    /// reads them; the lock is built from each pick's [`Record`].
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) chosen: BTreeMap<Component, Option<usize>>,
}

impl Resolution {
    /// The pick of a component.
    pub fn pick(&self, c: Component) -> Option<&Pick> {
        self.picks.iter().find(|p| p.component == c)
    }

    /// The record of a component's pick.
    pub fn record(&self, c: Component) -> Option<&Record> {
        self.pick(c).and_then(|p| p.record.as_ref())
    }

    /// The torch build's record.
    pub fn torch_build(&self) -> Option<&crate::catalog::TorchBuild> {
        match self.record(Component::Torch) {
            Some(Record::Torch { build, .. }) => Some(build),
            _ => None,
        }
    }
}

/// The members of the stack: listed components plus those they imply.
pub(crate) fn members(spec: &Spec) -> BTreeMap<Component, String> {
    use Component as C;
    let mut m: BTreeMap<Component, String> = spec
        .components
        .iter()
        .map(|(c, r)| (*c, r.to_string()))
        .collect();
    let imply = |c: Component, by: Component, m: &mut BTreeMap<Component, String>| {
        m.entry(c)
            .or_insert_with(|| format!("implied by {}", by.name()));
    };
    for by in [C::Vllm, C::Deepspeed] {
        if m.contains_key(&by) {
            imply(C::Torch, by, &mut m);
        }
    }
    // Extras are Python packages installed on top of torch: each brings torch (and through
    // it Python and CUDA) into the stack, even those that do not depend on torch themselves
    // (CuPy, DALI), because the image layers put every extra above torch.
    for by in Component::EXTRAS {
        if m.contains_key(&by) {
            imply(C::Torch, by, &mut m);
        }
    }
    for by in [C::Vllm, C::Deepspeed, C::Torch] {
        if m.contains_key(&by) {
            imply(C::Python, by, &mut m);
            imply(C::Cuda, by, &mut m);
        }
    }
    // A torch source build compiles against the stack's cuDNN and system NCCL.
    if spec.torch_source.is_some() && m.contains_key(&C::Torch) {
        for c in [C::Cudnn, C::Nccl] {
            m.entry(c)
                .or_insert_with(|| "implied by torch (source build)".to_string());
        }
    }
    for by in [C::Cudnn, C::Nccl] {
        if m.contains_key(&by) {
            imply(C::Cuda, by, &mut m);
        }
    }
    let driver_req = match (&spec.driver, m.get(&C::Driver)) {
        (Some(h), Some(r)) => format!("host {h}, required {r}"),
        (Some(h), None) => format!("host {h}"),
        (None, Some(r)) => r.clone(),
        (None, None) => "implied: every stack runs on a driver".to_string(),
    };
    m.insert(C::Driver, driver_req);
    m
}

/// Solves `spec` against `catalog`.
///
/// ```
/// use gpustack::{Catalog, Spec, solve};
/// let catalog = Catalog::stock().unwrap();
/// let spec = Spec::parse("gpustack.toml", r#"
/// [stack]
/// name = "demo"
/// [hardware]
/// gpus = ["a100"]
/// [components]
/// torch = "*"
/// "#, &catalog).unwrap();
/// let resolution = solve(&catalog, &spec).unwrap();
/// assert!(resolution.pick(gpustack::Component::Torch).is_some());
/// ```
pub fn solve(catalog: &Catalog, spec: &Spec) -> Result<Resolution, Error> {
    solve_locked(catalog, spec, &BTreeMap::new())
}

/// [`solve`], trying the existing lock's picks first (like Cargo and uv): a locked version
/// that is still a candidate and fits every rule with the others is kept, even where a
/// newer one exists; one that no longer fits (the spec or catalog changed) gives way to
/// the usual preference. `gpustack lock --upgrade` passes no picks, `--upgrade-package`
/// leaves one out.
pub fn solve_locked(
    catalog: &Catalog,
    spec: &Spec,
    locked: &BTreeMap<Component, Version>,
) -> Result<Resolution, Error> {
    let members = members(spec);
    // Arc consistency runs once, quietly: the search starts from its result, and so does
    // every deeper reason `because` gives (which words the removals it names itself).
    let (found, initial) = {
        let mut quiet = Ctx::quiet(catalog, spec);
        quiet.locked.clone_from(locked);
        let mut p = Problem::new(&quiet, &members);
        let found = p.search();
        (found, p.into_initial())
    };
    let mut ctx = Ctx::new(catalog, spec);
    ctx.locked.clone_from(locked);
    let _ = ctx.initial.set(initial);
    // What a fresh lock takes, so that a kept pick's explanation can say so.
    let fresh = if locked.is_empty() || found.is_none() {
        None
    } else {
        solve_quiet(catalog, spec)
    };
    if let Some(f) = &fresh {
        ctx.fresh.clone_from(&f.versions);
    }
    match found {
        Some(assign) => {
            let mut r = resolution(&ctx, &members, &assign);
            if !locked.is_empty() {
                // Say where a kept pick is not what a fresh lock takes.
                for p in &mut r.picks {
                    let newer = fresh.as_ref().and_then(|f| f.versions.get(&p.component));
                    if let Some(v) = newer.filter(|v| {
                        *v != &p.version && locked.get(&p.component) == Some(&p.version)
                    }) {
                        p.because.push(format!(
                            "kept from the existing lock; a fresh lock takes {v}: `gpustack lock --upgrade-package {}`",
                            p.component.name()
                        ));
                    }
                }
            }
            Ok(r)
        }
        None => {
            // Search again with messages on, to explain.
            let mut p = Problem::new(&ctx, &members);
            let _ = p.search();
            Err(Error::NoSolution(Box::new(explain::explain(
                &ctx, &members, &p,
            ))))
        }
    }
}

/// A solution's versions and how the driver runs CUDA and torch, without the reasons
/// (`because`) and digest of a [`Resolution`]: what the driver-upgrade hints read.
pub(crate) struct Outcome {
    pub(crate) versions: BTreeMap<Component, Version>,
    pub(crate) cuda_compat: Option<Compat>,
    pub(crate) torch_compat: Option<Compat>,
}

/// Solves without explaining failures (hints use it; explaining would recurse).
pub(crate) fn solve_quiet(catalog: &Catalog, spec: &Spec) -> Option<Outcome> {
    let members = members(spec);
    let quiet = Ctx::quiet(catalog, spec);
    let assign = Problem::new(&quiet, &members).search()?;
    let (cuda_compat, torch_compat, _) = compats(&quiet, &assign);
    Some(Outcome {
        versions: assign
            .iter()
            .map(|(c, k)| (*c, quiet.version(*c, *k).clone()))
            .collect(),
        cuda_compat,
        torch_compat,
    })
}

/// Only decides whether a spec is satisfiable (used for hints and tests); the picks as
/// messages name them ([`Ctx::label`]: an extra's distribution when it is not the
/// component's own project).
pub(crate) fn solve_assignment(
    catalog: &Catalog,
    spec: &Spec,
) -> Option<BTreeMap<Component, String>> {
    let ctx = Ctx::quiet(catalog, spec);
    let members = members(spec);
    let mut p = Problem::new(&ctx, &members);
    p.search()
        .map(|a| a.iter().map(|(c, k)| (*c, ctx.label(*c, *k))).collect())
}

/// Orders CUDA candidates: with an installed driver, fully supported releases first; then
/// releases whose `nvidia/cuda` images NVIDIA still supports (a pick should pass `check
/// --strict`; images only observed in public files rank with the unsupported); then the release matching torch's CUDA major.minor; then newest (catalog
/// order). (A release
/// without an `nvidia/cuda` image for the OS is not a candidate: rule `os.cuda-images`.) Of `assign` it reads torch's CUDA major.minor only; [`matrix`] caches the
/// order per major.minor and relies on that.
pub(crate) fn sort_cuda(ctx: &Ctx<'_>, d: &mut [Cand], assign: &[(Component, Cand)]) {
    let torch_cuda = assign
        .iter()
        .find(|(x, _)| *x == Component::Torch)
        .and_then(|(_, k)| match k {
            Cand::Idx(i) => Some(ctx.cat.torch[*i].cuda.clone()),
            Cand::Host => None,
        });
    let host = ctx.host_driver.clone();
    d.sort_by_cached_key(|k| {
        let Cand::Idx(i) = k else {
            return (
                true,
                true,
                true,
                true,
                std::cmp::Reverse((0, 0)),
                true,
                0usize,
            );
        };
        let r = &ctx.cat.cuda[*i];
        let full = host
            .as_ref()
            .is_none_or(|h| r.driver_min.as_ref().is_some_and(|m| h >= m));
        let forward = host.as_ref().is_some_and(|h| {
            matches!(
                ctx.compat_for(h, &r.version, r.driver_min.as_ref(), false),
                Compat::Forward { .. }
            )
        });
        let same = torch_cuda
            .as_ref()
            .is_some_and(|t| t.major() == r.version.major() && t.minor() == r.version.minor());
        // Updates of one CUDA minor rank equal but for their age: a vendor-validated one
        // (`[[tested]]`) first, then the newest.
        let minor = std::cmp::Reverse((r.version.major(), r.version.minor()));
        let tested = ctx.tested_cuda.contains(&r.version);
        let supported = ctx.supported_images.contains(&r.version);
        (forward, !full, !supported, !same, minor, !tested, *i)
    });
}

/// Why a candidate was removed from its domain.
#[derive(Clone, Debug)]
pub(crate) struct Removal {
    pub(crate) cand: Cand,
    /// The broken rule; its message and facts are empty when a quiet context removed it
    /// ([`Removal::reason`] builds them again).
    pub(crate) violation: Violation,
    /// The neighbour whose every candidate rejects it, for AC removals.
    pub(crate) against: Option<Component>,
    /// For an AC removal, the neighbour's candidate whose rejection is reported (the
    /// first of its domain then); `None` when that domain was empty.
    pub(crate) with: Option<Cand>,
}

impl Removal {
    /// The violation of this removal of a candidate of `c`, with its message and facts
    /// built in `ctx`: the same check that removed it, asked again. Arc consistency is run
    /// once per lock, quietly ([`solve_locked`]); only the few removals an explanation
    /// names are worded.
    pub(crate) fn reason(&self, ctx: &Ctx<'_>, c: Component) -> Violation {
        let asked = match (self.against, self.with) {
            (Some(y), Some(b)) => if c < y {
                ctx.check_pair(c, self.cand, y, b)
            } else {
                ctx.check_pair(y, b, c, self.cand)
            }
            .and_then(|()| Err(empty_neighbour(y))),
            (Some(y), None) => Err(empty_neighbour(y)),
            (None, _) => match ctx.check_unary(c, self.cand) {
                Ok(()) => match (&ctx.host_driver, self.cand) {
                    (Some(h), Cand::Host) => ctx.driver_fits_gpus(h),
                    _ => Ok(()),
                },
                e => e,
            },
        };
        // The same check fails again; should it not, the recorded rule still stands.
        asked.err().unwrap_or_else(|| self.violation.clone())
    }
}

/// The violation of an AC removal whose neighbour had no candidate left.
fn empty_neighbour(y: Component) -> Violation {
    Violation {
        rule: Rule::Request,
        message: format!("no {} is left to go with it", y.display()),
        facts: vec![],
    }
}

/// What [`Problem::new`] computes from a context alone, kept by the context
/// ([`Ctx::initial`]).
pub(crate) struct Initial {
    order: Vec<Component>,
    domains: BTreeMap<Component, Vec<Cand>>,
    removed: BTreeMap<Component, Vec<Removal>>,
    wiped: Option<Component>,
}

pub(crate) struct Problem<'a, 'c> {
    pub(crate) ctx: &'a Ctx<'c>,
    /// Members in decision order.
    pub(crate) order: Vec<Component>,
    pub(crate) domains: BTreeMap<Component, Vec<Cand>>,
    pub(crate) removed: BTreeMap<Component, Vec<Removal>>,
    /// The component whose domain emptied first, if any.
    pub(crate) wiped: Option<Component>,
    /// The deepest failure the search met, for explanations of ternary conflicts.
    pub(crate) deepest: Option<(usize, Component, Violation)>,
    steps: u64,
}

impl<'a, 'c> Problem<'a, 'c> {
    pub(crate) fn new(ctx: &'a Ctx<'c>, members: &BTreeMap<Component, String>) -> Problem<'a, 'c> {
        let order: Vec<Component> = ORDER
            .iter()
            .copied()
            .filter(|c| members.contains_key(c))
            .collect();
        let mut domains = BTreeMap::new();
        let mut removed: BTreeMap<Component, Vec<Removal>> = BTreeMap::new();
        let mut wiped = None;
        for &c in &order {
            let mut keep = Vec::new();
            for k in ctx.candidates(c) {
                match ctx.check_unary(c, k) {
                    Ok(()) => keep.push(k),
                    Err(v) => removed.entry(c).or_default().push(Removal {
                        cand: k,
                        violation: v,
                        against: None,
                        with: None,
                    }),
                }
            }
            if c == Component::Driver {
                if let Some(h) = &ctx.host_driver {
                    if let Err(v) = ctx.driver_fits_gpus(h) {
                        keep.clear();
                        removed.entry(c).or_default().push(Removal {
                            cand: Cand::Host,
                            violation: v,
                            against: None,
                            with: None,
                        });
                    }
                }
            }
            if keep.is_empty() && wiped.is_none() {
                wiped = Some(c);
            }
            domains.insert(c, keep);
        }
        let mut p = Problem {
            ctx,
            order,
            domains,
            removed,
            wiped,
            deepest: None,
            steps: 0,
        };
        if p.wiped.is_none() {
            p.arc_consistency();
        }
        p
    }

    /// What [`Problem::new`] computed, without the context (the search changes none of it).
    fn into_initial(self) -> Initial {
        Initial {
            order: self.order,
            domains: self.domains,
            removed: self.removed,
            wiped: self.wiped,
        }
    }

    /// [`Problem::new`] for `ctx` and the members of its spec, computed once per context:
    /// a copy of the kept result.
    pub(crate) fn initial(ctx: &'a Ctx<'c>) -> Problem<'a, 'c> {
        let init = ctx
            .initial
            .get_or_init(|| Problem::new(ctx, &members(ctx.spec)).into_initial());
        Problem {
            ctx,
            order: init.order.clone(),
            domains: init.domains.clone(),
            removed: init.removed.clone(),
            wiped: init.wiped,
            deepest: None,
            steps: 0,
        }
    }

    fn pair(&self, ca: Component, a: Cand, cb: Component, b: Cand) -> Result<(), Violation> {
        if ca < cb {
            self.ctx.check_pair(ca, a, cb, b)
        } else {
            self.ctx.check_pair(cb, b, ca, a)
        }
    }

    fn arc_consistency(&mut self) {
        let comps = self.order.clone();
        let mut changed = true;
        while changed {
            changed = false;
            for &x in &comps {
                for &y in &comps {
                    // Without a rule between them every candidate of `y` supports every
                    // candidate of `x` (no domain is empty here).
                    if x == y || !rules::has_rule(x, y) {
                        continue;
                    }
                    let dy = &self.domains[&y];
                    // The candidates of `y` that can support a candidate of `x`, grouped by
                    // their pin ([`Ctx::join`]), one per rule key ([`Ctx::pair_key`]): the
                    // others of a key pass and fail the same checks.
                    let mut groups: BTreeMap<Join, Vec<Cand>> = BTreeMap::new();
                    let mut seen = BTreeSet::new();
                    for &b in dy {
                        let j = self.ctx.join(y, b, x);
                        let fresh = match self.ctx.pair_key(y, b, x) {
                            Some(k) => seen.insert((j.clone(), k)),
                            None => true,
                        };
                        if fresh {
                            groups.entry(j).or_default().push(b);
                        }
                    }
                    let any_pin = groups.get(&Join::Any).map_or(&[][..], Vec::as_slice);
                    let first = dy.first().copied();
                    let dx = self.domains[&x].clone();
                    let mut keep = Vec::with_capacity(dx.len());
                    // Candidates of `x` with one rule key share the answer.
                    let mut memo: BTreeMap<PairKey<'_>, bool> = BTreeMap::new();
                    for a in dx {
                        let ok = |b: &Cand| self.pair(x, a, y, *b).is_ok();
                        let key = self.ctx.pair_key(x, a, y);
                        let known = key.as_ref().and_then(|k| memo.get(k).copied());
                        let supported = known.unwrap_or_else(|| {
                            let found = match self.ctx.join(x, a, y) {
                                Join::Any => groups.values().flatten().any(ok),
                                j => {
                                    let same = groups.get(&j).map_or(&[][..], Vec::as_slice);
                                    same.iter().chain(any_pin).any(ok)
                                }
                            };
                            if let Some(k) = key {
                                memo.insert(k, found);
                            }
                            found
                        });
                        if supported {
                            keep.push(a);
                            continue;
                        }
                        // Every candidate of `y` rejects `a`: the first one's reason.
                        let violation = first
                            .and_then(|b| self.pair(x, a, y, b).err())
                            .unwrap_or_else(|| empty_neighbour(y));
                        self.removed.entry(x).or_default().push(Removal {
                            cand: a,
                            violation,
                            against: Some(y),
                            with: first,
                        });
                        changed = true;
                    }
                    let empty = keep.is_empty();
                    self.domains.insert(x, keep);
                    if empty {
                        self.wiped = Some(x);
                        return;
                    }
                }
            }
        }
    }

    /// Depth-first search; returns the assignment in decision order.
    pub(crate) fn search(&mut self) -> Option<Vec<(Component, Cand)>> {
        if self.wiped.is_some() {
            return None;
        }
        let mut assign: Vec<(Component, Cand)> = Vec::with_capacity(self.order.len());
        if self.dfs(&mut assign) {
            Some(assign)
        } else {
            None
        }
    }

    fn ranked(&self, c: Component, assign: &[(Component, Cand)]) -> Vec<Cand> {
        let mut d = self.domains[&c].clone();
        if c == Component::Cuda {
            sort_cuda(self.ctx, &mut d, assign);
        }
        if let Some(v) = self.ctx.locked.get(&c) {
            // The locked pick first; the rest keep their order (a stable sort).
            d.sort_by_key(|&k| match k {
                Cand::Idx(_) => self.ctx.version(c, k) != v,
                Cand::Host => true,
            });
        }
        d
    }

    fn dfs(&mut self, assign: &mut Vec<(Component, Cand)>) -> bool {
        let depth = assign.len();
        if depth == self.order.len() {
            return true;
        }
        let c = self.order[depth];
        'cand: for k in self.ranked(c, assign) {
            self.steps += 1;
            for &(x, a) in assign.iter() {
                if let Err(v) = self.pair(x, a, c, k) {
                    self.note_failure(depth, c, v);
                    continue 'cand;
                }
            }
            assign.push((c, k));
            if let Err(v) = self.check_triple(assign) {
                assign.pop();
                self.note_failure(depth, c, v);
                continue;
            }
            // Forward check: every later component keeps a candidate compatible with all
            // assigned ones.
            let mut dead = false;
            for &y in &self.order[depth + 1..] {
                let alive = self.domains[&y]
                    .iter()
                    .any(|&b| assign.iter().all(|&(x, a)| self.pair(x, a, y, b).is_ok()));
                if !alive {
                    dead = true;
                    break;
                }
            }
            if !dead && self.dfs(assign) {
                return true;
            }
            assign.pop();
        }
        false
    }

    fn note_failure(&mut self, depth: usize, c: Component, v: Violation) {
        if self.deepest.as_ref().is_none_or(|(d, _, _)| depth > *d) {
            self.deepest = Some((depth, c, v));
        }
    }

    fn check_triple(&self, assign: &[(Component, Cand)]) -> Result<(), Violation> {
        let get = |c: Component| {
            assign
                .iter()
                .find(|(x, _)| *x == c)
                .and_then(|(_, k)| match k {
                    Cand::Idx(i) => Some(*i),
                    Cand::Host => None,
                })
        };
        if let (Some(cu), Some(t), Some(ds)) = (
            get(Component::Cuda),
            get(Component::Torch),
            get(Component::Deepspeed),
        ) {
            self.ctx.check_triple(cu, t, ds)?;
        }
        Ok(())
    }
}
#[cfg(test)]
mod proptests;

/// How the driver runs the CUDA toolkit, torch's bundled runtime and vLLM's wheel CUDA in
/// an assignment (each `None` when the assignment lacks the component).
fn compats(
    ctx: &Ctx<'_>,
    assign: &[(Component, Cand)],
) -> (Option<Compat>, Option<Compat>, Option<Compat>) {
    let get = |c: Component| assign.iter().find(|(x, _)| *x == c).map(|(_, k)| *k);
    let driver = get(Component::Driver).map(|k| ctx.version(Component::Driver, k).clone());
    let cuda_compat = match (&driver, get(Component::Cuda)) {
        (Some(d), Some(Cand::Idx(i))) => {
            let r = &ctx.cat.cuda[i];
            Some(ctx.compat_for(d, &r.version, r.driver_min.as_ref(), false))
        }
        _ => None,
    };
    let torch_compat = match (&driver, get(Component::Torch)) {
        (Some(d), Some(Cand::Idx(i))) => {
            let t = &ctx.cat.torch[i];
            Some(ctx.compat_for(
                d,
                &t.cuda,
                ctx.full_min_for_runtime(&t.cuda),
                ctx.needs_ptx(ctx.torch_archs(i)),
            ))
        }
        _ => None,
    };
    let vllm_compat = match (&driver, get(Component::Vllm)) {
        (Some(d), Some(Cand::Idx(i))) => {
            let r = &ctx.cat.vllm[i];
            Some(ctx.compat_for(d, &r.cuda, ctx.full_min_for_runtime(&r.cuda), false))
        }
        _ => None,
    };
    (cuda_compat, torch_compat, vllm_compat)
}

fn resolution(
    ctx: &Ctx<'_>,
    members: &BTreeMap<Component, String>,
    assign: &[(Component, Cand)],
) -> Resolution {
    let get = |c: Component| assign.iter().find(|(x, _)| *x == c).map(|(_, k)| *k);
    let driver = get(Component::Driver).map(|k| ctx.version(Component::Driver, k).clone());
    let mut used: Vec<Origin> = Vec::new();
    let mut picks = Vec::new();
    let mut chosen = BTreeMap::new();
    let (cuda_compat, torch_compat, vllm_compat) = compats(ctx, assign);
    for c in Component::ALL {
        let Some(k) = get(c) else { continue };
        let origin = ctx.origin(c, k).cloned();
        if let Some(o) = &origin {
            used.push(o.clone());
        }
        if let (Component::Torch, Cand::Idx(i)) = (c, k) {
            used.push(ctx.cat.torch[i].release_origin.clone());
        }
        chosen.insert(
            c,
            match k {
                Cand::Idx(i) => Some(i),
                Cand::Host => None,
            },
        );
        let because = because(ctx, c, k, assign);
        let version = ctx.version(c, k).clone();
        picks.push(Pick {
            component: c,
            record: Record::of(ctx.cat, c, k, &version),
            version,
            requested: members[&c].clone(),
            origin,
            because,
        });
    }
    // Rule facts that every pick relied on.
    if let Some(d) = &driver {
        for p in &picks {
            let cu = match p.component {
                Component::Cuda | Component::Torch | Component::Vllm => Some(&p.version),
                _ => None,
            };
            if let Some(v) = cu {
                let major = if p.component == Component::Torch {
                    get(Component::Torch).and_then(|k| match k {
                        Cand::Idx(i) => Some(ctx.cat.torch[i].cuda.major()),
                        Cand::Host => None,
                    })
                } else {
                    Some(v.major())
                };
                if let Some(m) = major.and_then(|m| ctx.cat.minor_compat_for(m)) {
                    used.push(m.origin.clone());
                }
            }
        }
        let _ = d;
    }
    for cc in &ctx.targets {
        let _ = cc;
    }
    if let Some(Cand::Idx(i)) = get(Component::Cuda) {
        if let Some(ts) = ctx.cat.targets_for(&ctx.cat.cuda[i].version) {
            used.push(ts.origin.clone());
        }
        if let Some(f) = ctx.cat.forward_compat_for(&ctx.cat.cuda[i].version) {
            if matches!(cuda_compat, Some(Compat::Forward { .. })) {
                used.push(f.origin.clone());
            }
        }
    }
    if let Some(h) = &ctx.host_driver {
        if let Some(b) = ctx.cat.branch_of(h) {
            used.push(b.origin.clone());
        }
    }
    for g in ctx.spec.gpus.iter().filter_map(|g| ctx.cat.gpu(g)) {
        used.push(g.origin.clone());
    }
    used.extend(ctx.rule_facts(&picks_of(ctx, assign)));
    if let Some(os) = &ctx.spec.os {
        if let Some(o) = ctx.cat.os.iter().find(|x| &x.id == os) {
            used.push(o.origin.clone());
        }
    }
    let catalog_digest = crate::catalog::digest_of(&used);
    Resolution {
        spec: ctx.spec.clone(),
        arch_list: ctx.targets.clone(),
        capabilities: ctx.ccs.clone(),
        picks,
        cuda_compat,
        torch_compat,
        vllm_compat,
        catalog_digest,
        used,
        gpus: ctx
            .spec
            .gpus
            .iter()
            .filter_map(|g| ctx.cat.gpu(g))
            .cloned()
            .collect(),
        chosen,
    }
}

/// The assignment as (component, catalog index) pairs, the host driver left out.
fn picks_of(_ctx: &Ctx<'_>, assign: &[(Component, Cand)]) -> Vec<(Component, usize)> {
    assign
        .iter()
        .filter_map(|(c, k)| match k {
            Cand::Idx(i) => Some((*c, *i)),
            Cand::Host => None,
        })
        .collect()
}

/// Why a newer candidate that breaks no rule ranked after the pick: the preference that
/// decided, in words.
fn ranked_after(
    ctx: &Ctx<'_>,
    c: Component,
    k: Cand,
    other: Cand,
    assign: &[(Component, Cand)],
) -> String {
    let pick = ctx.label(c, k);
    match (c, k, other) {
        (Component::Cuda, Cand::Idx(a), Cand::Idx(b)) => {
            let (pa, pb) = (&ctx.cat.cuda[a], &ctx.cat.cuda[b]);
            let torch_cuda = assign.iter().find_map(|(x, t)| match (x, t) {
                (Component::Torch, Cand::Idx(i)) => Some(ctx.cat.torch[*i].cuda.clone()),
                _ => None,
            });
            let same = |v: &Version| {
                torch_cuda
                    .as_ref()
                    .is_some_and(|t| t.major() == v.major() && t.minor() == v.minor())
            };
            let full = |m: Option<&Version>| {
                ctx.host_driver
                    .as_ref()
                    .is_none_or(|h| m.is_some_and(|m| h >= m))
            };
            let supported = |v: &Version| ctx.supported_images.contains(v);
            if full(pa.driver_min.as_ref()) && !full(pb.driver_min.as_ref()) {
                format!("the installed driver runs it only through compatibility, {pick} with full support, which ranks first")
            } else if supported(&pa.version)
                && !supported(&pb.version)
                && ctx.observed_images.contains(&pb.version)
            {
                format!("its `nvidia/cuda` tags are only observed in public files, not read from NVIDIA's supported list (catalog/images.toml); {pick}'s are in that list, which ranks first")
            } else if supported(&pa.version) && !supported(&pb.version) {
                format!("NVIDIA lists its `nvidia/cuda` images as unsupported (catalog/images.toml), {pick}'s as supported, which ranks first")
            } else if same(&pa.version) && !same(&pb.version) {
                format!(
                    "torch's wheel bundles the CUDA {} runtime: the toolkit of the same minor, {pick}, ranks first",
                    torch_cuda.map(|t| format!("{}.{}", t.major(), t.minor())).unwrap_or_default()
                )
            } else if ctx.tested_cuda.contains(&pa.version)
                && !ctx.tested_cuda.contains(&pb.version)
            {
                format!("{pick} is vendor-validated (a `[[tested]]` stack); within a CUDA minor, validated updates rank first")
            } else {
                format!("ranked after {pick} in the solver's CUDA preference order")
            }
        }
        (Component::Torch, Cand::Idx(a), Cand::Idx(b)) => {
            let (ta, tb) = (&ctx.cat.torch[a], &ctx.cat.torch[b]);
            let mode = |t: &crate::catalog::TorchBuild| {
                ctx.host_driver.as_ref().map(|h| {
                    ctx.compat_for(
                        h,
                        &t.cuda,
                        ctx.full_min_for_runtime(&t.cuda),
                        ctx.needs_ptx(ctx.source_archs.as_deref().unwrap_or(&t.arch_list)),
                    )
                })
            };
            let (ma, mb) = (mode(ta), mode(tb));
            let forward = |m: &Option<Compat>| matches!(m, Some(Compat::Forward { .. }));
            if forward(&mb) && !forward(&ma) {
                format!("the installed driver runs its CUDA {} runtime only through forward compatibility (the `cuda-compat` package); builds it runs without it, like {pick}, rank first", tb.cuda)
            } else if ma == Some(Compat::Full) && mb != Some(Compat::Full) && mb.is_some() {
                format!("the installed driver runs its CUDA {} runtime only through compatibility, {pick}'s CUDA {} with full support, which ranks first", tb.cuda, ta.cuda)
            } else if ta.pypi_default && !tb.pypi_default {
                format!("{pick} is the wheel PyPI serves by default, which ranks first among builds of a release")
            } else {
                format!("ranked after {pick} in the solver's preference order (the solver chapter of the book)")
            }
        }
        (Component::Vllm, Cand::Idx(_), Cand::Idx(b)) => {
            let r = &ctx.cat.vllm[b];
            let forward = ctx.host_driver.as_ref().is_some_and(|h| {
                matches!(
                    ctx.compat_for(h, &r.cuda, ctx.full_min_for_runtime(&r.cuda), false),
                    Compat::Forward { .. }
                )
            });
            if forward {
                format!(
                    "its wheel is built with CUDA {}, which the installed driver {} runs only through forward compatibility (the `cuda-compat` package); releases whose wheel it runs without it, like {pick}, rank first",
                    r.cuda,
                    ctx.host_driver.as_ref().map(ToString::to_string).unwrap_or_default()
                )
            } else {
                format!("ranked after {pick} in the solver's preference order (the solver chapter of the book)")
            }
        }
        (Component::Driver, _, Cand::Idx(b)) => {
            let br = &ctx.cat.branches[ctx.cat.drivers[b].branch];
            format!(
                "its branch R{} is {}: drivers of supported production and LTS branches rank first",
                br.number,
                if br.supported {
                    "a new feature branch"
                } else {
                    "end of life"
                }
            )
        }
        _ => format!(
            "ranked after {pick} in the solver's preference order (the solver chapter of the book)"
        ),
    }
}

#[cfg(test)]
mod extras_tests {
    use super::*;

    fn resolve(gpu: &str, components: &str) -> Result<Resolution, Error> {
        let cat = Catalog::stock().unwrap();
        let text = format!(
            "[stack]\nname = \"t\"\n[hardware]\ngpus = [\"{gpu}\"]\n[components]\n{components}\n"
        );
        let spec = Spec::parse("t.toml", &text, &cat).unwrap();
        solve(&cat, &spec)
    }

    fn picked(r: &Resolution, c: Component) -> String {
        r.pick(c).unwrap().version.to_string()
    }

    #[test]
    fn an_extra_implies_torch_python_and_cuda() {
        let r = resolve("h100", "cupy = \"*\"").unwrap();
        assert_eq!(
            r.pick(Component::Torch).unwrap().requested,
            "implied by cupy"
        );
        assert_eq!(
            r.pick(Component::Python).unwrap().requested,
            "implied by torch"
        );
        assert_eq!(
            r.pick(Component::Cuda).unwrap().requested,
            "implied by torch"
        );
    }

    #[test]
    fn the_components_own_project_comes_first() {
        let cat = Catalog::stock().unwrap();
        // On Hopper both FlashAttention 2 (`flash-attn`) and 3 (`flash_attn_3`) fit; the
        // newer 3.0.0 is a separate package, so `*` keeps flash-attn.
        let r = resolve("h100", "flash-attn = \"*\"").unwrap();
        let i = r.chosen[&Component::FlashAttn].unwrap();
        assert_eq!(cat.extras[i].pypi_name, "flash-attn");
        let r = resolve("h100", "flash-attn = \">=3\"").unwrap();
        let i = r.chosen[&Component::FlashAttn].unwrap();
        assert_eq!(cat.extras[i].pypi_name, "flash_attn_3");
        // FlashAttention-3 needs Hopper: on an A100 `>=3` is a conflict on extra.min-cc.
        let Err(Error::NoSolution(e)) = resolve("a100", "flash-attn = \">=3\"") else {
            panic!("FA3 resolved on an A100")
        };
        assert_eq!(e.causes[0].groups[0].1.rule, Rule::ExtraMinCc);
    }

    #[test]
    fn torch_requirements_compare_the_release_without_its_variant() {
        // xformers 0.0.34 requires torch ==2.10.0; every 2.10.0+cuXXX build satisfies it.
        let r = resolve("h100", "xformers = \"0.0.34\"").unwrap();
        assert!(picked(&r, Component::Torch).starts_with("2.10.0+cu"));
        let Err(Error::NoSolution(e)) = resolve("h100", "xformers = \"0.0.34\"\ntorch = \"2.9\"")
        else {
            panic!("resolved")
        };
        let v = &e.causes[0].groups[0].1;
        assert_eq!(v.rule, Rule::ExtraTorch);
        assert!(
            v.message.contains("requires torch `==2.10.0`"),
            "{}",
            v.message
        );
        assert!(v.facts[0].location().starts_with("catalog/extras.toml:"));
    }

    #[test]
    fn cuda_major_picks_the_matching_distribution() {
        let cat = Catalog::stock().unwrap();
        for (cuda, want) in [("12", "cupy-cuda12x"), ("13", "cupy-cuda13x")] {
            let r = resolve("h100", &format!("cuda = \"{cuda}\"\ncupy = \"14.2\"")).unwrap();
            let i = r.chosen[&Component::Cupy].unwrap();
            assert_eq!(cat.extras[i].pypi_name, want, "cuda {cuda}");
            let Some(Record::Extra(e)) = r.record(Component::Cupy) else {
                panic!("cupy carries its record")
            };
            assert_eq!(e.pypi_name, want);
        }
    }
}

#[cfg(test)]
mod variant_python_tests {
    //! Python support is per torch build variant: a `[[wheel]]` entry's own `python`
    //! narrows its release's range for that variant only, and a conflict cites the
    //! `[[wheel]]` entry. The stock catalog sets none (no source shows a Linux x86_64 CUDA
    //! variant with fewer Python versions than its release); this overlay is a made-up
    //! narrowing that exercises the path.
    use super::*;

    const SITE: &str = "family = \"torch\"\n\n[[wheel]]\ntorch = [\"2.5.1\"]\nvariant = \"cu121\"\ncuda = \"12.1\"\nindex_url = \"https://download.pytorch.org/whl/cu121\"\narch_list = [\"5.0\", \"6.0\", \"7.0\", \"7.5\", \"8.0\", \"8.6\", \"9.0\"]\npython = \">=3.9, <3.13\"\nsource = \"test overlay: a made-up Python range\"\n";

    fn resolve(cat: &Catalog, torch: &str) -> Result<Resolution, Error> {
        let text = format!(
            "[stack]\nname = \"t\"\n[hardware]\ngpus = [\"a100\"]\n[components]\npython = \"3.13\"\ntorch = \"{torch}\"\n"
        );
        let spec = Spec::parse("t.toml", &text, cat).unwrap();
        solve(cat, &spec)
    }

    #[test]
    fn a_variant_python_range_narrows_that_variant_only() {
        let stock = Catalog::stock().unwrap();
        let site = Catalog::stock_with(&[vec![("site/torch.toml".into(), SITE.into())]]).unwrap();
        // Stock: torch 2.5.1+cu121 has the release's range, which includes 3.13.
        assert!(resolve(&stock, "==2.5.1+cu121").is_ok());
        // Narrowed: the cu121 build is rejected on 3.13, by `wheel.python`, citing the wheel.
        let Err(Error::NoSolution(e)) = resolve(&site, "==2.5.1+cu121") else {
            panic!("2.5.1+cu121 resolved on Python 3.13 with the narrowed overlay")
        };
        let v = &e.causes[0].groups[0].1;
        assert_eq!(v.rule, Rule::WheelPython);
        assert!(
            v.message.contains("2.5.1+cu121") && v.message.contains(">=3.9, <3.13"),
            "{}",
            v.message
        );
        assert!(
            v.facts.iter().any(|o| o.file == "site/torch.toml"),
            "{:?}",
            v.facts
        );
        // The other variants of the same release keep the release's range.
        let r = resolve(&site, "==2.5.1").unwrap();
        let t = r.pick(Component::Torch).unwrap().version.to_string();
        assert!(t.starts_with("2.5.1+") && t != "2.5.1+cu121", "{t}");
    }
}
