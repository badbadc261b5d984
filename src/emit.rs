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

/// A generated file to write: path relative to the target directory, contents, mode.
pub struct OutFile<'a> {
    /// Relative, `/`-separated, no `..`.
    pub path: &'a str,
    /// Contents.
    pub contents: &'a [u8],
    /// Mode 0755 instead of 0644.
    pub executable: bool,
}

/// A relative, `/`-separated path with no empty, `.` or `..` component.
pub(crate) fn relative_ok(p: &str) -> bool {
    !p.is_empty()
        && !p.starts_with('/')
        && p.split('/').all(|c| !c.is_empty() && c != "." && c != "..")
}

/// Whether `dir` can be replaced by [`replace_dir`]: absent, or a real directory. A
/// symbolic link is refused (replacing it would silently drop the link, and following it
/// would write outside the output directory), and so is a file, or a parent that is a file.
/// `gen` calls this for every target before writing any.
pub fn check_target_dir(dir: &Path) -> Result<(), Diagnostic> {
    let shown = dir.display().to_string();
    for a in dir.ancestors().skip(1) {
        if a.as_os_str().is_empty() {
            break;
        }
        if a.exists() && !a.is_dir() {
            return Err(Diagnostic::new(
                Stage::Io,
                format!(
                    "cannot write into `{shown}`: `{}` is not a directory",
                    a.display()
                ),
            )
            .hint("choose another --out"));
        }
    }
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.file_type().is_symlink() => Err(Diagnostic::new(
            Stage::Io,
            format!("cannot write into `{shown}`: it is a symbolic link"),
        )
        .hint("gpustack replaces each target directory as a whole and never writes through a link; remove the link or choose another --out")),
        Ok(m) if !m.is_dir() => Err(Diagnostic::new(
            Stage::Io,
            format!("cannot write into `{shown}`: it is not a directory"),
        )
        .hint("remove it or choose another --out")),
        _ => Ok(()),
    }
}

/// Replaces directory `dir` with exactly `files`, all or nothing: the files are written to
/// a sibling temporary directory which then takes `dir`'s place, so a failure leaves the
/// old directory as it was and no stale file survives a regeneration.
///
/// Rendered files ([`crate::render::RenderedFile`]) become [`OutFile`]s by borrowing:
///
/// ```
/// use gpustack::emit::{diff_dir, replace_dir, OutFile};
/// use gpustack::plan::{generate, Target};
/// let text = std::fs::read_to_string("lockfiles/a100-pytorch.lock").unwrap();
/// let lock = gpustack::Lock::parse("gpustack.lock", &text)?;
/// let rendered = generate(&lock, Target::Docker)?;
/// let files: Vec<OutFile<'_>> = rendered
///     .iter()
///     .map(|f| OutFile { path: &f.path, contents: f.contents.as_bytes(), executable: f.executable })
///     .collect();
/// let dir = std::env::temp_dir().join(format!("gpustack-doc-{}", std::process::id()));
/// replace_dir(&dir.join("docker"), &files)?;
/// assert!(diff_dir(&dir.join("docker"), &files).is_empty()); // what `gen --check` does
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), gpustack::Error>(())
/// ```
pub fn replace_dir(dir: &Path, files: &[OutFile<'_>]) -> Result<(), Diagnostic> {
    let shown = dir.display().to_string();
    let io = |what: String, e: std::io::Error| {
        Diagnostic::new(Stage::Io, format!("{what}: {e}"))
            .hint("check that the output directory is writable")
    };
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => Path::new(".").to_path_buf(),
    };
    std::fs::create_dir_all(&parent)
        .map_err(|e| io(format!("cannot create `{}`", parent.display()), e))?;
    check_target_dir(dir)?;
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".into());
    let pid = std::process::id();
    let tmp = parent.join(format!(".{name}.gpustack-tmp.{pid}"));
    let old = parent.join(format!(".{name}.gpustack-old.{pid}"));
    let _ = std::fs::remove_dir_all(&tmp);
    let result = (|| {
        for f in files {
            if !relative_ok(f.path) {
                return Err(Diagnostic::new(
                    Stage::Io,
                    format!("refusing to write `{}` outside `{shown}`", f.path),
                ));
            }
            let p = tmp.join(f.path);
            if let Some(d) = p.parent() {
                std::fs::create_dir_all(d)
                    .map_err(|e| io(format!("cannot create `{}`", d.display()), e))?;
            }
            std::fs::write(&p, f.contents)
                .map_err(|e| io(format!("cannot write `{}`", p.display()), e))?;
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let mode = if f.executable { 0o755 } else { 0o644 };
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode))
                    .map_err(|e| io(format!("cannot set the mode of `{}`", p.display()), e))?;
            }
        }
        if dir.exists() {
            std::fs::rename(dir, &old)
                .map_err(|e| io(format!("cannot move `{shown}` aside"), e))?;
        }
        if let Err(e) = std::fs::rename(&tmp, dir) {
            let _ = std::fs::rename(&old, dir);
            return Err(io(format!("cannot move the new `{shown}` in place"), e));
        }
        let _ = std::fs::remove_dir_all(&old);
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    result
}

/// Compares `dir` with `files`: the relative paths that differ, are missing, or are extra
/// (one line each, sorted as walked: `x differs`, `x is missing`, `x is not generated by
/// gpustack`). Empty means `dir` holds exactly `files`.
pub fn diff_dir(dir: &Path, files: &[OutFile<'_>]) -> Vec<String> {
    let mut out = Vec::new();
    let mut expected = std::collections::BTreeSet::new();
    for f in files {
        expected.insert(f.path.to_string());
        match std::fs::read(dir.join(f.path)) {
            Ok(b) if b == f.contents => {}
            Ok(_) => out.push(format!("{} differs", f.path)),
            Err(_) => out.push(format!("{} is missing", f.path)),
        }
    }
    for e in walkdir::WalkDir::new(dir)
        .sort_by_file_name()
        .into_iter()
        .flatten()
    {
        if e.file_type().is_file() {
            if let Ok(rel) = e.path().strip_prefix(dir) {
                let rel = rel.to_string_lossy().replace('\\', "/");
                if !expected.contains(&rel) {
                    out.push(format!("{rel} is not generated by gpustack"));
                }
            }
        }
    }
    out
}

/// Reads every regular file under `dir` into memory, keyed by its relative `/`-separated
/// path, in sorted order: what `gpustack check` compares. A missing `dir` is an empty tree.
/// Symbolic links are not followed.
pub fn read_tree(dir: &Path) -> Result<std::collections::BTreeMap<String, Vec<u8>>, Diagnostic> {
    let mut out = std::collections::BTreeMap::new();
    if !dir.exists() {
        return Ok(out);
    }
    for e in walkdir::WalkDir::new(dir).sort_by_file_name() {
        let e = e.map_err(|e| {
            Diagnostic::new(Stage::Io, format!("cannot read `{}`: {e}", dir.display()))
        })?;
        if !e.file_type().is_file() {
            continue;
        }
        let Ok(rel) = e.path().strip_prefix(dir) else {
            continue;
        };
        let rel = rel.to_string_lossy().replace('\\', "/");
        let bytes = std::fs::read(e.path()).map_err(|err| {
            Diagnostic::new(
                Stage::Io,
                format!("cannot read `{}`: {err}", e.path().display()),
            )
        })?;
        out.insert(rel, bytes);
    }
    Ok(out)
}
