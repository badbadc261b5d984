//! The environment variables a catalog `[[env]]` entry may set, and the only names the
//! generators write into a job's NCCL/fabric environment (the site's `[network]` values
//! included): names that NCCL, the fabric libraries (libfabric, UCX), Open MPI, CUDA and
//! PyTorch document, each with where it is documented. An `[[env]]` value reaches every image (`ENV`), the Kubernetes
//! ConfigMap and the Slurm environment file, so an overlay must not be able to set
//! `LD_PRELOAD`, `BASH_ENV`, `PATH`, `PYTHONPATH` or anything else that changes which code
//! runs.
//!
//! Left out on purpose, although documented: variables that make a library load code or
//! write files at a path the value names (`NCCL_NET_PLUGIN`, `NCCL_TUNER_PLUGIN`,
//! `NCCL_PROFILER_PLUGIN`, `NCCL_DEBUG_FILE`, `NCCL_TOPO_DUMP_FILE`, `FI_PROVIDER_PATH`):
//! set those in the site's own image or job script, where they are reviewed as code.
//!
//! To add a name: append it with its source, keep the table sorted (a test checks), and
//! say why in the commit.

const NCCL: &str = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html";
const FI: &str = "https://ofiwg.github.io/libfabric/main/man/fi_provider.7.html";
const FI_CXI: &str = "https://ofiwg.github.io/libfabric/main/man/fi_cxi.7.html";
const FI_EFA: &str = "https://ofiwg.github.io/libfabric/main/man/fi_efa.7.html";
const FI_MR: &str = "https://ofiwg.github.io/libfabric/main/man/fi_mr.3.html";
const UCX: &str = "https://openucx.readthedocs.io/en/master/faq.html";
const CUDA: &str = "https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#env-vars";
const TORCH: &str = "https://docs.pytorch.org/docs/stable/torch_nccl_environment_variables.html";
const GLOO: &str =
    "https://docs.pytorch.org/docs/stable/distributed.html#common-environment-variables";
const OMPI_TCP: &str = "https://docs.open-mpi.org/en/v5.0.x/tuning-apps/networking/tcp.html";
const OFI_NCCL: &str = "https://github.com/aws/aws-ofi-nccl/blob/master/doc/efa-env-var.md";
const OFI_NCCL_NOTES: &str = "https://github.com/aws/aws-ofi-nccl/blob/master/RELEASENOTES.md";
const OMPI_MCA: &str = "https://docs.open-mpi.org/en/v5.0.x/mca.html";
const PMIX_MCA: &str = "https://docs.openpmix.org/en/latest/mca.html";
const NVSHMEM: &str = "https://docs.nvidia.com/nvshmem/api/gen/env.html";

