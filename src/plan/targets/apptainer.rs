//! The Apptainer plan: one definition file for the top image layer the stack builds. It
//! prints the container plan ([`DockerPlan`]), the same pins and environment as the
//! Dockerfile, as Apptainer syntax.

use serde::Serialize;

use super::docker::DockerPlan;
use crate::core::Layer;
use crate::error::Error;
use crate::lock::Lock;
use crate::plan::Common;
use crate::render::RenderedFile;

/// `out/apptainer/<stack>.def`.
pub fn render(lock: &Lock, common: &Common) -> Result<Vec<RenderedFile>, Error> {
    let plan = DockerPlan::new(lock, common)?;
    let top = common.top_image_layer().unwrap_or(Layer::Base);
    #[derive(Serialize)]
    struct Ctx<'a> {
        plan: &'a DockerPlan,
        layer: &'a str,
        image: &'a str,
    }
    let image = common.images.get(&top).map_or("", String::as_str);
    let text = crate::render::render(
        "apptainer/stack.def.j2",
        &Ctx {
            plan: &plan,
            layer: top.name(),
            image,
        },
    )?;
    Ok(vec![RenderedFile::new(
        format!("{}.def", common.stack),
        text,
    )])
}
