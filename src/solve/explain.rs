//! Conflict explanations in the user's words, and hints found by relaxing the request.
//!
//! The derivation comes from the solver's own bookkeeping: the component whose domain
//! emptied, each of its candidates with the rule that removed it (grouped, best first), and
//! for the neighbours those rules point at, what was left of them and why. Hints are not
//! guessed: each is a change to the request that the solver has checked resolves.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::rules::{Cand, Compat, Ctx};
use super::{solve_assignment, Problem, Removal};
use crate::core::version::{Clause, Version, VersionReq};
use crate::core::Component;
pub use crate::error::{Cause, Explanation};
use crate::error::{Fact, Rule, Violation};
use crate::spec::Spec;

pub(crate) fn explain(
    ctx: &Ctx<'_>,
    members: &BTreeMap<Component, String>,
    p: &Problem<'_, '_>,
) -> Explanation {
    let mut causes = Vec::new();
    if let Some(w) = p.wiped {
        let removals = p.removed.get(&w).cloned().unwrap_or_default();
        causes.push(cause(ctx, members, w, &removals, true, &[]));
        let mut neighbours: Vec<Component> = removals.iter().filter_map(|r| r.against).collect();
        neighbours.sort();
        neighbours.dedup();
        for y in neighbours {
            let rem = p.removed.get(&y).cloned().unwrap_or_default();
            let left: Vec<String> = p.domains[&y].iter().map(|k| ctx.label(y, *k)).collect();
            causes.push(cause(ctx, members, y, &rem, false, &left));
        }
    } else if let Some((_, c, v)) = &p.deepest {
        causes.push(Cause {
            component: *c,
            requested: members.get(c).cloned().unwrap_or_default(),
            primary: true,
            groups: vec![(Vec::new(), v.clone())],
            remaining: Vec::new(),
            outside_request: 0,
            nearest: Vec::new(),
        });
    }
    Explanation {
        stack: ctx.spec.name.clone(),
        causes,
        hints: hints(ctx),
    }
}

fn cause(
    ctx: &Ctx<'_>,
    members: &BTreeMap<Component, String>,
    c: Component,
    removals: &[Removal],
    primary: bool,
    left: &[String],
) -> Cause {
    let mut groups: Vec<(Vec<String>, Violation)> = Vec::new();
    let mut outside_request = 0;
    for r in removals {
        if r.violation.rule == Rule::Request {
            outside_request += 1;
            continue;
        }
        let v = ctx.label(c, r.cand);
        match groups
            .iter_mut()
            .find(|(_, g)| g.rule == r.violation.rule && same_shape(g, &r.violation))
        {
            Some((vs, _)) => vs.push(v),
            None => groups.push((vec![v], r.violation.clone())),
        }
    }
    let nearest = if groups.is_empty() && outside_request > 0 {
        nearest(ctx, c)
    } else {
        Vec::new()
    };
    Cause {
        component: c,
        requested: members.get(&c).cloned().unwrap_or_default(),
        primary,
        groups,
        remaining: left.to_vec(),
        outside_request,
        nearest,
    }
}

/// The catalog versions around what the request names (for torch with a variant: the
/// variants of that release).
fn nearest(ctx: &Ctx<'_>, c: Component) -> Vec<String> {
    let Some(req) = ctx.spec.components.get(&c) else {
        return Vec::new();
    };
    let Some(anchor) = req.clauses().iter().find_map(|cl| match cl {
        Clause::Any => None,
        Clause::Prefix(v)
        | Clause::Eq(v)
        | Clause::Ne(v)
        | Clause::Ge(v)
        | Clause::Gt(v)
        | Clause::Le(v)
        | Clause::Lt(v) => Some(v.clone()),
    }) else {
        return Vec::new();
    };
    let mut all: Vec<Version> = ctx
        .candidates(c)
        .into_iter()
        .map(|k| ctx.version(c, k).clone())
        .collect();
    if c == Component::Torch && anchor.local().is_some() {
        let base = anchor.without_local();
        let same: Vec<String> = all
            .iter()
            .filter(|v| v.without_local().cmp_release(&base).is_eq())
            .map(ToString::to_string)
            .collect();
        if !same.is_empty() {
            return same;
        }
    }
    all.sort();
    all.dedup_by(|a, b| a.without_local().cmp_release(&b.without_local()).is_eq());
    let pos = all
        .iter()
        .position(|v| v.cmp_release(&anchor).is_gt())
        .unwrap_or(all.len());
    let lo = pos.saturating_sub(2);
    let hi = (pos + 2).min(all.len());
    all[lo..hi]
        .iter()
        .map(|v| {
            if c == Component::Torch {
                v.without_local().to_string()
            } else {
                v.to_string()
            }
        })
        .collect()
}

