//! Property tests of the solver against a brute-force oracle on small random catalogs.
//!
//! The oracle enumerates the whole cartesian product of candidates, keeps the assignments
//! that satisfy every rule, and picks the best by the documented preference order. The
//! solver must agree exactly: same success/failure (complete and sound), same stack.
//!
//! The random catalogs and specs are `proptest` strategies: every entry the small catalog
//! can have is kept or dropped at random, with random fields. When a property fails,
//! proptest shrinks the case (dropping entries, narrowing fields, relaxing requirements)
//! and reports the smallest catalog, printed as its TOML files, and spec that still fail.
//! The runs are deterministic: the same cases on every run, no regression files.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;

use proptest::prelude::Rng as _;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};

use super::rules::{Cand, Ctx};
use super::{members, solve, sort_cuda, ORDER};
use crate::catalog::Catalog;
use crate::core::version::{Version, VersionReq};
use crate::core::Component;
use crate::spec::Spec;
use crate::Error;

/// Random cases outside a property (`solve::matrix`'s tests draw their catalogs and specs
/// here): values of the same strategies, deterministic per seed, not shrunk.
pub(crate) struct Rng(TestRunner);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        let mut bytes = [0u8; 32];
        bytes[..8].copy_from_slice(&seed.to_le_bytes());
        let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
        Rng(TestRunner::new_with_rng(Config::default(), rng))
    }
    pub(crate) fn chance(&mut self, percent: u64) -> bool {
        self.0.rng().next_u64() % 100 < percent
    }
    fn draw<S: Strategy>(&mut self, strategy: S) -> S::Value {
        strategy
            .new_tree(&mut self.0)
            .expect("the strategies reject nothing")
            .current()
    }
}

/// A random small catalog as TOML files (one layer).
pub(crate) fn random_catalog(rng: &mut Rng) -> Vec<(String, String)> {
    rng.draw(catalog()).0
}

/// A random spec over a small catalog of [`random_catalog`] (whose GPUs are always the same).
pub(crate) fn random_spec(rng: &mut Rng, cat: &Catalog) -> Spec {
    let spec = rng.draw(spec());
    debug_assert!(spec
        .gpus
        .iter()
        .all(|g| cat.gpus.iter().any(|x| &x.id == g)));
    spec
}

/// A catalog layer's files (name, TOML text), shown as the text itself when a case fails.
#[derive(Clone, PartialEq)]
pub(crate) struct Files(pub(crate) Vec<(String, String)>);

impl fmt::Debug for Files {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (name, text) in &self.0 {
            writeln!(f, "--- {name}\n{text}")?;
        }
        Ok(())
    }
}

/// `true` with `percent` % probability; shrinks to `false`.
fn chance(percent: u32) -> prop::bool::Weighted {
    prop::bool::weighted(f64::from(percent) / 100.0)
}

/// `Some` with `percent` % probability; shrinks to `None`.
fn maybe<S: Strategy>(percent: u32, s: S) -> impl Strategy<Value = Option<S::Value>> {
    prop::option::weighted(f64::from(percent) / 100.0, s)
}

/// One of `items`; shrinks to the first.
fn pick(items: &'static [&'static str]) -> impl Strategy<Value = &'static str> {
    prop::sample::select(items)
}

/// Each of `items` kept with `percent` % probability, in order; shrinks to fewer.
fn subset(
    items: &'static [&'static str],
    percent: u32,
) -> impl Strategy<Value = Vec<&'static str>> {
    prop::collection::vec(chance(percent), items.len()).prop_map(move |keep| {
        items
            .iter()
            .zip(keep)
            .filter_map(|(item, k)| k.then_some(*item))
            .collect()
    })
}

const DRIVERS: &[&str] = &[
    "470.82.01",
    "525.60.13",
    "535.104.05",
    "550.54.15",
    "570.124.06",
    "580.65.06",
];
const BRANCHES: [(&str, &str); 6] = [
    ("470", "ltsb"),
    ("525", "pb"),
    ("535", "ltsb"),
    ("550", "pb"),
    ("570", "pb"),
    ("580", "ltsb"),
];
const CUDAS: [&str; 7] = [
    "11.8.0", "12.1.1", "12.4.0", "12.4.1", "12.8.0", "12.8.1", "13.0.0",
];
const CCS: [&str; 5] = ["7.0", "7.5", "8.0", "9.0", "12.0"];
/// The ids of the random catalog's GPUs, one per entry of [`CCS`].
const GPU_IDS: &[&str] = &["g0", "g1", "g2", "g3", "g4"];
const _: () = assert!(GPU_IDS.len() == CCS.len());
const PYTHONS: [&str; 3] = ["3.10", "3.11", "3.12"];

