//! Rules on one candidate alone: a CUDA release's redistrib status, GPU support and images,
//! a torch wheel's or source build's toolchain, vLLM, cuDNN/NCCL and extras on their own.

use crate::catalog::{CudaRelease, NoImageStatus};
use crate::core::arch::{best_way, Target};
use crate::core::Component;

use super::{cmake_forms, Ctx, Rule, Violation};

impl<'c> Ctx<'c> {
    /// A CUDA release: never a redistrib-only one; nvcc accepts every GPU; the OS has
    /// images for it.
    pub(super) fn unary_cuda(&self, i: usize) -> Result<(), Violation> {
        let r = &self.cat.cuda[i];
        if r.redist_only {
            return Err(self.violation(
                Rule::CudaRedistOnly,
                || {
                    format!(
                        "CUDA {} is known only from NVIDIA's redistrib manifest: the release notes give it no driver minimum and no install package or image is recorded, so it is never locked",
                        r.version
                    )
                },
                || vec![r.origin.clone()],
            ));
        }
        let Some(ts) = self.cat.targets_for(&r.version) else {
            return Err(self.violation(
                Rule::NvccTargets,
                || {
                    format!(
                        "the catalog does not know which GPU targets CUDA {} accepts",
                        r.version
                    )
                },
                || vec![r.origin.clone()],
            ));
        };
        let missing: Vec<&Target> = self
            .targets
            .iter()
            .filter(|t| !ts.sm.iter().any(|s| s.cc == t.cc && s.suffix == t.suffix))
            .collect();
        if !missing.is_empty() {
            let names = missing
                .iter()
                .map(|t| format!("`{t}`"))
                .collect::<Vec<_>>()
                .join(", ");
            let first = ts.sm.first().map(|t| t.to_string()).unwrap_or_default();
            let last = ts.sm.last().map(|t| t.to_string()).unwrap_or_default();
            return Err(self.violation(
                Rule::NvccTargets,
                || {
                    format!(
                        "nvcc of CUDA {} does not accept {names} (it accepts {first} … {last})",
                        r.version
                    )
                },
                || vec![ts.origin.clone()],
            ));
        }
        if let Some(os_id) = &self.spec.os {
            if let Some(os) = self.cat.os.iter().find(|o| &o.id == os_id) {
                if !os.cuda.matches(&r.version) {
                    return Err(self.violation(Rule::OsImages, || format!("NVIDIA publishes CUDA {} for {os_id} only in `{}`; {} is not among them", r.version, os.cuda, r.version), || vec![os.origin.clone()]));
                }
            }
        }
        self.cuda_has_image(r)
    }

    /// Every target builds on an `nvidia/cuda` image of the locked CUDA release (the
    /// requested OS's, else the newest Ubuntu's: `select::base_image`), so a release whose
    /// tags the catalog does not record for that OS is never locked (it once only ranked
    /// last, and `lock` then failed in the generators).
    pub(super) fn cuda_has_image(&self, r: &CudaRelease) -> Result<(), Violation> {
        let found = self.imaged.contains(&r.version);
        if found {
            return Ok(());
        }
        let os = self.spec.os.as_deref().unwrap_or("Ubuntu");
        // The catalog says why the release has no tags on any OS: cite that.
        if let Some(n) = self.cat.no_image(&r.version) {
            return Err(self.violation(
                Rule::OsImages,
                || match n.status {
                    NoImageStatus::Unpublished => format!("NVIDIA published no `nvidia/cuda` images of CUDA {}: its tag lists (supported and unsupported) at the cited commit, which list later releases, have no tag of it (catalog/images.toml `[[no_image]]`)", r.version),
                    _ => format!("whether NVIDIA publishes `nvidia/cuda` images of CUDA {} is not known ({}), so the catalog records no runtime and devel tags of it (catalog/images.toml `[[no_image]]`)", r.version, n.note.as_deref().unwrap_or("no public copy of NVIDIA's tag lists covers it")),
                },
                || vec![n.origin.clone()],
            ));
        }
        // The OS entry is where the catalog says which images NVIDIA publishes for it.
        let origin = self
            .cat
            .os
            .iter()
            .find(|o| Some(&o.id) == self.spec.os.as_ref())
            .map_or(&r.origin, |o| &o.origin);
        // An entry without the runtime and devel tags (public files observed only other
        // flavours): say so, and cite the entry.
        let partial = self.cat.images.iter().find(|im| {
            im.cuda == r.version
                && match self.spec.os.as_deref() {
                    Some(id) => im.os == id,
                    None => im.os.starts_with("ubuntu"),
                }
        });
        if let Some(im) = partial {
            return Err(self.violation(
                Rule::OsImages,
                || format!("the catalog records `nvidia/cuda` tags for CUDA {} on {}, but not both the runtime and devel tags every target builds on (catalog/images.toml)", r.version, im.os),
                || vec![im.origin.clone()],
            ));
        }
        Err(self.violation(
            Rule::OsImages,
            || format!("the catalog records no `nvidia/cuda` image tags for CUDA {} on {os} (catalog/images.toml), and every target builds on one", r.version),
            || vec![origin.clone()],
        ))
    }

