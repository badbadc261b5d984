//! The JSON Schema of the spec, `gpustack.toml`, so that editors complete and check it.
//!
//! Editors that read JSON Schema for TOML files (Even Better TOML in VS Code, and every
//! editor that runs the taplo language server) complete table names, keys, GPU ids and
//! enum values, and underline unknown keys as you type. The repository commits the schema
//! for the stock catalog at [`SCHEMA_PATH`]; a spec opts in with a first line
//!
//! ```toml
//! #:schema ./schema/gpustack.schema.json
//! ```
//!
//! (the book's "Library API" chapter shows the other ways to associate it).
//!
//! # Generated, and kept in step with the parser
//!
//! * **Keys** come from the parser's own wire types: serde's derive lists the fields of each
//!   `#[serde(deny_unknown_fields)]` struct, and [`spec_schema`] reads that list. A key
//!   added to the parser without a description here makes generation panic, so the drift
//!   test in `tests/schema.rs` fails before the schema can fall behind.
//! * **Value sets** come from the enums ([`Component::ALL`], [`Layer::ALL`], [`Fabric::ALL`],
//!   [`Cloud::ALL`], [`SlurmContainer::ALL`]) and from the catalog (GPU ids and aliases, OS
//!   ids), so a catalog overlay's GPUs appear in the schema generated with it.
//! * **Required keys, bounds, defaults and patterns** are stated here and checked against
//!   [`Spec::parse`](crate::Spec::parse) by `tests/schema.rs`: every value the schema
//!   offers is accepted, every required key is required, every bound and default is the
//!   parser's, and an unknown key is rejected by both.
//!
//! The schema never rejects a spec that gpustack accepts (GPU and OS names match in any
//! case, as gpustack reads them). It is looser where the parser's checks need more than a
//! pattern: the full requirement grammar, `..` in paths, whether a version exists. Those
//! are gpustack's errors to report.
//!
//! # Dialect
//!
//! `$schema` is draft 2020-12, and the schema uses only keywords that mean the same in
//! draft 7 (no `$ref`, `$defs`, `prefixItems` or `unevaluatedProperties`), because taplo
//! validates with a draft 7 implementation. `tests/schema.rs` checks the keyword set and
//! validates the schema against the 2020-12 metaschema. Beside the standard keywords, taplo's
//! `x-taplo` extension (ignored by validators) gives each GPU id a hover text and makes a
//! new `[hardware]` table start with `gpus`.
//!
//! ```
//! let catalog = gpustack::Catalog::stock()?;
//! let schema = gpustack::schema::spec_schema(&catalog);
//! assert_eq!(schema["required"], serde_json::json!(["stack", "hardware", "components"]));
//! assert_eq!(schema["properties"]["cluster"]["properties"]["nodes"]["maximum"], 4096);
//! let text = gpustack::schema::spec_schema_json(&catalog);
//! assert!(text.starts_with("{\n  \"$schema\": \"https://json-schema.org/draft/2020-12/schema\","));
//! # Ok::<(), gpustack::Error>(())
//! ```

use std::fmt::Write as _;

use serde::de::{self, Deserialize, Deserializer, Visitor};
use serde_json::{json, Map, Value};

use crate::catalog::Catalog;
use crate::core::{Cloud, Fabric};
use crate::core::{Component, Layer};
use crate::spec::deploy::{
    ClusterWire, ImageWire, K8sWire, NetworkWire, PackerWire, ServeWire, SlurmContainer, SlurmWire,
    StorageWire, TrainWire,
};
use crate::spec::{HardwareWire, SpecWire, StackWire};

/// The JSON Schema dialect, the schema's `$schema`.
pub const DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// The schema's `$id`. A URN: the schema is a file of the repository (and the output of
/// [`spec_schema_json`]), not something fetched from a web address.
pub const SCHEMA_ID: &str = "urn:gpustack:schema:gpustack.toml";

/// Where the repository keeps the schema for the stock catalog, relative to its root.
pub const SCHEMA_PATH: &str = "schema/gpustack.schema.json";

/// The JSON Schema of `gpustack.toml` for `catalog` (its GPU and OS ids are the schema's
/// value sets).
///
/// # Panics
///
/// Only when this module and the spec parser disagree on a table's keys, which is a bug in
/// gpustack that `tests/schema.rs` catches; never because of the catalog's contents.
#[must_use]
pub fn spec_schema(catalog: &Catalog) -> Value {
    let mut root = table(
        "gpustack.toml",
        fields_of::<SpecWire>(),
        "The request of a gpustack stack: the GPUs it runs on and the components it contains \
         ([stack], [hardware], [components]), and for the generators the optional deployment \
         tables. `gpustack lock` resolves it into gpustack.lock. Reference: the book's \
         chapter \"The spec: gpustack.toml\".",
        &["stack", "hardware", "components"],
        vec![
            ("stack", stack(catalog)),
            ("hardware", hardware(catalog)),
            ("components", components()),
            ("cluster", cluster()),
            ("network", network()),
            ("image", image()),
            ("train", train()),
            ("serve", serve()),
            ("packer", packer()),
            ("k8s", k8s()),
            ("slurm", slurm()),
            ("storage", storage()),
            ("resolve", resolve()),
            ("python", python()),
            ("check", check()),
        ],
    );
    root.insert("$schema".into(), DIALECT.into());
    root.insert("$id".into(), SCHEMA_ID.into());
    Value::Object(root)
}

/// [`spec_schema`] as the committed file holds it: pretty JSON with schema keywords in a
/// fixed order (`$schema`, `$id`, `title`, `description`, `type`, …), property names sorted,
/// and exactly one trailing newline. The text is the same whatever serde_json's features.
#[must_use]
pub fn spec_schema_json(catalog: &Catalog) -> String {
    let mut out = String::new();
    write_json(&spec_schema(catalog), 0, false, &mut out);
    out.push('\n');
    out
}

// ----- the tables --------------------------------------------------------------------

