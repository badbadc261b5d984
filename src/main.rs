//! The `gpustack` command line: parsing, dispatch to one function per subcommand
//! ([`cli`]), and the only code that prints or exits. Each subcommand returns its exit
//! code or an [`Error`]; what it prints goes through [`stdout`], [`out_text`],
//! [`stdout_stream`], `note!` and `info!` below.

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use gpustack::{Catalog, Error};

/// A line on standard error, escaped for the terminal; a closed stderr is ignored.
macro_rules! note {
    ($($t:tt)*) => {{
        let text = format!($($t)*);
        let _ = std::io::Write::write_fmt(
            &mut std::io::stderr(),
            format_args!("{}\n", gpustack::error::terminal_safe(&text)),
        );
    }};
}
pub(crate) use note;

/// A progress line, note or warning on standard error; left out with `-q`.
macro_rules! info {
    ($($t:tt)*) => {{
        if !$crate::quiet() {
            $crate::note!($($t)*);
        }
    }};
}
pub(crate) use info;

mod cli;
mod show;

/// Small blocks from per-thread size classes ([`cli::alloc`]).
#[global_allocator]
static ALLOC: cli::alloc::Small = cli::alloc::Small;

/// `-q`: progress lines (`wrote …`, `locked …`), notes and warnings are left out.
static QUIET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether `-q` was given.
pub(crate) fn quiet() -> bool {
    QUIET.load(std::sync::atomic::Ordering::Relaxed)
}

#[derive(Parser)]
#[command(
    name = "gpustack",
    version,
    about = "One lock for the GPU stack: driver, CUDA, cuDNN, NCCL, PyTorch, vLLM, DeepSpeed",
    long_about = "gpustack resolves a GPU software stack from a catalog of sourced compatibility facts \
and writes a deterministic lockfile that every generator renders from.\n\n\
Exit codes: 0 ok, 1 no compatible stack, 2 invalid input or usage, 3 a network failure.",
    after_help = "Examples:\n  gpustack init --gpu h100 --driver 550.54.15\n  gpustack lock\n  gpustack why torch\n  gpustack catalog show torch"
)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

