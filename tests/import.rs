//! The importers (`catalog import pypi|redist|images`, `catalog outdated`) on recorded real
//! responses (fixtures/import/, see its README), served by a local HTTP server so the
//! real client, content negotiation, PEP 658 files and HTTP range reads are all exercised;
//! plus one `network` test against live PyPI (required when `CI=true`).

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use common::{root, run_in, tempdir};
use gpustack::import::{self, Http, PypiOptions};
use gpustack::Catalog;

const DATE: &str = "2026-11-25";

/// A local index: `/simple/<project>/` (PEP 691 JSON as recorded, file URLs rewritten to
/// this server), `/files/…/<name>.metadata` (PEP 658), `/files/…/<name>` (byte ranges of
/// the recorded segments only) and `/redist/<manifest>`. Every request line and its
/// `Range`/`Accept` headers are logged.
struct Server {
    base: String,
    log: Arc<Mutex<Vec<String>>>,
}

impl Server {
    fn start() -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let log = Arc::new(Mutex::new(Vec::new()));
        let (b, l) = (base.clone(), log.clone());
        std::thread::spawn(move || {
            for s in listener.incoming().flatten() {
                let (b, l) = (b.clone(), l.clone());
                std::thread::spawn(move || serve(s, &b, &l));
            }
        });
        Server { base, log }
    }

    fn index(&self) -> String {
        format!("{}/simple", self.base)
    }

    fn requests(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

fn fixtures() -> PathBuf {
    root().join("fixtures/import")
}

fn serve(mut s: TcpStream, base: &str, log: &Mutex<Vec<String>>) {
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut line = String::new();
    if r.read_line(&mut line).is_err() {
        return;
    }
    let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
    let mut headers = BTreeMap::new();
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).is_err() || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let range = headers.get("range").cloned();
    log.lock().unwrap().push(format!(
        "GET {path}{}{}",
        range
            .as_deref()
            .map(|r| format!(" Range: {r}"))
            .unwrap_or_default(),
        headers
            .get("accept")
            .filter(|a| a.contains("pypi"))
            .map(|_| " Accept: pep691")
            .unwrap_or_default()
    ));
    let (status, ctype, date, body, extra) = respond(&path, range.as_deref(), base);
    let mut head = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if let Some(c) = ctype {
        head.push_str(&format!("Content-Type: {c}\r\n"));
    }
    if let Some(d) = date {
        head.push_str(&format!("Date: {d}\r\n"));
    }
    head.push_str(&extra);
    head.push_str("\r\n");
    let _ = s.write_all(head.as_bytes());
    let _ = s.write_all(&body);
    let _ = s.flush();
    let mut sink = [0u8; 1];
    let _ = s.read(&mut sink);
}

type Reply = (
    &'static str,
    Option<String>,
    Option<String>,
    Vec<u8>,
    String,
);

fn respond(path: &str, range: Option<&str>, base: &str) -> Reply {
    let not_found: Reply = (
        "404 Not Found",
        None,
        None,
        b"not found".to_vec(),
        String::new(),
    );
    let pypi = fixtures().join("pypi");
    if path.starts_with("/simple/") {
        let index: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(pypi.join("index.json")).unwrap())
                .unwrap();
        let Some(e) = index.as_array().unwrap().iter().find(|e| e["path"] == path) else {
            return not_found;
        };
        let text = std::fs::read_to_string(pypi.join(e["file"].as_str().unwrap()))
            .unwrap()
            .replace("https://files.pythonhosted.org/", &format!("{base}/files/"));
        return (
            "200 OK",
            e["content-type"].as_str().map(str::to_string),
            e["date"].as_str().map(str::to_string),
            text.into_bytes(),
            String::new(),
        );
    }
    let recorded = path
        .strip_prefix("/redist/")
        .map(|r| fixtures().join("redist").join(r))
        .or_else(|| {
            path.strip_prefix("/images/")
                .map(|r| fixtures().join("images").join(r))
        });
    if let Some(file) = recorded {
        return match std::fs::read(file) {
            Ok(b) => (
                "200 OK",
                Some("application/json".into()),
                Some("Thu, 26 Nov 2026 08:00:00 GMT".into()),
                b,
                String::new(),
            ),
            Err(_) => not_found,
        };
    }
    let name = path.rsplit('/').next().unwrap_or("");
    if name.ends_with(".metadata") {
        return match std::fs::read(pypi.join("files").join(name)) {
            Ok(b) => (
                "200 OK",
                Some("application/octet-stream".into()),
                None,
                b,
                String::new(),
            ),
            Err(_) => not_found,
        };
    }
    let dir = pypi.join("ranges").join(name);
    let Ok(size) = std::fs::read_to_string(dir.join("size")) else {
        return not_found;
    };
    let total: u64 = size.trim().parse().unwrap();
    let Some(spec) = range.and_then(|r| r.strip_prefix("bytes=")) else {
        // Only ranges were recorded; a whole-file download is a test failure.
        return (
            "500 Unrecorded",
            None,
            None,
            b"not recorded".to_vec(),
            String::new(),
        );
    };
    let (a, b) = match spec.split_once('-').unwrap() {
        ("", n) => (total - n.parse::<u64>().unwrap(), total - 1),
        (a, "") => (a.parse().unwrap(), total - 1),
        (a, b) => (a.parse().unwrap(), b.parse::<u64>().unwrap().min(total - 1)),
    };
    for seg in std::fs::read_dir(&dir).unwrap().flatten() {
        let Some(start) = seg
            .file_name()
            .to_str()
            .and_then(|n| n.strip_suffix(".bin"))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        let data = std::fs::read(seg.path()).unwrap();
        if a >= start && b < start + data.len() as u64 {
            let body = data[(a - start) as usize..=(b - start) as usize].to_vec();
            return (
                "206 Partial Content",
                Some("application/octet-stream".into()),
                None,
                body,
                format!("Content-Range: bytes {a}-{b}/{total}\r\n"),
            );
        }
    }
    (
        "500 Unrecorded",
        None,
        None,
        b"range not recorded".to_vec(),
        String::new(),
    )
}

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// A catalog with no torch, vLLM, cuDNN or NCCL releases: every pin is followed and
/// nothing can be kept, so the incomplete-entry path shows.
fn bare() -> Vec<(String, String)> {
    vec![(
        "bare/python.toml".into(),
        "family = \"python\"\n[[release]]\nversion = \"3.11\"\nsource = \"https://devguide.python.org/versions/\"\n".into(),
    )]
}