fn stack(catalog: &Catalog) -> Value {
    let os: Vec<&str> = catalog.os.iter().map(|o| o.id.as_str()).collect();
    let mut os_schema = names_of(
        &os,
        &[],
        false,
        "An OS id from the catalog, case-insensitive. When set, gpustack picks only CUDA \
         releases whose `nvidia/cuda` runtime and devel tags the catalog records for that OS \
         (from NVIDIA's tag lists, or observed in public files; rule `os.cuda-images`). \
         `gpustack catalog show os` lists the ids.",
    );
    if let Some(first) = os.first() {
        os_schema["examples"] = json!([first]);
    }
    object(table(
        "[stack]",
        fields_of::<StackWire>(),
        "The stack's identity: its name, and the OS of its images.",
        &["name"],
        vec![
            (
                "name",
                json!({
                    "type": "string",
                    "description": "The stack's name: lowercase letters, digits and `-`, starting with a letter or digit, at most 63 characters. It names images and appears in messages.",
                    "pattern": "^[a-z0-9][a-z0-9-]*$",
                    "maxLength": 63,
                    "examples": ["llm-train"],
                }),
            ),
            ("os", os_schema),
        ],
    ))
}

fn hardware(catalog: &Catalog) -> Value {
    // Every id and alias, sorted, each with its hover text.
    let mut named: Vec<(&str, String)> = Vec::new();
    for g in &catalog.gpus {
        let about = format!("{}: compute capability {} ({})", g.name, g.cc, g.arch);
        named.push((g.id.as_str(), about.clone()));
        for a in &g.aliases {
            named.push((a.as_str(), format!("alias of `{}`, {about}", g.id)));
        }
    }
    named.sort_by(|a, b| a.0.cmp(b.0));
    named.dedup_by(|a, b| a.0 == b.0);
    let (gpus, gpu_docs): (Vec<&str>, Vec<String>) = named.into_iter().unzip();
    let example = catalog.gpus.first().map(|g| g.id.as_str());
    let mut t = table(
        "[hardware]",
        fields_of::<HardwareWire>(),
        "What the stack runs on: the GPUs (catalog ids or aliases, or compute capabilities; at \
         least one) and, optionally, the driver installed on the nodes. The GPUs decide which \
         CUDA releases can build for them, which torch wheels have kernels for them, and \
         which drivers support them.",
        &[],
        vec![
            (
                "gpus",
                json!({
                    "type": "array",
                    "description": "GPUs from the catalog: an id or alias, the marketing name, or the name nvidia-smi prints (with or without `NVIDIA ` and the memory size), in any case and with any separators; duplicates are dropped and the lock records canonical ids. `gpustack catalog show gpu` lists them. A GPU the catalog lacks can be given by its compute capability in `archs`.",
                    "items": gpu_name(catalog, &gpus, &gpu_docs),
                    "examples": [example.into_iter().collect::<Vec<_>>()],
                }),
            ),
            (
                "archs",
                json!({
                    "type": "array",
                    "description": "Compute capabilities the stack must also run on, in any common spelling: `sm_90`, `sm90`, `90`, `9.0`; `sm_90a` (architecture-specific), `sm_100f` (family-specific). PTX targets (`compute_90`, `9.0+PTX`) are rejected. The lock's arch list is the sorted union of each GPU's `sm_XY` and these.",
                    "items": {
                        "type": "string",
                        "description": "A compute capability: `sm_90`, `sm_90a`, `9.0`, `90`.",
                        "pattern": "^\\s*([sS][mM]_?)?[0-9]+(\\.[0-9]+)?[aAfF]?\\s*$",
                    },
                    "examples": [["sm_90"]],
                }),
            ),
            (
                "driver",
                json!({
                    "type": "string",
                    "description": "The driver installed on the nodes, as `nvidia-smi` prints it (two or three numeric parts). A host fact, not a requirement: the lock's driver is exactly this version and every other component must work with it. Omit it and gpustack picks a released driver.",
                    "pattern": "^[0-9]+\\.[0-9]+(\\.[0-9]+)?([.-]?[A-Za-z0-9]+)?$",
                    "examples": ["550.54.15"],
                }),
            ),
        ],
    );
    // Editors that complete a new [hardware] table also insert `gpus`.
    t.insert("x-taplo".into(), json!({ "initKeys": ["gpus"] }));
    // "`[hardware]` names no GPU": one of the lists must have an entry.
    t.insert(
        "anyOf".into(),
        json!([
            { "required": ["gpus"], "properties": { "gpus": { "minItems": 1 } } },
            { "required": ["archs"], "properties": { "archs": { "minItems": 1 } } },
        ]),
    );
    object(t)
}