/// The options every subcommand takes.
#[derive(clap::Args)]
struct Global {
    /// Print nothing on success but the requested output: errors only (no progress
    /// lines, notes or warnings)
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    quiet: bool,
    /// Print every note (one per image, not one per kind) and sources in full (`why`,
    /// conflicts)
    #[arg(short, long, global = true)]
    verbose: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Resolve gpustack.toml into gpustack.lock
    #[command(
        after_help = "Examples:\n  gpustack lock\n  gpustack lock --upgrade-package torch   # keep every other pick of gpustack.lock\n  gpustack lock --spec fixtures/specs/a100-pytorch.toml --out -\n  gpustack lock --catalog site-catalog/\n  gpustack lock --check   # exit 1 when gpustack.lock is not what `lock` would write"
    )]
    Lock(cli::lock::Args),
    /// Render deployment files from gpustack.lock (docker, apptainer, packer, k8s, slurm, all)
    #[command(
        after_help = "Examples:\n  gpustack gen all\n  gpustack gen docker --lock gpustack.lock --out out/\n  gpustack gen k8s slurm\n  gpustack gen all --check   # exit 1 when out/ is not what `gen` would write\n\nEach target replaces its directory under --out as a whole (out/docker/, out/k8s/, …);\nnothing is written when any target fails."
    )]
    Gen(cli::gen::Args),
    /// Check the lock, the generated files and a node against each other (for CI)
    #[command(
        after_help = "Examples:\n  gpustack check\n  gpustack check --format github      # annotations on the pull request\n  gpustack check --hardware node.toml # a node's `gpustack probe` output\n  gpustack check --format json --strict\n  gpustack check --strict --allow eol-driver\n  gpustack check --pedantic           # also catalog gaps (artifacts without a digest)\n  gpustack check -v                   # sources in full\n\nChecks: integrity (the lock's digests match its content), staleness (the spec and the\ncatalog still give this lock), drift (files under --out are what the lock renders),\nconsistency (driver, image tags and NCCL environment agree across targets), hardware\n(the node runs the locked stack), hygiene (end-of-life driver, known-unsafe versions;\nwarnings; artifacts without a digest with --pedantic).\n\nA warning the stack accepts on purpose is acknowledged in the spec, with a reason:\n  [check]\n  allow = [{ code = \"eol-driver\", reason = \"the nodes move to R580 in March\" }]\n\nThe default out/ is compared only when it was generated from the lock checked.\n\nExit codes: 0 no errors, 1 errors found (or warnings, with --strict), 2 invalid input."
    )]
    Check(cli::check::Args),
    /// Compare two locks: what changed and what it costs an operator
    #[command(
        after_help = "Examples:\n  gpustack diff main.lock gpustack.lock\n  gpustack diff old.lock new.lock --format markdown > comment.md\n  git show origin/main:gpustack.lock > base.lock && gpustack diff base.lock gpustack.lock\n\nEach change is classified by what it costs: driver branch (new VM image, drain and reboot),\ndriver patch, CUDA major (rebuild every container), CUDA minor, cuDNN/NCCL (re-run NCCL\nvalidation), framework (re-validate the model), and more; the layers to rebuild and the\ngenerated files that change follow.\n\nExit codes: 0 compared (whether or not the locks differ; with --exit-code: the locks are\nthe same), 1 the locks differ (with --exit-code), 2 invalid input."
    )]
    Diff(cli::diff::Args),
    /// List every stack the spec allows, for CI test matrices
    #[command(
        after_help = "Examples:\n  gpustack matrix\n  gpustack matrix --format github --limit 20   # a strategy.matrix.include list\n  gpustack matrix --spec fixtures/specs/a100-pytorch.toml\n\nThe axes are the components the spec lists (except the driver and extras); their\nrequirements stay ranges. Rows come best first: row 0 is what a fresh `gpustack lock`\npicks. With a lock (`--lock`, or gpustack.lock beside the spec), the JSON marks the row\nequal to it `\"locked\": true`: a kept pick can make it a later row.\n\nExit codes: 0 at least one stack, 1 no compatible stack, 2 invalid input."
    )]
    Matrix(cli::matrix::Args),
    /// Read a node's GPUs and driver from nvidia-smi and print a `[hardware]` table
    #[command(
        after_help = "Examples:\n  gpustack probe > node.toml        # runs nvidia-smi on this node\n  gpustack probe --from smi.csv     # saved `nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv`\n  gpustack probe --from smi.xml     # saved `nvidia-smi -q -x`\n  gpustack check --hardware node.toml\n\nGPU names map to catalog ids through the catalog's `smi_names`; an unknown GPU is an error\n(exit 2) whose hint says how to add it in a catalog overlay."
    )]
    Probe(cli::probe::Args),
    /// Explain why a component has its locked version
    #[command(
        after_help = "Examples:\n  gpustack why torch\n  gpustack why driver --lock lockfiles/h100-ib-train-serve.lock"
    )]
    Why(cli::why::Args),
    /// Show what the catalog holds; import releases from upstream
    #[command(
        after_help = "Examples:\n  gpustack catalog list\n  gpustack catalog show torch\n  gpustack catalog show gpu --catalog site-catalog/\n  gpustack catalog outdated\n  gpustack catalog import pypi vllm==0.6.3.post1 --out site-catalog/"
    )]
    Catalog {
        #[command(subcommand)]
        what: cli::catalog::Command,
    },
    /// Print a shell completion script (bash, zsh, fish, powershell, elvish)
    #[command(
        after_help = "Examples:\n  gpustack completions bash > ~/.local/share/bash-completion/completions/gpustack\n  gpustack completions zsh > \"${fpath[1]}/_gpustack\"\n  gpustack completions fish > ~/.config/fish/completions/gpustack.fish"
    )]
    Completions(cli::completions::Args),
    /// Write a commented starter gpustack.toml (never overwrites)
    #[command(
        after_help = "Examples:\n  gpustack init\n  gpustack init --gpu a100 --driver 535.104.05\n  gpustack init --path stacks/serve.toml --gpu l40s"
    )]
    Init(cli::init::Args),
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

/// Adds a subcommand's arguments to its (empty) command.
type Augment = fn(clap::Command) -> clap::Command;

/// The subcommands [`quick_matches`] parses on their own.
const QUICK: &[(&str, Augment)] = {
    use clap::Args;
    &[
        ("lock", cli::lock::Args::augment_args),
        ("gen", cli::gen::Args::augment_args),
        ("check", cli::check::Args::augment_args),
        ("diff", cli::diff::Args::augment_args),
        ("matrix", cli::matrix::Args::augment_args),
        ("probe", cli::probe::Args::augment_args),
        ("why", cli::why::Args::augment_args),
        ("init", cli::init::Args::augment_args),
    ]
};

/// `argv` parsed against the global options and the one subcommand it names, when that
/// parse succeeds: building clap's whole command tree (every subcommand's arguments and
/// help) was a third of a millisecond of every start. Anything else (help, a usage
/// error, `--version`, a subcommand named after an option) is `None`, and the whole tree
/// parses it, so that every message is the whole tree's.
fn quick_matches(argv: &[std::ffi::OsString]) -> Option<clap::ArgMatches> {
    use clap::Args;
    let name = argv.get(1)?.to_str()?;
    let (name, augment) = QUICK.iter().find(|(n, _)| *n == name)?;
    Global::augment_args(clap::Command::new("gpustack"))
        .subcommand(augment(clap::Command::new(*name)))
        .subcommand_required(true)
        .try_get_matches_from(argv)
        .ok()
}

