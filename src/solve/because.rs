//! Why each pick: the `because` lines the lock records for a component: the catalog's
//! tested stacks it appears in, how it fits its neighbours (with the rule ids), and why
//! better-ranked candidates lost.

use super::rules::{Cand, Ctx, Rule};
use super::{explain, ranked_after, sort_cuda, ORDER};
use crate::core::version::Version;
use crate::core::Component;

/// Why this pick: how it fits its neighbours, and why better-ranked candidates lost.
pub(super) fn because(
    ctx: &Ctx<'_>,
    c: Component,
    k: Cand,
    assign: &[(Component, Cand)],
) -> Vec<String> {
    let mut out = Vec::new();
    let version = ctx.version(c, k).clone();
    for t in &ctx.cat.tested {
        if t.version_of(c) == Some(&version) {
            out.push(format!("tested in {} ({})", t.name, t.origin.lock_name));
        }
    }
    fits(ctx, c, k, assign, &mut out);
    lost(ctx, c, k, assign, &mut out);
    out
}

/// The candidate picked for `x`, when it is decided.
fn get(assign: &[(Component, Cand)], x: Component) -> Option<Cand> {
    assign.iter().find(|(y, _)| *y == x).map(|(_, k)| *k)
}

/// A catalog candidate's index (not the host driver).
fn idx(k: Option<Cand>) -> Option<usize> {
    match k {
        Some(Cand::Idx(i)) => Some(i),
        _ => None,
    }
}

/// How the pick fits its neighbours.
fn fits(ctx: &Ctx<'_>, c: Component, k: Cand, assign: &[(Component, Cand)], out: &mut Vec<String>) {
    let driver = get(assign, Component::Driver).map(|d| ctx.version(Component::Driver, d).clone());
    match (c, idx(Some(k))) {
        (Component::Cuda, Some(i)) => cuda_fits(ctx, i, driver.as_ref(), assign, out),
        (Component::Torch, Some(i)) => torch_fits(ctx, i, driver.as_ref(), assign, out),
        (Component::Cudnn | Component::Nccl, Some(_)) if ctx.source_archs.is_some() => {
            lib_source_fits(ctx, c, assign, out)
        }
        (Component::Cudnn | Component::Nccl, Some(_)) => lib_fits(ctx, c, assign, out),
        (crate::core::extra_pattern!(), Some(i)) => extra_fits(ctx, c, i, assign, out),
        (Component::Deepspeed, Some(i)) => deepspeed_fits(ctx, i, assign, out),
        (Component::Driver, _) => driver_fits(ctx, c, k, out),
        _ => {}
    }
}

/// DeepSpeed: its ops are built with the toolkit's nvcc against torch, and its op builder
/// refuses a toolkit whose CUDA differs from torch's unless both are in its allow-list
/// (`cuda_minor_mismatch_ok` in `op_builder/builder.py`, the catalog's
/// `cuda_mismatch_ok`): say which case the pick is in, and the list.
fn deepspeed_fits(ctx: &Ctx<'_>, i: usize, assign: &[(Component, Cand)], out: &mut Vec<String>) {
    let r = &ctx.cat.deepspeed[i];
    let (Some(cu), Some(t)) = (
        idx(get(assign, Component::Cuda)),
        idx(get(assign, Component::Torch)),
    ) else {
        return;
    };
    let (cu, t) = (&ctx.cat.cuda[cu].version, &ctx.cat.torch[t]);
    let rule = Rule::DeepspeedNvcc.id();
    if (cu.major(), cu.minor()) == (t.cuda.major(), t.cuda.minor()) {
        out.push(format!(
            "its ops build with nvcc from CUDA {cu}, the CUDA {}.{} of torch {} [{rule}]",
            t.cuda.major(),
            t.cuda.minor(),
            t.full
        ));
    } else {
        let list: Vec<String> = r.cuda_mismatch_ok.iter().map(ToString::to_string).collect();
        out.push(format!(
            "its ops build with nvcc from CUDA {cu} against torch {}'s CUDA {}: DeepSpeed's op builder accepts that mismatch because both are in its allow-list, {} (`cuda_minor_mismatch_ok`, op_builder/builder.py; {}) [{rule}]",
            t.full,
            t.cuda,
            list.join(", "),
            r.origin.lock_name
        ));
    }
}

