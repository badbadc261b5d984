//! The pre-parsed stock catalog must be the TOML catalog, exactly.

use super::wire::FileWire;
use super::*;
use crate::core::version::Version;
use crate::core::Component;
use crate::error::{Diagnostic, Error};

/// The stock catalog is valid; any problem is reported with `file:line`.
#[test]
fn stock_catalog_is_valid() {
    if let Err(e) = Catalog::stock() {
        panic!("the stock catalog (catalog/*.toml) is invalid:\n{e}");
    }
}

/// The blob the build script wrote decodes to what parsing the embedded TOML gives, spans
/// included, file by file.
#[test]
fn blob_decodes_to_the_parsed_toml() {
    let files = codec::decode_files(STOCK_BLOB).expect("the stock blob decodes");
    assert_eq!(files.len(), STOCK.len());
    for (d, (p, text)) in files.iter().zip(STOCK) {
        assert_eq!(d.path, *p);
        let parsed: FileWire = toml::from_str(text).unwrap();
        assert_eq!(format!("{:?}", d.file), format!("{parsed:?}"), "{p}");
    }
    let again: Vec<(String, String, FileWire)> = STOCK
        .iter()
        .map(|(p, t)| (p.to_string(), t.to_string(), toml::from_str(t).unwrap()))
        .collect();
    assert_eq!(
        codec::encode_files(&again),
        STOCK_BLOB,
        "stock blob is stale"
    );
}

fn origins(c: &Catalog) -> Vec<&Origin> {
    let mut o: Vec<&Origin> = Vec::new();
    o.extend(c.branches.iter().map(|x| &x.origin));
    o.extend(c.cuda.iter().map(|x| &x.origin));
    o.extend(c.minor_compat.iter().map(|x| &x.origin));
    o.extend(c.forward_compat.iter().map(|x| &x.origin));
    o.extend(c.targets.iter().map(|x| &x.origin));
    o.extend(c.gpus.iter().map(|x| &x.origin));
    o.extend(c.os.iter().map(|x| &x.origin));
    o.extend(c.python.iter().map(|x| &x.origin));
    o.extend(c.cudnn.iter().map(|x| &x.origin));
    o.extend(c.nccl.iter().map(|x| &x.origin));
    o.extend(c.torch_releases.iter().map(|x| &x.origin));
    o.extend(c.torch.iter().flat_map(|x| [&x.origin, &x.release_origin]));
    o.extend(c.vllm.iter().map(|x| &x.origin));
    o.extend(c.deepspeed.iter().map(|x| &x.origin));
    o.extend(c.extras.iter().map(|x| &x.origin));
    o.extend(c.images.iter().map(|x| &x.origin));
    o.extend(c.packages.iter().map(|x| &x.origin));
    o.extend(c.instances.iter().map(|x| &x.origin));
    o.extend(c.clouds.iter().map(|x| &x.origin));
    o.extend(c.bandwidth.iter().map(|x| &x.origin));
    o
}

/// `Catalog::stock()` (pre-parsed) equals the catalog built from the TOML text: contents,
/// origins (file, lock name, line, source) and canonical text (hence digests).
#[test]
fn stock_equals_the_toml_catalog() {
    let fast = Catalog::stock().unwrap();
    let text: Vec<(String, String)> = STOCK
        .iter()
        .map(|(p, t)| (p.to_string(), t.to_string()))
        .collect();
    let slow = Catalog::from_layers(&[text]).unwrap();
    assert_eq!(format!("{fast:?}"), format!("{slow:?}"));
    let (a, b) = (origins(&fast), origins(&slow));
    assert_eq!(a.len(), b.len());
    assert!(a.len() > 100);
    for (a, b) in a.iter().zip(&b) {
        assert_eq!(
            (&a.file, &a.lock_name, a.line, &a.source),
            (&b.file, &b.lock_name, b.line, &b.source)
        );
        assert_eq!(a.canonical(), b.canonical(), "{}", a.location());
    }
    assert_eq!(digest_of(a.iter().copied()), digest_of(b.iter().copied()));
}

