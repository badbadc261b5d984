//! Python packages the image build compiles from source, and the switches each build takes.
//!
//! Decided here, once, below both readers: the Python closure (`crate::resolve::python`)
//! splits these packages out of the pylocks and locks their sdists, and the plans
//! (`crate::plan`) compile them in the `build` stage with [`compile_env`].

/// Whether the build stage compiles this Python package from source.
pub(crate) fn is_compiled(name: &str) -> bool {
    compile_env(name).is_some()
}

/// The build environment of a package compiled against torch in the `build` stage, or
/// `None` when it installs from a wheel.
pub(crate) fn compile_env(name: &str) -> Option<Vec<(&'static str, &'static str)>> {
    match name {
        // DeepSpeed compiles its ops just in time by default, which needs nvcc in the
        // runtime image; pre-building the common ones avoids that.
        "deepspeed" => Some(vec![
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