/// A CUDA release: the driver's compatibility mode, torch's runtime, nvcc's targets.
fn cuda_fits(
    ctx: &Ctx<'_>,
    i: usize,
    driver: Option<&Version>,
    assign: &[(Component, Cand)],
    out: &mut Vec<String>,
) {
    let r = &ctx.cat.cuda[i];
    if let Some(d) = driver {
        let mode = ctx.compat_for(d, &r.version, r.driver_min.as_ref(), false);
        out.push(format!(
            "driver {d} runs CUDA {} with {} compatibility [{}]",
            r.version,
            mode.as_str(),
            Rule::DriverCuda.id()
        ));
    }
    if let Some(t) = idx(get(assign, Component::Torch)) {
        let t = &ctx.cat.torch[t];
        if let Some(archs) = &ctx.source_archs {
            out.push(format!(
                "torch {} is built from source with this toolkit's nvcc, which accepts {} [{}]",
                t.full,
                crate::core::arch::torch_list(archs).join(";"),
                Rule::TorchSourceToolkit.id()
            ));
        } else {
            out.push(format!(
                "torch {} bundles the CUDA {} runtime: same major as the toolkit, not newer [{}]",
                t.full,
                t.cuda,
                Rule::TorchToolkit.id()
            ));
        }
    }
    if let Some(ts) = ctx.cat.targets_for(&r.version) {
        let names: Vec<String> = ctx.targets.iter().map(ToString::to_string).collect();
        out.push(format!(
            "nvcc accepts {} ({}) [{}]",
            names.join(", "),
            ts.origin.lock_name,
            Rule::NvccTargets.id()
        ));
    }
}

/// torch: its arch list (or source build), the driver's mode for its runtime, vLLM's pin.
fn torch_fits(
    ctx: &Ctx<'_>,
    i: usize,
    driver: Option<&Version>,
    assign: &[(Component, Cand)],
    out: &mut Vec<String>,
) {
    let t = &ctx.cat.torch[i];
    let list: Vec<String> = crate::core::arch::torch_list(ctx.torch_archs(i));
    let ccs = ctx
        .ccs
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    if ctx.source_archs.is_some() {
        if let Some(src) = ctx.cat.torch_source(&t.version) {
            out.push(format!(
                "built from source: {} at tag {} with the CUDA {} toolkit ({}) [{}]",
                src.repository,
                src.tag,
                t.cuda,
                src.origin.lock_name,
                Rule::TorchSource.id()
            ));
        }
        out.push(format!(
            "its requested arch list {} runs on compute capability {ccs}; a source build has no other kernels to fall back to [{}]",
            list.join(";"),
            Rule::TorchSourceArchs.id()
        ));
        if let Some(forms) = ctx
            .cat
            .torch_source(&t.version)
            .and_then(|s| s.cmake_archs.as_ref())
        {
            out.push(format!(
                "PyTorch {}'s CMake accepts the arch list {}: it takes {} [{}]",
                t.version,
                list.join(";"),
                super::rules::cmake_forms(forms),
                Rule::TorchSourceArchNames.id()
            ));
        }
        if let Some(line) = source_compiler_because(ctx, i) {
            out.push(line);
        }
    } else {
        out.push(format!(
            "its arch list {} runs on compute capability {ccs} [{}]",
            list.join(";"),
            Rule::TorchArchList.id()
        ));
    }
    if let Some(d) = driver {
        let mode = ctx.compat_for(
            d,
            &t.cuda,
            ctx.full_min_for_runtime(&t.cuda),
            ctx.needs_ptx(ctx.torch_archs(i)),
        );
        out.push(format!(
            "driver {d} runs its CUDA {} runtime with {} compatibility [{}]",
            t.cuda,
            mode.as_str(),
            Rule::WheelRuntimeDriver.id()
        ));
    }
    if let Some(v) = idx(get(assign, Component::Vllm)) {
        let r = &ctx.cat.vllm[v];
        out.push(format!(
            "vLLM {} pins torch =={} and ships a CUDA {} wheel [{}]",
            r.version,
            r.torch,
            r.cuda,
            Rule::VllmTorchPin.id()
        ));
    }
}