/// A random small catalog: every file of one layer.
pub(crate) fn catalog() -> impl Strategy<Value = Files> {
    (
        driver_file(),
        cuda_file(),
        gpus_file(),
        lib_files(),
        torch_releases(),
        vllm_releases(),
        deepspeed_releases(),
        extras_file(),
    )
        .prop_map(|(driver, (cuda, images), gpus, libs, torch, vllm, ds, extras)| {
            let mut files = vec![
                ("driver.toml".to_string(), driver),
                ("cuda.toml".to_string(), cuda),
                ("images.toml".to_string(), images),
                ("gpus.toml".to_string(), gpus),
                ("python.toml".to_string(), python_file()),
                (
                    "os.toml".to_string(),
                    "family = \"os\"\n\n[[os]]\nid = \"ubuntu22.04\"\ncuda = \"<13\"\nsource = \"test\"\n"
                        .to_string(),
                ),
            ];
            for lib in &libs {
                files.push((format!("{}.toml", lib.family), lib.text.clone()));
            }
            let (torch, torches) = torch_file(&torch, &libs);
            files.push(("torch.toml".to_string(), torch));
            files.push(("vllm.toml".to_string(), vllm_file(&vllm, &torches)));
            files.push(("deepspeed.toml".to_string(), deepspeed_file(&ds, &torches)));
            files.push(("extras.toml".to_string(), extras));
            Files(files)
        })
}

/// `driver.toml`: each branch's version kept or not, supported or end of life.
fn driver_file() -> impl Strategy<Value = String> {
    prop::collection::vec((chance(80), chance(50)), BRANCHES.len()).prop_map(|branches| {
        let mut d = String::from("family = \"driver\"\n");
        for ((branch, kind), (kept, supported)) in BRANCHES.iter().zip(branches) {
            let vs: Vec<String> = DRIVERS
                .iter()
                .filter(|v| kept && v.starts_with(branch))
                .map(|v| format!("\"{v}\""))
                .collect();
            if vs.is_empty() {
                continue;
            }
            let status = if supported { "supported" } else { "eol" };
            d.push_str(&format!("\n[[branch]]\nbranch = \"R{branch}\"\ntype = \"{kind}\"\nstatus = \"{status}\"\nversions = [{}]\nsource = \"test\"\n", vs.join(", ")));
        }
        d
    })
}

/// `cuda.toml`: fixed compatibility floors and nvcc targets; forward-compatibility packages
/// over random driver bases; releases with a random driver minimum (or none). And
/// `images.toml`: most releases with `nvidia/cuda` tags for the one OS (rule
/// `os.cuda-images` refuses the others).
fn cuda_file() -> impl Strategy<Value = (String, String)> {
    const FORWARD: [(&str, &str); 3] = [
        ("12.4", "cuda-compat-12-4"),
        ("12.8", "cuda-compat-12-8"),
        ("13.0", "cuda-compat-13-0"),
    ];
    let forward = prop::collection::vec(
        maybe(60, subset(&["\"R535\"", "\"R550\"", "\"R570\""], 50)),
        FORWARD.len(),
    );
    let releases = prop::collection::vec(maybe(70, maybe(85, pick(DRIVERS))), CUDAS.len());
    let imaged = prop::collection::vec(chance(85), CUDAS.len());
    (forward, releases, imaged).prop_map(|(forward, releases, imaged)| {
        let mut images = String::from("family = \"image\"\n");
        let mut c = String::from("family = \"cuda\"\n");
        for (major, floor) in [(11, "450.80.02"), (12, "525.60.13"), (13, "580.65.06")] {
            c.push_str(&format!(
                "\n[[minor_compat]]\nmajor = {major}\ndriver_min = \"{floor}\"\nsource = \"test\"\n"
            ));
        }
        for ((cuda, pkg), bases) in FORWARD.iter().zip(forward) {
            if let Some(bases) = bases {
                let bases = bases.join(", ");
                c.push_str(&format!("\n[[forward_compat]]\ncuda = \"{cuda}\"\npackage = \"{pkg}\"\nbases = [{bases}]\nsource = \"test\"\n"));
            }
        }
        c.push_str("\n[[targets]]\ncuda = \"<12.8\"\nsm = [\"70\", \"75\", \"80\", \"90\", \"90a\"]\nsource = \"test\"\n");
        c.push_str("\n[[targets]]\ncuda = \">=12.8, <13\"\nsm = [\"70\", \"75\", \"80\", \"90\", \"90a\", \"120\"]\nsource = \"test\"\n");
        c.push_str("\n[[targets]]\ncuda = \">=13\"\nsm = [\"75\", \"80\", \"90\", \"90a\", \"120\"]\nsource = \"test\"\n");
        for ((v, release), imaged) in CUDAS.iter().zip(releases).zip(imaged) {
            if let Some(min) = release {
                let min = min.map(|d| format!("driver_min = \"{d}\"\n"));
                c.push_str(&format!(
                    "\n[[release]]\nversion = \"{v}\"\n{}source = \"test\"\n",
                    min.unwrap_or_default()
                ));
                if imaged {
                    images.push_str(&format!("\n[[image]]\ncuda = \"{v}\"\nos = \"ubuntu22.04\"\ntags = [\"{v}-runtime-ubuntu22.04\", \"{v}-devel-ubuntu22.04\"]\nstatus = \"supported\"\nsource = \"test\"\n"));
                }
            }
        }
        (c, images)
    })
}