fn components() -> Value {
    let mut props = Map::new();
    for c in Component::ALL {
        let what = if c.is_extra() {
            format!(
                "{}: an optional framework component (an \"extra\", from the catalog's `extra` family) installed on top of torch; listing it brings torch in",
                c.display()
            )
        } else {
            c.display().to_string()
        };
        let local = if c == Component::Torch {
            " A local label selects a wheel variant: `==2.5.1+cu124`."
        } else {
            ""
        };
        let string = json!({
            "type": "string",
            "description": format!(
                "{what} ({} layer). A version requirement: `*` for any version, a bare version that matches every release under it (`12.4` matches `12.4.1`), or `==`, `!=`, `>=`, `>`, `<=`, `<` clauses joined by commas (`>=2.4, <2.6`).{local}",
                c.layer().name()
            ),
            "minLength": 1,
            "pattern": "\\S",
            "examples": ["*"],
        });
        let schema = if c == Component::Torch {
            // The table form (`crate::spec::TORCH_TABLE_KEYS`): a source build.
            json!({
                "description": format!("{} Or a table, for a source build.", string["description"].as_str().unwrap_or_default()),
                "examples": ["*"],
                "anyOf": [
                    string,
                    {
                        "type": "object",
                        "description": "torch as a table: `version` (the requirement, default `*`), `build` (`wheel`, the default, or `source`: compiled from the release's tag against the lock's CUDA, cuDNN and NCCL) and, for a source build, `archs` (the TORCH_CUDA_ARCH_LIST entries to compile; default the GPUs' list) and `prebuilt` (`url` and `sha256` of a wheel of this build made before, which Packer installs instead of building on the VM).",
                        "additionalProperties": false,
                        "properties": {
                            "version": {"type": "string", "minLength": 1, "pattern": "\\S"},
                            "build": {"enum": ["wheel", "source"]},
                            "archs": {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}},
                            "prebuilt": {
                                "type": "object",
                                "additionalProperties": false,
                                "required": ["url", "sha256"],
                                "properties": {
                                    "url": {"type": "string", "pattern": "^https://[A-Za-z0-9/._+%-]*/torch-[A-Za-z0-9._+%-]*\\.whl$"},
                                    "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                                },
                            },
                        },
                        "examples": [{"version": "==2.10.0", "build": "source", "archs": ["8.0"]}],
                    },
                ],
            })
        } else {
            string
        };
        props.insert(c.name().into(), schema);
    }
    json!({
        "title": "[components]",
        "description": "The components of the stack, each with a version requirement: listed means part of the stack, omitted means absent. Some imply others: vllm, deepspeed and every extra bring torch; torch, vllm and deepspeed bring python and cuda; cudnn and nccl bring cuda; every stack has a driver.",
        "type": "object",
        "minProperties": 1,
        "additionalProperties": false,
        "properties": props,
    })
}

fn cluster() -> Value {
    object(table(
        "[cluster]",
        fields_of::<ClusterWire>(),
        "The cluster the generators deploy to: its interconnect and size. It sets the NCCL \
         and fabric environment, the fabric packages of the images, and the job shapes of \
         the Kubernetes and Slurm targets.",
        &["fabric", "nodes", "gpus_per_node"],
        vec![
            (
                "fabric",
                json!({
                    "type": "string",
                    "description": "The network between nodes: `infiniband` (RDMA, UCX, SHARP where supported), `roce` (RDMA over Converged Ethernet), `efa` (AWS Elastic Fabric Adapter), `slingshot` (HPE Slingshot) or `ethernet` (plain TCP sockets).",
                    "enum": Fabric::ALL.map(Fabric::name),
                    "examples": [Fabric::ALL[0].name()],
                }),
            ),
            ("nodes", integer("Nodes in the job.", 4096, None, 8)),
            ("gpus_per_node", integer("GPUs per node.", 16, None, 8)),
            (
                "cpus_per_node",
                integer(
                    "CPUs a job may use on each node: Kubernetes requests and limits, Slurm `--cpus-per-task`. Default: 4 per GPU (conservative; say what your nodes have).",
                    4096,
                    None,
                    96,
                ),
            ),
            (
                "memory_gib_per_node",
                integer(
                    "Memory a job may use on each node, GiB: Kubernetes requests and limits, Slurm `--mem`. Default: 32 per GPU (conservative; say what your nodes have).",
                    65_536,
                    None,
                    1024,
                ),
            ),
        ],
    ))
}

fn network() -> Value {
    object(table(
        "[network]",
        fields_of::<NetworkWire>(),
        "The site's network for the fabric of [cluster]: interface and device names, the RoCE \
         GID index, the Kubernetes RDMA resource, SHARP. These values go to the runtime \
         environment only (the Kubernetes ConfigMap, Slurm's env file, the VM image's \
         profile), never into an image. Recorded in the lock's [request.network].",
        &[],
        vec![
            (
                "interfaces",
                json!({
                    "type": "array",
                    "description": "Bootstrap/socket interfaces: NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME, Open MPI's TCP interfaces. Any fabric.",
                    "items": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,14}$"},
                    "minItems": 1,
                    "maxItems": 64,
                    "examples": [["ib0"]],
                }),
            ),
            (
                "hcas",
                json!({
                    "type": "array",
                    "description": "RDMA devices, `name` or `name:port`: NCCL_IB_HCA (exact names) and UCX_NET_DEVICES (port 1 when none is given). InfiniBand and RoCE only.",
                    "items": {"type": "string", "pattern": "^[a-z][a-z0-9_]{0,62}(:[1-9][0-9]{0,2})?$"},
                    "minItems": 1,
                    "maxItems": 64,
                    "examples": [["mlx5_0", "mlx5_1"]],
                }),
            ),
            (
                "gid_index",
                json!({
                    "type": "integer",
                    "description": "The RoCE GID index (NCCL_IB_GID_INDEX, UCX_IB_GID_INDEX). RoCE only; leave it out to let NCCL pick the RoCE v2 GID itself. 0 to 255.",
                    "minimum": 0,
                    "maximum": 255,
                    "examples": [3],
                }),
            ),
            (
                "rdma_resource",
                json!({
                    "type": "string",
                    "description": "The Kubernetes extended resource of the RDMA shared device plugin that multi-node pods request; the generated NicClusterPolicy provides it. InfiniBand and RoCE only; default `rdma/rdma_shared_device_a`.",
                    "pattern": "^[a-z0-9]([a-z0-9.-]*[a-z0-9])?/[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$",
                    "examples": ["rdma/rdma_shared_device_a"],
                }),
            ),
            (
                "sharp",
                json!({
                    "type": "boolean",
                    "description": "InfiniBand SHARP through NCCL's CollNet plugin (NCCL_COLLNET_ENABLE=1); the SHARP-enabled bandwidth figures apply. InfiniBand only.",
                    "default": false,
                    "examples": [true],
                }),
            ),
            (
                "cxi_resource",
                json!({
                    "type": "string",
                    "description": "Slingshot only: the Kubernetes extended resource of the device plugin that gives pods the CXI NICs (HPE's CXI Kubernetes device plugin registers `beta.hpe.com/cxi`). Multi-node pods request one per `interfaces` entry (at least one). Without it, `gen k8s` refuses a multi-node Slingshot stack.",
                    "pattern": "^[a-z0-9]([a-z0-9.-]*[a-z0-9])?/[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$",
                    "examples": ["beta.hpe.com/cxi"],
                }),
            ),
            (
                "efa_devices",
                json!({
                    "type": "integer",
                    "description": "EFA only: how many EFA interfaces (`vpc.amazonaws.com/efa`, the AWS EFA Kubernetes device plugin) each multi-node pod requests: the instance type's maximum number of EFA interfaces. Without it, `gen k8s` refuses a multi-node EFA stack.",
                    "minimum": 1,
                    "maximum": 64,
                    "examples": [32],
                }),
            ),
            (
                "pod_subnets",
                json!({
                    "type": "array",
                    "description": "IPv4 subnets, one per `interfaces` entry in the same order: Kubernetes pods attach a secondary network on each interface (the NVIDIA Network Operator's IPoIBNetwork on InfiniBand, MacvlanNetwork on RoCE, addresses from an nv-ipam IPPool) instead of using the host network. InfiniBand and RoCE only; not with `gid_index`.",
                    "items": {"type": "string", "pattern": "^[0-9]{1,3}(\\.[0-9]{1,3}){3}/([89]|[12][0-9]|30)$"},
                    "minItems": 1,
                    "maxItems": 64,
                    "examples": [["192.168.4.0/24"]],
                }),
            ),
        ],
    ))
}

