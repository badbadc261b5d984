//! The pre-parsed stock catalog must be the TOML catalog, exactly.

use super::*;

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
            "family = \"image\"\n[[image]]\ncuda = \"12.4.1\"\nos = \"ubuntu22.04\"\ntags = [\"12.4.1-runtime-ubuntu22.04\\nRUN x\"]\nstatus = \"supported\"\nsource = \"s\"\n",
            "must be `12.4.1-<flavour>-ubuntu22.04`",
        ),
        (
            "family = \"image\"\n[[image]]\ncuda = \"12.4.1\"\nos = \"ubuntu22.04\"\ntags = [\"12.4.1-runtime-ubuntu22.04\"]\ndigests = [\"12.4.1-runtime-ubuntu22.04@sha256:abc\"]\nstatus = \"supported\"\nsource = \"s\"\n",
            "64 lowercase hex",
        ),
        (
            "family = \"instance\"\n[[instance]]\ngpu = \"h100\"\ncloud = \"aws\"\ninstance_type = \"p5 \\\"x\"\nsource = \"s\"\n",
            "not a plain instance",
        ),
        (
            "family = \"bandwidth\"\n[[bandwidth]]\ngpu = \"h100\"\nfabric = \"carrier-pigeon\"\ntest = \"t\"\nbusbw_gbps = \"1e9\"\nnodes = 1\ngpus_per_node = 8\nsource = \"s\"\n",
            "fabric `carrier-pigeon`",
        ),
    ];
    for (text, want) in cases {
        let e = Catalog::from_layers(&[
            STOCK
                .iter()
                .map(|(p, t)| (p.to_string(), t.to_string()))
                .collect(),
            vec![("overlay/x.toml".to_string(), text.to_string())],
        ])
        .unwrap_err()
        .to_string();
        assert!(e.contains(want), "{text}\n---\n{e}");
        assert!(e.contains("overlay/x.toml:"), "{e}");
    }
}
