//! The network plan (issue 19): what the site's `[network]` table and the cluster's fabric
//! decide for every target, once.
//!
//! * the **site environment** ([`NetworkPlan::site_env`]): `NCCL_SOCKET_IFNAME`,
//!   `NCCL_IB_HCA`, `UCX_NET_DEVICES`, the RoCE GID index, SHARP's `NCCL_COLLNET_ENABLE`.
//!   These are values of one site, so they go to the runtime environment only (the Kubernetes
//!   ConfigMap, Slurm's `env/nccl.env`, the VM image's profile) and never into an image's
//!   `ENV` or a layer hash: one image serves every site;
//! * the **RDMA resource** multi-node InfiniBand/RoCE pods request, which the generated
//!   NicClusterPolicy provides ([`NetworkPlan::rdma_resource`]);
//! * the **pods' secondary networks** ([`NetworkPlan::pod_networks`]) when
//!   `[network].pod_subnets` keeps Kubernetes pods off the host network: one network per
//!   interface, of the kind the NVIDIA Network Operator documents for the fabric with its
//!   RDMA shared device plugin (IPoIBNetwork on InfiniBand, MacvlanNetwork on RoCE), each
//!   with an nv-ipam IPPool of its subnet;
//! * the **GPUDirect RDMA path** ([`GpuDirect`]), from the kernel-module flavour the lock
//!   picked: DMA-BUF with the open modules, the legacy `nvidia-peermem` with the proprietary
//!   ones. The GPU Operator values and the book print this decision; none of them makes it.
//!
//! Every variable name is one the owning project documents (the table in
//! `src/catalog/env_names.rs`; a test fails on a generated name that is not in it).

use serde::Serialize;

use super::host::{Flavour, HostPlan};
use super::EnvVar;
use crate::core::Fabric;
use crate::lock::Lock;

/// The GPU Operator's GPUDirect RDMA page: DMA-BUF (recommended, open kernel modules) or the
/// legacy nvidia-peermem module (`driver.rdma.enabled`), which needs the MLNX_OFED/DOCA-OFED
/// driver on the hosts (`driver.rdma.useHostMofed`) or from the Network Operator.
pub const GPU_OPERATOR_RDMA: &str =
    "https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-operator-rdma.html";
/// The Network Operator's NicClusterPolicy example: the RDMA shared device plugin and its
/// `configList[].resourceName`, the resource pods request as `rdma/<resourceName>`.
pub const NIC_CLUSTER_POLICY: &str = "https://github.com/Mellanox/network-operator-docs/blob/2105e0eb875f75556cdd77c239aab22f267fb7c1/docs/customizations/cr-full-example.rst";
/// NVIDIA's SHARP plugin for NCCL (nccl-rdma-sharp-plugins), which registers the CollNet
/// network NCCL uses when `NCCL_COLLNET_ENABLE=1`.
pub const SHARP_PLUGIN: &str = "https://github.com/Mellanox/nccl-rdma-sharp-plugins";
/// The Network Operator's quick starts for secondary networks with the RDMA shared device
/// plugin: an nv-ipam IPPool, then an IPoIBNetwork (InfiniBand) or a MacvlanNetwork (RoCE)
/// naming the pool, which the pods annotate (`k8s.v1.cni.cncf.io/networks`); the
/// NicClusterPolicy deploys `nvIpam` and `secondaryNetwork` (Multus, CNI plugins, IPoIB CNI).
pub const POD_NETWORK_DOCS: [&str; 2] = [
    "https://github.com/Mellanox/network-operator-docs/blob/0c0ecad430c9281c0924fa7434a88f1380ba3d7a/docs/quick-start/ipoib-rdma-shared.rst",
    "https://github.com/Mellanox/network-operator-docs/blob/0c0ecad430c9281c0924fa7434a88f1380ba3d7a/docs/quick-start/macvlan-rdma-shared.rst",
];
/// Multus' usage guide: the JSON form of `k8s.v1.cni.cncf.io/networks` with `namespace`
/// and `interface` (the pod's interface name) per network.
pub const MULTUS_ANNOTATION: &str = "https://github.com/k8snetworkplumbingwg/multus-cni/blob/041e3ce46b5ac0237efd70b6d284869e7c497a73/docs/how-to-use.md";
/// Where the Network Operator runs nv-ipam, and so where its IPPools live (the quick
/// starts' namespace).
pub const NETWORK_OPERATOR_NAMESPACE: &str = "nvidia-network-operator";
/// The resource name the Network Operator's example config gives the shared RDMA device.
pub const DEFAULT_RDMA_RESOURCE: &str = "rdma/rdma_shared_device_a";
/// The prefix the RDMA shared device plugin puts before `resourceName`.
pub const RDMA_RESOURCE_PREFIX: &str = "rdma";

