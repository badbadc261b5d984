//! The re-lock fast path: an offline `gpustack lock` whose every input is byte for byte
//! that of an earlier run which changed nothing does not run again; it says what that run
//! said and stops (cargo's "fresh" check, by content rather than by time stamp).
//!
//! ```text
//! spec bytes ─┐
//! lock bytes ─┤ (the lock names its pylock files)
//! pylock bytes┼─sha256─▶ key ──▶ <cache>/relock/<key>: the messages of a run that
//! this binary ┤                  found every file already as it would write it
//! the flags  ─┘
//! ```
//!
//! * **What the key covers.** Everything an offline re-lock reads: the spec, the lock,
//!   each pylock file the lock names, the binary that runs (version, and the executable's
//!   device, inode, size and modification time: the stock catalog and every rule are
//!   compiled into it), and the arguments that change what the run writes or says. Not
//!   the lock's own `[inputs]` digests: `catalog-digest` covers only the catalog entries
//!   the lock uses, yet a catalog entry it does not use changes a re-lock's output (a
//!   newer release turns a kept pick's `because` into "kept from the existing lock; a fresh
//!   lock takes …"), and the lock does not name the gpustack that wrote it.
//! * **When an entry is written.** Only after a full run with the same key (computed
//!   again at the end: nothing changed meanwhile) that left every file as it was. A run
//!   that writes proves nothing about the next one; the one after it records.
//! * **Any doubt is the full path:** network allowed, `--upgrade`, a catalog overlay,
//!   `--out -`, JSON output, a file that is missing, a link, or not a regular file, a lock
//!   that names a pylock file oddly, a cache entry that does not read back whole. A
//!   hand-edited lock or pylock has other bytes, hence another key: it is reported by the
//!   full path exactly as before.
//!
//! The cache is a directory of small files (`GPUSTACK_CACHE_DIR`, else
//! `$XDG_CACHE_HOME/gpustack`, else `~/.cache/gpustack`); deleting it is always safe.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::emit::limits;

/// The hash of everything an offline re-lock reads ([`Key::of`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Key(String);

/// What a re-lock is asked to do, beyond the files it reads.
#[derive(Clone, Debug)]
pub struct Request<'a> {
    /// The spec (`--spec`), as given.
    pub spec: &'a Path,
    /// The lock (`--out`), as given.
    pub out: &'a Path,
    /// The arguments that change what the run writes or prints (`--check`, `-v`), as
    /// text.
    pub flags: &'a str,
}

/// One message the run printed: a progress line (`info`, left out with `-q`) or a note.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Said {
    /// A progress line rather than a note.
    pub info: bool,
    /// The text.
    pub text: String,
}

/// A cache entry: its key and number of messages, and the messages (a file cut off by a
/// crash lacks one or the other, or does not parse, and is not used).
#[derive(Serialize, Deserialize)]
struct Entry {
    key: String,
    count: usize,
    said: Vec<Said>,
}

impl Key {
    /// The key of `req` over the files as they are now; `None` when any of them is
    /// missing, a link or not a regular file, or too large (then the full path runs).
    pub fn of(req: &Request<'_>) -> Option<Key> {
        let mut h = Sha256::new();
        let mut field = |name: &str, bytes: &[u8]| {
            h.update(format!("{name} {}\n", bytes.len()).as_bytes());
            h.update(bytes);
            h.update(b"\n");
        };
        field("gpustack-relock", b"1");
        field("version", env!("CARGO_PKG_VERSION").as_bytes());
        field("binary", binary_identity()?.as_bytes());
        field("flags", req.flags.as_bytes());
        field("spec-path", req.spec.as_os_str().as_encoded_bytes());
        field("out-path", req.out.as_os_str().as_encoded_bytes());
        field(
            "spec",
            &crate::emit::read_bounded(req.spec, limits::SPEC).ok()?,
        );
        let lock = regular(req.out, limits::LOCK)?;
        field("lock", &lock);
        let dir = req
            .out
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        for name in pylock_files(std::str::from_utf8(&lock).ok()?)? {
            field("pylock-name", name.as_bytes());
            field("pylock", &regular(&dir.join(name), limits::LOCK)?);
        }
        Some(Key(crate::catalog::hex(&h.finalize())))
    }
}

/// The bytes of a regular file (not a link), at most `limit`.
fn regular(path: &Path, limit: u64) -> Option<Vec<u8>> {
    if !std::fs::symlink_metadata(path).ok()?.is_file() {
        return None;
    }
    crate::emit::read_bounded(path, limit).ok()
}

/// The `file = "…"` values of a lock as gpustack writes it (a lock gpustack left as it
/// was is its writer's bytes, so no other spelling needs reading); `None` for a name that
/// is not a plain `pylock.*.toml`, which the full path then reads.
fn pylock_files(lock: &str) -> Option<Vec<&str>> {
    let mut v = Vec::new();
    for line in lock.lines() {
        let Some(rest) = line.strip_prefix("file = \"") else {
            continue;
        };
        let name = rest.strip_suffix('"')?;
        let plain = name.starts_with("pylock.")
            && name.ends_with(".toml")
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
        if !plain {
            return None;
        }
        v.push(name);
    }
    Some(v)
}

