//! The network fabric across targets (issue 19), for one spec per multi-node fabric
//! (`fixtures/fabrics/*.toml`, each with a `[network]` table):
//!
//! * the site values reach the runtime environment of every target with the same names and
//!   values: Slurm's `env/nccl.env` and the VM image's profile as bash reads them (sourced
//!   in a clean `env -i bash`), the Kubernetes ConfigMap as YAML; and never an image's
//!   `ENV` (Dockerfile, Apptainer definition);
//! * every variable name in that environment is one the owning project documents (the
//!   table behind `gpustack::catalog::env_name_source`);
//! * every extended resource a pod requests is provided by a generated object (the
//!   NicClusterPolicy's RDMA shared device plugin) or named as a prerequisite;
//! * `[network]` keys a fabric has no use for are refused with file:line, a hint and exit 2.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use yaml_rust2::{Yaml, YamlLoader};

const FABRICS: [&str; 4] = ["infiniband", "roce", "efa", "slingshot"];

/// Locks `fixtures/fabrics/<fabric>.toml` and generates every target; returns the
/// project directory (with `gpustack.lock` and `out/`).
fn generate_all(fabric: &str) -> PathBuf {
    let dir = tempdir(&format!("fabric-{fabric}"));
    std::fs::copy(
        root().join(format!("fixtures/fabrics/{fabric}.toml")),
        dir.join("gpustack.toml"),
    )
    .unwrap();
    let out = run_in(&dir, &["lock"]);
    assert_eq!(out.code, 0, "lock {fabric}: {}", out.stderr);
    let out = run_in(
        &dir,
        &[
            "gen",
            "docker",
            "apptainer",
            "packer",
            "k8s",
            "slurm",
            "--lock",
            "gpustack.lock",
            "--out",
            "out",
        ],
    );
    assert_eq!(out.code, 0, "gen all {fabric}: {}", out.stderr);
    dir
}