/// How GPU memory is registered with the RDMA NIC (GPUDirect RDMA).
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum GpuDirect {
    /// The Linux kernel's DMA-BUF: the open kernel modules; the distribution's (inbox)
    /// rdma-core suffices and the GPU Operator loads no extra module.
    DmaBuf,
    /// The legacy `nvidia-peermem` module: the proprietary kernel modules; needs the
    /// MLNX_OFED/DOCA-OFED kernel driver on the hosts (peer-memory API).
    PeerMem,
}

impl GpuDirect {
    /// `dma-buf` / `nvidia-peermem`.
    pub fn name(self) -> &'static str {
        match self {
            GpuDirect::DmaBuf => "dma-buf",
            GpuDirect::PeerMem => "nvidia-peermem",
        }
    }
}

/// The network decisions every target shares. LOAD-BEARING: templates print these fields.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct NetworkPlan {
    /// Site values for the runtime environment only (never an image's `ENV`).
    pub site_env: Vec<EnvVar>,
    /// The RDMA device-plugin resource a multi-node InfiniBand/RoCE pod requests; none on
    /// other fabrics and single-node stacks.
    pub rdma_resource: Option<String>,
    /// The `resourceName` of the RDMA shared device plugin's config (the resource without
    /// its `rdma/` prefix), when the generated NicClusterPolicy can provide it; none when
    /// the resource has another prefix (the site's own device plugin: a prerequisite).
    pub rdma_resource_name: Option<String>,
    /// The GPUDirect RDMA path (multi-node InfiniBand/RoCE with a known kernel-module
    /// flavour).
    pub gpudirect: Option<GpuDirect>,
    /// `[network].sharp`.
    pub sharp: bool,
    /// The RDMA devices (`[network].hcas`), as written.
    pub hcas: Vec<String>,
    /// What the hosts or images must provide that gpustack does not install (every
    /// target prints these).
    pub prerequisites: Vec<String>,
    /// The secondary networks multi-node InfiniBand/RoCE pods attach, one per interface
    /// (`[network].pod_subnets`); empty: the pods use the host network.
    pub pod_networks: Vec<PodNetwork>,
    /// The fabric device a multi-node EFA or Slingshot pod requests besides its GPUs
    /// (`vpc.amazonaws.com/efa` × `[network].efa_devices`, `[network].cxi_resource` × one
    /// per interface); none on other fabrics, on one node, or when `[network]` does not
    /// say (then `gen k8s` refuses the stack: a pod without the device cannot reach the
    /// fabric).
    pub device: Option<crate::plan::cluster::Extended>,
}

/// The AWS EFA Kubernetes device plugin's resource (aws/eks-charts, `stable/aws-efa-k8s-device-plugin`:
/// "vpc.amazonaws.com/efa"; <https://github.com/aws/eks-charts/tree/master/stable/aws-efa-k8s-device-plugin>).
pub const EFA_RESOURCE: &str = "vpc.amazonaws.com/efa";

/// HPE's CXI Kubernetes device plugin, whose pods request `beta.hpe.com/cxi`; each
/// requested device maps to one Cassini NIC (`pkg/plugin/plugin.go`, `Allocate`).
pub const CXI_PLUGIN: &str = "https://github.com/HewlettPackard/cxi-k8s-device-plugin/blob/d5af3472afcae6eab6cf696b7fd18adf926bf6b5/README.md";

