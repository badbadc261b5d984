//! Monitoring: the labels every generated monitor carries, where prometheus-adapter finds
//! Prometheus, and the Grafana dashboards the README points at.

use serde::Serialize;

/// A Grafana dashboard named by where it is published.
#[derive(Clone, Debug, Serialize)]
pub struct Dashboard {
    /// What it shows.
    pub title: String,
    /// grafana.com ID, when it has one.
    pub grafana_id: Option<u32>,
    /// Where the JSON is.
    pub source: String,
}

/// The labels every generated monitor carries (`[k8s].monitor_labels`) and where
/// prometheus-adapter finds the Prometheus that selects them. LOAD-BEARING:
/// `_metadata.j2` (`monitored`), `gpu-operator-values.yaml.j2` and
/// `monitoring/prometheus-adapter-values.yaml.j2` print these fields.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct MonitoringPlan {
    /// `key: value`, sorted by key.
    pub labels: Vec<(String, String)>,
    /// The Prometheus service prometheus-adapter queries, when the labels name a
    /// kube-prometheus-stack release (`release`): `http://<fullname>-prometheus.monitoring.svc`.
    pub prometheus_url: Option<String>,
    /// Its port (the chart's `prometheus.service.port`, 9090).
    pub prometheus_port: u32,
    /// Where the figures come from, for comments.
    pub notes: Vec<String>,
}

impl MonitoringPlan {
    /// From `[k8s].monitor_labels` (the default when the lock has no `[k8s]`).
    #[must_use]
    pub fn new(labels: Vec<(String, String)>) -> MonitoringPlan {
        let mut notes = vec![format!(
            "the labels a Prometheus selects monitors by ([k8s].monitor_labels); kube-prometheus-stack's Prometheus selects `release: <its Helm release>` by default (serviceMonitorSelectorNilUsesHelmValues: true; {KPS_PROMETHEUS})"
        )];
        let prometheus_url = labels.iter().find(|(k, _)| k == "release").map(|(_, r)| {
            notes.push(format!(
                "prometheus-adapter queries the Prometheus of the kube-prometheus-stack release `{r}` installed in the namespace `monitoring`: its service is the chart's fullname (the release name when it contains `kube-prometheus-stack`, else `<release>-kube-prometheus-stack`, cut to 26 characters; {KPS_HELPERS}) suffixed `-prometheus`, port 9090"
            ));
            format!("http://{}-prometheus.monitoring.svc", kps_fullname(r))
        });
        MonitoringPlan {
            labels,
            prometheus_url,
            prometheus_port: 9090,
            notes,
        }
    }
}

/// kube-prometheus-stack's Prometheus template (its monitor selectors).
const KPS_PROMETHEUS: &str = "https://github.com/prometheus-community/helm-charts/blob/1514b96530e0e85ae1bf89eb256c029d0cf8ce03/charts/kube-prometheus-stack/templates/prometheus/prometheus.yaml";

/// kube-prometheus-stack's `_helpers.tpl` (`kube-prometheus-stack.fullname`).
const KPS_HELPERS: &str = "https://github.com/prometheus-community/helm-charts/blob/082861babe110452fca71989c1e410bdec966170/charts/kube-prometheus-stack/templates/_helpers.tpl";

/// `kube-prometheus-stack.fullname` for a release (no overrides): the release when it
/// contains the chart's name, else `<release>-kube-prometheus-stack`, cut to 26
/// characters and stripped of a trailing `-`.
fn kps_fullname(release: &str) -> String {
    const CHART: &str = "kube-prometheus-stack";
    let full = if release.contains(CHART) {
        release.to_string()
    } else {
        format!("{release}-{CHART}")
    };
    let cut: String = full.chars().take(26).collect();
    cut.trim_end_matches('-').to_string()
}

/// The Grafana dashboards the README points at.
pub(super) fn dashboards() -> Vec<Dashboard> {
    vec![
        Dashboard {
            title: "NVIDIA DCGM Exporter Dashboard (GPU utilization, memory, power, temperature per GPU)".into(),
            grafana_id: Some(12239),
            source: "https://grafana.com/grafana/dashboards/12239 (github.com/NVIDIA/dcgm-exporter grafana/README.md: \"A published variant is also available on Grafana.com as dashboard 12239\"; the checked-in JSON is grafana/dcgm-exporter-dashboard.json)".into(),
        },
        Dashboard {
            title: "vLLM (latency, throughput, queue, KV cache)".into(),
            grafana_id: None,
            source: "github.com/vllm-project/vllm examples/observability/dashboards/grafana/ (vLLM / Overview, Instances, KV Cache, Speculative Decoding; import the JSON as its README says; releases before the move: examples/online_serving/prometheus_grafana/grafana.json); vLLM publishes no grafana.com ID and gpustack names none".into(),
        },
    ]
}
