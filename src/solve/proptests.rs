//! Property tests of the solver against a brute-force oracle on small random catalogs.
//!
//! The oracle enumerates the whole cartesian product of candidates, keeps the assignments
//! that satisfy every rule, and picks the best by the documented preference order. The
//! solver must agree exactly: same success/failure (complete and sound), same stack.

use std::collections::BTreeMap;

use super::rules::{Cand, Ctx};
use super::{members, solve, sort_cuda, ORDER};
use crate::catalog::Catalog;
use crate::core::version::{Version, VersionReq};
use crate::core::Component;
use crate::spec::Spec;
use crate::Error;

/// xorshift64*: small, deterministic, no dependency.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub(crate) fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    pub(crate) fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
    pub(crate) fn subset<T: Clone>(&mut self, v: &[T], percent: u64) -> Vec<T> {
        v.iter().filter(|_| self.chance(percent)).cloned().collect()
    }
}

const DRIVERS: [&str; 6] = [
    "470.82.01",
    "525.60.13",
    "535.104.05",
    "550.54.15",
    "570.124.06",
    "580.65.06",
];
const CUDAS: [&str; 7] = [
    "11.8.0", "12.1.1", "12.4.0", "12.4.1", "12.8.0", "12.8.1", "13.0.0",
];
const CCS: [&str; 5] = ["7.0", "7.5", "8.0", "9.0", "12.0"];
const PYTHONS: [&str; 3] = ["3.10", "3.11", "3.12"];

