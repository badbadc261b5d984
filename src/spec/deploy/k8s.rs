//! `[k8s]`: namespace, Kubernetes version, training API, Kueue queue and topology, gang
//! scheduler and monitor labels.

use serde::Deserialize;

use crate::spec::at::At;

use super::{is_dns_label, is_label_key, S};

/// How training runs on Kubernetes (`[k8s].training_api`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrainingApi {
    /// Kubeflow Trainer v2: a `TrainJob` referencing a `TrainingRuntime` (the default).
    TrainJob,
    /// The legacy Kubeflow training-operator v1 `PyTorchJob`.
    PyTorchJob,
}

impl TrainingApi {
    /// The spec spelling.
    pub fn name(self) -> &'static str {
        match self {
            TrainingApi::TrainJob => "trainjob",
            TrainingApi::PyTorchJob => "pytorchjob",
        }
    }
}

/// `[k8s]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct K8s {
    /// Namespace.
    pub namespace: String,
    /// Kubernetes version targeted, `1.30`.
    pub version: String,
    /// The training API (`training_api`, default `trainjob`).
    pub training_api: TrainingApi,
    /// Kueue `LocalQueue` every workload is submitted to (`queue`).
    pub queue: Option<String>,
    /// Node label of the topology level the training pods must share (`topology`, needs
    /// `queue`).
    pub topology: Option<String>,
    /// The gang scheduler of multi-node workloads without `queue` (`gang`, default
    /// `coscheduling`).
    pub gang: GangScheduler,
    /// The labels of the generated ServiceMonitor/PodMonitor (and the DCGM exporter's),
    /// which the cluster's Prometheus selects them by (`monitor_labels`, default
    /// [`DEFAULT_MONITOR_LABELS`]), sorted by key.
    pub monitor_labels: Vec<(String, String)>,
}

/// `[k8s].namespace` when the key is left out (also without a `[k8s]` table).
pub const DEFAULT_K8S_NAMESPACE: &str = "gpustack";

/// `[k8s].version` when the key is left out: the Kubernetes minor the manifests are
/// validated against (tests/k8s.rs, kubernetes-validate 1.30.0).
pub const DEFAULT_K8S_VERSION: &str = "1.30";

/// kube-prometheus-stack's default selector: its Prometheus selects ServiceMonitors and
/// PodMonitors labelled `release: <the Helm release>`
/// (`serviceMonitorSelectorNilUsesHelmValues: true`; prometheus-community/helm-charts
/// commit 1514b96530e0e85ae1bf89eb256c029d0cf8ce03,
/// `charts/kube-prometheus-stack/templates/prometheus/prometheus.yaml`), with the release
/// named as the chart, as its install commands name it.
pub const DEFAULT_MONITOR_LABELS: [(&str, &str); 1] = [("release", "kube-prometheus-stack")];

/// A Kubernetes label value: empty, or at most 63 characters of letters, digits, `-`, `_`
/// and `.`, starting and ending with a letter or digit.
pub fn is_label_value(s: &str) -> bool {
    let b = s.as_bytes();
    b.is_empty()
        || (b.len() <= 63
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.')))
}

/// Who starts a multi-node workload's pods all together when no Kueue queue admits it
/// (`[k8s].gang`): Kubeflow Trainer's `podGroupPolicy` plugins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GangScheduler {
    /// The scheduler-plugins Coscheduling plugin (the default).
    Coscheduling,
    /// The Volcano scheduler.
    Volcano,
}

