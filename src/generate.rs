//! What `gpustack gen` and `gpustack lock` do on disk, as library calls: which files are
//! written where, the `--check` comparison, and what happens to files a run no longer
//! writes. The command line only parses arguments and prints the [`Outcome`]s.
//!
//! * [`LockFile::read`]: a lock with its `pylock.*.toml` files, as `gen` and `check` read it;
//!   [`LockFile::untouched`] refuses one edited by hand.
//! * [`run`]: render the requested targets from a lock and write them under the output
//!   directory ([`Mode::Write`], all or nothing: [`crate::emit::write_targets`]) or compare
//!   them with what is there ([`Mode::Check`]).
//! * [`LockOutput`], [`check_lock`], [`write_lock`]: the lock and its pylock files, compared
//!   with or written over the ones on disk.
//!
//! ```
//! use gpustack::generate::{run, LockFile, Mode, Options, Outcome};
//! use gpustack::plan::Target;
//! use std::path::Path;
//!
//! let lock = LockFile::read(Path::new("lockfiles/a100-pytorch.lock"), "")?;
//! let out = std::env::temp_dir().join(format!("gpustack-doc-gen-{}", std::process::id()));
//! let mut opts = Options { targets: vec![Target::Docker], out: out.clone(), mode: Mode::Write };
//! assert!(matches!(run(&lock, &opts)?, Outcome::Written { .. }));
//! opts.mode = Mode::Check;
//! assert!(matches!(run(&lock, &opts)?, Outcome::UpToDate)); // what `gen --check` does
//! # std::fs::remove_dir_all(&out).unwrap();
//! # Ok::<(), gpustack::Error>(())
//! ```

use std::path::{Path, PathBuf};

pub mod fresh;

use crate::emit::{self, limits, OutFile, ReadError, TargetFiles, Written};
use crate::error::{Diagnostic, Stage};
use crate::plan::Target;
use crate::{Error, Lock};

/// A lock read from a file, with the text it was parsed from.
#[derive(Debug)]
pub struct LockFile {
    /// The path as the user named it, for messages.
    pub shown: String,
    /// The file's text.
    pub text: String,
    /// The parsed lock, its Python closure's `pylock.*.toml` files loaded.
    pub lock: Lock,
    /// The text is exactly what the lock writes ([`Lock::parse_canonical`]), so its
    /// `[integrity]` seals are those of its tables.
    canonical: bool,
}

impl LockFile {
    /// A lock already read (`text` is the file's text, `lock` parsed from it). Its seals
    /// are checked in full by [`LockFile::untouched`].
    pub fn new(shown: String, text: String, lock: Lock) -> LockFile {
        LockFile {
            shown,
            text,
            lock,
            canonical: false,
        }
    }

    /// Reads and parses the lock at `path`, then the `pylock.*.toml` files it names, from
    /// its directory; each must match the digest the lock records. `hint` follows a "not
    /// found" or "cannot read" message.
    pub fn read(path: &Path, hint: &str) -> Result<LockFile, Error> {
        let shown = emit::shown(path);
        let text = emit::read_text(path, Stage::Lock, "lock", hint, limits::LOCK)?;
        let (mut lock, canonical) = match Lock::parse_canonical(&shown, &text) {
            Some(lock) => (lock, true),
            None => (Lock::parse_toml(&shown, &text)?, false),
        };
        load_pylocks(path, &mut lock)?;
        Ok(LockFile {
            shown,
            text,
            lock,
            canonical,
        })
    }

    /// Refuses a lock whose digests do not match its content: it was edited by hand, and
    /// rendering it would bake the edit into every target. A lock without seals (version
    /// 1 to 3) is refused too ([`Lock::require_seals`]): nothing can tell it from a sealed
    /// one whose `version` was lowered.
    pub fn untouched(&self) -> Result<(), Diagnostic> {
        self.lock.require_seals(&self.shown, &self.text)?;
        // A lock read in its canonical form has the seals of its tables by construction;
        // its digests over `[request]` and the layers are still recomputed.
        let mismatches = if self.canonical {
            self.lock.verify_content()
        } else {
            self.lock.verify()
        };
        let Some(m) = mismatches.into_iter().next() else {
            return Ok(());
        };
        let mut d = Diagnostic::new(
            Stage::Lock,
            format!(
                "`{}` was edited by hand: its {} does not match its content",
                self.shown, m.what
            ),
        );
        if let Some(at) = m.offset(&self.text) {
            d = d.at_offset(&self.shown, &self.text, at);
        }
        Err(d.hint("change gpustack.toml (or a catalog overlay) and run `gpustack lock`; `gpustack check` lists every mismatch"))
    }
}

