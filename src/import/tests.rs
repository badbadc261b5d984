//! Unit tests of overlay writing, dates, PyPI helpers and in-place installability edits.

use super::installability::{owned_keys, patch_block};
use super::overlay::{quote, write_entry};
use super::pypi_entries::catalog_req;
use super::pypi_entries::cuda_of_label;
use super::pypi_import::suffix_of;
use super::*;

#[test]
fn an_incomplete_entry_is_written_commented_out() {
    let mut e = Entry::new(
        Family::Vllm,
        "release",
        "vllm 9.9.9".into(),
        Version::parse("9.9.9").unwrap(),
    );
    e.str("version", "9.9.9");
    e.str("torch", "2.99.0");
    e.not_derived("cuda", "not in the metadata", None, true);
    e.source = "https://pypi.org/simple/vllm/ (…), read 2026-11-25".into();
    assert_eq!(
        write_entry(&e),
        "# INCOMPLETE: needs `cuda` (not derivable from upstream metadata); fill in and uncomment\n\
         # [[release]]\n\
         # version = \"9.9.9\"\n\
         # torch = \"2.99.0\"\n\
         # source = \"https://pypi.org/simple/vllm/ (…), read 2026-11-25\"\n\
         # note = \"`cuda` not derived (not in the metadata)\"\n"
    );
    let imp = Import {
        entries: vec![e],
        command: "catalog import pypi".into(),
        origin: PYPI.into(),
        file_suffix: String::new(),
        ..Import::default()
    };
    assert_eq!(
        imp.summary(),
        "vllm.toml: vllm 9.9.9 (commented out)\n\
         \n\
         not derived from upstream metadata:\n  \
         vllm 9.9.9 `cuda`: not in the metadata (left out)\n\
         \n\
         incomplete (written commented out: fill in the fields and uncomment):\n  \
         vllm 9.9.9: needs cuda\n"
    );
}

#[test]
fn installability_lines_are_replaced_in_place() {
    let block = [
        "[[release]]",
        "version = \"2.9.0\"",
        "python = \">=3.10\"",
        "glibc_floor = [",
        "  { cpu = \"x86_64\", glibc = \"2.17\", by = \"old\", source = \"old\" },",
        "]",
        "triton = \"==3.4.0\"",
        "source = \"https://pypi.org/project/torch/2.9.0/\"",
        "note = \"kept\"",
    ];
    let mut e = Entry::new(
        Family::Torch,
        "release",
        "2.9.0".into(),
        Version::parse("2.9.0").unwrap(),
    );
    e.set(
        "glibc_floor",
        Value::Tables(vec![vec![
            ("cpu", "x86_64".into()),
            ("glibc", "2.28".into()),
            ("by", "new".into()),
            ("source", "https://pypi.org/simple/torch/".into()),
        ]]),
    );
    e.str("triton", "==3.5.0");
    e.str("python", "ignored: not an owned key");
    let out = patch_block(&block, owned_keys("torch.toml"), &e);
    assert_eq!(
        out,
        "[[release]]\n\
         version = \"2.9.0\"\n\
         python = \">=3.10\"\n\
         glibc_floor = [\n  { cpu = \"x86_64\", glibc = \"2.28\", by = \"new\", source = \"https://pypi.org/simple/torch/\" },\n]\n\
         triton = \"==3.5.0\"\n\
         source = \"https://pypi.org/project/torch/2.9.0/\"\n\
         note = \"kept\"\n"
    );
    // Facts that no longer hold are removed (a release no longer yanked).
    let cudnn = [
        "[[release]]",
        "version = \"9.1.0.70\"",
        "yanked = { observed = \"2026-01-01\", source = \"x\" }",
        "source = \"y\"",
    ];
    let none = Entry::new(
        Family::Cudnn,
        "release",
        "x".into(),
        Version::parse("1").unwrap(),
    );
    assert_eq!(
        patch_block(&cudnn, owned_keys("cudnn.toml"), &none),
        "[[release]]\nversion = \"9.1.0.70\"\nsource = \"y\"\n"
    );
}

#[test]
fn small_helpers() {
    assert_eq!(cuda_of_label("cu124").as_deref(), Some("12.4"));
    assert_eq!(cuda_of_label("cu130").as_deref(), Some("13.0"));
    assert_eq!(cuda_of_label("cpu"), None);
    assert_eq!(suffix_of("https://pypi.org/simple/"), "");
    assert_eq!(
        suffix_of("https://download.pytorch.org/whl/cu124"),
        "-cu124"
    );
    assert_eq!(catalog_req(">=2.0.0,<3").as_deref(), Some(">=2.0.0, <3"));
    // PEP 440 `~=` is a requirement gpustack reads (`>=2.0, 2`); `*` wildcards are
    // not kept from metadata.
    assert_eq!(catalog_req("~=2.0").as_deref(), Some("~=2.0"));
    assert_eq!(catalog_req("==2.*"), None);
    assert_eq!(quote("a\"b\\c\nd"), r#""a\"b\\c\nd""#);
    assert!(check_date("2026-11-25").is_ok() && check_date("25.11.2026").is_err());
    assert_eq!(today().len(), 10);
}
