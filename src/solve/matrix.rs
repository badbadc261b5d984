//! Every stack a spec allows, for CI test matrices (`gpustack matrix`).
//!
//! `gpustack lock` turns each requirement of the spec into one version. A matrix keeps the
//! requirements as ranges: it lists every combination of versions of the *axes* that the
//! solver accepts, each with the complete stack that goes with it.
//!
//! # Axes and followers
//!
//! * **Axes** are the components the spec lists in `[components]`, except the driver and
//!   the extras: CUDA, cuDNN, NCCL, Python, torch, vLLM and DeepSpeed, whichever are
//!   listed. `torch = ">=2.4"` makes torch an axis whose values are every torch build
//!   (release and CUDA variant, `2.5.1+cu124`) that matches and works with some value of
//!   the other axes. [`matrix_over`] takes the axes explicitly instead (any member of the
//!   stack but the driver: an implied Python, an extra).
//! * **Followers** are the other members of the stack: the driver (the installed one when
//!   `[hardware].driver` gives it; a CI job runs on a machine whose driver is a fact),
//!   the extras, and the components the spec does not list but that the stack implies
//!   (Python and CUDA under torch, torch under vLLM). A follower takes the solver's best
//!   choice given the row, exactly as `gpustack lock` would. Extras follow because they
//!   are add-ons that fit the framework (the solver's [preferences](super)) and because
//!   they multiply: every extra listed as an axis multiplies the matrix by its number of
//!   releases.
//!
//! A combination of axis versions is a **row** when the spec, with each axis requirement
//! narrowed to `==` that version, resolves; the row carries that resolution's version of
//! every member. So a CI job that pins the row's axis values (`torch = "==2.5.1+cu124"`)
//! and runs `gpustack lock` gets exactly the row's stack. Versions are compared as
//! requirements compare them, so two extras' distributions of one release (CuPy
//! `14.2.0` for CUDA 12 and for CUDA 13) are one axis value; the row names the
//! distribution the resolution picked.
//!
//! # Order
//!
//! Rows come best first, in the solver's own preference: two rows compare as their whole
//! stacks do, component by component in the decision order (vLLM, DeepSpeed, torch,
//! Python, the extras, CUDA, cuDNN, NCCL, driver), each by its rank among that
//! component's candidates (newest first, with the documented exceptions). The first
//! difference decides. Row 0 is therefore the stack `gpustack lock` picks.
//!
//! # Method
//!
//! One constraint problem for the whole spec (filter and arc consistency, as [`solve`]
//! builds it), then a depth-first search that branches over *every* remaining candidate
//! of each axis, with the solver's pairwise checks and forward checking; at each complete
//! axis assignment a second search completes the followers, best candidate first, and
//! stops at the first complete stack: the solver's own choice for that row. Each pairwise
//! rule is evaluated at most once per pair of candidates (the searches ask the same
//! questions many times). No full solve runs per combination, and the cartesian product
//! of the axes is never built. Rows are then sorted by their stacks' ranks.

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::rules::{Cand, Ctx};
use super::{members, solve, sort_cuda, Problem};
use crate::catalog::Catalog;
use crate::core::version::Version;
use crate::core::Component;
use crate::error::{Diagnostic, Error, Stage};
use crate::spec::Spec;

/// Every stack a spec allows, best first, every row in memory; [`for_each_row`] gives
/// them one at a time instead, in memory that does not grow with their number (what
/// `gpustack matrix` uses).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Matrix {
    /// The components that vary between rows, in [`Component`] order.
    pub axes: Vec<Component>,
    /// Every member of the stack, in [`Component`] order: the keys of each row.
    pub members: Vec<Component>,
    /// The rows, best first; at most `limit` of them.
    pub rows: Vec<Row>,
    /// How many rows exist: always known without a limit. With one, the search keeps
    /// only the best `limit` rows and skips every branch that cannot beat them (its work
    /// and memory are bounded by the limit), so the count is known only when nothing was
    /// left out; `None` means the limit left rows out.
    pub total: Option<usize>,
}

/// One stack of the matrix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// Every member's version as the lock writes it (torch with its variant:
    /// `2.5.1+cu124`).
    pub versions: BTreeMap<Component, Version>,
    /// The PyPI distribution of each extra in the stack (`cupy-cuda12x`,
    /// `flash_attn_3`).
    pub distributions: BTreeMap<Component, String>,
}

impl Row {
    /// The version of a member.
    pub fn version(&self, c: Component) -> Option<&Version> {
        self.versions.get(&c)
    }
}

/// The axes [`matrix`] uses for a spec: the components it lists, except the driver and
/// the extras, in [`Component`] order.
///
/// ```
/// use gpustack::{Catalog, Component, Spec};
/// let catalog = Catalog::stock().unwrap();
/// let spec = Spec::parse("gpustack.toml", r#"
/// [stack]
/// name = "ci"
/// [hardware]
/// gpus = ["h100"]
/// [components]
/// torch = "*"
/// python = ">=3.11"
/// flash-attn = "*"
/// "#, &catalog).unwrap();
/// assert_eq!(gpustack::solve::matrix::default_axes(&spec), [Component::Python, Component::Torch]);
/// ```
pub fn default_axes(spec: &Spec) -> Vec<Component> {
    spec.components
        .keys()
        .copied()
        .filter(|c| *c != Component::Driver && !c.is_extra())
        .collect()
}

/// Every stack the spec allows, over its [default axes](default_axes), best first; at
/// most `limit` rows ([`Matrix::total`] counts them all).
///
/// An empty matrix is the same error as [`solve`]'s: [`Error::NoSolution`], explained.
///
/// ```
/// use gpustack::{Catalog, Component, Spec};
/// let catalog = Catalog::stock().unwrap();
/// let spec = Spec::parse("gpustack.toml", r#"
/// [stack]
/// name = "ci"
/// [hardware]
/// gpus = ["h100"]
/// driver = "550.54.15"
/// [components]
/// torch = ">=2.4"
/// "#, &catalog).unwrap();
/// let m = gpustack::solve::matrix::matrix(&catalog, &spec, None).unwrap();
/// assert_eq!(m.axes, [Component::Torch]);
/// // Row 0 is what `gpustack lock` picks.
/// let lock = gpustack::solve(&catalog, &spec).unwrap();
/// for pick in &lock.picks {
///     assert_eq!(m.rows[0].version(pick.component), Some(&pick.version));
/// }
/// let first3 = gpustack::solve::matrix::matrix(&catalog, &spec, Some(3)).unwrap();
/// assert_eq!(first3.rows, m.rows[..3]);
/// // The search stops counting once it knows rows were left out.
/// assert_eq!(first3.total, None);
/// assert!(first3.truncated());
/// # Ok::<(), gpustack::Error>(())
/// ```
pub fn matrix(catalog: &Catalog, spec: &Spec, limit: Option<usize>) -> Result<Matrix, Error> {
    matrix_over(catalog, spec, &default_axes(spec), limit)
}

