//! One file at a time: exclusive temporary files, fsync'd atomic replacement, bounded
//! reads, the advisory lock on an output directory, and the fault-injection hook the crash
//! tests use.
//!
//! The write protocol ([`write_atomic`]):
//!
//! 1. the destination, when it exists, must be a regular file (never a symbolic link, a
//!    directory, a device, a FIFO or a socket: those are refused, not replaced);
//! 2. a temporary file `.NAME.gpustack-tmp.XXXXXXXXXXXXXXXX` (64 random bits) is created in
//!    the destination's directory with `O_CREAT|O_EXCL` (`create_new`), which never follows
//!    a symbolic link planted at that name (POSIX: "If O_CREAT and O_EXCL are set, and
//!    path names a symbolic link, open() shall fail with EEXIST");
//! 3. the contents are written and the file is `fsync`ed, then renamed over the
//!    destination, and the directory is `fsync`ed, so the new name survives a power loss.
//!
//! A run killed between 2 and 3 leaves its temporary file; the next write to the same
//! directory, holding the directory's lock, removes such leftovers ([`sweep_temporaries`]).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub(crate) use crate::core::fs::kind_of;
pub use crate::core::fs::{human_size, limits, read_bounded, ReadError};
use crate::error::{Diagnostic, Stage};

/// A path for a message: control characters (a newline, an escape sequence) are written
/// as escapes, so a file name cannot forge output lines or drive the terminal.
pub fn shown(path: &Path) -> String {
    crate::error::escape_control(&path.display().to_string()).into_owned()
}

/// 16 hex digits nobody can predict: the standard library's per-process random hash keys
/// over the time, the process id and a counter.
pub(crate) fn random_suffix() -> String {
    use std::hash::{BuildHasher, Hasher};
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(N.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    h.write_u32(std::process::id());
    if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(t.as_nanos());
    }
    format!("{:016x}", h.finish())
}

/// A new private directory `BASE/PREFIX-XXXXXXXXXXXXXXXX` ([`random_suffix`]), created
/// exclusively (`mkdir` fails on any existing name, a planted symbolic link included) with
/// mode 0700: a name another user cannot guess, pre-create or read. A taken name (another
/// run, or a planted one) is skipped for a fresh one; any other error is returned.
pub(crate) fn create_temp_dir(base: &Path, prefix: &str) -> std::io::Result<PathBuf> {
    let mut last = None;
    for _ in 0..16 {
        let p = base.join(format!("{prefix}-{}", random_suffix()));
        let mut b = std::fs::DirBuilder::new();
        #[cfg(unix)]
        {
            use std::os::unix::fs::DirBuilderExt;
            b.mode(0o700);
        }
        match b.create(&p) {
            Ok(()) => return Ok(p),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no free name")))
}

/// Creates `dir` and its missing parents, returning the directories this call created,
/// outermost first, so that a failure after it can take them back ([`remove_created`])
/// and leave no empty directory behind (`lock --out nd/x` that fails, an import that does
/// not load).
pub fn create_dirs(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut missing = Vec::new();
    let mut d = Some(dir);
    while let Some(p) = d.filter(|p| !p.as_os_str().is_empty() && !p.exists()) {
        missing.push(p.to_path_buf());
        d = p.parent();
    }
    missing.reverse();
    let mut created = Vec::new();
    for p in missing {
        match std::fs::create_dir(&p) {
            Ok(()) => created.push(p),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && p.is_dir() => {}
            Err(e) => {
                remove_created(&created);
                return Err(e);
            }
        }
    }
    Ok(created)
}

/// Removes the directories [`create_dirs`] created, innermost first, each only if empty.
pub fn remove_created(created: &[PathBuf]) {
    for p in created.iter().rev() {
        let _ = std::fs::remove_dir(p);
    }
}

/// The directory a path is in (`.` for a bare name).
pub(crate) fn parent_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// `fsync` of a directory: makes the names created, renamed or removed in it durable.
pub(crate) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Creates `path` exclusively (never through a link, never over anything), writes, syncs.
pub(crate) fn create_exclusive(path: &Path, contents: &[u8], mode: u32) -> std::io::Result<()> {
    create_unsynced(path, contents, mode)?.sync_all()
}

/// [`create_exclusive`] without the sync, with exactly `mode` whatever the umask: the
/// caller syncs the returned file later (writing every file first and syncing them after
/// lets the file system write them out together, one journal commit instead of one per
/// file).
pub(crate) fn create_unsynced(path: &Path, contents: &[u8], mode: u32) -> std::io::Result<File> {
    let mut o = OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(mode);
    }
    let mut f = o.open(path)?;
    f.write_all(contents)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
    }
    #[cfg(not(unix))]
    let _ = mode;
    Ok(f)
}