/// The snapshot the build script wrote (`snapshot.rs`) is the stock catalog validated
/// from its encoded files at run time, as an overlay's stock layer is: the same values,
/// origins and canonical texts, and the very same bytes when encoded again.
#[test]
fn snapshot_is_the_validated_stock_catalog() {
    assert!(
        !STOCK_MODEL.is_empty(),
        "the build script wrote no snapshot"
    );
    let snap = snapshot::decode(STOCK_MODEL, STOCK_BLOB).expect("the snapshot decodes");
    // An empty overlay layer takes the run-time path: the encoded files ingested and
    // validated.
    let run = Catalog::stock_with(&[Vec::new()]).unwrap();
    assert_eq!(format!("{snap:?}"), format!("{run:?}"));
    let (a, b) = (origins(&snap), origins(&run));
    assert_eq!(a.len(), b.len());
    for (a, b) in a.iter().zip(&b) {
        assert_eq!(
            (&a.file, &a.lock_name, a.line, &a.source),
            (&b.file, &b.lock_name, b.line, &b.source)
        );
        assert_eq!(a.canonical(), b.canonical(), "{}", a.location());
    }
    let again = snapshot::encode(&run, STOCK_BLOB).expect("every value is a stock one");
    assert!(
        again == STOCK_MODEL,
        "the snapshot differs from the catalog validated now"
    );
    // A truncated snapshot is refused, not misread.
    let cut: &'static [u8] = &STOCK_MODEL[..STOCK_MODEL.len() - 1];
    assert!(snapshot::decode(cut, STOCK_BLOB).is_none());
}