/// The directory a lock's pylock files lie in: the lock's own.
fn lock_dir(lock_path: &Path) -> &Path {
    lock_path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Reads the `pylock.*.toml` files a lock names, from the lock's directory; each must
/// match the digest the lock records.
fn load_pylocks(lock_path: &Path, lock: &mut Lock) -> Result<(), Error> {
    let Some(python) = lock.python.as_mut() else {
        return Ok(());
    };
    let dir = lock_dir(lock_path);
    let bad = crate::resolve::python::load(python, dir);
    if bad.is_empty() {
        return Ok(());
    }
    Err(bad
        .into_iter()
        .map(|(file, why)| {
            Diagnostic::new(
                Stage::Lock,
                format!("`{}` does not match the lock: {why}", emit::shown(&dir.join(&file))),
            )
            .hint("the pylock files are written by `gpustack lock` beside gpustack.lock and committed with it; re-run `gpustack lock` instead of editing them")
        })
        .collect::<Vec<_>>()
        .into())
}

/// Write the files, or only compare them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Replace each target directory (`gpustack gen`).
    Write,
    /// Compare, change nothing (`gpustack gen --check`).
    Check,
}

/// What [`run`] is asked to do.
#[derive(Clone, Debug)]
pub struct Options {
    /// The targets (any order, repeats allowed: each is generated once, in [`Target::ALL`]
    /// order).
    pub targets: Vec<Target>,
    /// The output directory; each target is `OUT/<target>/`.
    pub out: PathBuf,
    /// Write or compare.
    pub mode: Mode,
}

/// What [`run`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// [`Mode::Write`]: every target is now what the lock renders.
    Written {
        /// Each target, replaced or found up to date.
        targets: Vec<Written>,
        /// The targets of an interrupted earlier `gen` that were rolled back first.
        recovered: Option<Vec<String>>,
    },
    /// [`Mode::Check`]: the files are what the lock renders.
    UpToDate,
    /// [`Mode::Check`]: what differs, one line each (`docker/Dockerfile differs`), the
    /// journal of an interrupted `gen` first.
    Stale(Vec<String>),
}

/// `gpustack gen`: checks that the lock was not edited by hand, renders every requested
/// target in memory (a failure writes nothing), then writes them all or none
/// ([`emit::write_targets`]), or compares them with the files under `out`.
pub fn run(lock: &LockFile, opts: &Options) -> Result<Outcome, Error> {
    lock.untouched()?;
    let mut chosen = opts.targets.clone();
    chosen.sort();
    chosen.dedup();
    let rendered = crate::plan::generate_many(&lock.lock, &chosen)?;
    let targets: Vec<TargetFiles<'_>> = rendered
        .iter()
        .map(|(t, files)| TargetFiles {
            name: t.name(),
            files: files
                .iter()
                .map(|f| OutFile {
                    path: &f.path,
                    contents: f.contents.as_bytes(),
                    executable: f.executable,
                })
                .collect(),
        })
        .collect();
    let out = &opts.out;
    if opts.mode == Mode::Write {
        let (targets, recovered) = emit::write_targets(out, &targets)?;
        return Ok(Outcome::Written { targets, recovered });
    }
    let mut stale: Vec<String> = emit::interrupted(out).into_iter().collect();
    for t in &targets {
        for d in emit::diff_dir(&out.join(t.name), &t.files) {
            stale.push(format!("{}/{d}", t.name));
        }
    }
    Ok(if stale.is_empty() {
        Outcome::UpToDate
    } else {
        Outcome::Stale(stale)
    })
}

/// The lock a `gpustack lock` run replaces, read as any lock is (bounded, regular files
/// only), with the pylock files that still match it; `None` when there is none or it does
/// not read. Its registry digests stand when a registry cannot be asked, and its picks are
/// kept unless upgraded.
pub fn previous_lock(path: &Path) -> Option<Lock> {
    let bytes = emit::read_bounded(path, limits::LOCK).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let mut lock = Lock::parse(&emit::shown(path), &text).ok()?;
    if let Some(py) = lock.python.as_mut() {
        // A file that no longer matches is simply not reused.
        let _ = crate::resolve::python::load(py, lock_dir(path));
    }
    Some(lock)
}

/// What `gpustack lock` writes: the lock's text and the `pylock.*.toml` files beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockOutput {
    /// The canonical lock ([`Lock::to_toml`]).
    pub text: String,
    /// (file name, contents) of each pylock file the lock names.
    pub pylocks: Vec<(String, String)>,
}

impl LockOutput {
    /// The files `lock` is written as.
    pub fn of(lock: &Lock) -> LockOutput {
        LockOutput {
            text: lock.to_toml(),
            pylocks: lock
                .python
                .iter()
                .flat_map(|p| p.files.iter())
                .map(|f| (f.file.clone(), f.contents.clone().unwrap_or_default()))
                .collect(),
        }
    }
}

