//! The `gpustack` command line. The only place that prints or exits.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use gpustack::emit::{limits, ReadError};
use gpustack::error::{Diagnostic, Stage};
use gpustack::{Catalog, Component, Error, Lock};

mod show;

/// A line on standard error, escaped for the terminal; a closed stderr is ignored.
macro_rules! note {
    ($($t:tt)*) => {{
        let text = format!($($t)*);
        let _ = writeln!(std::io::stderr(), "{}", gpustack::error::terminal_safe(&text));
    }};
}

#[derive(Parser)]
#[command(
    name = "gpustack",
    version,
    about = "One lock for the GPU stack: driver, CUDA, cuDNN, NCCL, PyTorch, vLLM, DeepSpeed",
    long_about = "gpustack resolves a GPU software stack from a catalog of sourced compatibility facts \
and writes a deterministic lockfile that every generator renders from.\n\n\
Exit codes: 0 ok, 1 no compatible stack, 2 invalid input or usage.",
    after_help = "Examples:\n  gpustack init --gpu h100 --driver 550.54.15\n  gpustack lock\n  gpustack why torch\n  gpustack catalog show torch"
)]
struct Cli {
    /// Print only errors, warnings and the requested output (no progress lines)
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    quiet: bool,
    /// Print sources in full in messages (`why`, conflicts)
    #[arg(short, long, global = true)]
    verbose: bool,
    #[command(subcommand)]
    command: Command,
}

/// `-q`: progress lines (`wrote …`, `locked …`) are left out.
static QUIET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A progress line on standard error; left out with `-q`.
macro_rules! info {
    ($($t:tt)*) => {{
        if !QUIET.load(std::sync::atomic::Ordering::Relaxed) {
            note!($($t)*);
        }
    }};
}

