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

fn bad(msg: String, hint: &str) -> Error {
    Diagnostic::new(Stage::Generate, msg).hint(hint).into()
}

impl TorchBuildPlan {
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
            commit: src.commit,
            arch_list,
            env,
            build_requires: src.build_requires,
            runtime_requires: src.runtime_requires,
            cudnn_wheel: format!("nvidia-cudnn-cu{cuda_major}=={}", cudnn.version),
            cudnn_subdir: "nvidia/cudnn".into(),
        }))
    }
}
