//! `gpustack gen packer`: for every example spec, the templates are `packer fmt`-canonical
//! and pass `packer validate` (Packer 1.6.6, offline, without `plugins.pkr.hcl`, which that
//! Packer rejects), every provisioning script passes ShellCheck and exists where a
//! provisioner points, the driver, CUDA, cuDNN and NCCL pins in the scripts are the lock's,
//! the fabric stack and nccl-tests are the container images' (same URLs and sha256), and
//! the toggles are `dynamic` provisioners. Hostile values stay quoted; the validators are
//! shown to reject broken output (so a green run means they ran).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard};

use common::*;
use gpustack::lock::Lock;
use gpustack::spec::{Component, Layer};

/// The tests run one at a time: `common::generate` reuses one directory per spec and
/// target within this process, and Packer runs are meant to be sequential.
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn read(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// Runs Packer offline (no checkpoint call, a private plugin cache), output to a file
/// rather than a pipe (a Packer killed by SIGPIPE leaves plugin processes behind).
fn packer(tool: &Path, args: &[&str], dir: &Path) -> (i32, String) {
    let cache = dir.with_extension("packer-cache");
    std::fs::create_dir_all(&cache).unwrap();
    let log = dir.with_extension("packer-log");
    let out = std::fs::File::create(&log).unwrap();
    let status = Command::new(tool)
        .args(args)
        .current_dir(dir)
        .env("CHECKPOINT_DISABLE", "1")
        .env("PACKER_CACHE_DIR", &cache)
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .status()
        .unwrap_or_else(|e| panic!("run packer: {e}"));
    (
        status.code().unwrap_or(-1),
        std::fs::read_to_string(&log).unwrap_or_default(),
    )
}

/// The qemu source options newer than Packer 1.6.6's built-in qemu builder, which an
/// aarch64 source uses (packer-plugin-qemu: `efi_boot` and `efi_firmware_*` since 1.0.7,
/// `cpu_model` since 1.0.9; `plugins.pkr.hcl` asks for it).
const NEWER_THAN_1_6_6: &[&str] = &[
    "efi_boot ",
    "efi_firmware_code ",
    "efi_firmware_vars ",
    "cpu_model ",
];

/// A copy of a generated `packer/` directory without `plugins.pkr.hcl`, for Packer 1.6.6,
/// and without the qemu options that Packer predates (each must be set in the original).
fn copy_for_validate(out: &Path, tag: &str) -> PathBuf {
    let dir = tempdir(&format!("packer-validate-{tag}"));
    copy_dir(out, &dir);
    std::fs::remove_file(dir.join("plugins.pkr.hcl")).unwrap();
    let build = dir.join("build.pkr.hcl");
    let text = std::fs::read_to_string(&build).unwrap();
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| {
            !NEWER_THAN_1_6_6
                .iter()
                .any(|k| l.trim_start().starts_with(k))
        })
        .collect();
    std::fs::write(&build, kept.join("\n") + "\n").unwrap();
    dir
}

/// `packer validate` with the example variables. Offline: the qemu source's checksum is a
/// literal sha256 (a `file:` URL would be fetched even to validate).
fn validate(tool: &Path, dir: &Path) -> (i32, String) {
    packer(
        tool,
        &["validate", "-var-file=example.pkrvars.hcl", "."],
        dir,
    )
}

