//! `[packer]`: the clouds a VM image is built for.

use serde::Deserialize;

use crate::core::Cloud;
use crate::spec::at::At;

use super::S;

/// `[packer]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packer {
    /// Clouds to build for.
    pub clouds: Vec<Cloud>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PackerWire {
    clouds: Option<S<Vec<String>>>,
}

/// `[packer]`, validated.
pub(super) fn validate_packer(p: S<PackerWire>, at: &mut At<'_>) -> Packer {
    let span = p.span();
    let p = p.into_inner();
    let missing = p.clouds.is_none();
    let p_clouds = at.need(
        p.clouds,
        ("packer", &span),
        "clouds",
        "[\"aws\"]",
        Vec::new(),
    );
    let mut clouds = Vec::new();
    for c in p_clouds.get_ref() {
        match Cloud::ALL.into_iter().find(|x| x.name() == c) {
            Some(x) if !clouds.contains(&x) => clouds.push(x),
            Some(_) => {}
            None => at.fail(
                p_clouds.span(),
                format!("unknown cloud `{}`", c.escape_debug()),
                "clouds are: aws, gcp, azure, qemu",
            ),
        }
    }
    if !missing && clouds.is_empty() && p_clouds.get_ref().is_empty() {
        at.fail(
            p_clouds.span(),
            "`clouds` is empty".into(),
            "list at least one of: aws, gcp, azure, qemu",
        );
    }
    clouds.sort();
    Packer { clouds }
}
