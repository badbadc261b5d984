//! Writing outputs, so that a run never loses or clobbers a file: single files are
//! replaced atomically ([`write_atomic`]); `gen` replaces all its target directories
//! together or not at all ([`write_targets`]), deletes only files it wrote (a manifest in
//! each target directory), and a run killed at any point is rolled back by the next
//! ([`recover`]). Inputs are read with a size limit and never from a FIFO or a device
//! ([`read_bounded`]).
//!
//! # The `gen` protocol
//!
//! Under `OUT/`, holding `OUT`'s lock ([`DirLock`]):
//!
//! 1. **recover**: a journal `OUT/.gpustack-journal` left by a killed run is rolled back
//!    (below); stage and backup directories without a journal are removed;
//! 2. **survey** each target directory: a file the target's manifest
//!    (`OUT/<target>/.gpustack-manifest`) does not list and that the run would not write
//!    is *foreign*, as is anything that is not a regular file: `gen` refuses (exit 2)
//!    and names them all; it never deletes them;
//! 3. **stage** every changed target, with its manifest, under
//!    `OUT/.gpustack-stage-R/<target>/` (R: 64 random bits), every file created
//!    exclusively and `fsync`ed;
//! 4. **journal**: `OUT/.gpustack-journal` names the stage, the backup directory
//!    `OUT/.gpustack-old-R` and the targets (written atomically);
//! 5. **swap**: for each target, `OUT/<target>` moves to the backup directory and the
//!    staged one takes its place;
//! 6. **commit**: the journal is removed; then the backup and the stage are.
//!
//! Rolling back (a failure in 5, or the next run after a kill before 6) moves every
//! swapped-in target back to the stage and every backed-up target back in place, then
//! removes the journal: the tree is the old one. After 6 it is the new one.

mod file;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

pub use file::{
    check_destination, create_dirs, human_size, limits, read_bounded, read_text, remove_created,
    shown, sweep_temporaries, write_atomic, write_new, DirLock, ReadError,
};
pub(crate) use file::{create_exclusive, create_temp_dir, fault, kind_of, random_suffix};

use crate::error::{Diagnostic, Stage};
use file::{create_unsynced, sync_dir};

/// The manifest `gen` writes in each target directory: the files it owns there.
pub const MANIFEST: &str = ".gpustack-manifest";
const JOURNAL: &str = ".gpustack-journal";
const STAGE: &str = ".gpustack-stage-";
const OLD: &str = ".gpustack-old-";

/// A generated file to write: path relative to the target directory, contents, mode.
pub struct OutFile<'a> {
    /// Relative, `/`-separated, no `..`.
    pub path: &'a str,
    /// Contents.
    pub contents: &'a [u8],
    /// Mode 0755 instead of 0644.
    pub executable: bool,
}

/// One target directory's files: `OUT/<name>/…`.
pub struct TargetFiles<'a> {
    /// The directory name under `OUT` (`docker`, `k8s`): one path component.
    pub name: &'a str,
    /// Every file the target consists of.
    pub files: Vec<OutFile<'a>>,
}

/// What [`write_targets`] did to one target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The target directory's name.
    pub name: String,
    /// How many files it holds.
    pub files: usize,
    /// Whether it was replaced (false: it was already up to date and left alone).
    pub changed: bool,
}

pub(crate) use crate::core::names::relative_ok;

fn exists_nofollow(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok()
}