/// Two violations group together when their messages differ only in version numbers.
fn same_shape(a: &Violation, b: &Violation) -> bool {
    a.facts.len() == b.facts.len() && shape(&a.message) == shape(&b.message)
}

/// A message with every word that holds a digit replaced by `#`: messages that differ only
/// in versions have the same shape.
pub(crate) fn shape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for (i, w) in s.split(char::is_whitespace).enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(if w.bytes().any(|c| c.is_ascii_digit()) {
            "#"
        } else {
            w
        });
    }
    out
}

fn summary<V: fmt::Display>(assign: &BTreeMap<Component, V>, focus: &[Component]) -> String {
    let mut parts: Vec<String> = focus
        .iter()
        .filter_map(|c| assign.get(c).map(|v| format!("{} {v}", c.display())))
        .collect();
    for c in [Component::Cuda, Component::Torch] {
        if !focus.contains(&c) {
            if let Some(v) = assign.get(&c) {
                parts.push(format!("{} {v}", c.display()));
            }
        }
    }
    parts.join(", ")
}

fn hints(ctx: &Ctx<'_>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    if let Some(host) = &ctx.spec.driver {
        driver_upgrades(ctx, host, &mut out);
    }
    relaxed_requirements(ctx, &mut out);
    blocking_archs(ctx, &mut out);
    blocking_components(ctx, &mut out);
    out
}

/// Adds a hint unless it is already there; at most four.
fn push(out: &mut Vec<String>, h: String) {
    if !out.contains(&h) && out.len() < 4 {
        out.push(h);
    }
}

/// An installed driver: the smallest catalog driver that works instead, and the
/// smallest that runs the result with full (not minor-version) compatibility.
fn driver_upgrades(ctx: &Ctx<'_>, host: &Version, out: &mut Vec<String>) {
    let spec = ctx.spec;
    let cat = ctx.cat;
    let mut ups: Vec<&Version> = cat
        .drivers
        .iter()
        .map(|d| &d.version)
        .filter(|v| *v > host)
        .collect();
    ups.sort();
    let branch_note = |v: &Version| match cat.branch_of(v) {
        Some(b) if !b.supported => format!("R{}, end of life", b.number),
        Some(b) => format!("R{} {}", b.number, b.kind.as_str()),
        None => format!("R{}", v.major()),
    };
    let supported = |v: &Version| {
        cat.branch_of(v)
            .is_some_and(|b| b.supported && b.kind != crate::catalog::BranchKind::Nfb)
    };
    // Whether any upgrade can resolve: one solve with the driver left to the solver,
    // among the catalog drivers from the installed one up (the same rules apply to a
    // catalog driver as to an installed one of that version). Only then are upgrades
    // tried one by one.
    let req = spec.components.get(&Component::Driver);
    let floor = match req {
        Some(r) if !r.is_any() => format!("{r}, >={host}"),
        _ => format!(">={host}"),
    };
    let possible = VersionReq::parse(&floor).map_or(true, |floor| {
        let mut s = spec.clone();
        s.driver = None;
        s.components.insert(Component::Driver, floor);
        solve_assignment(cat, &s).is_some()
    });
    if !possible {
        ups.clear();
    }
    // Drivers of one branch that compare alike with every driver threshold the rules
    // read (the CUDA releases' full-support minimums, the minor-version floors, the GPUs'
    // minimum drivers) and with the driver requirement are interchangeable to the
    // solver, so only the lowest of each such class is solved: the others would give
    // the same result, hence no other hint.
    let mut thresholds: Vec<&Version> = cat
        .cuda
        .iter()
        .filter_map(|r| r.driver_min.as_ref())
        .chain(cat.minor_compat.iter().map(|m| &m.driver_min))
        .chain(cat.gpus.iter().filter_map(|g| g.min_driver.as_ref()))
        .collect();
    thresholds.sort();
    thresholds.dedup();
    let class = |v: &Version| {
        (
            v.major(),
            thresholds.partition_point(|t| *t <= v),
            req.is_none_or(|r| r.matches(v)),
        )
    };
    let mut tried = BTreeSet::new();
    let (mut any, mut on_supported, mut full_done) = (false, false, false);
    for up in ups {
        if any && on_supported && full_done {
            break;
        }
        if !tried.insert(class(up)) {
            continue;
        }
        let mut s = spec.clone();
        s.driver = Some(up.clone());
        let Some(r) = super::solve_quiet(cat, &s) else {
            continue;
        };
        let full = r.cuda_compat.as_ref().is_none_or(|c| *c == Compat::Full)
            && r.torch_compat.as_ref().is_none_or(|c| *c == Compat::Full);
        let picks = r.versions;
        let how = match r.cuda_compat.as_ref().or(r.torch_compat.as_ref()) {
            Some(Compat::MinorVersion) => " through minor-version compatibility",
            Some(Compat::Forward { .. }) => " through forward compatibility (cuda-compat)",
            _ => "",
        };
        if !any {
            any = true;
            on_supported = supported(up);
            full_done = full;
            push(
                out,
                format!(
                    "upgrade the driver to ≥ {up} ({}; the oldest released driver the catalog has that resolves the stack, so it can lie above a rule's minimum); with it the stack resolves{how} to {}",
                    branch_note(up),
                    summary(&picks, &[])
                ),
            );
        } else if !on_supported && supported(up) {
            on_supported = true;
            full_done |= full;
            push(
                out,
                format!(
                    "on a supported branch: ≥ {up} ({}), resolving{how} to {}",
                    branch_note(up),
                    summary(&picks, &[])
                ),
            );
        } else if !full_done && full {
            full_done = true;
            push(
                out,
                format!(
                    "for full driver support instead: ≥ {up} ({}), with {}",
                    branch_note(up),
                    summary(&picks, &[])
                ),
            );
        }
    }
}