#[test]
fn pypi_import_follows_pins_and_writes_loadable_overlay_on_a_bare_catalog() {
    let server = Server::start();
    let base = Catalog::from_layers(&[bare()]).unwrap();
    let opts = PypiOptions {
        index: server.index(),
        record_index: None,
        date: Some(DATE.into()),
        follow_pins: true,
    };
    let http = Http::new(false);
    let imp = import::import_pypi(&http, &base, &["vllm==0.6.3.post1".into()], &opts).unwrap();
    let labels: Vec<&str> = imp.entries.iter().map(|e| e.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "cudnn 9.1.0.70",
            "nccl 2.20.5",
            "torch 2.4.0",
            "torch 2.4.0+cu121",
            "vllm 0.6.3.post1"
        ]
    );
    let get = |label: &str| imp.entries.iter().find(|e| e.label == label).unwrap();
    // Derived facts, as PyPI states them.
    let vllm = get("vllm 0.6.3.post1");
    assert_eq!(vllm.field("torch").as_deref(), Some("2.4.0"));
    assert_eq!(vllm.field("python").as_deref(), Some(">=3.8"));
    assert_eq!(
        vllm.field("files").as_deref(),
        Some("vllm-0.6.3.post1-cp38-abi3-manylinux1_x86_64.whl 691f10edb9869eb8b85bebfe2c0fb3c6a6b2cf2aefad7cdb2ab97688a57ca60e")
    );
    assert_eq!(vllm.missing, ["cuda"], "vLLM's CUDA is not in its metadata");
    let wheel = get("torch 2.4.0+cu121");
    assert_eq!(wheel.field("cuda").as_deref(), Some("12.1"));
    assert_eq!(wheel.field("cudnn").as_deref(), Some("9.1.0.70"));
    assert_eq!(wheel.field("nccl").as_deref(), Some("2.20.5"));
    assert_eq!(wheel.field("arch_list").as_deref(), Some(""));
    assert_eq!(
        get("torch 2.4.0").field("python").as_deref(),
        Some(">=3.8, <3.13")
    );
    assert_eq!(
        get("cudnn 9.1.0.70").field("cuda_majors").as_deref(),
        Some("11, 12")
    );
    assert_eq!(
        get("nccl 2.20.5").field("cuda_majors").as_deref(),
        Some("11, 12")
    );
    for e in &imp.entries {
        assert!(e.source.starts_with(&server.base), "{}", e.source);
        assert!(e.source.ends_with(&format!("read {DATE}")), "{}", e.source);
    }

    // The overlay loads on the base it was made for; the incomplete vLLM entry is a
    // comment, so vLLM has no release while the rest is in.
    let files = imp.files();
    let names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        ["cudnn.toml", "nccl.toml", "torch.toml", "vllm.toml"]
    );
    let layer: Vec<(String, String)> = files
        .iter()
        .map(|f| (format!("import/{}", f.name), f.contents.clone()))
        .collect();
    let c = Catalog::from_layers(&[bare(), layer]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.torch.len(), 1);
    assert!(c.vllm.is_empty());
    let vllm_toml = &files[3].contents;
    assert!(
        vllm_toml.contains("# INCOMPLETE: needs `cuda`"),
        "{vllm_toml}"
    );
    assert!(vllm_toml.contains("# torch = \"2.4.0\""), "{vllm_toml}");

    // The summary lists what was not derived.
    let summary = imp.summary();
    assert!(
        summary.contains("torch 2.4.0+cu121 `arch_list`"),
        "{summary}"
    );
    assert!(
        summary.contains("vllm 0.6.3.post1: needs cuda"),
        "{summary}"
    );

    // Which paths were taken: PEP 691 pages; PEP 658 for torch (the page offers it);
    // range reads for the vLLM wheel (no metadata offered): its tail (end of central
    // directory and the directory itself), then the METADATA entry, which starts before it.
    let log = server.requests();
    assert!(
        log.contains(&"GET /simple/vllm/ Accept: pep691".to_string()),
        "{log:#?}"
    );
    assert!(log
        .iter()
        .any(|l| l.ends_with("torch-2.4.0-cp310-cp310-manylinux1_x86_64.whl.metadata")));
    assert!(!log
        .iter()
        .any(|l| l.contains("torch-2.4.0") && l.contains("Range")));
    let vllm_reads: Vec<&String> = log
        .iter()
        .filter(|l| l.contains("vllm-0.6.3.post1-cp38-abi3-manylinux1_x86_64.whl"))
        .collect();
    assert_eq!(
        vllm_reads
            .iter()
            .map(|l| l.split(" Range: ").nth(1).unwrap_or(""))
            .collect::<Vec<_>>(),
        ["bytes=-65536", "bytes=194712996-194717616"],
        "{log:#?}"
    );

    // A name without a version takes the newest final release the page has.
    let nccl = import::import_pypi(&http, &base, &["nvidia-nccl-cu12".into()], &opts).unwrap();
    assert_eq!(nccl.entries[0].label, "nccl 2.20.5");

    // Same responses, same bytes.
    let again = import::import_pypi(&http, &base, &["vllm==0.6.3.post1".into()], &opts).unwrap();
    assert_eq!(again.files(), files);
}

#[test]
fn cli_import_keeps_stock_facts_and_the_overlay_loads() {
    let server = Server::start();
    let dir = tempdir("import-cli");
    let out = run_in(
        &dir,
        &[
            "catalog",
            "import",
            "pypi",
            "vllm==0.6.3.post1",
            "torch==2.4.0",
            "xformers==0.0.27.post2",
            "deepspeed==0.14.4",
            "--index",
            &server.index(),
            "--record-index",
            "https://pypi.org/simple",
            "--out",
            "site",
        ],
    );
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let vllm = read(&dir.join("site"), "vllm.toml");
    // The CUDA and min_cc of the stock entry are kept, and say where from.
    assert!(vllm.contains("cuda = \"12.1\""), "{vllm}");
    assert!(
        vllm.contains("`cuda` kept from catalog/vllm.toml:"),
        "{vllm}"
    );
    assert!(!vllm.contains("INCOMPLETE"), "{vllm}");
    // The date is the recorded responses' Date header.
    assert!(vllm.contains("read 2026-11-25"), "{vllm}");
    let torch = read(&dir.join("site"), "torch.toml");
    assert!(
        torch.contains(
            "arch_list = [\"5.0\", \"6.0\", \"7.0\", \"7.5\", \"8.0\", \"8.6\", \"9.0\"]"
        ),
        "{torch}"
    );
    let ds = read(&dir.join("site"), "deepspeed.toml");
    assert!(ds.contains("PKG-INFO of deepspeed-0.14.4.tar.gz"), "{ds}");
    assert!(ds.contains("deepspeed-0.14.4.tar.gz sha256 bb2f404b4a1d06aedd40c64d661f71307c22945d04a42d397ad39bbfeef9c8b8"), "{ds}");
    let extras = read(&dir.join("site"), "extras.toml");
    assert!(extras.contains("torch = \"==2.4.0\""), "{extras}");
    assert!(extras.contains("layer = \"framework\""), "{extras}");
    // The overlay loads with `--catalog` and shows up.
    let show = run_in(&dir, &["catalog", "show", "deepspeed", "--catalog", "site"]);
    assert_eq!(show.code, 0, "{}", show.stderr);
    assert!(show.stdout.contains("0.14.4"), "{}", show.stdout);
    assert!(
        out.stdout.contains("not derived from upstream metadata:"),
        "{}",
        out.stdout
    );
}