/// [`matrix`] over the given axes: any members of the stack (listed or implied) but the
/// driver. The others follow.
///
/// A component that is not in the stack, or the driver, is a usage error.
pub fn matrix_over(
    catalog: &Catalog,
    spec: &Spec,
    axes: &[Component],
    limit: Option<usize>,
) -> Result<Matrix, Error> {
    let mut rows = Vec::new();
    let shape = for_each_row(catalog, spec, axes, limit, |e| {
        if let Event::Row(r) = e {
            rows.push(r.clone());
        }
        Ok::<(), std::convert::Infallible>(())
    })?;
    let Ok(shape) = shape;
    Ok(Matrix {
        axes: shape.axes,
        members: shape.members,
        rows,
        total: shape.total,
    })
}

/// What a matrix is before its rows: known, and written, first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape {
    /// The components that vary between rows, in [`Component`] order.
    pub axes: Vec<Component>,
    /// Every member of the stack, in [`Component`] order: the keys of each row.
    pub members: Vec<Component>,
    /// How many rows exist, as [`Matrix::total`]: `None` when `limit` left rows out.
    pub total: Option<usize>,
    /// How many rows follow: all of them, or `limit`.
    pub rows: usize,
}

impl Shape {
    /// `true` when `limit` left rows out.
    pub fn truncated(&self) -> bool {
        self.total.is_none_or(|t| self.rows < t)
    }
}