fn image() -> Value {
    let layers = Layer::ALL.map(Layer::name);
    object(table(
        "[image]",
        fields_of::<ImageWire>(),
        "The container images: where they are pushed, and which layers are built.",
        &["registry"],
        vec![
            (
                "registry",
                json!({
                    "type": "string",
                    "description": "Where images are pushed: a lowercase registry prefix, `host[:port]/path`, without tag or digest.",
                    "pattern": "^[a-z0-9][a-z0-9._:/-]*$",
                    "maxLength": 200,
                    "examples": ["registry.example.com/ml"],
                }),
            ),
            (
                "layers",
                json!({
                    "type": "array",
                    "description": "The image layers to build, bottom first; `base` is always built. Default: all of them.",
                    "items": { "type": "string", "enum": layers },
                    "default": layers,
                    "examples": [["base", "framework", "training"]],
                }),
            ),
        ],
    ))
}

fn train() -> Value {
    object(table(
        "[train]",
        fields_of::<TrainWire>(),
        "The training job the Kubernetes and Slurm targets run.",
        &["command"],
        vec![
            (
                "command",
                json!({
                    "type": "array",
                    "description": "The training command torchrun runs on every node, one argument per element (1 to 256): `python train.py …` or `train.py …` (a script, run with `python -u`), `python -m pkg.train …` (a module), or an executable (run with `--no-python`). Each argument is passed as one word, never through a shell, so newlines and control characters are rejected; a launcher (`torchrun`, `deepspeed`, `accelerate`, …) is refused, since gpustack starts torchrun itself.",
                    "minItems": 1,
                    "maxItems": 256,
                    "items": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 1024,
                        "pattern": "^[^\\u0000-\\u001F\\u007F-\\u009F]*$",
                    },
                    "examples": [["python", "train.py"]],
                }),
            ),
            (
                "workdir",
                json!({
                    "type": "string",
                    "description": "Where the training code is: shared storage (`nfs://host/path`, `lustre:/path` or `hostpath:/path`) mounted at /workspace, the working directory, on every target. Default: the directory a Slurm job is submitted from, and the code image (the project directory copied into the training image) on Kubernetes.",
                    "pattern": "^(nfs://[A-Za-z0-9.-]+/[A-Za-z0-9/._+@=,-]*|lustre:/[A-Za-z0-9/._+@=,-]*|hostpath:/[A-Za-z0-9/._+@=,-]*)$",
                    "examples": ["lustre:/lustre/home/me/project"],
                }),
            ),
        ],
    ))
}

fn serve() -> Value {
    object(table(
        "[serve]",
        fields_of::<ServeWire>(),
        "The vLLM server the Kubernetes and Slurm targets run.",
        &["model"],
        vec![
            (
                "model",
                json!({
                    "type": "string",
                    "description": "The model: an absolute path (letters, digits and `/._-+@=,`, no `..`) or a Hugging Face id `org/name`.",
                    "pattern": "^(/|[A-Za-z0-9_])[A-Za-z0-9/._+@=,-]*$",
                    "maxLength": 512,
                    "examples": ["/models/llama-3-70b", "meta-llama/Llama-3.1-8B"],
                }),
            ),
            (
                "tensor_parallel",
                integer("Tensor-parallel size: GPUs per replica, on one node: at most `[cluster].gpus_per_node` (8 without [cluster]).", 16, Some(1), 8),
            ),
            (
                "max_model_len",
                integer(
                    "Maximum model length (tokens).",
                    10_000_000,
                    Some(4096),
                    32768,
                ),
            ),
            ("replicas", integer("Server replicas.", 1000, Some(1), 2)),
            (
                "nodes",
                json!({
                    "type": "integer",
                    "description": "Nodes per replica (default 1). Above 1, a replica spans nodes (a LeaderWorkerSet on Kubernetes, vLLM's multi-node form): tensor_parallel × pipeline_parallel GPUs are split evenly over them, at most [cluster].gpus_per_node each, and `nodes` must fit [cluster].nodes (checked at lock time).",
                    "minimum": 1,
                    "maximum": 64,
                    "examples": [1],
                }),
            ),
            (
                "pipeline_parallel",
                json!({
                    "type": "integer",
                    "description": "Pipeline-parallel size. Default: `nodes` (vLLM's guide: tensor_parallel = GPUs per node, pipeline_parallel = nodes). tensor_parallel × pipeline_parallel must split evenly over `nodes`, at most [cluster].gpus_per_node each (checked at lock time).",
                    "minimum": 1,
                    "maximum": 64,
                    "examples": [1],
                }),
            ),
        ],
    ))
}