/// `gpus.toml`: one GPU per compute capability, data center or not; the Volta one may stop
/// at a last driver branch.
fn gpus_file() -> impl Strategy<Value = String> {
    prop::collection::vec((chance(60), chance(70)), CCS.len()).prop_map(|gpus| {
        let mut g = String::from("family = \"gpu\"\n");
        for (i, (cc, (dc, last))) in CCS.iter().zip(gpus).enumerate() {
            let last = if *cc == "7.0" && last {
                "last_driver_branch = \"R550\"\n"
            } else {
                ""
            };
            g.push_str(&format!("\n[[gpu]]\nid = \"{}\"\nname = \"GPU {i}\"\ncc = \"{cc}\"\narch = \"a{i}\"\ndatacenter = {dc}\n{last}source = \"test\"\n", GPU_IDS[i]));
        }
        g
    })
}

fn python_file() -> String {
    let mut p = String::from("family = \"python\"\n");
    for v in PYTHONS {
        p.push_str(&format!(
            "\n[[release]]\nversion = \"{v}\"\nsource = \"test\"\n"
        ));
    }
    p
}

/// `cudnn.toml` or `nccl.toml` and the versions it keeps (torch wheels pin them).
#[derive(Clone, Debug)]
struct Lib {
    family: &'static str,
    text: String,
    kept: Vec<&'static str>,
}

/// cuDNN and NCCL: each release for a random set of CUDA majors (none: left out), some with
/// a minimum compute capability.
fn lib_files() -> impl Strategy<Value = [Lib; 2]> {
    const LIBS: [(&str, [&str; 3]); 2] = [
        ("cudnn", ["8.9.2.26", "9.1.0.70", "9.8.0.87"]),
        ("nccl", ["2.18.1", "2.21.5", "2.26.2"]),
    ];
    let release = (subset(&["11", "12", "13"], 60), chance(20));
    prop::collection::vec(release, 6).prop_map(|releases| {
        LIBS.map(|(family, versions)| {
            let mut lib = Lib {
                family,
                text: format!("family = \"{family}\"\n"),
                kept: Vec::new(),
            };
            let first = if family == "cudnn" { 0 } else { 3 };
            for (v, (majors, min)) in versions.into_iter().zip(&releases[first..first + 3]) {
                if majors.is_empty() {
                    continue;
                }
                let min = if *min { "min_cc = \"7.5\"\n" } else { "" };
                lib.text.push_str(&format!(
                    "\n[[release]]\nversion = \"{v}\"\ncuda_majors = [{}]\n{min}source = \"test\"\n",
                    majors.join(", ")
                ));
                lib.kept.push(v);
            }
            lib
        })
    })
}

/// A torch release's random part: its Python range and, per CUDA variant, a wheel or none.
#[derive(Clone, Debug)]
struct TorchRelease {
    python: &'static str,
    wheels: Vec<Option<Wheel>>,
}

/// A wheel's arch list and its cuDNN and NCCL pins (an index into the kept releases).
#[derive(Clone, Debug)]
struct Wheel {
    archs: Vec<&'static str>,
    pins: [Option<usize>; 2],
}

