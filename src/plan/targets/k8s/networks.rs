//! The fabric as the pods see it: devices, host network and IPC_LOCK, the Network
//! Operator's NicClusterPolicy, and the pods' secondary networks (`network/*.yaml`).

use serde::Serialize;

use crate::core::Fabric;
use crate::error::Error;
use crate::lock::Lock;
use crate::plan::cluster::{Extended, Provider};
use crate::plan::locked::{self, PinnedImage};
use crate::plan::Common;
use crate::render::RenderedFile;

use super::{bad, K8sPlan};

/// `network/nic-cluster-policy.yaml`: the RDMA shared device plugin of the NVIDIA Network
/// Operator, providing `rdma/<resource_name>`.
#[derive(Clone, Debug, Serialize)]
pub struct NicPolicyPlan {
    /// The device plugin's image, from the lock; none when the lock has none (a note says
    /// what to set).
    pub image: Option<NicPolicyImage>,
    /// `configList[].resourceName`.
    pub resource_name: String,
    /// The resource pods request (`rdma/<resource_name>`).
    pub resource: String,
    /// The plugin's `config`, JSON text.
    pub config: String,
    /// Comments.
    pub notes: Vec<String>,
    /// `nvIpam` and `secondaryNetwork`, when the pods attach secondary networks.
    pub secondary: Option<SecondaryComponents>,
}

/// The NicClusterPolicy's components for the pods' secondary networks, as the Network
/// Operator's quick starts deploy them (images from the lock).
#[derive(Clone, Debug, Serialize)]
pub struct SecondaryComponents {
    /// `nvIpam` (with `enableWebhook: false`, as the quick starts set it).
    pub nv_ipam: NicPolicyImage,
    /// `secondaryNetwork.multus`.
    pub multus: NicPolicyImage,
    /// `secondaryNetwork.cniPlugins` (macvlan among them).
    pub cni_plugins: NicPolicyImage,
    /// `secondaryNetwork.ipoib`, on InfiniBand.
    pub ipoib: Option<NicPolicyImage>,
}

/// `network/<name>.yaml`: the pods' secondary networks and their IPPools.
#[derive(Clone, Debug, Serialize)]
pub struct PodNetworksPlan {
    /// The networks, one per `[network].interfaces` entry.
    pub networks: Vec<crate::plan::network::PodNetwork>,
    /// `networkNamespace`: where the operator writes the NetworkAttachmentDefinitions
    /// (`[k8s].namespace`; the pods' annotation names it).
    pub network_namespace: String,
    /// Where the IPPools go: the Network Operator's namespace, where nv-ipam runs.
    pub pool_namespace: String,
    /// Comments.
    pub notes: Vec<String>,
}

/// `rdmaSharedDevicePlugin.{repository,image,version}` of the NicClusterPolicy.
#[derive(Clone, Debug, Serialize)]
pub struct NicPolicyImage {
    /// `nvcr.io/nvidia/mellanox`.
    pub repository: String,
    /// `k8s-rdma-shared-dev-plugin`.
    pub image: String,
    /// `network-operator-v26.4.1`.
    pub version: String,
}

