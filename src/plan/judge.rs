//! Acceptance judged: the acceptance jobs read their own result lines and fail below the
//! lock's figure, printing measured against expected.
//!
//! The judgement is decided here once, as a filter every target puts after the benchmark's
//! output (`all_reduce_perf … | awk …`): it passes every line through, reads the results and,
//! at the end, prints one `gpustack acceptance:` verdict line and exits 1 when the figure is
//! not reached. Slurm pipes `srun` into it; Kubernetes wraps the container's command in
//! `bash -c` around the same filter ([`Judge::wrap`]).
//!
//! * **nccl-tests** (`all_reduce_perf`): the *peak* bus bandwidth of the run, the larger of
//!   the out-of-place and in-place `busbw` columns over every size row. The catalog's
//!   figures are peaks at the largest sizes (`catalog/bandwidth.toml`), so the peak is what
//!   compares with them. The `# Avg bus bandwidth` line is the mean over *all* sizes, from
//!   8 B up, and is printed beside the verdict but never judged: a healthy 2 x 8 H100 run
//!   whose peak is 338.82 GB/s reports an average of 70.742
//!   (`fixtures/acceptance/nccl-tests-h100-2x8.txt`). The columns are read from the end of
//!   the row (`busbw` is the 5th and 1st from the end), which holds for every nccl-tests
//!   table layout (with and without the `redop`/`root` columns). A row count of zero, or
//!   `Out of bounds values : N FAILED`, fails too.
//! * **osu_bw**: the `Bandwidth (MB/s)` of the row at the lock's message size (`Size`
//!   column, bytes), or the largest figure when the lock's figure names no size.
//!
//! The threshold is the lock's figure less [`MARGIN_PERCENT`], rounded down to 0.01.
//! `catalog/bandwidth.toml` asks for a margin (its sources show run-to-run and NCCL-version
//! variation); 10 % is the tolerance CSCS's regression tests apply to their `osu_bw`
//! reference (the note of the catalog's `osu_bw` entry).
//!
//! An optional `N: ` prefix on a line (`srun --label`) is ignored.

use serde::Serialize;

/// How far below the lock's figure a run may be and pass, in percent.
pub const MARGIN_PERCENT: u32 = 10;

/// What a judge reads.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Reading {
    /// nccl-tests' peak `busbw` (GB/s).
    NcclBusbw,
    /// `osu_bw`'s `Bandwidth (MB/s)` at a message size.
    OsuBw,
}

/// One acceptance judgement: the figure, the threshold and the filter that applies them.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Judge {
    /// What is read.
    pub reading: Reading,
    /// The lock's figure, as published: `330.93`.
    pub expected: String,
    /// The threshold: the figure less [`MARGIN_PERCENT`].
    pub min: String,
    /// `GB/s` or `MB/s`, the benchmark's own unit.
    pub unit: String,
    /// The figure's name in the verdict: `the lock's inter-node figure`.
    pub figure: String,
    /// `osu_bw`: the `Size` row to read, in bytes.
    pub size_bytes: Option<String>,
    /// Where the figure is published.
    pub source: String,
    /// The filter: `awk` and its arguments, one word each.
    pub argv: Vec<String>,
}

// The programs, one statement or brace per line; joined with spaces into the one line the
// scripts carry (every statement ends in `;`, so the newlines are not needed).
const NCCL_AWK: &[&str] = &[
    "{ print; fflush(); }",
    "{",
    "line = $0;",
    "sub(/^[ \\t]*[0-9]+: /, \"\", line);",
    "n = split(line, f, \" \");",
    "if (n >= 10 && f[1] ~ /^[0-9]+$/ && f[2] ~ /^[0-9]+$/ && f[n-5] ~ /^[0-9.]+$/ && f[n-1] ~ /^[0-9.]+$/) {",
    "rows++;",
    "if (f[n-5] + 0 > peak) { peak = f[n-5] + 0; at = f[1]; }",
    "if (f[n-1] + 0 > peak) { peak = f[n-1] + 0; at = f[1]; }",
    "}",
    "if (line ~ /Out of bounds values *: *[0-9]+ *FAILED/) { wrong = line; }",
    "if (line ~ /^# *Avg bus bandwidth *:/) { avg = line; sub(/^[^:]*: */, \"\", avg); sub(/ *$/, \"\", avg); }",
    "}",
    "END {",
    "tail = sprintf(\"%s %s (%s %s %s less %s%%; source: %s)\", min, unit, figure, expected, unit, margin, source);",
    "if (avg != \"\") { avg_note = sprintf(\"; Avg bus bandwidth %s %s over all sizes, not judged\", avg, unit); }",
    "if (rows == 0) { printf \"gpustack acceptance: FAIL: no all_reduce_perf result rows in the output; expected a peak busbw of at least %s\\n\", tail; exit 1; }",
    "if (wrong != \"\") { printf \"gpustack acceptance: FAIL: all_reduce_perf reported wrong results (%s)\\n\", wrong; exit 1; }",
    "if (peak >= min + 0) { printf \"gpustack acceptance: PASS: all_reduce_perf peak busbw %.2f %s at %s B >= %s%s\\n\", peak, unit, at, tail, avg_note; exit 0; }",
    "printf \"gpustack acceptance: FAIL: all_reduce_perf peak busbw %.2f %s at %s B < %s%s\\n\", peak, unit, at, tail, avg_note; exit 1;",
    "}",
];

