//! # gpustack
//!
//! One lock for the GPU stack. gpustack resolves the driver, CUDA, cuDNN, NCCL, Python,
//! PyTorch (wheel variant), vLLM and DeepSpeed versions, and optional framework components
//! such as flash-attn and Transformers (the "extras"), for the GPUs you run, from a
//! catalog of sourced compatibility facts, and writes a deterministic lockfile that every
//! generator renders from.
//!
//! ```text
//! catalog/*.toml ─load─▶ Catalog ─┐
//! gpustack.toml ──parse─▶ Spec ───┼─solve─▶ Resolution ─▶ Lock ─to_toml─▶ gpustack.lock
//!                                                          └─plan::generate─▶ files ─emit─▶ out/<target>/
//! ```
//!
//! Each stage is pure: only [`Catalog::load`], [`emit`] and the CLI touch the filesystem,
//! and only the CLI prints.
//!
//! # Entry points
//!
//! * [`Catalog::stock`], [`Catalog::load`] (with overlay directories): the facts.
//! * [`Spec::parse`]: a `gpustack.toml`, validated against the catalog.
//! * [`solve()`]: a [`Resolution`] whose picks carry the reasons that bound them, or
//!   [`Error::NoSolution`] with an [`Explanation`] and hints.
//! * [`Lock::from_resolution`], [`Lock::to_toml`], [`Lock::parse`]: the lockfile;
//!   [`lock_spec`] does parse, solve and lock in one call.
//! * [`plan::generate`]: every file of a target ([`plan::Target`]) rendered in memory from a
//!   lock; [`emit::replace_dir`] and [`emit::diff_dir`] write or compare them.
//! * [`schema::spec_schema_json`]: the JSON Schema editors use to complete `gpustack.toml`.
//!
//! Errors are [`Error`]s: their `Display` is the CLI's message (`error: …`, `--> file:line`,
//! `hint: …`) and [`Error::exit_code`] its exit status. The book's "Library API" chapter
//! walks through these steps and states the versioning policy: what is public API, and how
//! the lockfile format is versioned separately.
//!
//! ```
//! use gpustack::{Catalog, Component, Lock, Spec};
//!
//! let catalog = Catalog::stock()?;
//! let spec = Spec::parse("gpustack.toml", r#"
//! [stack]
//! name = "demo"
//! [hardware]
//! gpus = ["h100"]
//! driver = "550.54.15"
//! [components]
//! cuda = "12.4"
//! torch = ">=2.4, <2.6"
//! "#, &catalog)?;
//! let resolution = gpustack::solve(&catalog, &spec)?;
//! let lock = Lock::from_resolution(&catalog, &resolution)?;
//! assert_eq!(lock.component(Component::Cuda).unwrap().version.to_string(), "12.4.1");
//! let text = lock.to_toml();
//! assert_eq!(Lock::parse("gpustack.lock", &text)?, lock);
//! # Ok::<(), gpustack::Error>(())
//! ```
#![deny(missing_docs)]

pub mod catalog;
pub mod check;
pub mod core;
pub mod diff;
pub mod emit;
pub mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod generate;
pub mod import;
pub mod lock;
pub mod plan;
pub mod probe;
pub mod render;
pub mod resolve;
mod select;
pub mod solve;
pub mod spec;
#[doc(hidden)]
pub mod synth;

/// The old paths of the vocabulary modules, kept for library users.
pub use crate::core::{arch, version};
pub use crate::spec::{deploy, schema};

pub use arch::Cc;
/// A GPU compilation target (`sm_90`, `compute_90`): what an arch list holds.
pub use arch::Target as GpuTarget;
/// An output target of `gpustack gen` (`docker`, `k8s`, …).
pub use plan::Target as OutputTarget;

