//! The drift check: the generated files are what the lock renders now.

use std::collections::{BTreeMap, BTreeSet};

use crate::lock::Lock;
use crate::plan;
use crate::spec::check::Code;

use super::report::Finding;
use super::{header_lock_hash, join, short_diff, short_hash};

/// The stale-outputs check: when no file of the tree names the checked lock and some name
/// another, the tree is another lock's outputs (the common mistake: a version changed, the
/// lock was written again, `gpustack gen` was forgotten). One finding names, per target, the
/// lock each was generated from and the command that regenerates them; comparing file by
/// file would only repeat it for every file. Returns whether the tree is stale.
pub(super) fn stale_outputs(
    lock: &Lock,
    dir: &str,
    files: &BTreeMap<String, Vec<u8>>,
    f: &mut Vec<Finding>,
) -> bool {
    let Ok(ours) = plan::Common::new(lock).map(|c| c.lock_hash) else {
        return false;
    };
    // Per target: the first file naming its lock, and that lock.
    let mut targets: Vec<(plan::Target, &String, String)> = Vec::new();
    for t in plan::Target::ALL {
        let prefix = format!("{}/", t.name());
        let mut named = files
            .iter()
            .filter(|(p, _)| p.starts_with(&prefix))
            .filter_map(|(p, b)| header_lock_hash(&String::from_utf8_lossy(b)).map(|h| (p, h)));
        match named.next() {
            Some((_, h)) if h == ours => return false,
            Some((p, h)) => {
                if named.any(|(_, h)| h == ours) {
                    return false;
                }
                targets.push((t, p, h));
            }
            None => {}
        }
    }
    let Some((_, first, _)) = targets.first() else {
        return false;
    };
    let shown_dir = dir.trim_end_matches('/');
    let detail = targets
        .iter()
        .map(|(t, _, h)| {
            format!(
                "{}/: generated from gpustack.lock ({})",
                join(dir, t.name()),
                short_hash(h)
            )
        })
        .collect();
    let names: Vec<&str> = targets.iter().map(|(t, _, _)| t.name()).collect();
    let all = plan::configured(lock).render;
    let command = if all.iter().all(|t| targets.iter().any(|(s, _, _)| s == t)) {
        "all".to_string()
    } else {
        names.join(" ")
    };
    f.push(
        Finding::new(
            Code::StaleOutputs,
            format!(
                "{shown_dir}/ was generated from another lock, not from this one ({})",
                short_hash(&ours)
            ),
        )
        .at(&join(dir, first), None)
        .detail(detail)
        .hint(format!(
            "regenerate them from this lock: `gpustack gen {command}`; if {shown_dir}/ belongs to another lock on purpose, check it with that lock, or pass `--no-drift`"
        )),
    );
    true
}

pub(super) fn drift(
    lock: &Lock,
    dir: &str,
    files: &BTreeMap<String, Vec<u8>>,
    f: &mut Vec<Finding>,
) {
    // The shared values (and the lock hash every output names) are derived once.
    let common = plan::Common::new(lock);
    let lock_hash = common.as_ref().ok().map(|c| c.lock_hash.clone());
    for t in plan::Target::ALL {
        let prefix = format!("{}/", t.name());
        let present: Vec<(&String, &Vec<u8>)> = files
            .iter()
            .filter(|(p, _)| p.starts_with(&prefix))
            .collect();
        if present.is_empty() {
            continue;
        }
        let shown_dir = join(dir, t.name());
        let rendered = match &common {
            Ok(c) => plan::generate_with(lock, c, t).map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        let rendered = match rendered {
            Ok(r) => r,
            Err(e) => {
                f.push(
                    Finding::new(
                        Code::Drift,
                        format!("{shown_dir}/ cannot be compared: the lock does not render it"),
                    )
                    .at(&shown_dir, None)
                    .detail(e.lines().map(str::to_string).collect()),
                );
                continue;
            }
        };
        if let Some(h) = &lock_hash {
            if let Some((path, other)) = present.iter().find_map(|(p, b)| {
                let text = String::from_utf8_lossy(b);
                header_lock_hash(&text).filter(|x| x != h).map(|x| (*p, x))
            }) {
                f.push(
                    Finding::new(
                        Code::OtherLock,
                        format!(
                            "{shown_dir}/ was generated from another lock ({}), not this one ({})",
                            short_hash(&other),
                            short_hash(h)
                        ),
                    )
                    .at(&join(dir, path), None)
                    .hint(format!("run `gpustack gen {}`", t.name())),
                );
            }
        }
        let mut expected = BTreeSet::new();
        for r in &rendered {
            let rel = format!("{prefix}{}", r.path);
            let shown = join(dir, &rel);
            expected.insert(rel.clone());
            match files.get(&rel) {
                None => f.push(
                    Finding::new(Code::Drift, format!("{shown} is missing"))
                        .at(&shown, None)
                        .hint(format!("run `gpustack gen {}`", t.name())),
                ),
                Some(b) if b.as_slice() == r.contents.as_bytes() => {}
                Some(b) => {
                    let (line, detail) = short_diff(&String::from_utf8_lossy(b), &r.contents);
                    f.push(
                        Finding::new(
                            Code::Drift,
                            format!("{shown} differs from what the lock renders"),
                        )
                        .at(&shown, line)
                        .detail(detail)
                        .hint(format!(
                            "generated files are not edited by hand: change gpustack.toml, then run `gpustack lock` and `gpustack gen {}`",
                            t.name()
                        )),
                    );
                }
            }
        }
        for (p, _) in &present {
            if !expected.contains(*p) {
                let shown = join(dir, p);
                f.push(
                    Finding::new(Code::Drift, format!("{shown} is not generated by gpustack"))
                        .at(&shown, None)
                        .hint(format!(
                            "`gpustack gen {}` replaces {shown_dir}/ as a whole; keep other files elsewhere",
                            t.name()
                        )),
                );
            }
        }
    }
}
