//! `gpustack check`'s admission model (src/check/admission.rs): every code gets a broken
//! fixture, planted by one named edit in a copy of a clean project (spec, lock and the
//! committed `gen all` tree) or by one spec key, and a neighbour that passes: the same
//! project unedited, which has no admission finding at all.

mod common;

use std::path::{Path, PathBuf};

use common::{copy_dir, root, run_in, tempdir, Output};

/// A clean project of a committed example.
fn project(stack: &str, tag: &str) -> PathBuf {
    let dir = tempdir(tag);
    std::fs::copy(
        root().join(format!("fixtures/specs/{stack}.toml")),
        dir.join("gpustack.toml"),
    )
    .unwrap();
    std::fs::copy(
        root().join(format!("lockfiles/{stack}.lock")),
        dir.join("gpustack.lock"),
    )
    .unwrap();
    copy_dir(
        &root().join(format!("fixtures/gen/{stack}")),
        &dir.join("out"),
    );
    dir
}

fn edit(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(from), "{} has no `{from}`", path.display());
    std::fs::write(path, text.replacen(from, to, 1)).unwrap();
}

fn check(dir: &Path) -> Output {
    run_in(dir, &["check", "--format", "json"])
}

/// Every admission code in the report, with its file, as `code file`.
fn admission(out: &Output) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}\n{}", out.stdout, out.stderr));
    let codes = [
        "uncovered-resource",
        "exceeds-quota",
        "unprovided-resource",
        "no-gang",
        "unselected-monitor",
        "unpullable-image",
        "no-node-fits",
        "exceeds-partition",
    ];
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| codes.contains(&f["code"].as_str().unwrap_or_default()))
        .map(|f| {
            format!(
                "{} {}",
                f["code"].as_str().unwrap(),
                f["file"].as_str().unwrap_or("-")
            )
        })
        .collect()
}

/// The broken fixtures: (code, stack, file under out/, text, replacement).
const EDITS: &[(&str, &str, &str, &str, &str)] = &[
    // The queue of before: the RDMA device the pods request left out.
    (
        "uncovered-resource",
        "h100-ib-train-serve",
        "k8s/kueue/cluster-queue.yaml",
        "        - \"rdma/rdma_shared_device_a\"\n",
        "",
    ),
    // The node figure alone, without the MPI launcher's CPU.
    (
        "exceeds-quota",
        "h100-ib-train-serve",
        "k8s/kueue/cluster-queue.yaml",
        "nominalQuota: 769",
        "nominalQuota: 768",
    ),
    // A NicClusterPolicy that provides another resource than the pods request.
    (
        "unprovided-resource",
        "h100-ib-train-serve",
        "k8s/network/nic-cluster-policy.yaml",
        "\\\"resourceName\\\":\\\"rdma_shared_device_a\\\"",
        "\\\"resourceName\\\":\\\"hca_b\\\"",
    ),
    // A multi-node PyTorchJob without a queue and without its scheduling policy.
    (
        "no-gang",
        "gh200-hpc",
        "k8s/pytorchjob.yaml",
        "    schedulingPolicy:",
        "    x-dropped-schedulingPolicy:",
    ),
    // A ServiceMonitor labelled for another Prometheus release.
    (
        "unselected-monitor",
        "h100-ib-train-serve",
        "k8s/monitoring/vllm-servicemonitor.yaml",
        "\"release\": \"kube-prometheus-stack\"",
        "\"release\": \"prometheus\"",
    ),
    // A node pod asking for more GPUs than a node of [cluster] has.
    (
        "no-node-fits",
        "gh200-hpc",
        "k8s/pytorchjob.yaml",
        "nvidia.com/gpu: 4",
        "nvidia.com/gpu: 8",
    ),
    // An image with no registry in a pod.
    (
        "unpullable-image",
        "h100-ib-train-serve",
        "k8s/nccl-tests-runtime.yaml",
        "image: \"registry.example.com/",
        "image: \"localhost/",
    ),
];

