//! GPU compute capabilities and compilation targets, and the rule of which binary runs
//! on which GPU.
//!
//! * `sm_XY` (SASS) runs on the same major with a minor ≥ Y: code for `sm_86` runs on an
//!   `sm_89` GPU, not on `sm_90`.
//! * `sm_XYa` (architecture-specific) runs only on exactly X.Y.
//! * `sm_XYf` (family-specific, CUDA ≥ 12.9) runs on the same major with a minor ≥ Y.
//! * `compute_XY` (PTX) is JIT-compiled by the driver for any GPU with CC ≥ X.Y; `compute_XYa`
//!   only for X.Y, `compute_XYf` only within the family.
//!
//! Source: NVIDIA Blackwell compatibility guide and CUDA Programming Guide §20.1.3
//! (`catalog/cuda.toml` cites them where the rule is applied).

use std::fmt;
use std::str::FromStr;

/// A compute capability such as 9.0 or 12.1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cc {
    /// Major (9 for Hopper).
    pub major: u32,
    /// Minor (0 for Hopper).
    pub minor: u32,
}

impl fmt::Display for Cc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl FromStr for Cc {
    type Err = String;
    fn from_str(s: &str) -> Result<Cc, String> {
        let (a, b) = s
            .split_once('.')
            .ok_or_else(|| format!("expected `MAJOR.MINOR`, got `{s}`"))?;
        let major = a
            .parse()
            .map_err(|_| format!("expected `MAJOR.MINOR`, got `{s}`"))?;
        let minor: u32 = b
            .parse()
            .map_err(|_| format!("expected `MAJOR.MINOR`, got `{s}`"))?;
        if minor > 9 || !(1..=99).contains(&major) {
            return Err(format!("`{s}` is not a compute capability"));
        }
        Ok(Cc { major, minor })
    }
}

/// The feature-set suffix of a target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Suffix {
    /// No suffix: portable within the major (SASS) or forward (PTX).
    None,
    /// `f`: family-specific.
    F,
    /// `a`: architecture-specific.
    A,
}

/// A compilation target: `sm_90`, `sm_90a`, `sm_100f`, `compute_90`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Target {
    /// The compute capability it is built for.
    pub cc: Cc,
    /// `a`, `f` or none.
    pub suffix: Suffix,
    /// `true` for PTX (`compute_XY`, `X.Y+PTX`), `false` for SASS (`sm_XY`).
    pub ptx: bool,
}

impl Target {
    /// Parses every spelling users and catalogs write: `sm_90`, `sm90`, `90`, `9.0`,
    /// `sm_90a`, `9.0a`, `compute_90`, `9.0+PTX`, `sm_100f`.
    ///
    /// ```
    /// use gpustack::GpuTarget;
    /// for s in ["sm_90", "sm90", "90", "9.0"] {
    ///     assert_eq!(s.parse::<GpuTarget>().unwrap().to_string(), "sm_90");
    /// }
    /// assert_eq!("9.0+PTX".parse::<GpuTarget>().unwrap().to_string(), "compute_90");
    /// ```
    pub fn parse(s: &str) -> Result<Target, String> {
        let bad = || {
            format!("`{s}` is not a GPU target (expected forms like `sm_90`, `sm_90a`, `9.0`, `90`, `compute_90` or `9.0+PTX`)")
        };
        let lower = s.trim().to_ascii_lowercase();
        let (body, mut ptx) = match lower.strip_suffix("+ptx") {
            Some(b) => (b, true),
            None => (lower.as_str(), false),
        };
        let body = if let Some(b) = body.strip_prefix("compute_") {
            if ptx {
                return Err(bad());
            }
            ptx = true;
            b
        } else if let Some(b) = body.strip_prefix("sm_").or_else(|| body.strip_prefix("sm")) {
            if ptx {
                return Err(bad());
            }
            b
        } else {
            body
        };
        let (digits, suffix) = match body.as_bytes().last() {
            Some(b'a') => (&body[..body.len() - 1], Suffix::A),
            Some(b'f') => (&body[..body.len() - 1], Suffix::F),
            _ => (body, Suffix::None),
        };
        let cc = if digits.contains('.') {
            digits.parse::<Cc>().map_err(|_| bad())?
        } else {
            if digits.len() < 2 || digits.len() > 3 || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            let (ma, mi) = digits.split_at(digits.len() - 1);
            Cc {
                major: ma.parse().map_err(|_| bad())?,
                minor: mi.parse().map_err(|_| bad())?,
            }
        };
        if cc.major == 0 {
            return Err(bad());
        }
        Ok(Target { cc, suffix, ptx })
    }

    /// The SASS target for a GPU of capability `cc`.
    pub fn sass(cc: Cc) -> Target {
        Target {
            cc,
            suffix: Suffix::None,
            ptx: false,
        }
    }