/// What [`for_each_row`] gives, in order: the shape, then each row.
#[derive(Clone, Copy, Debug)]
pub enum Event<'r> {
    /// Before the rows.
    Start(&'r Shape),
    /// A row, best first.
    Row(&'r Row),
}

/// Rows found per pass of [`for_each_row`]: its memory is bounded by this, not by the
/// number of rows.
const CHUNK: usize = 65_536;

/// [`matrix_over`], streamed: `visit` gets the [`Shape`], then each row, best first,
/// one at a time. Memory does not grow with the number of rows: the search runs
/// once to count the rows (up to one past `limit`), keeping the best 65,536 of them
/// (a bounded heap), which are the first rows when no limit left rows out; then once per
/// further 65,536 rows, each pass keeping the best rows after those already given and
/// skipping every branch that cannot hold one. The rows and their order are
/// [`matrix_over`]'s.
///
/// The outer error is the matrix's ([`Error::NoSolution`] for an empty one, a usage
/// error for a bad axis); the inner one is the first that `visit` returned, which stops
/// the search.
///
/// ```
/// use gpustack::{Catalog, Spec};
/// let catalog = Catalog::stock().unwrap();
/// let spec = Spec::parse("gpustack.toml", r#"
/// [stack]
/// name = "ci"
/// [hardware]
/// gpus = ["h100"]
/// driver = "550.54.15"
/// [components]
/// torch = ">=2.4"
/// "#, &catalog).unwrap();
/// let axes = gpustack::solve::matrix::default_axes(&spec);
/// let mut n = 0;
/// let shape = gpustack::solve::matrix::for_each_row(&catalog, &spec, &axes, Some(2), |e| {
///     if let gpustack::solve::matrix::Event::Row(_) = e {
///         n += 1;
///     }
///     Ok::<(), std::io::Error>(())
/// })?.unwrap();
/// assert_eq!((n, shape.rows, shape.total), (2, 2, None));
/// # Ok::<(), gpustack::Error>(())
/// ```
pub fn for_each_row<E>(
    catalog: &Catalog,
    spec: &Spec,
    axes: &[Component],
    limit: Option<usize>,
    visit: impl FnMut(Event<'_>) -> Result<(), E>,
) -> Result<Result<Shape, E>, Error> {
    stream(catalog, spec, axes, limit, CHUNK, visit)
}

/// [`for_each_row`] with `chunk` rows per pass (the tests make it small).
fn stream<E>(
    catalog: &Catalog,
    spec: &Spec,
    axes: &[Component],
    limit: Option<usize>,
    chunk: usize,
    mut visit: impl FnMut(Event<'_>) -> Result<(), E>,
) -> Result<Result<Shape, E>, Error> {
    let m = members(spec);
    let mut errors = Vec::new();
    for &c in axes {
        if c == Component::Driver {
            errors.push(
                Diagnostic::new(Stage::Usage, "the driver cannot be an axis of the matrix")
                    .hint("a CI job runs on a machine whose driver is a fact: give it as `[hardware].driver`, one spec per driver"),
            );
        } else if !m.contains_key(&c) {
            errors.push(
                Diagnostic::new(
                    Stage::Usage,
                    format!(
                        "`{c}` is not in the stack of `{}`, so it cannot be an axis",
                        spec.name
                    ),
                )
                .hint(format!("add `{c} = \"*\"` to `[components]`")),
            );
        }
    }
    if !errors.is_empty() {
        return Err(Error::Invalid(errors));
    }
    let axes: BTreeSet<Component> = axes.iter().copied().collect();
    let ctx = Ctx::quiet(catalog, spec);
    let p = Problem::new(&ctx, &m);
    // Candidates of one version (two distributions of an extra's release) are one row:
    // the better-ranked, as the pinned solve picks it.
    // (A set per axis: linear in the domain, which an overlay can make long.)
    let shared = p.wiped.is_none()
        && axes.iter().any(|c| {
            let d = &p.domains[c];
            let distinct: BTreeSet<&Version> = d.iter().map(|&k| ctx.version(*c, k)).collect();
            distinct.len() < d.len()
        });
    let mut e = Enum::new(&p, &axes);
    e.shared = shared;
    // Count the rows: all of them, or up to one past the limit; keep the best `chunk` of
    // them meanwhile, which are all the rows of most matrices.
    let cap = limit.unwrap_or(usize::MAX);
    let chunk = chunk.max(1);
    if p.wiped.is_none() {
        e.pass(chunk.min(cap), None);
        e.counting = Some(cap);
        e.axes_dfs(&mut Vec::with_capacity(p.order.len()));
        e.counting = None;
    }
    if e.count == 0 {
        // The search is exhaustive: with no row, the spec has no stack, and `solve`
        // explains why.
        return match solve(catalog, spec) {
            Err(e) => Err(e),
            Ok(_) => unreachable!("the matrix is empty but the spec resolves"),
        };
    }
    let more = e.count > cap;
    let shape = Shape {
        axes: axes.into_iter().collect(),
        members: m.keys().copied().collect(),
        total: (!more).then_some(e.count),
        rows: e.count.min(cap),
    };
    if let Err(x) = visit(Event::Start(&shape)) {
        return Ok(Err(x));
    }
    // When the count's search was complete (no limit left rows out), the best rows it
    // kept are the first pass; for most matrices, all of it.
    let mut written = 0;
    let mut after: Option<Vec<u32>> = None;
    let first = std::mem::take(&mut e.best).into_sorted_vec();
    if !more {
        for f in &first {
            if let Err(x) = visit(Event::Row(&row(&ctx, &f.assign))) {
                return Ok(Err(x));
            }
        }
        written = first.len();
        after = first.into_iter().last().map(|f| f.ranks);
    }
    while written < shape.rows {
        e.pass(chunk.min(shape.rows - written), after.take());
        e.axes_dfs(&mut Vec::with_capacity(p.order.len()));
        let best = std::mem::take(&mut e.best).into_sorted_vec();
        if best.is_empty() {
            break;
        }
        for f in &best {
            if let Err(x) = visit(Event::Row(&row(&ctx, &f.assign))) {
                return Ok(Err(x));
            }
        }
        written += best.len();
        after = best.into_iter().last().map(|f| f.ranks);
    }
    Ok(Ok(shape))
}

fn row(ctx: &Ctx<'_>, assign: &[(Component, Cand)]) -> Row {
    let mut versions = BTreeMap::new();
    let mut distributions = BTreeMap::new();
    for &(c, k) in assign {
        versions.insert(c, ctx.version(c, k).clone());
        if let (true, Cand::Idx(i)) = (c.is_extra(), k) {
            distributions.insert(c, ctx.cat.extras[i].pypi_name.clone());
        }
    }
    Row {
        versions,
        distributions,
    }
}

impl Matrix {
    /// `true` when `limit` left rows out.
    pub fn truncated(&self) -> bool {
        self.total.is_none_or(|t| self.rows.len() < t)
    }

    /// The matrix as JSON, for scripts: `axes`, `total`, `truncated`, and `rows`, each row
    /// one object as [`Matrix::to_github`] writes it. Ends with a newline.
    pub fn to_json(&self) -> String {
        let mut out = Vec::new();
        let _ = self.write_json(&mut out);
        String::from_utf8(out).unwrap_or_default()
    }

    /// [`Matrix::to_json`], written row by row to `w` (a closed pipe stops it).
    pub fn write_json(&self, w: &mut dyn std::io::Write) -> std::io::Result<()> {
        self.write(Format::Json, w)
    }

    /// The rows as one line of JSON for a GitHub Actions `strategy.matrix.include`: an
    /// array of objects, one per row, whose keys are the members' ids (`cuda`, `python`,
    /// `torch`, …) and whose values are version strings; each extra also gets
    /// `<id>-pypi-name`, its distribution. Ends with a newline.
    ///
    /// ```
    /// use gpustack::{Catalog, Spec};
    /// let catalog = Catalog::stock().unwrap();
    /// let spec = Spec::parse("gpustack.toml", r#"
    /// [stack]
    /// name = "ci"
    /// [hardware]
    /// gpus = ["h100"]
    /// driver = "550.54.15"
    /// [components]
    /// torch = "==2.5.1+cu124"
    /// python = ">=3.12"
    /// "#, &catalog).unwrap();
    /// let m = gpustack::solve::matrix::matrix(&catalog, &spec, None).unwrap();
    /// assert_eq!(
    ///     m.to_github(),
    ///     concat!(
    ///         r#"[{"driver":"550.54.15","cuda":"12.4.1","python":"3.13","torch":"2.5.1+cu124"},"#,
    ///         r#"{"driver":"550.54.15","cuda":"12.4.1","python":"3.12","torch":"2.5.1+cu124"}]"#,
    ///         "\n",
    ///     )
    /// );
    /// ```
    pub fn to_github(&self) -> String {
        let mut out = Vec::with_capacity(self.rows.len() * 40 * self.members.len() + 2);
        let _ = self.write_github(&mut out);
        String::from_utf8(out).unwrap_or_default()
    }

    /// [`Matrix::to_github`], written row by row to `w` (a closed pipe stops it).
    pub fn write_github(&self, w: &mut dyn std::io::Write) -> std::io::Result<()> {
        self.write(Format::Github, w)
    }

    fn write(&self, format: Format, w: &mut dyn std::io::Write) -> std::io::Result<()> {
        let shape = Shape {
            axes: self.axes.clone(),
            members: self.members.clone(),
            total: self.total,
            rows: self.rows.len(),
        };
        let mut out = Writer::new(format, shape, None);
        out.start(w)?;
        for r in &self.rows {
            out.row(w, r)?;
        }
        out.end(w)
    }
}

/// An output format of a matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// [`Matrix::to_json`]: the shape, then one row per line.
    Json,
    /// [`Matrix::to_github`]: one line, a `strategy.matrix.include` list.
    Github,
}

/// Writes a matrix row by row ([`for_each_row`]'s rows, or a [`Matrix`]'s), in a
/// [`Format`]. In JSON, the row whose versions equal the lock's (`locked`) also gets
/// `"locked": true`; the GitHub list never carries it (its keys stay the members' ids, as
/// the job names show them).
#[derive(Debug)]
pub struct Writer<'a> {
    format: Format,
    shape: Shape,
    locked: Option<&'a BTreeMap<Component, Version>>,
    written: usize,
    line: String,
}

impl<'a> Writer<'a> {
    /// A writer for the rows of `shape`; `locked`, the versions of the lock's stack.
    pub fn new(
        format: Format,
        shape: Shape,
        locked: Option<&'a BTreeMap<Component, Version>>,
    ) -> Self {
        Writer {
            format,
            shape,
            locked,
            written: 0,
            line: String::new(),
        }
    }

    /// What comes before the rows.
    pub fn start(&mut self, w: &mut dyn std::io::Write) -> std::io::Result<()> {
        if self.format == Format::Github {
            return w.write_all(b"[");
        }
        let names = |cs: &[Component]| {
            let mut out = String::new();
            for (i, c) in cs.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                json_str(&mut out, c.name());
            }
            out
        };
        let s = &self.shape;
        let mut out = String::from("{\n");
        let _ = writeln!(out, "  \"axes\": [{}],", names(&s.axes));
        let _ = writeln!(out, "  \"members\": [{}],", names(&s.members));
        match s.total {
            Some(t) => {
                let _ = writeln!(out, "  \"total\": {t},");
            }
            None => out.push_str("  \"total\": null,\n"),
        }
        let _ = writeln!(out, "  \"truncated\": {},", s.truncated());
        out.push_str("  \"rows\": [");
        w.write_all(out.as_bytes())
    }

    /// One row. Returns whether it is the lock's.
    pub fn row(&mut self, w: &mut dyn std::io::Write, r: &Row) -> std::io::Result<bool> {
        let first = self.written == 0;
        self.written += 1;
        let locked = self.locked.is_some_and(|l| *l == r.versions);
        let mut line = std::mem::take(&mut self.line);
        line.clear();
        match self.format {
            Format::Github => {
                if !first {
                    line.push(',');
                }
                object(&mut line, &self.shape.members, r, "", false);
            }
            Format::Json => {
                line.push_str(if first { "\n    " } else { ",\n    " });
                object(&mut line, &self.shape.members, r, " ", locked);
            }
        }
        let done = w.write_all(line.as_bytes());
        self.line = line;
        done.map(|()| locked)
    }

    /// What comes after the rows.
    pub fn end(&mut self, w: &mut dyn std::io::Write) -> std::io::Result<()> {
        w.write_all(match (self.format, self.written) {
            (Format::Github, _) => b"]\n",
            (Format::Json, 0) => b"]\n}\n",
            (Format::Json, _) => b"\n  ]\n}\n",
        })
    }
}

