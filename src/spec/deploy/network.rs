//! `[network]`: the fabric's interfaces, HCAs, GID index and device resources, each key
//! checked against the fabric it applies to, and the pods' secondary subnets.

use serde::Deserialize;

use crate::core::Fabric;
use crate::spec::at::At;

use super::{bounded, is_label_key, names, Deploy, S};

/// `[network]`: the site's network, which only the runtime environment carries (the
/// Kubernetes ConfigMap, Slurm's env file, the VM image's profile), never an image's `ENV`.
/// Which keys a fabric accepts is checked when the spec is read (`gid_index` is RoCE only,
/// `sharp` InfiniBand only, `hcas` and `rdma_resource` need RDMA verbs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Network {
    /// Bootstrap/socket interfaces (`ib0`, `hsn0`), in the order given.
    pub interfaces: Vec<String>,
    /// RDMA devices, each `name` or `name:port` (`mlx5_0`, `mlx5_1:1`), in the order given.
    pub hcas: Vec<String>,
    /// The RoCE GID index (0 to 255); none: NCCL picks the RoCE v2 GID itself.
    pub gid_index: Option<u32>,
    /// The Kubernetes extended resource of the RDMA device plugin
    /// (`rdma/rdma_shared_device_a`); none: that default name.
    pub rdma_resource: Option<String>,
    /// InfiniBand SHARP through NCCL's CollNet plugin.
    pub sharp: bool,
    /// IPv4 subnets (`192.168.4.0/24`), one per `interfaces` entry, of the secondary
    /// networks Kubernetes pods attach on the fabric (IPoIB on InfiniBand, macvlan on RoCE)
    /// instead of the host network; empty: the pods use the host network.
    pub pod_subnets: Vec<String>,
    /// Slingshot: the Kubernetes extended resource of the device plugin that gives pods
    /// the CXI NICs (`beta.hpe.com/cxi`, HPE's CXI Kubernetes device plugin); none:
    /// `gen k8s` refuses a multi-node Slingshot stack.
    pub cxi_resource: Option<String>,
    /// EFA: the EFA interfaces of the instance type each multi-node pod requests
    /// (`vpc.amazonaws.com/efa`, the AWS EFA Kubernetes device plugin); none: `gen k8s`
    /// refuses a multi-node EFA stack.
    pub efa_devices: Option<u32>,
}

/// A Linux interface name as `ip link` accepts it (at most 15 bytes, IFNAMSIZ − 1), limited
/// to letters, digits, `.`, `_` and `-`, not starting with `.` or `-`.
pub fn is_interface(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 15
        && !b[0].is_ascii_punctuation()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
}