fn packer() -> Value {
    let clouds = Cloud::ALL.map(Cloud::name);
    object(table(
        "[packer]",
        fields_of::<PackerWire>(),
        "The VM images Packer builds.",
        &["clouds"],
        vec![(
            "clouds",
            json!({
                "type": "array",
                "description": "The clouds to build VM images for: `aws` (amazon-ebs), `gcp` (googlecompute), `azure` (azure-arm), `qemu` (on premises). At least one.",
                "minItems": 1,
                "items": { "type": "string", "enum": clouds },
                "examples": [[clouds[0]]],
            }),
        )],
    ))
}

fn k8s() -> Value {
    object(table(
        "[k8s]",
        fields_of::<K8sWire>(),
        "The Kubernetes target.",
        &[],
        vec![
            (
                "namespace",
                json!({
                    "type": "string",
                    "description": "The namespace: a DNS label (lowercase letters, digits and `-`, at most 63 characters), not a system namespace (`default`, `kube-system`, `kube-public`, `kube-node-lease`).",
                    "pattern": "^[a-z0-9]([a-z0-9-]*[a-z0-9])?$",
                    "maxLength": 63,
                    "default": crate::spec::deploy::DEFAULT_K8S_NAMESPACE,
                    "examples": ["llm"],
                }),
            ),
            (
                "version",
                json!({
                    "type": "string",
                    "description": "The Kubernetes minor version the manifests target, `1.N` (1.23 or newer).",
                    "pattern": "^1\\.[0-9]{1,2}$",
                    "default": crate::spec::deploy::DEFAULT_K8S_VERSION,
                    "examples": ["1.32"],
                }),
            ),
            (
                "training_api",
                json!({
                    "type": "string",
                    "description": "How training runs: `trainjob` (Kubeflow Trainer v2 TrainJob + TrainingRuntime, the default) or `pytorchjob` (the legacy training-operator v1 PyTorchJob).",
                    "enum": ["trainjob", "pytorchjob"],
                    "default": "trainjob",
                    "examples": ["pytorchjob"],
                }),
            ),
            (
                "queue",
                json!({
                    "type": "string",
                    "description": "Kueue LocalQueue every workload is submitted to (`kueue.x-k8s.io/queue-name`); gen k8s also writes `kueue/` with a ResourceFlavor, ClusterQueue and LocalQueue sized to [cluster].",
                    "pattern": "^[a-z0-9]([a-z0-9-]*[a-z0-9])?$",
                    "maxLength": 63,
                    "examples": ["gpu"],
                }),
            ),
            (
                "topology",
                json!({
                    "type": "string",
                    "description": "A node label whose value names a topology domain (a rack, a block): the training pods must all land in one (`kueue.x-k8s.io/podset-required-topology`), and a Kueue Topology is written. It takes effect where Kueue admits the workloads (`queue`).",
                    "maxLength": 317,
                    "examples": ["cloud.provider.com/topology-block"],
                }),
            ),
            (
                "gang",
                json!({
                    "type": "string",
                    "description": "Who starts the pods of a multi-node workload all together when no `queue` admits it: `coscheduling` (the scheduler-plugins Coscheduling plugin, as a second scheduler named `scheduler-plugins-scheduler`; the default) or `volcano` (the Volcano scheduler). Written as Kubeflow Trainer's `podGroupPolicy` and the pods' `schedulerName`; with `queue`, Kueue admits the whole workload instead.",
                    "enum": ["coscheduling", "volcano"],
                    "default": "coscheduling",
                    "examples": ["volcano"],
                }),
            ),
            (
                "monitor_labels",
                json!({
                    "type": "object",
                    "description": "The labels of the generated ServiceMonitor/PodMonitor and of the GPU Operator's DCGM exporter ServiceMonitor: those the cluster's Prometheus selects monitors by. Default `{ release = \"kube-prometheus-stack\" }`, kube-prometheus-stack's default selector for a Helm release of that name.",
                    "additionalProperties": {"type": "string", "maxLength": 63},
                    "minProperties": 1,
                    "default": {"release": "kube-prometheus-stack"},
                    "examples": [{"release": "prometheus"}],
                }),
            ),
        ],
    ))
}

fn slurm() -> Value {
    object(table(
        "[slurm]",
        fields_of::<SlurmWire>(),
        "The Slurm target: where and how the batch scripts run.",
        &["partition"],
        vec![
            (
                "partition",
                json!({
                    "type": "string",
                    "description": "The partition: letters, digits, `-` and `_`, 1 to 64 characters, starting with a letter or digit (a leading `-` would be read as an option).",
                    "pattern": "^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$",
                    "examples": ["gpu"],
                }),
            ),
            (
                "container",
                json!({
                    "type": "string",
                    "description": "How jobs run the stack: `pyxis` (pyxis/enroot, `srun --container-image`), `apptainer` (`apptainer exec --nv`) or `none` (bare metal, on the VM image's environment).",
                    "enum": SlurmContainer::ALL.map(SlurmContainer::name),
                    "default": SlurmContainer::Pyxis.name(),
                    "examples": [SlurmContainer::Apptainer.name()],
                }),
            ),
            (
                "time",
                json!({
                    "type": "string",
                    "description": "The time limit in one of sbatch's `--time` formats (https://slurm.schedmd.com/sbatch.html#OPT_time): `MM`, `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM` or `D-HH:MM:SS`; not zero (Slurm reads zero as no limit): `UNLIMITED` for none.",
                    "pattern": "^(UNLIMITED|unlimited|INFINITE|infinite|[0-9]{1,6}(:[0-5]?[0-9]){0,1}|[0-9]{1,6}:[0-5]?[0-9]:[0-5]?[0-9]|[0-9]{1,6}-([01]?[0-9]|2[0-3])(:[0-5]?[0-9]){0,2})$",
                    "default": "24:00:00",
                    "examples": ["48:00:00"],
                }),
            ),
            (
                "max_nodes",
                json!({
                    "type": "integer",
                    "description": "The partition's MaxNodes (`scontrol show partition`): `gpustack check` reports a generated job that asks for more nodes (`exceeds-partition`).",
                    "minimum": 1,
                    "maximum": 1_000_000,
                    "examples": [64],
                }),
            ),
            (
                "max_time",
                json!({
                    "type": "string",
                    "description": "The partition's MaxTime in one of sbatch's time formats: `gpustack check` reports a generated job whose `--time` is longer (`exceeds-partition`).",
                    "pattern": "^([0-9]{1,6}(:[0-5]?[0-9]){0,1}|[0-9]{1,6}:[0-5]?[0-9]:[0-5]?[0-9]|[0-9]{1,6}-([01]?[0-9]|2[0-3])(:[0-5]?[0-9]){0,2})$",
                    "examples": ["2-00:00:00"],
                }),
            ),
        ],
    ))
}