/// The Network Operator's network kind for a fabric.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
pub enum PodNetworkKind {
    /// `IPoIBNetwork`: an IPoIB child interface of the host's (InfiniBand).
    #[serde(rename = "IPoIBNetwork")]
    Ipoib,
    /// `MacvlanNetwork`: a macvlan interface on the RoCE NIC, whose address gives the pod
    /// its RoCE v2 GID.
    #[serde(rename = "MacvlanNetwork")]
    Macvlan,
}

/// One secondary network on the fabric and the IPPool it takes addresses from.
/// LOAD-BEARING: `generators/k8s/network/*.j2` print these fields.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct PodNetwork {
    /// The custom resource's kind.
    pub kind: PodNetworkKind,
    /// Its name (cluster-scoped; the NetworkAttachmentDefinition the operator makes from
    /// it has the same name): `<stack>-ipoib-0`.
    pub name: String,
    /// The host interface it hangs off (`master`), which is also the interface's name in
    /// the pod, so the site's `NCCL_SOCKET_IFNAME` holds there too.
    pub interface: String,
    /// The nv-ipam IPPool: `<stack>-pool-0`.
    pub pool: String,
    /// The pool's subnet.
    pub subnet: String,
    /// The pool's `perNodeBlockSize`.
    pub per_node_block: u32,
    /// The network's `ipam` JSON text.
    pub ipam: String,
}

impl PodNetwork {
    /// `IPoIBNetwork` / `MacvlanNetwork`.
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            PodNetworkKind::Ipoib => "IPoIBNetwork",
            PodNetworkKind::Macvlan => "MacvlanNetwork",
        }
    }
}

/// The secondary networks of `[network].pod_subnets`, one per interface.
fn pod_networks(
    stack: &str,
    fabric: Fabric,
    net: &crate::spec::deploy::Network,
) -> Vec<PodNetwork> {
    let (kind, word) = match fabric {
        Fabric::Infiniband => (PodNetworkKind::Ipoib, "ipoib"),
        Fabric::Roce => (PodNetworkKind::Macvlan, "macvlan"),
        _ => return Vec::new(),
    };
    net.interfaces
        .iter()
        .zip(&net.pod_subnets)
        .enumerate()
        .map(|(i, (interface, subnet))| {
            let pool = format!("{stack}-pool-{i}");
            PodNetwork {
                kind,
                name: format!("{stack}-{word}-{i}"),
                interface: interface.clone(),
                ipam: serde_json::json!({"type": "nv-ipam", "poolName": pool}).to_string(),
                pool,
                subnet: subnet.clone(),
                per_node_block: crate::spec::deploy::POD_BLOCK,
            }
        })
        .collect()
}

/// A variable with its source from the documented-names table (a name outside it has an
/// empty source, which `tests/fabric.rs` rejects).
fn var(name: &str, value: String) -> EnvVar {
    EnvVar {
        name: name.into(),
        value,
        source: crate::catalog::env_name_source(name)
            .unwrap_or_default()
            .into(),
    }
}