/// Fabric-specific pod settings for a multi-node pod: (the fabric's devices, host network,
/// IPC_LOCK, comments). The RDMA resource is the network plan's.
pub(super) fn fabric_settings(common: &Common) -> (Vec<Extended>, bool, bool, Vec<String>) {
    if common.nodes < 2 {
        return (Vec::new(), false, false, Vec::new());
    }
    match common.fabric {
        Some(Fabric::Infiniband | Fabric::Roce) => {
            let r = common.network.rdma_resource.clone();
            let extended = r
                .iter()
                .map(|name| Extended {
                    name: name.clone(),
                    count: 1,
                    provider: match &common.network.rdma_resource_name {
                        Some(_) => Provider::NicClusterPolicy,
                        None => Provider::Prerequisite(format!(
                            "{name}: a device plugin of the cluster must provide this resource ([network].rdma_resource is not an rdma/ resource of the Network Operator's RDMA shared device plugin)"
                        )),
                    },
                })
                .collect();
            let note = match (&r, &common.network.rdma_resource_name) {
                (Some(r), Some(n)) => format!(
                    "{r}: provided by network/nic-cluster-policy.yaml (the Network Operator's RDMA shared device plugin, resourceName {n})"
                ),
                (Some(r), None) => format!(
                    "{r}: the cluster's own device plugin must provide it (prerequisite; gpustack writes the NicClusterPolicy only for rdma/ resources)"
                ),
                (None, _) => String::new(),
            };
            let on_host = common.network.pod_networks.is_empty();
            let how = if on_host {
                HOST_NETWORK_NOTE.to_string()
            } else {
                pod_networks_note(common)
            };
            (extended, on_host, true, vec![note, how])
        }
        Some(Fabric::Efa | Fabric::Slingshot) => {
            let device = common.network.device.clone();
            let notes = device
                .iter()
                .map(|d| match &d.provider {
                    Provider::Prerequisite(p) => p.clone(),
                    Provider::NicClusterPolicy => d.name.clone(),
                })
                .collect();
            (device.into_iter().collect(), false, false, notes)
        }
        _ => (Vec::new(), false, false, Vec::new()),
    }
}

/// Why multi-node InfiniBand/RoCE pods need no secondary network: they run on the host
/// network, where the HCAs' IP interfaces (IPoIB, the RoCE NIC's) already are; the RDMA
/// device itself comes from the shared device plugin. `[network].pod_subnets` takes the
/// alternative of the Network Operator's IPoIB and macvlan quick starts (a secondary
/// network per interface, [`pod_networks_plan`]).
const HOST_NETWORK_NOTE: &str = "no secondary network: the pods use the host network (hostNetwork: true), so NCCL's bootstrap interface and the HCAs' IPoIB/RoCE addresses are the node's own; to keep pods off the host network, give [network].pod_subnets and gpustack writes the Network Operator's IPoIBNetwork or MacvlanNetwork per interface (https://github.com/Mellanox/network-operator-docs/blob/0c0ecad430c9281c0924fa7434a88f1380ba3d7a/docs/quick-start/ipoib-rdma-shared.rst)";

/// What the pods of `[network].pod_subnets` attach, for comments.
fn pod_networks_note(common: &Common) -> String {
    let nets: Vec<String> = (common.network.pod_networks.iter())
        .map(|n| {
            format!(
                "{} {} (on {}, named so in the pod too; nv-ipam pool {})",
                n.kind_name(),
                n.name,
                n.interface,
                n.pool
            )
        })
        .collect();
    format!(
        "secondary networks on the fabric ([network].pod_subnets): {}; files network/<name>.yaml, applied after the NicClusterPolicy (source: {}; the annotation's JSON form: {})",
        nets.join(", "),
        crate::plan::network::POD_NETWORK_DOCS.join(", "),
        crate::plan::network::MULTUS_ANNOTATION
    )
}

/// `k8s.v1.cni.cncf.io/networks` for the pods on the fabric: Multus' JSON list naming each
/// network's NetworkAttachmentDefinition (the operator writes it into `namespace`, the
/// networks' `networkNamespace`) and the pod's interface, named as on the host so the
/// site's `NCCL_SOCKET_IFNAME` holds in the pod.
pub(super) fn networks_annotation(common: &Common, namespace: &str) -> Option<String> {
    let nets = &common.network.pod_networks;
    if nets.is_empty() || common.nodes < 2 {
        return None;
    }
    let list: Vec<serde_json::Value> = nets
        .iter()
        .map(|n| serde_json::json!({"name": n.name, "namespace": namespace, "interface": n.interface}))
        .collect();
    Some(serde_json::Value::Array(list).to_string())
}