/// A random small catalog as TOML files (one layer).
pub(crate) fn random_catalog(rng: &mut Rng) -> Vec<(String, String)> {
    let mut files = Vec::new();
    let mut d = String::from("family = \"driver\"\n");
    for (branch, kind) in [
        ("470", "ltsb"),
        ("525", "pb"),
        ("535", "ltsb"),
        ("550", "pb"),
        ("570", "pb"),
        ("580", "ltsb"),
    ] {
        let vs: Vec<&&str> = DRIVERS
            .iter()
            .filter(|v| v.starts_with(branch))
            .filter(|_| rng.chance(80))
            .collect();
        if vs.is_empty() {
            continue;
        }
        let status = if rng.chance(50) { "supported" } else { "eol" };
        let list = vs
            .iter()
            .map(|v| format!("\"{v}\""))
            .collect::<Vec<_>>()
            .join(", ");
        d.push_str(&format!("\n[[branch]]\nbranch = \"R{branch}\"\ntype = \"{kind}\"\nstatus = \"{status}\"\nversions = [{list}]\nsource = \"test\"\n"));
    }
    files.push(("driver.toml".to_string(), d));

    let mut c = String::from("family = \"cuda\"\n");
    for (major, floor) in [(11, "450.80.02"), (12, "525.60.13"), (13, "580.65.06")] {
        c.push_str(&format!(
            "\n[[minor_compat]]\nmajor = {major}\ndriver_min = \"{floor}\"\nsource = \"test\"\n"
        ));
    }
    for (cuda, pkg) in [
        ("12.4", "cuda-compat-12-4"),
        ("12.8", "cuda-compat-12-8"),
        ("13.0", "cuda-compat-13-0"),
    ] {
        if rng.chance(60) {
            let bases = rng
                .subset(&["\"R535\"", "\"R550\"", "\"R570\""], 50)
                .join(", ");
            c.push_str(&format!("\n[[forward_compat]]\ncuda = \"{cuda}\"\npackage = \"{pkg}\"\nbases = [{bases}]\nsource = \"test\"\n"));
        }
    }
    c.push_str("\n[[targets]]\ncuda = \"<12.8\"\nsm = [\"70\", \"75\", \"80\", \"90\", \"90a\"]\nsource = \"test\"\n");
    c.push_str("\n[[targets]]\ncuda = \">=12.8, <13\"\nsm = [\"70\", \"75\", \"80\", \"90\", \"90a\", \"120\"]\nsource = \"test\"\n");
    c.push_str("\n[[targets]]\ncuda = \">=13\"\nsm = [\"75\", \"80\", \"90\", \"90a\", \"120\"]\nsource = \"test\"\n");
    for v in CUDAS {
        if rng.chance(70) {
            let min = if rng.chance(85) {
                format!("driver_min = \"{}\"\n", rng.pick(&DRIVERS))
            } else {
                String::new()
            };
            c.push_str(&format!(
                "\n[[release]]\nversion = \"{v}\"\n{min}source = \"test\"\n"
            ));
        }
    }
    files.push(("cuda.toml".to_string(), c));

    let mut g = String::from("family = \"gpu\"\n");
    for (i, cc) in CCS.iter().enumerate() {
        let dc = rng.chance(60);
        let last = if *cc == "7.0" && rng.chance(70) {
            "last_driver_branch = \"R550\"\n"
        } else {
            ""
        };
        g.push_str(&format!("\n[[gpu]]\nid = \"g{i}\"\nname = \"GPU {i}\"\ncc = \"{cc}\"\narch = \"a{i}\"\ndatacenter = {dc}\n{last}source = \"test\"\n"));
    }
    files.push(("gpus.toml".to_string(), g));

    let mut p = String::from("family = \"python\"\n");
    for v in PYTHONS {
        p.push_str(&format!(
            "\n[[release]]\nversion = \"{v}\"\nsource = \"test\"\n"
        ));
    }
    files.push(("python.toml".to_string(), p));
    files.push((
        "os.toml".to_string(),
        "family = \"os\"\n\n[[os]]\nid = \"ubuntu22.04\"\ncuda = \"<13\"\nsource = \"test\"\n"
            .to_string(),
    ));

    let mut libs = BTreeMap::new();
    for (fam, vs) in [
        ("cudnn", ["8.9.2.26", "9.1.0.70", "9.8.0.87"]),
        ("nccl", ["2.18.1", "2.21.5", "2.26.2"]),
    ] {
        let mut t = format!("family = \"{fam}\"\n");
        let mut kept = Vec::new();
        for v in vs {
            let majors = rng.subset(&["11", "12", "13"], 60);
            if majors.is_empty() {
                continue;
            }
            let min = if rng.chance(20) {
                "min_cc = \"7.5\"\n"
            } else {
                ""
            };
            t.push_str(&format!(
                "\n[[release]]\nversion = \"{v}\"\ncuda_majors = [{}]\n{min}source = \"test\"\n",
                majors.join(", ")
            ));
            kept.push(v);
        }
        libs.insert(fam, kept);
        files.push((format!("{fam}.toml"), t));
    }

    let mut t = String::from("family = \"torch\"\n");
    let mut torches = Vec::new();
    for v in ["2.4.0", "2.5.1", "2.7.0"] {
        if !rng.chance(80) {
            continue;
        }
        let variants: Vec<(&str, &str)> = [
            ("cu118", "11.8"),
            ("cu124", "12.4"),
            ("cu128", "12.8"),
            ("cu130", "13.0"),
        ]
        .into_iter()
        .filter(|_| rng.chance(55))
        .collect();
        if variants.is_empty() {
            continue;
        }
        let py = rng.pick(&["\">=3.10, <3.13\"", "\">=3.11\"", "\"<3.12\""]);
        t.push_str(&format!("\n[[release]]\nversion = \"{v}\"\npython = {py}\npypi_variant = \"{}\"\nsource = \"test\"\n", variants[0].0));
        for (var, cu) in &variants {
            let archs = rng.subset(
                &[
                    "\"7.0\"",
                    "\"7.5\"",
                    "\"8.0\"",
                    "\"9.0\"",
                    "\"12.0\"",
                    "\"9.0+PTX\"",
                ],
                60,
            );
            let mut pins = String::new();
            for fam in ["cudnn", "nccl"] {
                if rng.chance(50) && !libs[fam].is_empty() {
                    pins.push_str(&format!("{fam} = \"{}\"\n", rng.pick(&libs[fam])));
                }
            }
            t.push_str(&format!(
                "\n[[wheel]]\ntorch = [\"{v}\"]\nvariant = \"{var}\"\ncuda = \"{cu}\"\nindex_url = \"https://example.org/{var}\"\narch_list = [{}]\n{pins}source = \"test\"\n",
                archs.join(", ")
            ));
        }
        torches.push(v);
    }
    files.push(("torch.toml".to_string(), t));

    let mut vl = String::from("family = \"vllm\"\n");
    let mut ds = String::from("family = \"deepspeed\"\n");
    if !torches.is_empty() {
        for (i, v) in ["0.5.0", "0.6.3.post1", "0.8.0"].iter().enumerate() {
            if rng.chance(70) {
                let tv = rng.pick(&torches);
                let cu = rng.pick(&["12.1", "12.4", "13.0", "11.8"]);
                let min = rng.pick(&["7.0", "7.5", "8.0"]);
                vl.push_str(&format!("\n[[release]]\nversion = \"{v}\"\ntorch = \"{tv}\"\ncuda = \"{cu}\"\npython = \">=3.{}\"\nmin_cc = \"{min}\"\nsource = \"test\"\n", 9 + i));
            }
        }
        for v in ["0.12.0", "0.16.4"] {
            if rng.chance(70) {
                let ok = rng.pick(&[
                    "[]",
                    "[\"12.0\", \"12.1\"]",
                    "[\"12.1\", \"12.4\", \"12.8\"]",
                ]);
                let torch = if rng.chance(50) {
                    "torch = \">=2.5\"\n"
                } else {
                    ""
                };
                ds.push_str(&format!("\n[[release]]\nversion = \"{v}\"\n{torch}cuda_mismatch_ok = {ok}\nsource = \"test\"\n"));
            }
        }
    }
    files.push(("vllm.toml".to_string(), vl));
    files.push(("deepspeed.toml".to_string(), ds));
    files.push(("extras.toml".to_string(), random_extras(rng)));
    files
}