/// Whether a destination may be replaced: absent, or a regular file. Anything else
/// (a directory, a link, a device such as `/dev/null`, a FIFO, a socket) is refused.
pub fn check_destination(path: &Path) -> Result<(), Diagnostic> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(m) => {
            let what = kind_of(m.file_type());
            let hint = if m.is_dir() {
                "name a file, like `gpustack.lock`".to_string()
            } else {
                "gpustack replaces only regular files; name a file, or `-` for standard output"
                    .to_string()
            };
            Err(Diagnostic::new(
                Stage::Io,
                format!("cannot write `{}`: it is {what}", shown(path)),
            )
            .hint(hint))
        }
        Err(_) => Ok(()),
    }
}

/// Writes `contents` to `path` atomically, durably and without following links (see the
/// module documentation). The parent directory must exist.
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<(), Diagnostic> {
    check_destination(path)?;
    let s = shown(path);
    let fail = |what: &str, e: std::io::Error| {
        Diagnostic::new(Stage::Io, format!("cannot write `{s}`: {what}: {e}"))
            .hint("check that the directory exists, is writable and has free space")
    };
    let dir = parent_of(path);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut tries = 0;
    let tmp = loop {
        let tmp = dir.join(format!(".{name}.gpustack-tmp.{}", random_suffix()));
        match create_exclusive(&tmp, contents, 0o644) {
            Ok(()) => break tmp,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && tries < 8 => tries += 1,
            Err(e) => {
                // A partial file of ours: remove it (never something that was there).
                if e.kind() != std::io::ErrorKind::AlreadyExists {
                    let _ = std::fs::remove_file(&tmp);
                }
                return Err(fail("create a temporary file", e));
            }
        }
    };
    let result = (|| {
        fault("write_atomic:synced").map_err(|e| fail("write", e))?;
        // The check above, again, right before the rename: narrows the window in which
        // another process could put a special file there.
        check_destination(path)?;
        std::fs::rename(&tmp, path).map_err(|e| fail("rename", e))?;
        sync_dir(&dir).map_err(|e| fail("sync the directory", e))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Creates `path` with `contents` only if nothing is there, atomically: a temporary file
/// is written and synced, then hard-linked to `path` (which fails if `path` exists), so a
/// full disk leaves no empty or partial file at `path`. What `init` uses.
pub fn write_new(path: &Path, contents: &[u8]) -> Result<(), Diagnostic> {
    let s = shown(path);
    let dir = parent_of(path);
    let tmp = dir.join(format!(".gpustack-new.{}", random_suffix()));
    let fail = |e: std::io::Error| {
        Diagnostic::new(Stage::Io, format!("cannot create `{s}`: {e}"))
            .hint("check that the directory exists, is writable and has free space")
    };
    if let Err(e) = create_exclusive(&tmp, contents, 0o644).and_then(|()| fault("write_new:synced"))
    {
        let _ = std::fs::remove_file(&tmp);
        return Err(fail(e));
    }
    let r = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match r {
        Ok(()) => sync_dir(&dir).map_err(fail),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(Diagnostic::new(
            Stage::Usage,
            format!("`{s}` already exists; `init` never overwrites"),
        )
        .hint("edit it, or pass `--path` to write somewhere else")),
        Err(e) => Err(fail(e)),
    }
}

/// Removes `.NAME.gpustack-tmp.XXXXXXXXXXXXXXXX` files that a killed run left in `dir`
/// (regular files with exactly that shape only). Call it holding the directory's lock.
pub fn sweep_temporaries(dir: &Path) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let ours = name.starts_with('.')
            && name
                .rsplit_once(".gpustack-tmp.")
                .is_some_and(|(_, r)| r.len() == 16 && r.bytes().all(|b| b.is_ascii_hexdigit()));
        if ours && e.file_type().is_ok_and(|t| t.is_file()) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Reads a UTF-8 text input of at most `limit` bytes ([`read_bounded`]) with the CLI's
/// messages: `{what} \`PATH\` not found`, `… is larger than 1 MiB`, `… is not UTF-8`, each
/// with `hint` where it helps. `what` names the input (`spec`, `lock`, `manifest`).
pub fn read_text(
    path: &Path,
    stage: Stage,
    what: &str,
    hint: &str,
    limit: u64,
) -> Result<String, Diagnostic> {
    let shown = shown(path);
    let bytes = read_bounded(path, limit).map_err(|e| match e {
        ReadError::NotFound => {
            Diagnostic::new(stage, format!("{what} `{shown}` not found")).hint(hint)
        }
        ReadError::NotRegular(kind) => Diagnostic::new(
            stage,
            format!("cannot read {what} `{shown}`: it is {kind}, not a regular file"),
        )
        .hint(hint),
        ReadError::TooLarge(n) => Diagnostic::new(
            stage,
            format!("{what} `{shown}` is larger than {}", human_size(n)),
        )
        .hint(format!(
            "gpustack reads a {what} of at most {}; is this the right file?",
            human_size(n)
        )),
        ReadError::Io(e) => {
            Diagnostic::new(stage, format!("cannot read {what} `{shown}`: {e}")).hint(hint)
        }
    })?;
    String::from_utf8(bytes).map_err(|e| {
        Diagnostic::new(
            stage,
            format!(
                "{what} `{shown}` is not UTF-8 (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            ),
        )
        .hint("save it as UTF-8, e.g. `iconv -f latin1 -t utf-8 FILE`")
    })
}

/// The advisory lock on a directory that serialises gpustack runs writing into it
/// (`flock(2)` on the directory itself, so no lock file is left behind; the kernel
/// releases it when the process ends, however it ends). Dropped, it unlocks.
#[derive(Debug)]
pub struct DirLock {
    _file: File,
}

impl DirLock {
    /// Waits for the lock on `dir` (which must exist) for up to `GPUSTACK_LOCK_TIMEOUT`
    /// seconds (default 30), then fails with "another gpustack is writing here".
    pub fn acquire(dir: &Path) -> Result<DirLock, Diagnostic> {
        let s = shown(dir);
        let f = File::open(dir).map_err(|e| {
            Diagnostic::new(Stage::Io, format!("cannot open `{s}`: {e}"))
                .hint("check that the directory exists and is readable")
        })?;
        let secs: f64 = std::env::var("GPUSTACK_LOCK_TIMEOUT")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|v: &f64| v.is_finite() && *v >= 0.0)
            .unwrap_or(30.0);
        let deadline = Instant::now() + Duration::from_secs_f64(secs);
        loop {
            match f.try_lock() {
                Ok(()) => return Ok(DirLock { _file: f }),
                Err(std::fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(std::fs::TryLockError::WouldBlock) => {
                    return Err(Diagnostic::new(
                        Stage::Io,
                        format!("another gpustack is writing `{s}` (waited {secs} s)"),
                    )
                    .hint("wait for it to finish and run again; `GPUSTACK_LOCK_TIMEOUT=SECONDS` waits longer"))
                }
                // A file system without locks (some network mounts): go on unlocked.
                Err(std::fs::TryLockError::Error(_)) => return Ok(DirLock { _file: f }),
            }
        }
    }
}

/// The fault-injection hook of the crash tests: `GPUSTACK_TEST_FAULT=abort@N` aborts the
/// process (no cleanup, no destructors, as a SIGKILL would) at the Nth checkpoint of the
/// run, `error@N` makes the Nth checkpoint fail as an I/O error would. Unset (always, but
/// in tests), a checkpoint costs one cached environment lookup.
pub(crate) fn fault(step: &str) -> std::io::Result<()> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::OnceLock;
    static PLAN: OnceLock<Option<(bool, usize)>> = OnceLock::new();
    static N: AtomicUsize = AtomicUsize::new(0);
    let plan = PLAN.get_or_init(|| {
        let v = std::env::var("GPUSTACK_TEST_FAULT").ok()?;
        let (what, n) = v.split_once('@')?;
        Some((what == "abort", n.parse().ok()?))
    });
    let Some((abort, at)) = *plan else {
        return Ok(());
    };
    if N.fetch_add(1, Ordering::Relaxed) + 1 == at {
        if abort {
            std::process::abort();
        }
        return Err(std::io::Error::other(format!("injected fault at `{step}`")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// Issue 32: temporary directories have unpredictable names, are private, and a name
    /// planted in advance (the old `gpustack-closure-<pid>-N` scheme) blocks nothing.
    #[test]
    fn temp_dirs_are_private_and_unpredictable() {
        let base = std::env::temp_dir();
        let planted: Vec<PathBuf> = (0..100)
            .map(|i| base.join(format!("gpustack-closure-{}-{i}", std::process::id())))
            .collect();
        for p in &planted {
            let _ = std::fs::create_dir(p);
        }
        let a = super::create_temp_dir(&base, "gpustack-closure").unwrap();
        let b = super::create_temp_dir(&base, "gpustack-closure").unwrap();
        assert_ne!(a, b);
        assert!(!planted.contains(&a));
        let name = a.file_name().unwrap().to_string_lossy().into_owned();
        let suffix = name.strip_prefix("gpustack-closure-").unwrap();
        assert!(
            suffix.len() == 16 && suffix.bytes().all(|c| c.is_ascii_hexdigit()),
            "{name}"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&a).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o700);
        }
        for p in planted.iter().chain([&a, &b]) {
            let _ = std::fs::remove_dir(p);
        }
    }

    use super::*;

    fn tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gpustack-file-{tag}-{}", random_suffix()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn temporary_names_are_unpredictable() {
        let a = random_suffix();
        let b = random_suffix();
        assert_ne!(a, b);
        assert_eq!(a.len(), 16);
    }

    #[cfg(unix)]
    #[test]
    fn exclusive_creation_never_follows_a_link() {
        let d = tmp("excl");
        let victim = d.join("victim");
        std::fs::write(&victim, "precious").unwrap();
        std::os::unix::fs::symlink(&victim, d.join("tmp")).unwrap();
        std::os::unix::fs::symlink(d.join("nowhere"), d.join("dangling")).unwrap();
        for name in ["tmp", "dangling"] {
            let e = create_exclusive(&d.join(name), b"x", 0o644).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists);
        }
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert!(!d.join("nowhere").exists());
        // A link as the destination is refused before anything is written.
        assert!(write_atomic(&d.join("tmp"), b"x").is_err());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn bounded_reads_refuse_special_and_large_files() {
        let d = tmp("read");
        let p = d.join("big");
        std::fs::write(&p, vec![b'a'; 100]).unwrap();
        assert!(matches!(read_bounded(&p, 99), Err(ReadError::TooLarge(99))));
        assert_eq!(read_bounded(&p, 100).unwrap().len(), 100);
        assert!(matches!(
            read_bounded(&d, 100),
            Err(ReadError::NotRegular("a directory"))
        ));
        #[cfg(unix)]
        assert!(matches!(
            read_bounded(Path::new("/dev/zero"), 100),
            Err(ReadError::NotRegular("a character device"))
        ));
        assert!(matches!(
            read_bounded(&d.join("none"), 1),
            Err(ReadError::NotFound)
        ));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn leftover_temporaries_are_swept_and_nothing_else() {
        let d = tmp("sweep");
        std::fs::write(d.join(".gpustack.lock.gpustack-tmp.0123456789abcdef"), "x").unwrap();
        std::fs::write(d.join(".gpustack.lock.gpustack-tmp.mine"), "x").unwrap();
        std::fs::write(d.join("gpustack.lock"), "x").unwrap();
        sweep_temporaries(&d);
        let mut names: Vec<String> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, [".gpustack.lock.gpustack-tmp.mine", "gpustack.lock"]);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
