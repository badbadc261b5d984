//! The Kubernetes plan (issue 5): not implemented yet.

use super::Common;
use crate::error::{Diagnostic, Error, Stage};
use crate::lock::Lock;
use crate::render::RenderedFile;

/// `out/k8s/`.
pub fn render(_lock: &Lock, _common: &Common) -> Result<Vec<RenderedFile>, Error> {
    Err(
        Diagnostic::new(Stage::Generate, "`gen k8s` is not available in this build")
            .hint("available targets: docker, apptainer")
            .into(),
    )
}
