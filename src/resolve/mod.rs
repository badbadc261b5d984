//! Lock-time resolution: what the catalog names by tag or by version is turned into what
//! the registries and repositories publish, and recorded in the lock, so that a build
//! months later installs the same bytes (issue 15, "close the lock").
//!
//! ```text
//! Lock (from the solver) ──resolve(&Lock, &dyn Transport, previous)──▶ Lock with digests
//!                                                                     and verified pins
//! ```
//!
//! * **Images** ([`oci`]): every external image the lock's packages name (the `nvidia/cuda`
//!   base images, uv, DCGM Exporter) gets the digest its tag has in the registry
//!   (`<flavour>-digest`, `<flavour>-platforms`, `digest-source = "registry"`). When the
//!   registry cannot be asked (`--offline`, unreachable), the previous lock's registry digest
//!   for the same reference is kept; else the catalog's sourced observation
//!   (`digest-source = "catalog"`); else the image stays pinned by tag and the generators
//!   say so.
//! * **OS packages** ([`apt`], [`dnf`]): the `apt`/`dnf` pins of the lock's packages are
//!   checked against the repository's own index (`Release` → `Packages`, `repomd.xml` →
//!   `primary.xml`, hashes checked); a pin the repository spells differently (an epoch, a
//!   Debian revision) is replaced by the published string. `apt-source` / `dnf-source`
//!   says `repository` or `catalog` (the catalog's observation, offline).
//!
//! `[resolve]` mirrors ([`spec`]) change where requests go, never what the lock records.
//! Only this module and its [`http`] transport touch the network, and only `gpustack lock`
//! calls it; `gen` and `check` read the lock alone.

pub mod apt;
mod closure_error;
pub mod dnf;
pub mod http;
pub mod oci;
pub mod python;
pub mod uv;
pub use crate::spec::resolve as spec;

use std::collections::BTreeMap;
use std::fmt;

use crate::core::version::Version;
use crate::lock::{Field, Lock, LockedPackage};
use crate::select::OBSERVATION;

use http::{FetchError, Transport};
use oci::{ImageRef, OciError, Registry};
use spec::Resolve;

/// Why repository metadata could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RepoError {
    /// No response.
    Fetch(FetchError),
    /// An error status.
    Status {
        /// The URL.
        url: String,
        /// The status.
        status: u16,
    },
    /// A file whose hash is not the one the signed index states.
    HashMismatch {
        /// The URL.
        url: String,
        /// What the index states.
        expected: String,
        /// What was received.
        got: String,
    },
    /// Unreadable metadata.
    Bad {
        /// The URL.
        url: String,
        /// What went wrong.
        detail: String,
    },
}

impl From<FetchError> for RepoError {
    fn from(e: FetchError) -> RepoError {
        RepoError::Fetch(e)
    }
}

impl fmt::Display for RepoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RepoError::Fetch(e) => e.fmt(f),
            RepoError::Status { url, status } => write!(f, "`{url}` answered HTTP {status}"),
            RepoError::HashMismatch { url, expected, got } => write!(
                f,
                "`{url}` is {got}, but the repository's index states {expected}"
            ),
            RepoError::Bad { url, detail } => write!(f, "`{url}`: {detail}"),
        }
    }
}

/// A problem that stops `gpustack lock`: a tag or pin the registry or repository
/// answered about, and does not have.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResolveError {
    /// The registry answered, but not with a digest for the tag.
    Image {
        /// The lock package.
        package: String,
        /// `docker.io/nvidia/cuda:…`.
        reference: String,
        /// Why.
        error: OciError,
    },
    /// The repository does not publish a pinned package version.
    Pin {
        /// The lock package.
        package: String,
        /// `apt` or `dnf`.
        manager: &'static str,
        /// The pin as the catalog writes it.
        pin: String,
        /// The repository read.
        repository: String,
        /// The newest versions it has of that name.
        nearest: Vec<String>,
    },
    /// The repository's metadata is not what its index states, or the repository did not
    /// answer as it must.
    Repo {
        /// The lock package.
        package: String,
        /// `apt` or `dnf`.
        manager: &'static str,
        /// Why.
        error: RepoError,
    },
}