impl NetworkPlan {
    /// Derives the network decisions from the lock's request and kernel-module flavour.
    ///
    /// ```
    /// let lock = gpustack::Lock::parse("h100-ib-train-serve.lock", &std::fs::read_to_string("lockfiles/h100-ib-train-serve.lock")?)?;
    /// let net = gpustack::plan::network::NetworkPlan::new(&lock);
    /// assert_eq!(net.rdma_resource.as_deref(), Some("rdma/rdma_shared_device_a"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn new(lock: &Lock) -> NetworkPlan {
        let Some(cluster) = lock.request.deploy.cluster.as_ref() else {
            return NetworkPlan::default();
        };
        let net = lock.request.deploy.network.clone().unwrap_or_default();
        let rdma = matches!(cluster.fabric, Fabric::Infiniband | Fabric::Roce);
        let multi = cluster.nodes > 1;
        let mut site_env = Vec::new();
        if !net.interfaces.is_empty() {
            let ifs = net.interfaces.join(",");
            site_env.push(var("NCCL_SOCKET_IFNAME", ifs.clone()));
            site_env.push(var("GLOO_SOCKET_IFNAME", ifs.clone()));
            site_env.push(var("OMPI_MCA_btl_tcp_if_include", ifs));
        }
        if !net.hcas.is_empty() {
            // `=`: exact names (NCCL otherwise matches prefixes: `mlx5_1` would also
            // select `mlx5_10`).
            site_env.push(var("NCCL_IB_HCA", format!("={}", net.hcas.join(","))));
            // UCX names a device with its port; port 1 is the first port of an HCA.
            let ucx: Vec<String> = net
                .hcas
                .iter()
                .map(|h| {
                    if h.contains(':') {
                        h.clone()
                    } else {
                        format!("{h}:1")
                    }
                })
                .collect();
            site_env.push(var("UCX_NET_DEVICES", ucx.join(",")));
        }
        if let Some(g) = net.gid_index {
            site_env.push(var("NCCL_IB_GID_INDEX", g.to_string()));
            site_env.push(var("UCX_IB_GID_INDEX", g.to_string()));
        }
        if net.sharp {
            site_env.push(var("NCCL_COLLNET_ENABLE", "1".into()));
        }
        site_env.sort_by(|a, b| a.name.cmp(&b.name));
        let rdma_resource = (rdma && multi).then(|| {
            net.rdma_resource
                .clone()
                .unwrap_or_else(|| DEFAULT_RDMA_RESOURCE.to_string())
        });
        let rdma_resource_name = rdma_resource.as_deref().and_then(|r| {
            r.strip_prefix(RDMA_RESOURCE_PREFIX)
                .and_then(|n| n.strip_prefix('/'))
                .map(str::to_string)
        });
        let gpudirect = if rdma && multi {
            HostPlan::new(lock).kernel_modules.map(|k| match k.flavour {
                Flavour::Open => GpuDirect::DmaBuf,
                Flavour::Proprietary => GpuDirect::PeerMem,
            })
        } else {
            None
        };
        let mut prerequisites = Vec::new();
        if net.sharp {
            prerequisites.push(sharp_prerequisite(lock));
        }
        if multi && cluster.fabric == Fabric::Slingshot {
            prerequisites.push("Slingshot: the images carry the CXI user space (libcxi, libfabric with the CXI provider, aws-ofi-nccl) of HPE's SHS 13.0.0 release, as the Alps images build it; the hosts must run the CXI kernel driver and give the job its VNI (Slurm's Slingshot switch plugin), and FI_CXI_RDZV_PROTO=alt_read needs the NIC's rdzv_get_en=0 (srun --network=disable_rdzv_get)".into());
            if super::locked::fabric_sources(lock)
                .iter()
                .any(|p| p.name == "xpmem")
            {
                prerequisites.push("XPMEM: the images carry only its user-space library (built with --disable-kernel-module, as the Alps images build it); libfabric uses XPMEM for intra-node copies only where the hosts load the xpmem kernel module (/dev/xpmem), which gpustack does not build".into());
            }
        }
        if multi && cluster.fabric == Fabric::Efa {
            let installer = super::locked::efa_installer(lock).map_or_else(
                || "AWS's EFA installer".to_string(),
                |p| {
                    format!(
                        "AWS's EFA installer {} ({}, sha256 {}; source: {})",
                        p.version,
                        p.url.as_deref().unwrap_or_default(),
                        p.sha256.as_deref().unwrap_or("not published"),
                        p.source
                    )
                },
            );
            prerequisites.push(format!("EFA: the images carry the user space of {installer} (installed without its kernel module) and aws-ofi-nccl built against its libfabric; the hosts need the EFA kernel driver, which the same installer run as root with `./efa_installer.sh -y` provides (the VM image's multinode.sh does so)"));
        }
        let pod_networks = if rdma && multi {
            pod_networks(&lock.request.name, cluster.fabric, &net)
        } else {
            Vec::new()
        };
        let device = fabric_device(cluster.fabric, multi, &net);
        NetworkPlan {
            device,
            pod_networks,
            prerequisites,
            site_env,
            rdma_resource,
            rdma_resource_name,
            gpudirect,
            sharp: net.sharp,
            hcas: net.hcas,
        }
    }
}

