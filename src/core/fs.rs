//! Bounded reading of the files gpustack takes as input (specs, locks, catalog overlays,
//! hardware profiles, manifests): the size limits, the reader that never opens a FIFO or a
//! device and never reads past its limit, and why it failed.
//!
//! Nothing here depends on another module of the crate: callers turn a [`ReadError`] into
//! their own diagnostics. `emit` re-exports these for its users.

use std::fs::File;
use std::io::Read;
use std::path::Path;

/// What a path names, for messages: `a FIFO`, `a symbolic link`.
pub(crate) fn kind_of(ft: std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            return "a FIFO";
        }
        if ft.is_socket() {
            return "a socket";
        }
        if ft.is_char_device() {
            return "a character device";
        }
        if ft.is_block_device() {
            return "a block device";
        }
    }
    if ft.is_symlink() {
        "a symbolic link"
    } else if ft.is_dir() {
        "a directory"
    } else if ft.is_file() {
        "a file"
    } else {
        "not a regular file"
    }
}

/// Size limits of the files gpustack reads.
pub mod limits {
    /// A spec (`gpustack.toml`): a few dozen lines in practice.
    pub const SPEC: u64 = 1 << 20;
    /// A lock: the largest committed lock is about 20 KiB; a synthetic 100× catalog's
    /// about 100 KiB.
    pub const LOCK: u64 = 4 << 20;
    /// One catalog overlay file.
    pub const CATALOG_FILE: u64 = 8 << 20;
    /// A hardware profile or saved nvidia-smi output (XML for 8 GPUs is about 200 KiB).
    pub const HARDWARE: u64 = 16 << 20;
    /// A gpustack file inside an output directory (a target manifest, the journal).
    pub const MANIFEST: u64 = 1 << 20;
}

/// Why [`read_bounded`] failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum ReadError {
    /// Not there.
    NotFound,
    /// A directory, FIFO, device or socket: never opened.
    NotRegular(&'static str),
    /// Larger than the limit (by its metadata, or by what it yielded).
    TooLarge(u64),
    /// Another I/O error.
    Io(std::io::Error),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::NotFound => f.write_str("not found"),
            ReadError::NotRegular(what) => write!(f, "it is {what}, not a regular file"),
            ReadError::TooLarge(n) => write!(f, "it is larger than {}", human_size(*n)),
            ReadError::Io(e) => write!(f, "{e}"),
        }
    }
}

/// Reads a regular file of at most `limit` bytes. The file's metadata is checked first
/// (a FIFO or device is never opened, so `/dev/zero` or a FIFO cannot make it read
/// forever), then at most `limit + 1` bytes are read, in case the file grows. Symbolic
/// links are followed: an input may be a link to a file.
pub fn read_bounded(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    let m = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => ReadError::NotFound,
        _ => ReadError::Io(e),
    })?;
    if !m.is_file() {
        return Err(ReadError::NotRegular(kind_of(m.file_type())));
    }
    if m.len() > limit {
        return Err(ReadError::TooLarge(limit));
    }
    let f = File::open(path).map_err(ReadError::Io)?;
    // Opened after the check: if the name now is something else, it is checked again.
    let m2 = f.metadata().map_err(ReadError::Io)?;
    if !m2.is_file() {
        return Err(ReadError::NotRegular(kind_of(m2.file_type())));
    }
    let mut buf = Vec::with_capacity(usize::try_from(m2.len().min(limit)).unwrap_or(0));
    f.take(limit + 1)
        .read_to_end(&mut buf)
        .map_err(ReadError::Io)?;
    if buf.len() as u64 > limit {
        return Err(ReadError::TooLarge(limit));
    }
    Ok(buf)
}

/// A limit for messages: `1 MiB`.
pub fn human_size(n: u64) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} bytes")
    }
}

/// The cache directory from the environment's values: `GPUSTACK_CACHE_DIR` (empty: no
/// cache), else `XDG_CACHE_HOME/gpustack`, else `HOME/.cache/gpustack`.
pub fn cache_dir(
    gpustack_cache_dir: Option<std::path::PathBuf>,
    xdg_cache_home: Option<std::path::PathBuf>,
    home: Option<std::path::PathBuf>,
) -> Option<std::path::PathBuf> {
    if let Some(d) = gpustack_cache_dir {
        return (!d.as_os_str().is_empty()).then_some(d);
    }
    let nonempty = |p: std::path::PathBuf| (!p.as_os_str().is_empty()).then_some(p);
    xdg_cache_home
        .and_then(nonempty)
        .map(|x| x.join("gpustack"))
        .or_else(|| home.and_then(nonempty).map(|h| h.join(".cache/gpustack")))
}