/// The NicClusterPolicy for the network plan's RDMA resource, or the prerequisite when
/// gpustack cannot write one.
pub(super) fn nic_policy(common: &Common, lock: &Lock) -> (Option<NicPolicyPlan>, Vec<String>) {
    let plugin = locked::rdma_shared_dev_plugin(lock);
    let plugin = plugin.as_ref();
    let net = &common.network;
    let mut prerequisites = net.prerequisites.clone();
    let policy = match (&net.rdma_resource, &net.rdma_resource_name) {
        (Some(resource), Some(name)) => {
            // The example config of the Network Operator docs: Mellanox/NVIDIA NICs (PCI
            // vendor 15b3), up to 63 pods sharing each HCA.
            let config = serde_json::json!({
                "configList": [{
                    "resourceName": name,
                    "rdmaHcaMax": 63,
                    "selectors": { "vendors": ["15b3"] },
                }]
            });
            let mut notes = vec![
                format!("provides {resource}, the resource every multi-node pod of this stack requests"),
                format!("source: {}", crate::plan::network::NIC_CLUSTER_POLICY),

                "no `ofedDriver`: the hosts keep their RDMA driver (inbox rdma-core, or DOCA-OFED where GPUDirect RDMA uses nvidia-peermem)".into(),
                if net.pod_networks.is_empty() {
                    HOST_NETWORK_NOTE.into()
                } else {
                    pod_networks_note(common)
                },
            ];
            if !net.hcas.is_empty() {
                notes.push(format!(
                    "[network].hcas ({}) are RDMA device names; the plugin selects by PCI vendor, so every NVIDIA NIC of a node is shared",
                    net.hcas.join(", ")
                ));
            }
            let image = plugin.map(|p| policy_image(p, &mut notes));
            let secondary = secondary_components(common, lock, &mut notes, &mut prerequisites);
            if image.is_none() {
                notes.push("the lock has no k8s-rdma-shared-dev-plugin image: set `repository` and `version` to those of your Network Operator release before applying".into());
            }
            Some(NicPolicyPlan {
                image,
                resource_name: name.clone(),
                resource: resource.clone(),
                config: config.to_string(),
                notes,
                secondary,
            })
        }
        (Some(resource), None) => {
            prerequisites.push(format!(
                "{resource}: a device plugin of the cluster must provide this resource ([network].rdma_resource is not an rdma/ resource of the Network Operator's RDMA shared device plugin)"
            ));
            if !net.pod_networks.is_empty() {
                prerequisites.push(SECONDARY_PREREQUISITE.into());
            }
            None
        }
        (None, _) => None,
    };
    if let Some(Extended {
        provider: Provider::Prerequisite(p),
        ..
    }) = &net.device
    {
        prerequisites.push(p.clone());
    }
    (policy, prerequisites)
}

/// What must run when gpustack writes no NicClusterPolicy but the pods attach networks.
const SECONDARY_PREREQUISITE: &str = "the pods' secondary networks (network/*.yaml) need the Network Operator's Multus, CNI plugins, IPoIB CNI (InfiniBand) and nv-ipam, deployed by the cluster's own NicClusterPolicy (`secondaryNetwork`, `nvIpam`)";

/// `{repository, image, version}` of a locked Network Operator image, noting its source.
fn policy_image(p: &PinnedImage, notes: &mut Vec<String>) -> NicPolicyImage {
    let full = p.image.as_deref().unwrap_or_default();
    let (repository, image) = full.rsplit_once('/').unwrap_or(("", full));
    let tag = p.tag.as_deref().unwrap_or_default();
    notes.push(format!("{image} {tag}: source {}", p.source));
    NicPolicyImage {
        repository: repository.to_string(),
        image: image.to_string(),
        version: tag.to_string(),
    }
}

/// `nvIpam` and `secondaryNetwork` of the NicClusterPolicy, when the pods attach secondary
/// networks; a prerequisite when the lock lacks one of their images.
fn secondary_components(
    common: &Common,
    lock: &Lock,
    notes: &mut Vec<String>,
    prerequisites: &mut Vec<String>,
) -> Option<SecondaryComponents> {
    let nets = &common.network.pod_networks;
    if nets.is_empty() {
        return None;
    }
    let ib = common.fabric == Some(Fabric::Infiniband);
    let find = |name: &str| locked::network_operator_image(lock, name);
    let (Some(ipam), Some(multus), Some(cni)) = (
        find("nvidia-k8s-ipam"),
        find("multus-cni"),
        find("cni-plugins"),
    ) else {
        prerequisites.push(SECONDARY_PREREQUISITE.into());
        return None;
    };
    let ipoib = find("ipoib-cni");
    if ib && ipoib.is_none() {
        prerequisites.push(SECONDARY_PREREQUISITE.into());
        return None;
    }
    Some(SecondaryComponents {
        nv_ipam: policy_image(&ipam, notes),
        multus: policy_image(&multus, notes),
        cni_plugins: policy_image(&cni, notes),
        ipoib: ipoib.filter(|_| ib).map(|p| policy_image(&p, notes)),
    })
}

