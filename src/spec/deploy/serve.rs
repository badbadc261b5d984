//! `[serve]`: the model vLLM serves, its parallelism, context length and replicas.

use serde::Deserialize;

use crate::spec::at::At;

use super::{is_safe_path, S};

/// `[serve]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Serve {
    /// Model path or Hugging Face id.
    pub model: String,
    /// Tensor-parallel size.
    pub tensor_parallel: u32,
    /// Maximum model length.
    pub max_model_len: u32,
    /// Replicas.
    pub replicas: u32,
    /// Nodes per replica (`nodes`, default 1): above one, each replica is a group of nodes
    /// (a LeaderWorkerSet on Kubernetes).
    pub nodes: u32,
    /// Pipeline-parallel size (`pipeline_parallel`, default 1, or `nodes` when only `nodes`
    /// is given).
    pub pipeline_parallel: u32,
}

impl Serve {
    /// GPUs of one replica: tensor × pipeline parallel.
    pub fn gpus(&self) -> u32 {
        self.tensor_parallel.saturating_mul(self.pipeline_parallel)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ServeWire {
    pub(super) model: Option<S<String>>,
    pub(super) tensor_parallel: Option<S<i64>>,
    max_model_len: Option<S<i64>>,
    replicas: Option<S<i64>>,
    nodes: Option<S<i64>>,
    pipeline_parallel: Option<S<i64>>,
}

/// A model: a safe absolute path or a Hugging Face id (`org/name`).
pub fn is_model(s: &str) -> bool {
    is_safe_path(s)
        || (s.len() <= 200
            && s.split('/').count() <= 2
            && !s.starts_with(['.', '-', '/'])
            && !s.contains("..")
            && s.bytes()
                .all(|c| c.is_ascii_alphanumeric() || b"/._-".contains(&c)))
}

/// `[serve]`, validated.
pub(super) fn validate_serve(s: S<ServeWire>, at: &mut At<'_>) -> (Serve, std::ops::Range<usize>) {
    let span = s.span();
    let s = s.into_inner();
    let model = at.need(
        s.model,
        ("serve", &span),
        "model",
        "\"meta-llama/Llama-3.1-8B\"",
        "model".into(),
    );
    let model_span = model.span();
    if !is_model(model.get_ref()) {
        at.fail(model.span(), format!("invalid model `{}`", model.get_ref().escape_debug()), "use an absolute path like `/models/llama-3-70b` or a Hugging Face id like `meta-llama/Llama-3.1-8B`");
    }
    let tp = s
        .tensor_parallel
        .as_ref()
        .map_or(1, |v| at.count(v, "tensor_parallel", 16));
    let len = s
        .max_model_len
        .as_ref()
        .map_or(4096, |v| at.count(v, "max_model_len", 10_000_000));
    let replicas = s
        .replicas
        .as_ref()
        .map_or(1, |v| at.count(v, "replicas", 1000));
    let nodes = s.nodes.as_ref().map_or(1, |v| at.count(v, "nodes", 64));
    let pp = s
        .pipeline_parallel
        .as_ref()
        .map_or(nodes, |v| at.count(v, "pipeline_parallel", 64));
    (
        Serve {
            model: model.into_inner(),
            tensor_parallel: tp,
            max_model_len: len,
            replicas,
            nodes,
            pipeline_parallel: pp,
        },
        model_span,
    )
}