/// An overlay still goes through TOML, with `file:line:col` diagnostics, on top of the
/// pre-parsed stock layer.
#[test]
fn overlay_errors_still_have_locations() {
    let dir = std::env::temp_dir().join(format!("gpustack-codec-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("bad.toml"),
        "family = \"os\"\n\n[[os]]\nid = \"x\"\ncuda = \">=12.0\"\nsource = \"s\"\nbogus = 1\n",
    )
    .unwrap();
    let e = Catalog::load(&[dir.as_path()]).unwrap_err().to_string();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(e.contains("bad.toml:7"), "{e}");
    assert!(e.contains("bogus"), "{e}");
}

/// The stock extras: every extra component has entries, each in its component's layer,
/// newest first; cupy 14.2.0 is two entries told apart by distribution.
#[test]
fn stock_extras_load() {
    let c = Catalog::stock().unwrap();
    for x in Component::EXTRAS {
        let rel: Vec<&ExtraRelease> = c.extras_of(x).map(|(_, e)| e).collect();
        assert!(rel.len() >= 2, "{x}: {}", rel.len());
        assert!(rel.iter().all(|e| e.layer == x.layer()), "{x}");
        assert!(rel.windows(2).all(|w| w[0].version >= w[1].version), "{x}");
    }
    let cupy: Vec<&str> = c
        .extras_of(Component::Cupy)
        .filter(|(_, e)| e.version.as_str() == "14.2.0")
        .map(|(_, e)| e.pypi_name.as_str())
        .collect();
    assert_eq!(cupy, ["cupy-cuda12x", "cupy-cuda13x"]);
    let fa: Vec<String> = c
        .extras_of(Component::FlashAttn)
        .map(|(_, e)| e.label())
        .collect();
    assert_eq!(fa[0], "3.0.0 (flash_attn_3)");
    assert_eq!(fa[1], "2.8.3.post2");
    // Unknown facts stay absent: flash-attn 2.8.3.post2 has no CUDA majors, TensorRT-LLM no
    // torch requirement.
    let post2 = c.extras_of(Component::FlashAttn).nth(1).unwrap().1;
    assert!(post2.cuda_majors.is_none());
    assert!(post2.min_cc.is_some());
    assert!(c
        .extras_of(Component::TensorrtLlm)
        .all(|(_, e)| e.torch.is_none() && e.python.is_none() && e.files.is_empty()));
    assert_eq!(pep503("Flash_Attn..3"), "flash-attn-3");
}

fn stock_plus(overlay: &str) -> Result<Catalog, Error> {
    stock_with("site/extras.toml", overlay)
}

/// The stock catalog with one overlay file at `path`.
fn stock_with(path: &str, overlay: &str) -> Result<Catalog, Error> {
    let stock: Vec<(String, String)> = STOCK
        .iter()
        .map(|(p, t)| (p.to_string(), t.to_string()))
        .collect();
    Catalog::from_layers(&[stock, vec![(path.to_string(), overlay.to_string())]])
}

fn diagnostics(r: Result<Catalog, Error>) -> Vec<Diagnostic> {
    match r {
        Err(Error::Invalid(d)) => d,
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("the overlay loaded"),
    }
}

const GOOD: &str = "name = \"flash-attn\"\nversion = \"9.9.9\"\nlayer = \"framework\"\npypi_name = \"flash-attn\"\nindex = \"https://pypi.org/simple\"\nsource = \"test\"\n";

/// An overlay may add or replace extras (keyed by name, version and distribution).
#[test]
fn overlay_extras_add_and_replace() {
    let c = stock_plus(&format!(
        "family = \"extra\"\n\n[[extra]]\n{GOOD}min_cc = \"7.5\"\n"
    ))
    .unwrap();
    let (_, e) = c.extras_of(Component::FlashAttn).next().unwrap();
    assert_eq!(e.version.as_str(), "9.9.9");
    assert_eq!(e.origin.location(), "site/extras.toml:3");
    let replaced = GOOD
        .replace("9.9.9", "2.8.3")
        .replace("source = \"test\"", "source = \"site\"");
    let c = stock_plus(&format!("family = \"extra\"\n\n[[extra]]\n{replaced}")).unwrap();
    let e: Vec<&ExtraRelease> = c
        .extras_of(Component::FlashAttn)
        .map(|(_, e)| e)
        .filter(|e| e.version.as_str() == "2.8.3")
        .collect();
    assert_eq!(e.len(), 1);
    assert_eq!(e[0].origin.source, "site");
    assert!(
        e[0].torch.is_none(),
        "an overlay entry replaces, never merges"
    );
}

/// Every bad `[[extra]]` is reported, each with `file:line` and a hint.
#[test]
fn bad_extras_are_diagnosed_with_location_and_hint() {
    let cases: &[(&str, &str)] = &[
        ("name = \"flash_attn\"", "unknown extra `flash_attn`"),
        (
            "layer = \"training\"",
            "gpustack installs flash-attn in the `framework` layer",
        ),
        ("layer = \"top\"", "says `layer = \"top\"`"),
        ("cuda_majors = []", "`cuda_majors` must list CUDA majors"),
        ("min_cc = \"eight\"", "min_cc"),
        ("torch = \"=>2.4\"", "torch: invalid requirement"),
        ("python = \"\"", "python: invalid requirement"),
        ("version = \"2.x\"", "version: invalid version"),
        ("pypi_name = \"flash attn\"", "is not a PyPI project name"),
        ("index = \"http://pypi.org/simple\"", "is not an https URL"),
        ("pypi_variant = \"cuda128\"", "must look like `cu128`"),
        ("source = \" \"", "`source` is empty"),
        (
            "files = [{ filename = \"a.whl\", sha256 = \"00\" }]",
            "sha256 of `a.whl` must be 64 lowercase hex digits",
        ),
    ];
    for (line, want) in cases {
        let key = line.split(' ').next().unwrap();
        let mut entry: String = GOOD
            .lines()
            .filter(|l| !l.starts_with(&format!("{key} ")))
            .map(|l| format!("{l}\n"))
            .collect();
        entry.push_str(line);
        entry.push('\n');
        let text = format!("family = \"extra\"\n\n[[extra]]\n{entry}");
        let ds = diagnostics(stock_plus(&text));
        let d = ds
            .iter()
            .find(|d| d.message.contains(want))
            .unwrap_or_else(|| panic!("{line}: no `{want}` in {ds:#?}"));
        let loc = d.location.as_ref().expect("a location");
        assert_eq!(
            (loc.file.as_str(), loc.line),
            ("site/extras.toml", 3),
            "{line}"
        );
        assert!(!d.hints.is_empty(), "{line}: no hint");
    }
    // A misspelt extra gets a suggestion.
    let ds = diagnostics(stock_plus(&format!(
        "family = \"extra\"\n\n[[extra]]\n{}",
        GOOD.replace("flash-attn", "flash_attn")
    )));
    assert!(
        ds[0].hints[0].starts_with("did you mean `flash-attn`?"),
        "{:?}",
        ds[0].hints
    );
}

/// Duplicates inside one layer, entries in the wrong family, unknown fields.
#[test]
fn extra_file_structure_errors() {
    let dup = format!("family = \"extra\"\n\n[[extra]]\n{GOOD}\n[[extra]]\n{GOOD}");
    let ds = diagnostics(stock_plus(&dup));
    assert!(
        ds[0]
            .message
            .contains("duplicate extra entry `flash-attn 9.9.9`"),
        "{ds:?}"
    );
    assert_eq!(ds[0].location.as_ref().unwrap().line, 11);
    assert!(!ds[0].hints.is_empty());
    // Same name and version, another distribution: two entries (like cupy 14.2.0).
    let other = GOOD.replace("pypi_name = \"flash-attn\"", "pypi_name = \"flash_attn_3\"");
    assert!(stock_plus(&format!(
        "family = \"extra\"\n\n[[extra]]\n{GOOD}\n[[extra]]\n{other}"
    ))
    .is_ok());
    let ds = diagnostics(stock_plus(
        "family = \"extra\"\n\n[[release]]\nversion = \"1\"\nsource = \"s\"\n",
    ));
    assert!(
        ds[0]
            .message
            .contains("`[[release]]` entries do not belong in a `extra` file"),
        "{ds:?}"
    );
    assert_eq!(ds[0].location.as_ref().unwrap().line, 3);
    let ds = diagnostics(stock_plus(&format!(
        "family = \"vllm\"\n\n[[extra]]\n{GOOD}"
    )));
    assert!(
        ds[0]
            .message
            .contains("`[[extra]]` entries do not belong in a `vllm` file"),
        "{ds:?}"
    );
    let ds = diagnostics(stock_plus(&format!(
        "family = \"extra\"\n\n[[extra]]\n{GOOD}wheel = \"x\"\n"
    )));
    assert!(ds[0].message.contains("unknown field `wheel`"), "{ds:?}");
    assert_eq!(ds[0].location.as_ref().unwrap().line, 10);
    assert!(!ds[0].hints.is_empty());
}

/// Values of the generator-side families reach Dockerfiles, scripts and manifests, so the
/// loader refuses anything that could break out of a pin, a tag or a URL.
#[test]
fn deploy_families_refuse_unsafe_values() {
    let cases = [
        (
            "family = \"package\"\n[[package]]\nname = \"ucx\"\nversion = \"1.0; rm -rf /\"\nsource = \"s\"\n",
            "characters a pin cannot hold",
        ),
        (
            "family = \"package\"\n[[package]]\nname = \"ucx\"\nversion = \"1.0\"\nurl = \"https://x/$(id)\"\nsha256 = \"00\"\nsource = \"s\"\n",
            "must be https://",
        ),
        (
            "family = \"package\"\n[[package]]\nname = \"ucx\"\nversion = \"1.0\"\nurl = \"https://x/y\"\nsha256 = \"00\"\nsource = \"s\"\n",
            "64 lowercase hex",
        ),
        (
            "family = \"package\"\n[[package]]\nname = \"fm\"\nversion = \"1\"\nfollows_driver = true\nsource = \"s\"\n",
            "takes no `version`",
        ),
        (
            "family = \"package\"\n[[package]]\nname = \"p\"\nversion = \"1\"\nurl = \"https://x/p.git\"\ncommit = \"main\"\nsource = \"s\"\n",
            "commit `main` must be 40 lowercase hex",
        ),
        (
            "family = \"package\"\n[[package]]\nname = \"p\"\nversion = \"1\"\ncommit = \"2f5ac02e164336044388b7f1f6242cc0db575fec\"\nsource = \"s\"\n",
            "a `commit` pins a git repository",
        ),
        (
            "family = \"image\"\n[[image]]\ncuda = \"12.4.1\"\nos = \"ubuntu22.04\"\ntags = [\"12.4.1-runtime-ubuntu22.04\\nRUN x\"]\nstatus = \"supported\"\nsource = \"s\"\n",
            "must be `12.4.1-<flavour>-ubuntu22.04`",
        ),
        (
            "family = \"image\"\n[[image]]\ncuda = \"12.4.1\"\nos = \"ubuntu22.04\"\ntags = [\"12.4.1-runtime-ubuntu22.04\"]\nstatus = \"supported\"\nsource = \"s\"\n[[image.digest]]\ntag = \"12.4.1-runtime-ubuntu22.04\"\ndigest = \"sha256:abc\"\nobserved = \"2026-01-01\"\nsource = \"https://example.org\"\nkind = \"index\"\n",
            "64 lowercase hex",
        ),
        (
            "family = \"instance\"\n[[instance]]\ngpu = \"h100\"\ncloud = \"aws\"\ninstance_type = \"p5 \\\"x\"\nsource = \"s\"\n",
            "not a plain instance",
        ),
        // Host requirements of an NVSwitch generation (issue 30): unpinned, for a generation
        // some GPU has, packages for both managers, well-formed kernel modules.
        (
            "family = \"gpu\"\n[[gpu]]\nid = \"x1\"\nname = \"X\"\ncc = \"9.0\"\narch = \"hopper\"\ndatacenter = true\nnvswitch = false\nnvswitch_generation = 3\nsource = \"s\"\n",
            "`nvswitch_generation = 3` on a GPU with `nvswitch = false`",
        ),
        (
            "family = \"gpu\"\n[[gpu]]\nid = \"x1\"\nname = \"X\"\ncc = \"9.0\"\narch = \"hopper\"\ndatacenter = true\nnvswitch = true\nnvswitch_generation = 5\nsource = \"s\"\n",
            "NVSwitch generations are 1 to 4",
        ),
        (
            "family = \"package\"\n[[package]]\nname = \"nvlsm\"\nnvswitch_generation = 4\nversion = \"1.0\"\napt_packages = [\"nvlsm\"]\ndnf_packages = [\"nvlsm\"]\nsource = \"s\"\n",
            "is unpinned; it takes no `version`",
        ),
        (
            "family = \"package\"\n[[package]]\nname = \"nvlsm\"\nnvswitch_generation = 4\napt_packages = [\"nvlsm=2025.10.12-1\"]\ndnf_packages = [\"nvlsm\"]\nsource = \"s\"\n",
            "`nvlsm=2025.10.12-1` is not a bare package name",
        ),
        (
            "family = \"package\"\n[[package]]\nname = \"nvlsm\"\nnvswitch_generation = 4\napt_packages = [\"nvlsm\"]\ndnf_packages = [\"nvlsm-2025.10.12\"]\nsource = \"s\"\n",
            "`nvlsm-2025.10.12` is not a bare package name",
        ),
        (
            "family = \"package\"\n[[package]]\nname = \"nvlsm\"\nnvswitch_generation = 1\napt_packages = [\"nvlsm\"]\ndnf_packages = [\"nvlsm\"]\nsource = \"s\"\n",
            "no GPU in `gpus.toml` has `nvswitch_generation = 1`",
        ),
        (
            "family = \"package\"\n[[package]]\nname = \"nvlsm\"\nnvswitch_generation = 4\napt_packages = [\"nvlsm\"]\nsource = \"s\"\n",
            "for both apt and dnf",
        ),
        (
            "family = \"package\"\n[[package]]\nname = \"nvlsm\"\nnvswitch_generation = 4\nkernel_modules = [\"ib-umad; rm\"]\nsource = \"s\"\n",
            "kernel module `ib-umad; rm` must match [a-z0-9_]+",
        ),
        (
            "family = \"package\"\n[[package]]\nname = \"nvlsm\"\nversion = \"1.0\"\nkernel_modules = [\"ib_umad\"]\nsource = \"s\"\n",
            "needs `nvswitch_generation`",
        ),
        (
            "family = \"bandwidth\"\n[[bandwidth]]\ngpu = \"h100\"\nfabric = \"carrier-pigeon\"\ntest = \"t\"\nbusbw_gbps = \"1e9\"\nnodes = 1\ngpus_per_node = 8\nsource = \"s\"\n",
            "fabric `carrier-pigeon`",
        ),
    ];
    for (text, want) in cases {
        let e = stock_with("overlay/x.toml", text).unwrap_err().to_string();
        assert!(e.contains(want), "{text}\n---\n{e}");
        assert!(e.contains("overlay/x.toml:"), "{e}");
    }
}

#[test]
fn wheel_platform_tags_parse_and_compare_against_glibc() {
    let v = |s: &str| Version::parse(s).unwrap();
    let p = WheelPlatform::parse("manylinux_2_31_x86_64").unwrap();
    assert_eq!(
        (p.cpu.as_str(), p.glibc.clone()),
        ("x86_64", Some(v("2.31")))
    );
    assert!(!p.installs_on("x86_64", &v("2.28")));
    assert!(p.installs_on("x86_64", &v("2.35")));
    assert!(!p.installs_on("aarch64", &v("2.35")));
    let legacy = WheelPlatform::parse("manylinux2014_aarch64").unwrap();
    assert_eq!(legacy.glibc, Some(v("2.17")));
    assert_eq!(
        WheelPlatform::parse("manylinux1_x86_64").unwrap().glibc,
        Some(v("2.5"))
    );
    // A plain `linux_*` tag states no glibc: it installs on any glibc of its CPU.
    assert!(WheelPlatform::parse("linux_x86_64")
        .unwrap()
        .installs_on("x86_64", &v("2.17")));
    for bad in [
        "manylinux_2_x86_64",
        "manylinux_a_b_x86_64",
        "musllinux_1_2_x86_64",
    ] {
        assert!(WheelPlatform::parse(bad).is_none(), "{bad}");
    }
    // Windows and macOS tags parse (a cuDNN release with no Linux wheel records them) but
    // install on no Linux host.
    for other in ["win_amd64", "macosx_11_0_arm64"] {
        let p = WheelPlatform::parse(other).unwrap();
        assert!(!p.is_linux(), "{other}");
        assert!(!p.installs_on("x86_64", &v("2.39")) && !p.installs_on("aarch64", &v("2.39")));
    }
}

#[test]
fn new_tables_load_from_the_stock_catalog() {
    let c = Catalog::stock().unwrap();
    let hopper = c.generations.iter().find(|g| g.arch == "hopper").unwrap();
    assert_eq!(
        hopper.min_driver,
        Some(Version::parse("520.61.05").unwrap())
    );
    assert!(c
        .cudnn_gpu_support
        .iter()
        .any(|r| r.since == Version::parse("9.7.0").unwrap()));
    assert!(c
        .deepspeed_torch_minimum
        .iter()
        .any(|m| m.torch == (2, 4) && m.deepspeed == Version::parse("0.14.4").unwrap()));
    assert!(c
        .tested
        .iter()
        .all(|t| t.origin.source.starts_with("https://")));
    assert_eq!(
        c.os.iter().find(|o| o.id == "rockylinux8").unwrap().glibc,
        Some(Version::parse("2.28").unwrap())
    );
    let v = c
        .vllm
        .iter()
        .find(|r| r.version == Version::parse("0.19.1").unwrap())
        .unwrap();
    assert!(v
        .platforms
        .iter()
        .all(|p| p.glibc == Some(Version::parse("2.31").unwrap())));
    // An overlay may not put a generation table in the wrong family.
    let e = Catalog::from_layers(&[
        STOCK
            .iter()
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect(),
        vec![(
            "overlay/x.toml".to_string(),
            "family = \"os\"\n[[generation]]\narch = \"hopper\"\nsource = \"s\"\n".to_string(),
        )],
    ])
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("`[[generation]]` entries do not belong in a `os` file"),
        "{e}"
    );
}

