//! SHARP on InfiniBand (issue 19): `[network].sharp = true` builds NVIDIA's NCCL SHARP
//! plugin (nccl-rdma-sharp-plugins) against the SHARP libraries of an HPC-X build pinned by
//! sha256, in the Dockerfile's `fabric` stage and, from the same plan, in the VM image's
//! `multinode.sh`:
//!
//! * the lock records both, with their sources; the HPC-X build is the one for the stack's
//!   OS, CUDA major and CPU, the `inbox` one (the distribution's rdma-core) where pinned;
//! * the plugin's configure line is the same on both targets, and every option is one the
//!   plugin's configure script defines (a sourced list below);
//! * SHARP's library directory is on the loader's path of the image and of the VM;
//! * `sharp = false` selects neither; a stack without a pinned HPC-X build keeps SHARP a
//!   named prerequisite.

mod common;

use std::path::{Path, PathBuf};

use common::*;

/// The options nccl-rdma-sharp-plugins' configure script defines, at the pinned commit
/// 2f5ac02e164336044388b7f1f6242cc0db575fec: configure.ac (`--with-cuda`, `--with-verbs`,
/// `--with-mlx5-dv`, `--enable-debug`), m4/sharp.m4 (`--with-sharp`), m4/ucx.m4
/// (`--with-ucx`), and autoconf's own `--prefix` and `LDFLAGS`
/// (<https://github.com/Mellanox/nccl-rdma-sharp-plugins/blob/2f5ac02e164336044388b7f1f6242cc0db575fec/configure.ac>).
const PLUGIN_OPTIONS: [&str; 8] = [
    "--prefix",
    "--with-cuda",
    "--with-verbs",
    "--with-mlx5-dv",
    "--enable-debug",
    "--with-sharp",
    "--with-ucx",
    "LDFLAGS",
];

/// The InfiniBand fixture with its `[network]` SHARP line replaced by `sharp`, and `edit`
/// applied; locked and generated. Returns the project directory.
fn generate(tag: &str, sharp: bool, edit: impl Fn(String) -> String) -> PathBuf {
    let spec = std::fs::read_to_string(root().join("fixtures/fabrics/infiniband.toml")).unwrap();
    assert!(spec.contains("sharp = true\n"));
    let spec = edit(spec.replace("sharp = true\n", if sharp { "sharp = true\n" } else { "" }));
    let dir = tempdir(&format!("sharp-{tag}"));
    std::fs::write(dir.join("gpustack.toml"), spec).unwrap();
    let out = run_in(&dir, &["lock"]);
    assert_eq!(out.code, 0, "lock: {}", out.stderr);
    let out = run_in(
        &dir,
        &[
            "gen",
            "docker",
            "apptainer",
            "packer",
            "k8s",
            "slurm",
            "--out",
            "out",
        ],
    );
    assert_eq!(out.code, 0, "gen all: {}", out.stderr);
    dir
}

fn read(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file)).unwrap()
}

/// The plugin's `./configure` arguments in a generated file (shell quotes removed; no
/// argument has a space).
fn plugin_configure(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text
        .lines()
        .map(|l| l.trim().trim_start_matches("&& "))
        .filter(|l| l.starts_with("./configure ") && l.contains("--with-sharp="))
        .collect();
    assert_eq!(lines.len(), 1, "one plugin configure line: {lines:?}");
    lines[0]
        .trim_end_matches(" \\")
        .replace('\'', "")
        .split(' ')
        .skip(1)
        .map(str::to_string)
        .collect()
}

