//! The Python closure: every package a layer's image installs, resolved at lock time by
//! uv and recorded as PEP 751 files (`pylock.<layer>.toml`), each wheel and sdist with
//! its sha256, so that a build installs and never resolves.
//!
//! ```text
//! Lock (solver picks) ──inputs()──▶ one pyproject per layer ──uv pip compile──▶ pylock text
//!                                   (exact pins, explicit            │
//!                                    per-package indexes)            ├─ mirror URLs → canonical
//!                                                                    ├─ every file hashed?
//!                                                                    ├─ nvidia-* agree with the lock?
//!                                                                    └─ source builds split out
//! ```
//!
//! * **Inputs.** The framework layer gets torch (`==<version>+<variant>`, from the variant's
//!   index only), the framework extras and `[python].framework`; the inference, training
//!   and build layers add their components and `[python]` lists, with every framework
//!   pin as a constraint, so an upper image only adds packages to the one below it.
//!   The build layer is the framework closure plus the tools `--no-build-isolation` builds
//!   need (and the runtime requirements of what it compiles). A layer that installs a wheel
//!   built from source also locks what that build adds to the wheel's requirements and what
//!   it needs to load torch extensions (`crate::core::compiled::runtime_requires`).
//! * **Indexes.** PyPI (or `[resolve].pypi`) is the only default index; the torch family
//!   and any component with its own index are bound to that index as *explicit* uv
//!   sources, so no package is ever taken from an index by first-index order.
//! * **Snapshot.** `exclude-newer` (the spec's, else the previous lock's, else today at
//!   00:00 UTC) is recorded: a re-lock with unchanged inputs resolves identically, and
//!   with unchanged inputs the previous files are reused without running uv at all.
//!   Exact pins of the torch family are exempt (the PyTorch index publishes no upload
//!   times; the pylock's hash fixes the file).
//!
//! This module runs a process (uv) and writes a temporary directory; only `gpustack lock`
//! calls it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::core::{Component, Layer};
use crate::lock::{Lock, LockedComponent, PyBuild, PyLockFile, PythonLock};

/// The torch family: bound to the torch variant's index, never taken from PyPI.
pub const TORCH_FAMILY: &[&str] = &["torch", "torchvision", "torchaudio"];

/// The tools the build layer's `--no-build-isolation` source builds import.
pub const BUILD_TOOLS: &[&str] = &["pip", "setuptools", "wheel", "packaging", "ninja", "psutil"];

/// The default index.
pub const PYPI: &str = "https://pypi.org/simple";

pub use crate::spec::python::{normalize, PythonReqs};

pub use super::closure_error::ClosureError;

/// A uv executable of the pinned version.
#[derive(Clone, Debug)]
pub struct Uv {
    /// The executable.
    pub exe: PathBuf,
    /// Its version, `0.11.7`.
    pub version: String,
}

impl Uv {
    /// `GPUSTACK_UV`, else `uv` on `PATH`; its `--version` must be `pinned`.
    ///
    /// # Errors
    ///
    /// When none is found, it does not run, or its version is another.
    pub fn find(pinned: &str) -> Result<Uv, ClosureError> {
        let exe = match std::env::var_os("GPUSTACK_UV").filter(|v| !v.is_empty()) {
            Some(p) => PathBuf::from(p),
            None => std::env::var_os("PATH")
                .and_then(|p| {
                    std::env::split_paths(&p)
                        .map(|d| d.join("uv"))
                        .find(|c| c.is_file())
                })
                .ok_or_else(|| ClosureError::Uv {
                    detail: "no `uv` on PATH and GPUSTACK_UV is not set".into(),
                    pinned: pinned.into(),
                })?,
        };
        let out = Command::new(&exe)
            .arg("--version")
            .output()
            .map_err(|e| ClosureError::Uv {
                detail: format!("`{}` does not run: {e}", exe.display()),
                pinned: pinned.into(),
            })?;
        let text = String::from_utf8_lossy(&out.stdout);
        let version = text
            .split_whitespace()
            .nth(1)
            .unwrap_or_default()
            .to_string();
        if version != pinned {
            return Err(ClosureError::Uv {
                detail: format!(
                    "`{}` is uv {}",
                    exe.display(),
                    if version.is_empty() {
                        "of unknown version"
                    } else {
                        &version
                    }
                ),
                pinned: pinned.into(),
            });
        }
        Ok(Uv { exe, version })
    }