/// `1 file`, `2 files`.
fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[derive(Subcommand)]
enum Command {
    /// Resolve gpustack.toml into gpustack.lock
    #[command(
        after_help = "Examples:\n  gpustack lock\n  gpustack lock --upgrade-package torch   # keep every other pick of gpustack.lock\n  gpustack lock --spec fixtures/specs/a100-pytorch.toml --out -\n  gpustack lock --catalog site-catalog/\n  gpustack lock --check   # exit 1 when gpustack.lock is not what `lock` would write"
    )]
    Lock {
        /// The spec to read
        #[arg(long, default_value = "gpustack.toml", value_name = "PATH")]
        spec: PathBuf,
        /// Where to write the lock (`-` for standard output)
        #[arg(long, default_value = "gpustack.lock", value_name = "PATH|-")]
        out: String,
        /// A catalog overlay directory (repeatable; later ones win)
        #[arg(long = "catalog", value_name = "DIR")]
        catalogs: Vec<PathBuf>,
        /// Do not write; exit 1 if the existing lock differs from the resolved one
        /// (never uses the network)
        #[arg(long)]
        check: bool,
        /// Use no network: digests and package versions come from the existing lock and the
        /// catalog (also `GPUSTACK_OFFLINE=1`)
        #[arg(long)]
        offline: bool,
        /// Re-resolve every pick; without it, the existing lock's picks that still fit the
        /// spec and catalog are kept
        #[arg(long, conflicts_with = "upgrade_package")]
        upgrade: bool,
        /// Re-resolve this component or Python package only (repeatable)
        #[arg(long = "upgrade-package", value_name = "NAME")]
        upgrade_package: Vec<String>,
        /// The summary's format: a line on standard error, or JSON on standard output
        #[arg(long, default_value = "text", value_parser = ["text", "json"])]
        format: String,
    },
    /// Render deployment files from gpustack.lock (docker, apptainer, packer, k8s, slurm, all)
    #[command(
        after_help = "Examples:\n  gpustack gen all\n  gpustack gen docker --lock gpustack.lock --out out/\n  gpustack gen k8s slurm\n  gpustack gen all --check   # exit 1 when out/ is not what `gen` would write\n\nEach target replaces its directory under --out as a whole (out/docker/, out/k8s/, …);\nnothing is written when any target fails."
    )]
    Gen {
        /// Targets: docker, apptainer, packer, k8s, slurm, or all
        #[arg(required = true, value_name = "TARGET")]
        targets: Vec<String>,
        /// The lock to render from
        #[arg(long, default_value = "gpustack.lock", value_name = "PATH")]
        lock: PathBuf,
        /// Output directory; each target writes OUT/<target>/
        #[arg(long, default_value = "out", value_name = "DIR")]
        out: PathBuf,
        /// Do not write; exit 1 if the files differ from what would be generated
        #[arg(long)]
        check: bool,
    },
    /// Check the lock, the generated files and a node against each other (for CI)
    #[command(
        after_help = "Examples:\n  gpustack check\n  gpustack check --format github      # annotations on the pull request\n  gpustack check --hardware node.toml # a node's `gpustack probe` output\n  gpustack check --format json --strict\n  gpustack check --strict --allow eol-driver\n  gpustack check --pedantic           # also catalog gaps (artifacts without a digest)\n  gpustack check -v                   # sources in full\n\nChecks: integrity (the lock's digests match its content), staleness (the spec and the\ncatalog still give this lock), drift (files under --out are what the lock renders),\nconsistency (driver, image tags and NCCL environment agree across targets), hardware\n(the node runs the locked stack), hygiene (end-of-life driver, known-unsafe versions;\nwarnings; artifacts without a digest with --pedantic).\n\nA warning the stack accepts on purpose is acknowledged in the spec, with a reason:\n  [check]\n  allow = [{ code = \"eol-driver\", reason = \"the nodes move to R580 in March\" }]\n\nThe default out/ is compared only when it was generated from the lock checked.\n\nExit codes: 0 no errors, 1 errors found (or warnings, with --strict), 2 invalid input."
    )]
    Check {
        /// The spec (default: gpustack.toml when present and --lock is the default)
        #[arg(long, value_name = "PATH")]
        spec: Option<PathBuf>,
        /// The lock to check
        #[arg(long, default_value = "gpustack.lock", value_name = "PATH")]
        lock: PathBuf,
        /// The generated files (skipped when the default is absent)
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// A node's hardware: the `[hardware]` table `gpustack probe` prints, or saved
        /// nvidia-smi output
        #[arg(long, value_name = "FILE")]
        hardware: Option<PathBuf>,
        /// A catalog overlay directory (repeatable; later ones win)
        #[arg(long = "catalog", value_name = "DIR")]
        catalogs: Vec<PathBuf>,
        /// Output format
        #[arg(long, default_value = "text", value_parser = ["text", "json", "github"])]
        format: String,
        /// Fail on warnings too
        #[arg(long)]
        strict: bool,
        /// Also report facts you cannot act on from the spec (artifacts the catalog has no
        /// digest for)
        #[arg(long)]
        pedantic: bool,
        /// Leave out findings with this code (repeatable), e.g. `--allow eol-driver`
        #[arg(long = "allow", value_name = "CODE", value_parser = clap::builder::PossibleValuesParser::new(gpustack::check::Code::ALL.map(gpustack::check::Code::name)))]
        allow: Vec<String>,
    },
    /// Compare two locks: what changed and what it costs an operator
    #[command(
        after_help = "Examples:\n  gpustack diff main.lock gpustack.lock\n  gpustack diff old.lock new.lock --format markdown > comment.md\n  git show origin/main:gpustack.lock > base.lock && gpustack diff base.lock gpustack.lock\n\nEach change is classified by what it costs: driver branch (new VM image, drain and reboot),\ndriver patch, CUDA major (rebuild every container), CUDA minor, cuDNN/NCCL (re-run NCCL\nvalidation), framework (re-validate the model), and more; the layers to rebuild and the\ngenerated files that change follow.\n\nExit codes: 0 compared (whether or not the locks differ; with --exit-code: the locks are\nthe same), 1 the locks differ (with --exit-code), 2 invalid input."
    )]
    Diff {
        /// The old lock
        old: PathBuf,
        /// The new lock
        new: PathBuf,
        /// Output format
        #[arg(long, default_value = "text", value_parser = ["text", "json", "markdown"])]
        format: String,
        /// Exit 1 when the locks differ (as `git diff --exit-code`)
        #[arg(long)]
        exit_code: bool,
    },
    /// List every stack the spec allows, for CI test matrices
    #[command(
        after_help = "Examples:\n  gpustack matrix\n  gpustack matrix --format github --limit 20   # a strategy.matrix.include list\n  gpustack matrix --spec fixtures/specs/a100-pytorch.toml\n\nThe axes are the components the spec lists (except the driver and extras); their\nrequirements stay ranges. Rows come best first: row 0 is what `gpustack lock` picks.\n\nExit codes: 0 at least one stack, 1 no compatible stack, 2 invalid input."
    )]
    Matrix {
        /// The spec to read
        #[arg(long, default_value = "gpustack.toml", value_name = "PATH")]
        spec: PathBuf,
        /// A catalog overlay directory (repeatable; later ones win)
        #[arg(long = "catalog", value_name = "DIR")]
        catalogs: Vec<PathBuf>,
        /// Output format: JSON with every member, or GitHub's `strategy.matrix.include`
        #[arg(long, default_value = "json", value_parser = ["json", "github"])]
        format: String,
        /// At most N rows (the best ones)
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
    },
    /// Read a node's GPUs and driver from nvidia-smi and print a `[hardware]` table
    #[command(
        after_help = "Examples:\n  gpustack probe > node.toml        # runs nvidia-smi on this node\n  gpustack probe --from smi.csv     # saved `nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv`\n  gpustack probe --from smi.xml     # saved `nvidia-smi -q -x`\n  gpustack check --hardware node.toml\n\nGPU names map to catalog ids through the catalog's `smi_names`; an unknown GPU is an error\n(exit 2) whose hint says how to add it in a catalog overlay."
    )]
    Probe {
        /// Read saved nvidia-smi output (CSV or `-q -x` XML) instead of running nvidia-smi
        #[arg(long, value_name = "FILE")]
        from: Option<PathBuf>,
        /// A catalog overlay directory (repeatable; later ones win)
        #[arg(long = "catalog", value_name = "DIR")]
        catalogs: Vec<PathBuf>,
        /// Output format: the `[hardware]` TOML table, or JSON
        #[arg(long, default_value = "toml", value_parser = ["toml", "json"])]
        format: String,
    },
    /// Explain why a component has its locked version
    #[command(
        after_help = "Examples:\n  gpustack why torch\n  gpustack why driver --lock lockfiles/h100-ib-train-serve.lock"
    )]
    Why {
        /// driver, cuda, cudnn, nccl, python, torch, vllm, deepspeed, or an extra
        /// (flash-attn, xformers, transformers, accelerate, bitsandbytes, tensorrt-llm, cupy,
        /// nvidia-dali)
        component: String,
        /// The lock to read
        #[arg(long, default_value = "gpustack.lock", value_name = "PATH")]
        lock: PathBuf,
        /// Output format
        #[arg(long, default_value = "text", value_parser = ["text", "json"])]
        format: String,
    },
    /// Show what the catalog holds; import releases from upstream
    #[command(
        after_help = "Examples:\n  gpustack catalog list\n  gpustack catalog show torch\n  gpustack catalog show gpu --catalog site-catalog/\n  gpustack catalog outdated\n  gpustack catalog import pypi vllm==0.6.3.post1 --out site-catalog/"
    )]
    Catalog {
        #[command(subcommand)]
        what: CatalogCommand,
    },
    /// Print a shell completion script (bash, zsh, fish, powershell, elvish)
    #[command(
        after_help = "Examples:\n  gpustack completions bash > ~/.local/share/bash-completion/completions/gpustack\n  gpustack completions zsh > \"${fpath[1]}/_gpustack\"\n  gpustack completions fish > ~/.config/fish/completions/gpustack.fish"
    )]
    Completions {
        /// The shell
        shell: clap_complete::Shell,
    },
    /// Write a commented starter gpustack.toml (never overwrites)
    #[command(
        after_help = "Examples:\n  gpustack init\n  gpustack init --gpu a100 --driver 535.104.05\n  gpustack init --path stacks/serve.toml --gpu l40s"
    )]
    Init {
        /// GPU id or alias from the catalog
        #[arg(long, default_value = "h100", value_name = "ID")]
        gpu: String,
        /// The installed driver version (omit to let gpustack pick one)
        #[arg(long, value_name = "VERSION")]
        driver: Option<String>,
        /// Where to write the spec
        #[arg(long, default_value = "gpustack.toml", value_name = "PATH")]
        path: PathBuf,
    },
}

