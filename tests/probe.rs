//! `gpustack::probe` on real nvidia-smi outputs (`fixtures/probe/`, sources in its
//! README): every sample maps to the expected catalog ids and driver, every malformed or
//! unknown input is rejected with its message, location and hints, and the `[hardware]`
//! table it prints is one the spec parser accepts.

mod common;

use std::path::{Path, PathBuf};

use common::{catalog, root};
use gpustack::probe::{self, Format, Match, Probe};
use gpustack::{Catalog, Error, Spec};

/// Reads a fixture; its path relative to the repository is the name used in messages.
fn fixture(rel: &str) -> (String, String) {
    let text = std::fs::read_to_string(root().join(rel)).expect(rel);
    (rel.to_string(), text)
}

fn probe_fixture(rel: &str) -> Probe {
    let (file, text) = fixture(rel);
    probe::parse(&file, &text, catalog()).unwrap_or_else(|e| panic!("{rel}:\n{e}"))
}

fn error_of(rel: &str) -> String {
    let (file, text) = fixture(rel);
    match probe::parse(&file, &text, catalog()) {
        Ok(p) => panic!("{rel} parsed: {p:?}"),
        Err(e) => e.to_string(),
    }
}

/// The non-README files of a fixture directory, as repository-relative paths.
fn files_in(dir: &str) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(root().join(dir))
        .expect(dir)
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && p.extension().is_none_or(|e| e != "md"))
        .map(|p| format!("{dir}/{}", p.file_name().unwrap().to_string_lossy()))
        .collect();
    out.sort();
    out
}

/// (id, nvidia-smi name, count, compute capability, MiB)
type Expected = (
    &'static str,
    &'static str,
    usize,
    Option<&'static str>,
    Option<u64>,
);

const GOOD: &[(&str, Format, Option<&str>, &[Expected])] = &[
    (
        "fixtures/probe/a100-mig.xml",
        Format::Xml,
        Some("535.54.03"),
        // The GPU's own 81920 MiB, not its MIG devices' 19968.
        &[("a100", "NVIDIA A100-SXM4-80GB", 1, None, Some(81920))],
    ),
    (
        "fixtures/probe/h100-full-query.csv",
        Format::Csv,
        Some("590.48.01"),
        &[("h100", "NVIDIA H100 80GB HBM3", 1, Some("9.0"), Some(81559))],
    ),
    (
        "fixtures/probe/h100-reordered-columns.csv",
        Format::Csv,
        Some("580.82.07"),
        &[("h100", "NVIDIA H100 80GB HBM3", 1, Some("9.0"), Some(81559))],
    ),
    (
        "fixtures/probe/h100x8-name-memory.csv",
        Format::Csv,
        None,
        &[("h100", "NVIDIA H100 80GB HBM3", 8, None, Some(81559))],
    ),
    (
        "fixtures/probe/h200-kmd-version.csv",
        Format::Csv,
        Some("610.43.02"),
        &[("h200", "NVIDIA H200", 1, Some("9.0"), Some(143771))],
    ),
    (
        "fixtures/probe/l40s-noheader-nounits.csv",
        Format::Csv,
        Some("595.80"),
        &[("l40s", "NVIDIA L40S", 1, Some("8.9"), Some(46068))],
    ),
    (
        "fixtures/probe/l40s.csv",
        Format::Csv,
        Some("595.80"),
        &[("l40s", "NVIDIA L40S", 1, Some("8.9"), Some(46068))],
    ),
    (
        "fixtures/probe/mixed-rtx5090-rtx4090.csv",
        Format::Csv,
        Some("580.82.09"),
        &[
            ("rtx-5090", "NVIDIA GeForce RTX 5090", 1, None, Some(32607)),
            ("rtx-4090", "NVIDIA GeForce RTX 4090", 1, None, Some(24564)),
        ],
    ),
    (
        "fixtures/probe/t4-noheader-no-compute-cap.csv",
        Format::Csv,
        Some("580.82.07"),
        &[("t4", "Tesla T4", 1, None, Some(15360))],
    ),
];

