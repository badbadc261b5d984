//! Writing outputs: atomically (temporary file in the same directory, then rename), so a
//! failed run never leaves a half-written file.

use std::io::Write;
use std::path::Path;

use crate::error::{Diagnostic, Stage};

/// Writes `contents` to `path` atomically. The parent directory must exist.
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<(), Diagnostic> {
    let shown = path.display().to_string();
    let fail = |what: &str, e: std::io::Error| {
        Diagnostic::new(Stage::Io, format!("cannot write `{shown}`: {what}: {e}"))
            .hint("check that the directory exists and is writable")
    };
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => Path::new(".").to_path_buf(),
    };
    if path.is_dir() {
        return Err(Diagnostic::new(
            Stage::Io,
            format!("cannot write `{shown}`: it is a directory"),
        )
        .hint("name a file, like `gpustack.lock`"));
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.gpustack-tmp.{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp).map_err(|e| fail("create", e))?;
        f.write_all(contents).map_err(|e| fail("write", e))?;
        f.sync_all().map_err(|e| fail("sync", e))?;
        std::fs::rename(&tmp, path).map_err(|e| fail("rename", e))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