/// The old name of [`GpuTarget`], which collided with [`plan::Target`] (an output target,
/// [`OutputTarget`]).
#[deprecated(
    since = "0.1.0",
    note = "renamed `GpuTarget`; `plan::Target` (an output target) is `OutputTarget`"
)]
pub type Target = arch::Target;
pub use catalog::Catalog;
pub use error::{Diagnostic, Error, Location, Stage};
pub use lock::Lock;
pub use solve::{solve, Explanation, Resolution};
pub use spec::{Component, Layer, Spec};
pub use version::{Version, VersionReq};

/// Reads, parses and solves a spec, and builds its lock: the `gpustack lock` pipeline
/// without the write. `spec_path` is used in messages only.
///
/// ```
/// let catalog = gpustack::Catalog::stock()?;
/// let text = std::fs::read_to_string("fixtures/specs/a100-pytorch.toml").unwrap();
/// let lock = gpustack::lock_spec(&catalog, "a100-pytorch.toml", &text)?;
/// // The bytes `gpustack lock` writes, and the committed lock of this example.
/// let committed = std::fs::read_to_string("lockfiles/a100-pytorch.lock").unwrap();
/// assert_eq!(lock.to_toml(), committed);
/// # Ok::<(), gpustack::Error>(())
/// ```
///
/// A lock it returns has a plan for every target the spec configures
/// ([`deploy::Deploy::configures`]): what a generator would refuse is refused here,
/// at the spec's line when [`Spec::parse`] knows it, and otherwise (a safety net) with the
/// generator's message, so `gpustack lock` never writes a lock that `gpustack gen` then
/// refuses. The safety net builds the typed plans without rendering their templates
/// (`render::plans_only`); the templates' escaping filters, a second line of defence
/// behind spec and catalog validation, run at `gen`.
pub fn lock_spec(catalog: &Catalog, spec_path: &str, spec_text: &str) -> Result<Lock, Error> {
    lock_spec_keeping(catalog, spec_path, spec_text, None, &Upgrade::All)
}

/// Which picks of the existing lock a re-lock may change (`gpustack lock --upgrade`,
/// `--upgrade-package NAME`). Like Cargo and uv, a re-lock keeps every pick that still
/// satisfies the spec and the catalog unless told otherwise.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Upgrade {
    /// Keep every pick that still fits (the default).
    #[default]
    Nothing,
    /// Re-resolve everything (`--upgrade`).
    All,
    /// Re-resolve these components (`--upgrade-package`, repeatable).
    Packages(Vec<String>),
}

/// [`lock_spec`], keeping the picks of `previous` that `upgrade` does not release and that
/// still fit ([`solve::solve_locked`]). A kept pick that is not the one a fresh lock would
/// take says so in its `because`, with the command that upgrades it.
///
/// # Errors
///
/// As [`lock_spec`]; and a usage error when `--upgrade-package` names a component the
/// existing lock does not have.
pub fn lock_spec_keeping(
    catalog: &Catalog,
    spec_path: &str,
    spec_text: &str,
    previous: Option<&Lock>,
    upgrade: &Upgrade,
) -> Result<Lock, Error> {
    keeping(catalog, spec_path, spec_text, previous, upgrade).map(|(lock, _)| lock)
}