/// The host compiler a torch source build compiles with, and the range it is in.
fn source_compiler_because(ctx: &Ctx<'_>, i: usize) -> Option<String> {
    let t = &ctx.cat.torch[i];
    let src = ctx.cat.torch_source(&t.version)?;
    let os = ctx.spec.os.as_deref()?;
    let gcc = src.compiler.os_gcc(os)?;
    let min = src
        .compiler
        .gcc_min
        .as_ref()
        .map_or(String::new(), |m| format!("at least PyTorch's GCC {m}"));
    let max = src
        .compiler
        .nvcc_gcc_max(&t.cuda)
        .map_or(String::new(), |m| {
            format!(
                "at most GCC {m}, the newest nvcc of CUDA {} accepts",
                t.cuda
            )
        });
    let range = [min, max]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(" and ");
    Some(format!(
        "compiled with {os}'s GCC {gcc}{}{range} [{}]",
        if range.is_empty() { "" } else { ": " },
        Rule::TorchSourceCompiler.id()
    ))
}

/// cuDNN or NCCL under a torch source build: what the build compiles against.
fn lib_source_fits(
    ctx: &Ctx<'_>,
    c: Component,
    assign: &[(Component, Cand)],
    out: &mut Vec<String>,
) {
    if let Some(t) = idx(get(assign, Component::Torch)) {
        let t = &ctx.cat.torch[t];
        match (c, ctx.cat.torch_source(&t.version)) {
            (Component::Cudnn, Some(src)) => out.push(format!("torch {} is built from source against this cuDNN (≥ {}, {}) [{}]", t.version, src.cudnn_min, src.origin.lock_name, Rule::TorchSourceCudnn.id())),
            _ => out.push(format!("torch {} is built from source against this NCCL (USE_SYSTEM_NCCL=1); the newest build for CUDA {} is used", t.version, t.cuda.major())),
        }
    }
}

/// cuDNN or NCCL: torch's pin, or the newest build for its CUDA major.
fn lib_fits(ctx: &Ctx<'_>, c: Component, assign: &[(Component, Cand)], out: &mut Vec<String>) {
    if let Some(t) = idx(get(assign, Component::Torch)) {
        let t = &ctx.cat.torch[t];
        let pin = if c == Component::Cudnn {
            &t.cudnn
        } else {
            &t.nccl
        };
        let rule = if c == Component::Cudnn {
            Rule::TorchCudnnPin
        } else {
            Rule::TorchNcclPin
        };
        match pin {
            Some(p) => out.push(format!("torch {} pins {} {p} [{}]", t.full, c.display(), rule.id())),
            None => out.push(format!("torch {} has no known {} pin in the catalog, so the newest build for CUDA {} is used", t.full, c.display(), t.cuda.major())),
        }
    }
}