fn main() -> ExitCode {
    use clap::FromArgMatches;
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let parsed = match quick_matches(&argv).and_then(|m| Cli::from_arg_matches(&m).ok()) {
        Some(cli) => Ok(cli),
        None => command()
            .try_get_matches_from(&argv)
            .and_then(|m| Cli::from_arg_matches(&m)),
    };
    let cli = match parsed {
        Ok(c) => c,
        Err(e) => {
            // Usage errors (a bad flag or value) exit 2; `--help` and `--version` exit 0.
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let verbose = cli.global.verbose;
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

/// Runs the parsed command: its exit code, or the error `main` prints.
fn run(cli: Cli) -> Result<u8, Error> {
    QUIET.store(cli.global.quiet, std::sync::atomic::Ordering::Relaxed);
    let verbose = cli.global.verbose;
    match cli.command {
        Command::Lock(args) => cli::lock::run(args, verbose),
        Command::Gen(args) => cli::gen::run(args),
        Command::Check(args) => cli::check::run(args, verbose),
        Command::Diff(args) => cli::diff::run(args),
        Command::Matrix(args) => cli::matrix::run(args),
        Command::Probe(args) => cli::probe::run(args),
        Command::Why(args) => cli::why::run(args, verbose),
        Command::Catalog { what } => cli::catalog::run(what),
        Command::Completions(args) => cli::completions::run(args, command()),
        Command::Init(args) => cli::init::run(args),
    }
}

/// Standard output was closed (`gpustack matrix | head -1`): stop quietly.
pub(crate) struct ClosedPipe;

/// Writes `text` to standard output. Text formats are escaped for the terminal (JSON and
/// Markdown escape for themselves); a closed pipe is [`ClosedPipe`], never a panic.
pub(crate) fn stdout(text: &str) -> Result<(), ClosedPipe> {
    stdout_stream(|o| o.write_all(text.as_bytes()))
}

/// [`stdout`] for text meant for a terminal: control characters escaped.
pub(crate) fn out_text(text: &str) -> Result<(), ClosedPipe> {
    stdout(&gpustack::error::terminal_safe(text))
}

/// Standard output for output written piece by piece (`matrix` row by row), buffered and
/// flushed at the end; a closed pipe is [`ClosedPipe`].
pub(crate) fn stdout_stream(
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), ClosedPipe> {
    let mut w = std::io::BufWriter::new(std::io::stdout().lock());
    write(&mut w)
        .and_then(|()| w.flush())
        .map_err(|_| ClosedPipe)
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    fn argv(line: &str) -> Vec<OsString> {
        line.split(' ').map(OsString::from).collect()
    }

    /// The quick parse takes the everyday command lines, and what it takes, the subcommand
    /// and the global options read the same as from the whole command tree; what it does
    /// not take (help, errors) the whole tree answers.
    #[test]
    fn quick_parse_agrees_with_the_whole_tree() {
        let taken = [
            "gpustack lock",
            "gpustack lock --offline --spec fixtures/specs/a100-pytorch.toml --out -",
            "gpustack lock -q --upgrade-package torch",
            "gpustack lock -v --check --out gpustack.lock",
            "gpustack gen all",
            "gpustack gen docker --lock gpustack.lock --out out/",
            "gpustack gen k8s slurm --check",
            "gpustack check --format json --strict",
            "gpustack check --strict --allow eol-driver",
            "gpustack check --hardware node.toml -v",
            "gpustack diff a.lock b.lock",
            "gpustack why torch",
            "gpustack why driver --lock lockfiles/h100-ib-train-serve.lock",
            "gpustack init --gpu a100 --driver 535.104.05",
            "gpustack probe",
        ];
        for line in taken {
            let quick = super::quick_matches(&argv(line))
                .unwrap_or_else(|| panic!("the quick parse does not take `{line}`"));
            let full = super::command()
                .try_get_matches_from(argv(line))
                .unwrap_or_else(|e| panic!("`{line}`: {e}"));
            assert_eq!(
                format!("{:?}", quick.subcommand()),
                format!("{:?}", full.subcommand()),
                "`{line}`"
            );
            for flag in ["quiet", "verbose"] {
                assert_eq!(quick.get_flag(flag), full.get_flag(flag), "`{line}` {flag}");
            }
        }
        for line in [
            "gpustack",
            "gpustack --version",
            "gpustack -q lock",
            "gpustack lock --help",
            "gpustack lock --version",
            "gpustack lock --no-such-flag",
            "gpustack lock -q -v",
            "gpustack gen",
            "gpustack gen nowhere",
            "gpustack catalog list",
            "gpustack help lock",
        ] {
            assert!(
                super::quick_matches(&argv(line)).is_none(),
                "the quick parse takes `{line}`"
            );
        }
    }
}