/// qemu images need no variable file: every variable of a qemu-only build has a default
/// (the dated cloud image and its sha256, the lock's kernel-module flavour), and
/// `packer validate` passes offline with none given.
#[test]
fn qemu_images_validate_offline_without_a_var_file() {
    let _serial = serial();
    let Some(tool) = validator("packer") else {
        return;
    };
    let mut failures = Vec::new();
    let mut seen = 0;
    for name in example_names() {
        let out = generate(&name, "packer");
        let build = read(&out, "build.pkr.hcl");
        let sources: Vec<&str> = build
            .lines()
            .filter(|l| l.trim_start().starts_with("source \""))
            .collect();
        if sources.len() != 1 || !sources[0].contains("\"qemu\"") {
            continue;
        }
        seen += 1;
        let vars = read(&out, "variables.pkr.hcl");
        for v in [
            "qemu_source_image_url",
            "qemu_source_image_checksum",
            "driver_kernel_modules",
        ] {
            let block = vars
                .split(&format!("variable \"{v}\""))
                .nth(1)
                .and_then(|b| b.split("\nvariable ").next())
                .unwrap_or_default();
            if !block.contains("default") {
                failures.push(format!("{name}: `{v}` has no default"));
            }
        }
        let url = vars
            .split("variable \"qemu_source_image_url\"")
            .nth(1)
            .unwrap_or_default();
        if url.contains("/release/") || url.contains(".latest.") || url.contains("/current/") {
            failures.push(format!("{name}: the qemu image is a moving release"));
        }
        let dir = copy_for_validate(&out, &format!("novars-{name}"));
        std::fs::remove_file(dir.join("example.pkrvars.hcl")).unwrap();
        let (code, text) = packer(&tool, &["validate", "."], &dir);
        if code != 0 {
            failures.push(format!(
                "{name}: packer validate without variables (exit {code}):\n{text}"
            ));
        }
    }
    assert!(seen >= 3, "only {seen} qemu-only examples");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

fn fmt_check(tool: &Path, dir: &Path) -> (i32, String) {
    packer(tool, &["fmt", "-check", "-diff", "."], dir)
}

fn scripts(out: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(out.join("scripts"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|f| f.ends_with(".sh"))
        .collect();
    v.sort();
    v
}

fn shellcheck(tool: &Path, out: &Path) -> (i32, String) {
    let files: Vec<String> = scripts(out)
        .iter()
        .map(|s| format!("scripts/{s}"))
        .collect();
    let mut args = vec!["-s", "bash"];
    args.extend(files.iter().map(String::as_str));
    run_tool(tool, &args, out)
}

/// Paths the provisioners run: `"${path.root}/scripts/x.sh"`.
fn referenced_scripts(build: &str) -> Vec<String> {
    build
        .split("\"${path.root}/")
        .skip(1)
        .map(|r| r.split('"').next().unwrap().to_string())
        .filter(|r| r.starts_with("scripts/"))
        .collect()
}

/// Every example spec: fmt-canonical, valid for Packer 1.6.6, ShellCheck-clean, every
/// script a provisioner names exists and is executable. Sequential: one Packer at a time.
#[test]
fn every_example_passes_fmt_validate_and_shellcheck() {
    let _serial = serial();
    let packer_tool = validator("packer");
    let sc = validator("shellcheck");
    let mut failures = Vec::new();
    for name in example_names() {
        let out = generate(&name, "packer");
        let build = read(&out, "build.pkr.hcl");
        let refs = referenced_scripts(&build);
        assert!(refs.contains(&"scripts/base.sh".to_string()), "{name}");
        for r in &refs {
            let p = out.join(r);
            if !p.is_file() {
                failures.push(format!("{name}: provisioner script {r} is missing"));
                continue;
            }
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let mode = std::fs::metadata(&p).unwrap().permissions().mode();
                if mode & 0o111 == 0 {
                    failures.push(format!("{name}: {r} is not executable"));
                }
            }
        }
        for s in scripts(&out) {
            if !refs.contains(&format!("scripts/{s}")) {
                failures.push(format!("{name}: scripts/{s} is run by no provisioner"));
            }
        }
        if let Some(tool) = &packer_tool {
            let (code, text) = fmt_check(tool, &out);
            if code != 0 {
                failures.push(format!("{name}: packer fmt -check (exit {code}):\n{text}"));
            }
            let dir = copy_for_validate(&out, &name);
            let (code, text) = validate(tool, &dir);
            if code != 0 {
                failures.push(format!("{name}: packer validate (exit {code}):\n{text}"));
            }
        }
        if let Some(tool) = &sc {
            let (code, text) = shellcheck(tool, &out);
            if code != 0 {
                failures.push(format!("{name}: shellcheck (exit {code}):\n{text}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The validators can fail: an unknown argument in a source, a provisioner pointing at a
/// missing script, a misaligned attribute, a broken script are each rejected.
#[test]
fn the_validators_reject_broken_output() {
    let _serial = serial();
    let out = generate("vm-image-train-infer", "packer");
    if let Some(tool) = validator("packer") {
        // An unknown argument in the amazon-ebs source.
        let dir = copy_for_validate(&out, "typo");
        let build = read(&dir, "build.pkr.hcl");
        let broken = build.replacen(
            "  instance_type   = var.aws_instance_type\n",
            "  instance_typo   = var.aws_instance_type\n",
            1,
        );
        assert_ne!(broken, build);
        std::fs::write(dir.join("build.pkr.hcl"), broken).unwrap();
        let (code, text) = validate(&tool, &dir);
        assert_ne!(code, 0, "{text}");
        assert!(text.contains("instance_typo"), "{text}");

        // A provisioner script that is not there.
        let dir = copy_for_validate(&out, "noscript");
        std::fs::remove_file(dir.join("scripts/performance.sh")).unwrap();
        let (code, text) = validate(&tool, &dir);
        assert_ne!(code, 0, "{text}");
        assert!(text.contains("performance.sh"), "{text}");

        // A value the variable's validation rejects.
        let dir = copy_for_validate(&out, "badvar");
        let vars = read(&dir, "example.pkrvars.hcl").replace(
            "driver_kernel_modules = \"open\"",
            "driver_kernel_modules = \"both\"",
        );
        std::fs::write(dir.join("example.pkrvars.hcl"), vars).unwrap();
        let (code, text) = validate(&tool, &dir);
        assert_ne!(code, 0, "{text}");
        assert!(text.contains("driver_kernel_modules"), "{text}");

        // Not canonical: `packer fmt -check` exits 3.
        let dir = copy_for_validate(&out, "fmt");
        let vars = read(&dir, "variables.pkr.hcl").replacen(
            "  type        = string\n",
            "  type = string\n",
            1,
        );
        std::fs::write(dir.join("variables.pkr.hcl"), vars).unwrap();
        let (code, text) = fmt_check(&tool, &dir);
        assert_eq!(code, 3, "{text}");
    }
    if let Some(tool) = validator("shellcheck") {
        let dir = tempdir("packer-sc-bad");
        std::fs::create_dir_all(dir.join("scripts")).unwrap();
        let base =
            read(&out, "scripts/base.sh").replace("\"${driver_pkgs[@]}\"", "${driver_pkgs[@]}");
        std::fs::write(dir.join("scripts/base.sh"), base).unwrap();
        let (code, text) = shellcheck(&tool, &dir);
        assert_ne!(code, 0, "{text}");
        assert!(text.contains("SC2068"), "{text}");
    }
}

/// The body of the heredoc that writes `file` in a script.
fn heredoc(script: &str, file: &str) -> String {
    script
        .split(&format!("cat > {file} <<'REQUIREMENTS'\n"))
        .nth(1)
        .unwrap_or_else(|| panic!("no heredoc for {file}"))
        .split("\nREQUIREMENTS\n")
        .next()
        .unwrap()
        .to_string()
}

/// Requirement lines without comments, continuations joined.
fn pins_of(text: &str) -> Vec<String> {
    text.replace(" \\\n", " ")
        .lines()
        .filter(|l| !l.trim_start().starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

/// The first `<prefix><version><suffix>` in `text` outside comments: the version between
/// them.
fn pinned(text: &str, prefix: &str, suffix: &str) -> Option<String> {
    let text: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .flat_map(|l| [l, "\n"])
        .collect();
    text.split(prefix)
        .skip(1)
        .find_map(|r| r.split_once(suffix).map(|(v, _)| v.to_string()))
        .filter(|v| !v.contains(char::is_whitespace))
}

/// The versions the scripts install are the lock's: driver (apt pins and the kernel module
/// check), CUDA toolkit, cuDNN, NCCL, Fabric Manager (exactly the driver), the Container
/// Toolkit; the fabric stack and nccl-tests are downloaded from the lock's URLs and checked
/// against its sha256; every Python component is pinned in its layer's script, with its
/// hash where the lock has one.
#[test]
fn scripts_install_the_locked_versions() {
    let _serial = serial();
    for name in example_names() {
        let lock = lock_of(&name);
        let out = generate(&name, "packer");
        let base = read(&out, "scripts/base.sh");
        let apt = !lock
            .package("cuda-image")
            .and_then(|p| p.get("os"))
            .is_some_and(|o| o.starts_with("rocky"));
        let drv = lock.hardware.driver.to_string();
        let branch = lock.hardware.driver.major();
        assert_eq!(
            pinned(&base, "readonly DRIVER_VERSION=", "\n").as_deref(),
            Some(drv.as_str()),
            "{name}"
        );
        assert!(base.contains("modinfo -F version nvidia"), "{name}");
        if apt {
            for p in ["cuda-drivers", "nvidia-open"] {
                assert_eq!(
                    pinned(&base, &format!("{p}-{branch}="), "-1'").as_deref(),
                    Some(drv.as_str()),
                    "{name}: {p}"
                );
            }
        } else {
            assert!(
                base.contains(&format!("nvidia-driver:{branch}-open")),
                "{name}"
            );
        }
        if let Some(c) = lock.component(Component::Cuda) {
            let dashed = format!("{}-{}", c.version.major(), c.version.minor());
            let (prefix, suffix) = if apt {
                (format!("cuda-toolkit-{dashed}="), "-1'")
            } else {
                (format!("cuda-toolkit-{dashed}-"), "-1\n")
            };
            assert_eq!(
                pinned(&base, &prefix, suffix).as_deref(),
                Some(c.version.as_str()),
                "{name}: cuda"
            );
        }
        if let Some(n) = lock.component(Component::Nccl) {
            let prefix = if apt { "libnccl2=" } else { "libnccl-" };
            assert_eq!(
                pinned(&base, prefix, "-1+cuda").as_deref(),
                Some(n.version.as_str()),
                "{name}: nccl"
            );
        }
        if let Some(d) = lock.component(Component::Cudnn) {
            assert!(
                base.contains(&format!("=={}", d.version))
                    || base.contains(&format!("{}-1", d.version)),
                "{name}: cudnn {}",
                d.version
            );
        }
        if let Some(fm) = lock.package("nvidia-fabricmanager") {
            assert_eq!(fm.version, drv, "{name}: Fabric Manager follows the driver");
            let pins = if apt { fm.list("apt") } else { fm.list("dnf") };
            for p in pins {
                assert!(base.contains(p.as_str()), "{name}: {p}");
            }
            assert!(base.contains("systemctl enable nvidia-fabricmanager.service"));
        } else {
            assert!(!base.contains("fabricmanager"), "{name}");
        }
        // The host requirements of the NVSwitch generation, by name, next to Fabric Manager,
        // with their kernel modules loaded at boot.
        let reqs: Vec<_> = lock
            .packages
            .iter()
            .filter(|p| p.get("nvswitch-generation").is_some())
            .collect();
        let fm_at = base.find("systemctl enable nvidia-fabricmanager.service");
        for r in &reqs {
            let names = if apt {
                r.list("apt-names")
            } else {
                r.list("dnf-names")
            };
            let line = format!("install_pkgs {}\n", names.join(" "));
            let at = base.find(&line);
            assert!(
                at.is_some() && at < fm_at,
                "{name}: `{line}` before Fabric Manager is enabled"
            );
            for m in r.list("kernel-modules") {
                let conf = base
                    .split("cat > /etc/modules-load.d/gpustack-nvswitch.conf <<'MODULES'\n")
                    .nth(1)
                    .and_then(|b| b.split("\nMODULES\n").next())
                    .unwrap_or_else(|| panic!("{name}: no modules-load.d file"));
                assert!(conf.lines().any(|l| l == m), "{name}: {m} not in {conf:?}");
            }
        }
        if reqs.is_empty() {
            assert!(
                !base.contains("nvlsm") && !base.contains("modules-load.d"),
                "{name}"
            );
        }
        if let Some(t) = lock.package("nvidia-container-toolkit") {
            assert!(
                base.contains(&format!("readonly TOOLKIT_VERSION={}\n", t.version)),
                "{name}"
            );
            if apt {
                for p in t.list("apt") {
                    assert!(base.contains(p.as_str()), "{name}: {p}");
                }
            }
            assert!(base.contains("nvidia-ctk runtime configure --runtime=docker --set-as-default"));
        }
        // Fabric stack and nccl-tests: the lock's URLs and hashes.
        let fabric: Vec<_> = lock
            .packages
            .iter()
            // Source builds: the base layer's images (the CUDA base, the Dockerfile
            // frontend) are pulled, not built.
            .filter(|p| {
                p.layer == Layer::Base
                    && p.name != "cuda-image"
                    && p.get("image").is_none()
                    // NVIDIA's OS packages (NCCL) are installed by base.sh, not built.
                    && p.list("apt").is_empty()
                    && p.list("dnf").is_empty()
            })
            .collect();
        if fabric.is_empty() {
            assert!(!out.join("scripts/multinode.sh").exists(), "{name}");
        } else {
            let mn = read(&out, "scripts/multinode.sh");
            for p in fabric {
                assert!(mn.contains(p.get("url").unwrap()), "{name}: {}", p.name);
                if let Some(h) = p.get("sha256") {
                    assert!(
                        mn.contains(&format!("'{h}  /tmp/src/")),
                        "{name}: {}",
                        p.name
                    );
                }
            }
        }
        if let (Some(t), true) = (
            lock.package("nccl-tests"),
            out.join("scripts/validate.sh").exists(),
        ) {
            let v = read(&out, "scripts/validate.sh");
            assert!(v.contains(t.get("url").unwrap()), "{name}");
            if let Some(h) = t.get("sha256") {
                assert!(v.contains(&format!("'{h}  /tmp/")), "{name}");
            }
        }
        // Python layers: the container images' requirement lines, and the lock's versions.
        let docker = generate(&name, "docker");
        for layer in ["framework", "inference", "training"] {
            let script = out.join(format!("scripts/{layer}.sh"));
            let req = docker.join(format!("requirements-{layer}.lock"));
            assert_eq!(script.exists(), req.exists(), "{name}: {layer}");
            if !req.exists() {
                continue;
            }
            let text = std::fs::read_to_string(&script).unwrap();
            let file = format!("/opt/gpustack/requirements-{layer}.lock");
            assert_eq!(
                pins_of(&heredoc(&text, &file)),
                pins_of(&std::fs::read_to_string(&req).unwrap()),
                "{name}: {layer}"
            );
            assert!(text.contains(&format!("-r {file}\n")), "{name}: {layer}");
        }
        for c in &lock.components {
            let script = match c.layer {
                Layer::Framework if c.name != Component::Python => "framework",
                Layer::Inference => "inference",
                Layer::Training => "training",
                _ => continue,
            };
            let path = format!("scripts/{script}.sh");
            if !out.join(&path).exists() {
                continue;
            }
            let text = read(&out, &path);
            if c.get("build") == Some("source") {
                // Built on the VM by build-torch.sh for the locked version (the script's
                // contract is tests/torch_source.rs), then installed from its wheel.
                assert!(
                    text.contains(&format!("export PYTORCH_BUILD_VERSION={}\n", c.version))
                        && text
                            .contains("uv pip install --no-deps /opt/gpustack/wheels/torch-*.whl"),
                    "{name}: {path} does not build and install torch {}",
                    c.version
                );
                continue;
            }
            let pypi = c.get("pypi-name").unwrap_or(c.name.name());
            let release = c.version.as_str().split('+').next().unwrap();
            assert!(
                text.contains(&format!("\n{pypi}=={}", c.version))
                    || text.contains(&format!("\n{pypi}=={release} ")),
                "{name}: {path} does not pin {pypi} {}",
                c.version
            );
        }
    }
}

/// Toggles are `dynamic "provisioner"` blocks switched by bool variables (an empty `only`
/// would mean "every build"); the image name embeds the lock's host layer hash and the
/// manifest records the lock hash.
/// The catalog's host requirements act (issue 30): an HGX B200 lock gets NVLSM, libibumad3,
/// infiniband-diags and `ib_umad` (fourth-generation NVSwitches, Fabric Manager user guide);
/// an H100 SXM lock gets Fabric Manager without them; a PCIe GPU gets neither. From R580
/// the Fabric Manager package carries no branch in its name.
#[test]
fn nvswitch_generations_select_their_host_requirements() {
    let b200 = lock_of("b200-serve");
    let nvlsm = b200.package("nvlsm").expect("NVLSM on HGX B200");
    assert_eq!(nvlsm.list("apt-names"), ["nvlsm"]);
    assert_eq!(nvlsm.list("dnf-names"), ["nvlsm"]);
    assert_eq!(nvlsm.get("from"), Some("cuda"));
    assert!(
        nvlsm.list("apt").is_empty(),
        "unpinned: no pins for the resolver"
    );
    let ib = b200
        .package("infiniband-diags")
        .expect("libibumad3 on HGX B200");
    assert_eq!(ib.list("apt-names"), ["libibumad3", "infiniband-diags"]);
    assert_eq!(ib.list("dnf-names"), ["libibumad", "infiniband-diags"]);
    assert_eq!(ib.list("kernel-modules"), ["ib_umad"]);
    assert_eq!(ib.get("from"), Some("os-release"));
    for p in [nvlsm, ib] {
        assert_eq!(p.layer, Layer::Host);
        assert!(
            p.source.contains("fabric-manager-user-guide"),
            "{}",
            p.source
        );
        assert!(
            p.because.iter().any(|b| b.starts_with("UNVERIFIED")),
            "{:?}",
            p.because
        );
    }
    let fm = b200.package("nvidia-fabricmanager").unwrap();
    assert_eq!(
        fm.list("apt"),
        [format!("nvidia-fabricmanager={}-1", b200.hardware.driver)]
    );

    let h100 = lock_of("h100-ib-train-serve");
    assert!(h100.hardware.gpus.iter().all(|g| g.id == "h100"));
    assert!(h100.package("nvidia-fabricmanager").is_some());
    assert!(h100.package("nvlsm").is_none() && h100.package("infiniband-diags").is_none());
    // Before R580 the branch is in the package name.
    let old = lock_of("slurm-apptainer-h100");
    let fm = old.package("nvidia-fabricmanager").unwrap();
    assert!(
        fm.list("dnf")
            .iter()
            .chain(fm.list("apt"))
            .all(|p| p.starts_with(&format!(
                "nvidia-fabricmanager-{}",
                old.hardware.driver.major()
            ))),
        "{fm:?}"
    );

    let pcie = lock_of("l40s-torch");
    assert!(pcie.hardware.gpus.iter().all(|g| !g.nvswitch));
    for n in ["nvidia-fabricmanager", "nvlsm", "infiniband-diags"] {
        assert!(pcie.package(n).is_none(), "{n}");
    }
}

#[test]
fn toggles_are_dynamic_and_the_name_is_content_addressed() {
    let _serial = serial();
    for name in example_names() {
        let lock = lock_of(&name);
        let out = generate(&name, "packer");
        let build = read(&out, "build.pkr.hcl");
        let vars = read(&out, "variables.pkr.hcl");
        for (toggle, script) in [
            ("enable_inference", "inference"),
            ("enable_training", "training"),
            ("enable_multinode", "multinode"),
        ] {
            let has_script = out.join(format!("scripts/{script}.sh")).exists();
            assert_eq!(
                vars.contains(&format!("variable \"{toggle}\"")),
                has_script,
                "{name}: {toggle}"
            );
            if has_script {
                let block = format!(
                    "dynamic \"provisioner\" {{\n    for_each = var.{toggle} ? [1] : []\n    labels   = [\"shell\"]\n    content {{\n      script           = \"${{path.root}}/scripts/{script}.sh\""
                );
                assert!(build.contains(&block), "{name}: {toggle}\n{build}");
            }
        }
        for line in build
            .lines()
            .filter(|l| l.trim_start().starts_with("only "))
        {
            assert!(
                line.contains("[\"") && !line.contains('?'),
                "{name}: `only` must name sources, not switch provisioners: {line}"
            );
        }
        let host = lock.layer(Layer::Host).unwrap();
        let tag = &host.hash["sha256:".len().."sha256:".len() + 12];
        assert!(build.contains(&format!("name_tag   = \"{tag}\"")), "{name}");
        assert!(build.contains(&format!("\"host={}\"", host.hash)), "{name}");
        assert!(
            build.contains(
                "image_name = \"${var.image_name}-${local.name_tag}-${local.layers_tag}\""
            ),
            "{name}"
        );
        let lock_hash = build
            .split("from gpustack.lock (")
            .nth(1)
            .unwrap()
            .split(')')
            .next()
            .unwrap();
        assert!(
            build.contains(&format!("lock             = \"{lock_hash}\"")),
            "{name}: the manifest records the lock hash"
        );
        for l in &lock.layers {
            if matches!(l.layer, Layer::Inference | Layer::Training)
                && out.join(format!("scripts/{}.sh", l.layer.name())).exists()
            {
                assert!(
                    build.contains(&format!(
                        "var.enable_{0} ? \"{0}={1}\" : \"\"",
                        l.layer.name(),
                        l.hash
                    )),
                    "{name}: {}",
                    l.layer.name()
                );
            }
        }
        // Clouds: [packer].clouds, or qemu alone.
        let clouds = lock.request.deploy.packer.as_ref().map_or_else(
            || vec!["qemu".to_string()],
            |p| p.clouds.iter().map(|c| c.name().to_string()).collect(),
        );
        for (cloud, source) in [
            ("aws", "source \"amazon-ebs\" \"gpu\""),
            ("gcp", "source \"googlecompute\" \"gpu\""),
            ("azure", "source \"azure-arm\" \"gpu\""),
            // One qemu source per CPU: `gpu`, or `gpu-<cpu>` with several.
            ("qemu", "source \"qemu\" \"gpu"),
        ] {
            assert_eq!(
                build.contains(source),
                clouds.iter().any(|c| c == cloud),
                "{name}: {cloud}"
            );
        }
        assert!(!build.contains("required_plugins"));
        assert!(read(&out, "plugins.pkr.hcl").contains("required_plugins"));
    }
}

/// Packer itself agrees: `packer inspect` counts one provisioner fewer per toggle switched
/// off, and the image name changes with the toggles (it names what is installed).
#[test]
fn packer_sees_the_toggles() {
    let _serial = serial();
    let Some(tool) = validator("packer") else {
        return;
    };
    for name in ["vm-image-train-infer", "h100-ib-train-serve"] {
        let out = generate(name, "packer");
        let dir = copy_for_validate(&out, &format!("inspect-{name}"));
        let vars = read(&dir, "variables.pkr.hcl");
        let toggles: Vec<&str> = ["enable_inference", "enable_training", "enable_multinode"]
            .into_iter()
            .filter(|t| vars.contains(&format!("variable \"{t}\"")))
            .collect();
        assert!(toggles.len() >= 2, "{name}");
        let inspect = |vars: &[String]| -> (usize, String) {
            let mut args = vec!["inspect".to_string()];
            for v in vars {
                args.push("-var".into());
                args.push(v.clone());
            }
            args.push(".".into());
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let (code, text) = packer(&tool, &args, &dir);
            assert_eq!(code, 0, "{text}");
            let count = text.lines().filter(|l| l.trim() == "shell").count();
            let image = text
                .lines()
                .find(|l| l.starts_with("local.image_name:"))
                .unwrap_or_else(|| panic!("{text}"))
                .to_string();
            (count, image)
        };
        let on: Vec<String> = toggles.iter().map(|t| format!("{t}=true")).collect();
        let (all, all_name) = inspect(&on);
        let mut names = vec![all_name];
        for (i, t) in toggles.iter().enumerate() {
            let mut vars = on.clone();
            vars[i] = format!("{t}=false");
            let (n, image) = inspect(&vars);
            assert_eq!(n + 1, all, "{name}: {t}=false");
            assert!(
                !names.contains(&image),
                "{name}: {t}=false keeps the name {image}"
            );
            names.push(image);
        }
    }
}

/// Instance types come from the lock's facts; where the lock has none, the variable has no
/// default (required) and says why; GCP's maintenance policy is the lock's.
#[test]
fn instance_types_are_the_lock_facts_or_required() {
    let _serial = serial();
    let lock = lock_of("vm-image-train-infer");
    let out = generate("vm-image-train-infer", "packer");
    let vars = read(&out, "variables.pkr.hcl");
    let block = |v: &str| -> String {
        vars.split(&format!("variable \"{v}\" {{\n"))
            .nth(1)
            .unwrap_or_else(|| panic!("{v}"))
            .split("\n}\n")
            .next()
            .unwrap()
            .to_string()
    };
    for (cloud, var) in [
        ("aws", "aws_instance_type"),
        ("gcp", "gcp_machine_type"),
        ("azure", "azure_vm_size"),
    ] {
        let b = block(var);
        match lock
            .fact("instance", cloud)
            .and_then(|f| f.get("instance-type"))
        {
            Some(t) => assert!(b.contains(&format!("default     = \"{t}\"")), "{b}"),
            None => {
                assert!(!b.contains("default"), "{b}");
                assert!(b.contains("Required: the lock has no"), "{b}");
                assert!(read(&out, "example.pkrvars.hcl").contains(&format!("{var} = ")));
            }
        }
    }
    let m = lock
        .fact("cloud", "gcp")
        .and_then(|f| f.get("on-host-maintenance"))
        .unwrap();
    assert!(block("gcp_on_host_maintenance").contains(&format!("default     = \"{m}\"")));
    let build = read(&out, "build.pkr.hcl");
    assert!(build.contains("volume_type           = \"gp3\""));
    assert!(build.contains("throughput            = var.aws_volume_throughput"));
    assert!(build.contains("disk_image       = true"));
}

/// Hostile but valid values stay data. The spec's free text (train command, registry,
/// storage) never reaches the Packer output; a catalog overlay's NCCL value full of shell
/// and template syntax reaches the scripts single-quoted; a hand-edited lock whose instance
/// types hold HCL syntax (the catalog would refuse them) reaches the HCL quoted, `${` and
/// `%{` escaped. Every output still passes fmt, validate and ShellCheck.
#[test]
fn hostile_values_stay_quoted() {
    let _serial = serial();
    let dir = tempdir("packer-hostile");
    let spec = std::fs::read_to_string(root().join("fixtures/specs/h100-ib-train-serve.toml"))
        .unwrap()
        .replace(
            "command = [\"python\", \"train.py\", \"--deepspeed\", \"ds_config.json\"]",
            "command = [\"python\", \"x; rm -rf /\", \"$(id)\", \"a\\\"b\", \"--flag='q'\", \"${file(\\\"/etc/passwd\\\")}\"]",
        )
        .replace(
            "registry = \"registry.example.com/ml\"",
            "registry = \"registry.example.com:5000/ml/team-a\"",
        )
        + "\n[packer]\nclouds = [\"aws\", \"gcp\", \"azure\", \"qemu\"]\n";
    assert!(spec.contains("rm -rf /"));
    std::fs::write(dir.join("gpustack.toml"), spec).unwrap();
    std::fs::create_dir_all(dir.join("site")).unwrap();
    std::fs::write(
        dir.join("site/env.toml"),
        "family = \"env\"\n\n[[env]]\nfabric = \"infiniband\"\nname = \"NCCL_DEBUG_SUBSYS\"\nvalue = \"a b;c && touch /pwned # %{if true}y%{endif} {x} <z>\"\nsource = \"test\"\n",
    )
    .unwrap();
    let out = run_in(&dir, &["lock", "--catalog", "site"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = run_in(&dir, &["gen", "packer"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let pk = dir.join("out/packer");
    let base = read(&pk, "scripts/base.sh");
    assert!(
        base.contains(
            "export NCCL_DEBUG_SUBSYS='a b;c && touch /pwned # %{if true}y%{endif} {x} <z>'\n"
        ),
        "{base}"
    );
    // Nothing of [train], [image] or [storage] is used by the VM images.
    for f in tree(&pk).keys() {
        let text = read(&pk, f.to_str().unwrap());
        for absent in [
            "x; rm -rf /",
            "--flag=",
            "/etc/passwd",
            "team-a",
            "nfs.example.com",
            "/lustre",
        ] {
            assert!(!text.contains(absent), "{}: {absent}", f.display());
        }
    }
    check_all_validators(&pk, "hostile-spec");

    // A lock edited by hand: instance types full of HCL.
    let lock = std::fs::read_to_string(dir.join("gpustack.lock")).unwrap();
    let hostile = r#"p5\"\n} source \"null\" \"x\" { communicator = \"none\" } # ${file(\"/etc/passwd\")} %{if true}y%{endif}"#;
    let edited = lock
        .replace(
            "instance-type = \"p5.48xlarge\"",
            &format!("instance-type = \"{hostile}\""),
        )
        .replace(
            "instance-type = \"Standard_ND96isr_H100_v5\"",
            "instance-type = \"Standard_${var.azure_location}\\\\\"",
        );
    assert_ne!(edited, lock);
    // `gen` refuses the edit (the lock's [integrity] seals, tests/lockfiles.rs); re-sealed,
    // as a forger would, its values must still stay quoted.
    let mut forged = Lock::parse("gpustack.lock", &edited).unwrap();
    forged.rehash();
    std::fs::write(dir.join("gpustack.lock"), forged.to_toml()).unwrap();
    let out = run_in(&dir, &["gen", "packer"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let vars = read(&pk, "variables.pkr.hcl");
    assert!(
        vars.contains(r#"default     = "p5\"\n} source \"null\" \"x\" { communicator = \"none\" } # $${file(\"/etc/passwd\")} %%{if true}y%%{endif}""#),
        "{vars}"
    );
    assert!(
        vars.contains(r#"default     = "Standard_$${var.azure_location}\\""#),
        "{vars}"
    );
    check_all_validators(&pk, "hostile-lock");
}

fn check_all_validators(pk: &Path, tag: &str) {
    if let Some(tool) = validator("packer") {
        let (code, text) = fmt_check(&tool, pk);
        assert_eq!(code, 0, "{tag}: {text}");
        let v = copy_for_validate(pk, tag);
        let (code, text) = validate(&tool, &v);
        assert_eq!(code, 0, "{tag}: {text}");
    }
    if let Some(tool) = validator("shellcheck") {
        let (code, text) = shellcheck(&tool, pk);
        assert_eq!(code, 0, "{tag}: {text}");
    }
}