const TORCHES: [&str; 3] = ["2.4.0", "2.5.1", "2.7.0"];
const VARIANTS: [(&str, &str); 4] = [
    ("cu118", "11.8"),
    ("cu124", "12.4"),
    ("cu128", "12.8"),
    ("cu130", "13.0"),
];

fn torch_releases() -> impl Strategy<Value = Vec<Option<TorchRelease>>> {
    let archs = &[
        "\"7.0\"",
        "\"7.5\"",
        "\"8.0\"",
        "\"9.0\"",
        "\"12.0\"",
        "\"9.0+PTX\"",
    ];
    // Pins index the kept releases modulo their number (1 to 3): 0..6 picks evenly.
    let wheel = (
        subset(archs, 60),
        maybe(50, 0..6usize),
        maybe(50, 0..6usize),
    )
        .prop_map(|(archs, cudnn, nccl)| Wheel {
            archs,
            pins: [cudnn, nccl],
        });
    let python = pick(&["\">=3.10, <3.13\"", "\">=3.11\"", "\"<3.12\""]);
    let release = (
        python,
        prop::collection::vec(maybe(55, wheel), VARIANTS.len()),
    )
        .prop_map(|(python, wheels)| TorchRelease { python, wheels });
    prop::collection::vec(maybe(80, release), TORCHES.len())
}

/// `torch.toml` and the torch versions it has (a release without wheels is left out).
fn torch_file(releases: &[Option<TorchRelease>], libs: &[Lib; 2]) -> (String, Vec<&'static str>) {
    let mut t = String::from("family = \"torch\"\n");
    let mut torches = Vec::new();
    for (v, release) in TORCHES.iter().zip(releases) {
        let Some(r) = release else { continue };
        let wheels: Vec<(&(&str, &str), &Wheel)> = VARIANTS
            .iter()
            .zip(&r.wheels)
            .filter_map(|(variant, w)| w.as_ref().map(|w| (variant, w)))
            .collect();
        let Some(((first, _), _)) = wheels.first() else {
            continue;
        };
        t.push_str(&format!("\n[[release]]\nversion = \"{v}\"\npython = {}\npypi_variant = \"{first}\"\nsource = \"test\"\n", r.python));
        for ((variant, cuda), w) in wheels {
            let mut pins = String::new();
            for (lib, pin) in libs.iter().zip(w.pins) {
                if let (Some(i), false) = (pin, lib.kept.is_empty()) {
                    let version = lib.kept[i % lib.kept.len()];
                    pins.push_str(&format!("{} = \"{version}\"\n", lib.family));
                }
            }
            t.push_str(&format!(
                "\n[[wheel]]\ntorch = [\"{v}\"]\nvariant = \"{variant}\"\ncuda = \"{cuda}\"\nindex_url = \"https://example.org/{variant}\"\narch_list = [{}]\n{pins}source = \"test\"\n",
                w.archs.join(", ")
            ));
        }
        torches.push(*v);
    }
    (t, torches)
}

/// vLLM releases: the torch they pin (an index into the torch versions), CUDA, minimum
/// compute capability.
fn vllm_releases() -> impl Strategy<Value = Vec<Option<(usize, &'static str, &'static str)>>> {
    let release = (
        0..6usize,
        pick(&["12.1", "12.4", "13.0", "11.8"]),
        pick(&["7.0", "7.5", "8.0"]),
    );
    prop::collection::vec(maybe(70, release), 3)
}

/// `vllm.toml` (empty without torch).
fn vllm_file(releases: &[Option<(usize, &str, &str)>], torches: &[&str]) -> String {
    let mut vl = String::from("family = \"vllm\"\n");
    if torches.is_empty() {
        return vl;
    }
    for (i, (v, release)) in ["0.5.0", "0.6.3.post1", "0.8.0"]
        .iter()
        .zip(releases)
        .enumerate()
    {
        if let Some((torch, cu, min)) = release {
            let tv = torches[torch % torches.len()];
            vl.push_str(&format!("\n[[release]]\nversion = \"{v}\"\ntorch = \"{tv}\"\ncuda = \"{cu}\"\npython = \">=3.{}\"\nmin_cc = \"{min}\"\nsource = \"test\"\n", 9 + i));
        }
    }
    vl
}

/// DeepSpeed releases: the CUDA mismatches they accept, whether they need torch ≥ 2.5.
fn deepspeed_releases() -> impl Strategy<Value = Vec<Option<(&'static str, bool)>>> {
    let ok = pick(&[
        "[]",
        "[\"12.0\", \"12.1\"]",
        "[\"12.1\", \"12.4\", \"12.8\"]",
    ]);
    prop::collection::vec(maybe(70, (ok, chance(50))), 2)
}