#[test]
fn every_admission_code_has_a_broken_fixture_and_a_passing_neighbour() {
    let mut stacks: Vec<&str> = EDITS.iter().map(|e| e.1).collect();
    stacks.sort_unstable();
    stacks.dedup();
    for stack in stacks {
        let dir = project(stack, &format!("adm-clean-{stack}"));
        let out = check(&dir);
        assert_eq!(
            admission(&out),
            Vec::<String>::new(),
            "{stack}: the neighbour"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
    for (code, stack, file, from, to) in EDITS {
        let dir = project(stack, &format!("adm-{code}"));
        edit(&dir.join("out").join(file), from, to);
        let out = check(&dir);
        let got = admission(&out);
        assert!(
            got.contains(&format!("{code} out/{file}"))
                || got.iter().any(|g| g.starts_with(&format!("{code} "))),
            "{code}: {got:?}\n{}",
            out.stdout
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A stack without `[image].registry` that configures `[k8s]` and `[slurm]`: `gen` says
/// so loudly, and `check` repeats it for every image a cluster pulls. A stack that
/// configures neither gets no warning from `gen all` or `check` (its manifests are a
/// sketch nobody said would run on a cluster), but an explicit `gen k8s` still warns; with
/// a registry, nothing is said.
#[test]
fn images_without_a_registry_are_warned_at_gen_and_in_check() {
    let base = std::fs::read_to_string(root().join("fixtures/specs/gh200-hpc.toml")).unwrap();
    let spec = base.replace(
        "[image]\nregistry = \"registry.example.com/hpc\"\nlayers = [\"base\", \"framework\"]\n",
        "",
    );
    assert_ne!(spec, base, "gh200-hpc's [image] table moved");
    let dir = tempdir("adm-localhost");
    std::fs::write(dir.join("gpustack.toml"), spec).unwrap();
    assert_eq!(run_in(&dir, &["lock", "--offline"]).code, 0);
    let gen = run_in(&dir, &["gen", "all"]);
    assert_eq!(gen.code, 0, "{}", gen.stderr);
    assert!(
        gen.stderr
            .contains("warning: the lock names no image registry, so the k8s and slurm files"),
        "{}",
        gen.stderr
    );
    let out = check(&dir);
    let got = admission(&out);
    assert!(
        got.iter()
            .any(|g| g.starts_with("unpullable-image out/k8s/")),
        "{got:?}"
    );
    assert!(
        got.iter()
            .any(|g| g == "unpullable-image out/slurm/nccl-tests.sbatch"),
        "{got:?}"
    );
    assert_eq!(out.code, 0, "a warning: exit 0 without --strict");
    let strict = run_in(&dir, &["check", "--strict"]);
    assert_eq!(strict.code, 1, "{}", strict.stderr);
    let docker = run_in(&dir, &["gen", "docker"]);
    assert!(!docker.stderr.contains("warning"), "{}", docker.stderr);
    let _ = std::fs::remove_dir_all(&dir);

    // Neither [k8s] nor [slurm]: `gen all` and `check` are quiet; `gen k8s` named is not.
    let dir = project("a100-pytorch", "adm-localhost-sketch");
    let all = run_in(&dir, &["gen", "all", "--out", "out"]);
    assert!(!all.stderr.contains("warning"), "{}", all.stderr);
    let out = check(&dir);
    assert!(
        !admission(&out)
            .iter()
            .any(|g| g.starts_with("unpullable-image")),
        "{}",
        out.stdout
    );
    let k8s = run_in(&dir, &["gen", "k8s", "--out", "out"]);
    assert!(
        k8s.stderr
            .contains("warning: the lock names no image registry, so the k8s files"),
        "{}",
        k8s.stderr
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `[slurm].max_nodes` and `max_time`: a job beyond the partition's limits is reported
/// where the script asks for it; within them, nothing.
#[test]
fn a_slurm_job_beyond_the_partitions_limits_is_reported() {
    let base =
        std::fs::read_to_string(root().join("fixtures/specs/slurm-apptainer-h100.toml")).unwrap();
    for (limits, want) in [
        ("max_nodes = 4\nmax_time = \"2-00:00:00\"\n", vec![]),
        (
            "max_nodes = 2\nmax_time = \"1-00:00:00\"\n",
            vec![
                "exceeds-partition out/slurm/nccl-tests.sbatch",
                "exceeds-partition out/slurm/train.sbatch",
            ],
        ),
    ] {
        let dir = tempdir("adm-partition");
        let spec = base.replace(
            "time = \"2-00:00:00\"\n",
            &format!("time = \"2-00:00:00\"\n{limits}"),
        );
        std::fs::write(dir.join("gpustack.toml"), spec).unwrap();
        let out = run_in(&dir, &["lock", "--offline"]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        let out = run_in(&dir, &["gen", "slurm", "docker"]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        let out = check(&dir);
        let mut got = admission(&out);
        got.sort();
        got.dedup();
        for w in &want {
            assert!(got.iter().any(|g| g == w), "{limits}: {got:?}");
        }
        if want.is_empty() {
            assert_eq!(got, Vec::<String>::new(), "{limits}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A multi-node Slingshot or EFA stack whose Kubernetes pods would get no fabric device is
/// refused at `lock`, at `[k8s]`, naming the `[network]` key (a lock from before the key
/// is refused by `gen k8s`: tests/lockfiles.rs); with it, the pods request the device and
/// `check` finds it provided.
#[test]
fn fabric_devices_are_requested_or_the_stack_is_refused() {
    for (fabric, key, resource) in [
        (
            "slingshot",
            "cxi_resource = \"beta.hpe.com/cxi\"",
            "beta.hpe.com/cxi: 4",
        ),
        ("efa", "efa_devices = 32", "vpc.amazonaws.com/efa: 32"),
    ] {
        let spec = std::fs::read_to_string(root().join(format!("fixtures/fabrics/{fabric}.toml")))
            .unwrap();
        assert!(spec.contains(key), "{fabric}");
        let dir = tempdir(&format!("adm-{fabric}"));
        std::fs::write(dir.join("gpustack.toml"), spec.replace(key, "")).unwrap();
        let out = run_in(&dir, &["lock", "--offline"]);
        assert_eq!(out.code, 2, "{fabric}: {}", out.stderr);
        let name = key.split(' ').next().unwrap();
        assert!(
            out.stderr.contains(&format!("`[network].{name}`")),
            "{}",
            out.stderr
        );
        assert!(out.stderr.contains("[k8s]"), "{}", out.stderr);
        assert!(
            !dir.join("gpustack.lock").exists(),
            "{fabric}: nothing written"
        );
        std::fs::write(dir.join("gpustack.toml"), &spec).unwrap();
        assert_eq!(run_in(&dir, &["lock", "--offline"]).code, 0);
        let out = run_in(&dir, &["gen", "k8s"]);
        assert_eq!(out.code, 0, "{fabric}: {}", out.stderr);
        let mut found = false;
        for e in std::fs::read_dir(dir.join("out/k8s")).unwrap() {
            let text = std::fs::read_to_string(e.unwrap().path()).unwrap_or_default();
            found |= text.contains(resource);
        }
        assert!(found, "{fabric}: no pod requests {resource}");
        let out = check(&dir);
        let got: Vec<String> = admission(&out)
            .into_iter()
            .filter(|g| !g.starts_with("unpullable-image"))
            .collect();
        assert_eq!(got, Vec::<String>::new(), "{fabric}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
