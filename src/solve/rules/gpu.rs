//! The GPUs' compute capabilities: which driver runs them, which archs a torch build
//! carries and whether it needs PTX.

use crate::core::arch::{best_way, Cc, RunsVia, Target};
use crate::core::version::Version;

use super::{Ctx, Rule, Violation};

impl<'c> Ctx<'c> {
    pub(super) fn gpu_names_for(&self, cc: Cc) -> String {
        let names: Vec<&str> = self
            .spec
            .gpus
            .iter()
            .filter_map(|g| self.cat.gpu(g))
            .filter(|g| g.cc == cc)
            .map(|g| g.id.as_str())
            .collect();
        if names.is_empty() {
            String::new()
        } else {
            format!(" ({})", names.join(", "))
        }
    }

    /// GPU-specific driver floors and ceilings; also applied to the host driver.
    pub(crate) fn driver_fits_gpus(&self, d: &Version) -> Result<(), Violation> {
        for g in self.spec.gpus.iter().filter_map(|g| self.cat.gpu(g)) {
            if let Some(last) = g.last_driver_branch {
                if d.major() > last {
                    return Err(self.violation(Rule::GpuLastBranch, || format!("driver {d} is from branch R{}, but {} ({}) is supported only up to branch R{last}", d.major(), g.id, g.arch), || vec![g.origin.clone()]));
                }
            }
            if let Some(min) = &g.min_driver {
                if d < min {
                    return Err(self.violation(
                        Rule::GpuMinDriver,
                        || format!("{} needs driver ≥ {min}, and driver {d} is older", g.id),
                        || vec![g.origin.clone()],
                    ));
                }
            }
        }
        for (g, x) in &self.generations {
            if let Some(last) = x.last_driver_branch {
                if d.major() > last {
                    return Err(self.violation(
                        Rule::GpuGenerationDriver,
                        || format!("driver {d} is from branch R{}, but {} GPUs ({}) are supported only up to branch R{last}", d.major(), x.arch, g.id),
                        || vec![x.origin.clone()],
                    ));
                }
            }
            if let Some(min) = &x.min_driver {
                if d < min {
                    return Err(self.violation(
                        Rule::GpuGenerationDriver,
                        || format!("driver {d} predates {} support: {} GPUs ({}) need driver ≥ {min} (branch R{})", x.arch, x.arch, g.id, min.major()),
                        || vec![x.origin.clone()],
                    ));
                }
            }
        }
        Ok(())
    }

    /// The arch list torch build `i` has: the source build's, or the wheel's.
    pub(crate) fn torch_archs(&self, i: usize) -> &[Target] {
        match &self.source_archs {
            Some(a) => a,
            None => &self.cat.torch[i].arch_list,
        }
    }

    /// `true` when some GPU runs this arch list only through PTX JIT.
    pub(crate) fn needs_ptx(&self, arch_list: &[Target]) -> bool {
        self.ccs
            .iter()
            .any(|cc| best_way(arch_list, *cc) == Some(RunsVia::PtxJit))
    }
}