/// `deepspeed.toml` (empty without torch).
fn deepspeed_file(releases: &[Option<(&str, bool)>], torches: &[&str]) -> String {
    let mut ds = String::from("family = \"deepspeed\"\n");
    if torches.is_empty() {
        return ds;
    }
    for (v, release) in ["0.12.0", "0.16.4"].iter().zip(releases) {
        if let Some((ok, needs_torch)) = release {
            let torch = if *needs_torch {
                "torch = \">=2.5\"\n"
            } else {
                ""
            };
            ds.push_str(&format!("\n[[release]]\nversion = \"{v}\"\n{torch}cuda_mismatch_ok = {ok}\nsource = \"test\"\n"));
        }
    }
    ds
}

/// The extras the random specs use: flash-attn (with a differently named distribution, to
/// exercise the own-project-first preference), xformers, and cupy (two distributions of one
/// version, keyed apart by `pypi_name`).
const EXTRAS: [Component; 3] = [Component::FlashAttn, Component::Xformers, Component::Cupy];

/// `extras.toml`: each entry kept or not, with random torch, Python, CUDA and GPU bounds.
fn extras_file() -> impl Strategy<Value = String> {
    const ENTRIES: [(&str, &str, &str); 7] = [
        ("flash-attn", "2.6.3", "flash-attn"),
        ("flash-attn", "2.8.3", "flash-attn"),
        ("flash-attn", "3.0.0", "flash_attn_3"),
        ("xformers", "0.0.28", "xformers"),
        ("xformers", "0.0.30", "xformers"),
        ("cupy", "14.2.0", "cupy-cuda12x"),
        ("cupy", "14.2.0", "cupy-cuda13x"),
    ];
    let bounds = (
        maybe(60, pick(&[">=2.5", "==2.5.1", "<2.7", ">=2.4, <3"])),
        maybe(50, pick(&[">=3.11", "<3.12", ">=3.10"])),
        maybe(60, pick(&["[11, 12]", "[12]", "[12, 13]", "[13]"])),
        maybe(40, pick(&["7.5", "8.0", "9.0"])),
    );
    prop::collection::vec(maybe(75, bounds), ENTRIES.len()).prop_map(|entries| {
        let mut x = String::from("family = \"extra\"\n");
        for ((name, version, pypi), entry) in ENTRIES.iter().zip(entries) {
            let Some((torch, python, majors, min_cc)) = entry else {
                continue;
            };
            x.push_str(&format!(
                "\n[[extra]]\nname = \"{name}\"\nversion = \"{version}\"\nlayer = \"framework\"\npypi_name = \"{pypi}\"\nindex = \"https://example.org/simple\"\nsource = \"test\"\n"
            ));
            if let Some(t) = torch {
                x.push_str(&format!("torch = \"{t}\"\n"));
            }
            if let Some(p) = python {
                x.push_str(&format!("python = \"{p}\"\n"));
            }
            if let Some(m) = majors {
                let m = match *pypi {
                    "cupy-cuda12x" => "[12]",
                    "cupy-cuda13x" => "[13]",
                    _ => m,
                };
                x.push_str(&format!("cuda_majors = {m}\n"));
            }
            if let Some(c) = min_cc {
                x.push_str(&format!("min_cc = \"{c}\"\n"));
            }
        }
        x
    })
}

/// A random spec over the small catalog.
pub(crate) fn spec() -> impl Strategy<Value = Spec> {
    let gpus = (subset(GPU_IDS, 35), 0..GPU_IDS.len());
    let driver = maybe(50, pick(DRIVERS));
    let components: Vec<_> = Component::ALL.iter().map(|c| requirement(*c)).collect();
    (gpus, driver, components, chance(20)).prop_map(|((gpus, fallback), driver, requested, os)| {
        let mut gpus: Vec<String> = gpus.into_iter().map(str::to_string).collect();
        if gpus.is_empty() {
            gpus.push(GPU_IDS[fallback].to_string());
        }
        let mut components: BTreeMap<Component, VersionReq> =
            requested.into_iter().flatten().collect();
        if components.keys().all(|c| *c == Component::Driver) {
            components.insert(Component::Cuda, VersionReq::any());
        }
        Spec {
            name: "prop".into(),
            os: os.then(|| "ubuntu22.04".to_string()),
            gpus,
            archs: vec![],
            driver: driver.map(|d| Version::parse(d).unwrap()),
            components,
            torch_source: None,
            deploy: Default::default(),
            check: Vec::new(),
        }
    })
}

