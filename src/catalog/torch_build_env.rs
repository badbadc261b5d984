//! The environment variables a generated PyTorch source build may set, each with where it is
//! documented. The build stage's plan takes its variable names from here
//! (`crate::plan::torch_build`), and `tests/torch_source.rs` fails on any variable a
//! generated build script sets that is not listed.
//!
//! PyTorch's `setup.py` documents its variables in the module docstring ("Environment
//! variables you are probably interested in", "… for feature toggles", "… we respect");
//! `tools/setup_helpers/cmake.py` passes every variable starting with `BUILD_`, `USE_` or
//! `CMAKE_` to CMake, which is how CMake's own `CMAKE_<LANG>_COMPILER_LAUNCHER` reach the
//! build; the top-level `CMakeLists.txt` appends `$ENV{TORCH_NVCC_FLAGS}` to
//! `CMAKE_CUDA_FLAGS`. Read from main-branch copies of those files, not at a release tag.
//!
//! To add a name: append it with its source, keep the table sorted (a test checks).

const SETUP_PY: &str = "https://github.com/pytorch/pytorch/blob/main/setup.py (module docstring)";
const CMAKE_PY: &str = "https://github.com/pytorch/pytorch/blob/main/tools/setup_helpers/cmake.py (BUILD_/USE_/CMAKE_ variables passed to CMake)";
const CMAKELISTS: &str = "https://github.com/pytorch/pytorch/blob/main/CMakeLists.txt (string(APPEND CMAKE_CUDA_FLAGS \" $ENV{TORCH_NVCC_FLAGS}\"))";
const LAUNCHER: &str =
    "https://cmake.org/cmake/help/latest/variable/CMAKE_LANG_COMPILER_LAUNCHER.html";
const CCACHE: &str = "https://ccache.dev/manual/latest.html#_configuration (CCACHE_DIR: cache_dir)";

/// (name, where it is documented), sorted by name.
pub const ALLOWED: &[(&str, &str)] = &[
    ("BUILD_TEST", SETUP_PY),
    ("CCACHE_DIR", CCACHE),
    ("CMAKE_CUDA_COMPILER_LAUNCHER", LAUNCHER),
    ("CMAKE_CXX_COMPILER_LAUNCHER", LAUNCHER),
    ("CMAKE_C_COMPILER_LAUNCHER", LAUNCHER),
    ("CUDA_HOME", SETUP_PY),
    ("CUDNN_INCLUDE_DIR", SETUP_PY),
    ("CUDNN_LIB_DIR", SETUP_PY),
    ("MAX_JOBS", SETUP_PY),
    ("NCCL_INCLUDE_DIR", SETUP_PY),
    ("NCCL_LIB_DIR", SETUP_PY),
    ("NCCL_ROOT", SETUP_PY),
    ("PYTORCH_BUILD_NUMBER", SETUP_PY),
    ("PYTORCH_BUILD_VERSION", SETUP_PY),
    ("TORCH_CUDA_ARCH_LIST", SETUP_PY),
    ("TORCH_NVCC_FLAGS", CMAKELISTS),
    ("USE_CUDA", SETUP_PY),
    ("USE_CUDNN", SETUP_PY),
    ("USE_DISTRIBUTED", SETUP_PY),
    ("USE_NCCL", CMAKE_PY),
    ("USE_SYSTEM_NCCL", SETUP_PY),
];

/// Where a build variable is documented, if it is one.
pub fn documented(name: &str) -> Option<&'static str> {
    ALLOWED
        .binary_search_by(|(n, _)| n.cmp(&name))
        .ok()
        .map(|i| ALLOWED[i].1)
}

#[cfg(test)]
mod tests {
    #[test]
    fn sorted_and_sourced() {
        assert!(super::ALLOWED.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(super::ALLOWED
            .iter()
            .all(|(_, s)| s.starts_with("https://")));
        assert!(super::documented("TORCH_CUDA_ARCH_LIST").is_some());
        assert!(super::documented("LD_PRELOAD").is_none());
    }
}
