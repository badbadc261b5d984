//! The hardware check: does the locked stack run on a node (its GPUs, its driver)?

use crate::catalog::Catalog;
use crate::core::arch::{best_way, Cc, RunsVia, Target};
use crate::core::version::Version;
use crate::core::Component;
use crate::error::{Diagnostic, Error, Stage};
use crate::lock::Lock;
use crate::spec::check::Code;

use super::line_of;
use super::report::Finding;

/// The host facts `--hardware` gives: the `[hardware]` table `gpustack probe` prints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostHardware {
    /// Catalog GPU ids with their capability.
    pub gpus: Vec<(String, Cc)>,
    /// The installed driver.
    pub driver: Option<Version>,
}

impl HostHardware {
    /// The hardware a [`crate::probe::Probe`] found.
    pub fn from_probe(probe: &crate::probe::Probe, catalog: &Catalog) -> HostHardware {
        HostHardware {
            gpus: probe
                .gpus
                .iter()
                .filter_map(|g| {
                    let cc = g.cc.or_else(|| catalog.gpu(&g.id).map(|c| c.cc))?;
                    Some((g.id.clone(), cc))
                })
                .collect(),
            driver: probe.driver.clone(),
        }
    }

    /// Parses a `[hardware]` table (`gpus = ["h100"]`, `driver = "550.54.15"`), mapping GPU
    /// names through the catalog.
    ///
    /// ```
    /// let catalog = gpustack::Catalog::stock()?;
    /// let hw = gpustack::check::HostHardware::parse(
    ///     "node.toml", "[hardware]\ngpus = [\"h100\"]\ndriver = \"550.54.15\"\n", &catalog)?;
    /// assert_eq!(hw.gpus[0].0, "h100");
    /// # Ok::<(), gpustack::Error>(())
    /// ```
    pub fn parse(file: &str, text: &str, catalog: &Catalog) -> Result<HostHardware, Error> {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Wire {
            hardware: HwWire,
        }
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct HwWire {
            #[serde(default)]
            gpus: Vec<toml::Spanned<String>>,
            driver: Option<toml::Spanned<String>>,
            #[serde(default)]
            #[allow(dead_code)]
            archs: Vec<String>,
        }
        let w: Wire = toml::from_str(text).map_err(|e| {
            crate::error::toml_diagnostic(Stage::Spec, file, text, &e).hint(
                "`--hardware` takes the `[hardware]` table `gpustack probe` prints, or raw `nvidia-smi` output",
            )
        })?;
        let mut gpus = Vec::new();
        for g in &w.hardware.gpus {
            let Some(found) = catalog.gpu(g.get_ref()) else {
                let ids: Vec<&str> = catalog.gpus.iter().map(|g| g.id.as_str()).collect();
                let mut d = Diagnostic::new(Stage::Spec, format!("unknown GPU `{}`", g.get_ref()))
                    .at_offset(file, text, g.span().start);
                if let Some(s) = crate::core::names::did_you_mean(g.get_ref(), ids.iter().copied())
                {
                    d = d.hint(format!("did you mean `{s}`?"));
                }
                return Err(d.hint(format!("GPU ids are: {}", ids.join(", "))).into());
            };
            gpus.push((found.id.clone(), found.cc));
        }
        let driver = match &w.hardware.driver {
            None => None,
            Some(d) => Some(Version::parse(d.get_ref()).map_err(|e| {
                Diagnostic::new(
                    Stage::Spec,
                    format!("invalid driver version `{}`: {e}", d.get_ref()),
                )
                .at_offset(file, text, d.span().start)
                .hint("write the version `nvidia-smi` prints, like `550.54.15`")
            })?),
        };
        Ok(HostHardware { gpus, driver })
    }
}

