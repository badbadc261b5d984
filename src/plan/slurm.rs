//! The Slurm plan (issue 6): not implemented yet.

use super::Common;
use crate::error::{Diagnostic, Error, Stage};
use crate::lock::Lock;
use crate::render::RenderedFile;

/// `out/slurm/`.
pub fn render(_lock: &Lock, _common: &Common) -> Result<Vec<RenderedFile>, Error> {
    Err(Diagnostic::new(
        Stage::Generate,
        "`gen slurm` is not available in this build",
    )
    .hint("available targets: docker, apptainer")
    .into())
}