/// Whether `dir` can be replaced by [`write_targets`]: absent, or a real directory. A
/// symbolic link is refused (replacing it would silently drop the link, and following it
/// would write outside the output directory), and so is a file, or a parent that is a file.
/// `gen` calls this for every target before writing any.
pub fn check_target_dir(dir: &Path) -> Result<(), Diagnostic> {
    let s = shown(dir);
    for a in dir.ancestors().skip(1) {
        if a.as_os_str().is_empty() {
            break;
        }
        if a.exists() && !a.is_dir() {
            return Err(Diagnostic::new(
                Stage::Io,
                format!("cannot write into `{s}`: `{}` is not a directory", shown(a)),
            )
            .hint("choose another --out"));
        }
    }
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.file_type().is_symlink() => Err(Diagnostic::new(
            Stage::Io,
            format!("cannot write into `{s}`: it is a symbolic link"),
        )
        .hint("gpustack replaces each target directory as a whole and never writes through a link; remove the link or choose another --out")),
        Ok(m) if !m.is_dir() => Err(Diagnostic::new(
            Stage::Io,
            format!("cannot write into `{s}`: it is {}", kind_of(m.file_type())),
        )
        .hint("remove it or choose another --out")),
        _ => Ok(()),
    }
}

/// What a target directory holds compared with what `gen` would write there.
#[derive(Default)]
struct Survey {
    /// `x differs`, `x is missing`.
    differs: Vec<String>,
    /// Files gpustack wrote (its manifest lists them) that it no longer generates.
    owned_stale: Vec<String>,
    /// Files gpustack did not write.
    foreign: Vec<String>,
    /// Entries that are not regular files or directories: (path, what).
    special: Vec<(String, &'static str)>,
    /// The manifest lists exactly the files.
    manifest_ok: bool,
}

impl Survey {
    fn changed(&self) -> bool {
        !self.differs.is_empty() || !self.owned_stale.is_empty() || !self.manifest_ok
    }
}

fn manifest_text(files: &[OutFile<'_>]) -> String {
    let mut names: Vec<&str> = files.iter().map(|f| f.path).collect();
    names.sort_unstable();
    let mut s = String::from(
        "# @generated by gpustack: the files `gpustack gen` wrote in this directory.\n# It replaces or deletes only these; it never deletes other files.\n",
    );
    for n in names {
        s.push_str(n);
        s.push('\n');
    }
    s
}

/// The files a manifest lists (None: no manifest, or not a regular file).
fn read_manifest(dir: &Path) -> Option<BTreeSet<String>> {
    let p = dir.join(MANIFEST);
    if !std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_file()) {
        return None;
    }
    let bytes = read_bounded(&p, limits::MANIFEST).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    Some(
        text.lines()
            .filter(|l| !l.starts_with('#') && relative_ok(l))
            .map(str::to_string)
            .collect(),
    )
}

fn survey(dir: &Path, files: &[OutFile<'_>]) -> Survey {
    let mut s = Survey::default();
    let expected: BTreeMap<&str, &OutFile<'_>> = files.iter().map(|f| (f.path, f)).collect();
    let mut seen = BTreeSet::new();
    let owned = read_manifest(dir);
    if let Some(o) = &owned {
        let want: BTreeSet<String> = files.iter().map(|f| f.path.to_string()).collect();
        s.manifest_ok = *o == want
            && std::fs::read(dir.join(MANIFEST))
                .is_ok_and(|b| b == manifest_text(files).as_bytes());
    }
    // The directories gpustack's files are in (written now, or listed as written before):
    // any other directory is the user's, even an empty one.
    let mut ours_dirs = BTreeSet::new();
    for p in files
        .iter()
        .map(|f| f.path)
        .chain(owned.iter().flatten().map(String::as_str))
    {
        let mut d = p;
        while let Some((parent, _)) = d.rsplit_once('/') {
            ours_dirs.insert(parent.to_string());
            d = parent;
        }
    }
    if std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
        for e in walkdir::WalkDir::new(dir).min_depth(1).sort_by_file_name() {
            let e = match e {
                Ok(e) => e,
                Err(err) => {
                    // Never replace what could not be looked at.
                    let rel = err
                        .path()
                        .and_then(|p| p.strip_prefix(dir).ok())
                        .map_or_else(
                            || ".".to_string(),
                            |r| r.to_string_lossy().replace('\\', "/"),
                        );
                    s.special.push((rel, "unreadable"));
                    continue;
                }
            };
            let Ok(rel) = e.path().strip_prefix(dir) else {
                continue;
            };
            let rel = rel.to_string_lossy().replace('\\', "/");
            if rel == MANIFEST {
                continue;
            }
            let ft = e.file_type();
            if ft.is_dir() {
                if !ours_dirs.contains(&rel) {
                    s.foreign.push(format!("{rel}/"));
                }
                continue;
            }
            seen.insert(rel.clone());
            if !ft.is_file() {
                s.special.push((rel, kind_of(ft)));
                continue;
            }
            match expected.get(rel.as_str()) {
                Some(f) => match read_bounded(e.path(), 1 << 30) {
                    Ok(b) if b == f.contents => {}
                    _ => s.differs.push(format!("{rel} differs")),
                },
                None if owned.as_ref().is_some_and(|o| o.contains(&rel)) => {
                    s.owned_stale.push(rel);
                }
                None => s.foreign.push(rel),
            }
        }
    }
    for f in files {
        if !seen.contains(f.path) {
            s.differs.push(format!("{} is missing", f.path));
        }
    }
    s
}

/// The journal of a swap in progress.
struct Journal {
    stage: String,
    old: String,
    targets: Vec<String>,
}

impl Journal {
    fn to_text(&self) -> String {
        let mut s = format!(
            "# gpustack gen in progress: the next `gpustack gen` rolls it back\nstage = {}\nold = {}\n",
            self.stage, self.old
        );
        for t in &self.targets {
            s.push_str(&format!("target = {t}\n"));
        }
        s
    }