/// The running executable: version, device, inode, size and modification time, so that a
/// rebuilt binary never answers from an entry another build recorded.
fn binary_identity() -> Option<String> {
    let m = std::fs::metadata(std::env::current_exe().ok()?).ok()?;
    let mtime = m
        .modified()
        .ok()?
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_nanos();
    let mut s = format!("size={} mtime={mtime}", m.len());
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let _ = write!(s, " dev={} ino={}", m.dev(), m.ino());
    }
    Some(s)
}

pub use crate::core::fs::cache_dir;

fn entry_path(cache: &Path, key: &Key) -> PathBuf {
    cache.join("relock").join(&key.0)
}

/// What the run with this key said, when one was recorded.
pub fn recall(cache: &Path, key: &Key) -> Option<Vec<Said>> {
    let bytes = crate::emit::read_bounded(&entry_path(cache, key), limits::LOCK).ok()?;
    let e: Entry = toml::from_str(std::str::from_utf8(&bytes).ok()?).ok()?;
    (e.key == key.0 && e.count == e.said.len()).then_some(e.said)
}

/// Records that the run with this key changed nothing and said `said`. Best effort: a
/// cache that cannot be written only means the next run takes the full path.
pub fn remember(cache: &Path, key: &Key, said: &[Said]) {
    let path = entry_path(cache, key);
    let Some(dir) = path.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let Ok(text) = toml::to_string(&Entry {
        key: key.0.clone(),
        count: said.len(),
        said: said.to_vec(),
    }) else {
        return;
    };
    // An unpredictable name, created exclusively: never written through a planted link.
    let tmp = dir.join(format!(".{}.{}", key.0, crate::emit::random_suffix()));
    if crate::emit::create_exclusive(&tmp, text.as_bytes(), 0o600).is_ok()
        && std::fs::rename(&tmp, &path).is_err()
    {
        let _ = std::fs::remove_file(&tmp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gpustack-fresh-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn the_key_covers_every_file_and_flag() {
        let d = temp("key");
        std::fs::write(d.join("gpustack.toml"), "[stack]\n").unwrap();
        std::fs::write(
            d.join("gpustack.lock"),
            "version = 4\n[[python.lock]]\nfile = \"pylock.framework.toml\"\n",
        )
        .unwrap();
        std::fs::write(d.join("pylock.framework.toml"), "a\n").unwrap();
        let (spec, out) = (d.join("gpustack.toml"), d.join("gpustack.lock"));
        let req = Request {
            spec: &spec,
            out: &out,
            flags: "",
        };
        let k = Key::of(&req).unwrap();
        assert_eq!(Key::of(&req), Some(k.clone()), "deterministic");
        assert_ne!(
            Key::of(&Request {
                flags: "-v",
                ..req.clone()
            }),
            Some(k.clone())
        );
        std::fs::write(d.join("pylock.framework.toml"), "b\n").unwrap();
        let k2 = Key::of(&req).unwrap();
        assert_ne!(k2, k, "a pylock's bytes");
        std::fs::write(d.join("gpustack.toml"), "[stack] \n").unwrap();
        assert_ne!(Key::of(&req).unwrap(), k2, "the spec's bytes");
        std::fs::remove_file(d.join("pylock.framework.toml")).unwrap();
        assert_eq!(Key::of(&req), None, "a missing pylock: the full path");
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(d.join("gpustack.toml"), d.join("pylock.framework.toml"))
                .unwrap();
            assert_eq!(Key::of(&req), None, "a link: the full path");
        }
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn odd_pylock_names_are_not_read() {
        assert_eq!(
            pylock_files("file = \"pylock.a.toml\"\nx = 1\nfile = \"pylock.b.x86_64.toml\"\n"),
            Some(vec!["pylock.a.toml", "pylock.b.x86_64.toml"])
        );
        assert_eq!(pylock_files("file = \"../etc/passwd\"\n"), None);
        assert_eq!(pylock_files("file = \"pylock.a.toml\" # x\n"), None);
    }

    #[test]
    fn entries_read_back_whole_or_not_at_all() {
        let d = temp("entry");
        let key = Key("ab".repeat(32));
        assert_eq!(recall(&d, &key), None);
        let said = vec![
            Said {
                info: true,
                text: "locked `x` into gpustack.lock: cuda 12.8.1".into(),
            },
            Said {
                info: false,
                text: "warning: two\nlines \"quoted\"".into(),
            },
        ];
        remember(&d, &key, &said);
        assert_eq!(recall(&d, &key), Some(said));
        let path = entry_path(&d, &key);
        let text = std::fs::read_to_string(&path).unwrap();
        let cut = &text[..text.rfind("[[said]]").unwrap()];
        std::fs::write(&path, cut).unwrap();
        assert_eq!(recall(&d, &key), None, "a cut-off entry is not used");
        std::fs::write(&path, "").unwrap();
        assert_eq!(recall(&d, &key), None, "nor an empty one");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_cache_dir_follows_the_environment() {
        let p = |s: &str| Some(PathBuf::from(s));
        assert_eq!(cache_dir(p("/c"), p("/x"), p("/h")), p("/c"));
        assert_eq!(cache_dir(p(""), p("/x"), p("/h")), None);
        assert_eq!(cache_dir(None, p("/x"), p("/h")), p("/x/gpustack"));
        assert_eq!(cache_dir(None, p(""), p("/h")), p("/h/.cache/gpustack"));
        assert_eq!(cache_dir(None, None, None), None);
    }
}
