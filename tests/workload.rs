//! One decision, every target: the workload plan is rendered by Kubernetes and Slurm, and
//! both renderings start the same program the same way.
//!
//! For every example spec with `[train]` or `[serve]`, and for the three forms of
//! `[train].command` torchrun's contract distinguishes (`python train.py …`,
//! `python -m pkg.train …`, `train.py …`) plus an executable, under each Slurm container
//! runtime, the test locks and generates `k8s` and `slurm` in a project directory that holds
//! the training code, then runs what each target would run:
//!
//! * Kubernetes: the training and serving containers' `command` + `args`, with their `env`,
//!   in their `workingDir` (the code image's copy of the project, or the volume mounted
//!   there);
//! * Slurm: `bash out/slurm/train.sbatch` from the project directory, with one-node stand-ins
//!   for `srun` and `scontrol` (`tests/standins/`), and the Apptainer shim.
//!
//! Both reach the same stand-ins: `torchrun` (`tests/standins/torchrun.py`, torchrun's
//! documented command line: options, then `training_script` run with `python -u`, `-m` or
//! `--no-python`) and `vllm` (`vllm serve`'s). The training script records its arguments,
//! interpreter command line and working directory per worker; the records of the two
//! targets must be equal, and equal to the command as written. The Slurm cluster test
//! (`tests/slurm.rs`) runs the same scripts under the real sbatch/srun on every node.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use yaml_rust2::{Yaml, YamlLoader};

