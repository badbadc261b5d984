//! A torch source build, decided once for every target that builds it: the Dockerfile's
//! `torch-build` stage and the Apptainer definition run the same `build-torch.sh`, and
//! Packer runs it on the VM. Derived from the lock's torch component (`build = "source"`).
//!
//! Every variable the script exports comes from
//! [`crate::catalog::torch_build_env::ALLOWED`] (PyTorch's documented build variables, each
//! with its source): [`TorchBuildPlan::new`] refuses any other, so a typo cannot reach a
//! build as a silently ignored variable.

use serde::Serialize;

use crate::catalog::torch_build_env;
use crate::core::Component;
use crate::error::{Diagnostic, Error, Stage};
use crate::lock::Lock;

/// The nvcc flags of every source build: compress the fatbinary (NVIDIA's `-Xfatbin`
/// passes `-compress-all` to `fatbinary`), as PyTorch's own release builds set
/// `TORCH_NVCC_FLAGS`.
pub const NVCC_FLAGS: &str = "-Xfatbin -compress-all";

/// The file every target runs.
pub const SCRIPT: &str = "build-torch.sh";

/// LOAD-BEARING: `generators/docker/build-torch.sh.j2` and the Dockerfile's `torch-build`
/// stage print these fields.
#[derive(Clone, Debug, Serialize)]
pub struct TorchBuildPlan {
    /// The version the wheel gets (`PYTORCH_BUILD_VERSION`): the lock's `2.10.0+cu128`.
    pub version: String,
    /// `https://github.com/pytorch/pytorch`.
    pub repository: String,
    /// `v2.10.0`.
    pub tag: String,
    /// The commit the tag must point to, when the lock records it.
    pub commit: Option<String>,
    /// The source archive with submodules and its sha256, when the lock records them: the
    /// script downloads it and checks the digest instead of cloning the tag.
    pub archive: Option<TorchSourceArchive>,
    /// A wheel of this build the user already has (`prebuilt` in the spec): every target
    /// downloads and checks it instead of building ([`TorchBuildPlan::builds_here`]).
    pub prebuilt: Option<PrebuiltWheelPlan>,
    /// The GCC major the lock decided the build compiles with (`11`); the script stops on
    /// another before building.
    pub gcc_major: Option<String>,
    /// `TORCH_CUDA_ARCH_LIST`: `8.0`.
    pub arch_list: String,
    /// The build's fixed environment, sorted by name (every name documented).
    pub env: Vec<(String, String)>,
    /// The build requirements (PEP 508), installed before the build.
    pub build_requires: Vec<String>,
    /// What the wheel requires at run time (PEP 508), installed beside it.
    pub runtime_requires: Vec<String>,
    /// The cuDNN wheel the build compiles against and the runtime loads
    /// (`nvidia-cudnn-cu12==9.28.0.42`).
    pub cudnn_wheel: String,
    /// The cuDNN wheel's directory relative to the venv's site-packages (`nvidia/cudnn`).
    pub cudnn_subdir: String,
    /// The cuDNN wheel's library directory relative to the venv
    /// (`lib/python3.11/site-packages/nvidia/cudnn/lib`), for `LD_LIBRARY_PATH`.
    pub cudnn_lib_in_venv: String,
}

/// A source archive the script downloads and checks with `sha256sum -c`.
#[derive(Clone, Debug, Serialize)]
pub struct TorchSourceArchive {
    /// `https://github.com/pytorch/pytorch/releases/download/v2.10.0/pytorch-v2.10.0.tar.gz`.
    pub url: String,
    /// 64 lowercase hex digits.
    pub sha256: String,
}

/// A previously built wheel: where it is, its sha256 and its file name.
#[derive(Clone, Debug, Serialize)]
pub struct PrebuiltWheelPlan {
    /// `https://cache.example.org/torch-2.10.0+cu128-cp311-cp311-linux_x86_64.whl`.
    pub url: String,
    /// 64 lowercase hex digits.
    pub sha256: String,
    /// `torch-2.10.0+cu128-cp311-cp311-linux_x86_64.whl`.
    pub file: String,
}

/// The spec's `prebuilt` wheel, which must be the locked version's.
fn prebuilt(lock: &Lock, version: &str) -> Result<Option<PrebuiltWheelPlan>, Error> {
    let Some(w) = lock
        .request
        .torch_source
        .as_ref()
        .and_then(|t| t.prebuilt.as_ref())
    else {
        return Ok(None);
    };
    let file = w.file_name();
    if !file.starts_with(&format!("torch-{version}-")) {
        return Err(bad(
            format!("the prebuilt wheel `{file}` is not torch {version}, the version this lock builds"),
            "name the wheel built from this lock (its file name starts with `torch-VERSION-`), or remove `prebuilt`",
        ));
    }
    Ok(Some(PrebuiltWheelPlan {
        url: w.url.clone(),
        sha256: w.sha256.clone(),
        file,
    }))
}