/// The pods' secondary networks and their IPPools.
pub(super) fn pod_networks_plan(common: &Common, namespace: &str) -> Option<PodNetworksPlan> {
    let nets = &common.network.pod_networks;
    if nets.is_empty() {
        return None;
    }
    Some(PodNetworksPlan {
        networks: nets.clone(),
        network_namespace: namespace.to_string(),
        pool_namespace: crate::plan::network::NETWORK_OPERATOR_NAMESPACE.into(),
        notes: vec![
            format!("one network per [network].interfaces entry, each with an nv-ipam IPPool of its [network].pod_subnets entry; every node takes a block of {} addresses (a pod of this stack takes a node's GPUs whole, so a node runs one at a time)", crate::spec::deploy::POD_BLOCK),
            "apply after the NicClusterPolicy (the operator must run; not in kustomization.yaml): kubectl apply -f network/".into(),
            format!("source: {}", crate::plan::network::POD_NETWORK_DOCS.join(", ")),
        ],
    })
}

/// A multi-node EFA or Slingshot stack names the device its pods request: without it, a pod
/// has no EFA or CXI device and NCCL aborts at communicator init (the environment forces
/// the fabric's libfabric provider). The error says which `[network]` key gives it.
pub(super) fn fabric_device_given(common: &Common) -> Result<(), Error> {
    if common.nodes < 2 || common.network.device.is_some() {
        return Ok(());
    }
    match common.fabric {
        Some(Fabric::Efa) => Err(bad(
            format!("the pods of this {}-node EFA stack would request no EFA device: `[network].efa_devices` is not set, and NCCL's libfabric (FI_PROVIDER=efa) then finds no EFA interface in the pod", common.nodes),
            &format!("set `[network].efa_devices` to the instance type's number of EFA interfaces (the column Maximum EFA interfaces of https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa.html#efa-instance-types); the pods then request `{}` from the AWS EFA Kubernetes device plugin", crate::plan::network::EFA_RESOURCE),
        )),
        Some(Fabric::Slingshot) => Err(bad(
            format!("the pods of this {}-node Slingshot stack would request no CXI device: `[network].cxi_resource` is not set, and NCCL's libfabric (FI_PROVIDER=cxi) then finds no CXI NIC in the pod", common.nodes),
            &format!("set `[network].cxi_resource` to the resource of the device plugin that gives pods the CXI NICs, like `beta.hpe.com/cxi` (HPE's CXI Kubernetes device plugin, {}); or generate the other targets only (`gpustack gen docker slurm`)", crate::plan::network::CXI_PLUGIN),
        )),
        _ => Ok(()),
    }
}

/// `network/<network>.yaml` and `network/<pool>.yaml` for each secondary network.
pub(super) fn render_pod_networks(plan: &K8sPlan) -> Result<Vec<RenderedFile>, Error> {
    #[derive(Serialize)]
    struct Base<'a> {
        plan: &'a K8sPlan,
        nets: &'a PodNetworksPlan,
    }
    let mut files = Vec::new();
    let Some(nets) = &plan.pod_networks else {
        return Ok(files);
    };
    let base = crate::render::Context::new(&Base { plan, nets });
    for net in &nets.networks {
        let ctx = base.with("net", net);
        for (file, template) in [(&net.name, "pod-network"), (&net.pool, "ippool")] {
            files.push(RenderedFile::new(
                format!("network/{file}.yaml"),
                crate::render::render_with(&format!("k8s/network/{template}.yaml.j2"), &ctx)?,
            ));
        }
    }
    Ok(files)
}