    /// The uv of the pinned version, wherever it is: `GPUSTACK_UV` (which must be it; never
    /// replaced by a download), else `uv` on `PATH` when it is that version, else the
    /// catalog's wheel for this machine's CPU from gpustack's cache, downloaded over
    /// `transport` and checked first when it is not there ([`crate::resolve::uv`]).
    ///
    /// # Errors
    ///
    /// [`ClosureError::Uv`] when `GPUSTACK_UV` is another uv, or no wheel is pinned for this
    /// CPU; [`ClosureError::Download`] / [`ClosureError::WheelDigest`] when the wheel cannot
    /// be fetched or is not the pinned file.
    pub fn obtain(
        pinned: &str,
        wheel: Option<&crate::resolve::uv::Wheel>,
        transport: &dyn crate::resolve::http::Transport,
        pypi: Option<&str>,
    ) -> Result<Uv, ClosureError> {
        let on_path = match Uv::find(pinned) {
            Ok(u) => return Ok(u),
            Err(e) if std::env::var_os("GPUSTACK_UV").is_some_and(|v| !v.is_empty()) => {
                return Err(e)
            }
            Err(ClosureError::Uv { detail, .. }) => detail,
            Err(e) => return Err(e),
        };
        let Some(wheel) = wheel else {
            return Err(ClosureError::Uv {
                detail: format!(
                    "{on_path}, and the catalog pins no uv {pinned} wheel for this machine (`{}`)",
                    std::env::consts::ARCH
                ),
                pinned: pinned.into(),
            });
        };
        let cache = crate::resolve::uv::cache_dir().ok_or_else(|| {
            ClosureError::Other(
                "no cache directory for the pinned uv: set XDG_CACHE_HOME, HOME or GPUSTACK_CACHE_DIR".into(),
            )
        })?;
        let exe = crate::resolve::uv::obtain(transport, wheel, &cache, pypi)?;
        let version = Command::new(&exe)
            .arg("--version")
            .output()
            .ok()
            .and_then(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .split_whitespace()
                    .nth(1)
                    .map(str::to_string)
            })
            .unwrap_or_default();
        if version != pinned {
            return Err(ClosureError::Uv {
                detail: format!(
                    "`{}`, unpacked from the pinned wheel, does not say it is uv {pinned}",
                    exe.display()
                ),
                pinned: pinned.into(),
            });
        }
        Ok(Uv { exe, version })
    }
}

/// What one pylock is resolved from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayerInput {
    /// The layer whose image installs it (`Build` is written as `build`).
    pub layer: String,
    /// Requirements, in order.
    pub requirements: Vec<String>,
    /// Package → the only index it may come from (canonical URL).
    pub sources: BTreeMap<String, String>,
    /// Whether the framework closure's pins constrain it.
    pub constrained: bool,
    /// Packages built from source in the build stage: split out of the file and
    /// recorded as [`PyBuild`]s.
    pub built: Vec<String>,
}

/// The `pypi-name` of a component.
fn pypi_name(lock: &Lock, c: Component) -> Option<(String, String, Option<String>)> {
    let x = lock.component(c)?;
    let name = x.get("pypi-name").unwrap_or(c.name()).to_string();
    let index = x
        .get("index-url")
        .filter(|i| !i.starts_with("https://pypi.org/"))
        .map(str::to_string);
    Some((name, x.version.to_string(), index))
}

/// The closure's inputs per layer, from the lock alone (its components and
/// `[request.python]`): framework first, then the layers built on it, then `build`.
pub fn inputs(lock: &Lock) -> Vec<LayerInput> {
    inputs_for(lock, "x86_64")
}

/// [`inputs`] for the CPU `cpu` (`x86_64`, `aarch64`): where torch comes from can depend
/// on it (PyPI's aarch64 wheels of torch 2.10 and older are CPU builds, so an aarch64
/// platform takes the variant's own index; the lock's `pypi-cpus`).
pub fn inputs_for(lock: &Lock, cpu: &str) -> Vec<LayerInput> {
    let Some(torch) = lock.component(Component::Torch) else {
        return Vec::new();
    };
    let user = &lock.request.deploy.python;
    let (from_pypi, torch_index, torch_pin) = torch_install(lock, torch, cpu);
    let source_built = torch.get("build") == Some("source");
    let (mut sources, by_layer) =
        requirements_by_layer(lock, torch, from_pypi, &torch_pin, source_built);
    if let Some(i) = &torch_index {
        for f in TORCH_FAMILY {
            sources.insert((*f).to_string(), i.clone());
        }
    }
    let built: Vec<String> = lock
        .components
        .iter()
        .filter_map(|c| pypi_name(lock, c.name))
        .map(|(n, _, _)| n)
        .filter(|n| crate::core::compiled::is_compiled(n))
        .collect();
    let layer_reqs = |l: Layer| -> Vec<String> {
        let mut v = by_layer.get(&l).cloned().unwrap_or_default();
        v.extend(user.of(l).iter().cloned());
        v
    };
    let framework = layer_reqs(Layer::Framework);
    let mut out = vec![LayerInput {
        layer: "framework".into(),
        requirements: framework.clone(),
        sources: sources.clone(),
        constrained: false,
        built: Vec::new(),
    }];
    for l in [Layer::Inference, Layer::Training] {
        let own = layer_reqs(l);
        if by_layer.get(&l).is_none_or(Vec::is_empty) && user.of(l).is_empty() {
            continue;
        }
        let mut reqs = framework.clone();
        reqs.extend(own);
        let layer_built: Vec<String> = built
            .iter()
            .filter(|b| {
                by_layer
                    .get(&l)
                    .is_some_and(|v| v.iter().any(|r| r.starts_with(&format!("{b}=="))))
            })
            .cloned()
            .collect();
        // What the wheels built for this layer need at run time beyond their sdists'
        // metadata (DeepSpeed's CUDA build: nvidia-ml-py; torch extensions: setuptools).
        for b in &layer_built {
            for r in crate::core::compiled::runtime_requires(b) {
                if !reqs.iter().any(|x| x == r) {
                    reqs.push(r.to_string());
                }
            }
        }
        out.push(LayerInput {
            layer: l.name().into(),
            requirements: reqs,
            sources: sources.clone(),
            constrained: true,
            built: layer_built,
        });
    }
    // The build stage: the framework closure, the build tools, and what it compiles
    // (whose own requirements its setup scripts may import).
    let compiled: Vec<String> = by_layer
        .values()
        .flatten()
        .filter(|r| built.iter().any(|b| r.starts_with(&format!("{b}=="))))
        .cloned()
        .collect();
    if !compiled.is_empty() || source_built {
        let mut reqs = framework;
        reqs.extend(BUILD_TOOLS.iter().map(|s| (*s).to_string()));
        reqs.extend(compiled);
        if source_built {
            reqs.extend(torch.list("build-requires").iter().cloned());
        }
        out.push(LayerInput {
            layer: "build".into(),
            requirements: reqs,
            sources,
            constrained: true,
            built: built.clone(),
        });
    }
    out
}