/// One requirement relaxed, or (when none resolves alone) two together.
fn relaxed_requirements(ctx: &Ctx<'_>, out: &mut Vec<String>) {
    let (spec, cat) = (ctx.spec, ctx.cat);
    let listed: Vec<(Component, VersionReq)> = spec
        .components
        .iter()
        .filter(|(_, r)| !r.is_any())
        .map(|(c, r)| (*c, r.clone()))
        .collect();
    let mut single_found = false;
    for (c, req) in &listed {
        // The catalog's nearest versions to the request first (a near-miss pin, like a
        // torch variant the release was not built for), then any version.
        let near = nearest(ctx, *c).into_iter().find_map(|v| {
            let mut s = spec.clone();
            s.components
                .insert(*c, VersionReq::parse(&format!("=={v}")).ok()?);
            solve_assignment(cat, &s)
        });
        if let Some(a) = near {
            single_found = true;
            let v = a.get(c).map(ToString::to_string).unwrap_or_default();
            push(
                out,
                format!(
                    "relax `{} = \"{req}\"`: the nearest {} the catalog has, {v}, works with the rest of your request ({})",
                    c.name(),
                    c.display(),
                    summary(&a, &[*c])
                ),
            );
            continue;
        }
        let mut s = spec.clone();
        s.components.insert(*c, VersionReq::any());
        if let Some(a) = solve_assignment(cat, &s) {
            single_found = true;
            let v = a.get(c).map(ToString::to_string).unwrap_or_default();
            push(
                out,
                format!(
                    "relax `{} = \"{req}\"`: {} {v} works with the rest of your request ({})",
                    c.name(),
                    c.display(),
                    summary(&a, &[*c])
                ),
            );
        }
    }
    // Two requirements relaxed together.
    if !single_found {
        for (i, (c1, r1)) in listed.iter().enumerate() {
            for (c2, r2) in listed.iter().skip(i + 1) {
                let mut s = spec.clone();
                s.components.insert(*c1, VersionReq::any());
                s.components.insert(*c2, VersionReq::any());
                if let Some(a) = solve_assignment(cat, &s) {
                    push(
                        out,
                        format!(
                            "relax both `{} = \"{r1}\"` and `{} = \"{r2}\"`: {} resolves",
                            c1.name(),
                            c2.name(),
                            summary(&a, &[*c1, *c2])
                        ),
                    );
                }
            }
        }
    }
}

/// Explicit archs that block.
fn blocking_archs(ctx: &Ctx<'_>, out: &mut Vec<String>) {
    let (spec, cat) = (ctx.spec, ctx.cat);
    for t in &spec.archs {
        let mut s = spec.clone();
        s.archs.retain(|x| x != t);
        if (!s.archs.is_empty() || !s.gpus.is_empty()) && solve_assignment(cat, &s).is_some() {
            push(out, format!("remove `{t}` from `[hardware].archs`"));
        }
    }
}