    /// torch built from source: a source entry, and the requested arch list covers every GPU.
    pub(super) fn unary_torch_source(&self, i: usize) -> Result<(), Violation> {
        let b = &self.cat.torch[i];
        let Some(src) = self.cat.torch_source(&b.version) else {
            return Err(self.violation(
                Rule::TorchSource,
                || format!("the catalog has no source entry (`[[source]]`: tag, build requirements) for torch {}, so it cannot be built from source", b.version),
                || vec![b.release_origin.clone()],
            ));
        };
        let archs = self.torch_archs(i);
        for cc in &self.ccs {
            if best_way(archs, *cc).is_none() {
                return Err(self.violation(Rule::TorchSourceArchs, || format!("the requested arch list `{}` has no kernels for compute capability {cc}{}, and a source build has no other", crate::core::arch::torch_list(archs).join(";"), self.gpu_names_for(*cc)), Vec::new));
            }
        }
        if let Some(forms) = &src.cmake_archs {
            if let Some(t) = archs.iter().find(|t| !forms.accepts(t)) {
                return Err(self.violation(Rule::TorchSourceArchNames, || format!("PyTorch {}'s CMake does not accept `{}` in TORCH_CUDA_ARCH_LIST: its select_compute_arch.cmake takes {}", b.version, t.torch_form(), cmake_forms(forms)), || vec![src.origin.clone()]));
            }
        }
        self.torch_source_compiler(i)
    }

    /// The OS's GCC builds torch from source: at least PyTorch's minimum, at most the
    /// newest GCC the candidate's nvcc accepts. Unchecked where the catalog lacks a fact.
    pub(super) fn torch_source_compiler(&self, i: usize) -> Result<(), Violation> {
        let b = &self.cat.torch[i];
        let (Some(src), Some(os)) = (self.cat.torch_source(&b.version), self.spec.os.as_deref())
        else {
            return Ok(());
        };
        let Some(gcc) = src.compiler.os_gcc(os) else {
            return Ok(());
        };
        if let Some(min) = src.compiler.gcc_min.as_ref().filter(|m| gcc < *m) {
            return Err(self.violation(Rule::TorchSourceCompiler, || format!("{os} compiles with GCC {gcc}, older than the GCC {min} PyTorch requires to build {} from source", b.version), || vec![src.origin.clone()]));
        }
        if let Some(max) = src
            .compiler
            .nvcc_gcc_max(&b.cuda)
            .filter(|m| gcc.major() > u64::from(*m))
        {
            return Err(self.violation(Rule::TorchSourceCompiler, || format!("{os} compiles with GCC {gcc}, newer than GCC {max}, the newest nvcc of CUDA {} accepts as its host compiler", b.cuda), || vec![src.origin.clone()]));
        }
        Ok(())
    }

