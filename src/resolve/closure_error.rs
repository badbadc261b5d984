//! Why the Python closure could not be locked ([`ClosureError`]): shared by the closure
//! (`python.rs`) and the pinned uv's download (`uv.rs`), so that neither imports the other
//! back.

use std::fmt;

/// Why the closure could not be locked.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClosureError {
    /// No uv of the pinned version.
    Uv {
        /// What was found or tried.
        detail: String,
        /// The version the lock pins.
        pinned: String,
    },
    /// uv ran and refused: its own explanation.
    Resolve {
        /// The layer.
        layer: String,
        /// uv's message.
        message: String,
    },
    /// A file in the result without a hash.
    Unhashed {
        /// The layer.
        layer: String,
        /// The package.
        package: String,
    },
    /// The closure's NVIDIA wheels disagree with the solver.
    Disagrees {
        /// The layer.
        layer: String,
        /// What.
        detail: String,
    },
    /// uv could not reach an index: its whole cause chain, as it printed it.
    Index {
        /// The layer.
        layer: String,
        /// uv's message, every `Caused by:` line kept.
        message: String,
        /// The `[resolve]` key that points that index elsewhere: `pypi` or `indexes`.
        setting: &'static str,
    },
    /// The pinned uv wheel could not be downloaded.
    Download {
        /// The URL.
        url: String,
        /// Why.
        error: crate::resolve::http::FetchError,
    },
    /// The downloaded uv wheel is not the file the catalog pins.
    WheelDigest {
        /// The URL.
        url: String,
        /// The catalog's sha256.
        expected: String,
        /// The received file's.
        got: String,
    },
    /// Offline with nothing to reuse.
    Offline {
        /// Why it is needed.
        detail: String,
    },
    /// Anything else (I/O on the temporary directory, unreadable output).
    Other(String),
}

impl fmt::Display for ClosureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClosureError::Uv { detail, pinned } => {
                write!(f, "the Python closure needs uv {pinned}: {detail}")
            }
            ClosureError::Resolve { layer, message } => {
                write!(f, "uv cannot resolve the {layer} layer's Python closure:\n{message}")
            }
            ClosureError::Unhashed { layer, package } => write!(
                f,
                "the {layer} layer's closure has `{package}` without a sha256: a build could not check it"
            ),
            ClosureError::Disagrees { layer, detail } => {
                write!(f, "the {layer} layer's Python closure disagrees with the lock: {detail}")
            }
            ClosureError::Index { layer, message, .. } => write!(
                f,
                "uv could not reach an index for the {layer} layer's Python closure:\n{message}"
            ),
            ClosureError::Download { error, .. } => {
                write!(f, "the pinned uv could not be downloaded: {error}")
            }
            ClosureError::WheelDigest { url, expected, got } => write!(
                f,
                "the uv wheel `{url}` is {got}, not the {expected} the catalog pins (refused)"
            ),
            ClosureError::Offline { detail } => write!(f, "offline: {detail}"),
            ClosureError::Other(s) => f.write_str(s),
        }
    }
}

impl ClosureError {
    /// What to do about it.
    pub fn hint(&self) -> String {
        match self {
            ClosureError::Uv { pinned, .. } => format!(
                "install it (`pip install uv=={pinned}`) or set GPUSTACK_UV to its path; `--allow-open` writes the lock without the closure (builds then resolve at build time)"
            ),
            ClosureError::Index { setting, .. } => format!(
                "point `[resolve].{setting}` at a mirror that answers, or lock with `--offline` (the recorded closure is reused)"
            ),
            ClosureError::Download { .. } | ClosureError::WheelDigest { .. } => "point `[resolve].pypi` at a mirror that serves the same wheel, set GPUSTACK_UV to a uv of the pinned version, or lock with `--offline`".into(),
            ClosureError::Resolve { .. } => "relax the [python] requirement uv names, or point [resolve] at an index that has the package; the components' pins come from the solver (`gpustack why`)".into(),
            ClosureError::Unhashed { .. } => "use an index that publishes sha256 digests (PEP 503 `#sha256=` or PEP 691 `hashes`)".into(),
            ClosureError::Disagrees { .. } => "a [python] requirement pulls in another cuDNN or NCCL wheel than the solver picked: remove it, or pin the component in [components]".into(),
            ClosureError::Offline { .. } => "run `gpustack lock` with network access once; later offline re-locks reuse the recorded closure".into(),
            ClosureError::Other(_) => "check the temporary directory (TMPDIR) is writable".into(),
        }
    }
}