/// Whether a random spec asks for `c`, and how: `*` or a narrower requirement. Only the
/// extras the random catalog has, and fewer of them: each multiplies the oracle's work.
fn requirement(c: Component) -> BoxedStrategy<Option<(Component, VersionReq)>> {
    let (percent, narrow_percent, options): (u32, u32, &'static [&'static str]) = match c {
        c if c.is_extra() && !EXTRAS.contains(&c) => return Just(None).boxed(),
        c if c.is_extra() => (20, 30, &["<3", ">=2.8", "14.2"]),
        Component::Driver => (20, 40, &["550", ">=535", "<560"]),
        Component::Cuda => (45, 40, &["12", "12.4", ">=12.8", "<12.8"]),
        Component::Torch => (45, 40, &["==2.5.1+cu124", ">=2.5", "<2.7"]),
        Component::Python => (45, 40, &["3.11", ">=3.11"]),
        _ => (45, 40, &[">=0", "<2.20"]),
    };
    maybe(percent, maybe(narrow_percent, pick(options)))
        .prop_map(move |asked| {
            asked.map(|narrow| {
                let req = narrow.map_or_else(VersionReq::any, |r| VersionReq::parse(r).unwrap());
                (c, req)
            })
        })
        .boxed()
}

/// An assignment with its rank vector (lower is better).
type Ranked = (Vec<usize>, Vec<(Component, Cand)>);

/// Brute force: every combination, every rule, best by the documented order.
pub(crate) fn oracle(cat: &Catalog, spec: &Spec) -> Option<BTreeMap<Component, Version>> {
    let ctx = Ctx::new(cat, spec);
    let m = members(spec);
    let order: Vec<Component> = ORDER
        .iter()
        .copied()
        .filter(|c| m.contains_key(c))
        .collect();
    let mut best: Option<Ranked> = None;
    let mut assign: Vec<(Component, Cand)> = Vec::new();
    enumerate(&ctx, &order, &mut assign, &mut Vec::new(), &mut best);
    best.map(|(_, a)| {
        a.iter()
            .map(|(c, k)| (*c, ctx.version(*c, *k).clone()))
            .collect()
    })
}

fn enumerate(
    ctx: &Ctx<'_>,
    order: &[Component],
    assign: &mut Vec<(Component, Cand)>,
    ranks: &mut Vec<usize>,
    best: &mut Option<Ranked>,
) {
    if assign.len() == order.len() {
        if valid(ctx, assign) && best.as_ref().is_none_or(|(r, _)| ranks[..] < r[..]) {
            *best = Some((ranks.clone(), assign.clone()));
        }
        return;
    }
    let c = order[assign.len()];
    let mut cands = ctx.candidates(c);
    if c == Component::Cuda {
        sort_cuda(ctx, &mut cands, assign);
    }
    for (rank, k) in cands.into_iter().enumerate() {
        assign.push((c, k));
        ranks.push(rank);
        enumerate(ctx, order, assign, ranks, best);
        ranks.pop();
        assign.pop();
    }
}

/// Every rule on a complete assignment.
pub(crate) fn valid(ctx: &Ctx<'_>, assign: &[(Component, Cand)]) -> bool {
    for &(c, k) in assign {
        if ctx.check_unary(c, k).is_err() {
            return false;
        }
        if c == Component::Driver && k == Cand::Host {
            if let Some(h) = &ctx.host_driver {
                if ctx.driver_fits_gpus(h).is_err() {
                    return false;
                }
            }
        }
    }
    for (i, &(ca, a)) in assign.iter().enumerate() {
        for &(cb, b) in &assign[i + 1..] {
            let r = if ca < cb {
                ctx.check_pair(ca, a, cb, b)
            } else {
                ctx.check_pair(cb, b, ca, a)
            };
            if r.is_err() {
                return false;
            }
        }
    }
    let get = |c: Component| {
        assign.iter().find(|(x, _)| *x == c).and_then(|(_, k)| {
            if let Cand::Idx(i) = k {
                Some(*i)
            } else {
                None
            }
        })
    };
    if let (Some(cu), Some(t), Some(ds)) = (
        get(Component::Cuda),
        get(Component::Torch),
        get(Component::Deepspeed),
    ) {
        if ctx.check_triple(cu, t, ds).is_err() {
            return false;
        }
    }
    true
}

