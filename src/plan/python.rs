//! How every target installs Python, decided once from the lock's closure
//! ([`crate::lock::PythonLock`]): which pylock file each layer installs, which packages
//! the build stage compiles from which locked sdist, and which built wheels a layer adds.
//!
//! Docker, Apptainer and Packer render these values; none of them names a package
//! version or an index. A lock without a closure ("open") has no [`PythonInstall`], and
//! the targets fall back to requirement files that resolve at build time, saying so.

use serde::Serialize;

use crate::error::{Diagnostic, Error, Stage};
use crate::lock::{Lock, PythonLock};

/// A source distribution the build stage compiles.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Sdist {
    /// `deepspeed`.
    pub name: String,
    /// `0.19.8`.
    pub version: String,
    /// Where it is downloaded from.
    pub url: String,
    /// Its sha256 (hex), checked on download.
    pub sha256: String,
    /// The local file name: `deepspeed-0.19.8.tar.gz`.
    pub file: String,
}

/// A platform the closure is locked for, named as each target's tools name it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Platform {
    /// The lock's: `x86_64-manylinux_2_35`.
    pub manylinux: String,
    /// The CPU as `uname -m` prints it on a host or VM: `x86_64`, `aarch64`.
    pub machine: String,
    /// The OCI architecture, BuildKit's `TARGETARCH`: `amd64`, `arm64`.
    pub oci_arch: String,
    /// The OCI platform `docker buildx build --platform` takes: `linux/amd64`.
    pub oci_platform: String,
}

impl Platform {
    /// The platform of a lock's `x86_64-manylinux_2_35`; `None` for a CPU without an OCI
    /// architecture name here.
    fn of(manylinux: &str) -> Option<Platform> {
        let machine = manylinux.split('-').next().unwrap_or(manylinux);
        // The OCI image index's `architecture` values (Go's GOARCH) for the two CPUs the
        // catalog's hosts have: https://github.com/opencontainers/image-spec/blob/v1.1.0/image-index.md
        let oci_arch = match machine {
            "x86_64" => "amd64",
            "aarch64" => "arm64",
            _ => return None,
        };
        Some(Platform {
            manylinux: manylinux.to_string(),
            machine: machine.to_string(),
            oci_arch: oci_arch.to_string(),
            oci_platform: format!("linux/{oci_arch}"),
        })
    }
}

/// One platform's pylock of a layer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PlatformFile {
    /// `x86_64` (`uname -m`).
    pub machine: String,
    /// `amd64` (BuildKit's `TARGETARCH`).
    pub oci_arch: String,
    /// The lock's file: `pylock.framework.toml`, or `pylock.framework.x86_64.toml` when the
    /// lock has several platforms.
    pub file: String,
    /// Its text (copied into each target's output).
    pub contents: String,
    /// How many packages it pins.
    pub packages: u32,
}

/// One layer's install.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LayerInstall {
    /// `framework`, `inference`, `training`, `build`.
    pub layer: String,
    /// The file a build installs, whatever its platform: the lock's file when it has one
    /// platform (`pylock.framework.toml`); with several, each build first puts its own
    /// platform's file under this name (`pylock.<layer>.toml`, PEP 751's file name).
    pub file: String,
    /// The lock's pylock per platform, in the order of [`PythonInstall::platforms`]: one
    /// for a single-platform lock.
    pub files: Vec<PlatformFile>,
    /// Wheels built in the build stage that this layer installs (`--no-deps`, from
    /// `/wheels`), as wheel file name prefixes (`deepspeed-0.19.8`): their requirements
    /// are in the pylock already. The same on every platform.
    pub built: Vec<String>,
}

/// The Python install plan of a closed lock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PythonInstall {
    /// The platforms the files are for, in the lock's order (`aarch64` before `x86_64`).
    pub platforms: Vec<Platform>,
    /// Whether there are several: then every build picks its platform's pylock (Docker by
    /// BuildKit's `TARGETARCH`, Packer by the VM's `uname -m`), and the images are built
    /// for every platform.
    pub per_platform: bool,
    /// Per layer, framework first; `build` last when something is compiled.
    pub layers: Vec<LayerInstall>,
    /// What the build stage compiles (the same source distributions on every platform).
    pub sdists: Vec<Sdist>,
    /// The resolver, one word for the files' comments: `uv-0.11.7`.
    pub resolver: String,
}