#[test]
fn sharp_builds_the_plugin_against_pinned_sharp_libraries_on_every_target() {
    let dir = generate("on", true, |s| s);
    let lock = read_lock(&dir.join("gpustack.lock"));
    let hpcx = lock
        .package("hpcx")
        .expect("the lock has HPC-X's SHARP libraries");
    let plugin = lock
        .package("nccl-rdma-sharp-plugins")
        .expect("the lock has the plugin");
    // Ubuntu 22.04, CUDA 12, x86_64: the catalog pins only the doca_ofed build, and the
    // lock says what that means.
    assert_eq!(
        hpcx.get("variant"),
        Some("doca_ofed-ubuntu22.04-cuda12-x86_64")
    );
    assert_eq!(hpcx.get("sha256").map(str::len), Some(64));
    assert!(hpcx
        .source
        .contains("github.com/Azure/azhpc-images/blob/0132493d"));
    assert!(hpcx
        .because
        .iter()
        .any(|b| b.starts_with("UNVERIFIED: no `inbox`")));
    // No tarball checksum is published: the plugin is pinned by commit and fetched from
    // the repository by it, so it is not among the image's unverified downloads.
    assert_eq!(
        plugin.get("url"),
        Some("https://github.com/Mellanox/nccl-rdma-sharp-plugins.git")
    );
    assert_eq!(
        plugin.get("commit"),
        Some("2f5ac02e164336044388b7f1f6242cc0db575fec")
    );
    assert!(plugin
        .source
        .contains("/blob/2f5ac02e164336044388b7f1f6242cc0db575fec/"));

    let docker = read(&dir, "out/docker/Dockerfile");
    let vm = read(&dir, "out/packer/scripts/multinode.sh");
    let head: String = docker.lines().take_while(|l| l.starts_with('#')).collect();
    assert!(!head.contains("nccl-rdma-sharp-plugins"), "{head}");
    for text in [&docker, &vm] {
        assert!(text.contains(" fetch -q --depth 1 https://github.com/Mellanox/nccl-rdma-sharp-plugins.git 2f5ac02e164336044388b7f1f6242cc0db575fec"));
    }
    let args = plugin_configure(&docker);
    assert_eq!(args, plugin_configure(&vm), "Dockerfile and VM differ");
    assert_eq!(
        args,
        [
            "--prefix=/opt/fabric",
            "--with-cuda=/usr/local/cuda",
            "--with-sharp=/opt/fabric/sharp",
            "--without-ucx",
            "LDFLAGS=-Wl,-rpath-link,/opt/fabric/sharp/lib",
        ]
    );
    for a in &args {
        let name = a
            .split('=')
            .next()
            .unwrap()
            .replace("--without-", "--with-");
        assert!(
            PLUGIN_OPTIONS.contains(&name.as_str()),
            "{a} is not a plugin option"
        );
    }
    // HPC-X's tarball is checked before it is unpacked, its sharp directory copied where
    // --with-sharp points, before the plugin is built.
    for text in [&docker, &vm] {
        let check = format!("echo '{}  /tmp/src/hpcx-", hpcx.get("sha256").unwrap());
        let at = |needle: &str| text.find(needle).unwrap_or_else(|| panic!("{needle}"));
        assert!(at(&check) < at("cp -r sharp/. /opt/fabric/sharp/"));
        assert!(at("cp -r sharp/. /opt/fabric/sharp/") < at("--with-sharp="));
    }
    // The loader finds libnccl-net.so (/opt/fabric/lib) and SHARP's libraries.
    let ld = docker
        .lines()
        .find(|l| l.trim_start().starts_with("LD_LIBRARY_PATH="))
        .unwrap();
    assert!(
        ld.contains("/opt/fabric/lib:") && ld.contains("/opt/fabric/sharp/lib:"),
        "{ld}"
    );
    assert!(
        vm.contains("'LDSO'\n/opt/fabric/lib\n/opt/fabric/sharp/lib\nLDSO\n"),
        "{vm}"
    );
    assert!(!vm.contains("SHARP (in-network reductions) is not installed"));
    // What remains the site's: the Aggregation Manager.
    let env = read(&dir, "out/slurm/env/nccl.env");
    assert!(env.contains("export NCCL_COLLNET_ENABLE=1"));
    assert!(env.contains("NCCL SHARP plugin (nccl-rdma-sharp-plugins 2.7"));
    assert!(env.contains("SHARP Aggregation Manager"));
}

#[test]
fn without_sharp_neither_is_selected() {
    let dir = generate("off", false, |s| s);
    let lock = read_lock(&dir.join("gpustack.lock"));
    assert!(lock.package("hpcx").is_none() && lock.package("nccl-rdma-sharp-plugins").is_none());
    let docker = read(&dir, "out/docker/Dockerfile");
    for needle in ["/opt/fabric/sharp", "nccl-rdma-sharp-plugins", "hpcx"] {
        assert!(!docker.contains(needle), "{needle} in a non-SHARP image");
    }
    let vm = read(&dir, "out/packer/scripts/multinode.sh");
    assert!(vm.contains("SHARP (in-network reductions) is not installed"));
    assert!(!read(&dir, "out/slurm/env/nccl.env").contains("NCCL_COLLNET_ENABLE"));
}

/// Ubuntu 24.04 with CUDA 13 on x86_64: the `inbox` HPC-X build, which links the
/// distribution's rdma-core as the images do.
#[test]
fn the_inbox_build_where_one_is_pinned() {
    let dir = generate("inbox", true, |s| {
        s.replace("os = \"ubuntu22.04\"", "os = \"ubuntu24.04\"")
            .replace("cuda = \"12\"", "cuda = \"13\"")
    });
    let lock = read_lock(&dir.join("gpustack.lock"));
    let hpcx = lock.package("hpcx").expect("HPC-X");
    assert_eq!(hpcx.get("variant"), Some("inbox-ubuntu24.04-cuda13-x86_64"));
    assert!(!hpcx.because.iter().any(|b| b.contains("UNVERIFIED")));
}