const OSU_AWK: &[&str] = &[
    "{ print; fflush(); }",
    "{",
    "line = $0;",
    "sub(/^[ \\t]*[0-9]+: /, \"\", line);",
    "n = split(line, f, \" \");",
    "if (n >= 2 && f[1] ~ /^[0-9]+$/ && f[2] ~ /^[0-9.]+$/) {",
    "if (size != \"\" && f[1] == size) { bw = f[2] + 0; at = f[1]; found = 1; }",
    "if (size == \"\" && (!found || f[2] + 0 > bw)) { bw = f[2] + 0; at = f[1]; found = 1; }",
    "}",
    "}",
    "END {",
    "tail = sprintf(\"%s %s (%s %s %s less %s%%; source: %s)\", min, unit, figure, expected, unit, margin, source);",
    "if (!found && size != \"\") { printf \"gpustack acceptance: FAIL: no osu_bw result row for %s-byte messages in the output; expected at least %s\\n\", size, tail; exit 1; }",
    "if (!found) { printf \"gpustack acceptance: FAIL: no osu_bw result rows in the output; expected at least %s\\n\", tail; exit 1; }",
    "if (bw >= min + 0) { printf \"gpustack acceptance: PASS: osu_bw %.2f %s at %s B >= %s\\n\", bw, unit, at, tail; exit 0; }",
    "printf \"gpustack acceptance: FAIL: osu_bw %.2f %s at %s B < %s\\n\", bw, unit, at, tail; exit 1;",
    "}",
];

impl Judge {
    /// The judge of nccl-tests' peak busbw against `expected` GB/s; None when the figure is
    /// not a plain decimal.
    pub fn nccl(expected: &str, figure: &str, source: &str) -> Option<Judge> {
        Judge::new(Reading::NcclBusbw, expected, "GB/s", figure, None, source)
    }

    /// The judge of `osu_bw` at `size_bytes` against `expected` MB/s.
    pub fn osu(
        expected: &str,
        figure: &str,
        size_bytes: Option<&str>,
        source: &str,
    ) -> Option<Judge> {
        Judge::new(Reading::OsuBw, expected, "MB/s", figure, size_bytes, source)
    }

    fn new(
        reading: Reading,
        expected: &str,
        unit: &str,
        figure: &str,
        size_bytes: Option<&str>,
        source: &str,
    ) -> Option<Judge> {
        let min = threshold(expected)?;
        let program = match reading {
            Reading::NcclBusbw => NCCL_AWK,
            Reading::OsuBw => OSU_AWK,
        };
        let mut argv = vec!["awk".to_string()];
        for (k, v) in [
            ("min", min.as_str()),
            ("expected", expected),
            ("unit", unit),
            ("figure", figure),
            ("margin", &MARGIN_PERCENT.to_string()),
            ("size", size_bytes.unwrap_or("")),
            ("source", source),
        ] {
            // awk's -v processes escape sequences: a backslash in a value is doubled.
            argv.push("-v".into());
            argv.push(format!("{k}={}", v.replace('\\', "\\\\")));
        }
        argv.push(program.join(" "));
        Some(Judge {
            reading,
            expected: expected.to_string(),
            min,
            unit: unit.to_string(),
            figure: figure.to_string(),
            size_bytes: size_bytes.map(str::to_string),
            source: source.to_string(),
            argv,
        })
    }

    /// The filter as one shell command line.
    pub fn shell(&self) -> String {
        self.argv
            .iter()
            .map(|w| crate::render::sh_quote(w))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// A `bash -c` script that runs its arguments (`"$@"`) through the filter, failing when
    /// either fails: what a container whose command is the benchmark itself runs instead.
    pub fn wrap(&self) -> String {
        format!("set -o pipefail\n\"$@\" | {}\n", self.shell())
    }
}

/// `expected` less [`MARGIN_PERCENT`], rounded down to 0.01; None when it is not a plain
/// decimal.
fn threshold(expected: &str) -> Option<String> {
    if expected.is_empty() || !expected.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    let e: f64 = expected.parse().ok()?;
    let hundredths = (e * f64::from(100 - MARGIN_PERCENT)).floor();
    Some(format!("{:.2}", hundredths / 100.0))
}

#[cfg(test)]
mod tests {
    use super::threshold;

    #[test]
    fn the_threshold_is_the_figure_less_the_margin_rounded_down() {
        assert_eq!(threshold("330.93").as_deref(), Some("297.83"));
        assert_eq!(threshold("478.87").as_deref(), Some("430.98"));
        assert_eq!(threshold("24000").as_deref(), Some("21600.00"));
        assert_eq!(threshold("1000 x 24"), None);
    }
}