/// [`lock_spec_keeping`], with the report of the offline resolution it ran.
fn keeping(
    catalog: &Catalog,
    spec_path: &str,
    spec_text: &str,
    previous: Option<&Lock>,
    upgrade: &Upgrade,
) -> Result<(Lock, resolve::Report), Error> {
    let spec = Spec::parse(spec_path, spec_text, catalog)?;
    let mut keep: std::collections::BTreeMap<Component, Version> = match (previous, upgrade) {
        (Some(prev), Upgrade::Nothing | Upgrade::Packages(_)) => prev
            .components
            .iter()
            .map(|c| (c.name, c.version.clone()))
            .collect(),
        _ => std::collections::BTreeMap::new(),
    };
    if let (Upgrade::Packages(names), Some(prev)) = (upgrade, previous) {
        for n in names {
            let c = Component::from_name(n).filter(|c| prev.component(*c).is_some());
            // A package of the Python closure: uv's `--upgrade-package` ([`lock_python`]).
            let in_closure = prev.python.iter().flat_map(|p| p.files.iter()).any(|f| {
                f.contents.as_deref().is_some_and(|t| {
                    resolve::python::packages(t).iter().any(|(name, _)| {
                        resolve::python::normalize(name) == resolve::python::normalize(n)
                    })
                })
            });
            if c.is_none() && in_closure {
                continue;
            }
            let Some(c) = c else {
                let have: Vec<&str> = prev.components.iter().map(|c| c.name.name()).collect();
                let mut d = error::Diagnostic::new(
                    error::Stage::Usage,
                    format!("`--upgrade-package {n}`: the existing lock has no component or Python package `{n}`"),
                )
                .hint(format!("the lock's components are: {}", have.join(", ")));
                if let Some(s) = error::did_you_mean(n, have.iter().copied()) {
                    d = d.hint(format!("did you mean `{s}`?"));
                }
                return Err(d.into());
            };
            keep.remove(&c);
        }
    }
    let resolution = solve::solve_locked(catalog, &spec, &keep)?;
    // Resolution re-seals the lock (`resolve::resolve` ends with `Lock::rehash`), so the
    // seals are not made twice.
    let mut lock = Lock::from_resolution_unsealed(catalog, &resolution)?;
    // Offline resolution never fails: it records where each digest and pin came from.
    let offline = resolve::resolve(&mut lock, &resolve::http::Offline, None).unwrap_or_default();
    let targets = plan::configured(&lock).render;
    // The typed plans of every configured target, without the templates: what `gen`
    // would refuse is refused by a plan, never by a template's escaping filter on data
    // the spec and catalog validation let through.
    if let Err(Error::Invalid(diags)) = render::plans_only(|| plan::generate_many(&lock, &targets))
    {
        return Err(Error::Invalid(
            diags
                .into_iter()
                .map(|d| {
                    let mut n = Diagnostic::new(
                        Stage::Spec,
                        format!("`gpustack gen` would refuse this spec: {}", d.message),
                    )
                    .at(Location::file(spec_path));
                    n.hints = d.hints;
                    n.hint("this check belongs at the value's line in `gpustack.toml`: please report it")
                })
                .collect(),
        ));
    }
    Ok((lock, offline))
}

/// [`lock_spec`], then lock-time resolution ([`resolve::resolve`]) over `transport`: image
/// digests from the registries, apt/dnf pins checked against the repositories, with
/// `previous` (the lock being replaced) and the catalog as the fallbacks when a server
/// cannot be asked. What `gpustack lock` runs; `--offline` passes [`resolve::http::Offline`].
///
/// # Errors
///
/// As [`lock_spec`]; and when a registry or repository answers that it does not have a
/// tag or a pinned version, or its metadata does not match its own index.
pub fn lock_spec_resolved(
    catalog: &Catalog,
    spec_path: &str,
    spec_text: &str,
    transport: &dyn resolve::http::Transport,
    previous: Option<&Lock>,
) -> Result<(Lock, resolve::Report), Error> {
    lock_spec_upgrading(
        catalog,
        spec_path,
        spec_text,
        transport,
        previous,
        &Upgrade::Nothing,
    )
}

