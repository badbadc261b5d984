//! `gpustack init`: a commented starter gpustack.toml, never over an existing file.

use std::path::PathBuf;

use gpustack::error::{Diagnostic, Stage};
use gpustack::{Catalog, Error};

use crate::show;

#[derive(clap::Args)]
pub(crate) struct Args {
    /// The GPU: a catalog id or alias, or the name nvidia-smi prints
    /// (`"NVIDIA H100 80GB HBM3"`); repeat it for a stack that runs on several
    #[arg(long, default_value = "h100", value_name = "ID|NAME")]
    gpu: Vec<String>,
    /// The installed driver version (omit to let gpustack pick one)
    #[arg(long, value_name = "VERSION")]
    driver: Option<String>,
    /// Where to write the spec
    #[arg(long, default_value = "gpustack.toml", value_name = "PATH")]
    path: PathBuf,
}

pub(crate) fn run(args: Args) -> Result<u8, Error> {
    let Args { gpu, driver, path } = args;
    let catalog = Catalog::stock()?;
    let mut gs = Vec::with_capacity(gpu.len());
    for gpu in &gpu {
        let g = catalog.gpu(gpu).ok_or_else(|| {
            let mut d = Diagnostic::new(Stage::Usage, format!("unknown GPU `{gpu}`"));
            if let Some(s) = catalog.gpu_suggestion(gpu) {
                d = d.hint(format!("did you mean `--gpu {s}`?"));
            }
            d.hint(format!(
                "GPU ids are: {}",
                catalog
                    .gpus
                    .iter()
                    .map(|g| g.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        if !gs.iter().any(|x: &&gpustack::catalog::Gpu| x.id == g.id) {
            gs.push(g);
        }
    }
    if let Some(d) = &driver {
        let ok = gpustack::Version::parse(d)
            .is_ok_and(|v| v.parts().len() >= 2 && v.parts().len() <= 3 && v.local().is_none());
        if !ok {
            return Err(
                Diagnostic::new(Stage::Usage, format!("invalid driver version `{d}`"))
                    .hint("write the version `nvidia-smi` prints, like `550.54.15`")
                    .into(),
            );
        }
    }
    let shown = gpustack::emit::shown(&path);
    if std::fs::symlink_metadata(&path).is_ok() {
        return Err(Diagnostic::new(
            Stage::Usage,
            format!("`{shown}` already exists; `init` never overwrites"),
        )
        .hint("edit it, or pass `--path` to write somewhere else")
        .into());
    }
    let text = show::starter(&gs, driver.as_deref());
    // Written to a temporary file, then linked into place: a full disk leaves no empty
    // spec behind to block the next `init`.
    gpustack::emit::write_new(&path, text.as_bytes())?;
    crate::info!("wrote {shown}; next: `gpustack lock`");
    Ok(0)
}