/// Where torch comes from on `cpu`: PyPI (`true`) or its variant's index, and the pin
/// written.
fn torch_install(
    lock: &Lock,
    torch: &LockedComponent,
    cpu: &str,
) -> (bool, Option<String>, String) {
    // The PyPI-default variant is the same build on PyPI (the catalog's `pypi-default`) on
    // the CPUs the lock's `pypi-cpus` lists (x86_64 only when absent): taken from there,
    // without its local version, unless `[resolve] variant-index`. On any other CPU the
    // PyPI wheel is a CPU build, so the variant's index serves it.
    let variant_index = lock
        .request
        .deploy
        .resolve
        .as_ref()
        .is_some_and(|r| r.variant_index);
    let cpus = torch.list("pypi-cpus");
    let cuda_on_pypi = if cpus.is_empty() {
        cpu == "x86_64"
    } else {
        cpus.iter().any(|c| c == cpu)
    };
    let from_pypi = torch.get("pypi-default") == Some("true") && !variant_index && cuda_on_pypi;
    let torch_index = torch
        .get("index-url")
        .filter(|_| !from_pypi)
        .map(str::to_string);
    let torch_pin = if from_pypi {
        torch
            .version
            .to_string()
            .split('+')
            .next()
            .unwrap_or_default()
            .to_string()
    } else {
        torch.version.to_string()
    };
    (from_pypi, torch_index, torch_pin)
}

/// The locked components' requirements per layer, and the explicit index of each package
/// that has one.
fn requirements_by_layer(
    lock: &Lock,
    torch: &LockedComponent,
    from_pypi: bool,
    torch_pin: &str,
    source_built: bool,
) -> (BTreeMap<String, String>, BTreeMap<Layer, Vec<String>>) {
    let mut sources: BTreeMap<String, String> = BTreeMap::new();
    let mut by_layer: BTreeMap<Layer, Vec<String>> = BTreeMap::new();
    // A source-built torch is not installed from an index: the framework layer gets what
    // its wheel requires and the cuDNN it is built against; the build layer, its build
    // requirements (see `crate::plan::torch_build`).
    if source_built {
        let fw = by_layer.entry(Layer::Framework).or_default();
        fw.extend(torch.list("runtime-requires").iter().cloned());
        if let (Some(cudnn), Some(major)) = (
            lock.component(Component::Cudnn),
            torch.get("cuda").and_then(|c| c.split('.').next()),
        ) {
            fw.push(format!("nvidia-cudnn-cu{major}=={}", cudnn.version));
        }
    }
    for c in &lock.components {
        if matches!(
            c.name,
            Component::Python
                | Component::Driver
                | Component::Cuda
                | Component::Cudnn
                | Component::Nccl
        ) {
            continue;
        }
        if c.name == Component::Torch && source_built {
            continue;
        }
        let Some((name, version, index)) = pypi_name(lock, c.name) else {
            continue;
        };
        let version = if c.name == Component::Torch {
            torch_pin.to_string()
        } else {
            version
        };
        if let Some(i) = index.filter(|_| c.name != Component::Torch || !from_pypi) {
            sources.insert(normalize(&name), i);
        }
        by_layer
            .entry(c.layer)
            .or_default()
            .push(format!("{name}=={version}"));
    }
    (sources, by_layer)
}

/// The manylinux platforms of the lock's hosts: `x86_64-manylinux_2_35` from the OS's
/// glibc and each GPU's CPU architecture.
pub fn platforms(glibc: &str, cpus: &[String]) -> Vec<String> {
    let (maj, min) = glibc.split_once('.').unwrap_or((glibc, "0"));
    let mut v: Vec<String> = cpus
        .iter()
        .map(|c| format!("{c}-manylinux_{maj}_{min}"))
        .collect();
    v.sort();
    v.dedup();
    v
}

/// The pylock file name for a layer and platform: `pylock.framework.toml`, with the
/// CPU in it when the stack has more than one platform (`pylock.framework.aarch64.toml`).
pub fn file_name(layer: &str, platform: &str, several: bool) -> String {
    if several {
        let cpu = platform.split('-').next().unwrap_or(platform);
        format!("pylock.{layer}.{cpu}.toml")
    } else {
        format!("pylock.{layer}.toml")
    }
}

/// What a pylock is resolved from, as text: the digest of this decides whether the
/// previous file can be reused.
fn input_digest(
    input: &LayerInput,
    platform: &str,
    python: &str,
    exclude_newer: &str,
    uv: &str,
    framework: Option<&str>,
) -> String {
    let mut s = format!("gpustack-pylock-v1\nuv={uv}\npython={python}\nplatform={platform}\nexclude-newer={exclude_newer}\n");
    for r in &input.requirements {
        let _ = writeln!(s, "req {r}");
    }
    for (k, v) in &input.sources {
        let _ = writeln!(s, "source {k}={v}");
    }
    for b in &input.built {
        let _ = writeln!(s, "built {b}");
    }
    if let Some(f) = framework {
        let _ = writeln!(s, "constraints {f}");
    }
    format!("sha256:{}", hex(&Sha256::digest(s.as_bytes())))
}