#[test]
fn redist_manifests_from_files_and_urls() {
    let server = Server::start();
    let dir = tempdir("import-redist");
    let cuda = fixtures().join("redist/redistrib_cuda_12.6.3.json");
    let cudnn = fixtures().join("redist/redistrib_cudnn_9.8.0.json");
    let out = run_in(
        &dir,
        &[
            "catalog",
            "import",
            "redist",
            cuda.to_str().unwrap(),
            cudnn.to_str().unwrap(),
            "--date",
            DATE,
            "--out",
            "nv",
        ],
    );
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let c = read(&dir.join("nv"), "cuda-redist.toml");
    assert!(c.contains("version = \"12.6.3\""), "{c}");
    // Table 3's minimum is kept from the catalog; the manifest's driver is only noted.
    assert!(c.contains("driver_min = \"560.35.05\""), "{c}");
    assert!(c.contains("nvidia_driver 560.35.05"), "{c}");
    assert!(c.contains("cuda_nvcc 12.6.85"), "{c}");
    assert!(c.contains("source = \"https://developer.download.nvidia.com/compute/cuda/redist/redistrib_12.6.3.json (NVIDIA redistrib manifest, release_date 2024-11-20), read 2026-11-25\""), "{c}");
    let d = read(&dir.join("nv"), "cudnn-redist.toml");
    assert!(
        d.contains("version = \"9.8.0.87\"\ncuda_majors = [11, 12]"),
        "{d}"
    );
    let show = run_in(&dir, &["catalog", "show", "cuda", "--catalog", "nv"]);
    assert_eq!(show.code, 0, "{}", show.stderr);

    // From a URL: the date is the response's.
    let url = format!("{}/redist/redistrib_cudnn_9.8.0.json", server.base);
    let out = run_in(&dir, &["catalog", "import", "redist", &url, "--out", "nv2"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(read(&dir.join("nv2"), "cudnn-redist.toml").contains("read 2026-11-26"));
}

#[test]
fn offline_and_unreachable_are_clear_errors() {
    let dir = tempdir("import-offline");
    let out = run_in(
        &dir,
        &[
            "catalog",
            "import",
            "pypi",
            "vllm==0.6.3.post1",
            "--offline",
        ],
    );
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.starts_with(
            "error: `https://pypi.org/simple/vllm/` is needed, but `--offline` was given"
        ),
        "{}",
        out.stderr
    );
    assert!(!dir.join("catalog-import").exists());
    // Nothing listens on port 9 of localhost (discard): connection refused.
    let out = run_in(
        &dir,
        &[
            "catalog",
            "import",
            "pypi",
            "torch==2.4.0",
            "--index",
            "http://127.0.0.1:9/simple",
        ],
    );
    // A host that does not answer is a network failure: exit 3, as for `lock`.
    assert_eq!(out.code, 3);
    assert!(
        out.stderr.starts_with(
            "error: cannot fetch `127.0.0.1:9` (http://127.0.0.1:9/simple/torch/): connect"
        ),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("hint: check the network"),
        "{}",
        out.stderr
    );
    let out = run_in(&dir, &["catalog", "import", "pypi", "numpy"]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr
            .starts_with("error: `numpy` is not a project the catalog models"),
        "{}",
        out.stderr
    );
}

#[test]
fn outdated_lists_what_the_catalog_lacks() {
    let server = Server::start();
    let dir = tempdir("outdated");
    let cuda = fixtures().join("redist/redistrib_cuda_12.6.3.json");
    let out = run_in(
        &dir,
        &[
            "catalog",
            "outdated",
            "--index",
            &server.index(),
            "--redist",
            cuda.to_str().unwrap(),
            "--format",
            "json",
        ],
    );
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let report: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let family = |name: &str| {
        report["families"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["family"] == name)
            .unwrap_or_else(|| panic!("{name}: {report:#}"))
            .clone()
    };
    let strings = |v: &serde_json::Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_str().unwrap().to_string())
            .collect()
    };
    // DeepSpeed: the recorded page is PyPI's whole project. Every reported release is
    // one the catalog lacks and PyPI has, from the catalog's oldest on; 0.14.4 is on PyPI.
    let stock = Catalog::stock().unwrap();
    let have: Vec<String> = stock
        .deepspeed
        .iter()
        .map(|d| d.version.to_string())
        .collect();
    let ds = family("deepspeed");
    let missing = strings(&ds["missing"]);
    let page = std::fs::read_to_string(fixtures().join("pypi/simple/deepspeed.json")).unwrap();
    for v in &missing {
        assert!(!have.contains(v), "{v} is in the catalog");
        assert!(page.contains(&format!("deepspeed-{v}.tar.gz")), "{v}");
    }
    assert_eq!(
        missing.contains(&"0.14.4".to_string()),
        !have.contains(&"0.14.4".to_string())
    );
    let args: Vec<String> = missing.iter().map(|v| format!("deepspeed=={v}")).collect();
    assert_eq!(strings(&ds["import"]), args);
    assert!(!missing
        .iter()
        .any(|v| v.starts_with("0.9.") || v.starts_with("0.10.")));
    // The manifest's release is in the stock catalog.
    let cu = family("cuda (redistrib manifests)");
    assert!(strings(&cu["missing"]).is_empty(), "{cu:#}");
    // The text form names the import command, or says the family is up to date.
    let text = run_in(&dir, &["catalog", "outdated", "--index", &server.index()]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    if missing.is_empty() {
        assert!(
            text.stdout.contains("deepspeed: up to date"),
            "{}",
            text.stdout
        );
    } else {
        assert!(
            text.stdout
                .contains("  import: gpustack catalog import pypi deepspeed=="),
            "{}",
            text.stdout
        );
    }
}

/// `catalog outdated` against the recorded index (the server, still serving), on the
/// bare catalog plus one file.
fn outdated_on_bare(name: &str, toml: &str) -> (Server, import::outdated::Report) {
    let server = Server::start();
    let mut layer = bare();
    layer.push((name.into(), toml.into()));
    let base = Catalog::from_layers(&[layer]).unwrap();
    let report =
        import::outdated::outdated(&Http::new(false), &base, &server.index(), &[], Some(DATE))
            .unwrap();
    (server, report)
}