fn resolve() -> Value {
    let url = "^https?://[a-z0-9.:-]+(/[!#%&()*+,./0-9:=?@A-Z\\[\\]_a-z~-]*)?$";
    let mirrors = |what: &str, keys: &str, example: Value| {
        json!({
            "type": "object",
            "description": format!("{what}: {keys} → the mirror's http:// or https:// URL. Only where `gpustack lock` reads; generated files keep the original names."),
            "additionalProperties": { "type": "string", "pattern": url },
            "examples": [example],
        })
    };
    object(table(
        "[resolve]",
        fields_of::<crate::spec::resolve::ResolveWire>(),
        "Where `gpustack lock` resolves image digests and package versions: mirrors for registries, Python indexes and apt/dnf repositories, and the index snapshot time. Recorded in the lock's [request.resolve].",
        &[],
        vec![
            (
                "exclude-newer",
                json!({
                    "type": "string",
                    "description": "Ignore what was published after this time: an RFC 3339 UTC time (`2026-11-25T00:00:00Z`) or a date.",
                    "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9]{2}:[0-9]{2}:[0-9]{2}Z)?$",
                    "examples": ["2026-11-25T00:00:00Z"],
                }),
            ),
            (
                "pypi",
                json!({
                    "type": "string",
                    "description": "The PyPI simple index to resolve from instead of https://pypi.org/simple.",
                    "pattern": url,
                    "examples": ["https://pypi.org/simple"],
                }),
            ),
            (
                "timeout",
                json!({
                    "type": "integer",
                    "description": "The seconds one `gpustack lock` run may spend on registry and repository queries, all together (`--timeout` overrides it).",
                    "minimum": 1,
                    "maximum": 3600,
                    "default": 30,
                    "examples": [60],
                }),
            ),
            (
                "variant-index",
                json!({
                    "type": "boolean",
                    "description": "Take torch (and torchvision, torchaudio) from the locked variant's index (download.pytorch.org/whl/cu128, `+cu128` wheels) even where PyPI's torch is the same build. Default false: a PyPI-default variant comes from PyPI.",
                    "default": false,
                    "examples": [true],
                }),
            ),
            (
                "indexes",
                mirrors("Python index mirrors", "index URL prefix", json!({"https://download.pytorch.org/whl": "http://127.0.0.1:8081/whl"})),
            ),
            (
                "registries",
                mirrors("Image registry mirrors", "registry host (`docker.io`, `nvcr.io`, `ghcr.io`)", json!({"docker.io": "http://127.0.0.1:5000"})),
            ),
            (
                "apt",
                mirrors("apt repository mirrors", "repository URL prefix", json!({"https://developer.download.nvidia.com/compute/cuda/repos": "http://127.0.0.1:8080/cuda"})),
            ),
            (
                "dnf",
                mirrors("dnf repository mirrors", "repository URL prefix", json!({"https://developer.download.nvidia.com/compute/cuda/repos": "http://127.0.0.1:8080/cuda"})),
            ),
        ],
    ))
}

fn python() -> Value {
    let list = |what: &str, example: &str| {
        json!({
            "type": "array",
            "description": format!("PEP 508 requirements {what}, resolved by uv at lock time together with the locked components into pylock files (every file hashed). Not torch, vllm or deepspeed (set those in [components]); no URLs or pip options."),
            "items": { "type": "string", "minLength": 1, "maxLength": 256, "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]*[^\"\\\\`${}]*$" },
            "examples": [[example]],
        })
    };
    object(table(
        "[python]",
        fields_of::<crate::spec::python::PythonWire>(),
        "Your own Python packages per layer, locked with hashes into pylock.<layer>.toml beside gpustack.lock. Recorded in the lock's [request.python].",
        &[],
        vec![
            ("framework", list("for every image (resolved with the locked torch)", "transformers>=4.50")),
            ("inference", list("for the inference image", "openai")),
            ("training", list("for the training image", "wandb")),
        ],
    ))
}

fn check() -> Value {
    use super::check::{Code, Severity};
    let codes: Vec<&str> = Code::ALL
        .into_iter()
        .filter(|c| c.severity() == Severity::Warning && *c != Code::UnusedAllow)
        .map(Code::name)
        .collect();
    let entry = table(
        "[check].allow entry",
        fields_of::<super::check::AllowWire>(),
        "One acknowledged warning: its code, optionally the component or package it is about, and why.",
        &["code", "reason"],
        vec![
            (
                "code",
                json!({
                    "type": "string",
                    "description": "The warning's code, as `gpustack check` prints it (`warning[eol-driver]`). Errors cannot be acknowledged.",
                    "enum": codes,
                }),
            ),
            (
                "name",
                json!({
                    "type": "string",
                    "description": "Only findings about this component or package: its `name` in gpustack.lock (`driver`, `cuda-image`). Every finding with the code when left out.",
                    "minLength": 1,
                    "examples": ["driver"],
                }),
            ),
            (
                "reason",
                json!({
                    "type": "string",
                    "description": "Why the stack accepts the warning, for the reviewer; `gpustack check` prints it beside the count.",
                    "minLength": 1,
                    "pattern": "\\S",
                    "examples": ["the nodes run R535 until the upgrade in March"],
                }),
            ),
        ],
    );
    object(table(
        "[check]",
        fields_of::<super::check::CheckWire>(),
        "What `gpustack check` accepts on purpose. Review policy, not part of the request: the lock does not record it, and editing it does not make the lock stale.",
        &[],
        vec![(
            "allow",
            json!({
                "type": "array",
                "description": "Warnings this stack accepts, each with a reason. `check` leaves out the findings an entry matches and counts them with the reason; an entry that matches nothing is the warning `unused-allow`.",
                "items": object(entry),
                "examples": [[{ "code": "eol-driver", "name": "driver", "reason": "the nodes run R535 until the upgrade in March" }]],
            }),
        )],
    ))
}

