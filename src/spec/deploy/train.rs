//! `[train]`: the training command (its launcher, script or module) and working directory.

use serde::Deserialize;

use crate::core::StorageRef;
use crate::spec::at::At;

use super::storage::parse_storage;
use super::S;

/// `[train]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Train {
    /// The training command, one argument per element, as written.
    pub command: Vec<String>,
    /// What the command starts, read once from it (see [`Entry::parse`]).
    pub entry: Entry,
    /// Where the training code is (`workdir`): shared storage mounted as the working
    /// directory on every target; none: the directory the Slurm job is submitted from, and
    /// the code image on Kubernetes.
    pub workdir: Option<StorageRef>,
}

/// What `[train].command` starts, in torchrun's terms: torchrun runs its
/// `training_script` with `python -u`, a module with `python -u -m` (`-m`), or an
/// executable as it is (`--no-python`). A leading interpreter (`python`, `python3`,
/// `python3.12`, with `-u`) is read here and nowhere else: every target's launcher is
/// derived from this value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// A Python script: `python train.py …` or `train.py …`.
    Script {
        /// The script path, relative to the working directory or absolute.
        path: String,
        /// Its arguments.
        args: Vec<String>,
    },
    /// A module: `python -m pkg.train …`.
    Module {
        /// The dotted module name.
        name: String,
        /// Its arguments.
        args: Vec<String>,
    },
    /// Any other program, run as it is once per GPU: `./train.sh …`.
    Executable {
        /// The program.
        program: String,
        /// Its arguments.
        args: Vec<String>,
    },
}

/// Launchers that start one process per GPU themselves: a `[train].command` must not start
/// with one, since gpustack starts torchrun with the cluster's shape.
const LAUNCHERS: [&str; 7] = [
    "torchrun",
    "deepspeed",
    "accelerate",
    "srun",
    "mpirun",
    "mpiexec",
    "horovodrun",
];

fn is_python(word: &str) -> bool {
    let base = word.rsplit('/').next().unwrap_or(word);
    base == "python"
        || base.strip_prefix("python3").is_some_and(|rest| {
            rest.is_empty()
                || rest
                    .strip_prefix('.')
                    .is_some_and(|m| !m.is_empty() && m.bytes().all(|c| c.is_ascii_digit()))
        })
}

impl Entry {
    /// Reads a training command. Errors are (message, hint).
    pub fn parse(command: &[String]) -> Result<Entry, (String, String)> {
        let Some(first) = command.first() else {
            return Err((
                "`command` is empty".into(),
                "like `command = [\"python\", \"train.py\"]`".into(),
            ));
        };
        let base = first.rsplit('/').next().unwrap_or(first);
        if LAUNCHERS.contains(&base)
            || (is_python(first)
                && command
                    .iter()
                    .skip(1)
                    .any(|a| a == "torch.distributed.run" || a == "torch.distributed.launch"))
        {
            return Err((
                format!("`command` starts with the launcher `{}`", base.escape_debug()),
                "gpustack starts torchrun itself, one per node with [cluster].gpus_per_node processes; write the command torchrun runs, like `[\"python\", \"train.py\", \"--lr\", \"3e-4\"]`".into(),
            ));
        }
        if !is_python(first) {
            let rest = command[1..].to_vec();
            return Ok(
                if std::path::Path::new(base)
                    .extension()
                    .is_some_and(|e| e == "py")
                {
                    Entry::Script {
                        path: first.clone(),
                        args: rest,
                    }
                } else {
                    Entry::Executable {
                        program: first.clone(),
                        args: rest,
                    }
                },
            );
        }
        // The interpreter: torchrun runs scripts and modules with `python -u` already, so
        // `-u` is dropped; other interpreter options cannot be passed through torchrun.
        let mut i = 1;
        while command.get(i).is_some_and(|a| a == "-u") {
            i += 1;
        }
        match command.get(i).map(String::as_str) {
            None => Err((
                format!("`command` runs `{}` without a script", first.escape_debug()),
                "name the script or module, like `[\"python\", \"train.py\"]` or `[\"python\", \"-m\", \"pkg.train\"]`".into(),
            )),
            Some("-m") => match command.get(i + 1) {
                Some(m)
                    if !m.is_empty()
                        && m.split('.').all(|p| {
                            !p.is_empty()
                                && !p.starts_with(|c: char| c.is_ascii_digit())
                                && p.chars().all(|c| c.is_alphanumeric() || c == '_')
                        }) =>
                {
                    Ok(Entry::Module {
                        name: m.clone(),
                        args: command[i + 2..].to_vec(),
                    })
                }
                Some(m) => Err((
                    format!("`{}` is not a Python module name", m.escape_debug()),
                    "`-m` takes a dotted module name, like `pkg.train`".into(),
                )),
                None => Err((
                    "`command` ends with `-m`".into(),
                    "name the module, like `[\"python\", \"-m\", \"pkg.train\"]`".into(),
                )),
            },
            Some(opt) if opt.starts_with('-') => Err((
                format!("the interpreter option `{}` cannot be passed through torchrun", opt.escape_debug()),
                "torchrun runs the script with `python -u`; set interpreter options through the environment (e.g. PYTHONOPTIMIZE) or start an executable script".into(),
            )),
            Some(script) => Ok(Entry::Script {
                path: script.to_string(),
                args: command[i + 1..].to_vec(),
            }),
        }
    }

