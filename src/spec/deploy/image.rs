//! `[image]`: the registry the images are pushed to and the layers built.

use serde::Deserialize;

use crate::core::Layer;
use crate::spec::at::At;

use super::S;

/// `[image]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    /// Where images are pushed: `registry.example.com/ml`.
    pub registry: String,
    /// Layers to build, bottom first.
    pub layers: Vec<Layer>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ImageWire {
    registry: Option<S<String>>,
    layers: Option<S<Vec<String>>>,
}

/// An image registry prefix: `host[:port]/path`, lowercase, no tag or digest.
pub fn is_registry(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 200
        && !s.starts_with(['/', '.', '-', ':'])
        && !s.ends_with('/')
        && !s.contains("//")
        && !s.contains("..")
        && s.bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || b"._-/:".contains(&c))
        && s.split('/').skip(1).all(|seg| !seg.contains(':'))
        && crate::core::url::port_ok(s.split('/').next().unwrap_or(""))
}

/// `[image]`, validated.
pub(super) fn validate_image(i: S<ImageWire>, at: &mut At<'_>) -> Image {
    let span = i.span();
    let i = i.into_inner();
    let registry = at.need(
        i.registry,
        ("image", &span),
        "registry",
        "\"registry.example.com/ml\"",
        String::new(),
    );
    if !registry.get_ref().is_empty() && !is_registry(registry.get_ref()) {
        at.fail(
            registry.span(),
            format!("invalid registry `{}`", registry.get_ref().escape_debug()),
            "write a lowercase registry prefix without tag, like `registry.example.com/ml`",
        );
    }
    let mut layers = Vec::new();
    match &i.layers {
        None => layers.extend(Layer::ALL),
        Some(ls) => {
            for l in ls.get_ref() {
                match Layer::from_name(l) {
                    Some(x) if !layers.contains(&x) => layers.push(x),
                    Some(_) => {}
                    None => at.fail(
                        ls.span(),
                        format!("unknown layer `{}`", l.escape_debug()),
                        "layers are: base, framework, inference, training, validate",
                    ),
                }
            }
            layers.sort();
            if !layers.contains(&Layer::Base) {
                layers.insert(0, Layer::Base);
            }
        }
    }
    Image {
        registry: registry.into_inner(),
        layers,
    }
}