/// How the lock on disk compares with a [`LockOutput`] ([`check_lock`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LockStatus {
    /// The lock and every pylock file are byte for byte what would be written.
    UpToDate,
    /// There is no lock at the path.
    Missing,
    /// The lock or a pylock file differs (or a pylock file is missing).
    Stale,
}

/// `gpustack lock --check`: compares the lock at `out` and the pylock files beside it with
/// `o`. A lock that cannot be read (a directory, FIFO or device) is an input error, not a
/// stale lock.
pub fn check_lock(out: &Path, o: &LockOutput) -> Result<LockStatus, Error> {
    let existing = match emit::read_bounded(out, limits::LOCK) {
        Ok(b) => b,
        Err(ReadError::NotFound) => return Ok(LockStatus::Missing),
        Err(e) => {
            return Err(Diagnostic::new(
                Stage::Lock,
                format!("cannot read lock `{}`: {e}", emit::shown(out)),
            )
            .hint("`--out` names the lock file, like `gpustack.lock`")
            .into())
        }
    };
    let dir = lock_dir(out);
    let pylocks_current = o
        .pylocks
        .iter()
        .all(|(f, c)| std::fs::read(dir.join(f)).is_ok_and(|b| b == c.as_bytes()));
    Ok(if existing == o.text.as_bytes() && pylocks_current {
        LockStatus::UpToDate
    } else {
        LockStatus::Stale
    })
}

/// `gpustack lock`: writes `o` to `out`, holding the directory's lock: the pylock files
/// first, the lock last (the lock names them by digest, so a crash in between leaves the
/// old lock, which `gen` refuses to pair with the new files rather than building from a
/// mix); then removes the pylock files `previous` named and `o` does not. Never writes over
/// the spec it read (`spec`), nor over an existing file that is not a gpustack lock.
///
/// A file that is already a regular file with exactly these bytes is left as it is (no
/// rewrite, no `fsync`). Returns whether any file was written or removed.
pub fn write_lock(
    out: &Path,
    spec: &Path,
    o: &LockOutput,
    previous: Option<&Lock>,
) -> Result<bool, Error> {
    refuse_to_clobber(out, spec)?;
    emit::check_destination(out)?;
    // `nd/..`, `nd/.` or `dir/`: no file name to write, and `nd/` must not be created
    // for it.
    if out.file_name().is_none() || out.as_os_str().to_string_lossy().ends_with('/') {
        return Err(Diagnostic::new(
            Stage::Usage,
            format!("`{}` is not a file name for the lock", emit::shown(out)),
        )
        .hint("name the file: `--out gpustack.lock` or `--out DIR/gpustack.lock`")
        .into());
    }
    let parent = out.parent().filter(|p| !p.as_os_str().is_empty());
    let created = match parent {
        Some(parent) => emit::create_dirs(parent).map_err(|e| {
            Diagnostic::new(
                Stage::Io,
                format!("cannot create directory `{}`: {e}", emit::shown(parent)),
            )
            .hint("check the `--out` path and its permissions")
        })?,
        None => Vec::new(),
    };
    let dir = parent.unwrap_or(Path::new("."));
    let written = write_lock_files(out, dir, o, previous);
    if written.is_err() {
        // A failed write leaves no directory it created behind.
        emit::remove_created(&created);
    }
    written
}

/// [`write_lock`]'s files, once the directory exists.
fn write_lock_files(
    out: &Path,
    dir: &Path,
    o: &LockOutput,
    previous: Option<&Lock>,
) -> Result<bool, Error> {
    let _guard = emit::DirLock::acquire(dir)?;
    emit::sweep_temporaries(dir);
    let mut changed = false;
    for (path, contents) in o
        .pylocks
        .iter()
        .map(|(file, contents)| (dir.join(file), contents))
        .chain(std::iter::once((out.to_path_buf(), &o.text)))
    {
        if !already(&path, contents.as_bytes()) {
            emit::write_atomic(&path, contents.as_bytes())?;
            changed = true;
        }
    }
    // Files the replaced lock named and this one does not.
    for f in previous
        .iter()
        .flat_map(|p| p.python.iter())
        .flat_map(|p| p.files.iter())
    {
        if !o.pylocks.iter().any(|(n, _)| *n == f.file) {
            changed |= std::fs::remove_file(dir.join(&f.file)).is_ok();
        }
    }
    Ok(changed)
}

/// Whether `path` is a regular file (not a link) holding exactly `contents`.
fn already(path: &Path, contents: &[u8]) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file() && m.len() == contents.len() as u64)
        && emit::read_bounded(path, contents.len() as u64).is_ok_and(|b| b == contents)
}