fn generate_error(msg: String, hint: &str) -> Error {
    Diagnostic::new(Stage::Generate, msg).hint(hint).into()
}

/// The platforms of the lock's files, in the lock's order.
fn platforms_of(p: &PythonLock) -> Result<Vec<Platform>, Error> {
    let mut names: Vec<&str> = Vec::new();
    for f in &p.files {
        if !names.contains(&f.platform.as_str()) {
            names.push(&f.platform);
        }
    }
    names
        .into_iter()
        .map(|n| {
            Platform::of(n).ok_or_else(|| {
                generate_error(
                    format!("the lock's Python closure is for `{n}`, a CPU without an OCI architecture name in gpustack (it knows x86_64 and aarch64)"),
                    "lock for x86_64 or aarch64 hosts",
                )
            })
        })
        .collect()
}

/// The wheel file name prefixes (PEP 427: `-` in the name becomes `_`) a layer installs
/// from the build stage on one platform.
fn built_of(p: &PythonLock, layer: &str, platform: &str) -> Vec<String> {
    p.builds
        .iter()
        .filter(|b| b.layer == layer && b.platform == platform && layer != "build")
        .map(|b| format!("{}-{}", b.name.replace('-', "_"), b.version))
        .collect()
}

/// One layer's install over every platform: its files, and what it installs from the build
/// stage, which must be the same on each (one build stage serves them all).
fn layer_install(
    p: &PythonLock,
    layer: &str,
    platforms: &[Platform],
) -> Result<LayerInstall, Error> {
    let mut files = Vec::new();
    let mut built: Option<Vec<String>> = None;
    for pl in platforms {
        let Some(f) = p
            .files
            .iter()
            .find(|f| f.layer == layer && f.platform == pl.manylinux)
        else {
            return Err(generate_error(
                format!(
                    "the lock's Python closure has no `{layer}` pylock for `{}`",
                    pl.manylinux
                ),
                "re-lock with `gpustack lock`: every layer is locked for every platform",
            ));
        };
        let Some(contents) = &f.contents else {
            return Err(generate_error(
                format!("the lock names `{}`, but its contents were not read", f.file),
                "read the lock with its pylock files (the CLI does; a library caller uses `gpustack::resolve::python::load`)",
            ));
        };
        let b = built_of(p, layer, &pl.manylinux);
        if built.as_ref().is_some_and(|x| *x != b) {
            return Err(generate_error(
                format!("layer `{layer}` installs different compiled packages per platform"),
                "gpustack builds one `build` stage for every platform; lock the same source builds for each",
            ));
        }
        built = Some(b);
        files.push(PlatformFile {
            machine: pl.machine.clone(),
            oci_arch: pl.oci_arch.clone(),
            file: f.file.clone(),
            contents: contents.clone(),
            packages: f.packages,
        });
    }
    let file = if platforms.len() == 1 {
        files[0].file.clone()
    } else {
        format!("pylock.{layer}.toml")
    };
    Ok(LayerInstall {
        layer: layer.to_string(),
        file,
        files,
        built: built.unwrap_or_default(),
    })
}

/// The source distributions the build stage compiles: the same on every platform (an sdist
/// is not platform-specific), listed once.
fn sdists_of(p: &PythonLock) -> Result<Vec<Sdist>, Error> {
    let mut sdists: Vec<Sdist> = Vec::new();
    for b in p.builds.iter().filter(|b| b.layer == "build") {
        let d = Sdist {
            name: b.name.clone(),
            version: b.version.clone(),
            url: b.url.clone(),
            sha256: b.sha256.clone(),
            file: b
                .url
                .rsplit('/')
                .next()
                .filter(|f| {
                    !f.is_empty()
                        && f.bytes()
                            .all(|c| c.is_ascii_alphanumeric() || b"._-+".contains(&c))
                })
                .map_or_else(
                    || format!("{}-{}.tar.gz", b.name, b.version),
                    str::to_string,
                ),
        };
        match sdists.iter().find(|x| x.name == d.name) {
            Some(x) if *x == d => {}
            Some(_) => {
                return Err(generate_error(
                    format!("the lock compiles `{}` from different source distributions per platform", d.name),
                    "gpustack builds one `build` stage for every platform; re-lock with `gpustack lock`",
                ))
            }
            None => sdists.push(d),
        }
    }
    sdists.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(sdists)
}

