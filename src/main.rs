//! The `gpustack` command line. The only place that prints or exits.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use gpustack::error::{Diagnostic, Stage};
use gpustack::{Catalog, Component, Error, Lock};

mod show;

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
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Resolve gpustack.toml into gpustack.lock
    #[command(
        after_help = "Examples:\n  gpustack lock\n  gpustack lock --spec fixtures/specs/a100-pytorch.toml --out -\n  gpustack lock --catalog site-catalog/\n  gpustack lock --check   # exit 1 when gpustack.lock is not what `lock` would write"
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
        after_help = "Examples:\n  gpustack check\n  gpustack check --format github      # annotations on the pull request\n  gpustack check --hardware node.toml # a node's `gpustack probe` output\n  gpustack check --format json --strict\n\nChecks: integrity (the lock's digests match its content), staleness (the spec and the\ncatalog still give this lock), drift (files under --out are what the lock renders),\nconsistency (driver, image tags and NCCL environment agree across targets), hardware\n(the node runs the locked stack), hygiene (unpinned artifacts, end-of-life driver,\nknown-unsafe versions; warnings).\n\nExit codes: 0 no errors, 1 errors found (or warnings, with --strict), 2 invalid input."
    )]
    Check {
        /// The spec (skipped when the default is absent)
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
    },
    /// Compare two locks: what changed and what it costs an operator
    #[command(
        after_help = "Examples:\n  gpustack diff main.lock gpustack.lock\n  gpustack diff old.lock new.lock --format markdown > comment.md\n  git show origin/main:gpustack.lock > base.lock && gpustack diff base.lock gpustack.lock\n\nEach change is classified by what it costs: driver branch (new VM image, drain and reboot),\ndriver patch, CUDA major (rebuild every container), CUDA minor, cuDNN/NCCL (re-run NCCL\nvalidation), framework (re-validate the model), and more; the layers to rebuild and the\ngenerated files that change follow.\n\nExit codes: 0 compared (whether or not the locks differ), 2 invalid input."
    )]
    Diff {
        /// The old lock
        old: PathBuf,
        /// The new lock
        new: PathBuf,
        /// Output format
        #[arg(long, default_value = "text", value_parser = ["text", "json", "markdown"])]
        format: String,
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
        after_help = "Examples:\n  gpustack why torch\n  gpustack why driver --lock lockfiles/h100-train.lock"
    )]
    Why {
        /// driver, cuda, cudnn, nccl, python, torch, vllm, deepspeed, or an extra
        /// (flash-attn, xformers, transformers, accelerate, bitsandbytes, tensorrt-llm, cupy,
        /// nvidia-dali)
        component: String,
        /// The lock to read
        #[arg(long, default_value = "gpustack.lock", value_name = "PATH")]
        lock: PathBuf,
    },
    /// Show what the catalog holds
    #[command(
        after_help = "Examples:\n  gpustack catalog list\n  gpustack catalog show torch\n  gpustack catalog show gpu --catalog site-catalog/"
    )]
    Catalog {
        #[command(subcommand)]
        what: CatalogCommand,
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
    },
    /// Every entry of one family with its source
    Show {
        /// driver, cuda, gpu, os, python, cudnn, nccl, torch, vllm, deepspeed, extra, image,
        /// package, instance, bandwidth or env
        family: String,
        /// A catalog overlay directory (repeatable)
        #[arg(long = "catalog", value_name = "DIR")]
        catalogs: Vec<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "{e}");
            ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2))
        }
    }
}

fn load_catalog(dirs: &[PathBuf]) -> Result<Catalog, Error> {
    let refs: Vec<&Path> = dirs.iter().map(PathBuf::as_path).collect();
    Catalog::load(&refs)
}

