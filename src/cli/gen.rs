//! `gpustack gen`: render the lock's targets under `--out` ([`gpustack::generate::run`]), or
//! compare them with what is there (`--check`).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use clap::builder::{EnumValueParser, PossibleValue, TypedValueParser};
use clap::ValueEnum;
use gpustack::generate::{LockFile, Mode, Options, Outcome};
use gpustack::plan::Target;
use gpustack::Error;

use super::plural;

#[derive(clap::Args)]
pub(crate) struct Args {
    /// What to render (`all`: Docker, Apptainer and each target the spec has a table for)
    #[arg(required = true, value_name = "TARGET", value_parser = TargetParser)]
    targets: Vec<GenTarget>,
    /// The lock to render from
    #[arg(long, default_value = "gpustack.lock", value_name = "PATH")]
    lock: PathBuf,
    /// Output directory; each target writes OUT/<target>/
    #[arg(long, default_value = "out", value_name = "DIR")]
    out: PathBuf,
    /// Do not write; exit 1 if the files differ from what would be generated
    #[arg(long)]
    check: bool,
}

/// A `gen` target on the command line: one of [`Target::ALL`], or `all`.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum GenTarget {
    Docker,
    Apptainer,
    Packer,
    K8s,
    Slurm,
    All,
}

impl GenTarget {
    fn targets(self) -> &'static [Target] {
        match self {
            GenTarget::Docker => &[Target::Docker],
            GenTarget::Apptainer => &[Target::Apptainer],
            GenTarget::Packer => &[Target::Packer],
            GenTarget::K8s => &[Target::K8s],
            GenTarget::Slurm => &[Target::Slurm],
            // Resolved against the lock in `run` (`gpustack::plan::configured`).
            GenTarget::All => &[],
        }
    }

    fn name(self) -> &'static str {
        match self {
            GenTarget::All => "all",
            t => t.targets()[0].name(),
        }
    }
}

/// Target names are forgiving (ASCII case, spaces, hyphens and underscores are ignored, as
/// for every name gpustack reads); anything else gets clap's own error listing the targets.
#[derive(Clone)]
struct TargetParser;

impl TypedValueParser for TargetParser {
    type Value = GenTarget;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<GenTarget, clap::Error> {
        let key = gpustack::error::name_key(&value.to_string_lossy());
        let named = GenTarget::value_variants()
            .iter()
            .find(|t| gpustack::error::name_key(t.name()) == key);
        match named {
            Some(t) => Ok(*t),
            None => EnumValueParser::<GenTarget>::new().parse_ref(cmd, arg, value),
        }
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(
            GenTarget::value_variants()
                .iter()
                .filter_map(ValueEnum::to_possible_value),
        ))
    }
}

pub(crate) fn run(args: Args) -> Result<u8, Error> {
    let lock = LockFile::read(
        &args.lock,
        "create it with `gpustack lock`, or pass `--lock PATH`",
    )?;
    // `all`: the targets the lock's request configures; those it configures by default
    // but cannot render (storage) are left out, one line each.
    let configured = gpustack::plan::configured(&lock.lock);
    let mut targets: Vec<Target> = Vec::new();
    for t in &args.targets {
        match t {
            GenTarget::All => targets.extend(&configured.render),
            t => targets.extend(t.targets()),
        }
    }
    if args.targets.contains(&GenTarget::All) {
        for (t, why) in &configured.skipped {
            if !targets.contains(t) {
                info!("skipped {}: {why}", t.name());
            }
        }
    }
    let opts = Options {
        targets,
        out: args.out.clone(),
        mode: if args.check { Mode::Check } else { Mode::Write },
    };
    let out_shown = gpustack::emit::shown(&args.out);
    match gpustack::generate::run(&lock, &opts)? {
        Outcome::Written { targets, recovered } => {
            // Written, but not runnable on a cluster (`gpustack check` reports it as
            // well); `-q` prints nothing on success but errors. Said for the targets
            // named on the command line, and of `all` those the spec declares a table for.
            let mut named: Vec<Target> = Vec::new();
            for t in &args.targets {
                match t {
                    GenTarget::All => named.extend(
                        configured
                            .render
                            .iter()
                            .filter(|x| gpustack::plan::declared(&lock.lock, **x)),
                    ),
                    t => named.extend(t.targets()),
                }
            }
            if let Some(w) = gpustack::plan::unpullable_images(&lock.lock, &named) {
                info!("warning: {w}");
            }
            if let Some(r) = recovered {
                info!(
                    "rolled back an interrupted `gpustack gen` in {out_shown} ({})",
                    r.join(", ")
                );
            }
            for w in &targets {
                let dir = gpustack::emit::shown(&args.out.join(&w.name));
                if w.changed {
                    info!("wrote {dir} ({})", plural(w.files, "file", "files"));
                } else {
                    // Unchanged: the files (and their mtimes) were left alone.
                    info!("{dir} is up to date ({})", plural(w.files, "file", "files"));
                }
            }
            Ok(0)
        }
        Outcome::UpToDate => {
            info!("{out_shown} is up to date");
            Ok(0)
        }
        Outcome::Stale(stale) => {
            note!("error: {out_shown} is stale: `gpustack gen` would change it");
            for s in &stale {
                note!("    {s}");
            }
            note!("\nhint: run `{}` and commit the result", again(&args));
            Ok(1)
        }
        _ => unreachable!("generate::run returns the outcomes above"),
    }
}

/// `gpustack gen` as the user would re-run it: their targets, --lock and --out repeated.
fn again(args: &Args) -> String {
    let names: Vec<&str> = args.targets.iter().map(|t| t.name()).collect();
    let mut again = format!("gpustack gen {}", names.join(" "));
    if args.lock != Path::new("gpustack.lock") {
        again.push_str(&format!(
            " --lock {}",
            gpustack::render::sh_quote(&gpustack::emit::shown(&args.lock))
        ));
    }
    if args.out != Path::new("out") {
        again.push_str(&format!(
            " --out {}",
            gpustack::render::sh_quote(&gpustack::emit::shown(&args.out))
        ));
    }
    again
}