/// [`lock_spec_resolved`] with the picks `upgrade` releases re-resolved
/// ([`lock_spec_keeping`]): what `gpustack lock --upgrade` / `--upgrade-package` runs.
///
/// # Errors
///
/// As [`lock_spec_resolved`] and [`lock_spec_keeping`].
pub fn lock_spec_upgrading(
    catalog: &Catalog,
    spec_path: &str,
    spec_text: &str,
    transport: &dyn resolve::http::Transport,
    previous: Option<&Lock>,
    upgrade: &Upgrade,
) -> Result<(Lock, resolve::Report), Error> {
    let (mut lock, offline) = keeping(catalog, spec_path, spec_text, previous, upgrade)?;
    // Offline, with no previous lock to take digests from: the resolution `keeping` ran
    // is this one.
    if transport.offline() && previous.is_none() {
        return Ok((lock, offline));
    }
    if let Some(secs) = lock.request.deploy.resolve.as_ref().and_then(|r| r.timeout) {
        transport.budget_secs(secs);
    }
    let report = resolve::resolve(&mut lock, transport, previous).map_err(|errors| {
        let diagnostic = |e: &resolve::ResolveError| {
            let d = error::Diagnostic::new(error::Stage::Lock, e.to_string());
            if e.is_network() {
                d.hint(format!(
                    "point `[resolve].{}` at a mirror that answers, or lock with `--offline` (digests and pins from the previous lock and the catalog)",
                    e.setting()
                ))
            } else {
                d.hint(format!(
                    "fix the catalog entry, or point `[resolve].{}` at a mirror that has it; `--offline` locks from the catalog alone",
                    e.setting()
                ))
            }
        };
        let network: Vec<_> = errors.iter().filter(|e| e.is_network()).map(diagnostic).collect();
        if network.is_empty() {
            Error::Invalid(last_hints(errors.iter().map(diagnostic).collect()))
        } else {
            Error::Network(last_hints(network))
        }
    })?;
    Ok((lock, report))
}

/// What a re-lock may move in the Python closure ([`lock_python`]): by default every pick
/// of the previous pylocks that still fits is kept.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PythonUpgrade {
    /// `--upgrade`: resolve every package anew.
    pub all: bool,
    /// `--upgrade-package NAME`: only these may move.
    pub packages: Vec<String>,
}

/// How the Python closure of a lock came out ([`lock_python`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PythonOutcome {
    /// The lock has no Python layer.
    None,
    /// Every layer's pylock is resolved (or reused unchanged); `resolved` lists the files
    /// uv wrote this time.
    Closed {
        /// Files resolved now (the others were reused).
        resolved: Vec<String>,
    },
    /// No closure: builds resolve the Python packages themselves. Why.
    Open(String),
}