    /// Whether code for this target runs on a GPU of capability `gpu`, and how.
    pub fn runs_on(&self, gpu: Cc) -> Option<RunsVia> {
        let ok = match self.suffix {
            Suffix::A => self.cc == gpu,
            Suffix::F => self.cc.major == gpu.major && self.cc.minor <= gpu.minor,
            Suffix::None if self.ptx => self.cc <= gpu,
            Suffix::None => self.cc.major == gpu.major && self.cc.minor <= gpu.minor,
        };
        match (ok, self.ptx) {
            (false, _) => None,
            (true, false) => Some(RunsVia::Binary),
            (true, true) => Some(RunsVia::PtxJit),
        }
    }

    /// The `sm` spelling nvcc lists without prefix: `90a`.
    pub fn short(&self) -> String {
        let s = match self.suffix {
            Suffix::None => "",
            Suffix::A => "a",
            Suffix::F => "f",
        };
        format!("{}{}{}", self.cc.major, self.cc.minor, s)
    }

    /// The `TORCH_CUDA_ARCH_LIST` spelling: `9.0`, `9.0a`, `9.0+PTX`.
    pub fn torch_form(&self) -> String {
        let s = match self.suffix {
            Suffix::None => "",
            Suffix::A => "a",
            Suffix::F => "f",
        };
        format!("{}{}{}", self.cc, s, if self.ptx { "+PTX" } else { "" })
    }
}

/// How a GPU runs a binary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunsVia {
    /// A matching SASS cubin.
    Binary,
    /// Driver JIT compilation of PTX.
    PtxJit,
}

impl FromStr for Target {
    type Err = String;
    fn from_str(s: &str) -> Result<Target, String> {
        Target::parse(s)
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}_{}",
            if self.ptx { "compute" } else { "sm" },
            self.short()
        )
    }
}

/// Parses a `TORCH_CUDA_ARCH_LIST` entry. `X.Y+PTX` means both the `sm_XY` cubin and
/// `compute_XY` PTX (PyTorch's meaning), so it yields two targets.
pub fn parse_torch_entry(s: &str) -> Result<Vec<Target>, String> {
    let t = Target::parse(s)?;
    if t.ptx && s.trim().to_ascii_lowercase().ends_with("+ptx") {
        Ok(vec![Target { ptx: false, ..t }, t])
    } else {
        Ok(vec![t])
    }
}

/// Writes targets as a `TORCH_CUDA_ARCH_LIST`: `8.0`, `9.0+PTX` (a cubin and PTX of the
/// same capability merge into one `+PTX` entry).
pub fn torch_list(targets: &[Target]) -> Vec<String> {
    let mut out = Vec::new();
    for t in targets {
        if t.ptx && targets.contains(&Target { ptx: false, ..*t }) {
            continue;
        }
        let ptx_too = !t.ptx && targets.contains(&Target { ptx: true, ..*t });
        let s = Target {
            ptx: ptx_too || t.ptx,
            ..*t
        }
        .torch_form();
        out.push(s);
    }
    out
}

/// How a set of targets serves a GPU: the best way any of them runs on it.
pub fn best_way(targets: &[Target], gpu: Cc) -> Option<RunsVia> {
    let mut best = None;
    for t in targets {
        match t.runs_on(gpu) {
            Some(RunsVia::Binary) => return Some(RunsVia::Binary),
            Some(RunsVia::PtxJit) => best = Some(RunsVia::PtxJit),
            None => {}
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Target {
        s.parse().unwrap()
    }
    fn cc(s: &str) -> Cc {
        s.parse().unwrap()
    }

    #[test]
    fn spellings() {
        assert_eq!(t("sm_90a").to_string(), "sm_90a");
        assert_eq!(t("9.0a").to_string(), "sm_90a");
        assert_eq!(t("100f").to_string(), "sm_100f");
        assert_eq!(t("12.0+PTX").to_string(), "compute_120");
        assert_eq!(t("compute_90").torch_form(), "9.0+PTX");
        for bad in [
            "",
            "sm_",
            "9",
            "sm_9999",
            "x90",
            "compute_90+PTX",
            "9.10",
            "0.0",
            "sm_0",
        ] {
            assert!(Target::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn binary_compatibility() {
        assert_eq!(t("sm_86").runs_on(cc("8.9")), Some(RunsVia::Binary));
        assert_eq!(t("sm_86").runs_on(cc("8.0")), None);
        assert_eq!(t("sm_80").runs_on(cc("9.0")), None);
        assert_eq!(t("sm_90a").runs_on(cc("9.0")), Some(RunsVia::Binary));
        assert_eq!(t("sm_90a").runs_on(cc("10.0")), None);
        assert_eq!(t("compute_90").runs_on(cc("10.0")), Some(RunsVia::PtxJit));
        assert_eq!(t("compute_90a").runs_on(cc("10.0")), None);
        assert_eq!(t("sm_100f").runs_on(cc("10.3")), Some(RunsVia::Binary));
        assert_eq!(t("sm_120f").runs_on(cc("10.3")), None);
        assert_eq!(
            best_way(&[t("sm_80"), t("compute_90")], cc("12.0")),
            Some(RunsVia::PtxJit)
        );
    }
}
