//! The spec's deployment tables, read by the generators: `[cluster]`, `[network]`, `[image]`,
//! `[train]`, `[serve]`, `[packer]`, `[k8s]`, `[slurm]`, `[storage]`.
//!
//! Every value is validated here, before it can reach a generated file: names and
//! namespaces are DNS labels, registries are plain image references, paths are absolute and
//! free of `..` and shell or template metacharacters, sizes are bounded. Generators still
//! quote every value for their target, so validation and escaping are two independent
//! defences. The lock records these tables inside `[request]`, so `gen` needs only the lock.

mod cluster;
mod image;
mod k8s;
mod network;
mod packer;
mod serve;
mod slurm;
mod storage;
mod train;

pub use crate::core::{Cloud, Fabric, StorageRef};
pub use cluster::Cluster;
pub(crate) use cluster::ClusterWire;
pub(crate) use image::ImageWire;
pub use image::{is_registry, Image};
pub(crate) use k8s::K8sWire;
pub use k8s::{
    is_label_value, monitor_labels_of, GangScheduler, K8s, TrainingApi, DEFAULT_K8S_NAMESPACE,
    DEFAULT_K8S_VERSION, DEFAULT_MONITOR_LABELS,
};
pub(crate) use network::{fabric_device, NetworkWire};
pub use network::{
    is_hca, is_interface, is_ipv4_subnet, subnet_hosts, Network, POD_BLOCK, POD_INTERFACE,
};
pub use packer::Packer;
pub(crate) use packer::PackerWire;
pub(crate) use serve::ServeWire;
pub use serve::{is_model, Serve};
pub(crate) use slurm::SlurmWire;
pub use slurm::{is_slurm_time, Slurm, SlurmContainer};
pub(crate) use storage::StorageWire;
pub use storage::{parse_storage, Storage, MODELS_DIR};
pub(crate) use train::TrainWire;
pub use train::{Entry, Train};

use serde::Deserialize;
use toml::Spanned;

use crate::spec::at::At;

use cluster::validate_cluster;
use image::validate_image;
use k8s::validate_k8s;
use network::validate_network;
use packer::validate_packer;
use serve::validate_serve;
use slurm::validate_slurm;
use storage::validate_storage;
use train::validate_train;

/// All deployment tables of a spec.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Deploy {
    /// `[cluster]`.
    pub cluster: Option<Cluster>,
    /// `[network]`.
    pub network: Option<Network>,
    /// `[image]`.
    pub image: Option<Image>,
    /// `[train]`.
    pub train: Option<Train>,
    /// `[serve]`.
    pub serve: Option<Serve>,
    /// `[packer]`.
    pub packer: Option<Packer>,
    /// `[k8s]`.
    pub k8s: Option<K8s>,
    /// `[slurm]`.
    pub slurm: Option<Slurm>,
    /// `[storage]`.
    pub storage: Option<Storage>,
    /// `[resolve]`: where `gpustack lock` resolves digests and package versions.
    pub resolve: Option<crate::spec::resolve::Resolve>,
    /// `[python]`: the user's own Python requirements per layer.
    pub python: crate::spec::python::PythonReqs,
}

type S<T> = Spanned<T>;

/// The deployment tables as written; embedded (flattened by hand) in the spec's and the
/// lock request's wire types.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct DeployWire {
    pub(crate) cluster: Option<S<ClusterWire>>,
    pub(crate) network: Option<S<NetworkWire>>,
    pub(crate) image: Option<S<ImageWire>>,
    pub(crate) train: Option<S<TrainWire>>,
    pub(crate) serve: Option<S<ServeWire>>,
    pub(crate) packer: Option<S<PackerWire>>,
    pub(crate) k8s: Option<S<K8sWire>>,
    pub(crate) slurm: Option<S<SlurmWire>>,
    pub(crate) storage: Option<S<StorageWire>>,
    pub(crate) resolve: Option<S<crate::spec::resolve::ResolveWire>>,
    pub(crate) python: Option<S<crate::spec::python::PythonWire>>,
}

/// A DNS-1123 label: `[a-z0-9]([a-z0-9-]*[a-z0-9])?`, at most 63 characters.
pub fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