    /// A torch wheel: it installs on the platform and its arch list covers every GPU.
    pub(super) fn unary_torch_wheel(&self, i: usize) -> Result<(), Violation> {
        let b = &self.cat.torch[i];
        self.wheel_installs(
            &b.platforms,
            &b.install,
            || format!("torch {}", b.full),
            || b.release_origin.clone(),
        )?;
        if b.arch_list.is_empty() {
            return Err(self.violation(
                Rule::TorchArchList,
                || {
                    format!(
                        "the catalog has no verified arch list for torch {}, so it is never picked",
                        b.full
                    )
                },
                || vec![b.origin.clone()],
            ));
        }
        for cc in &self.ccs {
            if best_way(&b.arch_list, *cc).is_none() {
                // The list is formatted only for a message (not in the quiet search).
                return Err(self.violation(Rule::TorchArchList, || format!("torch {} is built for `{}`, which has no kernels for compute capability {cc}{}", b.full, crate::core::arch::torch_list(&b.arch_list).join(";"), self.gpu_names_for(*cc)), || vec![b.origin.clone()]));
            }
        }
        Ok(())
    }

    /// A vLLM wheel: it installs on the platform and runs on every GPU.
    pub(super) fn unary_vllm(&self, i: usize) -> Result<(), Violation> {
        let r = &self.cat.vllm[i];
        self.wheel_installs(
            &r.platforms,
            &r.install,
            || format!("vLLM {}", r.version),
            || r.origin.clone(),
        )?;
        if let Some(min) = r.min_cc {
            if let Some(cc) = self.ccs.iter().find(|cc| **cc < min) {
                return Err(self.violation(
                    Rule::VllmMinCc,
                    || {
                        format!(
                            "vLLM {} needs compute capability ≥ {min}, but {cc}{} is older",
                            r.version,
                            self.gpu_names_for(*cc)
                        )
                    },
                    || vec![r.origin.clone()],
                ));
            }
        }
        Ok(())
    }

    /// cuDNN or NCCL: kernels for every GPU.
    pub(super) fn unary_lib(&self, c: Component, i: usize) -> Result<(), Violation> {
        let r = self.lib(c, i);
        self.wheel_installs(
            &r.platforms,
            &r.install,
            || format!("{} {}", c.display(), r.version),
            || r.origin.clone(),
        )?;
        let floor = if c == Component::Cudnn {
            self.cudnn_floor
        } else {
            self.nccl_floor
        };
        if let Some((row, cc)) = floor {
            if r.version < row.since {
                return Err(self.violation(
                    Rule::LibGpuSupport,
                    || {
                        format!(
                            "{} {} has no kernels for compute capability {cc}{}: support for compute capability ≥ {} starts with {} {}",
                            c.display(),
                            r.version,
                            self.gpu_names_for(cc),
                            row.cc,
                            c.display(),
                            row.since
                        )
                    },
                    || vec![row.origin.clone()],
                ));
            }
        }
        if let Some(min) = r.min_cc {
            if let Some(cc) = self.ccs.iter().find(|cc| **cc < min) {
                return Err(self.violation(
                    Rule::LibMinCc,
                    || {
                        format!(
                            "{} {} supports compute capability ≥ {min} only, not {cc}{}",
                            c.display(),
                            r.version,
                            self.gpu_names_for(*cc)
                        )
                    },
                    || vec![r.origin.clone()],
                ));
            }
        }
        Ok(())
    }

    /// An extra: it installs on the platform and runs on every GPU.
    pub(super) fn unary_extra(&self, c: Component, i: usize) -> Result<(), Violation> {
        let e = &self.cat.extras[i];
        self.wheel_installs(
            &e.platforms,
            &e.install,
            || format!("{} {}", c.display(), e.label()),
            || e.origin.clone(),
        )?;
        if let Some(min) = e.min_cc {
            if let Some(cc) = self.ccs.iter().find(|cc| **cc < min) {
                return Err(self.violation(
                    Rule::ExtraMinCc,
                    || {
                        format!(
                            "{} {} needs compute capability ≥ {min}, but {cc}{} is older",
                            c.display(),
                            e.label(),
                            self.gpu_names_for(*cc)
                        )
                    },
                    || vec![e.origin.clone()],
                ));
            }
        }
        Ok(())
    }
}