fn solver(cat: &Catalog, spec: &Spec) -> Option<BTreeMap<Component, Version>> {
    match solve(cat, spec) {
        Ok(r) => Some(
            r.picks
                .iter()
                .map(|p| (p.component, p.version.clone()))
                .collect(),
        ),
        Err(Error::NoSolution(_)) => None,
        Err(e) => panic!("unexpected error {e}"),
    }
}

/// Random catalogs per property. The bar is 10,000 for the brute-force comparison;
/// `tests/run.sh` runs the properties at that count in a release build. The default keeps
/// a debug `cargo test` quick.
fn cases() -> u64 {
    std::env::var("GPUSTACK_PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(600)
}

/// The same catalog with its files and the entries inside each file in another order
/// (reversed, then rotated by `turn`).
fn reorder(files: &[(String, String)], turn: usize) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = files
        .iter()
        .map(|(name, text)| {
            let mut parts = text.split("\n[[");
            let head = parts.next().unwrap_or_default().to_string();
            let mut entries: Vec<&str> = parts.collect();
            entries.reverse();
            if !entries.is_empty() {
                let n = turn % entries.len();
                entries.rotate_left(n);
            }
            let mut t = head;
            for e in entries {
                t.push_str("\n[[");
                t.push_str(e);
                if !t.ends_with('\n') {
                    t.push('\n');
                }
            }
            (name.clone(), t)
        })
        .collect();
    out.reverse();
    out
}

/// The lock the solver writes, or its explanation: what a user sees either way.
fn outcome(cat: &Catalog, spec: &Spec) -> Result<String, String> {
    solve(cat, spec)
        .and_then(|r| crate::Lock::from_resolution(cat, &r).map(|l| l.to_toml()))
        .map_err(|e| e.to_string())
}

/// A deterministic runner of `cases` cases (the same ones on every run) that writes no
/// regression files and shrinks a failure before reporting it.
fn runner(cases: u64) -> TestRunner {
    let config = Config {
        cases: u32::try_from(cases).unwrap_or(u32::MAX),
        failure_persistence: None,
        ..Config::default()
    };
    TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha))
}

/// Runs `test` on `cases` values of `strategy`; on failure, panics with proptest's report
/// of the minimal failing input.
fn check<S: Strategy>(
    cases: u64,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) {
    if let Err(e) = runner(cases).run(&strategy, test) {
        panic!("{e}");
    }
}

fn load(files: &Files) -> Result<Catalog, TestCaseError> {
    Catalog::from_layers(std::slice::from_ref(&files.0))
        .map_err(|e| TestCaseError::fail(format!("random catalog invalid: {e}")))
}

#[test]
fn solver_agrees_with_brute_force() {
    // Solved and unsolvable requests, all and those with extras.
    let counts = RefCell::new([0u64; 4]);
    let case = (catalog(), prop::collection::vec(spec(), 4));
    check(cases(), case, |(files, specs)| {
        let cat = load(&files)?;
        for spec in &specs {
            let got = solver(&cat, spec);
            let want = oracle(&cat, spec);
            prop_assert_eq!(&got, &want, "solver and oracle disagree on {:#?}", spec);
            let mut n = counts.borrow_mut();
            n[usize::from(got.is_none())] += 1;
            if spec.components.keys().any(|c| c.is_extra()) {
                n[2 + usize::from(got.is_none())] += 1;
            }
        }
        Ok(())
    });
    let [sat, unsat, extra_sat, extra_unsat] = counts.into_inner();
    // The generator must exercise both outcomes, or the test proves little.
    assert!(sat > 50 && unsat > 50, "sat {sat}, unsat {unsat}");
    let min = cases() / 30;
    assert!(
        extra_sat > min && extra_unsat > min,
        "with extras: sat {extra_sat}, unsat {extra_unsat}"
    );
}