/// A Kubernetes label key: an optional DNS-subdomain prefix and `/`, then a name of at most
/// 63 letters, digits, `-`, `_` and `.`, starting and ending with a letter or digit.
pub fn is_label_key(s: &str) -> bool {
    let (prefix, name) = s.rsplit_once('/').map_or((None, s), |(p, n)| (Some(p), n));
    let nb = name.as_bytes();
    let name_ok = !nb.is_empty()
        && nb.len() <= 63
        && nb[0].is_ascii_alphanumeric()
        && nb[nb.len() - 1].is_ascii_alphanumeric()
        && nb
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'));
    name_ok && prefix.is_none_or(|p| p.len() <= 253 && p.split('.').all(is_dns_label))
}

/// An absolute path without `..`, whitespace or shell/template metacharacters.
pub fn is_safe_path(s: &str) -> bool {
    s.starts_with('/')
        && s.len() <= 512
        && !s.split('/').any(|seg| seg == "..")
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"/._-+@=,".contains(&c))
}

impl Deploy {
    /// Whether the request configures the Packer, Kubernetes and Slurm targets, which
    /// `gpustack lock` then makes sure render: a target with its table, or all three when
    /// the spec has none of their tables (`gpustack gen all` renders each with its
    /// defaults). A spec written for Kubernetes alone is not refused for what only Slurm
    /// cannot do. Docker and Apptainer have no table and are always configured.
    pub fn configures(&self) -> (bool, bool, bool) {
        let none = self.packer.is_none() && self.k8s.is_none() && self.slurm.is_none();
        (
            none || self.packer.is_some(),
            none || self.k8s.is_some(),
            none || self.slurm.is_some(),
        )
    }

