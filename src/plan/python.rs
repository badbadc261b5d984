//! How every target installs Python, decided once from the lock's closure
//! ([`crate::lock::PythonLock`]): which pylock file each layer installs, which packages
//! the build stage compiles from which locked sdist, and which built wheels a layer adds.
//!
//! Docker, Apptainer and Packer render these values; none of them names a package
//! version or an index. A lock without a closure ("open") has no [`PythonInstall`], and
//! the targets fall back to requirement files that resolve at build time, saying so.

use serde::Serialize;

use crate::error::{Diagnostic, Error, Stage};
use crate::lock::Lock;

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

/// One layer's install.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LayerInstall {
    /// `framework`, `inference`, `training`, `build`.
    pub layer: String,
    /// The pylock file it installs: `pylock.framework.toml`.
    pub file: String,
    /// Its text (copied into each target's output).
    pub contents: String,
    /// How many packages it pins.
    pub packages: u32,
    /// Wheels built in the build stage that this layer installs (`--no-deps`, from
    /// `/wheels`), as wheel file name prefixes (`deepspeed-0.19.8`): their requirements
    /// are in the pylock already.
    pub built: Vec<String>,
}

/// The Python install plan of a closed lock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PythonInstall {
    /// The platform the files are for: `x86_64-manylinux_2_35`.
    pub platform: String,
    /// Per layer, framework first; `build` last when something is compiled.
    pub layers: Vec<LayerInstall>,
    /// What the build stage compiles.
    pub sdists: Vec<Sdist>,
    /// The resolver, one word for the files' comments: `uv-0.11.7`.
    pub resolver: String,
}

impl PythonInstall {
    /// The install plan, or `None` for an open lock.
    ///
    /// # Errors
    ///
    /// When the lock names pylock files whose contents were not loaded.
    pub fn new(lock: &Lock) -> Result<Option<PythonInstall>, Error> {
        let Some(p) = &lock.python else {
            return Ok(None);
        };
        // One platform per image: the first (x86_64 sorts after aarch64, so prefer it
        // when both are locked; aarch64-only stacks get theirs).
        let platform = p
            .files
            .iter()
            .map(|f| f.platform.as_str())
            .find(|x| x.starts_with("x86_64"))
            .or_else(|| p.files.first().map(|f| f.platform.as_str()))
            .unwrap_or_default()
            .to_string();
        let mut layers = Vec::new();
        for f in p.files.iter().filter(|f| f.platform == platform) {
            let Some(contents) = &f.contents else {
                return Err(Diagnostic::new(
                    Stage::Generate,
                    format!("the lock names `{}`, but its contents were not read", f.file),
                )
                .hint("read the lock with its pylock files (the CLI does; a library caller uses `gpustack::resolve::python::load`)")
                .into());
            };
            layers.push(LayerInstall {
                layer: f.layer.clone(),
                file: f.file.clone(),
                contents: contents.clone(),
                packages: f.packages,
                built: p
                    .builds
                    .iter()
                    .filter(|b| b.layer == f.layer && b.platform == platform && f.layer != "build")
                    // The wheel's file name prefix (PEP 427: `-` in the name becomes `_`).
                    .map(|b| format!("{}-{}", b.name.replace('-', "_"), b.version))
                    .collect(),
            });
        }
        let mut sdists: Vec<Sdist> = p
            .builds
            .iter()
            .filter(|b| b.platform == platform && b.layer == "build")
            .map(|b| Sdist {
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
            })
            .collect();
        sdists.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Some(PythonInstall {
            platform,
            layers,
            sdists,
            resolver: p.resolver.replace(' ', "-"),
        }))
    }

    /// A layer's install, when the closure has that layer.
    pub fn layer(&self, name: &str) -> Option<&LayerInstall> {
        self.layers.iter().find(|l| l.layer == name)
    }
}