/// On a catalog with one DeepSpeed release, every later one on the recorded page is
/// reported, oldest first, with the arguments that import it; older ones are not.
#[test]
fn outdated_starts_at_the_catalogs_oldest_release() {
    let (server, report) = outdated_on_bare(
        "bare/deepspeed.toml",
        "family = \"deepspeed\"\n[[release]]\nversion = \"0.14.0\"\nsource = \"https://pypi.org/project/deepspeed/0.14.0/\"\n",
    );
    let ds = report
        .families
        .iter()
        .find(|f| f.family == "deepspeed")
        .unwrap();
    assert_eq!(ds.catalog_newest.as_deref(), Some("0.14.0"));
    assert_eq!(
        &ds.missing[..5],
        ["0.14.1", "0.14.2", "0.14.3", "0.14.4", "0.14.5"]
    );
    assert_eq!(ds.import[3], "deepspeed==0.14.4");
    assert!(!ds
        .missing
        .iter()
        .any(|v| v == "0.14.0" || v.starts_with("0.13.")));
    assert_eq!(
        ds.upstream_newest.as_deref(),
        ds.missing.last().map(String::as_str)
    );
    assert_eq!(
        ds.sources,
        [format!("{}/deepspeed/ (read {DATE})", server.index())]
    );
    // Families the catalog has no release of list everything the index has.
    let cudnn = report
        .families
        .iter()
        .find(|f| f.family == "cudnn")
        .unwrap();
    assert_eq!(cudnn.missing, ["9.1.0.70"]);
    assert_eq!(cudnn.import, ["nvidia-cudnn-cu11==9.1.0.70"]);
}

/// Live PyPI, pinned to one release so the answer does not move: vLLM 0.6.3.post1's wheel
/// hash and torch pin match the stock catalog. Required when `CI=true`.
#[test]
fn network_live_pypi_agrees_with_the_catalog() {
    if !common::network("pypi.org", 443) {
        return;
    }
    let dir = tempdir("import-live");
    let out = run_in(
        &dir,
        &[
            "catalog",
            "import",
            "pypi",
            "vllm==0.6.3.post1",
            "--date",
            DATE,
            "--out",
            "live",
        ],
    );
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let vllm = read(&dir.join("live"), "vllm.toml");
    assert!(vllm.contains("torch = \"2.4.0\""), "{vllm}");
    let stock = Catalog::stock().unwrap();
    let entry = stock
        .vllm
        .iter()
        .find(|v| v.version.to_string() == "0.6.3.post1")
        .unwrap();
    for f in &entry.files {
        assert!(vllm.contains(&f.sha256), "{} not in {vllm}", f.sha256);
    }

    // torch 2.11.0, the first release that pins the `cuda-toolkit` meta-package: what the
    // importer derives agrees with the hand-made stock entry.
    let opts = PypiOptions {
        date: Some(DATE.into()),
        follow_pins: false,
        ..PypiOptions::default()
    };
    let imp =
        import::import_pypi(&Http::new(false), &stock, &["torch==2.11.0".into()], &opts).unwrap();
    let rel = imp
        .entries
        .iter()
        .find(|e| e.label == "torch 2.11.0")
        .unwrap();
    let want = stock
        .torch_releases
        .iter()
        .find(|r| r.version.to_string() == "2.11.0")
        .unwrap();
    assert_eq!(rel.field("pypi_variant").unwrap(), want.pypi_variant);
    assert_eq!(rel.field("python").unwrap(), want.python.to_string());
    let wheel = imp
        .entries
        .iter()
        .find(|e| e.label == "torch 2.11.0+cu130")
        .unwrap();
    let build = stock
        .torch
        .iter()
        .find(|b| b.full.to_string() == "2.11.0+cu130")
        .unwrap();
    assert_eq!(wheel.field("cuda").unwrap(), build.cuda.to_string());
    for (field, pin) in [
        ("cudnn", &build.cudnn),
        ("nccl", &build.nccl),
        ("cusparselt", &build.cusparselt),
    ] {
        assert_eq!(
            wheel.field(field),
            pin.as_ref().map(ToString::to_string),
            "{field}"
        );
    }
}