/// A CUDA release known only from its redistrib manifest cannot carry a Table 3 minimum.
#[test]
fn redist_only_with_a_driver_min_is_rejected() {
    let site = "family = \"cuda\"\n\n[[release]]\nversion = \"12.8.2\"\nredist_only = true\ndriver_min = \"570.124.06\"\nsource = \"test\"\n";
    let err = Catalog::stock_with(&[vec![("site/cuda.toml".into(), site.into())]])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("CUDA 12.8.2 is `redist_only` and has a `driver_min`"),
        "{err}"
    );
    assert!(err.contains("site/cuda.toml:3"), "{err}");
}

/// Entries filed in another family's file are reported in the order of the family list
/// (not the file's), each at its first `[[table]]`.
#[test]
fn misplaced_entries_keep_their_order_and_places() {
    let overlay = "family = \"extra\"\n\n[[cloud]]\nid = \"c\"\nsource = \"s\"\n\n[[os]]\nid = \"x\"\ncuda = \"*\"\nsource = \"s\"\n\n[[release]]\nversion = \"1\"\nsource = \"s\"\n";
    let d = diagnostics(stock_plus(overlay));
    let got: Vec<String> = d
        .iter()
        .map(|d| {
            format!(
                "{}:{} {}",
                d.location.as_ref().map_or("", |l| l.file.as_str()),
                d.location.as_ref().map_or(0, |l| l.line),
                d.message
            )
        })
        .collect();
    assert_eq!(
        got[..got.len().min(3)],
        [
            "site/extras.toml:7 `[[os]]` entries do not belong in a `extra` file",
            "site/extras.toml:12 `[[release]]` entries do not belong in a `extra` file",
            "site/extras.toml:3 `[[cloud]]` entries do not belong in a `extra` file",
        ],
        "{got:#?}"
    );
}

