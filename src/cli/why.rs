//! `gpustack why`: why a component has its locked version.

use std::path::PathBuf;

use gpustack::error::{Diagnostic, Stage};
use gpustack::generate::LockFile;
use gpustack::{Component, Error};

use super::{json_text, TextOrJson};
use crate::{out_text, show, stdout};

#[derive(clap::Args)]
pub(crate) struct Args {
    /// driver, cuda, cudnn, nccl, python, torch, vllm, deepspeed, or an extra
    /// (flash-attn, xformers, transformers, accelerate, bitsandbytes, tensorrt-llm, cupy,
    /// nvidia-dali)
    component: String,
    /// The lock to read
    #[arg(long, default_value = "gpustack.lock", value_name = "PATH")]
    lock: PathBuf,
    /// Output format
    #[arg(long, value_enum, default_value_t = TextOrJson::Text)]
    format: TextOrJson,
}

pub(crate) fn run(args: Args, verbose: bool) -> Result<u8, Error> {
    let component = &args.component;
    let c = Component::lookup(component).map_err(|near| {
        let mut d = Diagnostic::new(Stage::Usage, format!("unknown component `{component}`"));
        if let Some(s) = near {
            d = d.hint(format!("did you mean `gpustack why {s}`?"));
        }
        d.hint(format!(
            "components are: {}",
            Component::ALL.map(Component::name).join(", ")
        ))
    })?;
    let lock = LockFile::read(
        &args.lock,
        "create it with `gpustack lock`, or pass `--lock PATH`",
    )?
    .lock;
    let Some(lc) = lock.component(c) else {
        return Err(Diagnostic::new(
            Stage::Usage,
            format!(
                "`{component}` is not part of the locked stack `{}`",
                lock.request.name
            ),
        )
        .hint(format!(
            "the lock holds: {}",
            lock.components
                .iter()
                .map(|c| c.name.name())
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .into());
    };
    let _ = match args.format {
        TextOrJson::Json => stdout(&json_text(&show::why_json(&lock, lc))),
        TextOrJson::Text => out_text(&show::why(&lock, lc, verbose)),
    };
    Ok(0)
}