fn storage() -> Value {
    let location = |what: &str, example: &str| {
        json!({
            "type": "string",
            "description": format!("{what}: `nfs://host/path`, `lustre:/mount/path` (mounted on the hosts), `hostpath:/path` or `pvc:name` (an existing PersistentVolumeClaim). Paths are absolute, without `..`, whitespace or shell characters."),
            "pattern": "^(nfs://[A-Za-z0-9.-]+/[A-Za-z0-9/._+@=,-]*|lustre:/[A-Za-z0-9/._+@=,-]*|hostpath:/[A-Za-z0-9/._+@=,-]*|pvc:[a-z0-9]([a-z0-9-]*[a-z0-9])?)$",
            "examples": [example],
        })
    };
    object(table(
        "[storage]",
        fields_of::<StorageWire>(),
        "Storage mounted into the workloads: datasets and checkpoints at /data/datasets and /data/checkpoints, models at /models.",
        &[],
        vec![
            (
                "datasets",
                location(
                    "Datasets, mounted read-only",
                    "nfs://nfs.example.com/datasets",
                ),
            ),
            (
                "checkpoints",
                location(
                    "Checkpoints, mounted read-write",
                    "lustre:/lustre/scratch/ckpt",
                ),
            ),
            (
                "models",
                location(
                    "Models, mounted at /models for the vLLM server (read-only when `[serve].model` is a path there, as the Hugging Face cache when it is a hub id)",
                    "nfs://nfs.example.com/models",
                ),
            ),
        ],
    ))
}

// ----- building blocks ---------------------------------------------------------------

/// A table: a closed object whose properties must be exactly the keys the parser's wire
/// type accepts (`wire`).
fn table(
    title: &str,
    wire: &[&str],
    description: &str,
    required: &[&str],
    properties: Vec<(&str, Value)>,
) -> Map<String, Value> {
    let mut described: Vec<&str> = properties.iter().map(|(k, _)| *k).collect();
    let mut accepted = wire.to_vec();
    described.sort_unstable();
    accepted.sort_unstable();
    assert!(
        described == accepted,
        "src/schema.rs describes {title} keys {described:?}, but the spec parser accepts \
         {accepted:?}: describe every key the parser accepts, and only those"
    );
    let mut t = Map::new();
    t.insert("title".into(), title.into());
    t.insert("description".into(), description.into());
    t.insert("type".into(), "object".into());
    if !required.is_empty() {
        t.insert("required".into(), json!(required));
    }
    t.insert("additionalProperties".into(), false.into());
    t.insert(
        "properties".into(),
        Value::Object(
            properties
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        ),
    );
    t
}

fn object(map: Map<String, Value>) -> Value {
    Value::Object(map)
}

fn integer(description: &str, max: i64, default: Option<i64>, example: i64) -> Value {
    let mut v = json!({
        "type": "integer",
        "description": format!("{description} 1 to {max}."),
        "minimum": 1,
        "maximum": max,
        "examples": [example],
    });
    if let Some(d) = default {
        v["default"] = d.into();
        v["description"] = format!("{description} 1 to {max}; default {d}.").into();
    }
    v
}

/// A string naming one of `names`, matched case-insensitively (as the catalog matches GPU
/// and OS names), optionally with surrounding whitespace (GPU names are trimmed). The
/// `enum` is what editors offer, with `docs` (one per name, or none) as taplo's hover text
/// for each value; the pattern accepts the other spellings gpustack reads.
fn names_of(names: &[&str], docs: &[String], trim: bool, description: &str) -> Value {
    if names.is_empty() {
        return json!({ "type": "string", "description": description, "enum": [] });
    }
    let alternatives: Vec<String> = names.iter().map(|n| any_case(n)).collect();
    let space = if trim { "\\s*" } else { "" };
    let mut listed = json!({ "enum": names });
    if !docs.is_empty() {
        listed["x-taplo"] = json!({ "docs": { "enumValues": docs } });
    }
    json!({
        "type": "string",
        "description": description,
        "anyOf": [
            listed,
            { "pattern": format!("^{space}({}){space}$", alternatives.join("|")) },
        ],
    })
}

/// A GPU name: editors offer the ids and aliases (`enum`, with hover texts), and the
/// pattern accepts every name of the catalog's GPU name table ([`Catalog::gpu_names`]) as
/// the parser compares them ([`crate::catalog::gpu_key`]: any case, separators anywhere,
/// an optional leading `NVIDIA`).
fn gpu_name(catalog: &Catalog, ids: &[&str], docs: &[String]) -> Value {
    let description = "A GPU from the catalog: its id or alias, its marketing name, or the name nvidia-smi prints, in any case.";
    if ids.is_empty() {
        return json!({ "type": "string", "description": description, "enum": [] });
    }
    let mut keys: Vec<String> = catalog
        .gpu_names()
        .iter()
        .map(|n| crate::catalog::gpu_key(&n.spelling))
        .collect();
    keys.sort();
    keys.dedup();
    // Between two characters, the separators `gpu_key` ignores: white space, `-`, `_`,
    // parentheses and commas.
    let sep = r"[ _(),-]*";
    let spelled = |k: &str| {
        k.chars()
            .map(|c| any_case(&c.to_string()))
            .collect::<Vec<_>>()
            .join(sep)
    };
    let alternatives: Vec<String> = keys.iter().map(|k| spelled(k)).collect();
    let mut listed = json!({ "enum": ids });
    if !docs.is_empty() {
        listed["x-taplo"] = json!({ "docs": { "enumValues": docs } });
    }
    json!({
        "type": "string",
        "description": description,
        "anyOf": [
            listed,
            { "pattern": format!("^{sep}({}{sep})?({}){sep}$", spelled("nvidia"), alternatives.join("|")) },
        ],
    })
}