/// An extra: its requirements on torch, CUDA, Python and the GPUs.
fn extra_fits(
    ctx: &Ctx<'_>,
    c: Component,
    i: usize,
    assign: &[(Component, Cand)],
    out: &mut Vec<String>,
) {
    let e = &ctx.cat.extras[i];
    let name = format!("{} {}", c.display(), e.label());
    if let Some(t) = idx(get(assign, Component::Torch)) {
        let t = &ctx.cat.torch[t];
        if let Some(req) = &e.torch {
            out.push(format!(
                "{name} requires torch `{req}`: torch {} fits [{}]",
                t.version,
                Rule::ExtraTorch.id()
            ));
        }
        if let Some(m) = &e.cuda_majors {
            out.push(format!(
                "{name} ships builds for CUDA {}: torch {} is a CUDA {} build [{}]",
                m.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
                t.full,
                t.cuda.major(),
                Rule::ExtraCudaMajor.id()
            ));
        }
        if let Some(v) = &e.pypi_variant {
            if *v != t.variant {
                out.push(format!(
                    "its wheel on {} is a {v} build, not torch's {}, so the lock names no wheel: `prebuilt` says where other builds are",
                    e.index, t.variant
                ));
            }
        }
    }
    if let (Some(req), Some(p)) = (&e.python, idx(get(assign, Component::Python))) {
        out.push(format!(
            "{name} requires Python `{req}`: Python {} fits [{}]",
            ctx.cat.python[p].version,
            Rule::ExtraPython.id()
        ));
    }
    if let Some(min) = e.min_cc {
        out.push(format!(
            "{name} needs compute capability ≥ {min}: the stack runs on {} [{}]",
            ctx.ccs
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            Rule::ExtraMinCc.id()
        ));
    }
}

/// The driver: a host fact, or the newest of a supported branch.
fn driver_fits(ctx: &Ctx<'_>, c: Component, k: Cand, out: &mut Vec<String>) {
    if ctx.host_driver.is_some() {
        out.push(
            "the installed driver is a host fact: gpustack checks it, never changes it".to_string(),
        );
    } else if let Some(b) = ctx.cat.branch_of(ctx.version(c, k)) {
        out.push(format!(
            "newest driver of a supported production/LTS branch that runs the stack (R{} {}, {})",
            b.number,
            b.kind.as_str(),
            if b.supported {
                "supported"
            } else {
                "end of life"
            }
        ));
    }
}

/// Why a better-ranked candidate that breaks no rule with the earlier picks still lost,
/// when arc consistency says so: with `c` held to it, the component whose every candidate
/// is then ruled out, and the rule that rules out its best one.
fn deeper_reason(ctx: &Ctx<'_>, c: Component, other: Cand) -> Option<String> {
    let mut p = super::Problem::initial(ctx);
    if p.wiped.is_some() {
        return None;
    }
    let before = p.removed.get(&c).map_or(0, Vec::len);
    let earlier: std::collections::BTreeMap<Component, usize> =
        p.removed.iter().map(|(x, rs)| (*x, rs.len())).collect();
    p.domains.insert(c, vec![other]);
    p.arc_consistency();
    let w = p.wiped?;
    // Held to `other`, `c` itself goes when every candidate of a neighbour rejects it;
    // otherwise a later component runs out. Either way, the removal arc consistency made.
    let r = if w == c {
        p.removed
            .get(&c)?
            .get(before..)?
            .iter()
            .find(|r| r.cand == other)?
    } else {
        p.removed.get(&w)?.last()?
    };
    let y = if w == c { r.against? } else { w };
    let broken = r.reason(ctx, w);
    // The candidates of `y` that would go with `other` were ruled out before: say by what.
    let fits = |k: Cand| {
        if c < y {
            ctx.check_pair(c, other, y, k).is_ok()
        } else {
            ctx.check_pair(y, k, c, other).is_ok()
        }
    };
    let gone: Vec<&super::Removal> = p.removed.get(&y).map_or_else(Vec::new, |rs| {
        rs[..earlier.get(&y).copied().unwrap_or(0)]
            .iter()
            .filter(|q| fits(q.cand))
            .take(3)
            .collect()
    });
    let mut text = format!(
        "with it no {} fits: {} [{}]",
        y.display(),
        broken.message,
        broken.rule.id()
    );
    for q in gone {
        let why = q.reason(ctx, y);
        text.push_str(&format!(
            "; {} {}, which would, is ruled out: {} [{}]",
            y.display(),
            ctx.label(y, q.cand),
            why.message,
            why.rule.id()
        ));
    }
    Some(text)
}