/// One row as a JSON object on one line, keys in [`Component`] order; `sp` after each
/// `:` and `,`; `"locked": true` last when `locked`.
fn object(out: &mut String, members: &[Component], r: &Row, sp: &str, locked: bool) {
    out.push('{');
    let mut first = true;
    let mut field = |out: &mut String, key: &str, value: &str| {
        if !std::mem::take(&mut first) {
            out.push(',');
            out.push_str(sp);
        }
        json_str(out, key);
        out.push(':');
        out.push_str(sp);
        json_str(out, value);
    };
    for c in members {
        if let Some(v) = r.versions.get(c) {
            field(out, c.name(), v.as_str());
        }
        if let Some(d) = r.distributions.get(c) {
            field(out, &format!("{}-pypi-name", c.name()), d);
        }
    }
    if locked {
        out.push(',');
        out.push_str(sp);
        out.push_str("\"locked\":");
        out.push_str(sp);
        out.push_str("true");
    }
    out.push('}');
}

/// Appends `s` as a JSON string.
fn json_str(out: &mut String, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        // Ids and versions: nothing to escape.
        out.push('"');
        out.push_str(s);
        out.push('"');
    } else {
        out.push_str(&serde_json::Value::from(s).to_string());
    }
}

/// One complete stack found by the enumeration; ordered by its ranks (best first).
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Found {
    /// Rank of each member's candidate among that component's, in decision order.
    ranks: Vec<u32>,
    /// The assignment, in decision order.
    assign: Vec<(Component, Cand)>,
}

/// A member (by its index in the decision order) and a candidate (by its position in
/// that member's domain, which is the solver's order for every member but CUDA).
type Slot = (usize, usize);

/// The enumeration: a depth-first search over the axes, then the best completion of the
/// followers for each complete axis assignment. Candidates are positions in the domains,
/// and each pairwise rule is evaluated once per pair of candidates (memoized): a matrix
/// asks the same questions many times over.
struct Enum<'p, 'a, 'c> {
    p: &'p Problem<'a, 'c>,
    /// The members in decision order, and their domains.
    comps: Vec<Component>,
    doms: Vec<&'p [Cand]>,
    /// Axis and follower members (indices into `comps`), in decision order.
    axes: Vec<usize>,
    followers: Vec<usize>,
    /// `pair[x * n + y]` for `x < y`: 0 unknown, 1 compatible, 2 not; indexed by
    /// `a * doms[y].len() + b`.
    pair: Vec<Vec<Cell<u8>>>,
    /// Members the three-component rule looks at.
    cuda: Option<usize>,
    torch: Option<usize>,
    deepspeed: Option<usize>,
    /// CUDA's positions in the solver's order, per major.minor of torch's CUDA (the only
    /// thing of the assignment that `sort_cuda` looks at).
    cuda_ranked: BTreeMap<Option<(u64, u64)>, Vec<usize>>,
    /// Counting: rows are counted, not kept, and the search stops once the count passes
    /// this cap.
    counting: Option<usize>,
    count: usize,
    /// A pass: the best `limit` rows ranked after `after` (a max-heap: the worst on top),
    /// and whether such a row was left out.
    limit: usize,
    after: Option<Vec<u32>>,
    best: std::collections::BinaryHeap<Found>,
    more: bool,
    /// Whether two candidates of an axis share a version (rows are then deduplicated by
    /// their axes' versions).
    shared: bool,
}

impl<'p, 'a, 'c> Enum<'p, 'a, 'c> {
    fn new(p: &'p Problem<'a, 'c>, axes: &BTreeSet<Component>) -> Self {
        let comps = p.order.clone();
        let n = comps.len();
        let doms: Vec<&[Cand]> = comps.iter().map(|c| p.domains[c].as_slice()).collect();
        let mut pair = Vec::with_capacity(n * n);
        for x in 0..n {
            for y in 0..n {
                let size = if x < y {
                    doms[x].len() * doms[y].len()
                } else {
                    0
                };
                pair.push(vec![Cell::new(0u8); size]);
            }
        }
        let index = |c: Component| comps.iter().position(|x| *x == c);
        let (axes, followers) = (0..n).partition(|&i| axes.contains(&comps[i]));
        Enum {
            p,
            cuda: index(Component::Cuda),
            torch: index(Component::Torch),
            deepspeed: index(Component::Deepspeed),
            comps,
            doms,
            axes,
            followers,
            pair,
            cuda_ranked: BTreeMap::new(),
            counting: None,
            count: 0,
            limit: 0,
            after: None,
            best: std::collections::BinaryHeap::new(),
            more: false,
            shared: false,
        }
    }

    /// The pairwise rules between two assigned candidates, memoized.
    fn compatible(&self, (x, a): Slot, (y, b): Slot) -> bool {
        let ((x, a), (y, b)) = if x < y {
            ((x, a), (y, b))
        } else {
            ((y, b), (x, a))
        };
        let cell = &self.pair[x * self.comps.len() + y][a * self.doms[y].len() + b];
        if cell.get() == 0 {
            let ok = self
                .p
                .pair(
                    self.comps[x],
                    self.doms[x][a],
                    self.comps[y],
                    self.doms[y][b],
                )
                .is_ok();
            cell.set(if ok { 1 } else { 2 });
        }
        cell.get() == 1
    }