/// The extras the random specs use: flash-attn (with a differently named distribution, to
/// exercise the own-project-first preference), xformers, and cupy (two distributions of one
/// version, keyed apart by `pypi_name`).
const EXTRAS: [Component; 3] = [Component::FlashAttn, Component::Xformers, Component::Cupy];

fn random_extras(rng: &mut Rng) -> String {
    let mut x = String::from("family = \"extra\"\n");
    let entries: [(&str, &str, &str); 7] = [
        ("flash-attn", "2.6.3", "flash-attn"),
        ("flash-attn", "2.8.3", "flash-attn"),
        ("flash-attn", "3.0.0", "flash_attn_3"),
        ("xformers", "0.0.28", "xformers"),
        ("xformers", "0.0.30", "xformers"),
        ("cupy", "14.2.0", "cupy-cuda12x"),
        ("cupy", "14.2.0", "cupy-cuda13x"),
    ];
    for (name, version, pypi) in entries {
        if !rng.chance(75) {
            continue;
        }
        let mut e = format!(
            "\n[[extra]]\nname = \"{name}\"\nversion = \"{version}\"\nlayer = \"framework\"\npypi_name = \"{pypi}\"\nindex = \"https://example.org/simple\"\nsource = \"test\"\n"
        );
        if rng.chance(60) {
            let t = rng.pick(&[">=2.5", "==2.5.1", "<2.7", ">=2.4, <3"]);
            e.push_str(&format!("torch = \"{t}\"\n"));
        }
        if rng.chance(50) {
            let p = rng.pick(&[">=3.11", "<3.12", ">=3.10"]);
            e.push_str(&format!("python = \"{p}\"\n"));
        }
        if rng.chance(60) {
            let m = match pypi {
                "cupy-cuda12x" => "[12]",
                "cupy-cuda13x" => "[13]",
                _ => rng.pick(&["[11, 12]", "[12]", "[12, 13]", "[13]"]),
            };
            e.push_str(&format!("cuda_majors = {m}\n"));
        }
        if rng.chance(40) {
            let c = rng.pick(&["7.5", "8.0", "9.0"]);
            e.push_str(&format!("min_cc = \"{c}\"\n"));
        }
        x.push_str(&e);
    }
    x
}