use crate::catalog::hex;

/// `sha256:…` of a file's bytes.
pub fn digest(contents: &str) -> String {
    format!("sha256:{}", hex(&Sha256::digest(contents.as_bytes())))
}

/// How the closure is resolved.
pub struct Options<'a> {
    /// The uv to run; `None` offline (only reuse).
    pub uv: Option<&'a Uv>,
    /// The pinned uv version (the lock's `uv` package).
    pub uv_version: String,
    /// `exclude-newer`.
    pub exclude_newer: String,
    /// Platforms.
    pub platforms: Vec<String>,
    /// PyPI (canonical or mirror).
    pub pypi: String,
    /// Index URL prefix → mirror.
    pub mirrors: BTreeMap<String, String>,
    /// The lock being replaced, with its files' contents loaded.
    pub previous: Option<&'a PythonLock>,
    /// Resolve anew, ignoring the previous files' picks (`--upgrade`).
    pub upgrade: bool,
    /// Resolve again, letting only these packages move from the previous files' picks
    /// (`--upgrade-package NAME`, uv's option of the same name).
    pub upgrade_packages: Vec<String>,
}

/// Resolves (or reuses) every pylock of the lock.
///
/// # Errors
///
/// See [`ClosureError`].
pub fn resolve(lock: &Lock, opts: &Options<'_>) -> Result<PythonLock, ClosureError> {
    let python = lock
        .component(Component::Python)
        .map(|c| c.version.to_string())
        .unwrap_or_default();
    let several = opts.platforms.len() > 1;
    let mut files = Vec::new();
    let mut builds: Vec<PyBuild> = Vec::new();
    for platform in &opts.platforms {
        let cpu = platform.split('-').next().unwrap_or(platform);
        let layer_inputs = inputs_for(lock, cpu);
        // Every layer's requirements together: resolved once, its pins constrain each
        // layer, so the layers agree on every shared package and an upper image only adds
        // to the one below (installing `inference` over `framework` changes nothing there).
        let union = union_of(&layer_inputs);
        let union_digest = input_digest(
            &union,
            platform,
            &python,
            &opts.exclude_newer,
            &opts.uv_version,
            None,
        );
        // Which files can be reused; the others are resolved below.
        let plan = reuse_plan(
            &layer_inputs,
            platform,
            several,
            &python,
            &union_digest,
            opts,
        )?;
        let mut resolved = run_uv(&union, &plan, platform, &python, opts)?;
        for (input, file, inputs, reused) in plan {
            let (contents, built) = if let Some(prev) = reused {
                let built: Vec<PyBuild> = opts
                    .previous
                    .map(|p| {
                        p.builds
                            .iter()
                            .filter(|b| b.layer == input.layer && b.platform == *platform)
                            .cloned()
                            .collect()
                    })
                    .unwrap_or_default();
                (prev.contents.clone().unwrap_or_default(), built)
            } else {
                let raw = resolved
                    .remove(&input.layer)
                    .unwrap_or_else(|| Err(ClosureError::Other("no uv run".into())))?;
                postprocess(&raw, input, platform, opts)?
            };
            check(lock, &input.layer, &contents)?;
            files.push(PyLockFile {
                layer: input.layer.clone(),
                platform: platform.clone(),
                file,
                digest: digest(&contents),
                inputs,
                packages: u32::try_from(contents.matches("\n[[packages]]\n").count())
                    .unwrap_or(u32::MAX),
                contents: Some(contents),
            });
            builds.extend(built);
        }
    }
    builds.sort_by(|a, b| (&a.layer, &a.platform, &a.name).cmp(&(&b.layer, &b.platform, &b.name)));
    builds.dedup();
    Ok(PythonLock {
        resolver: format!("uv {}", opts.uv_version),
        exclude_newer: opts.exclude_newer.clone(),
        files,
        builds,
    })
}

/// A layer's file on one platform: its input, file name, input digest, and the previous
/// file when it can be reused as is.
type Planned<'a> = (&'a LayerInput, String, String, Option<&'a PyLockFile>);

/// Which files of a platform can be reused from the previous lock (same inputs); offline,
/// a file that must be resolved again is an error.
fn reuse_plan<'a>(
    layer_inputs: &'a [LayerInput],
    platform: &str,
    several: bool,
    python: &str,
    union_digest: &str,
    opts: &Options<'a>,
) -> Result<Vec<Planned<'a>>, ClosureError> {
    let mut plan: Vec<Planned<'a>> = Vec::new();
    for input in layer_inputs {
        let file = file_name(&input.layer, platform, several);
        let inputs = input_digest(
            input,
            platform,
            python,
            &opts.exclude_newer,
            &opts.uv_version,
            Some(union_digest),
        );
        let fresh = opts.upgrade || !opts.upgrade_packages.is_empty();
        let reused = opts.previous.filter(|_| !fresh).and_then(|p| {
            p.files
                .iter()
                .find(|f| f.file == file && f.inputs == inputs && f.contents.is_some())
        });
        if reused.is_none() && opts.uv.is_none() {
            let edited = opts.previous.is_some_and(|p| {
                p.files
                    .iter()
                    .any(|f| f.file == file && f.inputs == inputs && f.contents.is_none())
            });
            return Err(ClosureError::Offline {
                detail: if edited {
                    format!("`{file}` must be resolved again: the file beside the lock does not match the digest the lock records")
                } else {
                    format!("`{file}` must be resolved (its inputs changed, or there is no previous lock beside the output)")
                },
            });
        }
        plan.push((input, file, inputs, reused));
    }
    Ok(plan)
}

