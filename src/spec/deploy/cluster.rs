//! `[cluster]`: the fabric, node count and each node's GPUs, CPUs and memory.

use serde::Deserialize;

use crate::core::Fabric;
use crate::spec::at::At;

use super::S;

/// `[cluster]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cluster {
    /// Interconnect.
    pub fabric: Fabric,
    /// Nodes in the job.
    pub nodes: u32,
    /// GPUs per node.
    pub gpus_per_node: u32,
    /// CPUs a job may use on each node (`cpus_per_node`); none: the workload plan's
    /// conservative default.
    pub cpus_per_node: Option<u32>,
    /// Memory a job may use on each node, GiB (`memory_gib_per_node`); none: the workload
    /// plan's conservative default.
    pub memory_gib_per_node: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ClusterWire {
    fabric: Option<S<String>>,
    nodes: Option<S<i64>>,
    gpus_per_node: Option<S<i64>>,
    cpus_per_node: Option<S<i64>>,
    memory_gib_per_node: Option<S<i64>>,
}

/// `[cluster]`, validated.
pub(super) fn validate_cluster(c: S<ClusterWire>, at: &mut At<'_>) -> Cluster {
    let span = c.span();
    let t = ("cluster", &span);
    let c = c.into_inner();
    let fabric_v = at.need(c.fabric, t, "fabric", "\"infiniband\"", "infiniband".into());
    let nodes_v = at.need(c.nodes, t, "nodes", "2", 1);
    let gpus_v = at.need(c.gpus_per_node, t, "gpus_per_node", "8", 8);
    let fabric = match Fabric::ALL
        .into_iter()
        .find(|f| f.name() == fabric_v.get_ref())
    {
        Some(f) => f,
        None => {
            at.fail(
                fabric_v.span(),
                format!("unknown fabric `{}`", fabric_v.get_ref().escape_debug()),
                "`fabric` is one of: infiniband, roce, efa, slingshot, ethernet",
            );
            Fabric::Ethernet
        }
    };
    let nodes = at.count(&nodes_v, "nodes", 4096);
    let gpus_per_node = at.count(&gpus_v, "gpus_per_node", 16);
    let cpus_per_node = c
        .cpus_per_node
        .as_ref()
        .map(|v| at.count(v, "cpus_per_node", 4096));
    let memory_gib_per_node = c
        .memory_gib_per_node
        .as_ref()
        .map(|v| at.count(v, "memory_gib_per_node", 65_536));
    Cluster {
        fabric,
        nodes,
        gpus_per_node,
        cpus_per_node,
        memory_gib_per_node,
    }
}