/// GH200 on Ubuntu 22.04: no HPC-X build for aarch64 is pinned, so nothing is built and
/// the outputs say SHARP's plugin is the site's to provide.
#[test]
fn no_pinned_build_keeps_sharp_a_prerequisite() {
    let dir = generate("gh200", true, |s| {
        s.replace("gpus = [\"h100\"]", "gpus = [\"gh200\"]")
    });
    let lock = read_lock(&dir.join("gpustack.lock"));
    assert!(lock.package("hpcx").is_none() && lock.package("nccl-rdma-sharp-plugins").is_none());
    let env = read(&dir, "out/slurm/env/nccl.env");
    assert!(env.contains("export NCCL_COLLNET_ENABLE=1"));
    assert!(
        env.contains("the catalog pins no HPC-X build for this OS, CUDA and CPU"),
        "{env}"
    );
}

/// Rocky Linux 9 takes HPC-X's RHEL 9 build.
#[test]
fn rocky_linux_takes_the_rhel_build() {
    let dir = generate("rocky", true, |s| {
        s.replace("os = \"ubuntu22.04\"", "os = \"rockylinux9\"")
    });
    let lock = read_lock(&dir.join("gpustack.lock"));
    let hpcx = lock.package("hpcx").expect("HPC-X");
    assert_eq!(hpcx.get("variant"), Some("doca_ofed-redhat9-cuda12-x86_64"));
    let docker = read(&dir, "out/docker/Dockerfile");
    assert!(docker.contains("--with-sharp=/opt/fabric/sharp"));
}

/// The VM script's fetch of a source pinned by commit, run with real git against a local
/// repository standing in for GitHub: the pinned commit is checked out; a commit the
/// repository does not have stops the script (`set -e`). git is there wherever the
/// repository was cloned.
#[test]
fn a_commit_pinned_source_is_fetched_and_checked_by_git() {
    let dir = generate("git", true, |s| s);
    let vm = read(&dir, "out/packer/scripts/multinode.sh");
    let lines: Vec<&str> = vm
        .lines()
        .map(str::trim)
        .filter(|l| {
            l.starts_with("git -C /tmp/src/nccl-rdma-sharp-plugins")
                || l.starts_with("test \"$(git -C /tmp/src/nccl-rdma-sharp-plugins")
        })
        .collect();
    assert_eq!(lines.len(), 4, "{lines:?}");

    // The stand-in upstream: one commit; GitHub serves any commit by id, a local
    // repository only with uploadpack.allowAnySHA1InWant.
    let up = tempdir("sharp-upstream");
    let git = |args: &[&str], cwd: &Path| {
        let out = std::process::Command::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .current_dir(cwd)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    git(&["init", "-q"], &up);
    git(&["config", "uploadpack.allowAnySHA1InWant", "true"], &up);
    std::fs::write(
        up.join("configure.ac"),
        "AC_INIT([nccl-rdma-sharp-plugins], [2.7])\n",
    )
    .unwrap();
    git(&["add", "."], &up);
    git(&["commit", "-q", "-m", "upstream"], &up);
    let head = git(&["rev-parse", "HEAD"], &up);

    let work = tempdir("sharp-fetch");
    let run = |commit: &str| {
        let script = lines
            .iter()
            .map(|l| {
                l.replace("/tmp/src/", &format!("{}/", work.display()))
                    .replace(
                        "https://github.com/Mellanox/nccl-rdma-sharp-plugins.git",
                        &format!("'file://{}'", up.display()),
                    )
                    .replace("2f5ac02e164336044388b7f1f6242cc0db575fec", commit)
            })
            .collect::<Vec<_>>()
            .join("\n");
        let _ = std::fs::remove_dir_all(work.join("nccl-rdma-sharp-plugins"));
        std::fs::create_dir_all(work.join("nccl-rdma-sharp-plugins")).unwrap();
        std::process::Command::new("bash")
            .args(["-euo", "pipefail", "-c", &script])
            .output()
            .unwrap()
    };
    let ok = run(&head);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(work.join("nccl-rdma-sharp-plugins/configure.ac").is_file());
    let bad = run(&"0".repeat(40));
    assert!(
        !bad.status.success(),
        "an absent commit must stop the build"
    );
}