impl PythonInstall {
    /// The install plan, or `None` for an open lock.
    ///
    /// # Errors
    ///
    /// When the lock names pylock files whose contents were not loaded, a layer misses a
    /// platform's file, or the platforms disagree on what the build stage compiles.
    pub fn new(lock: &Lock) -> Result<Option<PythonInstall>, Error> {
        let Some(p) = &lock.python else {
            return Ok(None);
        };
        let platforms = platforms_of(p)?;
        let mut names: Vec<&str> = Vec::new();
        for f in &p.files {
            if !names.contains(&f.layer.as_str()) {
                names.push(&f.layer);
            }
        }
        let layers = names
            .into_iter()
            .map(|l| layer_install(p, l, &platforms))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(PythonInstall {
            per_platform: platforms.len() > 1,
            platforms,
            layers,
            sdists: sdists_of(p)?,
            resolver: p.resolver.replace(' ', "-"),
        }))
    }

    /// The OCI platforms the images are built for: `linux/amd64`, `linux/arm64`.
    pub fn oci_platforms(&self) -> Vec<String> {
        self.platforms
            .iter()
            .map(|p| p.oci_platform.clone())
            .collect()
    }

    /// A layer's install, when the closure has that layer.
    pub fn layer(&self, name: &str) -> Option<&LayerInstall> {
        self.layers.iter().find(|l| l.layer == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed two-platform lock (x86_64 H100 + aarch64 GH200), its pylocks read.
    fn mixed() -> Lock {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/closed/h100-gh200-mixed");
        let text = std::fs::read_to_string(dir.join("gpustack.lock")).unwrap();
        let mut lock = Lock::parse("gpustack.lock", &text).unwrap();
        let bad = crate::resolve::python::load(lock.python.as_mut().unwrap(), &dir);
        assert!(bad.is_empty(), "{bad:?}");
        lock
    }

    #[test]
    fn each_platform_is_mapped_to_its_own_file_once() {
        let pi = PythonInstall::new(&mixed()).unwrap().unwrap();
        assert!(pi.per_platform);
        assert_eq!(pi.oci_platforms(), ["linux/arm64", "linux/amd64"]);
        let fw = pi.layer("framework").unwrap();
        assert_eq!(fw.file, "pylock.framework.toml");
        let picks: Vec<(&str, &str, &str)> = fw
            .files
            .iter()
            .map(|f| (f.machine.as_str(), f.oci_arch.as_str(), f.file.as_str()))
            .collect();
        assert_eq!(
            picks,
            [
                ("aarch64", "arm64", "pylock.framework.aarch64.toml"),
                ("x86_64", "amd64", "pylock.framework.x86_64.toml"),
            ]
        );
        let layers: Vec<&str> = pi.layers.iter().map(|l| l.layer.as_str()).collect();
        assert_eq!(layers, ["framework", "training", "build"]);
        assert_eq!(pi.layer("training").unwrap().built, ["deepspeed-0.19.8"]);
        // The sdist is listed once, though the lock records it per platform.
        assert_eq!(pi.sdists.len(), 1);
    }

    #[test]
    fn a_layer_missing_a_platform_or_building_differently_is_refused() {
        let mut lock = mixed();
        let py = lock.python.as_mut().unwrap();
        py.files
            .retain(|f| !(f.layer == "training" && f.platform.starts_with("aarch64")));
        let e = PythonInstall::new(&lock).unwrap_err().to_string();
        assert!(
            e.contains("has no `training` pylock for `aarch64-manylinux_2_39`"),
            "{e}"
        );

        let mut lock = mixed();
        let py = lock.python.as_mut().unwrap();
        py.builds
            .retain(|b| !(b.layer == "training" && b.platform.starts_with("x86_64")));
        let e = PythonInstall::new(&lock).unwrap_err().to_string();
        assert!(
            e.contains("layer `training` installs different compiled packages per platform"),
            "{e}"
        );

        let mut lock = mixed();
        for f in &mut lock.python.as_mut().unwrap().files {
            f.platform = f.platform.replace("aarch64", "riscv64");
        }
        let e = PythonInstall::new(&lock).unwrap_err().to_string();
        assert!(e.contains("`riscv64-manylinux_2_39`"), "{e}");
    }
}