/// Better-ranked candidates that lost, grouped by reason.
fn lost(ctx: &Ctx<'_>, c: Component, k: Cand, assign: &[(Component, Cand)], out: &mut Vec<String>) {
    let mut ranked = ctx.candidates(c);
    if c == Component::Cuda {
        sort_cuda(ctx, &mut ranked, assign);
    }
    let pick_rank = ranked.iter().position(|x| *x == k).unwrap_or(usize::MAX);
    // Every newer candidate is explained: a better-ranked one by the rule it broke, a
    // worse-ranked one (the pick won on preference) by the preference, nearest first.
    // Nearest first: the versions a reader expects next are named first.
    let mut newer: Vec<(usize, Cand)> = ranked
        .iter()
        .copied()
        .enumerate()
        .filter(|&(r, x)| {
            x != k
                && if r < pick_rank {
                    ctx.version(c, x) >= ctx.version(c, k)
                } else {
                    ctx.version(c, x) > ctx.version(c, k)
                }
        })
        .collect();
    newer.sort_by(|a, b| {
        ctx.version(c, a.1)
            .cmp(ctx.version(c, b.1))
            .then(a.0.cmp(&b.0))
    });
    // (labels, text, the text's shape): candidates whose reasons differ only in versions
    // share a line.
    let mut groups: Vec<(Vec<String>, String, String)> = Vec::new();
    let mut deeper_left = 1usize;
    for (rank, other) in newer {
        let reason = ctx.check_unary(c, other).err().or_else(|| {
            // Only picks decided before this one, and the installed driver, can explain
            // why it lost; later picks would be circular.
            let pos = |x: Component| ORDER.iter().position(|y| *y == x).unwrap_or(usize::MAX);
            let earlier = |x: Component| {
                x != c && (pos(x) < pos(c) || (x == Component::Driver && ctx.host_driver.is_some()))
            };
            assign
                .iter()
                .filter(|(x, _)| earlier(*x))
                .find_map(|&(x, a)| {
                    if x < c {
                        ctx.check_pair(x, a, c, other).err()
                    } else {
                        ctx.check_pair(c, other, x, a).err()
                    }
                })
        });
        let text = match reason {
            Some(r) => format!("{} [{}]", r.message, r.rule.id()),
            None if rank > pick_rank => ranked_after(ctx, c, k, other, assign),
            // Better ranked and breaking no rule: the existing lock's pick was kept over
            // it (a fresh lock takes it), or it fails further down the search.
            None if ctx.fresh.get(&c) == Some(ctx.version(c, other)) => format!(
                "a fresh lock takes it; the existing lock's {} still fits every rule and is kept (`gpustack lock --upgrade-package {}`)",
                ctx.label(c, k),
                c.name()
            ),
            // Arc consistency over the whole problem for each is too slow on a large
            // catalog: only the nearest such candidate gets its concrete reason.
            None => {
                let deeper = if deeper_left > 0 {
                    deeper_left -= 1;
                    deeper_reason(ctx, c, other)
                } else {
                    None
                };
                deeper.unwrap_or_else(|| {
                    "no complete stack with it satisfies the rest of the request".to_string()
                })
            }
        };
        let v = ctx.label(c, other);
        let shape = explain::shape(&text);
        match groups.iter_mut().find(|(_, _, s)| *s == shape) {
            Some((vs, _, _)) => vs.push(v),
            None => groups.push((vec![v], text, shape)),
        }
    }
    for (vs, text, _) in groups.into_iter().take(4) {
        let head = if vs.len() > 3 {
            format!("{} and {} more", vs[..3].join(", "), vs.len() - 3)
        } else {
            vs.join(", ")
        };
        out.push(format!("not {head}: {text}"));
    }
}