impl fmt::Display for ResolveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResolveError::Image {
                package,
                reference,
                error,
            } => write!(
                f,
                "image `{reference}` of `{package}` does not resolve: {error}"
            ),
            ResolveError::Pin {
                package,
                manager,
                pin,
                repository,
                nearest,
            } => {
                write!(
                    f,
                    "{manager} pin `{pin}` of `{package}` is not published in `{repository}`"
                )?;
                if nearest.is_empty() {
                    write!(f, " (the repository has no package of that name)")
                } else {
                    write!(f, " (it has {})", nearest.join(", "))
                }
            }
            ResolveError::Repo { package, error, .. } => {
                write!(f, "repository of `{package}` not read: {error}")
            }
        }
    }
}

impl ResolveError {
    /// Whether a server did not answer as it must (exit 3: an error status, a body that
    /// is not what the protocol says, a digest that is not the bytes'), rather than
    /// answered that it lacks what the catalog names, or the catalog named it wrongly (a
    /// tag, a pin, a reference: exit 2).
    pub fn is_network(&self) -> bool {
        match self {
            ResolveError::Image { error, .. } => !matches!(
                error,
                OciError::Status { status: 404, .. } | OciError::BadReference { .. }
            ),
            ResolveError::Pin { .. } => false,
            ResolveError::Repo { .. } => true,
        }
    }

    /// The `[resolve]` key that points this query elsewhere: `registries`, `apt`, `dnf`.
    pub fn setting(&self) -> &'static str {
        match self {
            ResolveError::Image { .. } => "registries",
            ResolveError::Pin { manager, .. } | ResolveError::Repo { manager, .. } => manager,
        }
    }
}

/// What was resolved and what fell back, for the CLI's summary.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// References resolved in the registry.
    pub from_registry: Vec<String>,
    /// References whose digest came from the previous lock or the catalog, with why the
    /// registry was not asked.
    pub fallback: Vec<(String, String)>,
    /// References left pinned by tag only.
    pub unpinned: Vec<String>,
    /// Pins checked against a repository.
    pub verified: Vec<String>,
    /// Pins kept as the catalog observed them, with why.
    pub unverified: Vec<(String, String)>,
    /// The first failure that made the run fall back (host, URL, cause).
    pub first_failure: Option<String>,
}

/// One image reference of a lock package: the field stem (`devel`, `runtime`, `image`)
/// and the reference.
fn package_images(p: &LockedPackage) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Some(repo) = p.get("repository") {
        for (k, v) in &p.fields {
            if let (Some(stem), Field::Str(tag)) = (k.strip_suffix("-tag"), v) {
                if stem != "image" {
                    out.push((stem.to_string(), format!("{repo}:{tag}")));
                }
            }
        }
    }
    if let Some(image) = p.get("image") {
        let tag = p.get("image-tag").unwrap_or(&p.version);
        out.push(("image".to_string(), format!("{image}:{tag}")));
    }
    out
}

/// Every external image reference the lock names, as `(package, reference)`.
pub fn image_references(lock: &Lock) -> Vec<(String, String)> {
    lock.packages
        .iter()
        .flat_map(|p| {
            package_images(p)
                .into_iter()
                .map(|(_, r)| (p.name.clone(), r))
        })
        .collect()
}

/// NVIDIA's repository a lock package's OS packages come from, for the OS and CPU
/// architecture: the CUDA repository (drivers, DCGM, Fabric Manager; the URL scheme of
/// NVIDIA's CUDA installation guide, "Network Repo Installation") or the container
/// toolkit's (NVIDIA Container Toolkit install guide).
fn package_repository(package: &str, manager: &str, os: &str, arch: &str) -> String {
    let deb_arch = if arch == "sbsa" { "arm64" } else { "amd64" };
    let rpm_arch = if arch == "sbsa" { "aarch64" } else { "x86_64" };
    if package == "nvidia-container-toolkit" {
        return if manager == "apt" {
            format!("https://nvidia.github.io/libnvidia-container/stable/deb/{deb_arch}")
        } else {
            format!("https://nvidia.github.io/libnvidia-container/stable/rpm/{rpm_arch}")
        };
    }
    let dir = if let Some(v) = os.strip_prefix("ubuntu") {
        format!("ubuntu{}", v.replace('.', ""))
    } else if let Some(v) = os.strip_prefix("rockylinux") {
        format!("rhel{v}")
    } else {
        os.replace('.', "")
    };
    format!("https://developer.download.nvidia.com/compute/cuda/repos/{dir}/{arch}")
}

