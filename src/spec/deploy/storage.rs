//! `[storage]`: where datasets, checkpoints and models live, parsed into storage references.

use serde::Deserialize;

use crate::core::StorageRef;
use crate::spec::at::At;

use super::{is_dns_label, is_safe_path, S};

/// `[storage]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Storage {
    /// Datasets, mounted read-only.
    pub datasets: Option<StorageRef>,
    /// Checkpoints, mounted read-write.
    pub checkpoints: Option<StorageRef>,
    /// Models, mounted at `/models` for the vLLM server (read-only when `[serve].model` is
    /// a path there, read-write as the Hugging Face cache when it is a hub id).
    pub models: Option<StorageRef>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StorageWire {
    pub(super) datasets: Option<S<String>>,
    pub(super) checkpoints: Option<S<String>>,
    pub(super) models: Option<S<String>>,
}

/// Where every target mounts `[storage].models`.
pub const MODELS_DIR: &str = "/models";

/// Parses a storage reference.
pub fn parse_storage(s: &str) -> Result<StorageRef, String> {
    let bad = || {
        format!("`{}` is not a storage location: use nfs://host/path, lustre:/mount/path, hostpath:/path or pvc:name", s.escape_debug())
    };
    if let Some(rest) = s.strip_prefix("nfs://") {
        let (host, path) = rest.split_once('/').ok_or_else(bad)?;
        let path = format!("/{path}");
        let host_ok = !host.is_empty()
            && host.len() <= 253
            && host
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'.' || c == b'-');
        if host_ok && is_safe_path(&path) {
            return Ok(StorageRef::Nfs {
                host: host.to_string(),
                path,
            });
        }
        return Err(bad());
    }
    if let Some(p) = s.strip_prefix("lustre:") {
        return if is_safe_path(p) {
            Ok(StorageRef::Lustre {
                path: p.to_string(),
            })
        } else {
            Err(bad())
        };
    }
    if let Some(p) = s.strip_prefix("hostpath:") {
        if let Some(why) = crate::core::url::host_path_problem(p).filter(|_| is_safe_path(p)) {
            return Err(format!(
                "`{}` cannot be mounted from the nodes: {why}; name a data directory such as `hostpath:/data/ckpt`",
                s.escape_debug()
            ));
        }
        return if is_safe_path(p) {
            Ok(StorageRef::HostPath {
                path: p.to_string(),
            })
        } else {
            Err(bad())
        };
    }
    if let Some(n) = s.strip_prefix("pvc:") {
        return if is_dns_label(n) {
            Ok(StorageRef::Pvc {
                name: n.to_string(),
            })
        } else {
            Err(bad())
        };
    }
    Err(bad())
}

/// `[storage]`, validated.
pub(super) fn validate_storage(s: S<StorageWire>, at: &mut At<'_>) -> Storage {
    let s = s.into_inner();
    let mut one = |v: &Option<S<String>>| -> Option<StorageRef> {
        let v = v.as_ref()?;
        match parse_storage(v.get_ref()) {
            Ok(r) => Some(r),
            Err(e) => {
                at.fail(
                        v.span(),
                        e,
                        "like `nfs://nfs.example.com/datasets`, `lustre:/lustre/ckpt`, `hostpath:/data` or `pvc:datasets`",
                    );
                None
            }
        }
    };
    Storage {
        datasets: one(&s.datasets),
        checkpoints: one(&s.checkpoints),
        models: one(&s.models),
    }
}
