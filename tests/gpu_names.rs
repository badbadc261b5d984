//! The names nvidia-smi prints are GPU names everywhere a user types one (issue 34, item 1):
//! `init --gpu`, the spec, and the "did you mean" hints, which stay within a GPU family.

mod common;

use common::{run_in, tempdir};

#[test]
fn init_and_the_spec_take_what_nvidia_smi_prints() {
    for (name, id) in [
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("H100 80GB HBM3", "h100"),
        ("H100-SXM5-80GB", "h100"),
        ("NVIDIA L40S", "l40s"),
        ("rtx 4090", "rtx-4090"),
        ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
    ] {
        let dir = tempdir("gpu-names");
        let init = run_in(&dir, &["init", "--gpu", name]);
        assert_eq!(init.code, 0, "init --gpu {name:?}: {}", init.stderr);
        let spec = std::fs::read_to_string(dir.join("gpustack.toml")).unwrap();
        assert!(
            spec.contains(&format!("gpus = [\"{id}\"]")),
            "{name:?}:\n{spec}"
        );
        // The same name in the spec locks to the catalog id.
        let spec = spec.replace(&format!("gpus = [\"{id}\"]"), &format!("gpus = [{name:?}]"));
        std::fs::write(dir.join("gpustack.toml"), spec).unwrap();
        let lock = run_in(&dir, &["lock", "-q"]);
        assert_eq!(lock.code, 0, "lock with {name:?}: {}", lock.stderr);
        let text = std::fs::read_to_string(dir.join("gpustack.lock")).unwrap();
        assert!(text.contains(&format!("\"{id}\"")), "{name:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn suggestions_stay_within_the_family() {
    let dir = tempdir("gpu-suggest");
    for (typo, hint) in [
        ("h100-sxm4", Some("did you mean `--gpu h100-sxm`?")),
        ("h1000", Some("did you mean `--gpu h100`?")),
        // No Turing GPU is close: not a 3090 (Ampere) or a 4090 (Ada).
        ("2090", None),
    ] {
        let out = run_in(&dir, &["init", "--gpu", typo]);
        assert_eq!(out.code, 2, "{typo}: {}", out.stderr);
        match hint {
            Some(h) => assert!(out.stderr.contains(h), "{typo}: {}", out.stderr),
            None => assert!(
                !out.stderr.contains("did you mean"),
                "{typo}: {}",
                out.stderr
            ),
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
