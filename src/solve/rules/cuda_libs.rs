//! The CUDA toolkit and cuDNN/NCCL against each other and against torch (wheels and
//! source builds).

use crate::catalog::LibRelease;
use crate::core::arch::Target;
use crate::core::Component;

use super::{fact_of, Ctx, Rule, Violation};

impl<'c> Ctx<'c> {
    /// The toolkit and cuDNN or NCCL: a build for its CUDA major.
    pub(super) fn pair_cuda_lib(
        &self,
        ia: usize,
        cb: Component,
        ib: usize,
    ) -> Result<(), Violation> {
        let cu = &self.cat.cuda[ia];
        self.lib_has_major(cb, self.lib(cb, ib), cu.version.major())
    }

    /// cuDNN or NCCL `lib` ships a build for CUDA `major`.
    fn lib_has_major(&self, c: Component, lib: &LibRelease, major: u64) -> Result<(), Violation> {
        if lib.cuda_majors.contains(&major) {
            return Ok(());
        }
        Err(self.violation(
            Rule::LibCudaMajor,
            || {
                format!(
                    "{} {} ships builds for CUDA {} only, not CUDA {major}",
                    c.display(),
                    lib.version,
                    lib.cuda_majors
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", "),
                )
            },
            || vec![lib.origin.clone()],
        ))
    }

    /// The toolkit and a torch source build: the same CUDA minor, and nvcc accepts every arch.
    pub(super) fn pair_cuda_torch_source(&self, ia: usize, ib: usize) -> Result<(), Violation> {
        let cu = &self.cat.cuda[ia];
        let t = &self.cat.torch[ib];
        if (cu.version.major(), cu.version.minor()) != (t.cuda.major(), t.cuda.minor()) {
            return Err(self.violation(
                Rule::TorchSourceToolkit,
                || {
                    format!(
                        "torch {} is built from source with the CUDA {} toolkit, not CUDA {}",
                        t.full, t.cuda, cu.version
                    )
                },
                || vec![t.origin.clone()],
            ));
        }
        let archs = self.source_archs.as_deref().unwrap_or_default();
        let Some(ts) = self.cat.targets_for(&cu.version) else {
            return Err(self.violation(
                Rule::TorchSourceToolkit,
                || {
                    format!(
                        "the catalog does not know which GPU targets nvcc of CUDA {} accepts",
                        cu.version
                    )
                },
                || vec![cu.origin.clone()],
            ));
        };
        let missing: Vec<&Target> = archs
            .iter()
            .filter(|a| !ts.sm.iter().any(|s| s.cc == a.cc && s.suffix == a.suffix))
            .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(self.violation(Rule::TorchSourceToolkit, || format!("nvcc of CUDA {} does not accept {}, which the torch source build compiles for", cu.version, missing.iter().map(|t| format!("`{}`", t.torch_form())).collect::<Vec<_>>().join(", ")), || vec![ts.origin.clone()]))
        }
    }

    /// The toolkit and a torch wheel: the same CUDA major, and the wheel's runtime not newer.
    pub(super) fn pair_cuda_torch(&self, ia: usize, ib: usize) -> Result<(), Violation> {
        let cu = &self.cat.cuda[ia];
        let t = &self.cat.torch[ib];
        let same_major = cu.version.major() == t.cuda.major();
        let not_newer =
            (t.cuda.major(), t.cuda.minor()) <= (cu.version.major(), cu.version.minor());
        if same_major && not_newer {
            Ok(())
        } else {
            Err(self.violation(
                Rule::TorchToolkit,
                || {
                    if same_major {
                        format!(
                            "torch {} bundles the CUDA {} runtime, newer than the CUDA {} toolkit",
                            t.full, t.cuda, cu.version
                        )
                    } else {
                        format!(
                            "torch {} is a CUDA {} build, but the toolkit is CUDA {}",
                            t.full,
                            t.cuda.major(),
                            cu.version
                        )
                    }
                },
                || vec![t.origin.clone()],
            ))
        }
    }

    /// cuDNN or NCCL and a torch source build: a build for its CUDA major, and the cuDNN it needs.
    pub(super) fn pair_lib_torch_source(
        &self,
        ca: Component,
        ia: usize,
        ib: usize,
    ) -> Result<(), Violation> {
        use Component as C;
        let lib = self.lib(ca, ia);
        let t = &self.cat.torch[ib];
        self.lib_has_major(ca, lib, t.cuda.major())?;
        match self.cat.torch_source(&t.version) {
            Some(src) if ca == C::Cudnn && lib.version < src.cudnn_min => Err(self.violation(
                Rule::TorchSourceCudnn,
                || {
                    format!(
                        "building torch {} from source needs cuDNN ≥ {}, not {}",
                        t.version, src.cudnn_min, lib.version
                    )
                },
                || vec![src.origin.clone()],
            )),
            _ => Ok(()),
        }
    }

    /// cuDNN or NCCL and a torch wheel: the wheel's pin, or a build for its CUDA major.
    pub(super) fn pair_lib_torch(
        &self,
        ca: Component,
        ia: usize,
        ib: usize,
    ) -> Result<(), Violation> {
        use Component as C;
        let lib = self.lib(ca, ia);
        let t = &self.cat.torch[ib];
        let pin = if ca == C::Cudnn { &t.cudnn } else { &t.nccl };
        let rule = if ca == C::Cudnn {
            Rule::TorchCudnnPin
        } else {
            Rule::TorchNcclPin
        };
        match pin {
            Some(p) if *p != lib.version => Err(Violation {
                rule,
                message: if self.verbose {
                    format!(
                        "torch {} pins {} {p}, not {}",
                        t.full,
                        ca.display(),
                        lib.version
                    )
                } else {
                    String::new()
                },
                facts: if self.verbose {
                    vec![fact_of(&t.origin)]
                } else {
                    Vec::new()
                },
            }),
            Some(_) => Ok(()),
            None if lib.cuda_majors.contains(&t.cuda.major()) => Ok(()),
            None => Err(self.violation(
                Rule::LibCudaMajor,
                || {
                    format!(
                        "{} {} has no CUDA {} build for torch {}",
                        ca.display(),
                        lib.version,
                        t.cuda.major(),
                        t.full
                    )
                },
                || vec![lib.origin.clone()],
            )),
        }
    }
}