/// The variables a bash script sets, as bash itself reads them: `script` sourced in an
/// empty environment.
fn bash_env(script: &Path) -> BTreeMap<String, String> {
    let out = Command::new("env")
        .args(["-i", "bash", "--norc", "--noprofile", "-c"])
        .arg(format!("set -e; . '{}'; env -0", script.display()))
        .output()
        .expect("run bash");
    assert!(
        out.status.success(),
        "sourcing {}: {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .split('\0')
        .filter_map(|kv| kv.split_once('='))
        .filter(|(k, _)| !matches!(*k, "PWD" | "SHLVL" | "_" | "OLDPWD"))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The VM image's profile: the heredoc `base.sh` writes to /etc/profile.d/gpustack-nccl.sh.
fn packer_profile(out: &Path, into: &Path) -> PathBuf {
    let base = std::fs::read_to_string(out.join("packer/scripts/base.sh")).unwrap();
    let start = base
        .find("cat > /etc/profile.d/gpustack-nccl.sh <<'PROFILE'\n")
        .expect("base.sh writes the NCCL profile");
    let body = &base[start..];
    let body = &body[body.find('\n').unwrap() + 1..];
    let end = body.find("\nPROFILE\n").expect("heredoc end");
    let p = into.join("gpustack-nccl.sh");
    std::fs::write(&p, &body[..=end]).unwrap();
    p
}

fn yaml(path: &Path) -> Yaml {
    let text = std::fs::read_to_string(path).unwrap();
    YamlLoader::load_from_str(&text)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .remove(0)
}

fn configmap(out: &Path) -> BTreeMap<String, String> {
    let doc = yaml(&out.join("k8s/nccl-env.yaml"));
    doc["data"]
        .as_hash()
        .map(|h| {
            h.iter()
                .map(|(k, v)| {
                    (
                        k.as_str().unwrap().to_string(),
                        v.as_str().unwrap().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The site values each fixture's `[network]` must produce.
fn site_values(fabric: &str) -> Vec<(&'static str, &'static str)> {
    match fabric {
        "infiniband" => vec![
            ("NCCL_SOCKET_IFNAME", "ib0"),
            ("GLOO_SOCKET_IFNAME", "ib0"),
            ("OMPI_MCA_btl_tcp_if_include", "ib0"),
            (
                "NCCL_IB_HCA",
                "=mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7",
            ),
            (
                "UCX_NET_DEVICES",
                "mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1",
            ),
            ("NCCL_COLLNET_ENABLE", "1"),
        ],
        "roce" => vec![
            ("NCCL_SOCKET_IFNAME", "eth0"),
            ("NCCL_IB_HCA", "=mlx5_0:1,mlx5_1:1"),
            ("UCX_NET_DEVICES", "mlx5_0:1,mlx5_1:1"),
            ("NCCL_IB_GID_INDEX", "3"),
            ("UCX_IB_GID_INDEX", "3"),
        ],
        "efa" => vec![("NCCL_SOCKET_IFNAME", "ens32")],
        "slingshot" => vec![("NCCL_SOCKET_IFNAME", "hsn0,hsn1,hsn2,hsn3")],
        _ => unreachable!(),
    }
}

/// One test over every target: the Slurm env file, the VM profile and the ConfigMap carry
/// the same environment (the site values included), images carry none of the site values,
/// and every name is a documented one.
#[test]
fn site_values_reach_every_runtime_environment_and_no_image() {
    for fabric in FABRICS {
        let dir = generate_all(fabric);
        let out = dir.join("out");
        let slurm = bash_env(&out.join("slurm/env/nccl.env"));
        let vm = bash_env(&packer_profile(&out, &dir));
        let k8s = configmap(&out);
        assert_eq!(slurm, k8s, "{fabric}: Slurm env/nccl.env vs the ConfigMap");
        assert_eq!(slurm, vm, "{fabric}: Slurm env/nccl.env vs the VM profile");
        // The acceptance plan's environment is what the targets deliver.
        let lock = gpustack::Lock::parse(
            "gpustack.lock",
            &std::fs::read_to_string(dir.join("gpustack.lock")).unwrap(),
        )
        .unwrap();
        let common = gpustack::plan::Common::new(&lock).unwrap();
        let acceptance = gpustack::plan::workload::acceptance(&lock, &common)
            .unwrap()
            .expect("nccl-tests is locked");
        let planned: BTreeMap<String, String> = acceptance
            .env
            .iter()
            .map(|e| (e.name.clone(), e.value.clone()))
            .collect();
        assert_eq!(
            planned, slurm,
            "{fabric}: the acceptance plan's environment"
        );
        for (name, value) in site_values(fabric) {
            assert_eq!(
                slurm.get(name).map(String::as_str),
                Some(value),
                "{fabric}: {name}"
            );
        }
        for name in slurm.keys() {
            assert!(
                gpustack::catalog::env_name_source(name).is_some(),
                "{fabric}: {name} is generated but not in the documented-names table (src/catalog/env_names.rs)"
            );
        }
        let mut images = vec![out.join("docker/Dockerfile")];
        for e in std::fs::read_dir(out.join("apptainer")).unwrap() {
            images.push(e.unwrap().path());
        }
        for (name, _) in site_values(fabric) {
            for image in &images {
                let text = std::fs::read_to_string(image).unwrap();
                assert!(
                    !text.contains(name),
                    "{fabric}: site variable {name} is in an image ({})",
                    image.display()
                );
            }
        }
    }
}

/// Pods on secondary networks (`[network].pod_subnets`) keep the site's environment: Slurm
/// and the ConfigMap carry the same values, and every interface `NCCL_SOCKET_IFNAME` names
/// exists in the pod, as the interface of a network the pod annotates (the pods' own `eth0`
/// is never taken). The objects themselves are validated in tests/k8s.rs.
#[test]
fn pod_networks_keep_the_site_environment() {
    for fixture in ["infiniband-pod-networks", "roce-pod-networks"] {
        let dir = generate_all(fixture);
        let out = dir.join("out");
        let slurm = bash_env(&out.join("slurm/env/nccl.env"));
        assert_eq!(slurm, configmap(&out), "{fixture}: Slurm vs the ConfigMap");
        let ifnames: Vec<&str> = slurm["NCCL_SOCKET_IFNAME"].split(',').collect();
        let runtime = std::fs::read_to_string(out.join("k8s/trainingruntime.yaml")).unwrap();
        let line = runtime
            .lines()
            .find(|l| l.trim_start().starts_with("k8s.v1.cni.cncf.io/networks:"))
            .unwrap_or_else(|| panic!("{fixture}: the training pods annotate no network"));
        let value: String = serde_json::from_str(line.split_once(": ").unwrap().1).unwrap();
        let nets: Vec<serde_json::Value> = serde_json::from_str(&value).unwrap();
        let pod_ifs: Vec<&str> = nets
            .iter()
            .map(|n| n["interface"].as_str().unwrap())
            .collect();
        assert_eq!(pod_ifs, ifnames, "{fixture}");
        assert!(!pod_ifs.contains(&"eth0"), "{fixture}");
        for n in &nets {
            let name = n["name"].as_str().unwrap();
            assert!(
                out.join(format!("k8s/network/{name}.yaml")).exists(),
                "{fixture}: the pods annotate {name}, which is not generated"
            );
        }
        assert!(!runtime.contains("hostNetwork: true"), "{fixture}");
    }
}

/// Every extended resource a pod requests (anything but CPU, memory and GPUs) is provided
/// by a generated NicClusterPolicy's RDMA shared device plugin (`rdma/<resourceName>`) or
/// named as a prerequisite in the generated files.
#[test]
fn every_requested_resource_is_provided_or_a_prerequisite() {
    fn limits(y: &Yaml, out: &mut Vec<String>) {
        match y {
            Yaml::Hash(h) => {
                for (k, v) in h {
                    if matches!(k.as_str(), Some("limits" | "requests")) {
                        if let Some(r) = v.as_hash() {
                            out.extend(r.keys().filter_map(|k| k.as_str().map(str::to_string)));
                        }
                    }
                    limits(v, out);
                }
            }
            Yaml::Array(a) => a.iter().for_each(|x| limits(x, out)),
            _ => {}
        }
    }
    for fabric in FABRICS {
        let dir = generate_all(fabric);
        let k8s = dir.join("out/k8s");
        let mut wanted = Vec::new();
        let mut texts = String::new();
        for e in std::fs::read_dir(&k8s).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "yaml") {
                texts.push_str(&std::fs::read_to_string(&p).unwrap());
                limits(&yaml(&p), &mut wanted);
            }
        }
        wanted.retain(|r| !matches!(r.as_str(), "cpu" | "memory" | "nvidia.com/gpu"));
        wanted.sort();
        wanted.dedup();
        let policy = k8s.join("network/nic-cluster-policy.yaml");
        let provided: Vec<String> = if policy.exists() {
            let doc = yaml(&policy);
            assert_eq!(doc["kind"].as_str(), Some("NicClusterPolicy"));
            let config: serde_json::Value = serde_json::from_str(
                doc["spec"]["rdmaSharedDevicePlugin"]["config"]
                    .as_str()
                    .expect("the plugin's config is a JSON string"),
            )
            .unwrap();
            config["configList"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| format!("rdma/{}", c["resourceName"].as_str().unwrap()))
                .collect()
        } else {
            Vec::new()
        };
        for r in &wanted {
            assert!(
                provided.contains(r)
                    || texts
                        .lines()
                        .any(|l| l.contains("prerequisite") && l.contains(r.as_str())),
                "{fabric}: pods request {r}, which no generated object provides and no prerequisite names"
            );
        }
        match fabric {
            "infiniband" => assert_eq!(wanted, ["rdma/ib_hca"], "{fabric}"),
            "roce" => assert_eq!(wanted, ["rdma/rdma_shared_device_a"], "{fabric}"),
            _ => assert!(!policy.exists(), "{fabric}: no RDMA, no NicClusterPolicy"),
        }
    }
}

/// The GPU Operator values follow the GPUDirect RDMA path the lock implies: the open
/// kernel modules use DMA-BUF, so `driver.rdma` stays unset; `kernelModuleType` is the
/// lock's.
#[test]
fn operator_values_follow_the_gpudirect_path() {
    let dir = generate_all("roce");
    let lock = std::fs::read_to_string(dir.join("gpustack.lock")).unwrap();
    let values = yaml(&dir.join("out/k8s/gpu-operator-values.yaml"));
    let flavour = values["driver"]["kernelModuleType"].as_str().unwrap();
    assert!(
        lock.contains(&format!("flavour = \"{flavour}\"")),
        "{flavour}"
    );
    match flavour {
        "open" => assert!(
            values["driver"]["rdma"].is_badvalue(),
            "DMA-BUF: no driver.rdma"
        ),
        _ => assert_eq!(values["driver"]["rdma"]["enabled"].as_bool(), Some(true)),
    }
    assert_eq!(
        values["dcgmExporter"]["serviceMonitor"]["enabled"].as_bool(),
        Some(true)
    );
    assert!(values["toolkit"]["serviceMonitor"].is_badvalue());
}

/// `[network]` keys that do not fit the fabric, bad names and a missing `[cluster]`: each
/// refused at its line with a hint, exit 2, and no lock written.
#[test]
fn network_keys_are_checked_per_fabric() {
    // (fixture, text replaced, replacement, expected message)
    let cases = [
        (
            "infiniband",
            "sharp = true",
            "sharp = true\ngid_index = 3",
            "`[network].gid_index` does not apply to fabric `infiniband`",
        ),
        (
            "infiniband",
            "fabric = \"infiniband\"",
            "fabric = \"ethernet\"",
            "`[network].sharp` does not apply to fabric `ethernet`",
        ),
        (
            "infiniband",
            "fabric = \"infiniband\"",
            "fabric = \"roce\"",
            "`[network].sharp` does not apply to fabric `roce`",
        ),
        (
            "infiniband",
            "\"mlx5_7\"]",
            "\"mlx5 7\"]",
            "`mlx5 7` in `[network].hcas` is not an RDMA device",
        ),
        (
            "infiniband",
            "interfaces = [\"ib0\"]",
            "interfaces = [\"ib0\", \"ib0\"]",
            "`ib0` is listed twice in `[network].interfaces`",
        ),
        (
            "infiniband",
            "\"rdma/ib_hca\"",
            "\"ib hca\"",
            "`ib hca` is not a Kubernetes extended resource name",
        ),
        (
            "roce",
            "gid_index = 3",
            "gid_index = 300",
            "`gid_index` must be between 0 and 255, not 300",
        ),
        (
            "efa",
            "interfaces = [\"ens32\"]",
            "interfaces = [\"ens32\"]\nhcas = [\"mlx5_0\"]",
            "`[network].hcas` does not apply to fabric `efa`",
        ),
        (
            "efa",
            "interfaces = [\"ens32\"]",
            "interfaces = [\"ens32\"]\npod_subnets = [\"192.168.4.0/24\"]",
            "`[network].pod_subnets` does not apply to fabric `efa`",
        ),
        (
            "roce-pod-networks",
            "\"192.168.4.0/24\"",
            "\"192.168.4.1/24\"",
            "`192.168.4.1/24` in `[network].pod_subnets` is not an IPv4 subnet",
        ),
        (
            "infiniband-pod-networks",
            ", \"192.168.6.0/24\"",
            "",
            "`[network].pod_subnets` has 1 subnets for 2 interfaces",
        ),
        (
            "roce-pod-networks",
            "pod_subnets = [",
            "gid_index = 3\npod_subnets = [",
            "`[network].gid_index` is the host's RoCE address",
        ),
        (
            "roce-pod-networks",
            "\"192.168.4.0/24\"",
            "\"192.168.4.0/30\"",
            "`192.168.4.0/30` has 2 addresses, but 2 nodes take 8 each",
        ),
        (
            "roce-pod-networks",
            "interfaces = [\"ens1f0np0\"]",
            "interfaces = [\"eth0\"]",
            "`eth0` is the pod's own",
        ),
        (
            "roce-pod-networks",
            "nodes = 2",
            "nodes = 1",
            "`[network].pod_subnets` is for multi-node jobs",
        ),
        (
            "infiniband",
            "[cluster]\nfabric = \"infiniband\"\nnodes = 4\ngpus_per_node = 8\n",
            "",
            "the spec has no `[cluster]`",
        ),
    ];
    for (fixture, from, to, want) in cases {
        let base = std::fs::read_to_string(root().join(format!("fixtures/fabrics/{fixture}.toml")))
            .unwrap();
        let spec = base.replacen(from, to, 1);
        assert_ne!(spec, base, "{want}: the fixture changed");
        let dir = tempdir("fabric-bad");
        std::fs::write(dir.join("gpustack.toml"), &spec).unwrap();
        let out = run_in(&dir, &["lock"]);
        assert_eq!(out.code, 2, "{want}: {}", out.stderr);
        assert!(out.stderr.contains(want), "{want}: {}", out.stderr);
        assert!(
            out.stderr.contains("gpustack.toml:"),
            "{want}: file:line\n{}",
            out.stderr
        );
        assert!(out.stderr.contains("hint:"), "{want}: {}", out.stderr);
        assert!(
            !dir.join("gpustack.lock").exists(),
            "{want}: nothing written"
        );
    }
}

/// The lock records `[network]` in its request, and `gen` reads it back from the lock alone.
#[test]
fn the_lock_records_the_network_request() {
    let dir = generate_all("roce");
    let lock = std::fs::read_to_string(dir.join("gpustack.lock")).unwrap();
    assert!(
        lock.contains("[request.network]\ninterfaces = [\"eth0\"]\nhcas = [\"mlx5_0:1\", \"mlx5_1:1\"]\ngid_index = 3\n"),
        "{lock}"
    );
    let parsed = gpustack::Lock::parse("gpustack.lock", &lock).unwrap();
    assert_eq!(parsed.to_toml(), lock, "round trip");
    let net = parsed.request.deploy.network.unwrap();
    assert_eq!(net.gid_index, Some(3));
    let dir = generate_all("infiniband-pod-networks");
    let lock = std::fs::read_to_string(dir.join("gpustack.lock")).unwrap();
    assert!(
        lock.contains("pod_subnets = [\"192.168.5.0/24\", \"192.168.6.0/24\"]\n"),
        "{lock}"
    );
    let parsed = gpustack::Lock::parse("gpustack.lock", &lock).unwrap();
    assert_eq!(parsed.to_toml(), lock, "round trip");
    let net = parsed.request.deploy.network.unwrap();
    assert_eq!(net.pod_subnets, ["192.168.5.0/24", "192.168.6.0/24"]);
}

/// The OSU point-to-point figure (catalog/bandwidth.toml, `test = "osu_bw"`, one GPU on
/// each of two nodes) is never an nccl-tests threshold, even for a job of that shape.
#[test]
fn the_osu_figure_is_not_an_nccl_tests_threshold() {
    let base = std::fs::read_to_string(root().join("fixtures/fabrics/slingshot.toml")).unwrap();
    let spec = base.replacen("nodes = 4", "nodes = 2", 1).replacen(
        "gpus_per_node = 4",
        "gpus_per_node = 1",
        1,
    );
    assert_ne!(spec, base);
    let dir = tempdir("fabric-osu-shape");
    std::fs::write(dir.join("gpustack.toml"), &spec).unwrap();
    let out = run_in(&dir, &["lock"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lock: toml::Table = std::fs::read_to_string(dir.join("gpustack.lock"))
        .unwrap()
        .parse()
        .unwrap();
    let facts = lock["fact"].as_array().unwrap();
    for f in facts {
        if f["kind"].as_str() == Some("bandwidth") && f["key"].as_str() != Some("osu_bw") {
            assert_ne!(f["test"].as_str(), Some("osu_bw"), "{f:?}");
        }
    }
    // The OSU run's own figure is recorded apart, under its own key.
    assert!(facts
        .iter()
        .any(|f| f["key"].as_str() == Some("osu_bw") && f["test"].as_str() == Some("osu_bw")));
}

/// SHARP and non-SHARP bandwidth figures are kept apart: a spec with `sharp = true` is held
/// to a SHARP run, the same spec without SHARP never is.
#[test]
fn sharp_and_non_sharp_thresholds_are_kept_apart() {
    let base = std::fs::read_to_string(root().join("fixtures/fabrics/infiniband.toml")).unwrap();
    for (sharp, spec) in [
        (true, base.clone()),
        (false, base.replace("sharp = true\n", "")),
    ] {
        let dir = tempdir("fabric-sharp");
        std::fs::write(dir.join("gpustack.toml"), &spec).unwrap();
        let out = run_in(&dir, &["lock"]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        let lock: toml::Table = std::fs::read_to_string(dir.join("gpustack.lock"))
            .unwrap()
            .parse()
            .unwrap();
        let inter = lock["fact"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| {
                f["kind"].as_str() == Some("bandwidth") && f["key"].as_str() == Some("inter-node")
            })
            .expect("an inter-node figure");
        let got = inter.get("sharp").and_then(toml::Value::as_str);
        if sharp {
            assert_eq!(got, Some("true"), "{inter:?}");
        } else {
            assert_ne!(got, Some("true"), "{inter:?}");
        }
        let out = run_in(
            &dir,
            &["gen", "slurm", "--lock", "gpustack.lock", "--out", "out"],
        );
        assert_eq!(out.code, 0, "{}", out.stderr);
    }
}

/// The `./configure` lines of a generated file, in build order (the Dockerfile's `RUN`
/// continuation lines and the VM script's subshell lines alike).
fn configure_lines(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim().trim_start_matches("&& ");
            l.strip_prefix("./configure ")
                // Shell words without their single quotes (no argument has a space).
                .map(|rest| rest.trim_end_matches(" \\").replace('\'', ""))
        })
        .collect()
}

/// The fabric stack builds the same way in the container image and on the VM image, and
/// per fabric it is the stack the issue asks for: on Slingshot the CXI user space before
/// a libfabric configured with the CXI provider (libfabric's prov/cxi/configure.m4 flags),
/// aws-ofi-nccl against that libfabric, OSU micro-benchmarks against Open MPI; on
/// InfiniBand and RoCE one rdma-core, the distribution's, never one built from source.
#[test]
fn the_fabric_stack_per_fabric_and_across_targets() {
    for fabric in FABRICS {
        let dir = generate_all(fabric);
        let out = dir.join("out");
        let docker = std::fs::read_to_string(out.join("docker/Dockerfile")).unwrap();
        let vm = std::fs::read_to_string(out.join("packer/scripts/multinode.sh")).unwrap();
        let in_image = configure_lines(&docker);
        assert!(!in_image.is_empty(), "{fabric}: no configure step");
        assert_eq!(
            in_image,
            configure_lines(&vm),
            "{fabric}: the Dockerfile and the VM image configure the fabric stack differently"
        );
        // The fabric prefix is the plan's: every configure line installs there, and
        // nothing but the plan's value names it.
        for l in &in_image {
            assert!(l.starts_with("--prefix=/opt/fabric"), "{fabric}: {l}");
        }
        let built: Vec<&str> = docker
            .lines()
            .filter_map(|l| l.strip_prefix("WORKDIR /tmp/src/"))
            .collect();
        match fabric {
            "slingshot" => {
                let at = |n: &str| {
                    built
                        .iter()
                        .position(|b| *b == n)
                        .unwrap_or_else(|| panic!("slingshot: {n} is not built ({built:?})"))
                };
                for n in [
                    "cassini-headers",
                    "cxi-driver",
                    "libcxi",
                    "gdrcopy",
                    "xpmem",
                ] {
                    assert!(at(n) < at("libfabric"), "{n} before libfabric");
                }
                assert!(at("libfabric") < at("aws-ofi-nccl"));
                assert!(at("openmpi") < at("aws-ofi-nccl"));
                assert!(at("openmpi") < at("osu-micro-benchmarks"));
                let libfabric = in_image
                    .iter()
                    .find(|l| l.contains("--enable-cxi"))
                    .expect("a configure line with --enable-cxi");
                for flag in [
                    "--enable-cxi=/opt/fabric",
                    "--with-cassini-headers=/opt/fabric",
                    "--with-cxi-uapi-headers=/opt/fabric",
                    "--with-cuda=/usr/local/cuda",
                    // XPMEM for the shared-memory provider, as the Alps build.
                    "--enable-xpmem=/opt/fabric",
                ] {
                    assert!(
                        libfabric.split(' ').any(|a| a == flag),
                        "libfabric lacks {flag}: {libfabric}"
                    );
                }
                assert!(in_image
                    .iter()
                    .any(|l| l.contains("--with-libfabric=/opt/fabric")));
                // XPMEM's library only: the kernel module is the host's.
                assert!(in_image
                    .iter()
                    .any(|l| l.contains("--disable-kernel-module")));
                assert!(
                    in_image
                        .iter()
                        .any(|l| l.contains("CC=/opt/fabric/bin/mpicc")
                            && l.contains("--enable-cuda"))
                );
                // The build links libcxi's dependencies and runs with their libraries.
                for d in ["libconfig-dev", "libjson-c-dev", "libcurl4-openssl-dev"] {
                    assert!(docker.contains(&format!("      {d} \\")), "{d}");
                }
            }
            "infiniband" | "roce" => {
                assert!(
                    !built.contains(&"rdma-core"),
                    "{fabric}: a second rdma-core is built ({built:?})"
                );
                assert!(!docker.contains("rdma-core"), "{fabric}: rdma-core named");
                for d in ["libibverbs-dev", "librdmacm-dev", "ibverbs-providers"] {
                    assert!(docker.contains(&format!("      {d} \\")), "{fabric}: {d}");
                }
                let ucx = in_image
                    .iter()
                    .find(|l| l.contains("--enable-mt"))
                    .expect("UCX");
                assert!(ucx.contains("--with-verbs") && ucx.contains("--with-rdmacm"));
            }
            "efa" => {
                // One libfabric and one Open MPI: the EFA installer's, pinned by its
                // published sha256, in the build and again in the runtime image (container
                // flags), on the VM with its kernel module.
                assert_eq!(built.first(), Some(&"efa-installer"), "{built:?}");
                assert!(
                    !built.contains(&"libfabric") && !built.contains(&"openmpi"),
                    "{built:?}"
                );
                let container = "./efa_installer.sh '-y' '-g' '-d' '--skip-kmod' '--skip-limit-conf' '--no-verify'";
                assert_eq!(
                    docker.matches(container).count(),
                    2,
                    "fabric and base stages"
                );
                assert_eq!(
                    docker.matches("| sha256sum -c -").count(),
                    3,
                    "installer twice, aws-ofi-nccl"
                );
                assert!(vm.contains("    ./efa_installer.sh '-y'\n"), "{vm}");
                let ofi = in_image
                    .iter()
                    .find(|l| l.contains("--with-libfabric"))
                    .expect("aws-ofi-nccl");
                for flag in [
                    "--with-libfabric=/opt/amazon/efa",
                    "--with-mpi=/opt/amazon/openmpi",
                    "--enable-platform-aws",
                ] {
                    assert!(ofi.split(' ').any(|a| a == flag), "{flag}: {ofi}");
                }
                assert!(docker.contains("MPI_HOME=/opt/amazon/openmpi"));
                assert!(docker.contains("FROM fabric AS validate-build"));
                let runtime =
                    std::fs::read_to_string(out.join("k8s/nccl-tests-trainjob.yaml")).unwrap();
                assert!(
                    runtime.contains("- \"--prefix\"\n      - \"/opt/amazon/openmpi\""),
                    "{runtime}"
                );
            }
            _ => {
                assert!(
                    !built.iter().any(|b| b.contains("cxi")),
                    "{fabric}: {built:?}"
                );
            }
        }
    }
}

/// Each fabric's generated scripts pass their linters: hadolint (which runs ShellCheck on
/// every RUN) on the Dockerfile, ShellCheck on the VM scripts and the Slurm scripts.
#[test]
fn every_fabric_passes_hadolint_and_shellcheck() {
    let hadolint = validator("hadolint");
    let shellcheck = validator("shellcheck");
    if hadolint.is_none() && shellcheck.is_none() {
        return;
    }
    for fabric in FABRICS {
        let dir = generate_all(fabric);
        let out = dir.join("out");
        if let Some(h) = &hadolint {
            let (code, log) = run_tool(h, &["-t", "warning", "Dockerfile"], &out.join("docker"));
            assert_eq!(code, 0, "{fabric}: hadolint: {log}");
        }
        if let Some(sc) = &shellcheck {
            let mut scripts = sorted_files(&out.join("packer/scripts"), "sh");
            scripts.extend(sorted_files(&out.join("slurm"), "sbatch"));
            for s in scripts {
                let (code, log) = run_tool(sc, &[s.to_str().unwrap()], &out);
                assert_eq!(code, 0, "{fabric}: {}: {log}", s.display());
            }
        }
    }
}

/// The VM image's name hashes the site values its profile carries: the installed-layers
/// list holds `site=sha256:<hex>` of the `NAME=value` lines of `[network]`'s environment.
#[test]
fn the_vm_image_name_covers_the_site_values() {
    use sha2::{Digest, Sha256};
    for fabric in FABRICS {
        let dir = generate_all(fabric);
        let out = dir.join("out");
        let hcl = std::fs::read_to_string(out.join("packer/build.pkr.hcl")).unwrap();
        let lock = gpustack::Lock::parse(
            "gpustack.lock",
            &std::fs::read_to_string(dir.join("gpustack.lock")).unwrap(),
        )
        .unwrap();
        let common = gpustack::plan::Common::new(&lock).unwrap();
        let site = &common.network.site_env;
        for (name, value) in site_values(fabric) {
            assert!(site.iter().any(|e| e.name == name && e.value == value));
        }
        let mut h = Sha256::new();
        for e in site {
            h.update(format!("{}={}\n", e.name, e.value).as_bytes());
        }
        let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
        assert!(
            hcl.contains(&format!("\"site=sha256:{hex}\",")),
            "{fabric}: the site values' hash is not in installed_layers:\n{hcl}"
        );
    }
}

/// The OSU bandwidth run (Slingshot, beside nccl-tests) starts the same argv on Slurm and
/// on Kubernetes: the acceptance plan's, one rank on each of two nodes; other fabrics have
/// none.
#[test]
fn the_osu_run_is_one_argv_on_every_target() {
    for fabric in FABRICS {
        let dir = generate_all(fabric);
        let out = dir.join("out");
        let lock = gpustack::Lock::parse(
            "gpustack.lock",
            &std::fs::read_to_string(dir.join("gpustack.lock")).unwrap(),
        )
        .unwrap();
        let common = gpustack::plan::Common::new(&lock).unwrap();
        let acceptance = gpustack::plan::workload::acceptance(&lock, &common)
            .unwrap()
            .expect("nccl-tests is locked");
        let sbatch = std::fs::read_to_string(out.join("slurm/nccl-tests.sbatch")).unwrap();
        let trainjob = out.join("k8s/osu-trainjob.yaml");
        let Some(osu) = acceptance.osu else {
            assert_ne!(fabric, "slingshot", "Slingshot runs OSU");
            assert!(!sbatch.contains("osu_bw"), "{fabric}");
            assert!(!trainjob.exists(), "{fabric}");
            continue;
        };
        let planned: Vec<String> = std::iter::once(osu.program.clone())
            .chain(osu.args.iter().cloned())
            .collect();
        assert!(osu.program.ends_with("/osu_bw"), "{}", osu.program);
        // Slurm: the program (`osu_bw`, overridable as GPUSTACK_OSU_BW like nccl-tests'
        // directory) and the line that runs it, as shell words.
        let program = sbatch
            .lines()
            .find_map(|l| l.strip_prefix("osu_bw=\"${GPUSTACK_OSU_BW:-"))
            .and_then(|l| l.strip_suffix("}\""))
            .expect("the sbatch names osu_bw");
        let line = sbatch
            .lines()
            .find(|l| l.trim_start().starts_with("\"$osu_bw\""))
            .expect("the sbatch runs osu_bw");
        // The words before the acceptance judge's pipe.
        let slurm: Vec<String> = line
            .split_whitespace()
            .take_while(|w| *w != "|")
            .map(|w| {
                if w == "\"$osu_bw\"" {
                    program.to_string()
                } else {
                    w.trim_matches('\'').to_string()
                }
            })
            .collect();
        assert_eq!(slurm, planned, "{fabric}: Slurm");
        let srun = sbatch
            .lines()
            .rev()
            .find(|l| {
                l.starts_with("srun ")
                    && l.contains("--ntasks-per-node=1")
                    && l.contains("--nodes=2")
            })
            .expect("one task on each of two nodes");
        assert!(srun.contains("--ntasks=2"), "{srun}");
        // Kubernetes: the TrainJob's mpirun arguments, from the program on.
        let doc = yaml(&trainjob);
        let args: Vec<String> = doc["spec"]["trainer"]["args"]
            .as_vec()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect();
        let at = args
            .iter()
            .position(|a| *a == osu.program)
            .expect("osu_bw in mpirun's args");
        assert_eq!(args[at..].to_vec(), planned, "{fabric}: Kubernetes");
        let np = args.iter().position(|a| a == "-np").unwrap();
        assert_eq!(
            (
                args[np + 1].as_str(),
                args[np + 2].as_str(),
                args[np + 3].as_str()
            ),
            ("2", "-N", "1")
        );
        assert_eq!(doc["spec"]["trainer"]["numNodes"].as_i64(), Some(2));
        assert_eq!(
            doc["spec"]["runtimeRef"]["name"].as_str(),
            Some("nccl-tests"),
            "the nccl-tests TrainingRuntime runs it"
        );
    }
}

/// The NicClusterPolicy's device plugin image is the lock's (repository, image and tag of
/// the Network Operator release whose CRD the policy is validated against), not a blank
/// the user fills in.
#[test]
fn the_nic_cluster_policy_image_comes_from_the_lock() {
    for fabric in ["infiniband", "roce"] {
        let dir = generate_all(fabric);
        let lock = gpustack::Lock::parse(
            "gpustack.lock",
            &std::fs::read_to_string(dir.join("gpustack.lock")).unwrap(),
        )
        .unwrap();
        let p = lock
            .package("k8s-rdma-shared-dev-plugin")
            .expect("the lock has the device plugin");
        let doc = yaml(&dir.join("out/k8s/network/nic-cluster-policy.yaml"));
        let plugin = &doc["spec"]["rdmaSharedDevicePlugin"];
        assert_eq!(
            format!(
                "{}/{}",
                plugin["repository"].as_str().unwrap(),
                plugin["image"].as_str().unwrap()
            ),
            p.get("image").unwrap(),
            "{fabric}"
        );
        assert_eq!(plugin["version"].as_str(), p.get("image-tag"), "{fabric}");
    }
}

/// The `osu_bw` figure is decided once (the lock's `bandwidth`/`osu_bw` fact, restated by the
/// acceptance plan in osu_bw's own unit: MB/s of 10^6 bytes per second, at a message size in
/// bytes) and every target that runs OSU prints the same value and source: Slurm's
/// `expected-bandwidth.txt` and the lines `nccl-tests.sbatch` echoes, the Kubernetes
/// ConfigMap's `osu_bw.*` keys. The VM image builds the OSU micro-benchmarks but its
/// validate script runs nccl-tests only, so it carries none. A fabric without the OSU run
/// carries no OSU figure anywhere.
#[test]
fn the_osu_figure_is_one_value_on_every_target() {
    for fabric in FABRICS {
        let dir = generate_all(fabric);
        let out = dir.join("out");
        let text = std::fs::read_to_string(dir.join("gpustack.lock")).unwrap();
        let lock = gpustack::Lock::parse("gpustack.lock", &text).unwrap();
        let common = gpustack::plan::Common::new(&lock).unwrap();
        let acceptance = gpustack::plan::workload::acceptance(&lock, &common)
            .unwrap()
            .expect("nccl-tests is locked");
        let txt = std::fs::read_to_string(out.join("slurm/expected-bandwidth.txt")).unwrap();
        let sbatch = std::fs::read_to_string(out.join("slurm/nccl-tests.sbatch")).unwrap();
        let doc = yaml(&out.join("k8s/expected-bandwidth.yaml"));
        let data: BTreeMap<String, String> = doc["data"]
            .as_hash()
            .map(|h| {
                h.iter()
                    .map(|(k, v)| (k.as_str().unwrap().into(), v.as_str().unwrap().into()))
                    .collect()
            })
            .unwrap_or_default();
        let validate = std::fs::read_to_string(out.join("packer/scripts/validate.sh")).unwrap();
        assert!(!validate.contains("osu_bw"), "{fabric}: the VM runs no OSU");
        let Some(o) = acceptance.osu_expected else {
            assert_ne!(fabric, "slingshot", "Slingshot has an OSU figure");
            assert!(acceptance.osu.is_none() || fabric == "slingshot");
            assert!(!text.contains("osu_bw"), "{fabric}: lock");
            assert!(!txt.contains("osu_bw"), "{fabric}: expected-bandwidth.txt");
            assert!(!data.keys().any(|k| k.starts_with("osu_bw")), "{fabric}");
            continue;
        };
        assert!(acceptance.osu.is_some(), "a figure only beside the run");
        // The catalog's figure (catalog/bandwidth.toml, CSCS: 24000.0 MB/s at 4194304-byte
        // messages), restated exactly.
        assert_eq!(
            (o.mbps.as_str(), o.gbps.as_str(), o.size_bytes.as_deref()),
            ("24000", "24", Some("4194304"))
        );
        assert!(
            o.source
                .contains("eth-cscs/cscs-reframe-tests/blob/883c36c"),
            "{}",
            o.source
        );
        // Slurm: the file and the echoed lines say the same, with the unit and the size.
        let line = txt
            .lines()
            .position(|l| l.starts_with("osu_bw "))
            .map(|i| txt.lines().skip(i).take(2).collect::<Vec<_>>())
            .expect("expected-bandwidth.txt has the osu_bw figure");
        assert!(
            line[0].contains(&format!("{} MB/s", o.mbps))
                && line[0].contains(&format!("{}-byte", o.size_bytes.as_deref().unwrap()))
                && line[0].contains("10^6 bytes/s"),
            "{}",
            line[0]
        );
        assert_eq!(line[1], format!("  source: {}", o.source));
        for l in &line {
            let echoed = format!("echo '{}'", l.replace('\'', "'\\''"));
            assert!(sbatch.contains(&echoed), "the sbatch does not echo {l}");
        }
        // Kubernetes: the ConfigMap's osu_bw keys carry the same values.
        let get = |k: &str| data.get(&format!("osu_bw.{k}")).map(String::as_str);
        assert_eq!(get("mbps"), Some(o.mbps.as_str()));
        assert_eq!(get("gbps"), Some(o.gbps.as_str()));
        assert_eq!(get("size-bytes"), o.size_bytes.as_deref());
        assert_eq!(get("source"), Some(o.source.as_str()));
        assert!(get("unit").is_some_and(|u| u.contains("10^6 bytes/s")));
    }
}

/// The configure arguments of each package the Dockerfile's `fabric` stage builds, by
/// name (its `WORKDIR /tmp/src/<name>`), as shell words without their quotes.
fn configure_by_package(docker: &str) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    let mut current = None;
    for l in docker.lines() {
        if let Some(n) = l.strip_prefix("WORKDIR /tmp/src/") {
            current = Some(n.to_string());
        } else if let Some(rest) = l.trim_start().strip_prefix("&& ./configure ") {
            let args = rest
                .trim_end_matches(" \\")
                .split("' '")
                .map(|a| a.trim_matches('\'').to_string())
                .collect();
            out.insert(current.clone().expect("a WORKDIR first"), args);
        }
    }
    out
}

/// UCX, UCC and Open MPI on Slingshot are configured as the Alps images configure them
/// (eth-cscs/alps-extended-images@5cb95a6, Alps-Images/common/install-alps-hpc-stack.sh:
/// `build_ucx`, `build_ucc`, `build_ompi5`), with Alps' directories mapped to gpustack's:
/// `${CUDA_DIR}` is /usr/local/cuda; /opt/hpcx/{ucx,ucc,ompi}, /usr (libfabric) and
/// /usr/local (GDRCopy) are the fabric prefix. The one value gpustack decides itself is
/// UCC's `--with-nvcc-gencode`: the locked GPUs (Alps names its GH200s' sm_90 and sm_90a),
/// the same list nccl-tests is built for. Alps builds UCX and UCC before Open MPI; only
/// the Slingshot lock has UCC.
const ALPS_UCX: [&str; 5] = [
    "--prefix=/opt/fabric",
    "--with-cuda=/usr/local/cuda",
    "--with-gdrcopy=/opt/fabric",
    "--enable-mt",
    "--enable-devel-headers",
];
const ALPS_UCC: [&str; 4] = [
    "--prefix=/opt/fabric",
    "--with-ucx=/opt/fabric",
    "--with-cuda=/usr/local/cuda",
    "--with-nccl",
];
const ALPS_OMPI: [&str; 7] = [
    "--prefix=/opt/fabric",
    "--with-ofi=/opt/fabric",
    "--with-ucx=/opt/fabric",
    "--with-ucc=/opt/fabric",
    "--enable-oshmem",
    "--with-cuda=/usr/local/cuda",
    "--with-cuda-libdir=/usr/local/cuda/lib64/stubs",
];

#[test]
fn ucx_ucc_and_open_mpi_on_slingshot_are_configured_as_alps() {
    let sorted = |v: &[&str]| {
        let mut v: Vec<String> = v.iter().map(ToString::to_string).collect();
        v.sort();
        v
    };
    for fabric in FABRICS {
        let dir = generate_all(fabric);
        let lock: toml::Table = std::fs::read_to_string(dir.join("gpustack.lock"))
            .unwrap()
            .parse()
            .unwrap();
        let locked: Vec<&str> = lock["package"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| p["name"].as_str())
            .collect();
        assert_eq!(
            locked.contains(&"ucc"),
            fabric == "slingshot",
            "{fabric}: ucc"
        );
        assert_eq!(locked.contains(&"ucx"), fabric != "efa", "{fabric}: ucx");
        if fabric != "slingshot" {
            continue;
        }
        let docker = std::fs::read_to_string(dir.join("out/docker/Dockerfile")).unwrap();
        let by = configure_by_package(&docker);
        let args = |n: &str| {
            let mut a = by
                .get(n)
                .unwrap_or_else(|| panic!("{n} is configured"))
                .clone();
            a.sort();
            a
        };
        assert_eq!(args("ucx"), sorted(&ALPS_UCX), "UCX");
        assert_eq!(args("openmpi"), sorted(&ALPS_OMPI), "Open MPI");
        let (gencode, ucc): (Vec<String>, Vec<String>) = args("ucc")
            .into_iter()
            .partition(|a| a.starts_with("--with-nvcc-gencode="));
        assert_eq!(ucc, sorted(&ALPS_UCC), "UCC");
        let nccl_tests = docker
            .split_whitespace()
            .find_map(|w| w.trim_matches('\'').strip_prefix("NVCC_GENCODE="))
            .expect("nccl-tests' NVCC_GENCODE");
        assert_eq!(
            gencode,
            [format!("--with-nvcc-gencode={nccl_tests}")],
            "UCC's kernels are for the locked GPUs"
        );
        // UCC's NCCL layer builds against the locked NCCL: the fabric stage installs the
        // pin the validate-build stage installs.
        let nccl_dev = docker
            .split_whitespace()
            .map(|w| w.trim_matches('\''))
            .find(|w| w.starts_with("libnccl-dev="))
            .expect("a locked libnccl-dev");
        let fabric_stage =
            &docker[docker.find(" AS fabric\n").unwrap()..docker.find(" AS base\n").unwrap()];
        assert!(
            fabric_stage
                .split_whitespace()
                .any(|w| w.trim_matches('\'') == nccl_dev),
            "{fabric_stage}"
        );
        // Build order: GDRCopy before UCX, UCX before UCC, both and libfabric before Open MPI.
        let order: Vec<&String> = by.keys().collect();
        let at = |n: &str| {
            docker
                .find(&format!("WORKDIR /tmp/src/{n}\n"))
                .unwrap_or_else(|| panic!("{n} in {order:?}"))
        };
        assert!(at("gdrcopy") < at("ucx"));
        assert!(at("ucx") < at("ucc"));
        assert!(at("ucc") < at("openmpi"));
        assert!(at("libfabric") < at("openmpi"));
        // Each carries the Alps script as its flags' source, at the commit read.
        for n in ["ucx", "ucc", "openmpi"] {
            let head = &docker[..at(n)];
            let flags = head
                .lines()
                .rev()
                .find(|l| l.starts_with("# build flags: "))
                .unwrap();
            assert!(
                flags.contains("alps-extended-images/blob/5cb95a6df1dfd10016bb07b15a0a2296a4b661bb/Alps-Images/common/install-alps-hpc-stack.sh"),
                "{n}: {flags}"
            );
        }
    }
}