/// A random spec over the small catalog.
pub(crate) fn random_spec(rng: &mut Rng, cat: &Catalog) -> Spec {
    let mut gpus: Vec<String> = cat
        .gpus
        .iter()
        .map(|g| g.id.clone())
        .filter(|_| rng.chance(35))
        .collect();
    if gpus.is_empty() {
        gpus.push(rng.pick(&cat.gpus).id.clone());
    }
    let driver = if rng.chance(50) {
        Some(Version::parse(rng.pick::<&str>(&DRIVERS[..])).unwrap())
    } else {
        None
    };
    let mut components = BTreeMap::new();
    for c in Component::ALL {
        if c.is_extra() {
            // Only the extras the random catalog has, and fewer of them: each multiplies
            // the oracle's search space.
            if EXTRAS.contains(&c) && rng.chance(20) {
                let req = if rng.chance(70) {
                    VersionReq::any()
                } else {
                    VersionReq::parse(rng.pick::<&str>(&["<3", ">=2.8", "14.2"])).unwrap()
                };
                components.insert(c, req);
            }
            continue;
        }
        if c == Component::Driver && !rng.chance(20) {
            continue;
        }
        if c != Component::Driver && !rng.chance(45) {
            continue;
        }
        let req = if rng.chance(60) {
            VersionReq::any()
        } else {
            let options: Vec<String> = match c {
                Component::Driver => vec!["550".into(), ">=535".into(), "<560".into()],
                Component::Cuda => {
                    vec!["12".into(), "12.4".into(), ">=12.8".into(), "<12.8".into()]
                }
                Component::Torch => vec!["==2.5.1+cu124".into(), ">=2.5".into(), "<2.7".into()],
                Component::Python => vec!["3.11".into(), ">=3.11".into()],
                _ => vec![">=0".into(), "<2.20".into()],
            };
            VersionReq::parse(rng.pick(&options[..]).as_str()).unwrap()
        };
        components.insert(c, req);
    }
    if components.keys().all(|c| *c == Component::Driver) {
        components.insert(Component::Cuda, VersionReq::any());
    }
    let os = if rng.chance(20) {
        Some("ubuntu22.04".to_string())
    } else {
        None
    };
    Spec {
        name: "prop".into(),
        os,
        gpus,
        archs: vec![],
        driver,
        components,
        torch_source: None,
        deploy: Default::default(),
        check: Vec::new(),
    }
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

#[test]
fn solver_agrees_with_brute_force() {
    let (mut sat, mut unsat) = (0, 0);
    let (mut extra_sat, mut extra_unsat) = (0, 0);
    for seed in 0..cases() {
        let mut rng = Rng::new(seed + 1);
        let files = random_catalog(&mut rng);
        let cat = match Catalog::from_layers(std::slice::from_ref(&files)) {
            Ok(c) => c,
            Err(e) => panic!("seed {seed}: random catalog invalid: {e}\n{files:#?}"),
        };
        for _ in 0..4 {
            let spec = random_spec(&mut rng, &cat);
            let want = oracle(&cat, &spec);
            let got = solver(&cat, &spec);
            assert_eq!(
                got, want,
                "seed {seed}: solver and oracle disagree on {spec:#?}"
            );
            if got.is_some() {
                sat += 1
            } else {
                unsat += 1
            }
            if spec.components.keys().any(|c| c.is_extra()) {
                if got.is_some() {
                    extra_sat += 1
                } else {
                    extra_unsat += 1
                }
            }
        }
    }
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
    for seed in 0..cases() / 4 {
        let mut rng = Rng::new(seed + 7);
        let files = random_catalog(&mut rng);
        let cat = Catalog::from_layers(std::slice::from_ref(&files)).unwrap();
        let reordered = reorder(&files, seed as usize);
        assert_ne!(
            files, reordered,
            "seed {seed}: the reorder must change something"
        );
        let cat2 = Catalog::from_layers(&[reordered]).unwrap();
        let spec = random_spec(&mut rng, &cat);
        // Locks byte for byte; failures by their explanation, whose `file:line` citations
        // may move with the entries, so only the text before the first citation is compared.
        match (outcome(&cat, &spec), outcome(&cat2, &spec)) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "seed {seed}"),
            (Err(a), Err(b)) => {
                let head = |e: &str| e.lines().take(2).collect::<Vec<_>>().join("\n");
                assert_eq!(head(&a), head(&b), "seed {seed}")
            }
            (a, b) => panic!("seed {seed}: {a:?}\nvs reordered\n{b:?}"),
        }
    }
}