#[test]
fn every_sample_maps_to_the_expected_gpus_and_driver() {
    for (rel, format, driver, gpus) in GOOD {
        let p = probe_fixture(rel);
        assert_eq!(p.format, *format, "{rel}");
        assert_eq!(p.driver.as_ref().map(|d| d.as_str()), *driver, "{rel}");
        let got: Vec<Expected> = p
            .gpus
            .iter()
            .map(|g| {
                (
                    // Leak to compare against the static table; a test, a handful of strings.
                    &*Box::leak(g.id.clone().into_boxed_str()),
                    &*Box::leak(g.smi_name.clone().into_boxed_str()),
                    g.count,
                    g.cc.map(|c| &*Box::leak(c.to_string().into_boxed_str())),
                    g.memory_mib,
                )
            })
            .collect();
        assert_eq!(got, *gpus, "{rel}");
    }
}

#[test]
fn every_fixture_is_checked() {
    let listed: Vec<&str> = GOOD.iter().map(|g| g.0).collect();
    assert_eq!(files_in("fixtures/probe"), listed);
    let bad: Vec<&str> = BAD.iter().map(|b| b.0).collect();
    assert_eq!(files_in("fixtures/probe/bad"), bad);
}

#[test]
fn hardware_toml_is_a_spec_table_for_every_sample() {
    let catalog = catalog();
    for (rel, ..) in GOOD {
        let p = probe_fixture(rel);
        let hw = p.hardware_toml();
        assert_eq!(hw, p.hardware_toml(), "deterministic");
        assert!(hw.ends_with('\n') && !hw.ends_with("\n\n"), "{rel}: {hw}");
        let text = format!("[stack]\nname = \"probed\"\n\n{hw}\n[components]\ncuda = \"*\"\n");
        let spec = Spec::parse("gpustack.toml", &text, catalog)
            .unwrap_or_else(|e| panic!("{rel}: the probe's table does not parse:\n{e}\n{text}"));
        assert_eq!(spec.gpus, p.ids(), "{rel}");
        assert_eq!(spec.driver, p.driver, "{rel}");
        assert!(spec.archs.is_empty(), "{rel}");
    }
}