#[test]
fn catalog_order_does_not_change_the_lock() {
    check(
        cases() / 4,
        (catalog(), spec(), 0..64usize),
        |(files, spec, turn)| {
            let cat = load(&files)?;
            let reordered = reorder(&files.0, turn);
            prop_assert_ne!(&files.0, &reordered, "the reorder must change something");
            let cat2 = Catalog::from_layers(&[reordered]).unwrap();
            // Locks byte for byte; failures by their explanation, whose `file:line` citations
            // may move with the entries, so only the text before the first citation is compared.
            match (outcome(&cat, &spec), outcome(&cat2, &spec)) {
                (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
                (Err(a), Err(b)) => {
                    let head = |e: &str| e.lines().take(2).collect::<Vec<_>>().join("\n");
                    prop_assert_eq!(head(&a), head(&b));
                }
                (a, b) => prop_assert!(false, "{:?}\nvs reordered\n{:?}", a, b),
            }
            Ok(())
        },
    );
}

#[test]
fn relaxing_a_requirement_never_breaks_a_solution() {
    let relaxed_ok = RefCell::new(0);
    check(cases() / 2, (catalog(), spec()), |(files, spec)| {
        let cat = load(&files)?;
        if solver(&cat, &spec).is_none() {
            return Ok(());
        }
        for c in spec.components.keys() {
            let mut relaxed = spec.clone();
            relaxed.components.insert(*c, VersionReq::any());
            prop_assert!(solver(&cat, &relaxed).is_some(), "relaxing {} broke it", c);
            *relaxed_ok.borrow_mut() += 1;
        }
        // Fewer GPUs to serve is a relaxation too.
        if spec.gpus.len() > 1 {
            let mut relaxed = spec.clone();
            relaxed.gpus.pop();
            prop_assert!(
                solver(&cat, &relaxed).is_some(),
                "serving fewer GPUs broke it"
            );
        }
        // An installed driver is a host fact, not a requirement: forgetting it is a
        // relaxation only when the catalog can resolve that same driver. (A host driver the
        // catalog does not list may be the only one that works: seed 1778 at 10,000 cases.)
        if let Some(d) = &spec.driver {
            if cat.drivers.iter().any(|r| &r.version == d) {
                let mut relaxed = spec.clone();
                relaxed.driver = None;
                prop_assert!(
                    solver(&cat, &relaxed).is_some(),
                    "resolving the installed driver {} broke it",
                    d
                );
            }
        }
        Ok(())
    });
    let relaxed_ok = relaxed_ok.into_inner();
    assert!(
        relaxed_ok > cases() / 10,
        "only {relaxed_ok} relaxations tried"
    );
}

/// An `[[extra]]` entry that nothing in the request mentions: its version, torch bound and
/// CUDA majors.
fn unrelated_extra(
) -> impl Strategy<Value = (&'static str, Option<&'static str>, Option<&'static str>)> {
    (
        pick(&["0.1.0", "9.9.9", "2.6.3"]),
        maybe(50, pick(&[">=2.5", "<2.4"])),
        maybe(50, pick(&["[11]", "[12]", "[13]"])),
    )
}

/// The text of that entry, for component `c`.
fn unrelated_entry(
    c: Component,
    (version, torch, majors): (&str, Option<&str>, Option<&str>),
) -> String {
    let mut e = format!(
        "\n[[extra]]\nname = \"{}\"\nversion = \"{version}\"\nlayer = \"framework\"\npypi_name = \"unrelated-{}\"\nindex = \"https://example.org/simple\"\nsource = \"test\"\n",
        c.name(),
        c.name()
    );
    if let Some(t) = torch {
        e.push_str(&format!("torch = \"{t}\"\n"));
    }
    if let Some(m) = majors {
        e.push_str(&format!("cuda_majors = {m}\n"));
    }
    e
}

#[test]
fn an_unrelated_component_never_changes_the_result() {
    let added = RefCell::new(0);
    let case = (catalog(), spec(), 0..64usize, unrelated_extra());
    check(cases() / 4, case, |(files, spec, which, extra)| {
        let cat = load(&files)?;
        let unrelated: Vec<Component> = Component::EXTRAS
            .iter()
            .copied()
            .filter(|c| !spec.components.contains_key(c))
            .collect();
        if unrelated.is_empty() {
            return Ok(());
        }
        let c = unrelated[which % unrelated.len()];
        let mut more = files.0.clone();
        let entry = unrelated_entry(c, extra);
        match more.iter_mut().find(|(n, _)| n == "extras.toml") {
            Some((_, t)) => t.push_str(&entry),
            None => more.push(("extras.toml".into(), format!("family = \"extra\"\n{entry}"))),
        }
        let Ok(cat2) = Catalog::from_layers(&[more]) else {
            // Same name and version as an existing entry: a duplicate, refused at load.
            return Ok(());
        };
        prop_assert_eq!(
            outcome(&cat, &spec),
            outcome(&cat2, &spec),
            "adding an unrelated {} changed the result",
            c
        );
        *added.borrow_mut() += 1;
        Ok(())
    });
    let added = added.into_inner();
    assert!(added > cases() / 8, "only {added} cases");
}
