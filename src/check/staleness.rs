//! The staleness checks: would `gpustack lock` write the same lock from the spec and the
//! catalog today?

use crate::core::Component;
use crate::error::Error;
use crate::lock::{spec_digest, Lock};
use crate::spec::check::{Allowance, Code};
use crate::spec::Spec;

use super::report::Finding;
use super::{line_of, short_diff, Inputs};

pub(super) fn staleness(
    lock: &Lock,
    inputs: &Inputs<'_>,
    spec_file: &str,
    spec_text: &str,
    f: &mut Vec<Finding>,
) -> Result<Vec<Allowance>, Error> {
    let (lock_file, lock_text) = inputs.lock;
    let spec = Spec::parse(spec_file, spec_text, inputs.catalog)?;
    let allowed = spec.check.clone();
    let spec_changed = spec_digest(&spec) != lock.spec_digest;
    // What `gpustack lock --offline` would write: the lock's own registry digests and
    // verified pins stand (check never uses the network).
    // The lock's picks that still fit are kept, as `gpustack lock` keeps them.
    let keep = lock
        .components
        .iter()
        .map(|c| (c.name, c.version.clone()))
        .collect();
    let fresh = crate::solve::solve_locked(inputs.catalog, &spec, &keep).and_then(|r| {
        let mut l = Lock::from_resolution(inputs.catalog, &r)?;
        let _ = crate::resolve::resolve(&mut l, &crate::resolve::http::Offline, Some(lock));
        // The Python closure as an offline re-lock keeps it: reused when its inputs did
        // not change (a closure that would need resolving again leaves `l` different).
        let _ = crate::lock_python(
            inputs.catalog,
            &mut l,
            true,
            Some(lock),
            &crate::PythonUpgrade::default(),
            &crate::resolve::http::Offline,
        );
        Ok(l)
    });
    let fresh = match fresh {
        Ok(l) => l,
        Err(Error::NoSolution(e)) => {
            f.push(
                Finding::new(
                    if spec_changed {
                        Code::StaleSpec
                    } else {
                        Code::StaleCatalog
                    },
                    "the spec no longer resolves: `gpustack lock` would fail",
                )
                .at(spec_file, None)
                .detail(e.to_string().lines().map(str::to_string).collect())
                .hint("see the explanation; `gpustack lock` prints it too"),
            );
            return Ok(allowed);
        }
        Err(e) => return Err(e),
    };
    let fresh_text = fresh.to_toml();
    if fresh_text == lock_text {
        return Ok(allowed);
    }
    let mut detail = component_changes(lock, &fresh);
    if detail.is_empty() {
        detail = short_diff(lock_text, &fresh_text).1;
    }
    let finding = if spec_changed {
        Finding::new(
            Code::StaleSpec,
            format!("the lock is stale: {spec_file} changed since it was written"),
        )
        .at(lock_file, line_of(lock_text, "[request]"))
    } else {
        let (line, _) = short_diff(lock_text, &fresh_text);
        Finding::new(
            Code::StaleCatalog,
            if fresh.catalog_digest == lock.catalog_digest {
                "the lock is stale: `gpustack lock` would write it differently".to_string()
            } else {
                "the lock is stale: the catalog changed since it was written".to_string()
            },
        )
        .at(lock_file, line)
    };
    f.push(
        finding.detail(detail).hint(
            "run `gpustack lock` and commit the result (`gpustack diff` shows what it costs)",
        ),
    );
    Ok(allowed)
}

/// `torch 2.5.1+cu124 → 2.6.0+cu126`, one line per component that changed.
fn component_changes(old: &Lock, new: &Lock) -> Vec<String> {
    let mut out = Vec::new();
    for c in Component::ALL {
        match (old.component(c), new.component(c)) {
            (Some(a), Some(b)) if a.version.as_str() != b.version.as_str() => {
                out.push(format!("{} {} → {}", c.name(), a.version, b.version));
            }
            (Some(a), None) => out.push(format!("{} {} → (removed)", c.name(), a.version)),
            (None, Some(b)) => out.push(format!("{} (new) → {}", c.name(), b.version)),
            _ => {}
        }
    }
    out
}