/// An RDMA device as NCCL_IB_HCA and UCX_NET_DEVICES name it: a device (`mlx5_0`: lowercase
/// letters, digits, `_`, at most 63 characters, starting with a letter) with an optional
/// `:port` (1 to 255).
pub fn is_hca(s: &str) -> bool {
    let (dev, port) = s.split_once(':').map_or((s, None), |(d, p)| (d, Some(p)));
    let b = dev.as_bytes();
    let dev_ok = !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_');
    dev_ok
        && port.is_none_or(|p| {
            !p.is_empty()
                && p.len() <= 3
                && !p.starts_with('0')
                && p.parse::<u32>().is_ok_and(|n| (1..=255).contains(&n))
        })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NetworkWire {
    interfaces: Option<S<Vec<String>>>,
    hcas: Option<S<Vec<String>>>,
    gid_index: Option<S<i64>>,
    rdma_resource: Option<S<String>>,
    sharp: Option<S<bool>>,
    pod_subnets: Option<S<Vec<String>>>,
    cxi_resource: Option<S<String>>,
    efa_devices: Option<S<i64>>,
}

/// A `[network]` key naming a Kubernetes extended resource (`<domain>/<name>`) of the
/// fabrics in `only`; `None` when it does not apply (reported) or is malformed (reported).
fn extended_resource(
    fabric: Fabric,
    at: &mut At<'_>,
    (key, r): (&str, &S<String>),
    only: &[Fabric],
    why: &str,
    hint: &str,
) -> Option<String> {
    if !applies(fabric, at, key, r.span(), only, why) {
        return None;
    }
    let v = r.get_ref();
    if v.contains('/') && is_label_key(v) && !v.starts_with("kubernetes.io/") {
        return Some(v.clone());
    }
    at.fail(
        r.span(),
        format!(
            "`{}` is not a Kubernetes extended resource name",
            v.escape_debug()
        ),
        hint,
    );
    None
}

/// `[network]`, checked against the cluster's fabric (none: `[cluster]` is missing, which
/// is reported here).
pub(super) fn validate_network(
    n: S<NetworkWire>,
    fabric: Option<Fabric>,
    nodes: u32,
    at: &mut At<'_>,
) -> Network {
    let span = n.span();
    let n = n.into_inner();
    let Some(fabric) = fabric else {
        at.fail(
            span,
            "`[network]` describes the fabric of `[cluster]`, but the spec has no `[cluster]`"
                .into(),
            "add `[cluster]` with `fabric`, `nodes` and `gpus_per_node`, or remove `[network]`",
        );
        return Network::default();
    };
    let interfaces = names(
        at,
        n.interfaces.as_ref(),
        "interfaces",
        is_interface,
        "a network interface name (at most 15 letters, digits, `.`, `_`, `-`)",
        "list the hosts' interface names, like `interfaces = [\"ib0\"]`",
    );
    let mut hcas = Vec::new();
    if let Some(h) = &n.hcas {
        if applies(
            fabric,
            at,
            "hcas",
            h.span(),
            &[Fabric::Infiniband, Fabric::Roce],
            "RDMA devices are read by NCCL's IB verbs transport and UCX",
        ) {
            hcas = names(
                at,
                Some(h),
                "hcas",
                is_hca,
                "an RDMA device (`mlx5_0`, or `mlx5_0:1` with a port from 1 to 255)",
                "list the devices `ibv_devices` shows, like `hcas = [\"mlx5_0\", \"mlx5_1\"]`",
            );
        }
    }
    let gid_index = n.gid_index.as_ref().and_then(|g| {
        let only = (&[Fabric::Roce][..], "the GID index selects a RoCE address");
        applies(fabric, at, "gid_index", g.span(), only.0, only.1).then(|| {
            bounded(at, ("gid_index", g), 0..=255, "use the index `show_gids` lists for the RoCE v2 address, or leave `gid_index` out to let NCCL pick it")
        })?
    });
    let rdma_resource = n.rdma_resource.as_ref().and_then(|r| {
        extended_resource(
            fabric,
            at,
            ("rdma_resource", r),
            &[Fabric::Infiniband, Fabric::Roce],
            "it is the Kubernetes resource of the RDMA shared device plugin",
            "write `<domain>/<name>`, like `rdma/rdma_shared_device_a`",
        )
    });
    let mut sharp = false;
    if let Some(s) = &n.sharp {
        if *s.get_ref()
            && applies(
                fabric,
                at,
                "sharp",
                s.span(),
                &[Fabric::Infiniband],
                "SHARP is in-network reduction on InfiniBand switches",
            )
        {
            sharp = true;
        }
    }
    let pod_subnets = n
        .pod_subnets
        .as_ref()
        .map(|p| pod_subnets(p, fabric, nodes, &interfaces, gid_index, at))
        .unwrap_or_default();
    let cxi_resource = n.cxi_resource.as_ref().and_then(|r| {
        extended_resource(
            fabric,
            at,
            ("cxi_resource", r),
            &[Fabric::Slingshot],
            "it is the Kubernetes resource of the device plugin that gives pods the CXI NICs",
            "write `<domain>/<name>`, like `beta.hpe.com/cxi` (HPE's CXI Kubernetes device plugin)",
        )
    });
    let efa_devices = n.efa_devices.as_ref().and_then(|d| {
        let only = (&[Fabric::Efa][..], "it is the number of EFA interfaces a pod requests from the EFA device plugin");
        applies(fabric, at, "efa_devices", d.span(), only.0, only.1).then(|| {
            bounded(at, ("efa_devices", d), 1..=64, "give the instance type's maximum number of EFA interfaces (AWS: https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa.html#efa-instance-types)")
        })?
    });
    Network {
        interfaces,
        hcas,
        gid_index,
        rdma_resource,
        sharp,
        pod_subnets,
        cxi_resource,
        efa_devices,
    }
}

/// A multi-node EFA or Slingshot stack with `[k8s]` names the device its pods request
/// (`[network].efa_devices`, `[network].cxi_resource`): without it the pods would reach no
/// fabric NIC, and `gen k8s` refuses the lock (`plan::targets::k8s`); here the spec says
/// so at `[k8s]`, before anything is locked. A spec rule only: a lock written before the
/// keys existed still reads (and renders every other target).
pub(crate) fn fabric_device(d: &Deploy, k8s: std::ops::Range<usize>, at: &mut At<'_>) {
    let Some(c) = d.cluster.as_ref().filter(|c| c.nodes > 1) else {
        return;
    };
    let n = d.network.clone().unwrap_or_default();
    match c.fabric {
        Fabric::Efa if n.efa_devices.is_none() => at.fail(
            k8s,
            format!("the Kubernetes pods of this {}-node EFA stack would request no EFA device: `[network].efa_devices` is not set", c.nodes),
            "set `[network].efa_devices` to the instance type's number of EFA interfaces (the column Maximum EFA interfaces of https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa.html#efa-instance-types), which the pods then request from the AWS EFA device plugin; or leave `[k8s]` out",
        ),
        Fabric::Slingshot if n.cxi_resource.is_none() => at.fail(
            k8s,
            format!("the Kubernetes pods of this {}-node Slingshot stack would request no CXI device: `[network].cxi_resource` is not set", c.nodes),
            "set `[network].cxi_resource` to the resource of the device plugin that gives pods the CXI NICs, like `beta.hpe.com/cxi` (HPE's CXI Kubernetes device plugin); or leave `[k8s]` out",
        ),
        _ => {}
    }
}

/// An IPv4 subnet in CIDR form with its host bits zero and a prefix from 8 to 30
/// (`192.168.4.0/24`): the `subnet` of an nv-ipam IPPool.
pub fn is_ipv4_subnet(s: &str) -> bool {
    let Some((a, l)) = s.split_once('/') else {
        return false;
    };
    let (Ok(addr), Ok(len)) = (a.parse::<std::net::Ipv4Addr>(), l.parse::<u32>()) else {
        return false;
    };
    // Canonical text only (no `010.0.0.0`, no `/024`), so the IPPool shows what was written.
    (8..=30).contains(&len)
        && addr.to_string() == a
        && len.to_string() == l
        && u32::from(addr) & (u32::MAX >> len) == 0
}

/// The interface of a pod's default network, which a secondary network cannot take
/// (Multus' usage guide: `eth0`, "Default network interface";
/// <https://github.com/k8snetworkplumbingwg/multus-cni/blob/041e3ce46b5ac0237efd70b6d284869e7c497a73/docs/how-to-use.md>).
pub const POD_INTERFACE: &str = "eth0";

/// Addresses each node takes from a pod subnet (the nv-ipam IPPool's `perNodeBlockSize`):
/// a pod of the stack takes a node's GPUs whole, so a node runs one at a time; the rest
/// leave room for a replaced pod still terminating and for the acceptance job.
pub const POD_BLOCK: u32 = 8;

/// Host addresses of a valid [`is_ipv4_subnet`] (without the network and broadcast
/// addresses).
pub fn subnet_hosts(s: &str) -> u32 {
    let len: u32 = s
        .split_once('/')
        .and_then(|(_, l)| l.parse().ok())
        .unwrap_or(32);
    (1u32 << (32 - len.min(31))) - 2
}

/// `[network].pod_subnets`: RDMA fabrics only, one subnet per interface, and no fixed GID
/// index beside them (a pod's RoCE address has its own).
fn pod_subnets(
    p: &S<Vec<String>>,
    fabric: Fabric,
    nodes: u32,
    interfaces: &[String],
    gid_index: Option<u32>,
    at: &mut At<'_>,
) -> Vec<String> {
    if !applies(
        fabric,
        at,
        "pod_subnets",
        p.span(),
        &[Fabric::Infiniband, Fabric::Roce],
        "they are the IPoIB or macvlan secondary networks of the NVIDIA Network Operator",
    ) {
        return Vec::new();
    }
    let subnets = names(
        at,
        Some(p),
        "pod_subnets",
        is_ipv4_subnet,
        "an IPv4 subnet (`192.168.4.0/24`, host bits zero, prefix /8 to /30)",
        "give one subnet per interface, like `pod_subnets = [\"192.168.4.0/24\"]`",
    );
    if subnets.len() != p.get_ref().len() {
        return Vec::new();
    }
    if subnets.len() != interfaces.len() {
        at.fail(
            p.span(),
            format!(
                "`[network].pod_subnets` has {} subnets for {} interfaces",
                subnets.len(),
                interfaces.len()
            ),
            "give one subnet per `[network].interfaces` entry, in the same order: each interface gets a secondary network of its own",
        );
        return Vec::new();
    }
    if interfaces.iter().any(|i| i == POD_INTERFACE) {
        at.fail(
            p.span(),
            format!("with `[network].pod_subnets`, each interface becomes a pod interface of the same name, but `{POD_INTERFACE}` is the pod's own (Kubernetes' default network)"),
            "list the host interfaces of the fabric NICs (`ip link`: `ib0`, `ens1f0np0`), or leave `pod_subnets` out to keep the host network",
        );
        return Vec::new();
    }
    if nodes < 2 {
        at.fail(
            p.span(),
            "`[network].pod_subnets` is for multi-node jobs, but `[cluster].nodes` is 1".into(),
            "leave `pod_subnets` out: the pods of one node talk over NVLink and shared memory",
        );
        return Vec::new();
    }
    if let Some(small) = subnets.iter().find(|s| subnet_hosts(s) < nodes * POD_BLOCK) {
        at.fail(
            p.span(),
            format!(
                "`{small}` has {} addresses, but {nodes} nodes take {POD_BLOCK} each",
                subnet_hosts(small)
            ),
            "use a larger subnet (a /24 holds 31 nodes)",
        );
        return Vec::new();
    }
    if gid_index.is_some() {
        at.fail(
            p.span(),
            "`[network].gid_index` is the host's RoCE address; a pod on a secondary network has its own, at another index".into(),
            "leave `gid_index` out, so NCCL picks the RoCE v2 GID of the pod's address, or leave `pod_subnets` out to keep the host network",
        );
        return Vec::new();
    }
    subnets
}

/// Whether a `[network]` key applies to the fabric; when not, reported at the key, naming the
/// fabrics it fits.
fn applies(
    fabric: Fabric,
    at: &mut At<'_>,
    key: &str,
    span: std::ops::Range<usize>,
    fits: &[Fabric],
    why: &str,
) -> bool {
    if fits.contains(&fabric) {
        return true;
    }
    at.fail(
        span,
        format!(
            "`[network].{key}` does not apply to fabric `{}`: {why}",
            fabric.name()
        ),
        &format!(
            "remove `{key}`, or set `[cluster].fabric` to {}",
            fits.iter()
                .map(|f| format!("`{}`", f.name()))
                .collect::<Vec<_>>()
                .join(" or ")
        ),
    );
    false
}