impl GangScheduler {
    /// The spec spelling.
    pub fn name(self) -> &'static str {
        match self {
            GangScheduler::Coscheduling => "coscheduling",
            GangScheduler::Volcano => "volcano",
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct K8sWire {
    namespace: Option<S<String>>,
    version: Option<S<String>>,
    training_api: Option<S<String>>,
    queue: Option<S<String>>,
    topology: Option<S<String>>,
    gang: Option<S<String>>,
    monitor_labels: Option<S<std::collections::BTreeMap<String, String>>>,
}

/// [`K8sWire`] with its required keys present (or placeholders, reported).
struct K8sFields {
    namespace: S<String>,
    version: S<String>,
    training_api: Option<S<String>>,
    queue: Option<S<String>>,
    topology: Option<S<String>>,
    gang: Option<S<String>>,
    monitor_labels: Option<S<std::collections::BTreeMap<String, String>>>,
}

/// `[k8s]`, validated.
pub(super) fn validate_k8s(k: S<K8sWire>, at: &mut At<'_>) -> K8s {
    let span = k.span();
    let k = k.into_inner();
    let k = K8sFields {
        namespace: k
            .namespace
            .unwrap_or_else(|| S::new(span.clone(), DEFAULT_K8S_NAMESPACE.into())),
        version: k
            .version
            .unwrap_or_else(|| S::new(span.clone(), DEFAULT_K8S_VERSION.into())),
        training_api: k.training_api,
        queue: k.queue,
        topology: k.topology,
        gang: k.gang,
        monitor_labels: k.monitor_labels,
    };
    if !is_dns_label(k.namespace.get_ref()) {
        at.fail(
            k.namespace.span(),
            format!(
                "invalid namespace `{}`",
                k.namespace.get_ref().escape_debug()
            ),
            "a namespace is a DNS label: lowercase letters, digits and `-`, at most 63",
        );
    }
    let v = k.version.get_ref();
    let ok = v
        .strip_prefix("1.")
        .is_some_and(|m| !m.is_empty() && m.len() <= 2 && m.bytes().all(|c| c.is_ascii_digit()));
    if !ok {
        at.fail(
            k.version.span(),
            format!("invalid Kubernetes version `{}`", v.escape_debug()),
            "write the minor version, like `1.30`",
        );
    }
    if matches!(
        k.namespace.get_ref().as_str(),
        "default" | "kube-system" | "kube-public" | "kube-node-lease"
    ) {
        at.fail(
                k.namespace.span(),
                format!("namespace `{}` is a system namespace", k.namespace.get_ref()),
                "name a namespace of its own, like `llm`: gen k8s labels it with the Pod Security level its workloads need",
            );
    }
    let training_api = match k.training_api.as_ref().map(|t| t.get_ref().as_str()) {
        None | Some("trainjob") => TrainingApi::TrainJob,
        Some("pytorchjob") => TrainingApi::PyTorchJob,
        Some(other) => {
            let t = k.training_api.as_ref().map(S::span).unwrap_or_default();
            at.fail(
                    t,
                    format!("unknown training API `{}`", other.escape_debug()),
                    "`training_api` is `trainjob` (Kubeflow Trainer v2) or `pytorchjob` (training-operator v1)",
                );
            TrainingApi::TrainJob
        }
    };
    let gang = match k.gang.as_ref().map(|t| t.get_ref().as_str()) {
        None | Some("coscheduling") => GangScheduler::Coscheduling,
        Some("volcano") => GangScheduler::Volcano,
        Some(other) => {
            let t = k.gang.as_ref().map(S::span).unwrap_or_default();
            at.fail(
                t,
                format!("unknown gang scheduler `{}`", other.escape_debug()),
                "`gang` is `coscheduling` (the scheduler-plugins Coscheduling plugin) or `volcano` (the Volcano scheduler): Kubeflow Trainer's podGroupPolicy plugins",
            );
            GangScheduler::Coscheduling
        }
    };
    let mut label = |v: &Option<S<String>>, what: &str, ok: fn(&str) -> bool, hint: &str| {
        let v = v.as_ref()?;
        if !ok(v.get_ref()) {
            at.fail(
                v.span(),
                format!("invalid {what} `{}`", v.get_ref().escape_debug()),
                hint,
            );
        }
        Some(v.get_ref().clone())
    };
    let queue = label(
        &k.queue,
        "queue",
        is_dns_label,
        "a LocalQueue name is a DNS label: lowercase letters, digits and `-`",
    );
    let topology = label(
        &k.topology,
        "topology label",
        is_label_key,
        "a node label key, like `cloud.provider.com/topology-block`",
    );
    let monitor_labels = monitor_labels(k.monitor_labels.as_ref(), at);
    K8s {
        namespace: k.namespace.into_inner(),
        version: k.version.into_inner(),
        training_api,
        queue,
        topology,
        gang,
        monitor_labels,
    }
}

/// [`DEFAULT_MONITOR_LABELS`] as the owned pairs [`K8s::monitor_labels`] holds.
fn default_monitor_labels() -> Vec<(String, String)> {
    DEFAULT_MONITOR_LABELS
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect()
}

/// The monitor labels of a lock's `[k8s]`, or the default without the table: what the
/// generated monitors carry and what `check` expects them to carry.
#[must_use]
pub fn monitor_labels_of(k8s: Option<&K8s>) -> Vec<(String, String)> {
    k8s.map_or_else(default_monitor_labels, |k| k.monitor_labels.clone())
}

/// `[k8s].monitor_labels`, validated; the kube-prometheus-stack default when absent.
fn monitor_labels(
    labels: Option<&S<std::collections::BTreeMap<String, String>>>,
    at: &mut At<'_>,
) -> Vec<(String, String)> {
    match labels {
        None => default_monitor_labels(),
        Some(m) => {
            if m.get_ref().is_empty() {
                at.fail(
                    m.span(),
                    "`monitor_labels` is empty: the Prometheus would select the monitors by no label".into(),
                    "give the labels your Prometheus's serviceMonitorSelector/podMonitorSelector matches, like `monitor_labels = { release = \"kube-prometheus-stack\" }`, or leave the key out for that default",
                );
            }
            for (key, value) in m.get_ref() {
                if !is_label_key(key) || !is_label_value(value) {
                    at.fail(
                        m.span(),
                        format!(
                            "`{} = \"{}\"` in `monitor_labels` is not a Kubernetes label",
                            key.escape_debug(),
                            value.escape_debug()
                        ),
                        "a label key is `[prefix/]name` (letters, digits, `-`, `_`, `.`), a value at most 63 such characters",
                    );
                }
            }
            m.get_ref().clone().into_iter().collect()
        }
    }
}
