//! Python packages the image build compiles from source, and the switches each build takes.
//!
//! Decided here, once, below both readers: the Python closure (`crate::resolve::python`)
//! splits these packages out of the pylocks, locks their sdists and the requirements their
//! CUDA build adds, and the plans (`crate::plan`) compile them in the `build` stage (and on
//! the Packer VM) with [`compile_env`].

/// Whether the build stage compiles this Python package from source.
pub(crate) fn is_compiled(name: &str) -> bool {
    compile_env(name).is_some()
}

/// The build environment of a package compiled against torch in the `build` stage, or
/// `None` when it installs from a wheel. The plans add what depends on the lock (the arch
/// list, ccache).
pub(crate) fn compile_env(name: &str) -> Option<Vec<(&'static str, &'static str)>> {
    match name {
        // DeepSpeed compiles its ops just in time by default, which needs nvcc in the
        // runtime image; pre-building the common ones avoids that.
        //
        // DS_ACCELERATOR=cuda: a `docker build` step (and a Packer VM without its GPU) has
        // no device, and DeepSpeed's accelerator detection then falls back to its CPU
        // accelerator: the wheel is stamped `accelerator_name='cpu'`, its CUDA ops are not
        // built and its CUDA requirements are left out (`accelerator/real_accelerator.py`
        // `get_accelerator()`: "DS_ACCELERATOR" overrides, else `cuda` only when
        // `torch.cuda.device_count() > 0 and torch.cuda.is_available()`, else "cpu" as
        // catch-all; `setup.py` writes `accelerator_name` into
        // `deepspeed/git_version_info_installed.py`). Read in the sdist of DeepSpeed 0.19.8,
        // https://files.pythonhosted.org/packages/bc/d8/3162fc810870df1183e686ec70b57028b464a5940b148a90767c727f113c/deepspeed-0.19.8.tar.gz
        // (sha256 9e491abd0827ea5c389dd702e15e11e13d83d904bac4a20d6c2a4cb37207a9af).
        "deepspeed" => Some(vec![
            ("DS_ACCELERATOR", "cuda"),
            ("DS_BUILD_CPU_ADAM", "1"),
            ("DS_BUILD_FUSED_ADAM", "1"),
            ("DS_BUILD_UTILS", "1"),
        ]),
        // flash-attn falls back to compiling when no prebuilt wheel matches; force it so
        // the result does not depend on which wheels a release happens to carry.
        "flash-attn" => Some(vec![("FLASH_ATTENTION_FORCE_BUILD", "TRUE")]),
        _ => None,
    }
}

/// What the wheel built with [`compile_env`] requires beyond its sdist's metadata: the
/// sdist's `PKG-INFO` was written by a build without a GPU, so the closure (resolved from
/// that metadata) would miss them, and the image installs the built wheel `--no-deps`.
/// They are locked into the closure of the layer that installs the wheel.
pub(crate) fn cuda_build_requires(name: &str) -> &'static [&'static str] {
    match name {
        // DeepSpeed's setup.py: `if torch_available and get_accelerator().device_name() ==
        // 'cuda' and not is_rocm_pytorch: install_requires.append('nvidia-ml-py')` ("Only
        // install pynvml on nvidia gpus"); its PKG-INFO's Requires-Dist has no
        // nvidia-ml-py. Read in the sdist of 0.19.8 (the URL and sha256 above).
        "deepspeed" => &["nvidia-ml-py"],
        _ => &[],
    }
}

/// Whether the package loads torch C++/CUDA extensions at run time (prebuilt ops through
/// `torch.utils.cpp_extension`, or just-in-time builds of the others). That module imports
/// `setuptools`, which torch declares only for Python 3.12 and newer (`setuptools;
/// python_version >= "3.12"` in torch's Requires-Dist) and `uv venv` does not seed: the
/// layer that installs such a package carries setuptools in its closure on every Python.
pub(crate) fn loads_torch_extensions(name: &str) -> bool {
    matches!(name, "deepspeed")
}

/// What a layer that installs `name` adds to its closure for it at run time.
pub(crate) fn runtime_requires(name: &str) -> Vec<&'static str> {
    let mut v = cuda_build_requires(name).to_vec();
    if loads_torch_extensions(name) {
        v.push("setuptools");
    }
    v
}