/// A torch `[[source]]` entry's pins and host compiler rows are checked where they are
/// written: a malformed archive digest, an unknown OS, a CUDA minor listed twice, a row
/// without a source.
#[test]
fn torch_source_pins_and_compiler_rows_are_validated() {
    let entry = |extra: &str, rows: &str| {
        format!(
            "family = \"torch\"\n[[source]]\ntorch = \"2.10.0\"\nrepository = \"https://github.com/pytorch/pytorch\"\ntag = \"v2.10.0\"\ncudnn_min = \"8.5\"\nbuild_requires = []\nruntime_requires = []\nsource = \"test\"\n{extra}\n{rows}"
        )
    };
    let load = |text: String| {
        let stock: Vec<(String, String)> = STOCK
            .iter()
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect();
        Catalog::from_layers(&[stock, vec![("site/torch.toml".to_string(), text)]])
    };
    let good = load(entry(
        "gcc_min = \"9.4.0\"\narchive = { url = \"https://example.org/a.tar.gz\", sha256 = \"fa8ccbe87f83f48735505371c1c313b4aa6db400b0ae4f8a02844d1e150c695f\" }",
        "[[source.nvcc_host_gcc]]\ncuda = \"12.8\"\ngcc_max = 14\nsource = \"s\"\n[[source.os_gcc]]\nos = \"ubuntu22.04\"\ngcc = \"11.2.0\"\nsource = \"s\"\n",
    ))
    .unwrap();
    let src = good
        .torch_source(&Version::parse("2.10.0").unwrap())
        .unwrap();
    assert_eq!(
        src.compiler
            .nvcc_gcc_max(&Version::parse("12.8.1").unwrap()),
        Some(14)
    );
    assert_eq!(
        src.compiler.os_gcc("ubuntu22.04").map(ToString::to_string),
        Some("11.2.0".into())
    );
    // No `[source.cmake_archs]`: the arch-name rule does not check.
    assert!(src.cmake_archs.is_none());
    let stock = Catalog::stock().unwrap();
    let forms = stock
        .torch_source(&Version::parse("2.10.0").unwrap())
        .and_then(|s| s.cmake_archs.clone())
        .unwrap();
    for (t, ok) in [("10.0f", true), ("9.0a+PTX", true), ("8.0", true)] {
        let t = crate::core::arch::Target::parse(t).unwrap();
        assert_eq!(forms.accepts(&t), ok, "{t}");
    }
    let without_f = crate::catalog::CmakeArchs {
        suffixes: vec![crate::core::arch::Suffix::A],
        source: "s".into(),
    };
    assert!(!without_f.accepts(&"10.0f".parse().unwrap()));
    assert!(without_f.accepts(&"9.0a".parse().unwrap()));
    let cases = [
        (
            entry("archive = { url = \"https://example.org/a.tar.gz\", sha256 = \"00\" }", ""),
            "torch source `archive` needs",
        ),
        (
            entry("", "[[source.os_gcc]]\nos = \"plan9\"\ngcc = \"11\"\nsource = \"s\"\n"),
            "names `plan9`, which is not an `[[os]]` entry",
        ),
        (
            entry("", "[[source.nvcc_host_gcc]]\ncuda = \"12.8\"\ngcc_max = 14\nsource = \"s\"\n[[source.nvcc_host_gcc]]\ncuda = \"12.8\"\ngcc_max = 13\nsource = \"s\"\n"),
            "lists CUDA 12.8 twice",
        ),
        (
            entry("", "[[source.os_gcc]]\nos = \"ubuntu22.04\"\ngcc = \"11\"\nsource = \" \"\n"),
            "needs a one-line `source`",
        ),
        (
            entry("", "[source.cmake_archs]\nsuffixes = [\"a\", \"x\"]\nsource = \"s\"\n"),
            "lists `x`; the suffixes are `a` and `f`",
        ),
        (
            entry("", "[source.cmake_archs]\nsuffixes = [\"a\", \"a\"]\nsource = \"s\"\n"),
            "lists `a` twice",
        ),
        (
            entry("", "[source.cmake_archs]\nsuffixes = []\nsource = \"\"\n"),
            "`[source.cmake_archs]` of a torch source needs a one-line `source`",
        ),
    ];
    for (text, want) in cases {
        let d = diagnostics(load(text));
        assert!(d.iter().any(|d| d.message.contains(want)), "{want}: {d:?}");
    }
}