/// `h100` → `[hH]100`; regular-expression syntax characters escaped (ECMA-262 and Python
/// agree on this subset).
fn any_case(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii_alphabetic() {
            let _ = write!(
                out,
                "[{}{}]",
                c.to_ascii_lowercase(),
                c.to_ascii_uppercase()
            );
        } else if "\\^$.|?*+()[]{}/".contains(c) {
            out.push('\\');
            out.push(c);
        } else {
            out.push(c);
        }
    }
    out
}

// ----- the keys of a wire type, from serde's derive ----------------------------------

/// The keys a `#[derive(Deserialize)]` struct accepts: serde's derive passes them to
/// `Deserializer::deserialize_struct`, and this deserializer records them and stops.
fn fields_of<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    let mut probe = FieldProbe(None);
    let _ = T::deserialize(&mut probe);
    probe.0.unwrap_or(&[])
}

struct FieldProbe(Option<&'static [&'static str]>);

impl<'de> Deserializer<'de> for &mut FieldProbe {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("not a struct"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0 = Some(fields);
        Err(de::Error::custom("fields recorded"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

// ----- the canonical text ------------------------------------------------------------

/// Schema keywords in the order the file shows them; other keys follow, sorted.
const KEYWORD_ORDER: &[&str] = &[
    "$schema",
    "$id",
    "title",
    "description",
    "type",
    "required",
    "minProperties",
    "additionalProperties",
    "properties",
    "anyOf",
    "enum",
    "pattern",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "minItems",
    "maxItems",
    "items",
    "default",
    "examples",
    "x-taplo",
];

/// Pretty JSON (two-space indent, as `serde_json::to_string_pretty`), with the keys of
/// schema objects in [`KEYWORD_ORDER`] and property names (`properties_map`) sorted.
fn write_json(v: &Value, depth: usize, properties_map: bool, out: &mut String) {
    let pad = |n: usize| "  ".repeat(n);
    match v {
        Value::Object(map) if !map.is_empty() => {
            let mut keys: Vec<&String> = map.keys().collect();
            let rank = |k: &str| {
                if properties_map {
                    0
                } else {
                    KEYWORD_ORDER
                        .iter()
                        .position(|x| *x == k)
                        .unwrap_or(KEYWORD_ORDER.len())
                }
            };
            keys.sort_by(|a, b| rank(a).cmp(&rank(b)).then_with(|| a.cmp(b)));
            out.push_str("{\n");
            for (i, k) in keys.iter().enumerate() {
                out.push_str(&pad(depth + 1));
                out.push_str(&Value::String((*k).clone()).to_string());
                out.push_str(": ");
                write_json(
                    &map[k.as_str()],
                    depth + 1,
                    k.as_str() == "properties" && !properties_map,
                    out,
                );
                if i + 1 < keys.len() {
                    out.push(',');
                }
                out.push('\n');
            }
            out.push_str(&pad(depth));
            out.push('}');
        }
        Value::Array(items) if !items.is_empty() => {
            out.push_str("[\n");
            for (i, item) in items.iter().enumerate() {
                out.push_str(&pad(depth + 1));
                write_json(item, depth + 1, false, out);
                if i + 1 < items.len() {
                    out.push(',');
                }
                out.push('\n');
            }
            out.push_str(&pad(depth));
            out.push(']');
        }
        // Scalars, `{}` and `[]`: serde_json's compact form is the pretty one.
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_of_reads_the_wire_types() {
        assert_eq!(fields_of::<StackWire>(), ["name", "os"]);
        assert_eq!(
            fields_of::<ClusterWire>(),
            [
                "fabric",
                "nodes",
                "gpus_per_node",
                "cpus_per_node",
                "memory_gib_per_node"
            ]
        );
        // A map is not a struct: no fields.
        assert!(fields_of::<std::collections::BTreeMap<String, String>>().is_empty());
    }

    #[test]
    fn a_key_the_schema_does_not_describe_panics() {
        let r =
            std::panic::catch_unwind(|| table("[x]", &["a", "b"], "", &[], vec![("a", json!({}))]));
        let msg = *r.unwrap_err().downcast::<String>().unwrap();
        assert!(
            msg.contains("describes [x] keys [\"a\"], but the spec parser accepts [\"a\", \"b\"]"),
            "{msg}"
        );
    }

    #[test]
    fn any_case_patterns() {
        assert_eq!(any_case("h100-pcie"), "[hH]100-[pP][cC][iI][eE]");
        assert_eq!(any_case("ubuntu22.04"), "[uU][bB][uU][nN][tT][uU]22\\.04");
    }

    #[test]
    fn canonical_text_orders_keywords_and_sorts_properties() {
        let v = json!({
            "type": "object",
            "title": "t",
            "properties": { "b": { "type": "string", "description": "d" }, "a": {} },
        });
        let mut s = String::new();
        write_json(&v, 0, false, &mut s);
        assert_eq!(
            s,
            "{\n  \"title\": \"t\",\n  \"type\": \"object\",\n  \"properties\": {\n    \"a\": {},\n    \"b\": {\n      \"description\": \"d\",\n      \"type\": \"string\"\n    }\n  }\n}"
        );
        // Same data as serde_json's own pretty printer, whatever the key order.
        let back: Value = serde_json::from_str(&s).unwrap();
        assert_eq!(back, v);
    }
}
