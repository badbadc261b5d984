//! Kinds the spec names and every target renders: the network fabric, the cloud a VM image is
//! built on, a storage location.

use std::fmt;

/// The network fabric between nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Fabric {
    /// InfiniBand (RDMA, UCX, SHARP where supported).
    Infiniband,
    /// RDMA over Converged Ethernet.
    Roce,
    /// AWS Elastic Fabric Adapter (libfabric, aws-ofi-nccl).
    Efa,
    /// HPE Slingshot (libfabric CXI, aws-ofi-nccl).
    Slingshot,
    /// Plain TCP sockets.
    Ethernet,
}

impl Fabric {
    /// Every fabric.
    pub const ALL: [Fabric; 5] = [
        Fabric::Infiniband,
        Fabric::Roce,
        Fabric::Efa,
        Fabric::Slingshot,
        Fabric::Ethernet,
    ];

    /// The spec spelling.
    pub fn name(self) -> &'static str {
        match self {
            Fabric::Infiniband => "infiniband",
            Fabric::Roce => "roce",
            Fabric::Efa => "efa",
            Fabric::Slingshot => "slingshot",
            Fabric::Ethernet => "ethernet",
        }
    }
}

/// A cloud for Packer sources.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Cloud {
    /// `amazon-ebs`.
    Aws,
    /// `googlecompute`.
    Gcp,
    /// `azure-arm`.
    Azure,
    /// `qemu` (on premises).
    Qemu,
}

impl Cloud {
    /// Every cloud.
    pub const ALL: [Cloud; 4] = [Cloud::Aws, Cloud::Gcp, Cloud::Azure, Cloud::Qemu];

    /// The spec spelling.
    pub fn name(self) -> &'static str {
        match self {
            Cloud::Aws => "aws",
            Cloud::Gcp => "gcp",
            Cloud::Azure => "azure",
            Cloud::Qemu => "qemu",
        }
    }
}

/// A storage location.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StorageRef {
    /// `nfs://host/path`.
    Nfs {
        /// Server.
        host: String,
        /// Export path.
        path: String,
    },
    /// `lustre:/mount/path` (mounted on the hosts).
    Lustre {
        /// Mount path.
        path: String,
    },
    /// `hostpath:/path`.
    HostPath {
        /// Path on the host.
        path: String,
    },
    /// `pvc:name`: an existing PersistentVolumeClaim.
    Pvc {
        /// Claim name.
        name: String,
    },
}

impl fmt::Display for StorageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StorageRef::Nfs { host, path } => write!(f, "nfs://{host}{path}"),
            StorageRef::Lustre { path } => write!(f, "lustre:{path}"),
            StorageRef::HostPath { path } => write!(f, "hostpath:{path}"),
            StorageRef::Pvc { name } => write!(f, "pvc:{name}"),
        }
    }
}