/// The extended resource multi-node pods request for the fabric's NICs, beyond RDMA: the
/// EFA device plugin's `vpc.amazonaws.com/efa` ([network].efa_devices) or the CXI device
/// plugin's resource ([network].cxi_resource); both are the site's prerequisites.
fn fabric_device(
    fabric: Fabric,
    multi: bool,
    net: &crate::spec::deploy::Network,
) -> Option<crate::plan::cluster::Extended> {
    match fabric {
        Fabric::Efa if multi => net.efa_devices.map(|count| crate::plan::cluster::Extended {
            name: EFA_RESOURCE.into(),
            count,
            provider: crate::plan::cluster::Provider::Prerequisite(format!(
                "{EFA_RESOURCE}: the AWS EFA Kubernetes device plugin must run on the nodes ([network].efa_devices = {count} per pod)"
            )),
        }),
        Fabric::Slingshot if multi => net.cxi_resource.clone().map(|name| {
            let count = u32::try_from(net.interfaces.len().max(1)).unwrap_or(1);
            crate::plan::cluster::Extended {
                provider: crate::plan::cluster::Provider::Prerequisite(format!(
                    "{name}: the device plugin that gives pods the CXI NICs must run on the nodes ([network].cxi_resource; HPE's CXI Kubernetes device plugin: {CXI_PLUGIN})"
                )),
                name,
                count,
            }
        }),
        _ => None,
    }
}

/// What SHARP needs besides the images: with the plugin in the lock, the fabric's
/// Aggregation Manager; without it (no HPC-X build pinned for the stack), the plugin too.
fn sharp_prerequisite(lock: &Lock) -> String {
    let sources = super::locked::fabric_sources(lock);
    let version = |n: &str| {
        sources
            .iter()
            .find(|p| p.name == n)
            .map(|p| p.version.clone())
    };
    match (version("nccl-rdma-sharp-plugins"), version("hpcx")) {
        (Some(plugin), Some(hpcx)) => format!(
            "SHARP: the images carry NVIDIA's NCCL SHARP plugin (nccl-rdma-sharp-plugins {plugin}, libnccl-net.so on the library path) and the SHARP libraries of HPC-X {hpcx}; NCCL_COLLNET_ENABLE=1 also needs SHARP-capable switches and a running SHARP Aggregation Manager (sharp_am, beside the subnet manager), which gpustack does not install (source: {SHARP_PLUGIN})"
        ),
        _ => format!(
            "SHARP: NCCL_COLLNET_ENABLE=1 needs NCCL's SHARP net plugin (libnccl-net.so from nccl-rdma-sharp-plugins, with the SHARP libraries of HPC-X or DOCA) on the library path and a running SHARP aggregation manager; gpustack does not install them: the catalog pins no HPC-X build for this OS, CUDA and CPU (source: {SHARP_PLUGIN})"
        ),
    }
}

#[cfg(test)]
mod tests {
    use crate::spec::deploy::{is_hca, is_interface};

    #[test]
    fn interface_and_device_names() {
        for ok in ["ib0", "eth0", "hsn3", "ens32f0np0", "bond0.100", "enp1s0-a"] {
            assert!(is_interface(ok), "{ok}");
        }
        for bad in [
            "",
            ".ib0",
            "-x",
            "_x",
            "ib 0",
            "a/b",
            "x;y",
            "sixteen-chars-xx",
        ] {
            assert!(!is_interface(bad), "{bad}");
        }
        for ok in ["mlx5_0", "mlx5_10:1", "rocep1s0f0", "mlx5_0:255"] {
            assert!(is_hca(ok), "{ok}");
        }
        for bad in [
            "",
            "mlx5_0:",
            "mlx5_0:0",
            "mlx5_0:256",
            "mlx5_0:01",
            "Mlx5",
            "=mlx5_0",
            "mlx5,mlx6",
            "0mlx",
        ] {
            assert!(!is_hca(bad), "{bad}");
        }
    }
}