/// The files that cannot be reused, resolved with uv: the union of every layer once, then
/// each layer under the union's pins, side by side.
fn run_uv(
    union: &LayerInput,
    plan: &[Planned<'_>],
    platform: &str,
    python: &str,
    opts: &Options<'_>,
) -> Result<BTreeMap<String, Result<String, ClosureError>>, ClosureError> {
    // uv prefers the versions of an existing output file: the previous files keep
    // every pick that still fits (Cargo's and uv's stable re-lock).
    let seed = |layer: &str| {
        opts.previous
            .and_then(|p| {
                p.files
                    .iter()
                    .find(|f| f.layer == layer && f.platform == *platform)
            })
            .and_then(|f| f.contents.as_deref())
    };
    let mut resolved: BTreeMap<String, Result<String, ClosureError>> = BTreeMap::new();
    if let Some(uv) = opts.uv.filter(|_| plan.iter().any(|p| p.3.is_none())) {
        let widest = opts.previous.and_then(|p| {
            p.files
                .iter()
                .filter(|f| f.platform == *platform && f.contents.is_some())
                .max_by_key(|f| f.packages)
        });
        let raw = compile(
            uv,
            union,
            platform,
            python,
            opts,
            None,
            widest.and_then(|f| f.contents.as_deref()),
        )?;
        let pins = constraints_of(&raw);
        // The layers are independent given the pins: resolved side by side.
        std::thread::scope(|s| {
            let handles: Vec<_> = plan
                .iter()
                .filter(|p| p.3.is_none())
                .map(|p| {
                    let (input, pins, python) = (p.0, &pins, &python);
                    let h = s.spawn(move || {
                        compile(
                            uv,
                            input,
                            platform,
                            python,
                            opts,
                            Some(pins),
                            seed(&input.layer),
                        )
                    });
                    (input.layer.clone(), h)
                })
                .collect();
            for (layer, h) in handles {
                let r = h
                    .join()
                    .unwrap_or_else(|_| Err(ClosureError::Other("a uv run panicked".into())));
                resolved.insert(layer, r);
            }
        });
    }
    Ok(resolved)
}

/// All layers' requirements in one input (named `all`), first occurrence kept.
fn union_of(inputs: &[LayerInput]) -> LayerInput {
    let mut requirements: Vec<String> = Vec::new();
    let mut sources = BTreeMap::new();
    for i in inputs {
        for r in &i.requirements {
            if !requirements.contains(r) {
                requirements.push(r.clone());
            }
        }
        sources.extend(i.sources.clone());
    }
    LayerInput {
        layer: "all".into(),
        requirements,
        sources,
        constrained: false,
        built: Vec::new(),
    }
}

/// `name==version` for every package of a pylock: the constraints of the layers above.
fn constraints_of(pylock: &str) -> String {
    let mut s = String::new();
    for (name, version) in packages(pylock) {
        let _ = writeln!(s, "{name}=={version}");
    }
    s
}

/// `(name, version)` of every `[[packages]]` entry, in file order.
pub fn packages(pylock: &str) -> Vec<(String, String)> {
    #[derive(Deserialize)]
    struct P {
        name: String,
        version: Option<String>,
    }
    #[derive(Deserialize)]
    struct F {
        #[serde(default)]
        packages: Vec<P>,
    }
    toml::from_str::<F>(pylock)
        .map(|f| {
            f.packages
                .into_iter()
                .map(|p| (p.name, p.version.unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default()
}

/// The `pyproject.toml` uv resolves a layer from: its requirements, and one explicit
/// index per distinct source URL (through its mirror), each bound package naming it.
pub fn pyproject(input: &LayerInput, python: &str, mirrors: &BTreeMap<String, String>) -> String {
    let mut pyproject = format!(
        "[project]\nname = \"gpustack-{}\"\nversion = \"0\"\nrequires-python = \"=={python}.*\"\ndependencies = [\n",
        input.layer
    );
    for r in &input.requirements {
        let _ = writeln!(pyproject, "    {},", crate::lock::quote(r));
    }
    pyproject.push_str("]\n");
    // One explicit index per distinct URL; each bound package names it.
    let mut names: BTreeMap<&str, String> = BTreeMap::new();
    for url in input.sources.values() {
        let n = names.len();
        names
            .entry(url.as_str())
            .or_insert_with(|| format!("gpustack-{n}"));
    }
    if !input.sources.is_empty() {
        pyproject.push_str("\n[tool.uv.sources]\n");
        for (pkg, url) in &input.sources {
            let _ = writeln!(
                pyproject,
                "{} = {{ index = \"{}\" }}",
                crate::lock::quote(pkg),
                names[url.as_str()]
            );
        }
        for (url, name) in &names {
            let _ = writeln!(
                pyproject,
                "\n[[tool.uv.index]]\nname = \"{name}\"\nurl = {}\nexplicit = true",
                crate::lock::quote(&super::spec::Resolve::mirror(mirrors, url))
            );
        }
    }
    pyproject
}

/// `uv pip compile` arguments after `pyproject.toml` (the output is `pylock.toml`).
pub fn compile_args(
    input: &LayerInput,
    platform: &str,
    python: &str,
    exclude_newer: &str,
    pypi: &str,
) -> Vec<String> {
    let mut v: Vec<String> = [
        "--quiet",
        "--no-header",
        "--no-config",
        "--python-version",
        python,
        "--python-platform",
        platform,
        "--exclude-newer",
        exclude_newer,
        "--index-url",
        pypi,
        "-o",
        "pylock.toml",
    ]
    .iter()
    .map(|s| (*s).to_string())
    .collect();
    for f in TORCH_FAMILY {
        if input.sources.contains_key(*f) {
            v.push("--exclude-newer-package".into());
            v.push(format!("{f}=false"));
        }
    }
    v
}

/// One `uv pip compile` of a layer. A layer under the union's pins (`constraints`) first
/// runs with uv's `--offline`: the union's run has just read (and revalidated) every index
/// page and metadata file it can need, since its requirements include the layer's and every
/// version is pinned, so uv answers from its cache without a request. Should the cache
/// lack anything (pruned meanwhile, an index whose pages uv does not store), the run fails
/// and is repeated online: the result is the same either way, only the cost differs.
fn compile(
    uv: &Uv,
    input: &LayerInput,
    platform: &str,
    python: &str,
    opts: &Options<'_>,
    constraints: Option<&str>,
    seed: Option<&str>,
) -> Result<String, ClosureError> {
    let dir = TempDir::new()?;
    let write = |name: &str, text: &str| {
        std::fs::write(dir.0.join(name), text)
            .map_err(|e| ClosureError::Other(format!("cannot write a temporary file: {e}")))
    };
    write("pyproject.toml", &pyproject(input, python, &opts.mirrors))?;
    if let Some(c) = constraints {
        write("constraints.txt", c)?;
    }
    let seed = seed.filter(|_| !opts.upgrade);
    let run = |offline: bool| -> Result<std::process::Output, ClosureError> {
        if let Some(seed) = seed {
            write(OUT_NAME, seed)?;
        }
        let mut cmd = uv_command(uv, &dir.0);
        cmd.args(compile_args(
            input,
            platform,
            python,
            &opts.exclude_newer,
            &opts.pypi,
        ));
        if constraints.is_some() {
            cmd.args(["-c", "constraints.txt"]);
        }
        if offline {
            cmd.arg("--offline");
        }
        cmd.output()
            .map_err(|e| ClosureError::Other(format!("cannot run `{}`: {e}", uv.exe.display())))
    };
    let mut out = run(constraints.is_some())?;
    if !out.status.success() && constraints.is_some() {
        out = run(false)?;
    }
    if !out.status.success() {
        if let Some(setting) = index_failure(&out.stderr, &opts.pypi) {
            return Err(ClosureError::Index {
                layer: input.layer.clone(),
                message: String::from_utf8_lossy(&out.stderr).trim_end().to_string(),
                setting,
            });
        }
        return Err(ClosureError::Resolve {
            layer: input.layer.clone(),
            message: uv_message(&out.stderr),
        });
    }
    std::fs::read_to_string(dir.0.join(OUT_NAME))
        .map_err(|e| ClosureError::Other(format!("uv wrote no {OUT_NAME}: {e}")))
}

/// The file `uv pip compile` writes (`-o`, see [`compile_args`]).
const OUT_NAME: &str = "pylock.toml";

/// `uv pip compile pyproject.toml` in `dir`, without the environment's index settings.
fn uv_command(uv: &Uv, dir: &Path) -> Command {
    let mut cmd = Command::new(&uv.exe);
    cmd.current_dir(dir)
        .args(["pip", "compile", "pyproject.toml"])
        .env("UV_PYTHON_DOWNLOADS", "never")
        .env_remove("UV_INDEX_URL")
        .env_remove("UV_EXTRA_INDEX_URL")
        .env_remove("UV_INDEX")
        .env_remove("UV_DEFAULT_INDEX")
        .env_remove("UV_EXCLUDE_NEWER");
    cmd
}

/// When uv failed because an index did not answer (DNS, connect, TLS, timeout, a server
/// error): the `[resolve]` key that points that index elsewhere (`pypi` for PyPI and its
/// files, `indexes` for any other index).
fn index_failure(stderr: &[u8], pypi: &str) -> Option<&'static str> {
    const SIGNS: &[&str] = &[
        "Failed to fetch",
        "error sending request",
        "dns error",
        "failed to lookup address",
        "Connection refused",
        "tcp connect error",
        "Request failed after",
        "timed out",
        "invalid peer certificate",
        "HTTP status server error",
    ];
    let text = String::from_utf8_lossy(stderr);
    if !SIGNS.iter().any(|s| text.contains(s)) {
        return None;
    }
    let url = text
        .split('`')
        .find(|t| t.starts_with("http://") || t.starts_with("https://"))
        .unwrap_or("");
    let host = crate::resolve::http::host_of(url);
    let from_pypi = url.is_empty()
        || url.starts_with(pypi.trim_end_matches("/simple"))
        || host == "pypi.org"
        || host == "files.pythonhosted.org";
    Some(if from_pypi { "pypi" } else { "indexes" })
}

/// uv's own explanation, without the retries of an interpreter download.
fn uv_message(stderr: &[u8]) -> String {
    let msg = String::from_utf8_lossy(stderr);
    let message: Vec<&str> = msg
        .lines()
        .filter(|l| {
            !l.contains("managed Python download") && !l.trim_start().starts_with("Caused by")
        })
        .collect();
    message.join("\n")
}

/// Mirror URLs back to canonical, every file hashed, source builds split out.
fn postprocess(
    raw: &str,
    input: &LayerInput,
    platform: &str,
    opts: &Options<'_>,
) -> Result<(String, Vec<PyBuild>), ClosureError> {
    let mut text = raw.to_string();
    // What the lock names is where the files live, not the mirror that served them.
    let mut prefixes: Vec<(String, String)> = opts
        .mirrors
        .iter()
        .map(|(k, v)| {
            (
                v.trim_end_matches('/').to_string(),
                k.trim_end_matches('/').to_string(),
            )
        })
        .collect();
    if opts.pypi.trim_end_matches('/') != PYPI {
        let m = opts
            .pypi
            .trim_end_matches('/')
            .trim_end_matches("/simple")
            .to_string();
        prefixes.push((m, "https://pypi.org".into()));
    }
    prefixes.sort_by_key(|p| std::cmp::Reverse(p.0.len()));
    for (mirror, canonical) in &prefixes {
        text = text.replace(
            &format!("url = \"{mirror}/"),
            &format!("url = \"{canonical}/"),
        );
    }
    let mut blocks: Vec<&str> = text.split("\n[[packages]]\n").collect();
    let head = blocks.remove(0);
    let mut kept = vec![head.to_string()];
    let mut builds = Vec::new();
    #[derive(Deserialize)]
    struct H {
        sha256: Option<String>,
    }
    #[derive(Deserialize)]
    struct A {
        url: Option<String>,
        hashes: Option<H>,
    }
    #[derive(Deserialize)]
    struct P {
        name: String,
        version: Option<String>,
        sdist: Option<A>,
        #[serde(default)]
        wheels: Vec<A>,
    }
    for b in blocks {
        let p: P = toml::from_str(b).map_err(|e| {
            ClosureError::Other(format!("uv wrote an unreadable pylock entry: {e}"))
        })?;
        let files: Vec<&A> = p.sdist.iter().chain(p.wheels.iter()).collect();
        if files.is_empty()
            || files
                .iter()
                .any(|a| a.hashes.as_ref().and_then(|h| h.sha256.as_ref()).is_none())
        {
            return Err(ClosureError::Unhashed {
                layer: input.layer.clone(),
                package: p.name,
            });
        }
        if input
            .built
            .iter()
            .any(|n| normalize(n) == normalize(&p.name))
        {
            let Some(sdist) = p.sdist.as_ref() else {
                return Err(ClosureError::Disagrees {
                    layer: input.layer.clone(),
                    detail: format!(
                        "`{}` is built from source, but the index has no sdist of it",
                        p.name
                    ),
                });
            };
            builds.push(PyBuild {
                layer: input.layer.clone(),
                platform: platform.to_string(),
                name: p.name.clone(),
                version: p.version.unwrap_or_default(),
                url: sdist.url.clone().unwrap_or_default(),
                sha256: sdist
                    .hashes
                    .as_ref()
                    .and_then(|h| h.sha256.clone())
                    .unwrap_or_default(),
            });
            continue;
        }
        kept.push(b.to_string());
    }
    let mut out = kept.join("\n[[packages]]\n");
    if !out.ends_with('\n') {
        out.push('\n');
    }
    Ok((out, builds))
}

/// The closure's `nvidia-cudnn-*` and `nvidia-nccl-*` wheels must be the solver's cuDNN
/// and NCCL, and one NCCL major only.
fn check(lock: &Lock, layer: &str, pylock: &str) -> Result<(), ClosureError> {
    let pkgs = packages(pylock);
    let want = |c: Component| lock.component(c).map(|x| x.version.to_string());
    let mut nccl_majors: Vec<String> = Vec::new();
    for (name, version) in &pkgs {
        let n = normalize(name);
        let (comp, label) = if n.starts_with("nvidia-cudnn-cu") {
            (Component::Cudnn, "cuDNN")
        } else if n.starts_with("nvidia-nccl-cu") {
            nccl_majors.push(n.clone());
            (Component::Nccl, "NCCL")
        } else {
            continue;
        };
        if let Some(w) = want(comp) {
            if *version != w {
                return Err(ClosureError::Disagrees {
                    layer: layer.into(),
                    detail: format!("it installs {name} {version}, the lock's {label} is {w}"),
                });
            }
        }
    }
    if nccl_majors.len() > 1 {
        return Err(ClosureError::Disagrees {
            layer: layer.into(),
            detail: format!("it installs two NCCL builds: {}", nccl_majors.join(" and ")),
        });
    }
    Ok(())
}

/// A temporary directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    /// `$TMPDIR/gpustack-closure-XXXXXXXXXXXXXXXX`, private and created exclusively
    /// ([`crate::emit::create_temp_dir`]): a name planted in advance does not block
    /// `lock`, and nobody can plant files in it.
    fn new() -> Result<TempDir, ClosureError> {
        let base = std::env::temp_dir();
        crate::emit::create_temp_dir(&base, "gpustack-closure")
            .map(TempDir)
            .map_err(|e| {
                ClosureError::Other(format!(
                    "cannot create a directory under {}: {e}",
                    crate::emit::shown(&base)
                ))
            })
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Reads the pylock files a lock names from `dir` (the lock's directory), checking each
/// digest. Returns the files that are missing or differ: `(file, why)`.
pub fn load(python: &mut PythonLock, dir: &Path) -> Vec<(String, String)> {
    let mut bad = Vec::new();
    for f in &mut python.files {
        match std::fs::read_to_string(dir.join(&f.file)) {
            Ok(t) if digest(&t) == f.digest => f.contents = Some(t),
            Ok(t) => bad.push((
                f.file.clone(),
                format!(
                    "its sha256 is {}, the lock records {}",
                    digest(&t),
                    f.digest
                ),
            )),
            Err(e) => bad.push((f.file.clone(), format!("it cannot be read: {e}"))),
        }
    }
    bad
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvidia_wheels_must_agree_with_the_lock() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fixtures/closed/h100-ib-train-serve/gpustack.lock"
        ))
        .unwrap();
        let lock = Lock::parse("gpustack.lock", &text).unwrap();
        let entry = |n: &str, v: &str| {
            format!("\n[[packages]]\nname = \"{n}\"\nversion = \"{v}\"\nwheels = [{{ url = \"https://x/y.whl\", hashes = {{ sha256 = \"aa\" }} }}]\n")
        };
        let ok = format!(
            "lock-version = \"1.0\"\n{}{}",
            entry("nvidia-cudnn-cu12", "9.10.2.21"),
            entry("nvidia-nccl-cu12", "2.27.5")
        );
        assert!(check(&lock, "framework", &ok).is_ok());
        let cudnn = ok.replace("9.10.2.21", "9.11.0.98");
        let e = check(&lock, "framework", &cudnn).unwrap_err().to_string();
        assert!(
            e.contains("nvidia-cudnn-cu12 9.11.0.98, the lock's cuDNN is 9.10.2.21"),
            "{e}"
        );
        let two = format!("{ok}{}", entry("nvidia-nccl-cu13", "2.27.5"));
        let e = check(&lock, "framework", &two).unwrap_err().to_string();
        assert!(
            e.contains("two NCCL builds: nvidia-nccl-cu12 and nvidia-nccl-cu13"),
            "{e}"
        );
    }

    #[test]
    fn a_layer_with_deepspeed_locks_its_cuda_build_requirements_and_setuptools() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fixtures/closed/h100-ib-train-serve/gpustack.lock"
        ))
        .unwrap();
        let lock = Lock::parse("gpustack.lock", &text).unwrap();
        let ins = inputs(&lock);
        let of = |l: &str| ins.iter().find(|i| i.layer == l).unwrap();
        let training = &of("training").requirements;
        // Unconditional requirements (no marker): on every Python, not only where torch
        // declares setuptools (>= 3.12).
        assert!(training.iter().any(|r| r == "nvidia-ml-py"), "{training:?}");
        assert!(training.iter().any(|r| r == "setuptools"), "{training:?}");
        for l in ["framework", "inference"] {
            assert!(
                !of(l).requirements.iter().any(|r| r == "nvidia-ml-py"),
                "{l}"
            );
        }
    }

    #[test]
    fn platforms_come_from_glibc_and_cpus() {
        assert_eq!(
            platforms("2.35", &["x86_64".into()]),
            ["x86_64-manylinux_2_35"]
        );
        assert_eq!(
            platforms(
                "2.39",
                &["x86_64".into(), "aarch64".into(), "x86_64".into()]
            ),
            ["aarch64-manylinux_2_39", "x86_64-manylinux_2_39"]
        );
        assert_eq!(
            file_name("framework", "x86_64-manylinux_2_35", false),
            "pylock.framework.toml"
        );
        assert_eq!(
            file_name("training", "aarch64-manylinux_2_39", true),
            "pylock.training.aarch64.toml"
        );
    }

    #[test]
    fn postprocess_rewrites_mirrors_and_splits_source_builds() {
        let raw = "lock-version = \"1.0\"\ncreated-by = \"uv\"\nrequires-python = \">=3.12\"\n\n[[packages]]\nname = \"deepspeed\"\nversion = \"0.19.8\"\nsdist = { url = \"https://files.pythonhosted.org/d.tar.gz\", hashes = { sha256 = \"aa\" } }\n\n[[packages]]\nname = \"torch\"\nversion = \"2.10.0+cu128\"\nwheels = [{ url = \"http://127.0.0.1:9/whl/cu128/torch.whl\", hashes = { sha256 = \"bb\" } }]\n";
        let input = LayerInput {
            layer: "training".into(),
            requirements: vec![],
            sources: BTreeMap::new(),
            constrained: true,
            built: vec!["deepspeed".into()],
        };
        let opts = Options {
            uv: None,
            uv_version: "0.11.7".into(),
            exclude_newer: "2026-11-25T00:00:00Z".into(),
            platforms: vec![],
            pypi: PYPI.into(),
            mirrors: [(
                "https://download.pytorch.org/whl".to_string(),
                "http://127.0.0.1:9/whl".to_string(),
            )]
            .into(),
            previous: None,
            upgrade: false,
            upgrade_packages: Vec::new(),
        };
        let (text, builds) = postprocess(raw, &input, "x86_64-manylinux_2_35", &opts).unwrap();
        assert!(
            text.contains("https://download.pytorch.org/whl/cu128/torch.whl"),
            "{text}"
        );
        assert!(!text.contains("deepspeed"), "{text}");
        assert_eq!(builds.len(), 1);
        assert_eq!(builds[0].sha256, "aa");
        let unhashed = raw.replace(", hashes = { sha256 = \"bb\" }", "");
        assert!(matches!(
            postprocess(&unhashed, &input, "x", &opts),
            Err(ClosureError::Unhashed { .. })
        ));
    }
}