/// The stand-in programs, as they are named on PATH.
fn bin(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for (name, from) in [
        ("torchrun", "tests/standins/torchrun.py"),
        ("vllm", "tests/standins/vllm.py"),
        ("srun", "tests/standins/srun.sh"),
        ("scontrol", "tests/standins/scontrol.sh"),
        ("apptainer", "tests/slurm/shim.sh"),
    ] {
        let p = bin.join(name);
        std::fs::copy(root().join(from), &p).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
    bin
}

struct Project {
    name: String,
    dir: PathBuf,
    lock: gpustack::Lock,
}

fn project(name: &str, spec: &str) -> Project {
    let dir = tempdir(&format!("workload-{name}"));
    std::fs::write(dir.join("gpustack.toml"), spec).unwrap();
    write_training_code(&dir);
    let out = run_in(&dir, &["lock"]);
    assert_eq!(out.code, 0, "{name}: lock: {}", out.stderr);
    let out = run_in(&dir, &["gen", "k8s", "slurm"]);
    assert_eq!(out.code, 0, "{name}: gen: {}", out.stderr);
    let text = std::fs::read_to_string(dir.join("gpustack.lock")).unwrap();
    Project {
        name: name.into(),
        lock: gpustack::Lock::parse("gpustack.lock", &text).unwrap(),
        dir,
    }
}

fn base_spec() -> String {
    std::fs::read_to_string(root().join("fixtures/specs/h100-ib-train-serve.toml")).unwrap()
}

/// Every example spec with a workload, and the command forms on a 2 x 4 cluster for each
/// Slurm container runtime.
fn projects() -> Vec<Project> {
    let mut out = Vec::new();
    for name in example_names() {
        let spec =
            std::fs::read_to_string(root().join(format!("fixtures/specs/{name}.toml"))).unwrap();
        if spec.contains("[train]") || spec.contains("[serve]") {
            out.push(project(&name, &spec));
        }
    }
    for (form, command) in COMMAND_FORMS {
        for runtime in ["pyxis", "apptainer", "none"] {
            let spec = small_cluster_spec(command, runtime);
            out.push(project(&format!("{form}-{runtime}"), &spec));
        }
    }
    // The code on shared storage ([train].workdir): mounted as the working directory.
    let shared = tempdir("workload-shared-code");
    write_training_code(&shared);
    let spec = base_spec()
        .replace(
            "nodes = 8\ngpus_per_node = 8",
            "nodes = 2\ngpus_per_node = 4",
        )
        .replace("tensor_parallel = 8", "tensor_parallel = 4")
        .replace(
            "[train]\n",
            &format!("[train]\nworkdir = \"hostpath:{}\"\n", shared.display()),
        );
    out.push(project("workdir-volume", &spec));
    out
}

fn yaml_doc(path: &Path) -> Yaml {
    let text = std::fs::read_to_string(path).unwrap();
    YamlLoader::load_from_str(&text).unwrap().remove(0)
}

fn strings(y: &Yaml) -> Vec<String> {
    y.as_vec()
        .map(|v| v.iter().map(|s| s.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

/// The training pod as the operator creates it: the PyTorchJob's worker template, or the
/// TrainingRuntime's `node` pod with the TrainJob's `trainer` applied (image, command,
/// args, env upserted), as the Trainer does.
fn training_pod(p: &Project) -> Yaml {
    let k8s = p.dir.join("out/k8s");
    if k8s.join("pytorchjob.yaml").exists() {
        let job = yaml_doc(&k8s.join("pytorchjob.yaml"));
        return job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"].clone();
    }
    let job = yaml_doc(&k8s.join("trainjob.yaml"));
    let rt = yaml_doc(&k8s.join("trainingruntime.yaml"));
    let trainer = &job["spec"]["trainer"];
    let rj = &rt["spec"]["template"]["spec"]["replicatedJobs"][0];
    assert_eq!(rj["name"].as_str(), Some("node"), "{}", p.name);
    let mut pod = rj["template"]["spec"]["template"]["spec"].clone();
    let key = |k: &str| Yaml::String(k.into());
    let Yaml::Hash(pod_map) = &mut pod else {
        panic!("pod")
    };
    let Some(Yaml::Array(cs)) = pod_map.get_mut(&key("containers")) else {
        panic!("containers")
    };
    let Yaml::Hash(c) = &mut cs[0] else {
        panic!("container")
    };
    assert_eq!(
        c[&key("name")].as_str(),
        Some("node"),
        "{}: the trainer container",
        p.name
    );
    for k in ["image", "command", "args"] {
        if !trainer[k].is_badvalue() {
            c.insert(key(k), trainer[k].clone());
        }
    }
    if let Some(env) = trainer["env"].as_vec() {
        let mut merged: Vec<Yaml> = c
            .get(&key("env"))
            .and_then(Yaml::as_vec)
            .cloned()
            .unwrap_or_default();
        for e in env {
            merged.retain(|x| x["name"] != e["name"]);
            merged.push(e.clone());
        }
        c.insert(key("env"), Yaml::Array(merged));
    }
    pod
}

/// Kubernetes' `$(VAR)` expansion in `command` and `args`, from the container's
/// environment.
fn expand(word: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = word.to_string();
    for (k, v) in env {
        out = out.replace(&format!("$({k})"), v);
    }
    out
}

/// Runs a Kubernetes pod's single container as the container runtime would: `command` +
/// `args` with the pod's `env` (and `injected`, what a controller adds: LWS's variables),
/// `$(VAR)` expanded, in `workingDir`, where the code image holds a copy of the project and
/// a volume is its host path.
fn run_pod(p: &Project, pod: &Yaml, bin: &Path, rec: &Path) {
    run_pod_with(p, pod, bin, rec, &[]);
}

fn run_pod_with(p: &Project, pod: &Yaml, bin: &Path, rec: &Path, injected: &[(&str, &str)]) {
    let c = &pod["containers"][0];
    let mut env: BTreeMap<String, String> = injected
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect();
    if let Some(e) = c["env"].as_vec() {
        for e in e {
            env.insert(
                e["name"].as_str().unwrap().into(),
                e["value"].as_str().unwrap().into(),
            );
        }
    }
    let mut argv = strings(&c["command"]);
    argv.extend(strings(&c["args"]));
    let argv: Vec<String> = argv.iter().map(|a| expand(a, &env)).collect();
    let cwd = match c["workingDir"].as_str() {
        None => p.dir.clone(),
        Some(wd) => {
            let mounted = c["volumeMounts"]
                .as_vec()
                .unwrap()
                .iter()
                .find(|m| m["mountPath"].as_str() == Some(wd))
                .and_then(|m| {
                    pod["volumes"]
                        .as_vec()
                        .unwrap()
                        .iter()
                        .find(|v| v["name"] == m["name"])
                })
                .map(|v| PathBuf::from(v["hostPath"]["path"].as_str().unwrap()));
            mounted.unwrap_or_else(|| {
                // The code image: the training image with the project copied to `wd`.
                let ws = p.dir.join("container-workspace");
                std::fs::create_dir_all(&ws).unwrap();
                write_training_code(&ws);
                ws
            })
        }
    };
    let mut cmd = Command::new(bin.join(&argv[0]));
    cmd.args(&argv[1..])
        .current_dir(&cwd)
        .env_clear()
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .env("GPUSTACK_REC_DIR", rec)
        .envs(&env);
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}: the pod's {argv:?} failed: {}{}",
        p.name,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `out/slurm/<file>` as Slurm would on the first node of its allocation, submitted
/// from the project directory.
fn run_sbatch(p: &Project, file: &str, bin: &Path, rec: &Path) {
    let script = p.dir.join("out/slurm").join(file);
    let venv = p.dir.join("venv");
    std::fs::create_dir_all(venv.join("bin")).unwrap();
    for n in ["torchrun", "vllm"] {
        std::fs::copy(bin.join(n), venv.join("bin").join(n)).unwrap();
    }
    let nodes = p
        .lock
        .request
        .deploy
        .cluster
        .as_ref()
        .map_or(1, |c| c.nodes);
    let out = Command::new("bash")
        .arg(script.strip_prefix(&p.dir).unwrap())
        .current_dir(&p.dir)
        .env_clear()
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .env("GPUSTACK_REC_DIR", rec)
        .env("GPUSTACK_VENV", &venv)
        .env("GPUSTACK_TEST_SUBMITTED", &script)
        .env("SLURM_JOB_ID", "7")
        .env("SLURM_JOB_NODELIST", "node0")
        .env("SLURM_NNODES", nodes.to_string())
        .env("SLURM_SUBMIT_DIR", &p.dir)
        .env("SLURM_CPUS_ON_NODE", "16")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}: {file} failed: {}{}",
        p.name,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The training script's records, by local rank.
fn script_records(rec: &Path) -> BTreeMap<u32, serde_json::Value> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(rec).unwrap() {
        let p = e.unwrap().path();
        let f = p.file_name().unwrap().to_str().unwrap().to_string();
        if f.starts_with("script.") && f.ends_with(".json") {
            let v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            let local: u32 = v["env"]["LOCAL_RANK"].as_str().unwrap().parse().unwrap();
            out.insert(local, v);
        }
    }
    out
}

/// What the program must receive, read from `[train].command` by torchrun's contract
/// (independently of gpustack's plan): (module, arguments, interpreter options before the
/// script).
fn expected(command: &[String]) -> (Option<String>, Vec<String>) {
    let python = |w: &str| w == "python" || w == "python3";
    let mut rest = command;
    if rest.first().is_some_and(|w| python(w)) {
        rest = &rest[1..];
        while rest.first().is_some_and(|w| w == "-u") {
            rest = &rest[1..];
        }
        if rest.first().is_some_and(|w| w == "-m") {
            return (Some(rest[1].clone()), rest[2..].to_vec());
        }
    }
    (None, rest[1..].to_vec())
}

/// What both targets must agree on. On bare metal the storage variables name the host
/// directories (there is no container to mount them into), so they are left out there.
fn comparable(v: &serde_json::Value, bare_metal: bool) -> serde_json::Value {
    let mut v = serde_json::json!({
        "argv": v["argv"],
        "module": v["module"],
        "interpreter_options": v["orig_argv"].as_array().map(|a| a.iter().skip(1).take_while(|x| x.as_str().is_some_and(|s| s.starts_with('-') && s != "-m")).cloned().collect::<Vec<_>>()),
        "code_in_cwd": v["code_in_cwd"],
        "WORLD_SIZE": v["env"]["WORLD_SIZE"],
        "LOCAL_WORLD_SIZE": v["env"]["LOCAL_WORLD_SIZE"],
        "MASTER_PORT": v["env"]["MASTER_PORT"],
        "DATASETS_DIR": v["env"]["DATASETS_DIR"],
        "CHECKPOINTS_DIR": v["env"]["CHECKPOINTS_DIR"],
    });
    if bare_metal {
        let o = v.as_object_mut().unwrap();
        o.remove("DATASETS_DIR");
        o.remove("CHECKPOINTS_DIR");
    }
    v
}

#[test]
fn kubernetes_and_slurm_start_the_same_training_and_serving() {
    if validator("python3").is_none() {
        return;
    }
    let mut trained = 0;
    let mut served = 0;
    for p in projects() {
        let bin = bin(&p.dir);
        let deploy = &p.lock.request.deploy;
        let container = deploy
            .slurm
            .as_ref()
            .map_or("pyxis", |s| s.container.name());
        if let Some(t) = &deploy.train {
            let (k8s, slurm) = (p.dir.join("rec-k8s"), p.dir.join("rec-slurm"));
            std::fs::create_dir_all(&k8s).unwrap();
            std::fs::create_dir_all(&slurm).unwrap();
            run_pod(&p, &training_pod(&p), &bin, &k8s);
            run_sbatch(&p, "train.sbatch", &bin, &slurm);
            let (a, b) = (script_records(&k8s), script_records(&slurm));
            let gpus = deploy.cluster.as_ref().map_or(8, |c| c.gpus_per_node);
            assert_eq!(a.len() as u32, gpus, "{}: Kubernetes workers", p.name);
            assert_eq!(b.len() as u32, gpus, "{}: Slurm workers", p.name);
            let (module, args) = expected(&t.command);
            for (rank, ka) in &a {
                let sl = &b[rank];
                let bare = container == "none";
                assert_eq!(
                    comparable(ka, bare),
                    comparable(sl, bare),
                    "{} ({container}): rank {rank}",
                    p.name
                );
                let argv: Vec<String> = serde_json::from_value(ka["argv"].clone()).unwrap();
                assert_eq!(argv, args, "{}: the script's arguments", p.name);
                assert_eq!(
                    ka["module"].as_str().map(str::to_string),
                    module,
                    "{}",
                    p.name
                );
                assert_eq!(
                    ka["code_in_cwd"], true,
                    "{}: the code is not in the working directory",
                    p.name
                );
                // torchrun's default: a script or module runs under `python -u`.
                let orig: Vec<String> = serde_json::from_value(ka["orig_argv"].clone()).unwrap();
                if !t.command[0].starts_with("./") {
                    assert_eq!(
                        orig.get(1).map(String::as_str),
                        Some("-u"),
                        "{}: {orig:?}",
                        p.name
                    );
                }
            }
            trained += 1;
        }
        if let Some(s) = &deploy.serve {
            let (k8s, slurm) = (p.dir.join("rec-k8s-serve"), p.dir.join("rec-slurm-serve"));
            std::fs::create_dir_all(&k8s).unwrap();
            std::fs::create_dir_all(&slurm).unwrap();
            let d = yaml_doc(&p.dir.join("out/k8s/vllm-deployment.yaml"));
            run_pod(&p, &d["spec"]["template"]["spec"], &bin, &k8s);
            run_sbatch(&p, "serve.sbatch", &bin, &slurm);
            let read = |dir: &Path| -> serde_json::Value {
                let f = std::fs::read_dir(dir)
                    .unwrap()
                    .map(|e| e.unwrap().path())
                    .find(|f| {
                        f.file_name()
                            .unwrap()
                            .to_str()
                            .unwrap()
                            .starts_with("vllm.")
                    })
                    .unwrap_or_else(|| panic!("{}: vllm did not run", p.name));
                let mut v: serde_json::Value =
                    serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
                v.as_object_mut().unwrap().remove("model_visible");
                v
            };
            let (a, b) = (read(&k8s), read(&slurm));
            assert_eq!(a, b, "{}: vllm serve differs", p.name);
            assert_eq!(a["model"], s.model.as_str(), "{}", p.name);
            assert_eq!(a["tensor_parallel_size"], s.tensor_parallel, "{}", p.name);
            served += 1;
        }
        let _ = std::fs::remove_dir_all(&p.dir);
    }
    assert!(
        trained >= 18 && served >= 16,
        "{trained} trained, {served} served"
    );
}

/// Every GPU pod asks for GPUs, CPUs and memory, as requests and limits, from the workload
/// plan: `[cluster]`'s figures shared out by GPU when given, else the stated defaults.
#[test]
fn every_gpu_pod_requests_cpu_and_memory() {
    let sized = base_spec().replace(
        "cpus_per_node = 96\nmemory_gib_per_node = 1536",
        "cpus_per_node = 96\nmemory_gib_per_node = 1024",
    );
    let default = base_spec().replace("cpus_per_node = 96\nmemory_gib_per_node = 1536\n", "");
    let half = sized.replace("tensor_parallel = 8", "tensor_parallel = 4");
    assert!(sized.contains("1024") && !default.contains("cpus_per_node ="));
    for (name, spec, train, serve) in [
        ("default", default, (32, 256), (32, 256)),
        ("sized", sized, (96, 1024), (96, 1024)),
        ("half-node-server", half, (96, 1024), (48, 512)),
    ] {
        let p = project(&format!("resources-{name}"), &spec);
        for (file, path, want) in [
            (
                "pytorchjob.yaml",
                "spec.pytorchReplicaSpecs.Worker.template.spec",
                train,
            ),
            (
                "trainingruntime.yaml",
                "spec.template.spec.replicatedJobs.0.template.spec.template.spec",
                train,
            ),
            ("vllm-deployment.yaml", "spec.template.spec", serve),
            ("nccl-tests-job.yaml", "spec.template.spec", train),
            (
                "nccl-tests-runtime.yaml",
                "spec.template.spec.replicatedJobs.0.template.spec.template.spec",
                train,
            ),
        ] {
            let f = p.dir.join("out/k8s").join(file);
            if !f.exists() {
                continue;
            }
            let mut y = yaml_doc(&f);
            for k in path.split('.') {
                y = match k.parse::<usize>() {
                    Ok(i) => y[i].clone(),
                    Err(_) => y[k].clone(),
                };
            }
            let r = &y["containers"][0]["resources"];
            for side in ["requests", "limits"] {
                assert!(
                    r[side]["nvidia.com/gpu"].as_i64().is_some(),
                    "{name}/{file}"
                );
                assert_eq!(
                    r[side]["cpu"].as_i64(),
                    Some(want.0),
                    "{name}/{file} {side}"
                );
                assert_eq!(
                    r[side]["memory"].as_str(),
                    Some(format!("{}Gi", want.1).as_str()),
                    "{name}/{file} {side}"
                );
            }
        }
        let _ = std::fs::remove_dir_all(&p.dir);
    }
}

/// A vLLM server across nodes (`[serve].nodes = 2`): the LeaderWorkerSet's leader and
/// worker pods, run with the variables LWS injects (`LWS_WORKER_INDEX`,
/// `LWS_LEADER_ADDRESS`, `LWS_GROUP_SIZE`), start the one server the workload plan decides
/// (the plan's `vllm serve` arguments on every node, node ranks 0 and 1 of 2, the leader's
/// address, `--headless` on the worker); the HPA and the Service target the leader.
#[test]
fn leaderworkerset_starts_one_server_across_nodes() {
    if validator("python3").is_none() {
        return;
    }
    // For Kubernetes alone: Slurm does not write a multi-node server.
    let spec = base_spec()
        .replace("replicas = 2\n", "replicas = 1\nnodes = 2\n")
        .replace(
            "[slurm]\npartition = \"gpu\"\ncontainer = \"pyxis\"\ntime = \"48:00:00\"\n",
            "",
        );
    assert!(!spec.contains("[slurm]"));
    let dir = tempdir("workload-lws");
    std::fs::write(dir.join("gpustack.toml"), &spec).unwrap();
    write_training_code(&dir);
    assert_eq!(run_in(&dir, &["lock"]).code, 0);
    let out = run_in(&dir, &["gen", "k8s"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let text = std::fs::read_to_string(dir.join("gpustack.lock")).unwrap();
    let p = Project {
        name: "lws".into(),
        lock: gpustack::Lock::parse("gpustack.lock", &text).unwrap(),
        dir,
    };
    let common = gpustack::plan::Common::new(&p.lock).unwrap();
    let plan = gpustack::plan::workload::WorkloadPlan::new(&p.lock, &common).unwrap();
    let serve = plan.serve.unwrap();
    assert_eq!(serve.nodes, 2);
    let bin = bin(&p.dir);
    let lws = yaml_doc(&p.dir.join("out/k8s/vllm-leaderworkerset.yaml"));
    let t = &lws["spec"]["leaderWorkerTemplate"];
    assert_eq!(t["size"].as_i64(), Some(2));
    let leader_addr = "vllm-0.vllm.llm";
    let mut records = Vec::new();
    for (role, template, index) in [
        ("leader", &t["leaderTemplate"], "0"),
        ("worker", &t["workerTemplate"], "1"),
    ] {
        let rec = p.dir.join(format!("rec-{role}"));
        std::fs::create_dir_all(&rec).unwrap();
        run_pod_with(
            &p,
            &template["spec"],
            &bin,
            &rec,
            &[
                ("LWS_WORKER_INDEX", index),
                ("LWS_LEADER_ADDRESS", leader_addr),
                ("LWS_GROUP_SIZE", "2"),
            ],
        );
        let f = std::fs::read_dir(&rec)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
        // What every node's command line starts with is the plan's, word for word.
        let c = &template["spec"]["containers"][0];
        let argv = strings(&c["args"]);
        assert_eq!(argv[..serve.vllm.args.len()], serve.vllm.args[..], "{role}");
        assert_eq!(
            strings(&c["command"]),
            std::slice::from_ref(&serve.vllm.program),
            "{role}"
        );
        let gpus = c["resources"]["limits"]["nvidia.com/gpu"].as_i64().unwrap();
        assert_eq!(gpus, i64::from(serve.resources.gpus), "{role}");
        records.push(v);
    }
    let (leader, worker) = (&records[0], &records[1]);
    let s = p.lock.request.deploy.serve.as_ref().unwrap();
    for (v, rank, headless) in [(leader, 0, false), (worker, 1, true)] {
        assert_eq!(v["model"], s.model.as_str());
        assert_eq!(v["tensor_parallel_size"], s.tensor_parallel);
        assert_eq!(v["pipeline_parallel_size"], s.pipeline_parallel);
        assert_eq!(v["nnodes"], 2);
        assert_eq!(v["node_rank"], rank);
        assert_eq!(v["master_addr"], leader_addr);
        assert_eq!(v["headless"], headless);
    }
    // tensor × pipeline parallel GPUs, split over the group's nodes.
    assert_eq!(
        serve.resources.gpus * 2,
        s.tensor_parallel * s.pipeline_parallel
    );
    let svc = yaml_doc(&p.dir.join("out/k8s/vllm-service.yaml"));
    assert_eq!(svc["spec"]["selector"]["role"].as_str(), Some("leader"));
    assert_eq!(
        t["leaderTemplate"]["metadata"]["labels"]["role"].as_str(),
        Some("leader")
    );
    let hpa = yaml_doc(&p.dir.join("out/k8s/vllm-hpa.yaml"));
    assert_eq!(
        hpa["spec"]["scaleTargetRef"]["kind"].as_str(),
        Some("LeaderWorkerSet")
    );
    let _ = std::fs::remove_dir_all(&p.dir);
}

/// The `gpustack acceptance:` verdict lines of a run's output.
fn verdicts(stdout: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter(|l| l.starts_with("gpustack acceptance: "))
        .map(String::from)
        .collect()
}

/// A Kubernetes acceptance command without its judging wrapper (`bash -c SCRIPT NAME CMD…`):
/// the command the wrapper runs.
fn unjudged(cmd: Vec<String>) -> Vec<String> {
    if cmd.first().map(String::as_str) == Some("bash")
        && cmd.get(1).map(String::as_str) == Some("-c")
    {
        assert!(cmd[2].contains("\"$@\" | awk "), "{cmd:?}");
        cmd[4..].to_vec()
    } else {
        cmd
    }
}

/// The acceptance test is one decision on every target: for every example lock with
/// nccl-tests, Slurm's `nccl-tests.sbatch` (under the one-node `srun` stand-in) and the
/// Kubernetes acceptance object (the Indexed Job's container, or the MPI TrainJob's
/// `trainer.command` under a stand-in that implements `mpirun`'s documented options and
/// starts rank 0 with only the exported environment, as SSH would) run the same
/// `all_reduce_perf` with the same arguments; MPI is used on both or on neither, with one
/// rank per GPU of every node; the ranks get every NCCL/fabric variable of the ConfigMap;
/// and the MPI runtime's SSH user, port, configuration and Open MPI prefix are the ones the
/// validate image's Dockerfile sets up.
#[test]
fn kubernetes_and_slurm_run_the_same_nccl_tests() {
    if validator("python3").is_none() {
        return;
    }
    let mut compared = 0;
    let mut mpi_runs = 0;
    for name in example_names() {
        let lock = root().join("lockfiles").join(format!("{name}.lock"));
        let text = std::fs::read_to_string(&lock).unwrap();
        if !text.contains("name = \"nccl-tests\"") {
            continue;
        }
        let dir = tempdir(&format!("nccl-{name}"));
        let out = run_in(
            &dir,
            &[
                "gen",
                "k8s",
                "slurm",
                "docker",
                "--lock",
                lock.to_str().unwrap(),
                "--out",
                "out",
            ],
        );
        assert_eq!(out.code, 0, "{name}: gen: {}", out.stderr);
        let bin = bin(&dir);
        for (n, from) in [
            ("all_reduce_perf", "tests/slurm/shim.sh"),
            ("osu_bw", "tests/slurm/shim.sh"),
            ("mpirun", "tests/standins/mpirun.py"),
        ] {
            let p = bin.join(n);
            std::fs::copy(root().join(from), &p).unwrap();
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
        }
        let argv = |rec: &Path| -> Vec<String> {
            let f = std::fs::read_dir(rec)
                .unwrap()
                .map(|e| e.unwrap().path())
                .find(|p| {
                    let f = p.file_name().unwrap().to_string_lossy();
                    f.starts_with("all_reduce_perf.") && f.ends_with(".argv")
                })
                .unwrap_or_else(|| panic!("{name}: all_reduce_perf did not run"));
            std::fs::read_to_string(f)
                .unwrap()
                .split('\0')
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect()
        };

        // Slurm.
        let slurm_rec = dir.join("rec-slurm");
        std::fs::create_dir_all(&slurm_rec).unwrap();
        let sbatch = dir.join("out/slurm/nccl-tests.sbatch");
        let script = std::fs::read_to_string(&sbatch).unwrap();
        let nodes: u32 = script
            .lines()
            .find_map(|l| l.strip_prefix("#SBATCH --nodes="))
            .unwrap()
            .parse()
            .unwrap();
        let tasks: u32 = script
            .split_whitespace()
            .find_map(|w| w.strip_prefix("--ntasks-per-node="))
            .unwrap()
            .parse()
            .unwrap();
        let slurm_mpi = script.contains("--mpi=");
        // The benchmarks print recorded real outputs; both targets judge them alike.
        let recorded = [
            (
                "GPUSTACK_SHIM_STDOUT_all_reduce_perf",
                root().join("fixtures/acceptance/nccl-tests-h100-2x8.txt"),
            ),
            (
                "GPUSTACK_SHIM_STDOUT_osu_bw",
                root().join("fixtures/acceptance/osu_bw-a100-nvlink-v7.2.txt"),
            ),
        ];
        let out = Command::new("bash")
            .arg("out/slurm/nccl-tests.sbatch")
            .current_dir(&dir)
            .env_clear()
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .env("GPUSTACK_REC_DIR", &slurm_rec)
            .env("GPUSTACK_NCCL_TESTS", &bin)
            .env("GPUSTACK_OSU_BW", bin.join("osu_bw"))
            .env("GPUSTACK_TEST_SUBMITTED", &sbatch)
            .env("SLURM_JOB_ID", "7")
            .env("SLURM_JOB_NODELIST", "node0")
            .env("SLURM_NNODES", nodes.to_string())
            .env("SLURM_SUBMIT_DIR", &dir)
            .env("SLURM_CPUS_ON_NODE", "16")
            .envs(recorded.clone())
            .output()
            .unwrap();
        let slurm_verdicts = verdicts(&out.stdout);
        // Judged below the lock's figure, the script fails at its verdict; otherwise it
        // runs to the end.
        assert!(
            out.status.success() || slurm_verdicts.iter().any(|v| v.contains(": FAIL: ")),
            "{name}: nccl-tests.sbatch: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let slurm = argv(&slurm_rec);

        // Kubernetes.
        let k8s = dir.join("out/k8s");
        let k8s_rec = dir.join("rec-k8s");
        std::fs::create_dir_all(&k8s_rec).unwrap();
        let env_data = yaml_doc(&k8s.join("nccl-env.yaml"))["data"].clone();
        let env_names: Vec<String> = env_data
            .as_hash()
            .map(|h| h.keys().map(|k| k.as_str().unwrap().to_string()).collect())
            .unwrap_or_default();
        let (command, k8s_mpi) = if k8s.join("nccl-tests-job.yaml").exists() {
            assert!(!k8s.join("nccl-tests-trainjob.yaml").exists(), "{name}");
            let j = yaml_doc(&k8s.join("nccl-tests-job.yaml"));
            let c = &j["spec"]["template"]["spec"]["containers"][0];
            assert_eq!(j["spec"]["completions"].as_i64(), Some(i64::from(nodes)));
            let mut cmd = strings(&c["command"]);
            cmd.extend(strings(&c["args"]));
            (unjudged(cmd), false)
        } else {
            let tj = yaml_doc(&k8s.join("nccl-tests-trainjob.yaml"));
            let rt = yaml_doc(&k8s.join("nccl-tests-runtime.yaml"));
            assert_eq!(
                tj["spec"]["runtimeRef"]["name"], rt["metadata"]["name"],
                "{name}"
            );
            assert_eq!(
                tj["spec"]["trainer"]["numNodes"].as_i64(),
                Some(i64::from(nodes))
            );
            let mpi = &rt["spec"]["mlPolicy"]["mpi"];
            assert_eq!(
                mpi["numProcPerNode"].as_i64(),
                Some(i64::from(tasks)),
                "{name}"
            );
            assert_eq!(mpi["runLauncherAsNode"].as_bool(), Some(false), "{name}");
            // The Trainer's MPI plugin mounts keys and hostfile only in containers named
            // `node`; the trainer step is the launcher.
            let jobs = rt["spec"]["template"]["spec"]["replicatedJobs"]
                .as_vec()
                .unwrap();
            let job = |n: &str| jobs.iter().find(|j| j["name"].as_str() == Some(n)).unwrap();
            let node = &job("node")["template"]["spec"]["template"]["spec"];
            let launcher = &job("launcher");
            assert_eq!(
                launcher["template"]["metadata"]["labels"]
                    ["trainer.kubeflow.org/trainjob-ancestor-step"]
                    .as_str(),
                Some("trainer")
            );
            let lpod = &launcher["template"]["spec"]["template"]["spec"];
            for pod in [node, lpod] {
                assert_eq!(
                    pod["containers"][0]["name"].as_str(),
                    Some("node"),
                    "{name}"
                );
            }
            // The validate image has what the node pods run and the launcher uses.
            let uid = node["securityContext"]["runAsUser"].as_i64().unwrap();
            assert_eq!(lpod["securityContext"]["runAsUser"].as_i64(), Some(uid));
            let sshd = strings(&node["containers"][0]["args"]);
            let port = node["containers"][0]["readinessProbe"]["tcpSocket"]["port"]
                .as_i64()
                .unwrap();
            let dockerfile = std::fs::read_to_string(dir.join("out/docker/Dockerfile")).unwrap();
            let validate = &dockerfile[dockerfile.find("AS validate\n").unwrap()..];
            let user = mpi["sshAuthMountPath"]
                .as_str()
                .unwrap()
                .trim_start_matches("/home/")
                .trim_end_matches("/.ssh");
            // The sshd config file is the last word of the node's command (on RDMA fabrics a
            // `bash -c` script that checks the memlock limit first, then `exec`s sshd).
            let config = sshd
                .last()
                .unwrap()
                .rsplit(' ')
                .next()
                .unwrap()
                .trim_matches('\'')
                .to_string();
            for want in [
                format!("useradd -m -u {uid} {user}"),
                format!("Port {port}' >> {config}"),
                format!("'    Port {port}' >> /etc/ssh/ssh_config"),
                "openssh-server".into(),
            ] {
                assert!(
                    validate.contains(&want),
                    "{name}: validate stage lacks {want:?}"
                );
            }
            let mut cmd = strings(&tj["spec"]["trainer"]["command"]);
            cmd.extend(strings(&tj["spec"]["trainer"]["args"]));
            let cmd = unjudged(cmd);
            assert_eq!(cmd[0], "mpirun", "{name}");
            let prefix = &cmd[cmd.iter().position(|a| a == "--prefix").unwrap() + 1];
            assert!(
                dockerfile.contains(&format!("--prefix={prefix}")),
                "{name}: Open MPI is not built into {prefix}"
            );
            (cmd, true)
        };
        assert_eq!(k8s_mpi, slurm_mpi, "{name}: MPI on one target only");
        // The container's command as written: the judging wrapper, when there is one.
        let written = {
            let j = if k8s.join("nccl-tests-job.yaml").exists() {
                let j = yaml_doc(&k8s.join("nccl-tests-job.yaml"));
                j["spec"]["template"]["spec"]["containers"][0].clone()
            } else {
                yaml_doc(&k8s.join("nccl-tests-trainjob.yaml"))["spec"]["trainer"].clone()
            };
            let mut c = strings(&j["command"]);
            c.extend(strings(&j["args"]));
            c
        };
        let mut k = if written[0] == "bash" {
            let mut k = Command::new("bash");
            k.args(&written[1..3])
                .arg(&written[3])
                .arg(bin.join(&command[0]));
            k.args(&command[1..]);
            k
        } else {
            let mut k = Command::new(bin.join(&command[0]));
            k.args(&command[1..]);
            k
        };
        k.current_dir(&dir)
            .env_clear()
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .env("LD_LIBRARY_PATH", "")
            .env("GPUSTACK_REC_DIR", &k8s_rec)
            .envs(recorded.clone());
        if let Some(h) = env_data.as_hash() {
            for (key, v) in h {
                k.env(key.as_str().unwrap(), v.as_str().unwrap());
            }
        }
        let out = k.output().unwrap();
        let kube_verdicts = verdicts(&out.stdout);
        assert!(
            out.status.success() || kube_verdicts.iter().any(|v| v.contains(": FAIL: ")),
            "{name}: {command:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The same output gets the same verdict on both targets (Slurm goes on to OSU).
        let all_reduce = |v: &[String]| v.iter().find(|l| l.contains(" all_reduce_perf ")).cloned();
        assert_eq!(
            all_reduce(&kube_verdicts),
            all_reduce(&slurm_verdicts),
            "{name}: the targets judge all_reduce_perf differently"
        );
        assert_eq!(
            all_reduce(&kube_verdicts).is_some(),
            written[0] == "bash",
            "{name}"
        );
        let kube = argv(&k8s_rec);
        assert_eq!(kube, slurm, "{name}: all_reduce_perf arguments differ");
        if k8s_mpi {
            let rec: serde_json::Value = serde_json::from_str(
                &std::fs::read_to_string(k8s_rec.join("mpirun.json")).unwrap(),
            )
            .unwrap();
            assert_eq!(rec["np"], nodes * tasks, "{name}: one rank per GPU");
            assert_eq!(rec["per_node"], tasks, "{name}");
            let exported: Vec<&str> = rec["export"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap())
                .collect();
            for n in &env_names {
                assert!(
                    exported.contains(&n.as_str()),
                    "{name}: {n} is not passed to the ranks"
                );
            }
            // The ranks saw the ConfigMap's values.
            let rank_env = std::fs::read_to_string(
                std::fs::read_dir(&k8s_rec)
                    .unwrap()
                    .map(|e| e.unwrap().path())
                    .find(|p| p.to_string_lossy().ends_with(".env"))
                    .unwrap(),
            )
            .unwrap();
            if let Some(h) = env_data.as_hash() {
                for (key, v) in h {
                    let kv = format!("{}={}", key.as_str().unwrap(), v.as_str().unwrap());
                    assert!(
                        rank_env.split('\0').any(|l| l == kv),
                        "{name}: rank lacks {kv}"
                    );
                }
            }
            mpi_runs += 1;
        }
        compared += 1;
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert!(
        compared >= 10 && mpi_runs >= 2,
        "{compared} compared, {mpi_runs} with MPI"
    );
}

/// The judging filter on recorded real outputs (`fixtures/acceptance/`, sources in its
/// README): it passes the output through, and its verdict names measured and expected.
#[test]
fn acceptance_is_judged_on_recorded_outputs() {
    use gpustack::plan::judge::Judge;
    let judge = |j: &Judge, fixture: &str| -> (i32, String) {
        let out = Command::new("bash")
            .arg("-c")
            .arg(j.wrap())
            .arg("judge")
            .arg("cat")
            .arg(root().join("fixtures/acceptance").join(fixture))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let raw =
            std::fs::read_to_string(root().join("fixtures/acceptance").join(fixture)).unwrap();
        assert!(
            text.starts_with(&raw),
            "{fixture}: the output is passed through"
        );
        (out.status.code().unwrap(), text[raw.len()..].to_string())
    };
    // The figures of the example locks, as the plan reads them.
    let figure = |lock: &str, scope: &str| -> Judge {
        let text = std::fs::read_to_string(root().join("lockfiles").join(lock)).unwrap();
        let lock = gpustack::Lock::parse(lock, &text).unwrap();
        let common = gpustack::plan::Common::new(&lock).unwrap();
        let a = gpustack::plan::workload::acceptance(&lock, &common)
            .unwrap()
            .unwrap();
        match scope {
            "osu" => a.osu_judge.unwrap(),
            _ => a.judge.unwrap(),
        }
    };
    // 8 x 8 H100 over InfiniBand, one MPI run across the nodes: the inter-node figure.
    let ib = figure("h100-ib-train-serve.lock", "nccl");
    assert_eq!(
        (ib.expected.as_str(), ib.min.as_str()),
        ("330.93", "297.83")
    );
    let (code, verdict) = judge(&ib, "nccl-tests-h100-2x8.txt");
    assert_eq!(code, 0, "{verdict}");
    assert!(
        verdict.starts_with("gpustack acceptance: PASS: all_reduce_perf peak busbw 338.82 GB/s at 8589934592 B >= 297.83 GB/s (the lock's inter-node figure 330.93 GB/s less 10%; source: "),
        "{verdict}"
    );
    assert!(
        verdict.contains("Avg bus bandwidth 70.742 GB/s over all sizes, not judged"),
        "{verdict}"
    );
    // One H100 node: the NVLink figure, which the same run does not reach.
    let nvlink = figure("h100-forward-compat.lock", "nccl");
    let (code, verdict) = judge(&nvlink, "nccl-tests-h100-2x8.txt");
    assert_eq!(code, 1, "{verdict}");
    assert!(
        verdict.starts_with("gpustack acceptance: FAIL: all_reduce_perf peak busbw 338.82 GB/s at 8589934592 B < 430.98 GB/s (the lock's intra-node figure 478.87 GB/s less 10%"),
        "{verdict}"
    );
    // The peak is the in-place column where it is the larger.
    let (code, verdict) = judge(
        &Judge::nccl("834.57", "the NVL72 figure", "coreweave/nccl-tests#43").unwrap(),
        "nccl-tests-gb200-nvl72.txt",
    );
    assert_eq!(code, 0, "{verdict}");
    assert!(
        verdict.contains("peak busbw 846.82 GB/s at 8589934592 B >= 751.11 GB/s"),
        "{verdict}"
    );
    // osu_bw: the row at the lock's message size.
    let osu = figure("gh200-hpc.lock", "osu");
    assert_eq!(osu.size_bytes.as_deref(), Some("4194304"));
    let (code, verdict) = judge(&osu, "osu_bw-a100-nvlink-v7.2.txt");
    assert_eq!(code, 0, "{verdict}");
    assert!(
        verdict.starts_with("gpustack acceptance: PASS: osu_bw 87543.13 MB/s at 4194304 B >= 21600.00 MB/s (the lock's osu_bw figure 24000 MB/s less 10%"),
        "{verdict}"
    );
    let high = Judge::osu("100000", "a figure above the run", Some("4194304"), "test").unwrap();
    let (code, verdict) = judge(&high, "osu_bw-a100-nvlink-v7.2.txt");
    assert_eq!(code, 1, "{verdict}");
    assert!(
        verdict.starts_with(
            "gpustack acceptance: FAIL: osu_bw 87543.13 MB/s at 4194304 B < 90000.00 MB/s"
        ),
        "{verdict}"
    );
    let missing = Judge::osu("24000", "the figure", Some("8589934592"), "test").unwrap();
    let (code, verdict) = judge(&missing, "osu_bw-a100-nvlink-v7.2.txt");
    assert_eq!(code, 1);
    assert!(
        verdict.contains("no osu_bw result row for 8589934592-byte messages"),
        "{verdict}"
    );
    // Output that is not the benchmark's (nccl-tests' output to the OSU judge and back).
    let (code, verdict) = judge(&ib, "osu_bw-a100-nvlink-v7.2.txt");
    assert_eq!(code, 1);
    assert!(
        verdict.contains("FAIL: no all_reduce_perf result rows"),
        "{verdict}"
    );
}