    /// CUDA's positions in the solver's order given torch's pick.
    fn cuda_order(&mut self, assign: &[Slot]) -> &[usize] {
        let torch = self
            .torch
            .and_then(|t| assign.iter().find(|(x, _)| *x == t))
            .and_then(|&(t, k)| match self.doms[t][k] {
                Cand::Idx(i) => Some(&self.p.ctx.cat.torch[i].cuda),
                Cand::Host => None,
            })
            .map(|v| (v.major(), v.minor()));
        let (p, comps, doms) = (self.p, &self.comps, &self.doms);
        let cuda = self.cuda.unwrap_or_default();
        self.cuda_ranked.entry(torch).or_insert_with(|| {
            let full: Vec<(Component, Cand)> = assign
                .iter()
                .map(|&(x, k)| (comps[x], doms[x][k]))
                .collect();
            let mut d = doms[cuda].to_vec();
            sort_cuda(p.ctx, &mut d, &full);
            d.iter()
                .map(|k| doms[cuda].iter().position(|x| x == k).unwrap_or_default())
                .collect()
        })
    }

    fn consistent(&self, assign: &[Slot], s: Slot) -> bool {
        assign.iter().all(|&a| self.compatible(a, s)) && self.triple_ok(assign, s)
    }

    /// DeepSpeed's CUDA × torch × DeepSpeed rule, once all three are chosen.
    fn triple_ok(&self, assign: &[Slot], (c, k): Slot) -> bool {
        let get = |x: Option<usize>| {
            let x = x?;
            let pos = if x == c {
                k
            } else {
                assign.iter().find(|(y, _)| *y == x)?.1
            };
            match self.doms[x][pos] {
                Cand::Idx(i) => Some(i),
                Cand::Host => None,
            }
        };
        match (get(self.cuda), get(self.torch), get(self.deepspeed)) {
            (Some(cu), Some(t), Some(ds)) => self.p.ctx.check_triple(cu, t, ds).is_ok(),
            _ => true,
        }
    }

    /// Every member in `rest` keeps a candidate compatible with the assignment.
    fn alive(&self, assign: &[Slot], rest: &[usize]) -> bool {
        rest.iter().all(|&y| {
            (0..self.doms[y].len()).any(|b| assign.iter().all(|&a| self.compatible(a, (y, b))))
        })
    }

    /// Starts a pass: the best `limit` rows ranked after `after`.
    fn pass(&mut self, limit: usize, after: Option<Vec<u32>>) {
        self.limit = limit;
        self.after = after;
        self.best.clear();
        self.more = false;
    }

    /// Whether the search is done: counting, past the cap.
    fn stopped(&self) -> bool {
        self.counting.is_some_and(|cap| self.count > cap)
    }

    /// The rank of each assigned candidate, `None` where it is not known yet: CUDA's
    /// rank follows torch's pick, so it is known once torch is assigned (or is no member).
    fn assigned_ranks(&mut self, assign: &[Slot]) -> Vec<Option<u32>> {
        let mut ranks = vec![None; self.comps.len()];
        let torch_known = self
            .torch
            .is_none_or(|t| assign.iter().any(|(x, _)| *x == t));
        for &(x, k) in assign {
            let r = if Some(x) != self.cuda {
                Some(k)
            } else if torch_known {
                self.cuda_order(assign).iter().position(|y| *y == k)
            } else {
                None
            };
            ranks[x] = r.map(|r| u32::try_from(r).unwrap_or(u32::MAX));
        }
        ranks
    }

    /// In a pass, whether `assign` can lead to no row worth keeping:
    ///
    /// * every completion ranks at or before `after` (given by an earlier pass): a row's
    ///   ranks are at most the assigned candidates' ranks and the largest elsewhere,
    ///   component by component, hence lexicographically too;
    /// * or, once `limit` rows are kept and one was left out, every completion ranks
    ///   after the worst kept row: its ranks are at least the assigned ones and 0
    ///   elsewhere.
    fn beaten(&mut self, assign: &[Slot]) -> bool {
        if self.counting.is_some() {
            return false;
        }
        let full = self.more && self.best.len() >= self.limit;
        if self.after.is_none() && !full {
            return false;
        }
        let ranks = self.assigned_ranks(assign);
        if let Some(after) = &self.after {
            let hi: Vec<u32> = ranks.iter().map(|r| r.unwrap_or(u32::MAX)).collect();
            if hi <= *after {
                return true;
            }
        }
        if !full {
            return false;
        }
        let Some(worst) = self.best.peek() else {
            return true;
        };
        let lo: Vec<u32> = ranks.iter().map(|r| r.unwrap_or(0)).collect();
        lo >= worst.ranks
    }

    /// Keeps a row: counts it, or keeps it among the pass's best `limit`.
    fn keep(&mut self, f: Found) {
        if self.counting.is_some() {
            self.count += 1;
        }
        if self.after.as_ref().is_some_and(|a| f.ranks <= *a) {
            return;
        }
        if self.best.len() < self.limit {
            self.best.push(f);
        } else {
            self.more = true;
            if self.best.peek().is_some_and(|w| f < *w) {
                self.best.pop();
                self.best.push(f);
            }
        }
    }

    /// Branches over every candidate of every axis.
    fn axes_dfs(&mut self, assign: &mut Vec<Slot>) {
        let depth = assign.len();
        if depth == self.axes.len() {
            if let Some(full) = self.complete(assign) {
                self.record(&full);
            }
            return;
        }
        let c = self.axes[depth];
        let rest: Vec<usize> = self.axes[depth + 1..]
            .iter()
            .chain(&self.followers)
            .copied()
            .collect();
        for k in 0..self.doms[c].len() {
            if self.stopped() {
                return;
            }
            if !self.consistent(assign, (c, k)) {
                continue;
            }
            assign.push((c, k));
            if !self.beaten(assign) && self.alive(assign, &rest) {
                self.axes_dfs(assign);
            }
            assign.pop();
        }
    }

    /// Completes the followers as the solver's search would: candidates best first, the
    /// first complete stack wins.
    fn complete(&mut self, assign: &mut Vec<Slot>) -> Option<Vec<Slot>> {
        let i = assign.len() - self.axes.len();
        if i == self.followers.len() {
            return Some(assign.clone());
        }
        let c = self.followers[i];
        let order: Vec<usize> = if Some(c) == self.cuda {
            self.cuda_order(assign).to_vec()
        } else {
            (0..self.doms[c].len()).collect()
        };
        for k in order {
            if !self.consistent(assign, (c, k)) {
                continue;
            }
            assign.push((c, k));
            let done = if self.alive(assign, &self.followers[i + 1..]) {
                self.complete(assign)
            } else {
                None
            };
            assign.pop();
            if done.is_some() {
                return done;
            }
        }
        None
    }