/// Replaces `catalog/<file>.toml:<line>` with `catalog/<file>.toml:N`: the book's example
/// must not break whenever a stock file gains a line.
fn without_lines(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find(".toml:") {
        out.push_str(&rest[..i + 6]);
        rest = &rest[i + 6..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && out.contains("catalog/") {
            out.push('N');
        } else {
            out.push_str(&rest[..digits]);
        }
        rest = &rest[digits..];
    }
    out.push_str(rest);
    out
}

/// The catalog chapter's importer example (```` ```console import-example ````) is what
/// the commands print and write.
#[test]
fn book_import_example_is_what_the_commands_do() {
    let book = std::fs::read_to_string(root().join("book/src/catalog.md")).unwrap();
    let body = common::code_block(&book, "console import-example").expect("the example block");
    let dir = tempdir("book-import");
    common::copy_dir(
        &fixtures().join("redist"),
        &dir.join("fixtures/import/redist"),
    );
    let mut actual = String::new();
    for line in body.lines().filter_map(|l| l.strip_prefix("$ ")) {
        actual.push_str(&format!("$ {line}\n"));
        let args: Vec<&str> = line.split_whitespace().collect();
        match args[0] {
            "gpustack" => {
                let out = run_in(&dir, &args[1..]);
                assert_eq!(out.code, 0, "{line}: {}", out.stderr);
                actual.push_str(&out.stdout);
            }
            "cat" => actual.push_str(&read(&dir, args[1])),
            other => panic!("the example runs `{other}`, which this test does not know"),
        }
    }
    assert_eq!(
        without_lines(&actual),
        body,
        "book/src/catalog.md's import example is out of date; the commands print:\n{}",
        without_lines(&actual)
    );
}

/// The maintainer workflow: the script is shellcheck-clean and uses flags that exist; the
/// scheduled CI example is yamllint-clean and runs the script.
#[test]
fn refresh_workflow_script_and_ci_example() {
    let script = root().join("scripts/refresh-catalog.sh");
    let text = std::fs::read_to_string(&script).unwrap();
    for needle in [
        "catalog outdated",
        "catalog import pypi",
        "catalog import redist",
        "catalog import installability",
        "--out",
    ] {
        assert!(text.contains(needle), "{needle}");
    }
    if let Some(sc) = common::validator("shellcheck") {
        let (code, out) = common::run_tool(&sc, &[script.to_str().unwrap()], &root());
        assert_eq!(code, 0, "{out}");
    }
    let ci = root().join("examples/ci/refresh-catalog.yml");
    let yaml = std::fs::read_to_string(&ci).unwrap();
    assert!(yaml.contains("scripts/refresh-catalog.sh"));
    assert!(yaml.contains("cron:"));
    if let Some(yl) = common::validator("yamllint") {
        let cfg = root().join("fixtures/schemas/yamllint.yaml");
        let (code, out) = common::run_tool(
            &yl,
            &["-s", "-c", cfg.to_str().unwrap(), ci.to_str().unwrap()],
            &root(),
        );
        assert_eq!(code, 0, "{out}");
    }
    // The flags the script passes exist.
    let dir = tempdir("refresh-flags");
    for args in [
        &["catalog", "outdated", "--help"][..],
        &["catalog", "import", "pypi", "--help"][..],
        &["catalog", "import", "redist", "--help"][..],
        &["catalog", "import", "installability", "--help"][..],
    ] {
        let out = run_in(&dir, args);
        assert_eq!(out.code, 0);
        assert!(out.stdout.contains("--date") && out.stdout.contains("--offline"));
    }
}

/// A PyTorch variant index (PEP 503 HTML with PEP 658 `data-dist-info-metadata`, as
/// download.pytorch.org serves it), answered from memory. The page is synthetic (that host
/// is not reachable from CI); the metadata file is the recorded torch 2.4.0 one.
struct VariantIndex {
    html: String,
    metadata: Vec<u8>,
}

impl import::Fetch for VariantIndex {
    fn fetch(&self, req: &import::Request) -> Result<import::Response, import::FetchError> {
        let ok = |body: Vec<u8>, ct: &str| import::Response {
            status: 200,
            body,
            content_type: Some(ct.into()),
            date: Some("Wed, 25 Nov 2026 18:00:00 GMT".into()),
            content_range: None,
        };
        Ok(
            if req.url == "https://download.pytorch.org/whl/cu121/torch/" {
                ok(self.html.clone().into_bytes(), "text/html")
            } else if req.url.ends_with(".metadata") {
                ok(self.metadata.clone(), "application/octet-stream")
            } else {
                import::Response {
                    status: 404,
                    ..Default::default()
                }
            },
        )
    }
}

#[test]
fn variant_index_html_gives_a_wheel_entry_with_its_own_python_range() {
    use sha2::Digest;
    let metadata = std::fs::read(
        fixtures().join("pypi/files/torch-2.4.0-cp310-cp310-manylinux1_x86_64.whl.metadata"),
    )
    .unwrap();
    let md_sha: String = sha2::Sha256::digest(&metadata)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let mut html =
        String::from("<!DOCTYPE html>\n<html>\n  <body>\n    <h1>Links for torch</h1>\n");
    for (py, h) in [("39", "1"), ("310", "2"), ("311", "3"), ("312", "4")] {
        html.push_str(&format!(
            "    <a href=\"/whl/cu121/torch-2.4.0%2Bcu121-cp{py}-cp{py}-linux_x86_64.whl#sha256={}\" data-dist-info-metadata=\"sha256={md_sha}\" data-core-metadata=\"sha256={md_sha}\">torch-2.4.0+cu121-cp{py}-cp{py}-linux_x86_64.whl</a><br/>\n",
            h.repeat(64)
        ));
    }
    html.push_str("    <a href=\"/whl/cu121/torch-2.4.0%2Bcu121-cp311-cp311-win_amd64.whl#sha256=abc\">torch-2.4.0+cu121-cp311-cp311-win_amd64.whl</a><br/>\n  </body>\n</html>\n");
    let index = VariantIndex { html, metadata };
    let opts = PypiOptions {
        index: "https://download.pytorch.org/whl/cu121".into(),
        record_index: None,
        date: None,
        follow_pins: false,
    };
    let stock = Catalog::stock().unwrap();
    let imp = import::import_pypi(&index, &stock, &["torch==2.4.0".into()], &opts).unwrap();
    assert_eq!(
        imp.entries.len(),
        1,
        "only the [[wheel]]: the release is PyPI's"
    );
    let w = &imp.entries[0];
    assert_eq!(w.label, "torch 2.4.0+cu121");
    assert_eq!(
        w.field("index_url").as_deref(),
        Some("https://download.pytorch.org/whl/cu121")
    );
    assert_eq!(w.field("python").as_deref(), Some(">=3.9, <3.13"));
    assert_eq!(w.field("cudnn").as_deref(), Some("9.1.0.70"));
    assert!(w.missing.is_empty(), "{:?}", w.missing);
    assert!(
        w.source.contains("PEP 503 HTML project page"),
        "{}",
        w.source
    );
    assert!(w.source.ends_with("read 2026-11-25"), "{}", w.source);
    let files = imp.files();
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].name, "torch-cu121.toml");
    let layer = vec![(
        "import/torch-cu121.toml".to_string(),
        files[0].contents.clone(),
    )];
    Catalog::stock_with(&[layer]).unwrap_or_else(|e| panic!("{e}"));

    // On a catalog without torch 2.4.0, the wheel cannot stand alone: commented out.
    let bare_catalog = Catalog::from_layers(&[bare()]).unwrap();
    let imp = import::import_pypi(&index, &bare_catalog, &["torch==2.4.0".into()], &opts).unwrap();
    assert_eq!(imp.entries[0].missing.len(), 1);
    assert!(imp.entries[0].missing[0]
        .contains("import `torch==2.4.0` from https://pypi.org/simple first"));
    let layer = vec![(
        "import/torch-cu121.toml".to_string(),
        imp.files()[0].contents.clone(),
    )];
    Catalog::from_layers(&[bare(), layer]).unwrap_or_else(|e| panic!("{e}"));
}

/// A PEP 658 metadata file whose sha256 is not the one the page states is refused.
#[test]
fn metadata_with_the_wrong_hash_is_refused() {
    let metadata = std::fs::read(
        fixtures().join("pypi/files/torch-2.4.0-cp310-cp310-manylinux1_x86_64.whl.metadata"),
    )
    .unwrap();
    let html = format!(
        "<a href=\"/whl/cu121/torch-2.4.0%2Bcu121-cp311-cp311-linux_x86_64.whl#sha256={}\" data-core-metadata=\"sha256={}\">torch-2.4.0+cu121-cp311-cp311-linux_x86_64.whl</a>\n",
        "1".repeat(64),
        "0".repeat(64)
    );
    let index = VariantIndex { html, metadata };
    let opts = PypiOptions {
        index: "https://download.pytorch.org/whl/cu121".into(),
        ..PypiOptions::default()
    };
    let err = import::import_pypi(
        &index,
        &Catalog::stock().unwrap(),
        &["torch==2.4.0".into()],
        &opts,
    )
    .unwrap_err();
    assert!(
        err.to_string().starts_with("cannot read `https://download.pytorch.org/whl/cu121/torch-2.4.0%2Bcu121-cp311-cp311-linux_x86_64.whl.metadata`: sha256 "),
        "{err}"
    );
    assert!(
        err.to_string()
            .ends_with(&format!("differs from the page's {}", "0".repeat(64))),
        "{err}"
    );
}