    /// Parses a journal, strictly: only names gpustack itself makes, so a planted
    /// journal cannot make recovery move anything else.
    fn parse(text: &str) -> Option<Journal> {
        let ours = |v: &str, prefix: &str| {
            v.strip_prefix(prefix)
                .is_some_and(|r| r.len() == 16 && r.bytes().all(|b| b.is_ascii_hexdigit()))
        };
        let mut j = Journal {
            stage: String::new(),
            old: String::new(),
            targets: Vec::new(),
        };
        for l in text.lines().filter(|l| !l.starts_with('#')) {
            let (k, v) = l.split_once(" = ")?;
            match k {
                "stage" if ours(v, STAGE) => j.stage = v.to_string(),
                "old" if ours(v, OLD) => j.old = v.to_string(),
                "target"
                    if !v.is_empty()
                        && !v.starts_with('.')
                        && !v.contains(['/', '\\'])
                        && v.chars().all(|c| !c.is_control()) =>
                {
                    j.targets.push(v.to_string());
                }
                _ => return None,
            }
        }
        (!j.stage.is_empty() && !j.old.is_empty()).then_some(j)
    }
}

fn io_err(what: String) -> impl Fn(std::io::Error) -> Diagnostic {
    move |e| {
        Diagnostic::new(Stage::Io, format!("{what}: {e}")).hint(
            "check that the output directory is writable and has free space; nothing was changed",
        )
    }
}

/// Moves every swapped-in target back to the stage and every backed-up one back in
/// place, then removes the journal (the old tree is back), then the stage and backup.
/// Idempotent: a run killed while rolling back is rolled back again by the next.
fn roll_back(out: &Path, j: &Journal) -> std::io::Result<()> {
    let stage = out.join(&j.stage);
    let old = out.join(&j.old);
    for t in j.targets.iter().rev() {
        let cur = out.join(t);
        let staged = stage.join(t);
        let backup = old.join(t);
        if !exists_nofollow(&staged) && exists_nofollow(&cur) && stage.is_dir() {
            // Moved in by the killed run: give it back to the stage.
            std::fs::rename(&cur, &staged)?;
        }
        if exists_nofollow(&backup) {
            std::fs::rename(&backup, &cur)?;
        }
        fault("rollback:target")?;
    }
    sync_dir(out)?;
    match std::fs::remove_file(out.join(JOURNAL)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    sync_dir(out)?;
    let _ = std::fs::remove_dir_all(&stage);
    let _ = std::fs::remove_dir_all(&old);
    Ok(())
}

/// Finishes what a killed `gen` left in `out`, holding the lock: a journal is rolled
/// back; stage and backup directories without one, and leftover temporary files, are
/// removed. Returns the restored targets when there was a journal.
fn recover_locked(out: &Path) -> Result<Option<Vec<String>>, Diagnostic> {
    let jp = out.join(JOURNAL);
    let mut restored = None;
    if exists_nofollow(&jp) {
        let text = read_bounded(&jp, limits::MANIFEST)
            .ok()
            .and_then(|b| String::from_utf8(b).ok());
        let Some(j) = text.as_deref().and_then(Journal::parse) else {
            return Err(Diagnostic::new(
                Stage::Io,
                format!("`{}` is not a journal gpustack wrote", shown(&jp)),
            )
            .hint("an interrupted `gpustack gen` leaves this file; if you did not put it there, look at it, then remove it"));
        };
        roll_back(out, &j).map_err(io_err(format!(
            "cannot roll back the interrupted `gpustack gen` in `{}`",
            shown(out)
        )))?;
        restored = Some(j.targets);
    }
    sweep_temporaries(out);
    if let Ok(rd) = std::fs::read_dir(out) {
        for e in rd.flatten() {
            let n = e.file_name();
            let Some(n) = n.to_str() else { continue };
            let ours = [STAGE, OLD].iter().any(|p| {
                n.strip_prefix(p)
                    .is_some_and(|r| r.len() == 16 && r.bytes().all(|b| b.is_ascii_hexdigit()))
            });
            if ours && e.file_type().is_ok_and(|t| t.is_dir()) {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    Ok(restored)
}

/// Finishes or rolls back what a killed `gpustack gen` left in `out` (see the module
/// documentation), holding `out`'s lock. Returns the targets it restored, if any.
pub fn recover(out: &Path) -> Result<Option<Vec<String>>, Diagnostic> {
    if !out.is_dir() {
        return Ok(None);
    }
    let _lock = DirLock::acquire(out)?;
    recover_locked(out)
}

/// Files and directories staged but not synced yet.
#[derive(Default)]
struct Unsynced {
    files: Vec<(std::path::PathBuf, std::fs::File)>,
    dirs: BTreeSet<std::path::PathBuf>,
}

impl Unsynced {
    /// `fsync` of every file, then of every directory. The calls run concurrently: a
    /// journaling file system commits concurrent `fsync`s together (ext4's group commit),
    /// where one after the other each waits for its own commit and device flush.
    fn sync(self) -> Result<(), Diagnostic> {
        let files: Vec<(&Path, Option<&std::fs::File>)> = self
            .files
            .iter()
            .map(|(p, f)| (p.as_path(), Some(f)))
            .collect();
        sync_all_concurrently(&files)?;
        let dirs: Vec<(&Path, Option<&std::fs::File>)> =
            self.dirs.iter().map(|d| (d.as_path(), None)).collect();
        sync_all_concurrently(&dirs)
    }
}

/// `fsync` of each file (or of each directory, opened here), from up to 16 threads.
fn sync_all_concurrently(items: &[(&Path, Option<&std::fs::File>)]) -> Result<(), Diagnostic> {
    let sync = |(p, f): &(&Path, Option<&std::fs::File>)| -> Result<(), Diagnostic> {
        let r = match f {
            Some(f) => f.sync_all(),
            None => sync_dir(p),
        };
        r.map_err(io_err(format!("cannot sync `{}`", shown(p))))
    };
    // One item (a lock file, its directory) is synced here: a thread would cost more
    // than it overlaps.
    if items.len() <= 1 {
        return items.iter().try_for_each(sync);
    }
    let chunk = items.len().div_ceil(16);
    std::thread::scope(|s| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|part| {
                s.spawn(move || -> Result<(), Diagnostic> { part.iter().try_for_each(sync) })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(Diagnostic::new(
                        Stage::Io,
                        "a thread syncing files panicked",
                    ))
                })
            })
            .collect::<Result<Vec<()>, Diagnostic>>()
            .map(|_| ())
    })
}

fn stage_target(
    dir: &Path,
    files: &[OutFile<'_>],
    pending: &mut Unsynced,
) -> Result<(), Diagnostic> {
    pending.dirs.insert(dir.to_path_buf());
    std::fs::create_dir(dir).map_err(io_err(format!("cannot create `{}`", shown(dir))))?;
    for f in files {
        let p = dir.join(f.path);
        if let Some(d) = p.parent() {
            if !d.is_dir() {
                std::fs::create_dir_all(d)
                    .map_err(io_err(format!("cannot create `{}`", shown(d))))?;
            }
            pending.dirs.insert(d.to_path_buf());
        }
        let mode = if f.executable { 0o755 } else { 0o644 };
        let file = create_unsynced(&p, f.contents, mode)
            .map_err(io_err(format!("cannot write `{}`", shown(&p))))?;
        pending.files.push((p, file));
    }
    let m = dir.join(MANIFEST);
    let file = create_unsynced(&m, manifest_text(files).as_bytes(), 0o644)
        .map_err(io_err(format!("cannot write `{}`", shown(&m))))?;
    pending.files.push((m, file));
    Ok(())
}

/// Writes every target under `out` all or nothing (the protocol in the module
/// documentation): afterwards `out/<name>/` holds exactly each target's files and its
/// manifest, or, on an error, every target is as it was. Targets already up to date are
/// left alone (their mtimes too). A file gpustack did not write, or anything that is not a
/// regular file, in a target directory is an error naming each; nothing is deleted.
///
/// Rendered files ([`crate::render::RenderedFile`]) become [`OutFile`]s by borrowing:
///
/// ```
/// use gpustack::emit::{diff_dir, write_targets, OutFile, TargetFiles};
/// use gpustack::plan::{generate, Target};
/// let text = std::fs::read_to_string("lockfiles/a100-pytorch.lock").unwrap();
/// let lock = gpustack::Lock::parse("gpustack.lock", &text)?;
/// let rendered = generate(&lock, Target::Docker)?;
/// let files: Vec<OutFile<'_>> = rendered
///     .iter()
///     .map(|f| OutFile { path: &f.path, contents: f.contents.as_bytes(), executable: f.executable })
///     .collect();
/// let out = std::env::temp_dir().join(format!("gpustack-doc-targets-{}", std::process::id()));
/// write_targets(&out, &[TargetFiles { name: "docker", files }])?;
/// # let files: Vec<OutFile<'_>> = rendered.iter().map(|f| OutFile { path: &f.path, contents: f.contents.as_bytes(), executable: f.executable }).collect();
/// assert!(diff_dir(&out.join("docker"), &files).is_empty()); // what `gen --check` does
/// # std::fs::remove_dir_all(&out).unwrap();
/// # Ok::<(), gpustack::Error>(())
/// ```
pub fn write_targets(
    out: &Path,
    targets: &[TargetFiles<'_>],
) -> Result<(Vec<Written>, Option<Vec<String>>), Diagnostic> {
    let so = shown(out);
    check_names(out, targets)?;
    std::fs::create_dir_all(out).map_err(io_err(format!("cannot create `{so}`")))?;
    let _lock = DirLock::acquire(out)?;
    let recovered = recover_locked(out)?;
    let (report, changed) = survey_targets(out, targets)?;
    if changed.is_empty() {
        return Ok((report, recovered));
    }
    let r = random_suffix();
    let j = Journal {
        stage: format!("{STAGE}{r}"),
        old: format!("{OLD}{r}"),
        targets: changed.iter().map(|t| t.name.to_string()).collect(),
    };
    stage_and_journal(out, &j, &changed)?;
    swap(out, &j, &changed)?;
    // Commit: from here on the new tree stands, whatever happens.
    let committed = std::fs::remove_file(out.join(JOURNAL))
        .and_then(|()| sync_dir(out))
        .and_then(|()| fault("gen:committed"));
    if let Err(e) = committed {
        // Could not commit: undo, so the result is all or nothing.
        let _ = roll_back(out, &j);
        return Err(io_err(format!("cannot commit the new targets in `{so}`"))(
            e,
        ));
    }
    let _ = std::fs::remove_dir_all(out.join(&j.old));
    let _ = std::fs::remove_dir_all(out.join(&j.stage));
    Ok((report, recovered))
}

/// Step 0: every target name is one plain path component, every file path is relative and
/// inside its target, and every target directory can be replaced ([`check_target_dir`]).
fn check_names(out: &Path, targets: &[TargetFiles<'_>]) -> Result<(), Diagnostic> {
    let so = shown(out);
    for t in targets {
        if !relative_ok(t.name) || t.name.contains('/') || t.name.starts_with('.') {
            return Err(Diagnostic::new(
                Stage::Io,
                format!(
                    "refusing to write a target named `{}`",
                    t.name.escape_debug()
                ),
            ));
        }
        for f in &t.files {
            if !relative_ok(f.path) || f.path == MANIFEST {
                return Err(Diagnostic::new(
                    Stage::Io,
                    format!(
                        "refusing to write `{}` outside `{so}/{}`",
                        f.path.escape_debug(),
                        t.name
                    ),
                ));
            }
        }
        check_target_dir(&out.join(t.name))?;
    }
    Ok(())
}

/// Step 2, survey: what each target would become, and the targets that change. A file
/// gpustack did not write, or anything that is not a regular file, is an error naming
/// them all.
fn survey_targets<'t, 'a>(
    out: &Path,
    targets: &'t [TargetFiles<'a>],
) -> Result<(Vec<Written>, Vec<&'t TargetFiles<'a>>), Diagnostic> {
    let mut problems = Vec::new();
    let mut changed = Vec::new();
    let mut report = Vec::new();
    for t in targets {
        let s = survey(&out.join(t.name), &t.files);
        for (p, what) in &s.special {
            problems.push(format!("{}/{p} is {what}", t.name));
        }
        for p in &s.foreign {
            problems.push(format!("{}/{p} was not written by gpustack", t.name));
        }
        report.push(Written {
            name: t.name.to_string(),
            files: t.files.len(),
            changed: s.changed(),
        });
        if s.changed() {
            changed.push(t);
        }
    }
    if !problems.is_empty() {
        let mut d = Diagnostic::new(
            Stage::Io,
            format!(
                "`{}` holds files gpustack did not write, so it cannot replace their directories:\n    {}",
                shown(out),
                problems.iter().map(|p| crate::error::escape_control(p).into_owned()).collect::<Vec<_>>().join("\n    ")
            ),
        );
        d = d.hint("gpustack deletes only the files it wrote (each target's `.gpustack-manifest` lists them); move these out of the target directories, then run `gpustack gen` again");
        return Err(d);
    }
    Ok((report, changed))
}

/// Steps 3 and 4, stage and journal: every changed target written and synced under the
/// stage directory, the backup directory created, then the journal. On an error nothing
/// was swapped, and what was made is removed (or swept by the next run).
fn stage_and_journal(
    out: &Path,
    j: &Journal,
    changed: &[&TargetFiles<'_>],
) -> Result<(), Diagnostic> {
    let stage = out.join(&j.stage);
    let old = out.join(&j.old);
    let staged = (|| {
        std::fs::create_dir(&stage)
            .map_err(io_err(format!("cannot create `{}`", shown(&stage))))?;
        // Every file is written first and synced after: one journal commit for all.
        let mut pending = Unsynced::default();
        for t in changed {
            stage_target(&stage.join(t.name), &t.files, &mut pending)?;
            fault("gen:staged").map_err(io_err(format!("cannot stage `{}`", t.name)))?;
        }
        pending.dirs.insert(stage.clone());
        pending.sync()?;
        std::fs::create_dir(&old).map_err(io_err(format!("cannot create `{}`", shown(&old))))?;
        write_atomic(&out.join(JOURNAL), j.to_text().as_bytes())
    })();
    if staged.is_err() {
        let _ = std::fs::remove_file(out.join(JOURNAL));
        let _ = std::fs::remove_dir_all(&stage);
        let _ = std::fs::remove_dir_all(&old);
    }
    staged
}

/// Step 5, swap: each changed target moves to the backup directory and its staged
/// directory takes its place; on an error everything is rolled back.
fn swap(out: &Path, j: &Journal, changed: &[&TargetFiles<'_>]) -> Result<(), Diagnostic> {
    let stage = out.join(&j.stage);
    let old = out.join(&j.old);
    let swapped = (|| -> std::io::Result<()> {
        fault("gen:journal")?;
        for t in changed {
            let cur = out.join(t.name);
            if exists_nofollow(&cur) {
                std::fs::rename(&cur, old.join(t.name))?;
                fault("gen:moved-aside")?;
            }
            std::fs::rename(stage.join(t.name), &cur)?;
            fault("gen:moved-in")?;
        }
        sync_dir(&old)?;
        sync_dir(out)
    })();
    if let Err(e) = swapped {
        let back = roll_back(out, j);
        let mut d = io_err(format!(
            "cannot replace the target directories in `{}`",
            shown(out)
        ))(e);
        if let Err(b) = back {
            d = d.hint(format!(
                "rolling back failed too ({b}); the next `gpustack gen` finishes it"
            ));
        }
        return Err(d);
    }
    Ok(())
}

/// Replaces directory `dir` with exactly `files` (and its manifest): [`write_targets`]
/// for one target, `dir`'s parent being the output directory.
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
    let parent = file::parent_of(dir);
    let name = dir.file_name().and_then(|n| n.to_str()).ok_or_else(|| {
        Diagnostic::new(
            Stage::Io,
            format!("cannot write into `{}`: no directory name", shown(dir)),
        )
    })?;
    let files: Vec<OutFile<'_>> = files
        .iter()
        .map(|f| OutFile {
            path: f.path,
            contents: f.contents,
            executable: f.executable,
        })
        .collect();
    write_targets(&parent, &[TargetFiles { name, files }]).map(|_| ())
}

/// Compares `dir` with `files`: the relative paths that differ, are missing, are left
/// over from an earlier `gen`, are not generated by gpustack, or are not regular files
/// (one line each: `x differs`, `x is missing`, `x is no longer generated`, `x is not
/// generated by gpustack`, `x is a FIFO`). Empty means `dir` holds exactly `files`.
/// Nothing but regular files is opened.
pub fn diff_dir(dir: &Path, files: &[OutFile<'_>]) -> Vec<String> {
    let s = survey(dir, files);
    let mut out = s.differs;
    out.extend(
        s.owned_stale
            .into_iter()
            .map(|p| format!("{p} is no longer generated")),
    );
    out.extend(
        s.foreign
            .into_iter()
            .map(|p| format!("{p} is not generated by gpustack")),
    );
    out.extend(
        s.special
            .into_iter()
            .map(|(p, what)| format!("{p} is {what}")),
    );
    out.iter_mut()
        .for_each(|l| *l = crate::error::escape_control(l).into_owned());
    out
}

/// What an interrupted `gen` left in `out`, for `gen --check` and `check`: the journal of
/// a swap that was not rolled back yet.
pub fn interrupted(out: &Path) -> Option<String> {
    exists_nofollow(&out.join(JOURNAL)).then(|| {
        format!("{JOURNAL}: a `gpustack gen` was interrupted here; the next `gpustack gen` rolls it back")
    })
}

/// An output tree as `check` sees it: the regular files, and what else is there.
#[derive(Debug, Default)]
pub struct OutTree {
    /// Every regular file by relative `/`-separated path (manifests and gpustack's own
    /// bookkeeping left out).
    pub files: BTreeMap<String, Vec<u8>>,
    /// Entries that are not regular files (never opened), and an interrupted `gen`:
    /// (relative path, what it is).
    pub unusual: Vec<(String, String)>,
}

/// Reads every regular file under `dir` into memory, keyed by its relative `/`-separated
/// path, in sorted order: what `gpustack check` compares. A missing `dir` is an empty tree.
/// Symbolic links are not followed, and FIFOs, devices and sockets are never opened: they
/// are listed in [`OutTree::unusual`], as is a journal an interrupted `gen` left.
pub fn read_out_tree(dir: &Path) -> Result<OutTree, Diagnostic> {
    let mut out = OutTree::default();
    if !dir.exists() {
        return Ok(out);
    }
    if exists_nofollow(&dir.join(JOURNAL)) {
        out.unusual.push((
            JOURNAL.to_string(),
            "left by an interrupted `gpustack gen`".to_string(),
        ));
    }
    let walk = walkdir::WalkDir::new(dir)
        .min_depth(1)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| {
            // gpustack's bookkeeping at the top level: the journal, stage, backup.
            !(e.depth() == 1 && e.file_name().to_string_lossy().starts_with(".gpustack-"))
        });
    for e in walk {
        let e = e.map_err(|e| {
            Diagnostic::new(Stage::Io, format!("cannot read `{}`: {e}", shown(dir)))
        })?;
        let Ok(rel) = e.path().strip_prefix(dir) else {
            continue;
        };
        let rel = rel.to_string_lossy().replace('\\', "/");
        let ft = e.file_type();
        if ft.is_dir() {
            continue;
        }
        if !ft.is_file() {
            out.unusual.push((rel, kind_of(ft).to_string()));
            continue;
        }
        if e.depth() == 2 && e.file_name() == MANIFEST {
            continue;
        }
        let bytes = read_bounded(e.path(), 1 << 30).map_err(|err| {
            Diagnostic::new(
                Stage::Io,
                format!("cannot read `{}`: {err}", shown(e.path())),
            )
        })?;
        out.files.insert(rel, bytes);
    }
    Ok(out)
}

/// The regular files of [`read_out_tree`].
pub fn read_tree(dir: &Path) -> Result<BTreeMap<String, Vec<u8>>, Diagnostic> {
    read_out_tree(dir).map(|t| t.files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_planted_journal_cannot_name_other_paths() {
        let ok = "stage = .gpustack-stage-0123456789abcdef\nold = .gpustack-old-0123456789abcdef\ntarget = docker\n";
        let j = Journal::parse(ok).unwrap();
        assert_eq!(j.targets, ["docker"]);
        assert_eq!(Journal::parse(&j.to_text()).unwrap().stage, j.stage);
        for bad in [
            "stage = ../x\nold = .gpustack-old-0123456789abcdef\n",
            "stage = .gpustack-stage-0123456789abcdef\nold = /etc\n",
            "stage = .gpustack-stage-0123456789abcdef\nold = .gpustack-old-0123456789abcdef\ntarget = ../etc\n",
            "stage = .gpustack-stage-0123456789abcdef\nold = .gpustack-old-0123456789abcdef\ntarget = a/b\n",
            "stage = .gpustack-stage-0123456789abcdef\nold = .gpustack-old-0123456789abcdef\ntarget = .hidden\n",
            "stage = .gpustack-stage-0123456789abcdef\n",
            "whatever\n",
        ] {
            assert!(Journal::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn messages_escape_control_characters() {
        use crate::error::{escape_control, terminal_safe};
        assert_eq!(escape_control("a\nb\u{1b}[2J"), "a\\nb\\u{1b}[2J");
        assert_eq!(
            terminal_safe("a\nb\u{1b}[2J\u{202e}"),
            "a\nb\\u{1b}[2J\\u{202e}"
        );
        assert_eq!(shown(Path::new("out\n/x")), "out\\n/x");
    }
}
