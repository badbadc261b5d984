//! The spec's `[python]` table: the user's own requirements per layer, checked before they
//! reach a resolver or a generated file.

use serde::Deserialize;
use toml::Spanned;

use crate::core::Layer;
use crate::spec::at::At;

/// `[python]`: the user's own requirements per layer, resolved together with the locked
/// components.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PythonReqs {
    /// `framework = [...]`: in every image.
    pub framework: Vec<String>,
    /// `inference = [...]`.
    pub inference: Vec<String>,
    /// `training = [...]`.
    pub training: Vec<String>,
}

impl PythonReqs {
    /// The list for a layer.
    pub fn of(&self, layer: Layer) -> &[String] {
        match layer {
            Layer::Framework => &self.framework,
            Layer::Inference => &self.inference,
            Layer::Training => &self.training,
            _ => &[],
        }
    }

    /// Whether nothing is listed.
    pub fn is_empty(&self) -> bool {
        self.framework.is_empty() && self.inference.is_empty() && self.training.is_empty()
    }
}

type S<T> = Spanned<T>;

/// `[python]` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PythonWire {
    pub(crate) framework: Option<Vec<S<String>>>,
    pub(crate) inference: Option<Vec<S<String>>>,
    pub(crate) training: Option<Vec<S<String>>>,
}

/// PEP 503 normalization: lowercase, runs of `-`, `_`, `.` become `-`.
pub fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut sep = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            sep = true;
        } else {
            if sep && !out.is_empty() {
                out.push('-');
            }
            sep = false;
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// The distribution name a PEP 508 requirement starts with, when it has one.
fn requirement_name(req: &str) -> Option<&str> {
    let end = req
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
        .unwrap_or(req.len());
    let name = &req[..end];
    let ok = name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    ok.then_some(name)
}

/// Why a `[python]` requirement is refused, and the hint; `None` when it is accepted.
fn check_requirement(req: &str) -> Option<(String, String)> {
    let shown = req.escape_debug();
    if req.trim().is_empty() {
        return Some((
            "an empty requirement".into(),
            "write a PEP 508 requirement: `datasets`, `transformers>=4.50`".into(),
        ));
    }
    if req.starts_with('-') {
        return Some((
            format!("`{shown}` is a pip option, not a requirement"),
            "indexes and options belong to gpustack: set mirrors in [resolve], and list only requirements here".into(),
        ));
    }
    if req.len() > 256
        || !req
            .bytes()
            .all(|c| (c.is_ascii_graphic() || c == b' ') && !b"\"\\`${}".contains(&c))
    {
        return Some((
            format!("`{shown}` is not a PEP 508 requirement gpustack can lock"),
            "use printable ASCII without quotes, backslashes, `$` or braces, at most 256 characters".into(),
        ));
    }
    let Some(name) = requirement_name(req) else {
        return Some((
            format!("`{shown}` does not start with a package name"),
            "write a PEP 508 requirement: `datasets`, `transformers>=4.50`".into(),
        ));
    };
    let rest = req[name.len()..].trim_start();
    if rest.starts_with('@') || req.contains("://") {
        return Some((
            format!("`{shown}` names a URL"),
            "a lock resolves from indexes only; publish the package to an index and point [resolve].pypi at it, or install it with your training code".into(),
        ));
    }
    if let Err(why) = super::pep508::check(req) {
        return Some((
            format!("`{shown}` is not a PEP 508 requirement: {why}"),
            "write `name[extras] specifiers; marker`, like `transformers>=4.50,<5` or `accelerate[deepspeed]; python_version >= '3.10'` (PEP 508, https://peps.python.org/pep-0508/)".into(),
        ));
    }
    let n = normalize(name);
    let component = match n.as_str() {
        "torch" => Some("torch"),
        "vllm" => Some("vllm"),
        "deepspeed" => Some("deepspeed"),
        _ => None,
    };
    if let Some(c) = component {
        return Some((
            format!("`{shown}` is a component the solver picks"),
            format!("set its requirement in [components] (`{c} = \"…\"`), where the solver checks it against the driver, CUDA and GPUs"),
        ));
    }
    None
}

impl PythonWire {
    pub(crate) fn validate(self, at: &mut At<'_>) -> PythonReqs {
        let mut list = |v: Option<Vec<S<String>>>| -> Vec<String> {
            let mut out: Vec<String> = Vec::new();
            for r in v.unwrap_or_default() {
                let span = r.span();
                let s = r.into_inner();
                if let Some((msg, hint)) = check_requirement(&s) {
                    at.fail(span, format!("[python]: {msg}"), &hint);
                } else if !out.contains(&s) {
                    out.push(s.trim().to_string());
                }
            }
            out
        };
        PythonReqs {
            framework: list(self.framework),
            inference: list(self.inference),
            training: list(self.training),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_normalize_as_pep_503() {
        assert_eq!(normalize("Flash_Attn"), "flash-attn");
        assert_eq!(normalize("a.-_b"), "a-b");
    }

    #[test]
    fn requirements_are_checked() {
        assert!(check_requirement("transformers>=4.50").is_none());
        assert!(check_requirement("datasets").is_none());
        assert!(check_requirement("accelerate[deepspeed]; python_version >= '3.10'").is_none());
        for bad in [
            "",
            "--index-url https://x",
            "pkg @ https://x/y.whl",
            "torch>=2",
            "DeepSpeed",
            "VLLM==0.19.1",
            "a\"b",
            "${X}",
            "transformers >= = 4",
            "datasets; python_version >>> '3'",
            "peft[",
            "peft]",
            "x==1 y==2",
            "a; os_name == 'x' or",
        ] {
            assert!(check_requirement(bad).is_some(), "{bad}");
        }
    }
}