/// Resolves `lock` in place. `previous` is the lock being replaced, whose registry digests
/// are kept for unchanged references when the registry cannot be asked.
pub fn resolve(
    lock: &mut Lock,
    transport: &dyn Transport,
    previous: Option<&Lock>,
) -> Result<Report, Vec<ResolveError>> {
    let settings = lock.request.deploy.resolve.clone().unwrap_or_default();
    let mut report = Report::default();
    let mut errors = Vec::new();
    let registry = Registry::new(transport, &settings.registries);
    let os = lock.os().unwrap_or("ubuntu22.04").to_string();
    let arch = if crate::select::grace_host(lock.hardware.gpus.iter().map(|g| g.id.as_str())) {
        "sbsa"
    } else {
        "x86_64"
    };
    let manager = if os.starts_with("rocky") {
        "dnf"
    } else {
        "apt"
    };
    let mirror_of = |p: &LockedPackage| {
        let repo = package_repository(&p.name, manager, &os, arch);
        let mirror = Resolve::mirror(
            if manager == "apt" {
                &settings.apt
            } else {
                &settings.dnf
            },
            &repo,
        );
        (repo, mirror)
    };
    let Fetched {
        mut images,
        mut apt_indexes,
        mut dnf_indexes,
    } = fetch_all(lock, &registry, transport, manager, mirror_of);
    for p in &mut lock.packages {
        let refs = package_images(p);
        if refs.is_empty() {
            continue;
        }
        resolve_package_images(
            p,
            &refs,
            &registry,
            &mut images,
            previous,
            &mut report,
            &mut errors,
        );
    }
    let assumed = AssumedNcclBuild::of(lock);
    for p in &mut lock.packages {
        let pins = p.list(manager).to_vec();
        if pins.is_empty() {
            continue;
        }
        let (repo, mirror) = mirror_of(p);
        let outcome: Result<(Vec<String>, String), RepoError> = if manager == "apt" {
            let idx = apt_indexes
                .entry(mirror.clone())
                .or_insert_with(|| apt::fetch_index(transport, &mirror));
            match idx {
                Err(e) => Err(e.clone()),
                Ok(idx) => {
                    let pins = assumed.as_ref().map_or_else(
                        || pins.clone(),
                        |a| a.pins_as_published(&pins, '=', |n| idx.packages.get(n).cloned()),
                    );
                    Ok((
                        apt_pins(idx, &pins, &p.name, &repo, &mut errors),
                        idx.release_digest.clone(),
                    ))
                }
            }
        } else {
            let idx = dnf_indexes
                .entry(mirror.clone())
                .or_insert_with(|| dnf::fetch_index(transport, &mirror));
            match idx {
                Err(e) => Err(e.clone()),
                Ok(idx) => {
                    let pins = assumed.as_ref().map_or_else(
                        || pins.clone(),
                        |a| {
                            a.pins_as_published(&pins, '-', |n| {
                                idx.packages
                                    .get(n)
                                    .map(|v| v.iter().map(dnf::Evr::text).collect())
                            })
                        },
                    );
                    Ok((
                        dnf_pins(idx, &pins, &p.name, &repo, &mut errors),
                        idx.repomd_digest.clone(),
                    ))
                }
            }
        };
        record_pins(
            p,
            manager,
            &pins,
            &repo,
            outcome,
            previous,
            &mut report,
            &mut errors,
        );
    }
    if let Some(a) = &assumed {
        a.record(lock, manager);
    }
    lock.rehash();
    if errors.is_empty() {
        Ok(report)
    } else {
        Err(errors)
    }
}

/// The answers of every registry and repository a lock needs, keyed as the resolution
/// loops look them up.
struct Fetched {
    /// Image reference (as [`ImageRef`] prints it) → what its registry said.
    images: BTreeMap<String, Result<oci::Resolved, OciError>>,
    /// apt mirror → its index.
    apt_indexes: BTreeMap<String, Result<apt::AptIndex, RepoError>>,
    /// dnf mirror → its index.
    dnf_indexes: BTreeMap<String, Result<dnf::DnfIndex, RepoError>>,
}

/// One query of a lock: an image's manifest, or a repository's index.
enum Query {
    Image(ImageRef),
    Apt(String),
    Dnf(String),
}

/// The answer to a [`Query`].
enum Answer {
    Image(Result<oci::Resolved, OciError>),
    Apt(Result<apt::AptIndex, RepoError>),
    Dnf(Result<dnf::DnfIndex, RepoError>),
}