/// (name, where it is documented), sorted by name.
pub(crate) const ALLOWED: &[(&str, &str)] = &[
    ("CUDA_CACHE_DISABLE", CUDA),
    ("CUDA_CACHE_MAXSIZE", CUDA),
    ("CUDA_DEVICE_MAX_CONNECTIONS", CUDA),
    ("CUDA_DEVICE_ORDER", CUDA),
    ("CUDA_LAUNCH_BLOCKING", CUDA),
    ("CUDA_MODULE_LOADING", CUDA),
    ("CUDA_VISIBLE_DEVICES", CUDA),
    ("FI_CXI_DEFAULT_CQ_SIZE", FI_CXI),
    ("FI_CXI_DEFAULT_TX_SIZE", FI_CXI),
    ("FI_CXI_DISABLE_HOST_REGISTER", FI_CXI),
    ("FI_CXI_OFLOW_BUF_COUNT", FI_CXI),
    ("FI_CXI_OFLOW_BUF_SIZE", FI_CXI),
    ("FI_CXI_RDZV_EAGER_SIZE", FI_CXI),
    ("FI_CXI_RDZV_GET_MIN", FI_CXI),
    ("FI_CXI_RDZV_PROTO", FI_CXI),
    ("FI_CXI_RDZV_THRESHOLD", FI_CXI),
    ("FI_CXI_RX_MATCH_MODE", FI_CXI),
    ("FI_EFA_ENABLE_SHM_TRANSFER", FI_EFA),
    ("FI_EFA_FORK_SAFE", OFI_NCCL),
    ("FI_EFA_USE_DEVICE_RDMA", FI_EFA),
    ("FI_EFA_USE_HUGE_PAGE", FI_EFA),
    ("FI_LOG_LEVEL", FI),
    ("FI_MR_CACHE_MAX_COUNT", FI_MR),
    ("FI_MR_CACHE_MAX_SIZE", FI_MR),
    ("FI_MR_CACHE_MONITOR", FI_MR),
    ("FI_PROVIDER", FI),
    ("GLOO_SOCKET_IFNAME", GLOO),
    ("NCCL_ALGO", NCCL),
    ("NCCL_BUFFSIZE", NCCL),
    ("NCCL_CHECKS_DISABLE", NCCL),
    ("NCCL_CHECK_POINTERS", NCCL),
    ("NCCL_COLLNET_ENABLE", NCCL),
    ("NCCL_COMM_BLOCKING", NCCL),
    ("NCCL_CROSS_NIC", NCCL),
    ("NCCL_CUMEM_ENABLE", NCCL),
    ("NCCL_DEBUG", NCCL),
    ("NCCL_DEBUG_SUBSYS", NCCL),
    ("NCCL_GRAPH_REGISTER", NCCL),
    ("NCCL_IB_ADAPTIVE_ROUTING", NCCL),
    ("NCCL_IB_ADDR_FAMILY", NCCL),
    ("NCCL_IB_ADDR_RANGE", NCCL),
    ("NCCL_IB_AR_THRESHOLD", NCCL),
    ("NCCL_IB_CUDA_SUPPORT", NCCL),
    ("NCCL_IB_DISABLE", NCCL),
    ("NCCL_IB_FIFO_TC", NCCL),
    ("NCCL_IB_GID_INDEX", NCCL),
    ("NCCL_IB_HCA", NCCL),
    ("NCCL_IB_MERGE_NICS", NCCL),
    ("NCCL_IB_PCI_RELAXED_ORDERING", NCCL),
    ("NCCL_IB_QPS_PER_CONNECTION", NCCL),
    ("NCCL_IB_RETRY_CNT", NCCL),
    ("NCCL_IB_RETURN_ASYNC_EVENTS", NCCL),
    ("NCCL_IB_ROCE_VERSION_NUM", NCCL),
    ("NCCL_IB_SL", NCCL),
    ("NCCL_IB_SPLIT_DATA_ON_QPS", NCCL),
    ("NCCL_IB_TC", NCCL),
    ("NCCL_IB_TIMEOUT", NCCL),
    ("NCCL_IGNORE_CPU_AFFINITY", NCCL),
    ("NCCL_LAUNCH_MODE", NCCL),
    ("NCCL_LOCAL_REGISTER", NCCL),
    ("NCCL_MAX_NCHANNELS", NCCL),
    ("NCCL_MIN_NCHANNELS", NCCL),
    ("NCCL_MNNVL_ENABLE", NCCL),
    ("NCCL_NCHANNELS_PER_NET_PEER", NCCL),
    ("NCCL_NET", NCCL),
    ("NCCL_NET_GDR_C2C", NCCL),
    ("NCCL_NET_GDR_LEVEL", NCCL),
    ("NCCL_NET_GDR_READ", NCCL),
    ("NCCL_NET_SHARED_BUFFERS", NCCL),
    ("NCCL_NET_SHARED_COMMS", NCCL),
    ("NCCL_NSOCKS_PERTHREAD", NCCL),
    ("NCCL_NTHREADS", NCCL),
    ("NCCL_NVB_DISABLE", NCCL),
    ("NCCL_NVLS_ENABLE", NCCL),
    ("NCCL_P2P_DISABLE", NCCL),
    ("NCCL_P2P_LEVEL", NCCL),
    ("NCCL_P2P_NET_CHUNKSIZE", NCCL),
    ("NCCL_P2P_PXN_LEVEL", NCCL),
    ("NCCL_PROTO", NCCL),
    ("NCCL_PXN_DISABLE", NCCL),
    ("NCCL_RUNTIME_CONNECT", NCCL),
    ("NCCL_SET_THREAD_NAME", NCCL),
    ("NCCL_SHM_DISABLE", NCCL),
    ("NCCL_SOCKET_FAMILY", NCCL),
    ("NCCL_SOCKET_IFNAME", NCCL),
    ("NCCL_SOCKET_NTHREADS", NCCL),
    ("NCCL_TOPO_FILE", NCCL),
    ("NCCL_WORK_FIFO_DEPTH", NCCL),
    ("NVSHMEM_DISABLE_CUDA_VMM", NVSHMEM),
    ("NVSHMEM_LIBFABRIC_PROVIDER", NVSHMEM),
    ("NVSHMEM_REMOTE_TRANSPORT", NVSHMEM),
    ("OFI_NCCL_DISABLE_DMABUF", OFI_NCCL_NOTES),
    ("OMPI_MCA_btl", OMPI_MCA),
    ("OMPI_MCA_btl_tcp_if_include", OMPI_TCP),
    ("OMPI_MCA_mtl", OMPI_MCA),
    ("OMPI_MCA_opal_common_ofi_provider_include", OMPI_MCA),
    ("OMPI_MCA_pml", OMPI_MCA),
    ("PMIX_MCA_psec", PMIX_MCA),
    ("TORCH_NCCL_ASYNC_ERROR_HANDLING", TORCH),
    ("TORCH_NCCL_AVOID_RECORD_STREAMS", TORCH),
    ("TORCH_NCCL_BLOCKING_WAIT", TORCH),
    ("TORCH_NCCL_DUMP_ON_TIMEOUT", TORCH),
    ("TORCH_NCCL_ENABLE_MONITORING", TORCH),
    ("TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", TORCH),
    ("UCX_IB_GID_INDEX", UCX),
    ("UCX_LOG_LEVEL", UCX),
    ("UCX_NET_DEVICES", UCX),
    ("UCX_TLS", UCX),
];