#[test]
fn hardware_toml_text() {
    assert_eq!(
        probe_fixture("fixtures/probe/h100x8-name-memory.csv").hardware_toml(),
        "# `gpustack probe` read 8 GPUs from nvidia-smi's CSV output:
#   8 x NVIDIA H100 80GB HBM3 (81559 MiB) -> h100
# the output has no driver version: add `driver = \"…\"` with the driver the nodes run, or leave it out and gpustack picks one
[hardware]
gpus = [\"h100\"]
"
    );
    assert_eq!(
        probe_fixture("fixtures/probe/mixed-rtx5090-rtx4090.csv").hardware_toml(),
        "# `gpustack probe` read 2 GPUs from nvidia-smi's CSV output:
#   1 x NVIDIA GeForce RTX 5090 (32607 MiB) -> rtx-5090
#   1 x NVIDIA GeForce RTX 4090 (24564 MiB) -> rtx-4090
[hardware]
gpus = [\"rtx-5090\", \"rtx-4090\"]
driver = \"580.82.09\"
"
    );
    assert_eq!(
        probe_fixture("fixtures/probe/h100-full-query.csv").hardware_toml(),
        "# `gpustack probe` read 1 GPU from nvidia-smi's CSV output:
#   1 x NVIDIA H100 80GB HBM3 (compute capability 9.0, 81559 MiB) -> h100
[hardware]
gpus = [\"h100\"]
driver = \"590.48.01\"
"
    );
    assert_eq!(
        probe_fixture("fixtures/probe/a100-mig.xml").hardware_toml(),
        "# `gpustack probe` read 1 GPU from nvidia-smi's XML output:
#   1 x NVIDIA A100-SXM4-80GB (81920 MiB) -> a100
[hardware]
gpus = [\"a100\"]
driver = \"535.54.03\"
"
    );
}

#[test]
fn a_probed_table_locks() {
    // The table is not only syntactically a spec's: the solver takes it as the request.
    let p = probe_fixture("fixtures/probe/l40s.csv");
    let text = format!(
        "[stack]\nname = \"probed\"\n{}[components]\ncuda = \"*\"\ntorch = \"*\"\n",
        p.hardware_toml()
    );
    let lock = gpustack::lock_spec(catalog(), "gpustack.toml", &text).unwrap();
    let driver = lock.component(gpustack::Component::Driver).unwrap();
    assert_eq!(driver.version.as_str(), "595.80");
}

#[test]
fn byte_order_mark_line_ends_and_blank_lines_do_not_matter() {
    let catalog = catalog();
    for rel in [
        "fixtures/probe/l40s.csv",
        "fixtures/probe/l40s-noheader-nounits.csv",
        "fixtures/probe/a100-mig.xml",
    ] {
        let (file, text) = fixture(rel);
        let want = probe::parse(&file, &text, catalog).unwrap();
        let variants = [
            format!("\u{feff}{text}"),
            text.replace('\n', "\r\n"),
            format!("\u{feff}\r\n\r\n{}\r\n", text.replace('\n', "\r\n")),
            format!("\n\n{text}\n\n"),
        ];
        for v in &variants {
            assert_eq!(
                probe::parse(&file, v, catalog).unwrap(),
                want,
                "{rel}: {v:?}"
            );
        }
    }
}

#[test]
fn locations_count_the_byte_order_mark_and_crlf_correctly() {
    let (file, text) = fixture("fixtures/probe/bad/bad-memory.csv");
    let text = format!("\u{feff}{}", text.replace('\n', "\r\n"));
    let err = probe::parse(&file, &text, catalog())
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(
            "error: invalid `memory.total` `[Unknown Error]`\n  --> fixtures/probe/bad/bad-memory.csv:2:27\n"
        ),
        "{err}"
    );
}

/// The full message of every malformed or unknown sample. `{l40s}` stands for where the
/// catalog defines `l40s`.
const BAD: &[(&str, &str)] = &[
    (
        "fixtures/probe/bad/bad-driver.csv",
        "error: invalid driver version `[N/A]`
  --> fixtures/probe/bad/bad-driver.csv:2:14
   |
 2 | NVIDIA L40S, [N/A], 8.9, 46068 MiB
   |              ^

hint: expected the version nvidia-smi prints, like `550.54.15` or `595.80`; run the probe on the node itself, where the driver is loaded",
    ),
    (
        "fixtures/probe/bad/bad-memory.csv",
        "error: invalid `memory.total` `[Unknown Error]`
  --> fixtures/probe/bad/bad-memory.csv:2:27
   |
 2 | NVIDIA L40S, 595.80, 8.9, [Unknown Error]
   |                           ^

hint: expected MiB as nvidia-smi prints them, like `81559 MiB` (or `81559` with `nounits`)",
    ),
    (
        "fixtures/probe/bad/compute-cap-mismatch.csv",
        "error: nvidia-smi reports compute capability 9.0 for `NVIDIA L40S`, but the catalog GPU `l40s` it maps to has 8.9
  --> fixtures/probe/bad/compute-cap-mismatch.csv:2:22
   |
 2 | NVIDIA L40S, 595.80, 9.0, 46068 MiB
   |                      ^

hint: the name is mapped to the wrong GPU: check the `smi_names` of `l40s` ({l40s}) and correct it in a catalog overlay",
    ),
    (
        "fixtures/probe/bad/compute-cap-not-supported.txt",
        "error: `fixtures/probe/bad/compute-cap-not-supported.txt` holds an nvidia-smi error, not GPUs: Field \"compute_cap\" is not a valid field to query.
  --> fixtures/probe/bad/compute-cap-not-supported.txt:1:1
   |
 1 | Field \"compute_cap\" is not a valid field to query.
   | ^

hint: this driver predates the field; run `nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv` instead",
    ),
    (
        "fixtures/probe/bad/header-only.csv",
        "error: `fixtures/probe/bad/header-only.csv` lists no GPU
  --> fixtures/probe/bad/header-only.csv

hint: run `nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv` on the node; if it lists no GPU, the driver does not see any",
    ),
    (
        "fixtures/probe/bad/mixed-drivers.csv",
        "error: GPUs report different drivers: `580.82.09` (line 2) and `570.133.07`
  --> fixtures/probe/bad/mixed-drivers.csv:3:26
   |
 3 | NVIDIA GeForce RTX 4090, 570.133.07, 24564 MiB
   |                          ^

hint: a node runs one kernel driver, so this looks like the output of several nodes in one file: probe each node on its own",
    ),
    (
        "fixtures/probe/bad/table-output.txt",
        "error: this is the table nvidia-smi prints by default, which probe does not read
  --> fixtures/probe/bad/table-output.txt:2:1
   |
 2 | +-----------------------------------------------------------------------------------------+
   | ^

hint: run `nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv` or `nvidia-smi -q -x`",
    ),
    (
        "fixtures/probe/bad/truncated.xml",
        "error: invalid XML: the file ends before `</nvidia_smi_log>`
  --> fixtures/probe/bad/truncated.xml:140:20
     |
 140 |                    
     |                    ^

hint: the file is cut or edited: save the whole output of `nvidia-smi -q -x` on the node",
    ),
    (
        "fixtures/probe/bad/unknown-p100.xml",
        "error: unknown GPU `Tesla P100-PCIE-16GB`: no catalog GPU goes by this name
  --> fixtures/probe/bad/unknown-p100.xml:9:3
   |
 9 | \t\t<product_name>Tesla P100-PCIE-16GB</product_name>
   |   ^

hint: {overlay}",
    ),
    (
        "fixtures/probe/bad/unknown-rtx-5070-ti.csv",
        "error: unknown GPU `NVIDIA GeForce RTX 5070 Ti`: no catalog GPU goes by this name
  --> fixtures/probe/bad/unknown-rtx-5070-ti.csv:2:1
   |
 2 | NVIDIA GeForce RTX 5070 Ti, 595.84, 12.0, 16303 MiB
   | ^

hint: close catalog GPUs: `rtx-5090` (NVIDIA GeForce RTX 5090)

hint: nvidia-smi reports compute capability 12.0: the stack can build for it without a catalog entry, with this line under `[hardware]` in place of `gpus`:

    archs = [\"sm_120\"]

hint: or, to name the GPU itself: {overlay}",
    ),
    (
        "fixtures/probe/bad/unknown-titan-v-rtx-5880.csv",
        "error: unknown GPU `NVIDIA TITAN V`: no catalog GPU goes by this name
  --> fixtures/probe/bad/unknown-titan-v-rtx-5880.csv:2:26
   |
 2 | 7.0, Default, 570.86.15, NVIDIA TITAN V, 0
   |                          ^

hint: nvidia-smi reports compute capability 7.0: the stack can build for it without a catalog entry, with this line under `[hardware]` in place of `gpus`:

    archs = [\"sm_70\"]

hint: or, to name the GPU itself: {overlay}

error: unknown GPU `NVIDIA RTX 5880 Ada Generation`: no catalog GPU goes by this name
  --> fixtures/probe/bad/unknown-titan-v-rtx-5880.csv:3:26
   |
 3 | 8.9, Default, 570.86.15, NVIDIA RTX 5880 Ada Generation, 1
   |                          ^

hint: close catalog GPUs: `rtx-6000-ada` (NVIDIA RTX 6000 Ada Generation)

hint: nvidia-smi reports compute capability 8.9: the stack can build for it without a catalog entry, with this line under `[hardware]` in place of `gpus`:

    archs = [\"sm_89\"]

hint: or, to name the GPU itself: {overlay}",
    ),
    (
        "fixtures/probe/bad/wrong-columns.csv",
        "error: this row has 3 values, the header has 4
  --> fixtures/probe/bad/wrong-columns.csv:2:1
   |
 2 | NVIDIA L40S, 595.80, 8.9
   | ^

hint: the file is cut or edited: save the whole output of one nvidia-smi run",
    ),
];

const OVERLAY_HINT: &str = "if it is a catalog GPU under another name, copy that `[[gpu]]` entry into a catalog overlay and add this name to its `smi_names`; otherwise add a `[[gpu]]` entry for it there (see the catalog chapter's overlays); `gpustack catalog show gpu` lists the GPUs";

#[test]
fn every_bad_sample_is_rejected_with_its_message_location_and_hints() {
    let catalog = catalog();
    let l40s = catalog.gpu("l40s").unwrap().origin.location();
    let mut failures = Vec::new();
    for (rel, want) in BAD {
        let want = want
            .replace("{l40s}", &l40s)
            .replace("{overlay}", OVERLAY_HINT);
        let got = error_of(rel);
        if got != want {
            failures.push(format!("{rel}:\n--- want\n{want}\n--- got\n{got}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn errors_are_input_errors() {
    let (file, text) = fixture("fixtures/probe/bad/unknown-titan-v-rtx-5880.csv");
    let err = probe::parse(&file, &text, catalog()).unwrap_err();
    assert_eq!(err.exit_code(), 2);
    let Error::Invalid(ds) = err else { panic!() };
    // Both unknown names, each once, in order.
    assert_eq!(ds.len(), 2);
    assert_eq!(ds[0].location.as_ref().unwrap().line, 2);
    assert_eq!(ds[1].location.as_ref().unwrap().line, 3);
}

fn parse_err(text: &str) -> String {
    probe::parse("in.txt", text, catalog())
        .map(|p| panic!("parsed: {p:?}"))
        .unwrap_err()
        .to_string()
}

#[test]
fn an_unknown_name_is_reported_once_however_many_gpus_have_it() {
    let err =
        parse_err("NVIDIA TITAN V, 570.86.15, 12288 MiB\nNVIDIA TITAN V, 570.86.15, 12288 MiB\n");
    assert_eq!(err.matches("error: ").count(), 1, "{err}");
}

#[test]
fn every_malformed_row_is_reported() {
    let err = parse_err(
        "name, driver_version, compute_cap, memory.total [MiB]\n\
         NVIDIA L4, 550.54, 8.9, 23034 MiB\n\
         NVIDIA L4, 550.54.15, 8.9.1, 23034 MiB\n\
         NVIDIA L4, 550.54.15, 8.9, 23034 GiB\n\
         , 550.54.15, 8.9, 23034 MiB\n",
    );
    // 550.54 is a valid driver version; the others are not.
    assert!(!err.contains("invalid driver version"), "{err}");
    assert!(
        err.contains("error: invalid compute capability `8.9.1`: expected `MAJOR.MINOR`, got `8.9.1`\n  --> in.txt:3:23"),
        "{err}"
    );
    assert!(
        err.contains("error: invalid `memory.total` `23034 GiB`\n  --> in.txt:4:28"),
        "{err}"
    );
    assert!(
        err.contains("error: the GPU name is empty\n  --> in.txt:5:1"),
        "{err}"
    );
    assert_eq!(err.matches("error: ").count(), 3, "{err}");
}

#[test]
fn csv_shapes() {
    let catalog = catalog();
    let ok = |text: &str| probe::parse("in.csv", text, catalog).unwrap();
    // `nounits` with a header: `memory.total [MiB]` with bare numbers.
    let p = ok(
        "name, driver_version, compute_cap, memory.total [MiB]\nNVIDIA L4, 550.54.15, 8.9, 23034\n",
    );
    assert_eq!(p.gpus[0].memory_mib, Some(23034));
    // `gpu_name` is the other spelling of `name`; other columns are ignored.
    let p = ok("index, gpu_name, uuid\n0, NVIDIA L4, GPU-0\n1, NVIDIA L4, GPU-1\n");
    assert_eq!(
        (p.ids(), p.gpus[0].count, p.driver.clone()),
        (vec!["l4"], 2, None)
    );
    // `[N/A]` memory (unified-memory systems) and compute capability are absent, not errors.
    let p = ok("NVIDIA L4, 550.54.15, [N/A], [N/A]\n");
    assert_eq!((p.gpus[0].cc, p.gpus[0].memory_mib), (None, None));
    // Both `driver_version` and `kmd_version`: the former is read.
    let p = ok("name, driver_version, kmd_version\nNVIDIA L4, 550.54.15, 550.54.15\n");
    assert_eq!(p.driver.unwrap().as_str(), "550.54.15");
    // GPUs of one model with different memory are listed apart.
    let p = ok("NVIDIA L4, 550.54.15, 8.9, 23034 MiB\nNVIDIA L4, 550.54.15, 8.9, 22000 MiB\nNVIDIA L4, 550.54.15, 8.9, 23034 MiB\n");
    let groups: Vec<(usize, Option<u64>)> =
        p.gpus.iter().map(|g| (g.count, g.memory_mib)).collect();
    assert_eq!(groups, [(2, Some(23034)), (1, Some(22000))]);
    assert_eq!(p.ids(), ["l4"]);
    assert_eq!(p.gpu_count(), 3);
}

#[test]
fn csv_shape_errors() {
    let err = parse_err("0, GPU-aaa, NVIDIA A100-SXM4-80GB, 580.159.04, 81920 MiB\n");
    assert!(
        err.starts_with("error: expected 4 values per line (name, driver_version, compute_cap, memory.total) or 3 (without compute_cap), found 5\n  --> in.txt:1:1"),
        "{err}"
    );
    assert!(err.contains("hint: without a header line, probe reads only the output of `nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv,noheader`"), "{err}");

    let err = parse_err("NVIDIA L4, 550.54.15, 8.9, 23034 MiB\nNVIDIA L4, 550.54.15, 23034 MiB\n");
    assert!(
        err.starts_with("error: this row has 3 values, the first row has 4\n  --> in.txt:2:1"),
        "{err}"
    );

    let err = parse_err("index, uuid\n0, GPU-0\n");
    assert!(
        err.starts_with("error: the CSV header has no `name` column\n  --> in.txt:1:1"),
        "{err}"
    );

    let err = parse_err("");
    assert!(
        err.starts_with("error: `in.txt` is empty\n  --> in.txt\n"),
        "{err}"
    );
    let err = parse_err("\u{feff}\n  \n");
    assert!(err.starts_with("error: `in.txt` is empty"), "{err}");

    let err = parse_err("No devices were found\n");
    assert!(
        err.starts_with(
            "error: `in.txt` holds an nvidia-smi error, not GPUs: No devices were found\n"
        ),
        "{err}"
    );

    let err = parse_err("\n==============NVSMI LOG==============\n\nTimestamp : x\n");
    assert!(
        err.starts_with("error: this is the text of `nvidia-smi -q`, which probe does not read\n  --> in.txt:2:1"),
        "{err}"
    );
    assert!(
        err.contains("hint: run `nvidia-smi -q -x` (XML) or `nvidia-smi --query-gpu="),
        "{err}"
    );
}

#[test]
fn xml_shapes_and_errors() {
    let catalog = catalog();
    // R610's `kmd_version` is read when present.
    let p = probe::parse(
        "q.xml",
        "<nvidia_smi_log><kmd_version>610.43.02</kmd_version><gpu><product_name>NVIDIA H200</product_name></gpu><gpu><product_name>NVIDIA H200</product_name></gpu></nvidia_smi_log>",
        catalog,
    )
    .unwrap();
    assert_eq!(p.driver.as_ref().unwrap().as_str(), "610.43.02");
    assert_eq!(
        (p.ids(), p.gpu_count(), p.gpus[0].memory_mib),
        (vec!["h200"], 2, None)
    );

    let err = parse_err("<?xml version=\"1.0\" ?>\n<nvidia_smi_log>\n<gpu><product_name>x</product_name></gpux>\n</nvidia_smi_log>\n");
    assert!(
        err.starts_with("error: invalid XML: expected 'gpu' tag, not 'gpux'\n  --> in.txt:3:"),
        "{err}"
    );

    let err = parse_err("<?xml version=\"1.0\" ?>\n<gpus/>\n");
    assert!(
        err.starts_with(
            "error: the XML's root element is `<gpus>`, not `<nvidia_smi_log>`\n  --> in.txt:2:1"
        ),
        "{err}"
    );

    let err =
        parse_err("<nvidia_smi_log><driver_version>535.54.03</driver_version></nvidia_smi_log>");
    assert!(err.starts_with("error: `in.txt` lists no GPU"), "{err}");

    let err = parse_err("<nvidia_smi_log>\n<driver_version>535.54.03</driver_version>\n<gpu id=\"0\">\n<uuid>GPU-0</uuid>\n</gpu>\n</nvidia_smi_log>");
    assert!(
        err.starts_with("error: this `<gpu>` has no `<product_name>`\n  --> in.txt:3:1"),
        "{err}"
    );

    let err = parse_err("<nvidia_smi_log><driver_version>N/A</driver_version><gpu><product_name>NVIDIA L4</product_name><fb_memory_usage><total>lots</total></fb_memory_usage></gpu></nvidia_smi_log>");
    assert!(err.contains("error: invalid driver version `N/A`"), "{err}");
    assert!(
        err.contains("error: invalid `memory.total` `lots`"),
        "{err}"
    );
}

#[test]
fn names_map_exactly_then_normalized() {
    let catalog = catalog();
    let id = |m: Match<'_>| match m {
        Match::Exact(g) => format!("exact {}", g.id),
        Match::Normalized(g) => format!("normalized {}", g.id),
        Match::Ambiguous(gs) => format!("ambiguous {}", gs.len()),
        Match::Unknown => "unknown".to_string(),
    };
    assert_eq!(id(probe::match_name(catalog, "Tesla T4")), "exact t4");
    // Older drivers print GeForce names without the `NVIDIA ` prefix.
    assert_eq!(
        id(probe::match_name(catalog, "GeForce RTX 3090")),
        "normalized rtx-3090"
    );
    assert_eq!(
        id(probe::match_name(catalog, "nvidia  geforce rtx 3090 ")),
        "normalized rtx-3090"
    );
    // Then the catalog's GPU name table, the names the spec accepts: the marketing name,
    // and names without memory tokens; a near miss stays apart (the 40 GB A100 is not the
    // 80 GB one, and `A100-SXM4` alone names neither).
    assert_eq!(
        id(probe::match_name(catalog, "NVIDIA H100 SXM5 80GB")),
        "normalized h100"
    );
    assert_eq!(
        id(probe::match_name(catalog, "NVIDIA A100-SXM4-40GB")),
        "normalized a100-40gb"
    );
    assert_eq!(
        id(probe::match_name(catalog, "NVIDIA A100-SXM4")),
        "unknown"
    );
    assert_eq!(id(probe::match_name(catalog, "NVIDIA H100 NVL")), "unknown");

    let p = probe::parse(
        "old.csv",
        "GeForce RTX 3090, 470.256.02, 24268 MiB\n",
        catalog,
    )
    .unwrap();
    assert_eq!(p.ids(), ["rtx-3090"]);
    assert_eq!(p.gpus[0].smi_name, "GeForce RTX 3090");
}

/// A catalog overlay with one file, in a fresh directory.
fn overlay(tag: &str, toml: &str) -> (PathBuf, Catalog) {
    let dir = std::env::temp_dir().join(format!("gpustack-probe-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("gpus.toml"), toml).unwrap();
    let catalog = Catalog::load(&[Path::new(&dir)]).unwrap_or_else(|e| panic!("{e}"));
    (dir, catalog)
}

#[test]
fn an_overlay_entry_makes_an_unknown_gpu_known() {
    // What the unknown-GPU hint tells the user to do. The compute capability is the one
    // the sample itself reports.
    let (dir, catalog) = overlay(
        "known",
        r#"family = "gpu"

[[gpu]]
id = "rtx-5070-ti"
name = "NVIDIA GeForce RTX 5070 Ti"
cc = "12.0"
arch = "blackwell"
datacenter = false
smi_names = ["NVIDIA GeForce RTX 5070 Ti"]
source = "test overlay: fixtures/probe/bad/unknown-rtx-5070-ti.csv"
"#,
    );
    let (file, text) = fixture("fixtures/probe/bad/unknown-rtx-5070-ti.csv");
    let p = probe::parse(&file, &text, &catalog).unwrap();
    let _ = std::fs::remove_dir_all(dir);
    assert_eq!(p.ids(), ["rtx-5070-ti"]);
    assert_eq!(p.driver.unwrap().as_str(), "595.84");
    assert_eq!(p.gpus[0].cc.unwrap().to_string(), "12.0");
}

#[test]
fn a_name_in_two_catalog_entries_is_an_error() {
    let (dir, catalog) = overlay(
        "ambiguous",
        r#"family = "gpu"

[[gpu]]
id = "l40s-site"
name = "NVIDIA L40S (site)"
cc = "8.9"
arch = "ada-lovelace"
datacenter = true
smi_names = ["NVIDIA L40S"]
source = "test overlay"
"#,
    );
    let (file, text) = fixture("fixtures/probe/l40s.csv");
    let err = probe::parse(&file, &text, &catalog)
        .unwrap_err()
        .to_string();
    let _ = std::fs::remove_dir_all(&dir);
    let l40s = catalog.gpu("l40s").unwrap().origin.location();
    let site = catalog.gpu("l40s-site").unwrap().origin.location();
    assert!(
        err.starts_with(&format!(
            "error: GPU name `NVIDIA L40S` is listed in the `smi_names` of several catalog GPUs: `l40s` ({l40s}), `l40s-site` ({site})\n  --> fixtures/probe/l40s.csv:2:1"
        )),
        "{err}"
    );
    assert!(err.ends_with("hint: a name printed by nvidia-smi must identify one GPU: remove it from all but one entry"), "{err}");
}

#[test]
fn json() {
    let p = probe_fixture("fixtures/probe/mixed-rtx5090-rtx4090.csv");
    assert_eq!(
        p.to_json().to_string(),
        r#"{"driver":"580.82.09","format":"csv","gpus":[{"compute_capability":null,"count":1,"id":"rtx-5090","memory_mib":32607,"smi_name":"NVIDIA GeForce RTX 5090"},{"compute_capability":null,"count":1,"id":"rtx-4090","memory_mib":24564,"smi_name":"NVIDIA GeForce RTX 4090"}]}"#
    );
    let p = probe_fixture("fixtures/probe/h100x8-name-memory.csv");
    assert_eq!(p.to_json()["driver"], serde_json::Value::Null);
    assert_eq!(p.to_json()["gpus"][0]["count"], 8);
    let p = probe_fixture("fixtures/probe/l40s.csv");
    assert_eq!(p.to_json()["gpus"][0]["compute_capability"], "8.9");
}

#[test]
fn sniff_tells_nvidia_smi_output_from_the_probe_table() {
    for (rel, format, ..) in GOOD {
        let (_, text) = fixture(rel);
        assert_eq!(probe::sniff(&text), Some(*format), "{rel}");
        // The table probe prints is not nvidia-smi output.
        assert_eq!(
            probe::sniff(&probe_fixture(rel).hardware_toml()),
            None,
            "{rel}"
        );
    }
    assert_eq!(probe::sniff("[hardware]\ngpus = [\"a\", \"b\"]\n"), None);
    assert_eq!(probe::sniff(""), None);
}

#[test]
fn display_lists_groups_and_driver() {
    assert_eq!(
        probe_fixture("fixtures/probe/h100x8-name-memory.csv").to_string(),
        "8 x NVIDIA H100 80GB HBM3 -> h100\ndriver unknown"
    );
    assert_eq!(
        probe_fixture("fixtures/probe/mixed-rtx5090-rtx4090.csv").to_string(),
        "1 x NVIDIA GeForce RTX 5090 -> rtx-5090\n1 x NVIDIA GeForce RTX 4090 -> rtx-4090\ndriver 580.82.09"
    );
}

#[test]
fn the_book_chapter_shows_real_output() {
    let chapter = std::fs::read_to_string(root().join("book/src/probe.md")).unwrap();
    for rel in [
        "fixtures/probe/l40s.csv",
        "fixtures/probe/mixed-rtx5090-rtx4090.csv",
    ] {
        let toml = probe_fixture(rel).hardware_toml();
        assert!(
            chapter.contains(&toml),
            "book/src/probe.md lacks the output of {rel}:\n{toml}"
        );
    }
    let (_, l40s) = fixture("fixtures/probe/l40s.csv");
    assert!(chapter.contains(&format!(
        "$ cat node.csv\n{l40s}$ gpustack probe --from node.csv\n"
    )));
    let (_, text) = fixture("fixtures/probe/bad/unknown-rtx-5070-ti.csv");
    let err = probe::parse("node.csv", &text, catalog())
        .unwrap_err()
        .to_string();
    assert!(
        chapter.contains(&format!("$ gpustack probe --from node.csv\n{err}\n```")),
        "book/src/probe.md lacks the error:\n{err}"
    );
}