/// At most this many queries are in flight at once.
const IN_FLIGHT: usize = 8;

/// Sends every query the lock needs at once, at most [`IN_FLIGHT`] in flight, each distinct
/// image and mirror once: a run waits for its slowest host, not for the sum of its hosts
/// (issue 32, "one budget per run"). The transport's run deadline, byte cap and
/// no-network detection are shared by every thread. What the lock records does not depend
/// on the order the answers arrive in: they are keyed, and read in the lock's order.
fn fetch_all(
    lock: &Lock,
    registry: &Registry<'_>,
    transport: &dyn Transport,
    manager: &str,
    mirror_of: impl Fn(&LockedPackage) -> (String, String),
) -> Fetched {
    let mut queries: BTreeMap<String, Query> = BTreeMap::new();
    for p in &lock.packages {
        for (_, reference) in package_images(p) {
            if let Ok(r) = ImageRef::parse(&reference) {
                queries.insert(format!("image {r}"), Query::Image(r));
            }
        }
        if !p.list(manager).is_empty() {
            let (_, mirror) = mirror_of(p);
            let q = if manager == "apt" {
                Query::Apt(mirror.clone())
            } else {
                Query::Dnf(mirror.clone())
            };
            queries.insert(format!("{manager} {mirror}"), q);
        }
    }
    let queries: Vec<Query> = queries.into_values().collect();
    // Offline every answer is immediate: threads would only cost their start (16 of them
    // were most of an offline lock's system calls).
    let in_flight = if transport.answers_locally() {
        1
    } else {
        IN_FLIGHT
    };
    let answers = concurrently(&queries, in_flight, |q| match q {
        Query::Image(r) => Answer::Image(registry.resolve(r)),
        Query::Apt(m) => Answer::Apt(apt::fetch_index(transport, m)),
        Query::Dnf(m) => Answer::Dnf(dnf::fetch_index(transport, m)),
    });
    let mut out = Fetched {
        images: BTreeMap::new(),
        apt_indexes: BTreeMap::new(),
        dnf_indexes: BTreeMap::new(),
    };
    for (q, a) in queries.into_iter().zip(answers) {
        match (q, a) {
            (Query::Image(r), Answer::Image(a)) => {
                out.images.insert(r.to_string(), a);
            }
            (Query::Apt(m), Answer::Apt(a)) => {
                out.apt_indexes.insert(m, a);
            }
            (Query::Dnf(m), Answer::Dnf(a)) => {
                out.dnf_indexes.insert(m, a);
            }
            _ => unreachable!("each query gets the answer of its own kind"),
        }
    }
    out
}

/// `f` over `jobs` on at most `threads` scoped threads; the results in the order of `jobs`.
/// One job runs on the calling thread.
pub fn concurrently<T: Sync, R: Send>(
    jobs: &[T],
    threads: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    if jobs.len() <= 1 || threads <= 1 {
        return jobs.iter().map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<Option<R>>> = Mutex::new(jobs.iter().map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads.min(jobs.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(job) = jobs.get(i) else { break };
                let r = f(job);
                done.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)[i] = Some(r);
            });
        }
    });
    done.into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect()
}

/// NCCL's packages exist once per CUDA build (`libnccl2=2.29.7-1+cuda12.9`). Where the
/// catalog lists no build of the locked NCCL for the locked CUDA major, the lock assumed
/// the locked minor (its `nccl-build` fact says `known = "false"`); the repository's own
/// index then says which builds exist, and the pins take the nearest one by the rule the
/// catalog's list follows ([`crate::select::nearest_cuda_build`]).
struct AssumedNcclBuild {
    /// The locked NCCL: `2.29.7`.
    nccl: String,
    /// The assumed build: `13.2`.
    cuda: Version,
}

impl AssumedNcclBuild {
    fn of(lock: &Lock) -> Option<Self> {
        let f = lock.facts.iter().find(|f| f.kind == "nccl-build")?;
        if f.get("known") != Some("false") {
            return None;
        }
        Some(Self {
            nccl: f.get("nccl")?.to_string(),
            cuda: Version::parse(f.get("cuda")?).ok()?,
        })
    }