fn read_text(path: &Path, stage: Stage, what: &str, hint: &str) -> Result<String, Error> {
    let shown = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| {
        let msg = match e.kind() {
            std::io::ErrorKind::NotFound => format!("{what} `{shown}` not found"),
            _ => format!("cannot read {what} `{shown}`: {e}"),
        };
        Diagnostic::new(stage, msg).hint(hint)
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

/// Reads and parses a lock; returns the path as the user named it, for messages.
fn read_lock(path: &Path, hint: &str) -> Result<(String, Lock), Error> {
    let shown = path.display().to_string();
    let text = read_text(path, Stage::Lock, "lock", hint)?;
    let lock = Lock::parse(&shown, &text)?;
    Ok((shown, lock))
}

fn run(cli: Cli) -> Result<u8, Error> {
    match cli.command {
        Command::Lock {
            spec,
            out,
            catalogs,
            check,
            offline,
        } => {
            let catalog = load_catalog(&catalogs)?;
            let spec_shown = spec.display().to_string();
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
            let previous = (out != "-")
                .then(|| std::fs::read_to_string(&out).ok())
                .flatten()
                .and_then(|t| Lock::parse(&out, &t).ok());
            let (lock, report) = if offline {
                gpustack::lock_spec_resolved(
                    &catalog,
                    &spec_shown,
                    &text,
                    &gpustack::resolve::http::Offline,
                    previous.as_ref(),
                )?
            } else {
                let http = gpustack::resolve::http::Http::new(false);
                gpustack::lock_spec_resolved(
                    &catalog,
                    &spec_shown,
                    &text,
                    &http,
                    previous.as_ref(),
                )?
            };
            // Said after the lock is written: where each digest came from when not the registry.
            let mut notes: Vec<String> = report
                .fallback
                .iter()
                .map(|(r, why)| format!("note: `{r}`: digest from the {why}"))
                .collect();
            if !report.unpinned.is_empty() {
                notes.push(format!(
                    "note: pinned by tag only (no registry was asked or answered, and the catalog has no digest): {}",
                    report.unpinned.join(", ")
                ));
            }
            // The process ends right after; freeing the catalog would only cost time.
            std::mem::forget(catalog);
            let rendered = lock.to_toml();
            if out == "-" {
                if check {
                    return Err(Diagnostic::new(
                        Stage::Usage,
                        "`--check` compares against a lock file; it cannot be used with `--out -`",
                    )
                    .into());
                }
                print!("{rendered}");
                for n in &notes {
                    eprintln!("{n}");
                }
                return Ok(0);
            }
            let out_path = PathBuf::from(&out);
            if check {
                let existing = std::fs::read_to_string(&out_path).unwrap_or_default();
                if existing == rendered {
                    eprintln!("{out} is up to date");
                    return Ok(0);
                }
                eprintln!("error: {out} is stale: `gpustack lock` would change it\n\nhint: run `gpustack lock` and commit the result");
                return Ok(1);
            }
            if let Some(parent) = out_path
                .parent()
                .filter(|p| !p.as_os_str().is_empty() && !p.exists())
            {
                std::fs::create_dir_all(parent).map_err(|e| {
                    Diagnostic::new(
                        Stage::Io,
                        format!("cannot create directory `{}`: {e}", parent.display()),
                    )
                    .hint("check the `--out` path and its permissions")
                })?;
            }
            gpustack::emit::write_atomic(&out_path, rendered.as_bytes())?;
            let summary: Vec<String> = lock
                .components
                .iter()
                .map(|c| format!("{} {}", c.name, c.version))
                .collect();
            eprintln!(
                "locked `{}` into {out}: {}",
                lock.request.name,
                summary.join(", ")
            );
            for n in &notes {
                eprintln!("{n}");
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
                if t == "all" {
                    chosen.extend(gpustack::plan::Target::ALL);
                    continue;
                }
                let Some(x) = gpustack::plan::Target::from_name(t) else {
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
            let (shown, lock) = read_lock(
                &lock,
                "create it with `gpustack lock`, or pass `--lock PATH`",
            )?;
            // The lock is the only input: one whose digests do not match its content was
            // edited by hand, and rendering it would bake the edit into every target.
            if let Some(m) = lock.verify().first() {
                return Err(Diagnostic::new(
                    Stage::Lock,
                    format!("`{shown}` was edited by hand: its {} does not match its content", m.what),
                )
                .hint("change gpustack.toml (or a catalog overlay) and run `gpustack lock`; `gpustack check` lists every mismatch")
                .into());
            }
            // Render everything first, and check every target directory: a failure writes
            // nothing.
            let rendered = gpustack::plan::generate_many(&lock, &chosen)?;
            if !check {
                for (t, _) in &rendered {
                    gpustack::emit::check_target_dir(&out.join(t.name()))?;
                }
            }
            let mut stale = Vec::new();
            for (t, files) in &rendered {
                let dir = out.join(t.name());
                let outs: Vec<gpustack::emit::OutFile<'_>> = files
                    .iter()
                    .map(|f| gpustack::emit::OutFile {
                        path: &f.path,
                        contents: f.contents.as_bytes(),
                        executable: f.executable,
                    })
                    .collect();
                if check {
                    for d in gpustack::emit::diff_dir(&dir, &outs) {
                        stale.push(format!("{}/{d}", t.name()));
                    }
                } else if gpustack::emit::diff_dir(&dir, &outs).is_empty() {
                    // Unchanged: leave the files (and their mtimes) alone.
                    eprintln!("{} is up to date ({} files)", dir.display(), files.len());
                } else {
                    gpustack::emit::replace_dir(&dir, &outs)?;
                    eprintln!("wrote {} ({} files)", dir.display(), files.len());
                }
            }
            if check {
                if stale.is_empty() {
                    eprintln!("{} is up to date", out.display());
                    return Ok(0);
                }
                eprintln!(
                    "error: {} is stale: `gpustack gen` would change it",
                    out.display()
                );
                for s in &stale {
                    eprintln!("    {s}");
                }
                eprintln!(
                    "\nhint: run `gpustack gen {}` and commit the result",
                    targets.join(" ")
                );
                return Ok(1);
            }
            Ok(0)
        }
        Command::Check {
            spec,
            lock,
            out,
            hardware,
            catalogs,
            format,
            strict,
        } => {
            let catalog = load_catalog(&catalogs)?;
            let lock_shown = lock.display().to_string();
            let lock_text = read_text(
                &lock,
                Stage::Lock,
                "lock",
                "create it with `gpustack lock`, or pass `--lock PATH`",
            )?;
            // An explicit --spec or --out must exist; the defaults are used when present.
            let spec_path = match spec {
                Some(p) => Some(p),
                None => Some(PathBuf::from("gpustack.toml")).filter(|p| p.exists()),
            };
            let spec_text = match &spec_path {
                Some(p) => Some((
                    p.display().to_string(),
                    read_text(p, Stage::Spec, "spec", "pass `--spec PATH`")?,
                )),
                None => None,
            };
            let out_dir = match out {
                Some(p) if !p.is_dir() => {
                    return Err(Diagnostic::new(
                        Stage::Usage,
                        format!("output directory `{}` not found", p.display()),
                    )
                    .hint("generate it with `gpustack gen all`, or leave out `--out`")
                    .into())
                }
                Some(p) => Some(p),
                None => Some(PathBuf::from("out")).filter(|p| p.is_dir()),
            };
            let tree = match &out_dir {
                Some(d) => Some((d.display().to_string(), gpustack::emit::read_tree(d)?)),
                None => None,
            };
            let hw = match &hardware {
                Some(p) => {
                    let shown = p.display().to_string();
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
            let report = gpustack::check::check(&gpustack::check::Inputs {
                lock: (&lock_shown, &lock_text),
                spec: spec_text.as_ref().map(|(p, t)| (p.as_str(), t.as_str())),
                catalog: &catalog,
                out: tree.as_ref().map(|(d, t)| (d.as_str(), t)),
                hardware: hw.as_ref(),
            })?;
            match format.as_str() {
                "json" => print!("{}", report.to_json()),
                "github" => print!("{}", report.to_github()),
                _ => print!("{}", report.to_text()),
            }
            Ok(report.exit_code(strict))
        }
        Command::Diff { old, new, format } => {
            let hint = "pass two lock files: `gpustack diff OLD.lock NEW.lock`";
            let (_, old) = read_lock(&old, hint)?;
            let (_, new) = read_lock(&new, hint)?;
            let d = gpustack::diff::diff(&old, &new);
            match format.as_str() {
                "json" => print!("{}", d.to_json()),
                "markdown" => print!("{}", d.to_markdown()),
                _ => print!("{}", d.to_text()),
            }
            Ok(0)
        }
        Command::Matrix {
            spec,
            catalogs,
            format,
            limit,
        } => {
            let catalog = load_catalog(&catalogs)?;
            let shown = spec.display().to_string();
            let text = read_text(
                &spec,
                Stage::Spec,
                "spec",
                "create one with `gpustack init`, or pass `--spec PATH`",
            )?;
            let spec = gpustack::Spec::parse(&shown, &text, &catalog)?;
            let m = gpustack::solve::matrix::matrix(&catalog, &spec, limit)?;
            match format.as_str() {
                "github" => print!("{}", m.to_github()),
                _ => print!("{}", m.to_json()),
            }
            if m.truncated() {
                eprintln!(
                    "{} of {} stacks (--limit {})",
                    m.rows.len(),
                    m.total,
                    m.rows.len()
                );
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
                    p.display().to_string(),
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
                "json" => println!(
                    "{}",
                    serde_json::to_string_pretty(&probe.to_json()).unwrap_or_default()
                ),
                _ => print!("{}", probe.hardware_toml()),
            }
            Ok(0)
        }
        Command::Why { component, lock } => {
            let c = Component::from_name(&component).ok_or_else(|| {
                Diagnostic::new(Stage::Usage, format!("unknown component `{component}`")).hint(
                    format!(
                        "components are: {}",
                        Component::ALL.map(Component::name).join(", ")
                    ),
                )
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
            print!("{}", show::why(&lock, lc));
            Ok(0)
        }
        Command::Catalog { what } => match what {
            CatalogCommand::List { catalogs } => {
                let catalog = load_catalog(&catalogs)?;
                print!("{}", show::list(&catalog));
                Ok(0)
            }
            CatalogCommand::Show { family, catalogs } => {
                let catalog = load_catalog(&catalogs)?;
                match show::family(&catalog, &family) {
                    Some(t) => {
                        print!("{t}");
                        Ok(0)
                    }
                    None => Err(Diagnostic::new(
                        Stage::Usage,
                        format!("unknown catalog family `{family}`"),
                    )
                    .hint(format!("families are: {}", show::FAMILIES.join(", ")))
                    .into()),
                }
            }
        },
        Command::Init { gpu, driver, path } => {
            let catalog = Catalog::stock()?;
            let g = catalog.gpu(&gpu).ok_or_else(|| {
                Diagnostic::new(Stage::Usage, format!("unknown GPU `{gpu}`")).hint(format!(
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
            if path.exists() {
                return Err(Diagnostic::new(
                    Stage::Usage,
                    format!(
                        "`{}` already exists; `init` never overwrites",
                        path.display()
                    ),
                )
                .hint("edit it, or pass `--path` to write somewhere else")
                .into());
            }
            let text = show::starter(g, driver.as_deref());
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
                .map_err(|e| {
                    Diagnostic::new(
                        Stage::Io,
                        format!("cannot create `{}`: {e}", path.display()),
                    )
                })?;
            f.write_all(text.as_bytes()).map_err(|e| {
                Diagnostic::new(Stage::Io, format!("cannot write `{}`: {e}", path.display()))
            })?;
            eprintln!("wrote {}; next: `gpustack lock`", path.display());
            Ok(0)
        }
    }
}