    /// The arguments the program receives.
    pub fn args(&self) -> &[String] {
        match self {
            Entry::Script { args, .. }
            | Entry::Module { args, .. }
            | Entry::Executable { args, .. } => args,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TrainWire {
    command: Option<S<Vec<String>>>,
    pub(super) workdir: Option<S<String>>,
}

/// `[train]`, validated.
pub(super) fn validate_train(t: S<TrainWire>, at: &mut At<'_>) -> Train {
    let span = t.span();
    let t = t.into_inner();
    let missing = t.command.is_none();
    let command = at.need(
        t.command,
        ("train", &span),
        "command",
        "[\"python\", \"train.py\"]",
        Vec::new(),
    );
    let cmd = command.get_ref();
    if !missing && (cmd.is_empty() || cmd.len() > 256) {
        at.fail(
            command.span(),
            "`command` must list 1 to 256 arguments".into(),
            "like `command = [\"python\", \"train.py\"]`",
        );
    }
    if let Some(bad) = cmd
        .iter()
        .find(|a| a.is_empty() || a.len() > 1024 || a.chars().any(|c| c.is_control()))
    {
        at.fail(
            command.span(),
            format!(
                "command argument `{}` is empty, too long or contains control characters",
                bad.escape_debug()
            ),
            "each argument is passed as one word; newlines and control characters are not allowed",
        );
    }
    let entry = match Entry::parse(cmd) {
        Ok(e) => e,
        // Reported above.
        Err(_) if missing => Entry::Executable {
            program: String::new(),
            args: Vec::new(),
        },
        Err((msg, hint)) => {
            at.fail(command.span(), msg, &hint);
            Entry::Executable {
                program: String::new(),
                args: Vec::new(),
            }
        }
    };
    let workdir = t.workdir.as_ref().and_then(|w| match parse_storage(w.get_ref()) {
            Ok(StorageRef::Pvc { .. }) => {
                at.fail(
                    w.span(),
                    format!("`workdir = \"{}\"`: a PersistentVolumeClaim cannot be mounted by Slurm jobs", w.get_ref().escape_debug()),
                    "use storage every node reaches (`nfs://host/path`, `lustre:/path`, `hostpath:/path`), or leave `workdir` out: Slurm then uses the directory the job is submitted from and Kubernetes the code image",
                );
                None
            }
            Ok(r) => Some(r),
            Err(e) => {
                at.fail(w.span(), e, "like `workdir = \"lustre:/lustre/home/me/project\"`");
                None
            }
        });
    Train {
        command: command.into_inner(),
        entry,
        workdir,
    }
}
