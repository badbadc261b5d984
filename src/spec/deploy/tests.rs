//! Unit tests of the deployment tables' validators.

use super::*;

#[test]
fn slurm_time_is_sbatch_s_grammar() {
    // sbatch(1), --time: "minutes", "minutes:seconds", "hours:minutes:seconds",
    // "days-hours", "days-hours:minutes" and "days-hours:minutes:seconds".
    for ok in [
        "30",
        "90",
        "30:15",
        "48:00:00",
        "1:30:00",
        "2-0",
        "2-12",
        "2-12:30",
        "2-12:30:15",
        "0:30",
        "UNLIMITED",
        "infinite",
    ] {
        assert!(is_slurm_time(ok), "{ok}");
    }
    for bad in [
        "0",
        "00:00",
        "0:0:0",
        "0-0",
        "0-00:00:00",
        "99:99:99",
        "24:60:00",
        "1:00:60",
        "1-24",
        "1-1:60",
        "1-1:1:60",
        "",
        "-1",
        "1-",
        ":30",
        "1::2",
        "1:2:3:4",
        "1-2-3",
        "forever",
        "1h",
        " 30",
        "1234567",
        "+5",
    ] {
        assert!(!is_slurm_time(bad), "{bad}");
    }
}

#[test]
fn validators() {
    assert!(is_registry("registry.example.com/ml"));
    assert!(is_registry("localhost:5000/team/ml"));
    for bad in [
        "",
        "Registry.io/x",
        "r.io/x:tag",
        "r.io/x\n",
        "r.io/$(id)",
        "r.io//x",
        "/x",
        "r.io/../x",
    ] {
        assert!(!is_registry(bad), "{bad:?}");
    }
    assert!(is_safe_path("/models/llama-3-70b"));
    for bad in [
        "models", "/a/../b", "/a b", "/a;rm", "/a$(x)", "/a\n", "/{{x}}", "/a'b",
    ] {
        assert!(!is_safe_path(bad), "{bad:?}");
    }
    assert!(is_model("meta-llama/Llama-3.1-8B"));
    assert!(!is_model("a/b/c"));
    assert!(is_slurm_time("48:00:00") && is_slurm_time("2-00:00:00") && !is_slurm_time("forever"));
    assert_eq!(
        parse_storage("nfs://nfs.example.com/datasets")
            .unwrap()
            .to_string(),
        "nfs://nfs.example.com/datasets"
    );
    assert!(parse_storage("lustre:/lustre/scratch/ckpt").is_ok());
    assert!(parse_storage("pvc:ckpt").is_ok());
    for bad in [
        "nfs://host",
        "lustre:rel",
        "s3://x/y",
        "pvc:Bad_Name",
        "hostpath:/x;y",
    ] {
        assert!(parse_storage(bad).is_err(), "{bad}");
    }
}