#[derive(Subcommand)]
enum CatalogCommand {
    /// One line per family: how many entries, newest versions
    List {
        /// A catalog overlay directory (repeatable)
        #[arg(long = "catalog", value_name = "DIR")]
        catalogs: Vec<PathBuf>,
        /// Output format
        #[arg(long, default_value = "text", value_parser = ["text", "json"])]
        format: String,
    },
    /// Every entry of one family with its source
    Show {
        /// driver, cuda, gpu, os, python, cudnn, nccl, torch, vllm, deepspeed, extra, image,
        /// package, instance, bandwidth or env
        family: String,
        /// A catalog overlay directory (repeatable)
        #[arg(long = "catalog", value_name = "DIR")]
        catalogs: Vec<PathBuf>,
        /// Output format
        #[arg(long, default_value = "text", value_parser = ["text", "json"])]
        format: String,
    },
    /// Write overlay TOML from upstream metadata (PyPI, NVIDIA redistrib manifests)
    #[command(
        after_help = "Examples:\n  gpustack catalog import pypi vllm==0.6.3.post1 --out site-catalog/\n  gpustack catalog import pypi torch==2.5.1 --index https://download.pytorch.org/whl/cu124\n  gpustack catalog import redist redistrib_12.6.3.json --date 2026-11-25\n  gpustack lock --catalog site-catalog/\n\nEvery entry records its source URL and the date it was read (--date, else the\nresponse's Date header). Facts upstream metadata does not carry (arch lists, driver\nminimums, rules) are kept from the catalog or left out, and listed; never guessed."
    )]
    Import {
        #[command(subcommand)]
        from: ImportCommand,
    },
    /// What upstream has that the catalog lacks, per family
    #[command(
        after_help = "Examples:\n  gpustack catalog outdated\n  gpustack catalog outdated --format json\n  gpustack catalog outdated --redist redistrib_13.0.2.json\n\nPython families (torch, vllm, deepspeed, cuDNN and NCCL wheels, extras) are read from\nthe index; CUDA and cuDNN releases from the manifests given with --redist."
    )]
    Outdated {
        /// A catalog overlay directory (repeatable)
        #[arg(long = "catalog", value_name = "DIR")]
        catalogs: Vec<PathBuf>,
        /// The simple index to compare with
        #[arg(long, default_value = gpustack::import::PYPI, value_name = "URL")]
        index: String,
        /// An NVIDIA redistrib manifest, file or URL (repeatable)
        #[arg(long = "redist", value_name = "FILE_OR_URL")]
        redist: Vec<String>,
        /// Output format
        #[arg(long, default_value = "text", value_parser = ["text", "json"])]
        format: String,
        /// The date the report records as read (YYYY-MM-DD); default: the Date header
        #[arg(long, value_name = "YYYY-MM-DD")]
        date: Option<String>,
        /// Fail instead of using the network
        #[arg(long)]
        offline: bool,
    },
}

#[derive(Subcommand)]
enum ImportCommand {
    /// Releases from a Python simple index (PEP 691/503 + PEP 658 metadata)
    Pypi {
        /// `NAME` (newest release) or `NAME==VERSION`: torch, vllm, deepspeed,
        /// nvidia-cudnn-cuXX, nvidia-nccl-cuXX or an extra's distribution
        #[arg(required = true, value_name = "NAME[==VERSION]")]
        requests: Vec<String>,
        /// The simple index (a PyTorch variant index gives `torch-<variant>.toml`)
        #[arg(long, default_value = gpustack::import::PYPI, value_name = "URL")]
        index: String,
        /// When --index is a mirror: the index URL the entries record (`files`, an
        /// extra's `index`), e.g. https://pypi.org/simple
        #[arg(long, value_name = "URL")]
        record_index: Option<String>,
        /// Overlay directory to write into (files are replaced whole)
        #[arg(long, default_value = "catalog-import", value_name = "DIR")]
        out: PathBuf,
        /// The catalog the overlay sits on (repeatable): facts not derived are kept from it
        #[arg(long = "catalog", value_name = "DIR")]
        catalogs: Vec<PathBuf>,
        /// The date entries record as read (YYYY-MM-DD); default: the Date header
        #[arg(long, value_name = "YYYY-MM-DD")]
        date: Option<String>,
        /// Do not also import the cuDNN/NCCL/torch releases a pin names
        #[arg(long)]
        no_follow: bool,
        /// Fail instead of using the network
        #[arg(long)]
        offline: bool,
    },
    /// CUDA and cuDNN releases from NVIDIA `redistrib_X.Y.Z.json` manifests
    Redist {
        /// Manifest files or URLs
        #[arg(required = true, value_name = "FILE_OR_URL")]
        manifests: Vec<String>,
        /// Overlay directory to write into (files are replaced whole)
        #[arg(long, default_value = "catalog-import", value_name = "DIR")]
        out: PathBuf,
        /// The catalog the overlay sits on (repeatable): facts not derived are kept from it
        #[arg(long = "catalog", value_name = "DIR")]
        catalogs: Vec<PathBuf>,
        /// The date entries record as read (YYYY-MM-DD); default: the Date header of a
        /// URL, today for a file
        #[arg(long, value_name = "YYYY-MM-DD")]
        date: Option<String>,
        /// Fail instead of using the network (files still work)
        #[arg(long)]
        offline: bool,
    },
}

/// The clap command, with `--version` naming the built-in catalog.
fn command() -> clap::Command {
    use clap::CommandFactory;
    let id = Catalog::stock_identity();
    let version = format!(
        "{}\nbuilt-in catalog: {} files, sources read up to {}, {}",
        env!("CARGO_PKG_VERSION"),
        id.files,
        id.date.as_deref().unwrap_or("(no dates recorded)"),
        id.digest
    );
    // clap keeps a `&'static str`; the process prints it once and exits.
    Cli::command().version(&*Box::leak(version.into_boxed_str()))
}

/// JSON text with one trailing newline.
fn json_text(v: &serde_json::Value) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
    s.push('\n');
    s
}

fn main() -> ExitCode {
    use clap::FromArgMatches;
    let parsed = command()
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m));
    let cli = match parsed {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let verbose = cli.verbose;
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            let text = if verbose {
                format!("{e:#}")
            } else {
                e.to_string()
            };
            let _ = writeln!(
                std::io::stderr(),
                "{}",
                gpustack::error::terminal_safe(&text)
            );
            ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2))
        }
    }
}

/// Standard output was closed (`gpustack matrix | head -1`): stop quietly.
struct ClosedPipe;

/// Writes `text` to standard output. Text formats are escaped for the terminal (JSON and
/// Markdown escape for themselves); a closed pipe is [`ClosedPipe`], never a panic.
fn stdout(text: &str) -> Result<(), ClosedPipe> {
    let mut o = std::io::stdout().lock();
    match o.write_all(text.as_bytes()).and_then(|()| o.flush()) {
        Ok(()) => Ok(()),
        Err(_) => Err(ClosedPipe),
    }
}

/// [`out`] for text meant for a terminal: control characters escaped.
fn out_text(text: &str) -> Result<(), ClosedPipe> {
    stdout(&gpustack::error::terminal_safe(text))
}

fn load_catalog(dirs: &[PathBuf]) -> Result<Catalog, Error> {
    let refs: Vec<&Path> = dirs.iter().map(PathBuf::as_path).collect();
    Catalog::load(&refs)
}

fn read_text(path: &Path, stage: Stage, what: &str, hint: &str) -> Result<String, Error> {
    let limit = match stage {
        Stage::Spec if what == "spec" => limits::SPEC,
        Stage::Lock => limits::LOCK,
        _ => limits::HARDWARE,
    };
    read_text_limited(path, stage, what, hint, limit)
}

