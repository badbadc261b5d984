//! The driver against everything it hosts: which CUDA runtime a driver runs and the
//! driver × CUDA/library/torch pair rules.

use crate::catalog::Origin;
use crate::core::version::Version;
use crate::core::Component;

use super::{fact_of, Cand, Compat, Ctx, Rule, Violation};

impl<'c> Ctx<'c> {
    /// How a driver runs code built against CUDA `cuda` (major.minor or full release).
    /// `needs_ptx_jit` excludes minor-version compatibility, which does not cover JIT of
    /// newer PTX.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn driver_runs(
        &self,
        driver: &Version,
        cuda: &Version,
        full_min: Option<&Version>,
        needs_ptx_jit: bool,
        rule: Rule,
        what: impl FnOnce() -> String,
        fact: Option<&Origin>,
    ) -> Result<Compat, Violation> {
        if full_min.is_some_and(|m| driver >= m) {
            return Ok(Compat::Full);
        }
        let mvc = self.cat.minor_compat_for(cuda.major());
        let mut facts: Vec<Origin> = fact.into_iter().cloned().collect();
        if let Some(m) = mvc {
            facts.push(m.origin.clone());
            if driver >= &m.driver_min && !needs_ptx_jit {
                return Ok(Compat::MinorVersion);
            }
        }
        let fc = self.cat.forward_compat_for(cuda);
        if let Some(f) = fc {
            facts.push(f.origin.clone());
            if self.all_datacenter
                && f.bases.contains(&driver.major())
                && cuda.major() >= driver_cuda_major(self, driver)
            {
                return Ok(Compat::Forward {
                    package: f.package.clone(),
                });
            }
        }
        if !self.verbose {
            return Err(Violation {
                rule,
                message: String::new(),
                facts: Vec::new(),
            });
        }
        let what = what();
        let mut msg = match full_min {
            Some(m) => format!("{what} needs driver ≥ {m}"),
            None => format!("{what} has no published full-support driver minimum"),
        };
        match mvc {
            Some(m) if needs_ptx_jit && driver >= &m.driver_min => msg.push_str(&format!("; driver {driver} would run it only through minor-version compatibility, which does not cover the PTX JIT this stack needs")),
            Some(m) if full_min == Some(&m.driver_min) => msg.push_str(&format!(" (also the CUDA {} minor-version-compatibility floor); driver {driver} is older", cuda.major())),
            Some(m) => msg.push_str(&format!(", or ≥ {} through CUDA {} minor-version compatibility; driver {driver} is older", m.driver_min, cuda.major())),
            None => msg.push_str(&format!("; driver {driver} is older")),
        }
        if let Some(f) = fc {
            if !self.all_datacenter {
                msg.push_str(&format!(
                    " (forward compatibility with `{}` is for data center GPUs only)",
                    f.package
                ));
            } else if !f.bases.contains(&driver.major()) {
                let bases = f
                    .bases
                    .iter()
                    .map(|b| format!("R{b}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                msg.push_str(&format!(
                    " (forward compatibility with `{}` supports base branches {} only, not R{})",
                    f.package,
                    if bases.is_empty() {
                        "none".into()
                    } else {
                        bases
                    },
                    driver.major()
                ));
            }
        }
        Err(Violation {
            rule,
            message: msg,
            facts: facts.iter().map(fact_of).collect(),
        })
    }

    pub(super) fn check_pair_driver(
        &self,
        d: &Version,
        _ca: Component,
        cb: Component,
        b: Cand,
    ) -> Result<(), Violation> {
        let Cand::Idx(i) = b else { return Ok(()) };
        match cb {
            Component::Cuda => {
                let r = &self.cat.cuda[i];
                self.driver_runs(
                    d,
                    &r.version,
                    r.driver_min.as_ref(),
                    false,
                    Rule::DriverCuda,
                    || format!("CUDA {}", r.version),
                    Some(&r.origin),
                )
                .map(|_| ())
            }
            Component::Torch => {
                let t = &self.cat.torch[i];
                let ptx = self.needs_ptx(self.torch_archs(i));
                self.driver_runs(
                    d,
                    &t.cuda,
                    self.full_min_for_runtime(&t.cuda),
                    ptx,
                    Rule::WheelRuntimeDriver,
                    || format!("torch {} (CUDA {} runtime)", t.full, t.cuda),
                    self.cuda_release_origin(&t.cuda),
                )
                .map(|_| ())
            }
            Component::Vllm => {
                let r = &self.cat.vllm[i];
                self.driver_runs(
                    d,
                    &r.cuda,
                    self.full_min_for_runtime(&r.cuda),
                    false,
                    Rule::WheelRuntimeDriver,
                    || format!("vLLM {} (CUDA {} wheel)", r.version, r.cuda),
                    self.cuda_release_origin(&r.cuda),
                )
                .map(|_| ())
            }
            _ => Ok(()),
        }
    }
}

/// The newest CUDA major a driver runs natively (from the minor-compat floors).
fn driver_cuda_major(ctx: &Ctx<'_>, driver: &Version) -> u64 {
    ctx.cat
        .minor_compat
        .iter()
        .filter(|m| driver >= &m.driver_min)
        .map(|m| m.major)
        .max()
        .unwrap_or(0)
}