fn lower_hex(s: &str, len: usize) -> bool {
    s.len() == len
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The lock's source pins, checked again here because the script runs them: a commit of 40
/// and a sha256 of 64 lowercase hex digits, an `https://` URL without shell syntax.
fn source_pins(
    src: &super::locked::TorchSource,
) -> Result<(Option<String>, Option<TorchSourceArchive>), Error> {
    let rejected = |k: &str, v: &str| {
        bad(
            format!("the lock's torch `{k}` `{}` is malformed", v.escape_debug()),
            "re-lock with `gpustack lock`",
        )
    };
    if let Some(c) = src.commit.as_deref().filter(|c| !lower_hex(c, 40)) {
        return Err(rejected("source-commit", c));
    }
    let archive = match (&src.archive, &src.archive_sha256) {
        (None, None) => None,
        (Some(url), Some(sha256)) => {
            let plain = url.strip_prefix("https://").is_some_and(|r| {
                !r.is_empty()
                    && r.bytes().all(|b| {
                        b.is_ascii_alphanumeric() || matches!(b, b'/' | b'.' | b'-' | b'_' | b'+')
                    })
            });
            if !plain {
                return Err(rejected("source-archive", url));
            }
            if !lower_hex(sha256, 64) {
                return Err(rejected("source-archive-sha256", sha256));
            }
            Some(TorchSourceArchive {
                url: url.clone(),
                sha256: sha256.clone(),
            })
        }
        (Some(_), None) | (None, Some(_)) => {
            return Err(bad(
                "the lock's torch records one of `source-archive` and `source-archive-sha256` without the other".into(),
                "re-lock with `gpustack lock`",
            ))
        }
    };
    Ok((src.commit.clone(), archive))
}

fn bad(msg: String, hint: &str) -> Error {
    Diagnostic::new(Stage::Generate, msg).hint(hint).into()
}

impl TorchBuildPlan {
    /// Whether a target compiles torch itself: not when the spec names a `prebuilt` wheel of
    /// this build, which every target downloads and checks by its sha256 instead (Docker's
    /// `torch-build` stage with `ADD --checksum`, Packer's `framework.sh` with `sha256sum -c`).
    pub fn builds_here(&self) -> bool {
        self.prebuilt.is_none()
    }

    /// `build-torch.sh`, the same bytes for every target.
    pub fn script(&self) -> Result<String, Error> {
        #[derive(Serialize)]
        struct Ctx<'a> {
            plan: &'a TorchBuildPlan,
        }
        crate::render::render("docker/build-torch.sh.j2", &Ctx { plan: self })
    }

    /// The plan of the lock's torch source build; `None` for a wheel.
    pub fn new(lock: &Lock) -> Result<Option<TorchBuildPlan>, Error> {
        let (Some(t), Some(src)) = (
            lock.component(Component::Torch),
            super::locked::torch_source(lock),
        ) else {
            return Ok(None);
        };
        let field = |k: &str, v: &Option<String>| {
            v.clone().ok_or_else(|| {
                bad(
                    format!("the lock's torch source build has no `{k}`"),
                    "re-lock with `gpustack lock` to record it",
                )
            })
        };
        let (commit, archive) = source_pins(&src)?;
        let prebuilt = prebuilt(lock, &t.version.to_string())?;
        let gcc_major = match src.host_gcc.as_deref() {
            None => None,
            Some(g) => match g
                .split('.')
                .next()
                .filter(|m| !m.is_empty() && m.bytes().all(|b| b.is_ascii_digit()))
            {
                Some(m) => Some(m.to_string()),
                None => {
                    return Err(bad(
                        format!(
                            "the lock's torch `host-gcc` `{}` is malformed",
                            g.escape_debug()
                        ),
                        "re-lock with `gpustack lock`",
                    ))
                }
            },
        };
        let arch_list = src.arch_list.join(";");
        let cudnn = lock.component(Component::Cudnn).ok_or_else(|| {
            bad(
                "a torch source build needs the lock's cuDNN".into(),
                "add `cudnn = \"*\"` to [components] and re-lock",
            )
        })?;
        let cuda_major = src
            .cuda
            .as_deref()
            .and_then(|c| c.split('.').next())
            .unwrap_or_default()
            .to_string();
        let mut env: Vec<(String, String)> = vec![
            ("BUILD_TEST".into(), "0".into()),
            ("CMAKE_CUDA_COMPILER_LAUNCHER".into(), "ccache".into()),
            ("CMAKE_CXX_COMPILER_LAUNCHER".into(), "ccache".into()),
            ("CMAKE_C_COMPILER_LAUNCHER".into(), "ccache".into()),
            ("PYTORCH_BUILD_NUMBER".into(), "0".into()),
            ("PYTORCH_BUILD_VERSION".into(), t.version.to_string()),
            ("TORCH_CUDA_ARCH_LIST".into(), arch_list.clone()),
            ("TORCH_NVCC_FLAGS".into(), NVCC_FLAGS.into()),
            ("USE_CUDA".into(), "1".into()),
            ("USE_CUDNN".into(), "1".into()),
            ("USE_SYSTEM_NCCL".into(), "1".into()),
        ];
        env.sort();
        for (k, _) in &env {
            if torch_build_env::documented(k).is_none() {
                return Err(bad(
                    format!("`{k}` is not a documented PyTorch build variable"),
                    "add it with its source to src/catalog/torch_build_env.rs, or do not set it",
                ));
            }
        }
        let python = lock
            .component(Component::Python)
            .map(|p| format!("{}.{}", p.version.major(), p.version.minor()))
            .ok_or_else(|| {
                bad(
                    "a torch source build needs the lock's Python".into(),
                    "re-lock with `gpustack lock`",
                )
            })?;
        Ok(Some(TorchBuildPlan {
            cudnn_lib_in_venv: format!("lib/python{python}/site-packages/nvidia/cudnn/lib"),
            version: t.version.to_string(),
            repository: field("source-repository", &src.repository)?,
            tag: field("source-tag", &src.tag)?,
            commit,
            archive,
            prebuilt,
            gcc_major,
            arch_list,
            env,
            build_requires: src.build_requires,
            runtime_requires: src.runtime_requires,
            cudnn_wheel: format!("nvidia-cudnn-cu{cuda_major}=={}", cudnn.version),
            cudnn_subdir: "nvidia/cudnn".into(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::locked::TorchSource;

    fn src(commit: Option<&str>, archive: Option<(&str, &str)>) -> TorchSource {
        TorchSource {
            repository: Some("https://github.com/pytorch/pytorch".into()),
            tag: Some("v2.10.0".into()),
            commit: commit.map(str::to_string),
            archive: archive.map(|a| a.0.to_string()),
            archive_sha256: archive.map(|a| a.1.to_string()),
            host_gcc: None,
            cuda: Some("12.8".into()),
            arch_list: vec!["8.0".into()],
            build_requires: Vec::new(),
            runtime_requires: Vec::new(),
        }
    }

    fn plan(commit: Option<String>, archive: Option<TorchSourceArchive>) -> TorchBuildPlan {
        TorchBuildPlan {
            version: "2.10.0+cu128".into(),
            repository: "https://github.com/pytorch/pytorch".into(),
            tag: "v2.10.0".into(),
            commit,
            archive,
            prebuilt: None,
            gcc_major: None,
            arch_list: "8.0".into(),
            env: Vec::new(),
            build_requires: Vec::new(),
            runtime_requires: Vec::new(),
            cudnn_wheel: "nvidia-cudnn-cu12==9.28.0.42".into(),
            cudnn_subdir: "nvidia/cudnn".into(),
            cudnn_lib_in_venv: "lib/python3.11/site-packages/nvidia/cudnn/lib".into(),
        }
    }

    const SHA: &str = "fa8ccbe87f83f48735505371c1c313b4aa6db400b0ae4f8a02844d1e150c695f";
    const COMMIT: &str = "449b1768410104d3ed79d3bcfe4ba1d65c7f22c0";
    const URL: &str =
        "https://github.com/pytorch/pytorch/releases/download/v2.10.0/pytorch-v2.10.0.tar.gz";

    #[test]
    fn an_archive_is_checked_by_sha256_and_without_one_the_clone_by_commit() {
        let (c, a) = source_pins(&src(Some(COMMIT), Some((URL, SHA)))).unwrap();
        let with_archive = plan(c, a).script().unwrap();
        assert!(with_archive.contains(&format!(
            "printf '%s  %s\\n' {SHA} \"${{archive}}\" | sha256sum -c -"
        )));
        assert!(!with_archive.contains("git clone"));
        let (c, a) = source_pins(&src(Some(COMMIT), None)).unwrap();
        let cloned = plan(c, a).script().unwrap();
        assert!(cloned.contains("git clone --depth 1 --branch v2.10.0"));
        assert!(cloned.contains(&format!("rev-parse HEAD)\" = {COMMIT}")));
        assert!(!cloned.contains("sha256sum"));
    }

    #[test]
    fn malformed_pins_are_refused() {
        for s in [
            src(Some("449B1768410104d3ed79d3bcfe4ba1d65c7f22c0"), None),
            src(None, Some((URL, "abc"))),
            src(None, Some(("https://x/$(id).tgz", SHA))),
            src(None, Some(("http://x/a.tgz", SHA))),
        ] {
            assert!(source_pins(&s).is_err(), "{s:?}");
        }
        let mut half = src(None, Some((URL, SHA)));
        half.archive_sha256 = None;
        assert!(source_pins(&half).is_err());
    }
}