    /// `pins` with the assumed `+cudaX.Y` replaced by the nearest build the repository
    /// publishes for the first NCCL pin's package (`sep`: `=` for apt, `-` for dnf); as
    /// they were when it publishes none of that major (the pin check then reports it).
    fn pins_as_published(
        &self,
        pins: &[String],
        sep: char,
        versions_of: impl Fn(&str) -> Option<Vec<String>>,
    ) -> Vec<String> {
        let tag = format!("+cuda{}", self.cuda);
        let lead = format!("{sep}{}-", self.nccl);
        let Some(name) = pins
            .iter()
            .filter(|p| p.ends_with(&tag))
            .find_map(|p| p.find(&lead).map(|i| &p[..i]))
        else {
            return pins.to_vec();
        };
        let builds: Vec<Version> = versions_of(name)
            .unwrap_or_default()
            .iter()
            .map(|v| v.split_once(':').map_or(v.as_str(), |(_, r)| r))
            .filter(|v| v.starts_with(&format!("{}-", self.nccl)))
            .filter_map(|v| v.rsplit_once("+cuda"))
            .filter_map(|(_, b)| Version::parse(b).ok())
            .collect();
        let refs: Vec<&Version> = builds.iter().collect();
        match crate::select::nearest_cuda_build(&refs, &self.cuda) {
            Some(b) if b != self.cuda => pins
                .iter()
                .map(|p| match p.strip_suffix(&tag) {
                    Some(stem) => format!("{stem}+cuda{b}"),
                    None => p.clone(),
                })
                .collect(),
            _ => pins.to_vec(),
        }
    }

    /// Records in the `nccl-build` fact the build the lock's verified pins name, when the
    /// repository's differs from the assumed one.
    fn record(&self, lock: &mut Lock, manager: &str) {
        let lead = format!("{}-", self.nccl);
        let built = lock
            .packages
            .iter()
            .filter(|p| p.get(&format!("{manager}-source")) == Some("repository"))
            .flat_map(|p| p.list(manager).iter())
            .filter(|pin| pin.contains(&lead))
            .find_map(|pin| pin.rsplit_once("+cuda"))
            .and_then(|(_, b)| Version::parse(b).ok());
        let Some(b) = built.filter(|b| *b != self.cuda) else {
            return;
        };
        let Some(f) = lock.facts.iter_mut().find(|f| f.kind == "nccl-build") else {
            return;
        };
        f.fields.insert("cuda".into(), Field::Str(b.to_string()));
        f.fields
            .insert("known".into(), Field::Str("repository".into()));
        f.because
            .retain(|w| !w.starts_with("UNVERIFIED: the catalog lists"));
        f.because.push(format!(
            "NVIDIA's repository publishes NCCL {} for CUDA {b}, not {} (read from its index at lock time; the catalog lists no build of that major): the nearest build, newer first",
            self.nccl, self.cuda
        ));
    }
}

/// The lock's apt pins checked against the repository's `Packages` index: published as
/// written, or with the Debian revision the repository has; a missing pin is an error.
fn apt_pins(
    idx: &apt::AptIndex,
    pins: &[String],
    package: &str,
    repo: &str,
    errors: &mut Vec<ResolveError>,
) -> Vec<String> {
    let mut out = Vec::new();
    for pin in pins {
        let (name, version) = pin.split_once('=').unwrap_or((pin, ""));
        match apt::check_pin(idx, name, version) {
            apt::PinCheck::Published => out.push(pin.clone()),
            apt::PinCheck::Corrected(v) => out.push(format!("{name}={v}")),
            apt::PinCheck::Missing(nearest) => errors.push(ResolveError::Pin {
                package: package.to_string(),
                manager: "apt",
                pin: pin.clone(),
                repository: repo.to_string(),
                nearest,
            }),
        }
    }
    out
}

/// The lock's dnf pins checked against the repository's `primary.xml`.
fn dnf_pins(
    idx: &dnf::DnfIndex,
    pins: &[String],
    package: &str,
    repo: &str,
    errors: &mut Vec<ResolveError>,
) -> Vec<String> {
    let mut out = Vec::new();
    for pin in pins {
        match dnf::check_pin(idx, pin) {
            dnf::PinCheck::Published { name, version } => out.push(format!("{name}-{version}")),
            dnf::PinCheck::Missing(nearest) => errors.push(ResolveError::Pin {
                package: package.to_string(),
                manager: "dnf",
                pin: pin.clone(),
                repository: repo.to_string(),
                nearest,
            }),
        }
    }
    out
}