/// Issue 32: an import whose overlay does not load is taken back whole. The output
/// directory already holds an overlay file that does not load (here a broken one beside
/// it) and an older `cuda-redist.toml`: after the failed import the older file is back
/// byte for byte, the new `cudnn-redist.toml` is gone, and the error says nothing was
/// imported. An impossible `--date` is refused before anything is written.
#[test]
fn a_failed_import_leaves_the_overlay_as_it_was() {
    let dir = tempdir("import-rollback");
    let cuda = fixtures().join("redist/redistrib_cuda_12.6.3.json");
    let cudnn = fixtures().join("redist/redistrib_cudnn_9.8.0.json");
    let nv = dir.join("nv");
    std::fs::create_dir_all(&nv).unwrap();
    std::fs::write(
        nv.join("broken.toml"),
        "family = \"cuda\"\n[[release]]\nversion = 12\n",
    )
    .unwrap();
    let older = "# an older import\nfamily = \"cuda\"\n";
    std::fs::write(nv.join("cuda-redist.toml"), older).unwrap();
    let args = |date: &str| {
        vec![
            "catalog".to_string(),
            "import".into(),
            "redist".into(),
            cuda.display().to_string(),
            cudnn.display().to_string(),
            "--date".into(),
            date.into(),
            "--out".into(),
            "nv".into(),
        ]
    };
    let a = args(DATE);
    let out = run_in(&dir, &a.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains("nothing was imported: `nv` is as it was"),
        "{}",
        out.stderr
    );
    assert_eq!(
        std::fs::read_to_string(nv.join("cuda-redist.toml")).unwrap(),
        older
    );
    assert!(!nv.join("cudnn-redist.toml").exists());
    let mut left: Vec<String> = std::fs::read_dir(&nv)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["broken.toml", "cuda-redist.toml"]);
    // A new output directory is removed again.
    let b = args(DATE);
    let mut b: Vec<&str> = b.iter().map(String::as_str).collect();
    let n = b.len();
    b[n - 1] = "fresh/nv";
    b.extend(["--catalog", "nv"]);
    let out = run_in(&dir, &b);
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    assert!(
        !dir.join("fresh").exists(),
        "the import left `fresh/` behind"
    );
    // 2026-02-30 is no date: refused before anything is written.
    let c = args("2026-02-30");
    let out = run_in(&dir, &c.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("invalid date `2026-02-30`"),
        "{}",
        out.stderr
    );
    assert!(!nv.join("cudnn-redist.toml").exists());
}

/// The mirror commit `catalog/images.toml` cites for most of its tag lists.
const IMAGES_AT: &str = "https://github.com/pranavmishra90/nvidia-container-images-cuda/blob/181367a60650bee1a0d32f52b0e96d83d982de0d/doc";
/// The newest mirror commit found (13.3.1), which `catalog/images.toml` cites for the
/// ubuntu22.04 and ubuntu24.04 entries new or changed there.
const IMAGES_AT_44: &str = "https://github.com/pranavmishra90/nvidia-container-images-cuda/blob/44b139413eb3dfcb3fc30d0868479deedce72255/doc";

/// NVIDIA's tag lists at `commit` (fixtures/import/images/<commit>/), imported against the
/// stock catalog.
fn import_images(commit: &str, origin: &str) -> import::Import {
    let dir = fixtures().join("images").join(commit);
    let lists: Vec<_> = ["supported-tags.md", "unsupported-tags.md"]
        .iter()
        .map(|f| {
            let p = dir.join(f);
            let text = std::fs::read_to_string(&p).unwrap();
            import::images::parse(&p.display().to_string(), origin, &text).unwrap()
        })
        .collect();
    import::images::import(&Catalog::stock().unwrap(), &lists, DATE).unwrap()
}

/// (CUDA, OS) → (sorted tags, status) of an import's entries.
fn image_table(imp: &import::Import) -> BTreeMap<(String, String), (Vec<String>, String)> {
    imp.entries
        .iter()
        .map(|e| {
            let mut tags: Vec<String> = e
                .field("tags")
                .unwrap()
                .split(", ")
                .map(String::from)
                .collect();
            tags.sort();
            (
                (e.field("cuda").unwrap(), e.field("os").unwrap()),
                (tags, e.field("status").unwrap()),
            )
        })
        .collect()
}

/// The same table for the stock catalog's `[[image]]` entries.
fn catalog_images() -> BTreeMap<(String, String), (Vec<String>, String)> {
    Catalog::stock()
        .unwrap()
        .images
        .iter()
        .map(|i| {
            let mut tags = i.tags.clone();
            tags.sort();
            let status = i.status.name();
            (
                (i.cuda.to_string(), i.os.clone()),
                (tags, status.to_string()),
            )
        })
        .collect()
}

/// The importer reproduces `catalog/images.toml` from the newest lists it cites (44b13941:
/// the ubuntu24.04 sections, the unsupported ubuntu22.04 section and the supported one down
/// to 12.5.1 recorded): the same tags and status for every pair listed (12.9.1 unsupported,
/// as NVIDIA moved it when 12.9.2 replaced it), every ubuntu24.04 entry read from NVIDIA's
/// lists among them, and every entry that cites 44b13941 citing the list the import read it
/// from. The import differs from the catalog nowhere.
#[test]
fn image_lists_reproduce_the_catalogs_tags_at_the_cited_commit() {
    let imp = import_images("44b13941", IMAGES_AT_44);
    let got = image_table(&imp);
    let want = catalog_images();
    let mut only_import = Vec::new();
    for (k, v) in &got {
        match want.get(k) {
            Some(w) => assert_eq!(v, w, "{k:?}"),
            None => only_import.push(format!("{} {}", k.0, k.1)),
        }
    }
    assert!(only_import.is_empty(), "{only_import:?}");
    let oldest_supported_22 = gpustack::version::Version::parse("12.5.1").unwrap();
    let missing: Vec<_> = want
        .iter()
        .filter(|((cuda, os), (_, status))| {
            status != "observed"
                && (os == "ubuntu24.04"
                    || (os == "ubuntu22.04"
                        && (status == "unsupported"
                            || gpustack::version::Version::parse(cuda).unwrap()
                                >= oldest_supported_22)))
        })
        .map(|(k, _)| k)
        .filter(|k| !got.contains_key(*k))
        .collect();
    assert!(missing.is_empty(), "{missing:?}");
    let cat = Catalog::stock().unwrap();
    let cites_44: Vec<_> = cat
        .images
        .iter()
        .filter(|i| i.origin.source.starts_with(IMAGES_AT_44))
        .collect();
    assert_eq!(cites_44.len(), 11);
    for i in cites_44 {
        let e = imp
            .entries
            .iter()
            .find(|e| {
                i.cuda.to_string() == e.field("cuda").unwrap() && i.os == e.field("os").unwrap()
            })
            .unwrap_or_else(|| panic!("{} {} is not in the import", i.cuda, i.os));
        // The same list, read on another day.
        let list = |s: &str| s.rsplit_once(", read ").map(|(l, _)| l.to_string());
        assert_eq!(
            list(&e.source),
            list(&i.origin.source),
            "{} {}",
            i.cuda,
            i.os
        );
    }
    assert!(imp.changed.is_empty(), "{:?}", imp.changed);
    assert_eq!(
        imp.not_written,
        ["OS ubuntu26.04 (2 CUDA releases): not an OS in os.toml"]
    );
}