#[test]
fn relaxing_a_requirement_never_breaks_a_solution() {
    let mut relaxed_ok = 0;
    for seed in 0..cases() / 2 {
        let mut rng = Rng::new(seed + 99);
        let cat = Catalog::from_layers(&[random_catalog(&mut rng)]).unwrap();
        let spec = random_spec(&mut rng, &cat);
        if solver(&cat, &spec).is_none() {
            continue;
        }
        for c in spec.components.keys() {
            let mut relaxed = spec.clone();
            relaxed.components.insert(*c, VersionReq::any());
            assert!(
                solver(&cat, &relaxed).is_some(),
                "seed {seed}: relaxing {c} broke {spec:#?}"
            );
            relaxed_ok += 1;
        }
        // Fewer GPUs to serve is a relaxation too.
        if spec.gpus.len() > 1 {
            let mut relaxed = spec.clone();
            relaxed.gpus.pop();
            assert!(
                solver(&cat, &relaxed).is_some(),
                "seed {seed}: serving fewer GPUs broke {spec:#?}"
            );
        }
        // An installed driver is a host fact, not a requirement: forgetting it is a
        // relaxation only when the catalog can resolve that same driver. (A host driver the
        // catalog does not list may be the only one that works: seed 1778 at 10,000 cases.)
        if let Some(d) = &spec.driver {
            if cat.drivers.iter().any(|r| &r.version == d) {
                let mut relaxed = spec.clone();
                relaxed.driver = None;
                assert!(
                    solver(&cat, &relaxed).is_some(),
                    "seed {seed}: resolving the installed driver {d} broke {spec:#?}"
                );
            }
        }
    }
    assert!(
        relaxed_ok > cases() / 10,
        "only {relaxed_ok} relaxations tried"
    );
}

/// An `[[extra]]` entry for `c` that nothing in the request mentions.
fn unrelated_extra(rng: &mut Rng, c: Component) -> String {
    let mut e = format!(
        "\n[[extra]]\nname = \"{}\"\nversion = \"{}\"\nlayer = \"framework\"\npypi_name = \"unrelated-{}\"\nindex = \"https://example.org/simple\"\nsource = \"test\"\n",
        c.name(),
        rng.pick(&["0.1.0", "9.9.9", "2.6.3"]),
        c.name()
    );
    if rng.chance(50) {
        e.push_str(&format!("torch = \"{}\"\n", rng.pick(&[">=2.5", "<2.4"])));
    }
    if rng.chance(50) {
        e.push_str(&format!(
            "cuda_majors = {}\n",
            rng.pick(&["[11]", "[12]", "[13]"])
        ));
    }
    e
}

#[test]
fn an_unrelated_component_never_changes_the_result() {
    let mut added = 0;
    for seed in 0..cases() / 4 {
        let mut rng = Rng::new(seed + 4242);
        let files = random_catalog(&mut rng);
        let cat = Catalog::from_layers(std::slice::from_ref(&files)).unwrap();
        let spec = random_spec(&mut rng, &cat);
        let unrelated: Vec<Component> = Component::EXTRAS
            .iter()
            .copied()
            .filter(|c| !spec.components.contains_key(c))
            .collect();
        if unrelated.is_empty() {
            continue;
        }
        let c = *rng.pick(&unrelated);
        let mut more = files.clone();
        let entry = unrelated_extra(&mut rng, c);
        match more.iter_mut().find(|(n, _)| n == "extras.toml") {
            Some((_, t)) => t.push_str(&entry),
            None => more.push(("extras.toml".into(), format!("family = \"extra\"\n{entry}"))),
        }
        let cat2 = match Catalog::from_layers(&[more]) {
            Ok(c) => c,
            // Same name and version as an existing entry: a duplicate, refused at load.
            Err(_) => continue,
        };
        assert_eq!(
            outcome(&cat, &spec),
            outcome(&cat2, &spec),
            "seed {seed}: adding an unrelated {c} changed the result"
        );
        added += 1;
    }
    assert!(added > cases() / 8, "only {added} cases");
}