// long: one pass over the node's GPUs and driver, each finding built where its facts are read.
pub(super) fn hardware(
    lock: &Lock,
    lock_file: &str,
    lock_text: &str,
    hw: &HostHardware,
    catalog: &Catalog,
    f: &mut Vec<Finding>,
) {
    let arch_list: &[Target] = &lock.hardware.arch_list;
    let listed: Vec<String> = arch_list.iter().map(ToString::to_string).collect();
    for (id, cc) in &hw.gpus {
        match best_way(arch_list, *cc) {
            None => f.push(
                Finding::new(
                    Code::ArchNotCovered,
                    format!(
                        "the node's {id} (compute capability {cc}) is not covered by the locked arch list [{}]: kernels fail with \"no kernel image is available\"",
                        listed.join(", ")
                    ),
                )
                .at(lock_file, line_of(lock_text, "arch-list"))
                .hint(format!("add \"{id}\" to `[hardware].gpus` in gpustack.toml and run `gpustack lock`")),
            ),
            Some(way) if !lock.hardware.gpus.iter().any(|g| &g.id == id) => f.push(
                Finding::new(
                    Code::GpuNotLocked,
                    format!(
                        "the node's {id} is not a GPU the stack was locked for; the arch list covers it{}",
                        if way == RunsVia::PtxJit { " through PTX JIT only (slow first start)" } else { "" }
                    ),
                )
                .at(lock_file, line_of(lock_text, "[hardware]"))
                .about(id)
                .hint(format!("add \"{id}\" to `[hardware].gpus` so the lock states it")),
            ),
            Some(_) => {}
        }
    }
    // A source-built torch has exactly the kernels of its own arch list: no wheel's wider
    // list or PTX to fall back to.
    if let Some(t) = lock
        .component(crate::core::Component::Torch)
        .filter(|t| t.get("build") == Some("source"))
    {
        let mut built: Vec<Target> = Vec::new();
        for a in t.list("arch-list") {
            built.extend(crate::core::arch::parse_torch_entry(a).unwrap_or_default());
        }
        for (id, cc) in &hw.gpus {
            if best_way(&built, *cc).is_none() {
                f.push(
                    Finding::new(
                        Code::TorchArchNotBuilt,
                        format!(
                            "the node's {id} (compute capability {cc}) is not in the arch list torch {} was built for from source ({}): it has no kernels for it and no PTX to fall back to",
                            t.version,
                            t.list("arch-list").join(";")
                        ),
                    )
                    .at(lock_file, line_of(lock_text, "build = \"source\""))
                    .hint(format!("add \"{}\" to `archs` of `torch` in gpustack.toml (or leave `archs` out to build for every GPU in [hardware]) and run `gpustack lock`", Target { cc: *cc, suffix: crate::core::arch::Suffix::None, ptx: false }.torch_form())),
                );
            }
        }
    }
    let Some(have) = &hw.driver else { return };
    let locked = &lock.hardware.driver;
    // An installed driver is a fact the spec states about the nodes (`[hardware].driver`):
    // the stack was resolved against exactly it, and nothing gpustack generates installs
    // another. A node running a different one contradicts the lock, whether or not the
    // stack would also resolve on it.
    if lock.hardware.driver_installed && have != locked {
        f.push(
            Finding::new(
                Code::InstalledDriverMismatch,
                format!(
                    "the node runs driver {have}, but the lock says the nodes run the installed driver {locked} (`[hardware].driver`)"
                ),
            )
            .at(lock_file, line_of(lock_text, "driver-source = \"installed\""))
            .about("driver")
            .hint(format!(
                "set `[hardware].driver = \"{have}\"` in gpustack.toml and run `gpustack lock` if the fleet runs {have}; otherwise install {locked} on the node"
            )),
        );
    }
    // The authority: does the locked stack still resolve on this node? Re-solve the lock's
    // own request with every component pinned and the node's driver as a host fact.
    let mut spec = lock.request.clone();
    spec.driver = Some(have.clone());
    spec.components = lock
        .components
        .iter()
        .filter(|c| c.name != Component::Driver)
        .filter_map(|c| {
            Some((
                c.name,
                crate::core::version::VersionReq::parse(&format!("=={}", c.version)).ok()?,
            ))
        })
        .collect();
    if !hw.gpus.is_empty() {
        spec.gpus = lock.hardware.gpus.iter().map(|g| g.id.clone()).collect();
    }
    match crate::solve::solve(catalog, &spec) {
        Ok(_) if have.cmp(locked) != std::cmp::Ordering::Less || lock.hardware.driver_installed => {}
        Ok(_) => f.push(
            Finding::new(
                Code::DriverOlderThanLocked,
                format!("the node's driver {have} is older than the locked driver {locked}, which the VM image and GPU Operator install"),
            )
            .at(lock_file, line_of(lock_text, "name = \"driver\""))
            .about("driver")
            .hint("the locked stack runs on this driver, so this is a warning: the node was not built from the generated image; rebuild it from `gpustack gen packer`, or lock for this driver with `[hardware].driver`"),
        ),
        Err(Error::NoSolution(e)) => f.push(
            Finding::new(
                Code::DriverTooOld,
                format!("the node's driver {have} cannot run the locked stack (locked for driver {locked})"),
            )
            .at(lock_file, line_of(lock_text, "name = \"driver\""))
            .detail(e.to_string().lines().map(str::to_string).collect())
            .hint(format!("upgrade the node's driver to {locked}, or set `[hardware].driver = \"{have}\"` and run `gpustack lock`")),
        ),
        Err(_) => {}
    }
}