/// The lists the catalog cites for its other entries (181367a6, the ubuntu24.04 sections
/// recorded) agree with it on every tag, and on every status but 12.9.1's (unsupported in
/// the catalog, which cites 44b13941 for it: NVIDIA moved it there), and the pairs they lack
/// are the releases after them. Each pair it imports cites 181367a6 in the catalog, or 44b13941
/// where that commit's lists are newer.
#[test]
fn image_lists_at_the_older_cited_commit_agree_on_tags() {
    let imp = import_images("181367a6", IMAGES_AT);
    let got = image_table(&imp);
    let want = catalog_images();
    let mut moved = Vec::new();
    for (k, (tags, status)) in &got {
        let (wtags, wstatus) = want.get(k).unwrap_or_else(|| panic!("{k:?}"));
        assert_eq!(tags, wtags, "{k:?}");
        if status != wstatus {
            moved.push(format!("{} {} {status} -> {wstatus}", k.0, k.1));
        }
    }
    assert_eq!(moved, ["12.9.1 ubuntu24.04 supported -> unsupported"]);
    let newer: Vec<_> = want
        .iter()
        .filter(|((_, os), (_, status))| os == "ubuntu24.04" && status != "observed")
        .map(|(k, _)| format!("{} {}", k.0, k.1))
        .filter(|k| !got.keys().any(|g| format!("{} {}", g.0, g.1) == *k))
        .collect();
    assert_eq!(
        newer,
        [
            "12.9.2 ubuntu24.04",
            "13.3.0 ubuntu24.04",
            "13.3.1 ubuntu24.04"
        ]
    );
    let cat = Catalog::stock().unwrap();
    for e in &imp.entries {
        let i = cat
            .images
            .iter()
            .find(|i| {
                i.cuda.to_string() == e.field("cuda").unwrap() && i.os == e.field("os").unwrap()
            })
            .unwrap();
        let url = e.source.split(' ').next().unwrap();
        assert!(
            i.origin.source.starts_with(url) || i.origin.source.starts_with(IMAGES_AT_44),
            "{} vs {}",
            e.source,
            i.origin.source
        );
    }
}

/// The whole lists of an earlier commit (60a1c892, 2025-08-18): every release they share
/// with the catalog has the catalog's tags. Status has moved since, exactly for 12.8.1,
/// 13.0.0 and 12.9.1 on Ubuntu 22.04/24.04 (supported then, unsupported at the commit the
/// catalog cites); the catalog's pairs these lists lack are the releases after 13.0.0 and the
/// later 12.8.2 and 12.9.2 updates.
#[test]
fn whole_image_lists_of_an_earlier_commit_agree_on_tags() {
    let imp = import_images("60a1c892", import::images::UPSTREAM_DOC);
    let got = image_table(&imp);
    let want = catalog_images();
    let mut moved = Vec::new();
    for (k, (tags, status)) in &got {
        let Some((wtags, wstatus)) = want.get(k) else {
            continue;
        };
        assert_eq!(tags, wtags, "{k:?}");
        if status != wstatus {
            moved.push(format!("{} {} {status} -> {wstatus}", k.0, k.1));
        }
    }
    assert_eq!(
        moved,
        [
            "12.8.1 ubuntu20.04 supported -> unsupported",
            "12.8.1 ubuntu22.04 supported -> unsupported",
            "12.8.1 ubuntu24.04 supported -> unsupported",
            "12.9.1 ubuntu22.04 supported -> unsupported",
            "12.9.1 ubuntu24.04 supported -> unsupported",
            "13.0.0 ubuntu22.04 supported -> unsupported",
            "13.0.0 ubuntu24.04 supported -> unsupported",
        ]
    );
    let newer = gpustack::version::Version::parse("13.0.0").unwrap();
    for k in want.keys().filter(|k| !got.contains_key(*k)) {
        let v = gpustack::version::Version::parse(&k.0).unwrap();
        assert!(
            v > newer || k.0 == "12.8.2" || k.0 == "12.9.2",
            "{k:?} is in the catalog but not in the 60a1c892 lists"
        );
    }
    // What the catalog does not model is listed, not written.
    assert!(
        imp.not_written
            .iter()
            .any(|n| n == "OS ubi9 (21 CUDA releases): not an OS in os.toml"),
        "{:?}",
        imp.not_written
    );
    assert!(
        imp.not_written
            .iter()
            .any(|n| n.starts_with("CUDA 11.7.1 ")),
        "{:?}",
        imp.not_written
    );
}

/// From URLs through the HTTP client: the entries cite the URL and the response's date,
/// and the overlay loads on the stock catalog (the command checks that before it reports).
#[test]
fn image_lists_from_urls_write_a_loadable_overlay() {
    let server = Server::start();
    let dir = tempdir("import-images");
    let sup = format!("{}/images/181367a6/supported-tags.md", server.base);
    let unsup = format!("{}/images/181367a6/unsupported-tags.md", server.base);
    let out = run_in(
        &dir,
        &["catalog", "import", "images", &sup, &unsup, "--out", "img"],
    );
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let t = read(&dir.join("img"), "images.toml");
    assert!(
        t.contains(&format!(
            "source = \"{sup} (NVIDIA's list of supported nvidia/cuda tags), read 2026-11-26\""
        )),
        "{t}"
    );
    // The catalog's dated digests are kept with the entry they belong to.
    assert!(
        t.contains("[[image.digest]]\ntag = \"12.8.1-devel-ubuntu24.04\""),
        "{t}"
    );
    let show = run_in(&dir, &["catalog", "show", "image", "--catalog", "img"]);
    assert_eq!(show.code, 0, "{}{}", show.stdout, show.stderr);

    // Two lists of one status, and a file that is not a list, are refused.
    let twice = run_in(
        &dir,
        &["catalog", "import", "images", &sup, &sup, "--out", "x"],
    );
    assert_eq!(twice.code, 2, "{}{}", twice.stdout, twice.stderr);
    assert!(
        twice.stderr.contains("2 supported lists given"),
        "{}",
        twice.stderr
    );
    let readme = fixtures().join("images/README.md");
    let bad = run_in(
        &dir,
        &[
            "catalog",
            "import",
            "images",
            "--from",
            readme.to_str().unwrap(),
            "--date",
            DATE,
            "--out",
            "x",
        ],
    );
    assert_ne!(bad.code, 0);
    assert!(
        bad.stderr
            .contains("not one of NVIDIA's nvidia/cuda tag lists"),
        "{}",
        bad.stderr
    );
}