/// `lock` writes only over a lock: never over the spec it read (`--out gpustack.toml`),
/// nor over an existing file that does not start with the lock's `@generated` marker.
fn refuse_to_clobber(out: &Path, spec: &Path) -> Result<(), Error> {
    let shown = emit::shown(out);
    let same = match (std::fs::metadata(out), std::fs::metadata(spec)) {
        #[cfg(unix)]
        (Ok(a), Ok(b)) => {
            use std::os::unix::fs::MetadataExt;
            a.dev() == b.dev() && a.ino() == b.ino()
        }
        _ => std::fs::canonicalize(out)
            .ok()
            .is_some_and(|a| std::fs::canonicalize(spec).ok() == Some(a)),
    };
    if same {
        return Err(Diagnostic::new(
            Stage::Usage,
            format!("refusing to write the lock over the spec `{shown}`"),
        )
        .hint("the lock goes to its own file: `--out gpustack.lock`")
        .into());
    }
    if !std::fs::symlink_metadata(out).is_ok_and(|m| m.is_file()) {
        return Ok(());
    }
    // The marker is the first line of every lock gpustack writes; 64 bytes tell.
    let mut head = [0u8; 64];
    let n = std::fs::File::open(out)
        .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
        .unwrap_or(0);
    let marker = b"# This file is @generated by gpustack";
    if n == 0 || head[..n].starts_with(marker) {
        return Ok(());
    }
    Err(Diagnostic::new(
        Stage::Usage,
        format!("refusing to overwrite `{shown}`: it is not a gpustack lock"),
    )
    .hint("a lock starts with `# This file is @generated by gpustack`; choose another `--out`, or remove the file first")
    .into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gpustack-gen-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn check_lists_what_differs_and_write_restores_it() {
        let lock = LockFile::read(Path::new("lockfiles/a100-pytorch.lock"), "").unwrap();
        let dir = temp("check");
        let mut opts = Options {
            targets: vec![Target::Slurm, Target::Docker, Target::Docker],
            out: dir.join("out"),
            mode: Mode::Check,
        };
        let Outcome::Stale(missing) = run(&lock, &opts).unwrap() else {
            panic!("an empty directory is stale");
        };
        assert!(missing.contains(&"docker/Dockerfile is missing".to_string()));
        opts.mode = Mode::Write;
        let Outcome::Written { targets, recovered } = run(&lock, &opts).unwrap() else {
            panic!("write mode writes");
        };
        let names: Vec<&str> = targets.iter().map(|w| w.name.as_str()).collect();
        assert_eq!(
            names,
            ["docker", "slurm"],
            "each once, in Target::ALL order"
        );
        assert!(targets.iter().all(|w| w.changed) && recovered.is_none());
        std::fs::write(dir.join("out/docker/Dockerfile"), "edited\n").unwrap();
        opts.mode = Mode::Check;
        assert_eq!(
            run(&lock, &opts).unwrap(),
            Outcome::Stale(vec!["docker/Dockerfile differs".to_string()])
        );
        opts.mode = Mode::Write;
        let Outcome::Written { targets, .. } = run(&lock, &opts).unwrap() else {
            panic!("write mode writes");
        };
        assert_eq!(
            targets.iter().map(|w| w.changed).collect::<Vec<_>>(),
            [true, false],
            "only the edited target is replaced"
        );
        opts.mode = Mode::Check;
        assert_eq!(run(&lock, &opts).unwrap(), Outcome::UpToDate);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_lock_is_missing_written_up_to_date_then_stale() {
        let lock = LockFile::read(Path::new("lockfiles/a100-pytorch.lock"), "").unwrap();
        let o = LockOutput::of(&lock.lock);
        assert_eq!(o.text, lock.text);
        let dir = temp("lock");
        let out = dir.join("sub/gpustack.lock");
        let spec = dir.join("gpustack.toml");
        assert_eq!(check_lock(&out, &o).unwrap(), LockStatus::Missing);
        assert!(write_lock(&out, &spec, &o, None).unwrap());
        assert!(
            !write_lock(&out, &spec, &o, None).unwrap(),
            "nothing to write"
        );
        assert_eq!(check_lock(&out, &o).unwrap(), LockStatus::UpToDate);
        std::fs::write(&out, "# This file is @generated by gpustack\n").unwrap();
        assert_eq!(check_lock(&out, &o).unwrap(), LockStatus::Stale);
        // Never over the spec, nor over a file that is not a lock.
        std::fs::write(&spec, "[stack]\n").unwrap();
        let e = write_lock(&spec, &spec, &o, None).unwrap_err().to_string();
        assert!(
            e.contains("refusing to write the lock over the spec"),
            "{e}"
        );
        let other = dir.join("notes.txt");
        std::fs::write(&other, "mine\n").unwrap();
        let e = write_lock(&other, &spec, &o, None).unwrap_err().to_string();
        assert!(e.contains("it is not a gpustack lock"), "{e}");
        assert_eq!(std::fs::read_to_string(&other).unwrap(), "mine\n");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