/// Records what the repository said about a package's pins: verified pins with the
/// repository and its index digest; on a fetch failure the previous lock's verified pins,
/// or the catalog's strings marked unverified.
#[allow(clippy::too_many_arguments)]
fn record_pins(
    p: &mut LockedPackage,
    manager: &str,
    pins: &[String],
    repo: &str,
    outcome: Result<(Vec<String>, String), RepoError>,
    previous: Option<&Lock>,
    report: &mut Report,
    errors: &mut Vec<ResolveError>,
) {
    let source_key = format!("{manager}-source");
    match outcome {
        Ok((out, index_digest)) => {
            if out.len() == pins.len() {
                report.verified.extend(out.iter().cloned());
                p.fields.insert(manager.to_string(), Field::List(out));
                p.fields.insert(source_key, Field::Str("repository".into()));
                p.fields.insert(
                    format!("{manager}-repository"),
                    Field::Str(repo.to_string()),
                );
                p.fields
                    .insert(format!("{manager}-index"), Field::Str(index_digest));
            }
        }
        Err(RepoError::Fetch(e)) if e.may_fall_back() => {
            let why = e.to_string();
            report.first_failure.get_or_insert_with(|| why.clone());
            // The previous lock's verified pins stand when the catalog still pins the
            // same packages.
            let kept = previous
                .and_then(|prev| prev.package(&p.name))
                .filter(|q| q.get(&source_key) == Some("repository"))
                .filter(|q| q.list(manager).len() == pins.len());
            if let Some(q) = kept {
                for k in [
                    manager.to_string(),
                    source_key.clone(),
                    format!("{manager}-repository"),
                    format!("{manager}-index"),
                ] {
                    if let Some(v) = q.fields.get(&k) {
                        p.fields.insert(k, v.clone());
                    }
                }
            } else {
                // The catalog's observation, or its naming rule (`naming`, set by the
                // selection) stays as it was: unverified either way, and said so.
                p.fields
                    .entry(source_key)
                    .or_insert_with(|| Field::Str("catalog".into()));
            }
            report
                .unverified
                .extend(pins.iter().map(|x| (x.clone(), why.clone())));
        }
        Err(error) => errors.push(ResolveError::Repo {
            package: p.name.clone(),
            manager: if manager == "apt" { "apt" } else { "dnf" },
            error,
        }),
    }
}

#[allow(clippy::too_many_arguments)]
fn resolve_package_images(
    p: &mut LockedPackage,
    images: &[(String, String)],
    registry: &Registry<'_>,
    cache: &mut BTreeMap<String, Result<oci::Resolved, OciError>>,
    previous: Option<&Lock>,
    report: &mut Report,
    errors: &mut Vec<ResolveError>,
) {
    let mut resolved = Vec::new();
    let mut offline_why = None;
    for (stem, reference) in images {
        let parsed = match ImageRef::parse(reference) {
            Ok(r) => r,
            Err(e) => {
                errors.push(ResolveError::Image {
                    package: p.name.clone(),
                    reference: reference.clone(),
                    error: OciError::BadReference {
                        reference: reference.clone(),
                        detail: e,
                    },
                });
                return;
            }
        };
        let r = cache
            .entry(parsed.to_string())
            .or_insert_with(|| registry.resolve(&parsed))
            .clone();
        match r {
            Ok(r) => resolved.push((stem.clone(), reference.clone(), r)),
            Err(OciError::Fetch(e)) if e.may_fall_back() => {
                offline_why = Some(e.to_string());
                break;
            }
            Err(error) => {
                errors.push(ResolveError::Image {
                    package: p.name.clone(),
                    reference: reference.clone(),
                    error,
                });
                return;
            }
        }
    }
    if let Some(why) = &offline_why {
        report.first_failure.get_or_insert_with(|| why.clone());
    }
    match offline_why {
        None => record_registry_digests(p, resolved, report),
        Some(why) => fall_back_digests(p, images, &why, previous, report),
    }
}