    fn record(&mut self, assign: &[Slot]) {
        let f = self.found(assign);
        if self.shared && !self.best_of_its_versions(assign, &f.ranks) {
            return;
        }
        self.keep(f);
    }

    /// Whether no other assignment of the axes to the same versions (two distributions
    /// of an extra's release) has a row that ranks before this one: rows are one per
    /// version of the axes, the better-ranked. Decided from the row alone, so that no
    /// pass needs the rows of another.
    fn best_of_its_versions(&mut self, assign: &[Slot], ranks: &[u32]) -> bool {
        let (p, doms) = (self.p, &self.doms);
        let same: Vec<Vec<usize>> = self
            .axes
            .iter()
            .map(|&x| {
                let k = assign.iter().find(|(y, _)| *y == x).map_or(0, |s| s.1);
                let v = p.ctx.version(self.comps[x], doms[x][k]);
                (0..doms[x].len())
                    .filter(|&j| p.ctx.version(self.comps[x], doms[x][j]) == v)
                    .collect()
            })
            .collect();
        if same.iter().all(|s| s.len() == 1) {
            return true;
        }
        let mut combo = vec![0usize; same.len()];
        'product: loop {
            let mut alt: Vec<Slot> = Vec::with_capacity(self.comps.len());
            let mut ok = true;
            for (i, &x) in self.axes.iter().enumerate() {
                let s = (x, same[i][combo[i]]);
                if !self.consistent(&alt, s) {
                    ok = false;
                    break;
                }
                alt.push(s);
            }
            let mine = alt.len() == self.axes.len() && alt.iter().all(|s| assign.contains(s));
            if ok && !mine {
                if let Some(full) = self.complete(&mut alt) {
                    if self.found(&full).ranks.as_slice() < ranks {
                        return false;
                    }
                }
            }
            for (i, n) in combo.iter_mut().enumerate() {
                *n += 1;
                if *n < same[i].len() {
                    continue 'product;
                }
                *n = 0;
            }
            return true;
        }
    }

    /// A complete assignment as a row found: its ranks and candidates in decision order.
    fn found(&mut self, assign: &[Slot]) -> Found {
        let mut full: Vec<Slot> = assign.to_vec();
        full.sort_unstable();
        let mut ranks = Vec::with_capacity(full.len());
        for &(c, k) in &full {
            let r = if Some(c) == self.cuda {
                let order = self.cuda_order(&full);
                order.iter().position(|x| *x == k).unwrap_or(usize::MAX)
            } else {
                k
            };
            ranks.push(u32::try_from(r).unwrap_or(u32::MAX));
        }
        let assign = full
            .iter()
            .map(|&(c, k)| (self.comps[c], self.doms[c][k]))
            .collect();
        Found { ranks, assign }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::version::VersionReq;
    use crate::solve::proptests::{random_catalog, random_spec, Rng};

    /// The spec with each axis narrowed to `==` a version (kept with its own requirement).
    fn pinned(spec: &Spec, pins: &[(Component, &Version)]) -> Spec {
        let mut s = spec.clone();
        for &(c, v) in pins {
            let req = match spec.components.get(&c) {
                Some(r) => format!("{r}, =={v}"),
                None => format!("=={v}"),
            };
            s.components.insert(c, VersionReq::parse(&req).unwrap());
        }
        s
    }

    /// Brute force: every combination of the axes' versions (those the requirements
    /// allow), pinned into the spec and solved with the solver; the rows that resolve,
    /// ordered by the documented preference (ranks among each component's candidates in
    /// decision order). `None` when the product is too large to try.
    fn oracle(cat: &Catalog, spec: &Spec, axes: &[Component], max: usize) -> Option<Vec<Row>> {
        let ctx = Ctx::quiet(cat, spec);
        let mut values: Vec<Vec<Version>> = Vec::new();
        for &c in axes {
            let mut vs: Vec<Version> = Vec::new();
            for k in ctx.candidates(c) {
                let v = ctx.version(c, k);
                let allowed = spec.components.get(&c).is_none_or(|r| r.matches(v));
                if allowed && !vs.contains(v) {
                    vs.push(v.clone());
                }
            }
            values.push(vs);
        }
        if values.iter().map(Vec::len).product::<usize>() > max {
            return None;
        }
        let mut rows: Vec<(Vec<usize>, Row)> = Vec::new();
        let mut combo = vec![0usize; axes.len()];
        'product: loop {
            if values.iter().all(|v| !v.is_empty()) {
                let pins: Vec<(Component, &Version)> = axes
                    .iter()
                    .zip(&combo)
                    .zip(&values)
                    .map(|((&c, &i), vs)| (c, &vs[i]))
                    .collect();
                let s = pinned(spec, &pins);
                // The solver's search on the pinned spec (`solve` without building the
                // resolution's explanations; `solver_agrees_with_brute_force` checks it).
                let m = members(&s);
                let pctx = Ctx::quiet(cat, &s);
                if let Some(assign) = Problem::new(&pctx, &m).search() {
                    let ranks = assign
                        .iter()
                        .map(|&(c, k)| {
                            let mut cands = ctx.candidates(c);
                            if c == Component::Cuda {
                                sort_cuda(&ctx, &mut cands, &assign);
                            }
                            cands.iter().position(|x| *x == k).unwrap()
                        })
                        .collect();
                    let row = Row {
                        versions: assign
                            .iter()
                            .map(|&(c, k)| (c, ctx.version(c, k).clone()))
                            .collect(),
                        distributions: assign
                            .iter()
                            .filter_map(|&(c, k)| match k {
                                Cand::Idx(i) if c.is_extra() => {
                                    Some((c, cat.extras[i].pypi_name.clone()))
                                }
                                _ => None,
                            })
                            .collect(),
                    };
                    rows.push((ranks, row));
                }
            }
            for (i, n) in combo.iter_mut().enumerate() {
                *n += 1;
                if *n < values[i].len() {
                    continue 'product;
                }
                *n = 0;
            }
            break;
        }
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        Some(rows.into_iter().map(|(_, r)| r).collect())
    }

    fn cases() -> u64 {
        std::env::var("GPUSTACK_PROPTEST_CASES")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(1000)
    }

    #[test]
    fn matrix_agrees_with_brute_force() {
        let (mut compared, mut skipped, mut empty, mut multi, mut custom) = (0, 0, 0, 0, 0);
        for seed in 0..cases() {
            let mut rng = Rng::new(seed + 4242);
            let cat = Catalog::from_layers(&[random_catalog(&mut rng)]).unwrap();
            for round in 0..2 {
                let mut spec = random_spec(&mut rng, &cat);
                if round == 1 {
                    // Wider: every requirement `*`, so that more rows exist.
                    for r in spec.components.values_mut() {
                        *r = VersionReq::any();
                    }
                }
                // Half the cases: the default axes; the others a random set of members
                // (implied components and extras included).
                let axes: Vec<Component> = if round == 0 {
                    default_axes(&spec)
                } else {
                    let m = members(&spec);
                    let mut a: Vec<Component> = m
                        .keys()
                        .copied()
                        .filter(|c| *c != Component::Driver && rng.chance(50))
                        .collect();
                    if a.is_empty() {
                        a = default_axes(&spec);
                    }
                    a
                };
                let Some(want) = oracle(&cat, &spec, &axes, 150) else {
                    skipped += 1;
                    continue;
                };
                compared += 1;
                if round == 1 {
                    custom += 1;
                }
                match matrix_over(&cat, &spec, &axes, None) {
                    Ok(m) => {
                        // Any number of rows per pass gives the same rows.
                        let chunk = 1 + usize::try_from(seed % 4).unwrap();
                        assert_eq!(
                            chunked(&cat, &spec, &axes, None, chunk),
                            m.rows,
                            "seed {seed}: chunk {chunk}"
                        );
                        assert_eq!(m.total, Some(m.rows.len()));
                        assert_eq!(
                            m.rows, want,
                            "seed {seed}: axes {axes:?} disagree on {spec:#?}"
                        );
                        if m.rows.len() > 1 {
                            multi += 1;
                        }
                    }
                    Err(Error::NoSolution(_)) => {
                        assert!(
                            want.is_empty(),
                            "seed {seed}: matrix empty, oracle {want:#?}"
                        );
                        empty += 1;
                    }
                    Err(e) => panic!("seed {seed}: {e}"),
                }
            }
        }
        // The generator must exercise every outcome, or the test proves little.
        let n = cases() as usize;
        assert!(compared > n, "compared {compared}, skipped {skipped}");
        assert!(
            multi > n / 5 && empty > n / 10,
            "multi-row {multi}, empty {empty}"
        );
        assert!(custom > n / 3, "custom axes {custom}");
    }

    /// The rows of [`stream`] with `chunk` rows per pass.
    fn chunked(
        cat: &Catalog,
        spec: &Spec,
        axes: &[Component],
        limit: Option<usize>,
        chunk: usize,
    ) -> Vec<Row> {
        let mut rows = Vec::new();
        let _ = stream(cat, spec, axes, limit, chunk, |e| {
            if let Event::Row(r) = e {
                rows.push(r.clone());
            }
            Ok::<(), ()>(())
        })
        .unwrap();
        rows
    }

    #[test]
    fn passes_of_any_size_give_the_same_rows() {
        let s = spec(
            "[hardware]\ngpus = [\"a100\"]\n[components]\ntorch = \">=2.4\"\npython = \"*\"\ncupy = \"*\"\n",
        );
        let axes = [Component::Python, Component::Torch, Component::Cupy];
        let all = matrix_over(stock(), &s, &axes, None).unwrap();
        assert!(all.rows.len() > 20, "{} rows", all.rows.len());
        for chunk in [1, 2, 7, 64] {
            assert_eq!(
                chunked(stock(), &s, &axes, None, chunk),
                all.rows,
                "chunk {chunk}"
            );
            assert_eq!(
                chunked(stock(), &s, &axes, Some(11), chunk),
                all.rows[..11],
                "chunk {chunk}, limit 11"
            );
        }
    }

    fn stock() -> &'static Catalog {
        static CAT: std::sync::OnceLock<Catalog> = std::sync::OnceLock::new();
        CAT.get_or_init(|| Catalog::stock().unwrap())
    }

    fn example_specs() -> Vec<(String, Spec)> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/specs");
        let mut paths: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "toml"))
            .collect();
        paths.sort();
        paths
            .iter()
            .map(|p| {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                let text = std::fs::read_to_string(p).unwrap();
                let spec = Spec::parse(&name, &text, stock()).unwrap();
                (name, spec)
            })
            .collect()
    }

    #[test]
    fn row_zero_is_the_lock_of_every_example_spec() {
        let cat = stock();
        let specs = example_specs();
        assert!(specs.len() >= 10, "{} example specs", specs.len());
        let mut several = 0;
        for (name, spec) in &specs {
            let m = matrix(cat, spec, None).unwrap();
            let lock = solve(cat, spec).unwrap();
            let first = &m.rows[0];
            let want: BTreeMap<Component, Version> = lock
                .picks
                .iter()
                .map(|p| (p.component, p.version.clone()))
                .collect();
            assert_eq!(first.versions, want, "{name}");
            for (c, i) in &lock.chosen {
                if c.is_extra() {
                    let d = &cat.extras[i.unwrap()].pypi_name;
                    assert_eq!(first.distributions.get(c), Some(d), "{name}: {c}");
                }
            }
            assert_eq!(
                m.members,
                lock.picks.iter().map(|p| p.component).collect::<Vec<_>>()
            );
            assert_eq!(m.axes, default_axes(spec), "{name}");
            if m.total.unwrap_or(0) > 1 {
                several += 1;
            }
            // Every row is within the spec's ranges, no two rows share their axis values,
            // and the first and last rows are what `solve` gives with the axes pinned.
            let mut keys = BTreeSet::new();
            for r in &m.rows {
                for c in &m.axes {
                    assert!(spec.components[c].matches(&r.versions[c]), "{name}: {c}");
                }
                let key: Vec<&Version> = m.axes.iter().map(|c| &r.versions[c]).collect();
                assert!(keys.insert(key), "{name}: a duplicate row");
            }
            let n = m.rows.len();
            for r in m.rows[..n.min(3)]
                .iter()
                .chain(&m.rows[n.saturating_sub(3)..])
            {
                let pins: Vec<(Component, &Version)> =
                    m.axes.iter().map(|c| (*c, &r.versions[c])).collect();
                let got = solve(cat, &pinned(spec, &pins)).unwrap();
                let got: BTreeMap<Component, Version> = got
                    .picks
                    .iter()
                    .map(|p| (p.component, p.version.clone()))
                    .collect();
                assert_eq!(got, r.versions, "{name}");
            }
        }
        assert!(
            several >= specs.len() / 2,
            "only {several} specs have several rows"
        );
    }

    fn spec(text: &str) -> Spec {
        let text = format!("[stack]\nname = \"ci\"\n{text}");
        Spec::parse("gpustack.toml", &text, stock()).unwrap()
    }

    #[test]
    fn limit_keeps_the_best_rows_and_counts_all() {
        let s = spec(
            "[hardware]\ngpus = [\"a100\"]\n[components]\ntorch = \">=2.4\"\npython = \"*\"\n",
        );
        let all = matrix(stock(), &s, None).unwrap();
        let total = all.total.unwrap();
        assert!(total > 10 && !all.truncated());
        assert_eq!(all.rows.len(), total);
        for n in [0, 1, 3, total - 1, total, total + 5] {
            let m = matrix(stock(), &s, Some(n)).unwrap();
            // A limit that leaves rows out stops counting them.
            assert_eq!(m.total, (n >= total).then_some(total), "limit {n}");
            assert_eq!(m.rows, all.rows[..n.min(total)], "limit {n}");
            assert_eq!(m.truncated(), n < total, "limit {n}");
            assert_eq!(m.to_json().contains("\"truncated\": true"), n < total);
        }
    }

    /// A small example whose versions are settled releases: torch 2.4–2.5 on an installed
    /// R550 driver, with CuPy 14.2 following (its CUDA 12 distribution).
    const EXAMPLE: &str = "[hardware]\ngpus = [\"h100\"]\ndriver = \"550.54.15\"\n[components]\npython = \">=3.12\"\ntorch = \">=2.4, <2.6\"\ncupy = \"14.2\"\n";

    #[test]
    fn json_snapshot() {
        let m = matrix(stock(), &spec(EXAMPLE), Some(3)).unwrap();
        assert_eq!(
            m.to_json(),
            r#"{
  "axes": ["python", "torch"],
  "members": ["driver", "cuda", "python", "torch", "cupy"],
  "total": null,
  "truncated": true,
  "rows": [
    {"driver": "550.54.15", "cuda": "12.4.1", "python": "3.13", "torch": "2.5.1+cu124", "cupy": "14.2.0", "cupy-pypi-name": "cupy-cuda12x"},
    {"driver": "550.54.15", "cuda": "12.4.1", "python": "3.12", "torch": "2.5.1+cu124", "cupy": "14.2.0", "cupy-pypi-name": "cupy-cuda12x"},
    {"driver": "550.54.15", "cuda": "12.1.1", "python": "3.13", "torch": "2.5.1+cu121", "cupy": "14.2.0", "cupy-pypi-name": "cupy-cuda12x"}
  ]
}
"#
        );
        // Valid JSON, whose rows are the GitHub objects.
        let v: serde_json::Value = serde_json::from_str(&m.to_json()).unwrap();
        let g: serde_json::Value = serde_json::from_str(&m.to_github()).unwrap();
        assert_eq!(v["rows"], g);
        assert!(v["total"].is_null());
    }

    #[test]
    fn github_snapshot() {
        let m = matrix(stock(), &spec(EXAMPLE), Some(2)).unwrap();
        let text = m.to_github();
        assert_eq!(
            text,
            concat!(
                r#"[{"driver":"550.54.15","cuda":"12.4.1","python":"3.13","torch":"2.5.1+cu124","cupy":"14.2.0","cupy-pypi-name":"cupy-cuda12x"},"#,
                r#"{"driver":"550.54.15","cuda":"12.4.1","python":"3.12","torch":"2.5.1+cu124","cupy":"14.2.0","cupy-pypi-name":"cupy-cuda12x"}]"#,
                "\n"
            )
        );
        // One line, as `echo "include=…" >> "$GITHUB_OUTPUT"` needs.
        assert_eq!(text.lines().count(), 1);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v[1]["torch"], "2.5.1+cu124");
        // An empty list (limit 0) is still an array.
        let m = matrix(stock(), &spec(EXAMPLE), Some(0)).unwrap();
        assert_eq!(m.to_github(), "[]\n");
        assert!(m.to_json().contains("\"rows\": []\n"));
    }

    #[test]
    fn an_empty_matrix_is_the_solver_s_conflict() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/conflicts");
        let mut n = 0;
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_none_or(|e| e != "toml") {
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap();
            let Ok(s) = Spec::parse("gpustack.toml", &text, stock()) else {
                continue;
            };
            let want = solve(stock(), &s).unwrap_err();
            let got = matrix(stock(), &s, None).unwrap_err();
            assert_eq!(got.exit_code(), 1, "{}", p.display());
            assert_eq!(got.to_string(), want.to_string(), "{}", p.display());
            n += 1;
        }
        assert!(n >= 10, "{n} conflicts");
    }

    #[test]
    fn axes_must_be_members_and_not_the_driver() {
        let s = spec("[hardware]\ngpus = [\"h100\"]\n[components]\ntorch = \"*\"\n");
        let e = matrix_over(stock(), &s, &[Component::Driver], None).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.to_string()
                .starts_with("error: the driver cannot be an axis"),
            "{e}"
        );
        let e = matrix_over(stock(), &s, &[Component::FlashAttn], None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "error: `flash-attn` is not in the stack of `ci`, so it cannot be an axis\n\nhint: add `flash-attn = \"*\"` to `[components]`"
        );
        // Implied members can be axes: Python under torch.
        let m = matrix_over(stock(), &s, &[Component::Torch, Component::Python], None).unwrap();
        assert_eq!(m.axes, [Component::Python, Component::Torch]);
        assert!(m.total > matrix(stock(), &s, None).unwrap().total);
    }

    #[test]
    fn extras_follow_unless_they_are_axes() {
        let s = spec("[hardware]\ngpus = [\"h100\"]\n[components]\ntorch = \"*\"\ncupy = \"*\"\nflash-attn = \"*\"\n");
        assert_eq!(default_axes(&s), [Component::Torch]);
        let m = matrix(stock(), &s, None).unwrap();
        let torches: BTreeSet<&Version> = m
            .rows
            .iter()
            .map(|r| &r.versions[&Component::Torch])
            .collect();
        assert_eq!(torches.len(), m.total.unwrap(), "one row per torch build");
        // As axes: CuPy's releases multiply the rows. CuPy 14.2.0 comes as cupy-cuda12x
        // and cupy-cuda13x, one axis value; each row names the distribution that fits
        // torch's CUDA major (rule extra.cuda-major).
        let m2 = matrix_over(stock(), &s, &[Component::Torch, Component::Cupy], None).unwrap();
        assert!(m2.total > m.total);
        assert_eq!(m2.rows[0], m.rows[0]);
        let mut both = BTreeSet::new();
        for r in &m2.rows {
            let t = &r.versions[&Component::Torch];
            let major = t.local().unwrap()[2..4].to_string();
            let d = &r.distributions[&Component::Cupy];
            assert_eq!(d, &format!("cupy-cuda{major}x"), "{t}");
            if r.versions[&Component::Cupy].as_str() == "14.2.0" {
                both.insert(d.clone());
            }
        }
        assert_eq!(both.len(), 2, "{both:?}");
    }
}