/// `[[os.release]]` and `[[os.image]]`: the stock entries give every OS an image per CPU
/// of its newest release; broken entries are refused at the OS's line.
#[test]
fn os_releases_and_images_are_validated() {
    let stock = Catalog::stock().unwrap();
    for os in &stock.os {
        for cpu in ["x86_64", "aarch64"] {
            let (r, i) = os
                .newest_image(cpu)
                .unwrap_or_else(|| panic!("{} {cpu}", os.id));
            assert_eq!(i.release, r.version);
            assert!(
                i.url
                    .contains(if cpu == "aarch64" { "arm64" } else { "amd64" })
                    || i.url.contains(cpu),
                "{}",
                i.url
            );
        }
    }
    let rocky = stock.os.iter().find(|o| o.id == "rockylinux9").unwrap();
    let (newest, _) = rocky.newest_image("x86_64").unwrap();
    assert_eq!(newest.version.to_string(), "9.8");
    let head = "family = \"os\"\n[[os]]\nid = \"ubuntu24.04\"\ncuda = \">=12.5.1, <14\"\nsource = \"test\"\n[[os.release]]\nversion = \"24.04\"\nreleased = \"2024-04\"\nsource = \"test\"\n";
    let image = |url: &str, sha: &str, release: &str, cpu: &str| {
        format!("{head}[[os.image]]\nrelease = \"{release}\"\ncpu = \"{cpu}\"\nurl = \"{url}\"\nsha256 = \"{sha}\"\nsource = \"https://example.com/x\"\n")
    };
    let hex = "a".repeat(64);
    let good = "https://cloud-images.ubuntu.com/releases/noble/release-20260705/x.img";
    let cases = [
        (
            image(good, "ABC", "24.04", "x86_64"),
            "sha256 must be 64 lowercase hex",
        ),
        (
            image(good, &hex, "26.04", "x86_64"),
            "has no `[[os.release]]`",
        ),
        (
            image(good, &hex, "24.04", "riscv64"),
            "is not `x86_64` or `aarch64`",
        ),
        (
            image(
                "https://cloud-images.ubuntu.com/releases/noble/release/x.img",
                &hex,
                "24.04",
                "x86_64",
            ),
            "moving image",
        ),
        (head.replace("2024-04", "April 2024"), "is not a date"),
    ];
    for (text, want) in cases {
        let e = stock_with("overlay/os.toml", &text)
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{text}\n---\n{e}");
        assert!(e.contains("overlay/os.toml:"), "{e}");
    }
}

/// `has_control` reads the bytes; it agrees with `char::is_control` on every scalar value,
/// alone and between other text.
#[test]
fn has_control_is_char_is_control() {
    for c in (0..=0x10_FFFFu32).filter_map(char::from_u32) {
        let alone = c.to_string();
        assert_eq!(validate::has_control(&alone), c.is_control(), "{c:?}");
        let within = format!("ä{c}—x");
        assert_eq!(
            validate::has_control(&within),
            c.is_control(),
            "{c:?} within text"
        );
    }
}