/// The registry answered for every image of the package: its digests and platforms.
fn record_registry_digests(
    p: &mut LockedPackage,
    resolved: Vec<(String, String, oci::Resolved)>,
    report: &mut Report,
) {
    for (stem, reference, r) in resolved {
        let key = format!("{stem}-digest");
        // The registry's answer replaces the catalog's observation; a different digest is
        // said, with the observation's date (the tag moved since, or the source was wrong).
        let observed = take_observation(p, &reference);
        if let Some(old) = p.get(&key) {
            let when = observed
                .as_deref()
                .and_then(|o| o.split_whitespace().next())
                .map(|d| format!(" on {d}"))
                .unwrap_or_default();
            if let Some((platform, _)) = r.platforms.iter().find(|(_, d)| d == old) {
                // Not a move: the observation named one platform's manifest of the index
                // the tag still names.
                p.because.push(format!(
                    "`{reference}`: the catalog's observation{when} ({old}) is the {platform} manifest of the index the registry serves"
                ));
            } else if old != r.digest {
                p.because.push(format!(
                    "`{reference}` moved: the catalog observed {old}{when}, the registry now serves {}",
                    r.digest
                ));
            }
        }
        p.fields.insert(key, Field::Str(r.digest));
        let platforms: Vec<String> = r
            .platforms
            .iter()
            .map(|(pl, d)| format!("{pl} {d}"))
            .collect();
        if platforms.is_empty() {
            p.fields.remove(&format!("{stem}-platforms"));
        } else {
            p.fields
                .insert(format!("{stem}-platforms"), Field::List(platforms));
        }
        report.from_registry.push(reference);
    }
    p.fields
        .insert("digest-source".into(), Field::Str("registry".into()));
}

/// Removes the `because` line of `reference`'s catalog observation
/// ([`crate::select::observation_because`]) and returns its text after the marker
/// (`2026-08-20 (the multi-arch index), not read …`).
fn take_observation(p: &mut LockedPackage, reference: &str) -> Option<String> {
    let marker = format!("`{reference}`: {OBSERVATION}");
    let i = p.because.iter().position(|b| b.starts_with(&marker))?;
    Some(p.because.remove(i)[marker.len()..].to_string())
}

/// The text of `reference`'s catalog observation, when the package has one.
fn observation_of(p: &LockedPackage, reference: &str) -> Option<String> {
    let marker = format!("`{reference}`: {OBSERVATION}");
    p.because
        .iter()
        .find_map(|b| b.strip_prefix(&marker))
        .map(|rest| format!("{OBSERVATION}{rest}"))
}

/// The registry could not be asked: the previous lock's digests for the same references,
/// else the catalog's observed digests, else the images stay unpinned.
fn fall_back_digests(
    p: &mut LockedPackage,
    images: &[(String, String)],
    why: &str,
    previous: Option<&Lock>,
    report: &mut Report,
) {
    // The previous lock's registry digests stand for the same references.
    let same = previous.and_then(|prev| prev.package(&p.name)).filter(|q| {
        q.get("digest-source") == Some("registry")
            && package_images(q) == images
            && images
                .iter()
                .all(|(stem, _)| q.get(&format!("{stem}-digest")).is_some())
    });
    if let Some(q) = same {
        // The previous lock's note that a tag moved away from the catalog's observation
        // stands with its digest: an offline re-lock writes the same lock.
        for b in q.because.iter().filter(|b| {
            b.contains("` moved: the catalog observed ")
                || b.contains("`: the catalog's observation")
        }) {
            if !p.because.contains(b) {
                p.because.push(b.clone());
            }
        }
        for (stem, reference) in images {
            take_observation(p, reference);
            for k in [format!("{stem}-digest"), format!("{stem}-platforms")] {
                match q.fields.get(&k) {
                    Some(v) => p.fields.insert(k, v.clone()),
                    None => p.fields.remove(&k),
                };
            }
            report
                .fallback
                .push((reference.clone(), format!("previous lock ({why})")));
        }
        p.fields
            .insert("digest-source".into(), Field::Str("registry".into()));
        return;
    }
    // Each reference the catalog observed is pinned by its observation (the package's
    // digests then come from the catalog); one it did not stays on its tag, reported.
    let mut observed = false;
    for (stem, reference) in images {
        if p.get(&format!("{stem}-digest")).is_some() {
            let what = observation_of(p, reference).unwrap_or_else(|| "catalog".into());
            report
                .fallback
                .push((reference.clone(), format!("{what} ({why})")));
            observed = true;
        } else {
            report.unpinned.push(reference.clone());
        }
    }
    if observed {
        p.fields
            .insert("digest-source".into(), Field::Str("catalog".into()));
    }
}