/// PEP 592 and platforms, on the recorded pages: every wheel of nvidia-cudnn-cu12/-cu13
/// 9.25.0.15 is yanked (no reason given), nvidia-cudnn-cu11 8.9.4.19 has only a yanked
/// Windows wheel (with a reason), 8.9.5.29 only Windows wheels. The importer writes
/// `yanked` and `platforms`, the overlay loads, and the solver never locks them.
#[test]
fn yanked_and_windows_only_releases_are_recorded_and_never_locked() {
    let server = Server::start();
    let base = Catalog::from_layers(&[bare()]).unwrap();
    let opts = PypiOptions {
        index: server.index(),
        record_index: None,
        date: Some(DATE.into()),
        follow_pins: false,
    };
    let http = Http::new(false);
    let imp = import::import_pypi(
        &http,
        &base,
        &[
            "nvidia-cudnn-cu12==9.25.0.15".into(),
            "nvidia-cudnn-cu11==8.9.4.19".into(),
            "nvidia-cudnn-cu11==8.9.5.29".into(),
        ],
        &opts,
    )
    .unwrap();
    let get = |label: &str| imp.entries.iter().find(|e| e.label == label).unwrap();
    let idx = server.index();
    assert_eq!(
        get("cudnn 9.25.0.15").field("yanked"),
        Some(format!(
            "{{ observed = \"{DATE}\", source = \"{idx}/nvidia-cudnn-cu12/, {idx}/nvidia-cudnn-cu13/\" }}"
        ))
    );
    assert_eq!(get("cudnn 9.25.0.15").field("platforms"), None);
    assert_eq!(
        get("cudnn 9.25.0.15").field("cuda_majors").as_deref(),
        Some("12, 13")
    );
    let old = get("cudnn 8.9.4.19");
    assert_eq!(old.field("platforms").as_deref(), Some("win_amd64"));
    assert!(
        old.field("yanked")
            .unwrap()
            .contains("reason = \"at the request of Paul Luh\""),
        "{:?}",
        old.field("yanked")
    );
    let win = get("cudnn 8.9.5.29");
    assert_eq!(win.field("platforms").as_deref(), Some("win_amd64"));
    assert_eq!(win.field("yanked"), None);
    assert_eq!(win.field("cuda_majors").as_deref(), Some("11, 12"));

    // The overlay loads; with CUDA and a GPU added, no lock takes any of the three.
    let mut layer: Vec<(String, String)> = imp
        .files()
        .into_iter()
        .map(|f| (format!("overlay/{}", f.name), f.contents))
        .collect();
    layer.extend(bare());
    let cat = Catalog::from_layers(&[layer]).unwrap();
    let yanked = cat
        .cudnn
        .iter()
        .find(|c| c.version.to_string() == "9.25.0.15")
        .unwrap();
    assert!(yanked.install.yanked.is_some());
    let win = cat
        .cudnn
        .iter()
        .find(|c| c.version.to_string() == "8.9.5.29")
        .unwrap();
    assert!(win.platforms.iter().all(|p| !p.is_linux()));
    for (v, why) in [
        ("9.25.0.15", "is yanked on PyPI"),
        ("8.9.5.29", "has no Linux wheel on PyPI, only `win_amd64`"),
        (
            "8.9.4.19",
            "is yanked on PyPI (seen 2026-11-25): at the request of Paul Luh",
        ),
    ] {
        let dir = tempdir(&format!("yanked-{v}"));
        std::fs::write(
            dir.join("spec.toml"),
            format!("[stack]\nname = \"y\"\n[hardware]\ngpus = [\"h100\"]\n[components]\ncuda = \"*\"\ncudnn = \"=={v}\"\n"),
        )
        .unwrap();
        let overlay = dir.join("overlay");
        std::fs::create_dir_all(&overlay).unwrap();
        for f in imp.files() {
            std::fs::write(overlay.join(&f.name), f.contents).unwrap();
        }
        let out = run_in(
            &dir,
            &[
                "lock",
                "--spec",
                "spec.toml",
                "--catalog",
                "overlay",
                "--out",
                "-",
            ],
        );
        assert_eq!(out.code, 1, "{v}: {}{}", out.stdout, out.stderr);
        assert!(out.stderr.contains(why), "{v}: {}", out.stderr);
    }
}

/// The glibc floor counts dependencies: vLLM 0.33.0's own wheels are manylinux_2_28, but
/// every llguidance release its `llguidance<1.8.0,>=1.7.0` allows (1.7.0 to 1.7.6 on the
/// recorded page; 1.6.1 is outside it) ships x86_64 wheels for manylinux_2_31 only, not
/// counting the free-threaded `cp314t` ones.
#[test]
fn glibc_floor_counts_the_dependencies_wheels() {
    let server = Server::start();
    let base = Catalog::stock().unwrap();
    let opts = PypiOptions {
        index: server.index(),
        record_index: Some(import::PYPI.into()),
        date: Some(DATE.into()),
        follow_pins: false,
    };
    let http = Http::new(false);
    let imp = import::import_pypi(&http, &base, &["vllm==0.33.0".into()], &opts).unwrap();
    let e = imp
        .entries
        .iter()
        .find(|e| e.label == "vllm 0.33.0")
        .unwrap();
    assert_eq!(
        e.field("platforms").as_deref(),
        Some("manylinux_2_28_x86_64, manylinux_2_28_aarch64")
    );
    let floor = e.field("glibc_floor").unwrap();
    assert!(
        floor.contains(&format!(
            "{{ cpu = \"x86_64\", glibc = \"2.31\", by = \"its dependency `llguidance<1.8.0,>=1.7.0` has x86_64 wheels for `manylinux_2_31_x86_64` and newer only (1.7.0 to 1.7.6)\", source = \"{}/llguidance/ (wheel tags), read {DATE}; the requirement is vllm's Requires-Dist\" }}",
            server.index()
        )),
        "{floor}"
    );
    // The overlay replaces the stock entry and loads.
    let dir = tempdir("glibc-floor-overlay");
    for f in imp.files() {
        std::fs::write(dir.join(&f.name), f.contents).unwrap();
    }
    let cat = Catalog::load(&[dir.as_path()]).unwrap();
    let v = cat
        .vllm
        .iter()
        .find(|v| v.version.to_string() == "0.33.0")
        .unwrap();
    assert_eq!(v.install.glibc_floor[0].glibc.to_string(), "2.31");
}

/// `catalog outdated` reports a release the catalog still offers that PyPI has yanked.
#[test]
fn outdated_reports_newly_yanked_releases() {
    let (server, report) = outdated_on_bare(
        "bare/cudnn.toml",
        "family = \"cudnn\"\n[[release]]\nversion = \"9.25.0.15\"\ncuda_majors = [12, 13]\nsource = \"https://pypi.org/project/nvidia-cudnn-cu12/9.25.0.15/\"\n",
    );
    let cudnn = report
        .families
        .iter()
        .find(|f| f.family == "cudnn")
        .unwrap();
    assert_eq!(cudnn.yanked, ["9.25.0.15 (no reason given)"]);
    assert!(report.text().contains(
        "cudnn: 1 yanked upstream that the catalog still offers: 9.25.0.15 (no reason given)"
    ));
    // Once recorded, it is not reported again.
    let stock = import::outdated::outdated(
        &Http::new(false),
        &Catalog::stock().unwrap(),
        &server.index(),
        &[],
        Some(DATE),
    )
    .unwrap();
    assert!(stock.families.iter().all(|f| f.yanked.is_empty()));
}
