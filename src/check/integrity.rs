//! The integrity checks: the lock's seal and the pylock files it records.

use std::collections::BTreeMap;

use crate::error::Location;
use crate::lock::Lock;
use crate::spec::check::Code;

use super::report::Finding;
use super::{join, line_of};

pub(super) fn integrity(lock: &Lock, file: &str, text: &str, f: &mut Vec<Finding>) {
    let mut lines = Vec::new();
    for m in lock.verify() {
        let line = m
            .offset(text)
            .map(|at| Location::at_offset("", text, at).line);
        // One finding per edited line: a broken seal and the digest it also broke (an
        // edited `spec-digest`) point at the same line.
        if line.is_some() && lines.contains(&line) {
            continue;
        }
        lines.push(line);
        f.push(
            Finding::new(
                Code::TamperedLock,
                format!(
                    "the lock's {} does not match its content: it was edited by hand",
                    m.what
                ),
            )
            .at(file, line)
            .detail(vec![
                format!("recorded: {}", m.recorded),
                format!("computed: {}", m.computed),
            ])
            .hint(
                "edit gpustack.toml (or a catalog overlay), not the lock; then run `gpustack lock`",
            ),
        );
    }
}

/// Loads the closure's pylock files into the lock; each one missing or not matching its
/// recorded digest is a `tampered-lock` finding at that digest's line. Whether all loaded.
pub(super) fn pylocks(
    lock: &mut Lock,
    file: &str,
    text: &str,
    files: &BTreeMap<String, String>,
    f: &mut Vec<Finding>,
) -> bool {
    let Some(py) = lock.python.as_mut() else {
        return true;
    };
    let mut all = true;
    for p in &mut py.files {
        let line = line_of(text, &p.digest);
        let shown = join(file.rsplit_once('/').map_or(".", |(d, _)| d), &p.file);
        match files.get(&p.file) {
            Some(t) if crate::resolve::python::digest(t) == p.digest => {
                p.contents = Some(t.clone())
            }
            Some(t) => {
                all = false;
                f.push(
                    Finding::new(
                        Code::TamperedLock,
                        format!("{shown} does not match the digest the lock records: it was edited by hand"),
                    )
                    .at(file, line)
                    .detail(vec![
                        format!("recorded: {}", p.digest),
                        format!("computed: {}", crate::resolve::python::digest(t)),
                    ])
                    .hint("the pylock files are written by `gpustack lock`; run it again instead of editing them"),
                );
            }
            None => {
                all = false;
                f.push(
                    Finding::new(Code::TamperedLock, format!("{shown}, which the lock names, is missing"))
                        .at(file, line)
                        .hint("commit the pylock files with gpustack.lock; `gpustack lock` writes them beside it"),
                );
            }
        }
    }
    all
}