/// Locks the Python closure of `lock` ([`resolve::python`]): one `pylock.<layer>.toml`
/// per layer and platform, by uv, recorded in `lock.python` (contents included) and
/// folded into the layer hashes (a lock that had no closure and gets none is left as it
/// is: its hashes and seals already say so). `previous` is the lock being replaced with its
/// pylock contents loaded: files whose inputs did not change are reused without running uv.
///
/// Offline (`offline`), only reuse is possible: a lock that had a closure and now needs
/// a new one is an error; one that never had one stays open. Online, the pinned uv is
/// `GPUSTACK_UV`, the one on `PATH`, or the catalog's wheel fetched over `fetch`
/// ([`resolve::python::Uv::obtain`]); when none can be had, the lock stays open
/// ([`PythonOutcome::Open`]: `gpustack lock` then refuses it unless `--allow-open`).
///
/// # Errors
///
/// uv's explanation when a layer cannot be resolved (exit 1); a closure whose files lack
/// hashes or whose NVIDIA wheels disagree with the solver (exit 2); an index uv could not
/// reach, or a pinned uv wheel that cannot be downloaded or is not the pinned file (exit 3).
pub fn lock_python(
    catalog: &Catalog,
    lock: &mut Lock,
    offline: bool,
    previous: Option<&Lock>,
    upgrade: &PythonUpgrade,
    fetch: &dyn resolve::http::Transport,
) -> Result<PythonOutcome, Error> {
    use resolve::python::{self as py, ClosureError};
    // A lock without a closure that stays without one keeps its hashes and seals (they
    // already say so); one that loses or gains a closure is re-sealed.
    let had = lock.python.take().is_some();
    let reseal = |lock: &mut Lock| {
        if had {
            lock.rehash();
        }
    };
    if lock.component(spec::Component::Torch).is_none() {
        reseal(lock);
        return Ok(PythonOutcome::None);
    }
    let os = lock.os().unwrap_or_default().to_string();
    let glibc = catalog
        .os
        .iter()
        .find(|o| o.id == os)
        .and_then(|o| o.glibc.clone());
    let Some(glibc) = glibc else {
        reseal(lock);
        return Ok(PythonOutcome::Open(format!(
            "the catalog has no glibc for `{os}`, so no manylinux platform to resolve for"
        )));
    };
    let mut cpus: Vec<String> = lock
        .hardware
        .gpus
        .iter()
        .filter_map(|g| catalog.gpu(&g.id))
        .map(|g| g.cpu.clone())
        .collect();
    if cpus.is_empty() {
        cpus.push("x86_64".into());
    }
    let uv_version = lock
        .package("uv")
        .map(|p| p.version.clone())
        .unwrap_or_default();
    let prev = previous.and_then(|p| p.python.as_ref());
    let resolve_tbl = lock.request.deploy.resolve.clone().unwrap_or_default();
    let exclude_newer = resolve_tbl
        .exclude_newer
        .clone()
        .or_else(|| prev.map(|p| p.exclude_newer.clone()))
        .unwrap_or_else(|| format!("{}T00:00:00Z", import::today()));
    let uv = if offline {
        None
    } else {
        let wheel = resolve::uv::Wheel::of(catalog, &uv_version, std::env::consts::ARCH);
        match py::Uv::obtain(
            &uv_version,
            wheel.as_ref(),
            fetch,
            resolve_tbl.pypi.as_deref(),
        ) {
            Ok(u) => Some(u),
            Err(e @ ClosureError::Uv { .. }) if prev.is_none() => {
                reseal(lock);
                return Ok(PythonOutcome::Open(format!("{e}; {}", e.hint())));
            }
            Err(e) => {
                lock.rehash();
                return Err(closure_error(&e));
            }
        }
    };
    let opts = py::Options {
        uv: uv.as_ref(),
        uv_version,
        exclude_newer,
        platforms: py::platforms(&glibc.to_string(), &cpus),
        pypi: resolve_tbl
            .pypi
            .clone()
            .unwrap_or_else(|| py::PYPI.to_string()),
        mirrors: resolve_tbl.indexes.clone(),
        previous: prev,
        upgrade: upgrade.all,
        upgrade_packages: upgrade.packages.clone(),
    };
    match py::resolve(lock, &opts) {
        Ok(p) => {
            let resolved: Vec<String> = p
                .files
                .iter()
                .filter(|f| {
                    !prev.is_some_and(|q| {
                        q.files
                            .iter()
                            .any(|g| g.file == f.file && g.digest == f.digest)
                    })
                })
                .map(|f| f.file.clone())
                .collect();
            lock.python = Some(p);
            lock.rehash();
            Ok(PythonOutcome::Closed { resolved })
        }
        Err(ClosureError::Offline { detail }) if prev.is_none() => {
            reseal(lock);
            Ok(PythonOutcome::Open(format!(
                "offline, and no closure to reuse ({detail})"
            )))
        }
        Err(e) => Err(closure_error(&e)),
    }
}

/// Each hint once, after the last diagnostic that has it (several images of one registry
/// share the same fix).
fn last_hints(mut ds: Vec<error::Diagnostic>) -> Vec<error::Diagnostic> {
    for i in 0..ds.len() {
        let later: Vec<String> = ds[i + 1..].iter().flat_map(|d| d.hints.clone()).collect();
        ds[i].hints.retain(|h| !later.contains(h));
    }
    ds
}

fn closure_error(e: &resolve::python::ClosureError) -> Error {
    use resolve::python::ClosureError as C;
    let d = error::Diagnostic::new(error::Stage::Lock, e.to_string()).hint(e.hint());
    match e {
        C::Resolve { .. } => Error::Unresolvable(vec![d]),
        C::Index { .. } | C::Download { .. } | C::WheelDigest { .. } => Error::Network(vec![d]),
        _ => Error::Invalid(vec![d]),
    }
}
