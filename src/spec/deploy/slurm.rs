//! `[slurm]`: partition, container runtime, time limits and node cap, with sbatch's time
//! grammar.

use serde::Deserialize;
use toml::Spanned;

use crate::spec::at::At;

use super::S;

/// How Slurm jobs run the stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlurmContainer {
    /// pyxis/enroot (`srun --container-image`).
    Pyxis,
    /// `apptainer exec --nv`.
    Apptainer,
    /// Bare metal, on the VM image's environment.
    None,
}

impl SlurmContainer {
    /// Every container runtime.
    pub const ALL: [SlurmContainer; 3] = [
        SlurmContainer::Pyxis,
        SlurmContainer::Apptainer,
        SlurmContainer::None,
    ];

    /// The spec spelling.
    pub fn name(self) -> &'static str {
        match self {
            SlurmContainer::Pyxis => "pyxis",
            SlurmContainer::Apptainer => "apptainer",
            SlurmContainer::None => "none",
        }
    }
}

/// `[slurm]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slurm {
    /// Partition.
    pub partition: String,
    /// Container runtime.
    pub container: SlurmContainer,
    /// Time limit, `HH:MM:SS` or `D-HH:MM:SS`.
    pub time: String,
    /// The partition's `MaxNodes` (`scontrol show partition`), when the spec declares it:
    /// `check` reports a job that asks for more.
    pub max_nodes: Option<u32>,
    /// The partition's `MaxTime`, in sbatch's time format, when the spec declares it.
    pub max_time: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SlurmWire {
    partition: Option<S<String>>,
    container: Option<S<String>>,
    time: Option<S<String>>,
    max_nodes: Option<S<i64>>,
    max_time: Option<S<String>>,
}

/// [`SlurmWire`] with its required key present (or a placeholder, reported).
struct SlurmFields {
    partition: S<String>,
    container: Option<S<String>>,
    time: Option<S<String>>,
}

/// A Slurm time limit in one of the formats sbatch(1) documents for `--time`: "minutes",
/// "minutes:seconds", "hours:minutes:seconds", "days-hours", "days-hours:minutes" and
/// "days-hours:minutes:seconds" (<https://slurm.schedmd.com/sbatch.html#OPT_time>).
/// Seconds and minutes after the first field are below 60, hours after days below 24. Slurm
/// reads a zero limit as no limit at all, so zero is refused: no limit is written
/// `UNLIMITED` (or `INFINITE`), explicitly.
pub fn is_slurm_time(s: &str) -> bool {
    if matches!(s, "UNLIMITED" | "unlimited" | "INFINITE" | "infinite") {
        return true;
    }
    let num = |p: &str| -> Option<u64> {
        (!p.is_empty() && p.len() <= 6 && p.bytes().all(|c| c.is_ascii_digit()))
            .then(|| p.parse().ok())
            .flatten()
    };
    let fields = |r: &str| -> Option<Vec<u64>> { r.split(':').map(num).collect() };
    let seconds = match s.split_once('-') {
        Some((d, rest)) => {
            let Some(days) = num(d) else { return false };
            let Some(f) = fields(rest) else { return false };
            match f.as_slice() {
                [h] if *h < 24 => ((days * 24 + h) * 60) * 60,
                [h, m] if *h < 24 && *m < 60 => ((days * 24 + h) * 60 + m) * 60,
                [h, m, sec] if *h < 24 && *m < 60 && *sec < 60 => {
                    ((days * 24 + h) * 60 + m) * 60 + sec
                }
                _ => return false,
            }
        }
        None => {
            let Some(f) = fields(s) else { return false };
            match f.as_slice() {
                [m] => m * 60,
                [m, sec] if *sec < 60 => m * 60 + sec,
                [h, m, sec] if *m < 60 && *sec < 60 => (h * 60 + m) * 60 + sec,
                _ => return false,
            }
        }
    };
    seconds > 0
}

/// `[slurm]`, validated.
pub(super) fn validate_slurm(s: S<SlurmWire>, at: &mut At<'_>) -> Slurm {
    let span = s.span();
    let s = s.into_inner();
    let (max_nodes, max_time) = (s.max_nodes, s.max_time);
    let missing = s.partition.is_none();
    let s = SlurmFields {
        partition: at.need(
            s.partition,
            ("slurm", &span),
            "partition",
            "\"gpu\"",
            "gpu".into(),
        ),
        container: s.container,
        time: s.time,
    };
    let p = s.partition.get_ref();
    // A leading `-` would be read as an option of sbatch or srun.
    let plain = p
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-');
    let leads = p.bytes().next().is_some_and(|c| c.is_ascii_alphanumeric());
    if !(p.is_empty() || (plain && leads)) {
        at.fail(
            s.partition.span(),
            format!(
                "invalid partition `{}`",
                s.partition.get_ref().escape_debug()
            ),
            "letters, digits, `-` and `_` only, starting with a letter or digit",
        );
    }
    let container = match s.container.as_ref().map(|c| c.get_ref().as_str()) {
        None | Some("pyxis") => SlurmContainer::Pyxis,
        Some("apptainer") => SlurmContainer::Apptainer,
        Some("none") => SlurmContainer::None,
        Some(other) => {
            let span = s.container.as_ref().map(Spanned::span).unwrap_or_default();
            at.fail(
                span,
                format!("unknown container runtime `{}`", other.escape_debug()),
                "`container` is one of: pyxis, apptainer, none",
            );
            SlurmContainer::None
        }
    };
    let time = s
        .time
        .as_ref()
        .map_or_else(|| "24:00:00".to_string(), |t| t.get_ref().clone());
    if let Some(t) = &s.time {
        if !is_slurm_time(t.get_ref()) {
            at.fail(
                    t.span(),
                    format!("invalid time limit `{}`", t.get_ref().escape_debug()),
                    "write one of sbatch's formats: `MM`, `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM` or `D-HH:MM:SS`, like `48:00:00` (minutes and seconds below 60, hours after days below 24); a zero limit is no limit in Slurm: write `UNLIMITED` if that is meant",
                );
        }
    }
    if !missing && (s.partition.get_ref().is_empty() || s.partition.get_ref().len() > 64) {
        at.fail(
            s.partition.span(),
            "`partition` must be 1 to 64 characters".into(),
            "name the Slurm partition the jobs run in, like `partition = \"gpu\"`",
        );
    }
    let max_nodes = max_nodes.and_then(|n| {
        let v = *n.get_ref();
        if (1..=1_000_000).contains(&v) {
            u32::try_from(v).ok()
        } else {
            at.fail(
                n.span(),
                format!("`max_nodes` must be a positive number of nodes, not {v}"),
                "give the partition's MaxNodes as `scontrol show partition` prints it, like `max_nodes = 64`, or leave it out",
            );
            None
        }
    });
    let max_time = max_time.and_then(|t| {
        if is_slurm_time(t.get_ref())
            && !["unlimited", "infinite"]
                .iter()
                .any(|u| t.get_ref().eq_ignore_ascii_case(u))
        {
            Some(t.into_inner())
        } else {
            at.fail(
                t.span(),
                format!("invalid partition time limit `{}`", t.get_ref().escape_debug()),
                "give the partition's MaxTime as `scontrol show partition` prints it, like `max_time = \"2-00:00:00\"`, or leave it out for no limit",
            );
            None
        }
    });
    Slurm {
        partition: s.partition.into_inner(),
        container,
        time,
        max_nodes,
        max_time,
    }
}