    /// What the generators need of several tables together, checked at lock time so that
    /// `gen` never refuses a lock (each at the value's line).
    fn cross_check(
        &self,
        at: &mut At<'_>,
        tp_span: Option<std::ops::Range<usize>>,
        model_span: Option<std::ops::Range<usize>>,
        workdir_span: Option<std::ops::Range<usize>>,
        storage_spans: &[(&'static str, std::ops::Range<usize>)],
    ) {
        if let (Some(serve), Some(span)) = (&self.serve, tp_span.or(model_span.clone())) {
            self.check_serve_fits(serve, span, at);
        }
        self.check_slurm_mounts(at, model_span, workdir_span, storage_spans);
    }

    /// `[serve]` against the nodes it runs on.
    fn check_serve_fits(&self, serve: &Serve, span: std::ops::Range<usize>, at: &mut At<'_>) {
        // A replica of the server spans `nodes` nodes, each running an equal share of its
        // tensor × pipeline parallel GPUs.
        let per_node = self.cluster.as_ref().map_or(8, |c| c.gpus_per_node);
        let gpus = serve.gpus();
        if serve.nodes == 1 && serve.pipeline_parallel == 1 && serve.tensor_parallel > per_node {
            at.fail(
                span.clone(),
                format!(
                    "`tensor_parallel = {}` is more than the {per_node} GPUs of a node",
                    serve.tensor_parallel
                ),
                &format!("lower `tensor_parallel` to at most {per_node} (`[cluster].gpus_per_node`, 8 when there is no [cluster]), or spread the server over nodes (`nodes`, `pipeline_parallel`)"),
            );
        } else if gpus.div_ceil(serve.nodes) > per_node {
            at.fail(
                span.clone(),
                format!("[serve].tensor_parallel × pipeline_parallel = {} × {} = {gpus} GPUs do not fit {} node(s) of {per_node} GPUs", serve.tensor_parallel, serve.pipeline_parallel, serve.nodes),
                "lower `tensor_parallel` to at most [cluster].gpus_per_node, or raise `nodes` and `pipeline_parallel` together",
            );
        } else if serve.nodes > 1 && !gpus.is_multiple_of(serve.nodes) {
            at.fail(
                span.clone(),
                format!(
                    "[serve] needs {gpus} GPUs, which do not split evenly over {} nodes",
                    serve.nodes
                ),
                "make tensor_parallel × pipeline_parallel a multiple of `nodes`",
            );
        }
        if serve.nodes > 1 && self.configures().2 {
            at.fail(
                span.clone(),
                format!("[serve].nodes = {}: a vLLM server across nodes is generated for Kubernetes only (a LeaderWorkerSet), not yet as a Slurm job", serve.nodes),
                "leave [slurm] out of a spec that serves across nodes (and keep [k8s]), or serve on one node (`nodes = 1`)",
            );
        }
        if let Some(c) = &self.cluster {
            if serve.nodes > c.nodes {
                at.fail(
                    span,
                    format!(
                        "[serve].nodes = {} is more than the {} nodes of [cluster]",
                        serve.nodes, c.nodes
                    ),
                    "lower `nodes` or raise [cluster].nodes",
                );
            }
        }
    }

    /// Pyxis and Apptainer mount syntax against the paths `gen slurm` mounts.
    fn check_slurm_mounts(
        &self,
        at: &mut At<'_>,
        model_span: Option<std::ops::Range<usize>>,
        workdir_span: Option<std::ops::Range<usize>>,
        storage_spans: &[(&'static str, std::ops::Range<usize>)],
    ) {
        // Pyxis (`--container-mounts`) and Apptainer (`--bind`) separate mounts with `,`
        // and their fields with `:`; `gen slurm` mounts the storage, the training code's
        // directory and a model path.
        if !self.configures().2 {
            return;
        }
        let container = self
            .slurm
            .as_ref()
            .map_or(SlurmContainer::Pyxis, |s| s.container);
        if container == SlurmContainer::None {
            return;
        }
        let hint = format!(
            "{} separates mounts with `,` and their fields with `:`: use a path without them, or `[slurm].container = \"none\"`",
            container.name()
        );
        let host_path = |r: &StorageRef| match r {
            StorageRef::Nfs { path, .. }
            | StorageRef::Lustre { path }
            | StorageRef::HostPath { path } => Some(path.clone()),
            StorageRef::Pvc { .. } => None,
        };
        let mut check = |what: String, r: Option<&StorageRef>, span: std::ops::Range<usize>| {
            if let Some(path) = r.and_then(host_path) {
                if path.contains([',', ':']) {
                    at.fail(
                        span,
                        format!(
                            "{what} path `{path}` cannot be mounted by {}",
                            container.name()
                        ),
                        &hint,
                    );
                }
            }
        };
        if let Some(st) = &self.storage {
            for (name, span) in storage_spans {
                let r = match *name {
                    "datasets" => st.datasets.as_ref(),
                    "checkpoints" => st.checkpoints.as_ref(),
                    _ => st.models.as_ref(),
                };
                check(format!("`[storage].{name}`"), r, span.clone());
            }
        }
        if let (Some(t), Some(span)) = (&self.train, workdir_span) {
            check("`[train].workdir`".into(), t.workdir.as_ref(), span);
        }
        if let (Some(s), Some(span)) = (&self.serve, model_span) {
            if s.model.starts_with('/') && s.model.contains([',', ':']) {
                at.fail(
                    span,
                    format!(
                        "model path `{}` cannot be mounted by {}",
                        s.model,
                        container.name()
                    ),
                    &hint,
                );
            }
        }
    }
}

/// Checks a list of names: not empty, each `ok`, no repeats.
fn names(
    at: &mut At<'_>,
    v: Option<&S<Vec<String>>>,
    key: &str,
    ok: fn(&str) -> bool,
    what: &str,
    hint: &str,
) -> Vec<String> {
    let Some(v) = v else { return Vec::new() };
    let list = v.get_ref();
    if list.is_empty() || list.len() > 64 {
        at.fail(
            v.span(),
            format!("`[network].{key}` must list 1 to 64 names"),
            &format!("{hint}, or leave `{key}` out"),
        );
        return Vec::new();
    }
    let mut out: Vec<String> = Vec::new();
    for x in list {
        if !ok(x) {
            at.fail(
                v.span(),
                format!("`{}` in `[network].{key}` is not {what}", x.escape_debug()),
                hint,
            );
        } else if out.contains(x) {
            at.fail(
                v.span(),
                format!(
                    "`{}` is listed twice in `[network].{key}`",
                    x.escape_debug()
                ),
                "list each name once",
            );
        } else {
            out.push(x.clone());
        }
    }
    out
}

/// An integer key within `range`; `None` (reported at its span) outside it.
fn bounded(
    at: &mut At<'_>,
    (key, v): (&str, &S<i64>),
    range: std::ops::RangeInclusive<i64>,
    hint: &str,
) -> Option<u32> {
    let n = *v.get_ref();
    if range.contains(&n) {
        return u32::try_from(n).ok();
    }
    at.fail(
        v.span(),
        format!(
            "`{key}` must be between {} and {}, not {n}",
            range.start(),
            range.end()
        ),
        hint,
    );
    None
}

impl DeployWire {
    pub(crate) fn validate(self, at: &mut At<'_>) -> Deploy {
        // Where the values that the cross-table checks below look at were written.
        let tp_span = self
            .serve
            .as_ref()
            .and_then(|s| s.get_ref().tensor_parallel.as_ref().map(Spanned::span));
        let model_span = self
            .serve
            .as_ref()
            .and_then(|s| s.get_ref().model.as_ref().map(Spanned::span));
        let workdir_span = self
            .train
            .as_ref()
            .and_then(|t| t.get_ref().workdir.as_ref().map(Spanned::span));
        let storage_spans: Vec<(&'static str, std::ops::Range<usize>)> = self
            .storage
            .as_ref()
            .map(|s| {
                let s = s.get_ref();
                [
                    ("datasets", &s.datasets),
                    ("checkpoints", &s.checkpoints),
                    ("models", &s.models),
                ]
                .into_iter()
                .filter_map(|(n, v)| v.as_ref().map(|v| (n, v.span())))
                .collect()
            })
            .unwrap_or_default();
        let d = self.validate_tables(at);
        d.cross_check(at, tp_span, model_span, workdir_span, &storage_spans);
        d
    }

    fn validate_tables(self, at: &mut At<'_>) -> Deploy {
        let mut d = Deploy::default();
        if let Some(c) = self.cluster {
            d.cluster = Some(validate_cluster(c, at));
        }
        if let Some(n) = self.network {
            let fabric = d.cluster.as_ref().map(|c| c.fabric);
            let nodes = d.cluster.as_ref().map_or(1, |c| c.nodes);
            d.network = Some(validate_network(n, fabric, nodes, at));
        }
        if let Some(i) = self.image {
            d.image = Some(validate_image(i, at));
        }
        if let Some(t) = self.train {
            d.train = Some(validate_train(t, at));
        }
        let mut model_span = None;
        if let Some(s) = self.serve {
            let (serve, span) = validate_serve(s, at);
            model_span = Some(span);
            d.serve = Some(serve);
        }
        if let Some(p) = self.packer {
            d.packer = Some(validate_packer(p, at));
        }
        if let Some(k) = self.k8s {
            d.k8s = Some(validate_k8s(k, at));
        }
        if let Some(s) = self.slurm {
            d.slurm = Some(validate_slurm(s, at));
        }
        if let Some(s) = self.storage {
            d.storage = Some(validate_storage(s, at));
        }
        // A model path is served from `[storage].models`, which every target mounts at
        // `/models`: the path must lie there.
        if let (Some(serve), Some(span)) = (&d.serve, model_span) {
            let models = d.storage.as_ref().and_then(|s| s.models.as_ref());
            if models.is_some()
                && serve.model.starts_with('/')
                && !serve.model.starts_with(&format!("{MODELS_DIR}/"))
            {
                at.fail(
                    span,
                    format!("`model = \"{}\"` is not under {MODELS_DIR}, where [storage].models is mounted", serve.model.escape_debug()),
                    "name the model by its path under /models (`/models/<dir>`), or by a Hugging Face id",
                );
            }
        }
        // `[resolve]` last, as the spec and the lock write it.
        Deploy {
            resolve: self.resolve.map(|r| r.into_inner().validate(at)),
            python: self
                .python
                .map(|p| p.into_inner().validate(at))
                .unwrap_or_default(),
            ..d
        }
    }
}

#[cfg(test)]
mod tests;