/// Optional components that block.
fn blocking_components(ctx: &Ctx<'_>, out: &mut Vec<String>) {
    let (spec, cat) = (ctx.spec, ctx.cat);
    for c in [
        Component::Deepspeed,
        Component::Vllm,
        Component::Cudnn,
        Component::Nccl,
    ]
    .into_iter()
    .chain(Component::EXTRAS)
    {
        if spec.components.contains_key(&c) {
            let mut s: Spec = spec.clone();
            s.components.remove(&c);
            if !s.components.is_empty() {
                if let Some(a) = solve_assignment(cat, &s) {
                    push(
                        out,
                        format!(
                            "remove `{}` from `[components]`: the rest resolves ({})",
                            c.name(),
                            summary(&a, &[])
                        ),
                    );
                }
            }
        }
    }
}

/// Sources are shortened to `catalog/FILE:LINE — URL`; the alternate form (`{:#}`) writes
/// them in full.
impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let full = f.alternate();
        write!(f, "error: no compatible stack for `{}`", self.stack)?;
        for c in &self.causes {
            f.write_str("\n\n")?;
            let n: usize = c.groups.iter().map(|(v, _)| v.len()).sum();
            let req = requested_text(c);
            if c.primary && n == 0 && c.outside_request > 0 {
                write!(
                    f,
                    "  × {}: no {} in the catalog matches {req}",
                    c.component.display(),
                    c.component.display()
                )?;
                if !c.nearest.is_empty() {
                    write!(
                        f,
                        "\n    - the catalog has, nearest to it: {}",
                        c.nearest.join(", ")
                    )?;
                }
                write!(f, "\n      rule `request`: a version must be in the catalog (`gpustack catalog show {}`) to be locked", catalog_family(c.component))?;
                continue;
            } else if c.primary && n == 0 {
                write!(
                    f,
                    "  × {} ({}): no combination satisfies every rule; the search failed last on:",
                    c.component.display(),
                    c.requested
                )?;
            } else if c.primary {
                if n == 1 {
                    write!(
                        f,
                        "  × {}: the only version allowed by {req} cannot be used",
                        c.component.display()
                    )?;
                } else {
                    write!(
                        f,
                        "  × {}: none of the {n} versions allowed by {req} can be used",
                        c.component.display()
                    )?;
                }
            } else {
                let left = if c.remaining.is_empty() {
                    "none".to_string()
                } else {
                    list(&c.remaining)
                };
                write!(
                    f,
                    "  because {} is limited to {left} by {req}",
                    c.component.display()
                )?;
            }
            for (versions, v) in &c.groups {
                if versions.is_empty() {
                    write!(f, "\n    - {}", v.message)?;
                } else {
                    write!(f, "\n    - {}: {}", list(versions), v.message)?;
                }
                write!(f, "\n      rule `{}`{}", v.rule.id(), facts(&v.facts, full))?;
            }
        }
        for h in &self.hints {
            write!(f, "\n\nhint: {h}")?;
        }
        if self.hints.is_empty() {
            write!(f, "\n\nhint: no single change to the request resolves it; `gpustack catalog show COMPONENT` lists what the catalog holds")?;
        }
        Ok(())
    }
}

fn list(vs: &[String]) -> String {
    const MAX: usize = 4;
    if vs.len() <= MAX {
        vs.join(", ")
    } else {
        format!("{} and {} more", vs[..MAX].join(", "), vs.len() - MAX)
    }
}

/// Each fact as `catalog/FILE:LINE — URL`; with `full` (`{:#}`, `--verbose`) the whole
/// source text.
fn facts(fs: &[Fact], full: bool) -> String {
    let mut out = String::new();
    for o in fs {
        let source = if full {
            o.source.clone()
        } else {
            crate::catalog::short_source(&o.source)
        };
        out.push_str(&format!("\n        {} — {source}", o.location()));
    }
    out
}

#[allow(dead_code)]
fn _unused(_: Cand) {}

fn requested_text(c: &Cause) -> String {
    if c.requested.starts_with("host") {
        format!("the installed driver ({})", c.requested)
    } else if c.requested.starts_with("implied") {
        format!("the stack ({})", c.requested)
    } else {
        format!(
            "your request `{} = \"{}\"`",
            c.component.name(),
            c.requested
        )
    }
}

fn catalog_family(c: Component) -> &'static str {
    if c.is_extra() {
        "extra"
    } else {
        c.name()
    }
}