/// Where `name` is documented, when it is in the table.
pub(crate) fn source(name: &str) -> Option<&'static str> {
    ALLOWED
        .binary_search_by(|(n, _)| (*n).cmp(name))
        .ok()
        .map(|i| ALLOWED[i].1)
}

/// Whether an `[[env]]` entry may set `name`.
pub(crate) fn allowed(name: &str) -> bool {
    ALLOWED.binary_search_by(|(n, _)| (*n).cmp(name)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_and_has_no_loader_variables() {
        assert!(
            ALLOWED.windows(2).all(|w| w[0].0 < w[1].0),
            "keep it sorted"
        );
        for bad in [
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "BASH_ENV",
            "ENV",
            "PATH",
            "PYTHONPATH",
            "PYTHONSTARTUP",
            "NCCL_NET_PLUGIN",
            "NCCL_TUNER_PLUGIN",
            "NCCL_DEBUG_FILE",
        ] {
            assert!(!allowed(bad), "{bad}");
        }
        assert!(allowed("NCCL_IB_HCA"));
    }

    #[test]
    fn the_book_lists_every_name() {
        let book = include_str!("../../book/src/catalog.md");
        for (name, source) in ALLOWED {
            assert!(
                book.contains(&format!("`{name}`")),
                "{name} is not in book/src/catalog.md"
            );
            assert!(
                book.contains(source),
                "{source} is not in book/src/catalog.md"
            );
        }
    }

    #[test]
    fn every_stock_env_name_is_allowed() {
        let cat = crate::Catalog::stock().unwrap();
        for e in &cat.env {
            assert!(
                allowed(&e.name),
                "{} (catalog/env.toml) is not in the table",
                e.name
            );
        }
    }
}