fn read_text_limited(
    path: &Path,
    stage: Stage,
    what: &str,
    hint: &str,
    limit: u64,
) -> Result<String, Error> {
    let shown = gpustack::emit::shown(path);
    let bytes = gpustack::emit::read_bounded(path, limit).map_err(|e| match e {
        ReadError::NotFound => {
            Diagnostic::new(stage, format!("{what} `{shown}` not found")).hint(hint)
        }
        ReadError::NotRegular(kind) => Diagnostic::new(
            stage,
            format!("cannot read {what} `{shown}`: it is {kind}, not a regular file"),
        )
        .hint(hint),
        ReadError::TooLarge(n) => Diagnostic::new(
            stage,
            format!(
                "{what} `{shown}` is larger than {}",
                gpustack::emit::human_size(n)
            ),
        )
        .hint(format!(
            "gpustack reads a {what} of at most {}; is this the right file?",
            gpustack::emit::human_size(n)
        )),
        ReadError::Io(e) => {
            Diagnostic::new(stage, format!("cannot read {what} `{shown}`: {e}")).hint(hint)
        }
    })?;
    String::from_utf8(bytes).map_err(|e| {
        Diagnostic::new(
            stage,
            format!(
                "{what} `{shown}` is not UTF-8 (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            ),
        )
        .hint("save it as UTF-8, e.g. `iconv -f latin1 -t utf-8 FILE`")
        .into()
    })
}

/// `lock` writes only over a lock: never over the spec it read (`--out gpustack.toml`),
/// nor over an existing file that does not start with the lock's `@generated` marker.
fn refuse_to_clobber(out: &Path, spec: &Path) -> Result<(), Error> {
    let shown = gpustack::emit::shown(out);
    let same = match (std::fs::metadata(out), std::fs::metadata(spec)) {
        #[cfg(unix)]
        (Ok(a), Ok(b)) => {
            use std::os::unix::fs::MetadataExt;
            a.dev() == b.dev() && a.ino() == b.ino()
        }
        _ => std::fs::canonicalize(out)
            .ok()
            .is_some_and(|a| std::fs::canonicalize(spec).ok() == Some(a)),
    };
    if same {
        return Err(Diagnostic::new(
            Stage::Usage,
            format!("refusing to write the lock over the spec `{shown}`"),
        )
        .hint("the lock goes to its own file: `--out gpustack.lock`")
        .into());
    }
    if !std::fs::symlink_metadata(out).is_ok_and(|m| m.is_file()) {
        return Ok(());
    }
    // The marker is the first line of every lock gpustack writes; 64 bytes tell.
    let mut head = [0u8; 64];
    let n = std::fs::File::open(out)
        .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
        .unwrap_or(0);
    let marker = b"# This file is @generated by gpustack";
    if n == 0 || head[..n].starts_with(marker) {
        return Ok(());
    }
    Err(Diagnostic::new(
        Stage::Usage,
        format!("refusing to overwrite `{shown}`: it is not a gpustack lock"),
    )
    .hint("a lock starts with `# This file is @generated by gpustack`; choose another `--out`, or remove the file first")
    .into())
}

/// Reads and parses a lock; returns the path as the user named it, for messages.
fn read_lock(path: &Path, hint: &str) -> Result<(String, Lock), Error> {
    read_lock_text(path, hint).map(|(shown, _, lock)| (shown, lock))
}

fn read_lock_text(path: &Path, hint: &str) -> Result<(String, String, Lock), Error> {
    let shown = gpustack::emit::shown(path);
    let text = read_text(path, Stage::Lock, "lock", hint)?;
    let mut lock = Lock::parse(&shown, &text)?;
    load_pylocks(path, &mut lock)?;
    Ok((shown, text, lock))
}

/// Reads the `pylock.*.toml` files a lock names, from the lock's directory; each must
/// match the digest the lock records.
fn load_pylocks(lock_path: &Path, lock: &mut Lock) -> Result<(), Error> {
    let Some(python) = lock.python.as_mut() else {
        return Ok(());
    };
    let dir = lock_path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let bad = gpustack::resolve::python::load(python, dir);
    if bad.is_empty() {
        return Ok(());
    }
    Err(bad
        .into_iter()
        .map(|(file, why)| {
            Diagnostic::new(
                Stage::Lock,
                format!("`{}` does not match the lock: {why}", gpustack::emit::shown(&dir.join(&file))),
            )
            .hint("the pylock files are written by `gpustack lock` beside gpustack.lock and committed with it; re-run `gpustack lock` instead of editing them")
        })
        .collect::<Vec<_>>()
        .into())
}

fn run(cli: Cli) -> Result<u8, Error> {
    QUIET.store(cli.quiet, std::sync::atomic::Ordering::Relaxed);
    let verbose = cli.verbose;
    match cli.command {
        Command::Completions { shell } => {
            let mut cmd = command();
            let mut buf = Vec::new();
            clap_complete::generate(shell, &mut cmd, "gpustack", &mut buf);
            let _ = stdout(&String::from_utf8_lossy(&buf));
            Ok(0)
        }
        Command::Lock {
            spec,
            out,
            catalogs,
            check,
            offline,
            upgrade,
            upgrade_package,
            format,
        } => {
            let python_upgrade = gpustack::PythonUpgrade {
                all: upgrade,
                packages: upgrade_package.clone(),
            };
            let upgrade = if upgrade {
                gpustack::Upgrade::All
            } else if upgrade_package.is_empty() {
                gpustack::Upgrade::Nothing
            } else {
                gpustack::Upgrade::Packages(upgrade_package)
            };
            let catalog = load_catalog(&catalogs)?;
            let spec_shown = gpustack::emit::shown(&spec);
            let text = read_text(
                &spec,
                Stage::Spec,
                "spec",
                "create one with `gpustack init`, or pass `--spec PATH`",
            )?;
            let offline = offline
                || check
                || std::env::var_os("GPUSTACK_OFFLINE").is_some_and(|v| !v.is_empty() && v != "0");
            // The lock being replaced: its registry digests stand when a registry cannot be
            // asked (`--offline`, unreachable).
            // Read as any lock is (bounded, regular files only); one that does not read is
            // simply not reused.
            let previous = (out != "-")
                .then(|| gpustack::emit::read_bounded(Path::new(&out), limits::LOCK).ok())
                .flatten()
                .and_then(|b| String::from_utf8(b).ok())
                .and_then(|t| Lock::parse(&out, &t).ok())
                .map(|mut p| {
                    if let Some(py) = p.python.as_mut() {
                        let dir = Path::new(&out)
                            .parent()
                            .filter(|d| !d.as_os_str().is_empty())
                            .unwrap_or(Path::new("."));
                        // A file that no longer matches is simply not reused.
                        let _ = gpustack::resolve::python::load(py, dir);
                    }
                    p
                });
            let (mut lock, report) = if offline {
                gpustack::lock_spec_upgrading(
                    &catalog,
                    &spec_shown,
                    &text,
                    &gpustack::resolve::http::Offline,
                    previous.as_ref(),
                    &upgrade,
                )?
            } else {
                let http = gpustack::resolve::http::Http::new(false);
                gpustack::lock_spec_upgrading(
                    &catalog,
                    &spec_shown,
                    &text,
                    &http,
                    previous.as_ref(),
                    &upgrade,
                )?
            };
            let outcome = match gpustack::lock_python(
                &catalog,
                &mut lock,
                offline,
                previous.as_ref(),
                &python_upgrade,
            ) {
                Ok(o) => o,
                // `--check` never resolves: a closure that would have to be is stale.
                Err(e) if check => {
                    note!("error: {} is stale: `gpustack lock` would resolve the Python closure again\n\n{e}", gpustack::emit::shown(Path::new(&out)));
                    return Ok(1);
                }
                Err(e) => return Err(e),
            };
            // Said after the lock is written: where each digest came from when not the registry.
            // Offline by request (`--offline`, `GPUSTACK_OFFLINE`), that is what was asked for:
            // the notes are printed with `-v` only.
            let quiet_fallback = offline && !verbose;
            let mut notes: Vec<String> = report
                .fallback
                .iter()
                .map(|(r, why)| format!("note: `{r}`: digest from the {why}"))
                .collect();
            if quiet_fallback {
                notes.clear();
            }
            if !report.unpinned.is_empty() && !quiet_fallback {
                notes.push(format!(
                    "note: pinned by tag only (no registry was asked or answered, and the catalog has no digest): {}",
                    report.unpinned.join(", ")
                ));
            }
            if let Some(w) = catalog.unknown_branch(&lock.hardware.driver) {
                notes.insert(0, format!("warning: {w}\n\nhint: check the version `nvidia-smi` prints; `gpustack catalog show driver` lists the branches, and a catalog overlay can add one"));
            }
            match &outcome {
                gpustack::PythonOutcome::Open(why) => notes.push(format!(
                    "warning: the Python closure is not locked: {why}\n  the generated builds resolve Python packages at build time until it is"
                )),
                gpustack::PythonOutcome::Closed { resolved } if !resolved.is_empty() => {
                    notes.push(format!("note: resolved the Python closure: {}", resolved.join(", ")));
                }
                _ => {}
            }
            // The process ends right after; freeing the catalog would only cost time.
            std::mem::forget(catalog);
            let rendered = lock.to_toml();
            let pylocks: Vec<(String, String)> = lock
                .python
                .iter()
                .flat_map(|p| p.files.iter())
                .map(|f| (f.file.clone(), f.contents.clone().unwrap_or_default()))
                .collect();
            if out == "-" {
                if check {
                    return Err(Diagnostic::new(
                        Stage::Usage,
                        "`--check` compares against a lock file; it cannot be used with `--out -`",
                    )
                    .hint("name the lock: `gpustack lock --check --out gpustack.lock`")
                    .into());
                }
                let _ = stdout(&rendered);
                for n in &notes {
                    note!("{n}");
                }
                return Ok(0);
            }
            let out_path = PathBuf::from(&out);
            let out_shown = gpustack::emit::shown(&out_path);
            // `gpustack lock` as the user would re-run it: their --spec and --out repeated.
            let mut again = String::from("gpustack lock");
            if spec != Path::new("gpustack.toml") {
                again.push_str(&format!(
                    " --spec {}",
                    gpustack::render::sh_quote(&spec_shown)
                ));
            }
            if out != "gpustack.lock" {
                again.push_str(&format!(
                    " --out {}",
                    gpustack::render::sh_quote(&out_shown)
                ));
            }
            if check {
                // The existing lock, read as any lock is: a directory, FIFO or device is an
                // input error (2), not a stale lock (1).
                let existing = match gpustack::emit::read_bounded(&out_path, limits::LOCK) {
                    Ok(b) => b,
                    Err(ReadError::NotFound) => {
                        note!("error: {out_shown} does not exist: `gpustack lock` would create it\n\nhint: run `{again}` and commit the result");
                        return Ok(1);
                    }
                    Err(e) => {
                        return Err(Diagnostic::new(
                            Stage::Lock,
                            format!("cannot read lock `{out_shown}`: {e}"),
                        )
                        .hint("`--out` names the lock file, like `gpustack.lock`")
                        .into())
                    }
                };
                let dir = out_path
                    .parent()
                    .filter(|p| !p.as_os_str().is_empty())
                    .unwrap_or(Path::new("."));
                let pylocks_current = pylocks
                    .iter()
                    .all(|(f, c)| std::fs::read(dir.join(f)).is_ok_and(|b| b == c.as_bytes()));
                if existing == rendered.as_bytes() && pylocks_current {
                    info!("{out_shown} is up to date");
                    return Ok(0);
                }
                note!("error: {out_shown} is stale: `gpustack lock` would change it\n\nhint: run `{again}` and commit the result");
                return Ok(1);
            }
            refuse_to_clobber(&out_path, &spec)?;
            let parent = gpustack::emit::check_destination(&out_path)
                .map(|()| out_path.parent().filter(|p| !p.as_os_str().is_empty()))?;
            if let Some(parent) = parent.filter(|p| !p.exists()) {
                std::fs::create_dir_all(parent).map_err(|e| {
                    Diagnostic::new(
                        Stage::Io,
                        format!(
                            "cannot create directory `{}`: {e}",
                            gpustack::emit::shown(parent)
                        ),
                    )
                    .hint("check the `--out` path and its permissions")
                })?;
            }
            {
                let dir = parent.unwrap_or(Path::new("."));
                let _guard = gpustack::emit::DirLock::acquire(dir)?;
                gpustack::emit::sweep_temporaries(dir);
                // The pylocks first, the lock last: the lock names them by digest, so a
                // crash in between leaves the old lock, which `gen` refuses to pair with
                // the new files rather than building from a mix.
                for (file, contents) in &pylocks {
                    gpustack::emit::write_atomic(&dir.join(file), contents.as_bytes())?;
                }
                gpustack::emit::write_atomic(&out_path, rendered.as_bytes())?;
                // Files the replaced lock named and this one does not.
                for f in previous
                    .iter()
                    .flat_map(|p| p.python.iter())
                    .flat_map(|p| p.files.iter())
                {
                    if !pylocks.iter().any(|(n, _)| *n == f.file) {
                        let _ = std::fs::remove_file(dir.join(&f.file));
                    }
                }
            }
            if format == "json" {
                let _ = stdout(&json_text(&show::lock_summary_json(
                    &lock, &out_shown, &notes,
                )));
                return Ok(0);
            }
            let summary: Vec<String> = lock
                .components
                .iter()
                .map(|c| format!("{} {}", c.name, c.version))
                .collect();
            info!(
                "locked `{}` into {out_shown}: {}",
                lock.request.name,
                summary.join(", ")
            );
            for n in &notes {
                note!("{n}");
            }
            Ok(0)
        }
        Command::Gen {
            targets,
            lock,
            out,
            check,
        } => {
            let mut chosen: Vec<gpustack::plan::Target> = Vec::new();
            for t in &targets {
                if t.eq_ignore_ascii_case("all") {
                    chosen.extend(gpustack::plan::Target::ALL);
                    continue;
                }
                let key = gpustack::error::name_key(t);
                let named = gpustack::plan::Target::ALL
                    .into_iter()
                    .find(|x| gpustack::error::name_key(x.name()) == key);
                let Some(x) = named else {
                    let names: Vec<&str> = gpustack::plan::Target::ALL
                        .iter()
                        .map(|t| t.name())
                        .collect();
                    let mut d = Diagnostic::new(Stage::Usage, format!("unknown target `{t}`"))
                        .hint(format!("targets are: {}, all", names.join(", ")));
                    if let Some(s) = gpustack::error::did_you_mean(t, names.iter().copied()) {
                        d = d.hint(format!("did you mean `{s}`?"));
                    }
                    return Err(d.into());
                };
                chosen.push(x);
            }
            chosen.sort();
            chosen.dedup();
            let lock_arg = lock.clone();
            let (shown, lock_text, lock) = read_lock_text(
                &lock,
                "create it with `gpustack lock`, or pass `--lock PATH`",
            )?;
            // The lock is the only input: one whose digests do not match its content was
            // edited by hand, and rendering it would bake the edit into every target.
            if let Some(m) = lock.verify().first() {
                let mut d = Diagnostic::new(
                    Stage::Lock,
                    format!(
                        "`{shown}` was edited by hand: its {} does not match its content",
                        m.what
                    ),
                );
                if let Some(at) = m.offset(&lock_text) {
                    d = d.at_offset(&shown, &lock_text, at);
                }
                return Err(d
                .hint("change gpustack.toml (or a catalog overlay) and run `gpustack lock`; `gpustack check` lists every mismatch")
                .into());
            }
            // Render everything first: a failure writes nothing. Then every target is
            // written together, or none is (gpustack::emit's protocol).
            let rendered = gpustack::plan::generate_many(&lock, &chosen)?;
            let targets_files: Vec<gpustack::emit::TargetFiles<'_>> = rendered
                .iter()
                .map(|(t, files)| gpustack::emit::TargetFiles {
                    name: t.name(),
                    files: files
                        .iter()
                        .map(|f| gpustack::emit::OutFile {
                            path: &f.path,
                            contents: f.contents.as_bytes(),
                            executable: f.executable,
                        })
                        .collect(),
                })
                .collect();
            let out_shown = gpustack::emit::shown(&out);
            if !check {
                let (written, recovered) = gpustack::emit::write_targets(&out, &targets_files)?;
                if let Some(r) = recovered {
                    info!(
                        "rolled back an interrupted `gpustack gen` in {out_shown} ({})",
                        r.join(", ")
                    );
                }
                for w in &written {
                    let dir = gpustack::emit::shown(&out.join(&w.name));
                    if w.changed {
                        info!("wrote {dir} ({})", plural(w.files, "file", "files"));
                    } else {
                        // Unchanged: the files (and their mtimes) were left alone.
                        info!("{dir} is up to date ({})", plural(w.files, "file", "files"));
                    }
                }
                return Ok(0);
            }
            let mut stale: Vec<String> = gpustack::emit::interrupted(&out).into_iter().collect();
            for t in &targets_files {
                for d in gpustack::emit::diff_dir(&out.join(t.name), &t.files) {
                    stale.push(format!("{}/{d}", t.name));
                }
            }
            if stale.is_empty() {
                info!("{out_shown} is up to date");
                return Ok(0);
            }
            note!("error: {out_shown} is stale: `gpustack gen` would change it");
            for s in &stale {
                note!("    {s}");
            }
            // The hint repeats the paths the user gave.
            let mut again = format!("gpustack gen {}", targets.join(" "));
            if lock_arg != Path::new("gpustack.lock") {
                again.push_str(&format!(
                    " --lock {}",
                    gpustack::render::sh_quote(&gpustack::emit::shown(&lock_arg))
                ));
            }
            if out != Path::new("out") {
                again.push_str(&format!(
                    " --out {}",
                    gpustack::render::sh_quote(&out_shown)
                ));
            }
            note!("\nhint: run `{again}` and commit the result");
            Ok(1)
        }
        Command::Check {
            spec,
            lock,
            out,
            hardware,
            catalogs,
            format,
            strict,
            pedantic,
            allow,
        } => {
            let catalog = load_catalog(&catalogs)?;
            let lock_shown = gpustack::emit::shown(&lock);
            let lock_text = read_text(
                &lock,
                Stage::Lock,
                "lock",
                "create it with `gpustack lock`, or pass `--lock PATH`",
            )?;
            // An explicit --spec or --out must exist; the defaults are used when present.
            // The default spec goes with the default lock only: `--lock other.lock` run where
            // a gpustack.toml lies would compare that lock with an unrelated spec.
            let lock_is_default = lock == Path::new("gpustack.lock");
            let spec_path = match spec {
                Some(p) => Some(p),
                None => {
                    Some(PathBuf::from("gpustack.toml")).filter(|p| lock_is_default && p.exists())
                }
            };
            let spec_text = match &spec_path {
                Some(p) => Some((
                    gpustack::emit::shown(p),
                    read_text(p, Stage::Spec, "spec", "pass `--spec PATH`")?,
                )),
                None => None,
            };
            let out_given = out.is_some();
            let out_dir = match out {
                Some(p) if !p.is_dir() => {
                    return Err(Diagnostic::new(
                        Stage::Usage,
                        format!("output directory `{}` not found", gpustack::emit::shown(&p)),
                    )
                    .hint("generate it with `gpustack gen all`, or leave out `--out`")
                    .into())
                }
                Some(p) => Some(p),
                None => Some(PathBuf::from("out")).filter(|p| p.is_dir()),
            };
            let mut tree = match &out_dir {
                Some(d) => Some((gpustack::emit::shown(d), gpustack::emit::read_out_tree(d)?)),
                None => None,
            };
            // The default `out/` is compared only when it was generated from this lock: run
            // from a repository root with `--lock other.lock`, it belongs to another.
            let mut foreign = None;
            if !out_given {
                if let Some((d, t)) = &tree {
                    let parsed = Lock::parse(&lock_shown, &lock_text)?;
                    if let Some(h) = gpustack::check::foreign_out(&parsed, &t.files) {
                        foreign = Some(format!(
                            "{d}/ was generated from another lock ({h}); pass `--out {d}` to compare it"
                        ));
                        tree = None;
                    }
                }
            }
            let hw = match &hardware {
                Some(p) => {
                    let shown = gpustack::emit::shown(p);
                    let text = read_text(
                        p,
                        Stage::Spec,
                        "hardware profile",
                        "write one with `gpustack probe > node.toml`",
                    )?;
                    Some(match gpustack::probe::sniff(&text) {
                        // Raw nvidia-smi output (CSV or XML): probe it here.
                        Some(_) => {
                            let probe = gpustack::probe::parse(&shown, &text, &catalog)?;
                            gpustack::check::HostHardware::from_probe(&probe, &catalog)
                        }
                        None => gpustack::check::HostHardware::parse(&shown, &text, &catalog)?,
                    })
                }
                None => None,
            };
            // The closure's files beside the lock, as the lock names them.
            let pylocks: std::collections::BTreeMap<String, String> =
                Lock::parse(&lock_shown, &lock_text)
                    .ok()
                    .and_then(|l| l.python)
                    .map(|py| {
                        let dir = lock
                            .parent()
                            .filter(|p| !p.as_os_str().is_empty())
                            .unwrap_or(Path::new("."));
                        py.files
                            .iter()
                            .filter_map(|f| {
                                let b =
                                    gpustack::emit::read_bounded(&dir.join(&f.file), limits::LOCK)
                                        .ok()?;
                                Some((f.file.clone(), String::from_utf8(b).ok()?))
                            })
                            .collect()
                    })
                    .unwrap_or_default();
            let report = gpustack::check::check(&gpustack::check::Inputs {
                pylocks: &pylocks,
                lock: (&lock_shown, &lock_text),
                spec: spec_text.as_ref().map(|(p, t)| (p.as_str(), t.as_str())),
                catalog: &catalog,
                out: tree.as_ref().map(|(d, t)| (d.as_str(), &t.files)),
                unusual: tree.as_ref().map_or(&[][..], |(_, t)| &t.unusual),
                hardware: hw.as_ref(),
            })?;
            let mut report = report;
            if let Some(reason) = foreign {
                report.skip("drift", reason);
                report.skip("consistency", "as drift".to_string());
            }
            report.apply(&gpustack::check::Policy {
                pedantic,
                allow: allow
                    .iter()
                    .filter_map(|a| gpustack::check::Code::from_name(a))
                    .collect(),
            });
            let _ = match format.as_str() {
                "json" => stdout(&report.to_json()),
                "github" => stdout(&report.to_github()),
                _ => out_text(&report.text(verbose)),
            };
            Ok(report.exit_code(strict))
        }
        Command::Diff {
            old,
            new,
            format,
            exit_code,
        } => {
            let hint = "pass two lock files: `gpustack diff OLD.lock NEW.lock`";
            let (_, old) = read_lock(&old, hint)?;
            let (_, new) = read_lock(&new, hint)?;
            let differ = old.to_toml() != new.to_toml();
            let d = gpustack::diff::diff(&old, &new);
            let _ = match format.as_str() {
                "json" => stdout(&d.to_json()),
                "markdown" => stdout(&d.to_markdown()),
                _ => out_text(&d.to_text()),
            };
            Ok(u8::from(exit_code && differ))
        }
        Command::Matrix {
            spec,
            catalogs,
            format,
            limit,
        } => {
            let catalog = load_catalog(&catalogs)?;
            let shown = gpustack::emit::shown(&spec);
            let text = read_text(
                &spec,
                Stage::Spec,
                "spec",
                "create one with `gpustack init`, or pass `--spec PATH`",
            )?;
            let spec = gpustack::Spec::parse(&shown, &text, &catalog)?;
            let m = gpustack::solve::matrix::matrix(&catalog, &spec, limit)?;
            {
                // Row by row: `gpustack matrix | head -1` ends quietly when head exits.
                let mut w = std::io::BufWriter::new(std::io::stdout().lock());
                let written = match format.as_str() {
                    "github" => m.write_github(&mut w),
                    _ => m.write_json(&mut w),
                };
                if written.and_then(|()| w.flush()).is_err() {
                    return Ok(0);
                }
            }
            match (m.truncated(), m.total) {
                (false, _) => {}
                (true, Some(t)) => {
                    note!("{} of {t} stacks (--limit {})", m.rows.len(), m.rows.len())
                }
                (true, None) => note!(
                    "the best {} stacks (--limit {}); more exist, not counted",
                    m.rows.len(),
                    m.rows.len()
                ),
            }
            std::mem::forget(catalog);
            Ok(0)
        }
        Command::Probe {
            from,
            catalogs,
            format,
        } => {
            let catalog = load_catalog(&catalogs)?;
            let (shown, text) = match &from {
                Some(p) => (
                    gpustack::emit::shown(p),
                    read_text(
                        p,
                        Stage::Usage,
                        "nvidia-smi output",
                        "save it with `nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv > smi.csv`",
                    )?,
                ),
                None => match gpustack::probe::run_nvidia_smi()? {
                    Some(t) => ("nvidia-smi".to_string(), t),
                    None => {
                        return Err(Diagnostic::new(
                            Stage::Usage,
                            "`nvidia-smi` is not on PATH: this is not a node with an NVIDIA driver",
                        )
                        .hint("run `gpustack probe` on a GPU node, or pass saved output with `--from FILE`")
                        .into())
                    }
                },
            };
            let probe = gpustack::probe::parse(&shown, &text, &catalog)?;
            match format.as_str() {
                "json" => {
                    let _ = stdout(&format!(
                        "{}\n",
                        serde_json::to_string_pretty(&probe.to_json()).unwrap_or_default()
                    ));
                }
                _ => {
                    let _ = out_text(&probe.hardware_toml());
                }
            }
            Ok(0)
        }
        Command::Why {
            component,
            lock,
            format,
        } => {
            let c = Component::lookup(&component).map_err(|near| {
                let mut d =
                    Diagnostic::new(Stage::Usage, format!("unknown component `{component}`"));
                if let Some(s) = near {
                    d = d.hint(format!("did you mean `gpustack why {s}`?"));
                }
                d.hint(format!(
                    "components are: {}",
                    Component::ALL.map(Component::name).join(", ")
                ))
            })?;
            let (_, lock) = read_lock(
                &lock,
                "create it with `gpustack lock`, or pass `--lock PATH`",
            )?;
            let Some(lc) = lock.component(c) else {
                return Err(Diagnostic::new(
                    Stage::Usage,
                    format!(
                        "`{component}` is not part of the locked stack `{}`",
                        lock.request.name
                    ),
                )
                .hint(format!(
                    "the lock holds: {}",
                    lock.components
                        .iter()
                        .map(|c| c.name.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
                .into());
            };
            let _ = match format.as_str() {
                "json" => stdout(&json_text(&show::why_json(&lock, lc))),
                _ => out_text(&show::why(&lock, lc, verbose)),
            };
            Ok(0)
        }
        Command::Catalog { what } => match what {
            CatalogCommand::List { catalogs, format } => {
                let catalog = load_catalog(&catalogs)?;
                let _ = match format.as_str() {
                    "json" => stdout(&json_text(&show::list_json(&catalog))),
                    _ => out_text(&show::list(&catalog)),
                };
                Ok(0)
            }
            CatalogCommand::Show {
                family,
                catalogs,
                format,
            } => {
                let catalog = load_catalog(&catalogs)?;
                let key = gpustack::error::name_key(&family);
                let found = show::FAMILIES
                    .iter()
                    .find(|f| gpustack::error::name_key(f) == key);
                match found.and_then(|f| Some((*f, show::family(&catalog, f)?))) {
                    Some((f, t)) => {
                        let _ = match format.as_str() {
                            "json" => stdout(&json_text(&show::family_json(f, &t))),
                            _ => out_text(&t),
                        };
                        Ok(0)
                    }
                    None => {
                        let mut d = Diagnostic::new(
                            Stage::Usage,
                            format!("unknown catalog family `{family}`"),
                        );
                        // A component name shows its family (`flash-attn` → `extra`).
                        let near = match Component::lookup(&family) {
                            Ok(c) if c.is_extra() => Some("extra"),
                            _ => gpustack::error::did_you_mean(&family, show::FAMILIES),
                        };
                        if let Some(s) = near {
                            d = d.hint(format!("did you mean `gpustack catalog show {s}`?"));
                        }
                        Err(d
                            .hint(format!("families are: {}", show::FAMILIES.join(", ")))
                            .into())
                    }
                }
            }
            CatalogCommand::Import { from } => import(from),
            CatalogCommand::Outdated {
                catalogs,
                index,
                redist,
                format,
                date,
                offline,
            } => {
                let catalog = load_catalog(&catalogs)?;
                let http = gpustack::import::Http::new(offline);
                let manifests = read_manifests(&http, &redist)?;
                if let Some(d) = &date {
                    gpustack::import::check_date(d)?;
                }
                let report = gpustack::import::outdated::outdated(
                    &http,
                    &catalog,
                    &index,
                    &manifests,
                    date.as_deref(),
                )?;
                match format.as_str() {
                    "json" => println!(
                        "{}",
                        serde_json::to_string_pretty(&report.json()).unwrap_or_default()
                    ),
                    _ => print!("{}", report.text()),
                }
                Ok(0)
            }
        },
        Command::Init { gpu, driver, path } => {
            let catalog = Catalog::stock()?;
            let g = catalog.gpu(&gpu).ok_or_else(|| {
                let mut d = Diagnostic::new(Stage::Usage, format!("unknown GPU `{gpu}`"));
                if let Some(s) = catalog.gpu_suggestion(&gpu) {
                    d = d.hint(format!("did you mean `--gpu {s}`?"));
                }
                d.hint(format!(
                    "GPU ids are: {}",
                    catalog
                        .gpus
                        .iter()
                        .map(|g| g.id.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?;
            if let Some(d) = &driver {
                let ok = gpustack::Version::parse(d).is_ok_and(|v| {
                    v.parts().len() >= 2 && v.parts().len() <= 3 && v.local().is_none()
                });
                if !ok {
                    return Err(Diagnostic::new(
                        Stage::Usage,
                        format!("invalid driver version `{d}`"),
                    )
                    .hint("write the version `nvidia-smi` prints, like `550.54.15`")
                    .into());
                }
            }
            let shown = gpustack::emit::shown(&path);
            if std::fs::symlink_metadata(&path).is_ok() {
                return Err(Diagnostic::new(
                    Stage::Usage,
                    format!("`{shown}` already exists; `init` never overwrites"),
                )
                .hint("edit it, or pass `--path` to write somewhere else")
                .into());
            }
            let text = show::starter(g, driver.as_deref());
            // Written to a temporary file, then linked into place: a full disk leaves no
            // empty spec behind to block the next `init`.
            gpustack::emit::write_new(&path, text.as_bytes())?;
            info!("wrote {shown}; next: `gpustack lock`");
            Ok(0)
        }
    }
}

/// Reads manifests from files or URLs, with the date the first URL's response gives.
fn read_manifests(
    http: &gpustack::import::Http,
    sources: &[String],
) -> Result<Vec<gpustack::import::redist::Manifest>, Error> {
    Ok(read_manifests_dated(http, sources)?.0)
}

fn read_manifests_dated(
    http: &gpustack::import::Http,
    sources: &[String],
) -> Result<(Vec<gpustack::import::redist::Manifest>, Option<String>), Error> {
    use gpustack::import::{Fetch, ImportError, Request};
    let mut out = Vec::new();
    let mut date = None;
    for s in sources {
        let text = if s.starts_with("https://") || s.starts_with("http://") {
            let r = http
                .fetch(&Request::get(s.clone()))
                .map_err(ImportError::Fetch)?;
            if r.status != 200 {
                return Err(ImportError::Status {
                    url: s.clone(),
                    status: r.status,
                }
                .into());
            }
            if date.is_none() {
                date = r.date.as_deref().and_then(gpustack::import::http_date);
            }
            String::from_utf8_lossy(&r.body).into_owned()
        } else {
            read_text(
                Path::new(s),
                Stage::Usage,
                "manifest",
                "pass a redistrib_X.Y.Z.json file or its URL",
            )?
        };
        out.push(gpustack::import::redist::parse(s, &text)?);
    }
    Ok((out, date))
}

/// Writes an import's overlay files into `out`, checks that the overlay loads on top of
/// the base catalog, and prints the summary.
fn write_import(
    imp: &gpustack::import::Import,
    out: &Path,
    catalogs: &[PathBuf],
) -> Result<u8, Error> {
    let io = |e: std::io::Error, p: &Path| -> Error {
        Diagnostic::new(Stage::Io, format!("cannot write `{}`: {e}", p.display())).into()
    };
    std::fs::create_dir_all(out).map_err(|e| io(e, out))?;
    let files = imp.files();
    for f in &files {
        let p = out.join(&f.name);
        std::fs::write(&p, &f.contents).map_err(|e| io(e, &p))?;
    }
    let mut dirs = catalogs.to_vec();
    dirs.push(out.to_path_buf());
    load_catalog(&dirs)?;
    for f in &files {
        println!("wrote {}", out.join(&f.name).display());
    }
    print!("{}", imp.summary());
    Ok(0)
}

fn import(from: ImportCommand) -> Result<u8, Error> {
    match from {
        ImportCommand::Pypi {
            requests,
            index,
            record_index,
            out,
            catalogs,
            date,
            no_follow,
            offline,
        } => {
            let base = load_catalog(&catalogs)?;
            let http = gpustack::import::Http::new(offline);
            let opts = gpustack::import::PypiOptions {
                index,
                record_index,
                date,
                follow_pins: !no_follow,
            };
            let imp = gpustack::import::import_pypi(&http, &base, &requests, &opts)?;
            write_import(&imp, &out, &catalogs)
        }
        ImportCommand::Redist {
            manifests,
            out,
            catalogs,
            date,
            offline,
        } => {
            let base = load_catalog(&catalogs)?;
            let http = gpustack::import::Http::new(offline);
            let (parsed, header_date) = read_manifests_dated(&http, &manifests)?;
            let date = match date.or(header_date) {
                Some(d) => d,
                None => {
                    let d = gpustack::import::today();
                    eprintln!("note: no --date given; entries record today ({d}) as the day read");
                    d
                }
            };
            let imp = gpustack::import::redist::import(&base, &parsed, &date)?;
            write_import(&imp, &out, &catalogs)
        }
    }
}
