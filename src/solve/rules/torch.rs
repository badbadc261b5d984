//! Torch against vLLM, DeepSpeed and the extras: the versions each pins or supports.

use crate::core::Component;

use super::{Ctx, Rule, Violation};

impl<'c> Ctx<'c> {
    /// torch and vLLM: the exact torch pin and the wheel's CUDA major.
    pub(super) fn pair_torch_vllm(&self, ia: usize, ib: usize) -> Result<(), Violation> {
        let t = &self.cat.torch[ia];
        let r = &self.cat.vllm[ib];
        if t.version.cmp_release(&r.torch).is_ne() {
            Err(self.violation(
                Rule::VllmTorchPin,
                || {
                    format!(
                        "vLLM {} pins torch =={}, not {}",
                        r.version, r.torch, t.version
                    )
                },
                || vec![r.origin.clone()],
            ))
        } else if t.cuda.major() != r.cuda.major() {
            Err(self.violation(Rule::VllmTorchPin, || format!("vLLM {}'s wheel is built with CUDA {}, so torch must be a CUDA {} build, not {}", r.version, r.cuda, r.cuda.major(), t.full), || vec![r.origin.clone()]))
        } else {
            Ok(())
        }
    }

    /// torch and an extra: its torch requirement and CUDA majors.
    pub(super) fn pair_torch_extra(
        &self,
        ia: usize,
        cb: Component,
        ib: usize,
    ) -> Result<(), Violation> {
        let t = &self.cat.torch[ia];
        let e = &self.cat.extras[ib];
        if let Some(req) = &e.torch {
            // `t.version` is the release without its `+cuXXX` label.
            if !req.matches(&t.version) {
                return Err(self.violation(
                    Rule::ExtraTorch,
                    || {
                        format!(
                            "{} {} requires torch `{req}`, not {}",
                            cb.display(),
                            e.label(),
                            t.version
                        )
                    },
                    || vec![e.origin.clone()],
                ));
            }
        }
        match &e.cuda_majors {
            Some(majors) if !majors.contains(&t.cuda.major()) => Err(self.violation(
                Rule::ExtraCudaMajor,
                || {
                    format!(
                        "{} {} ships builds for CUDA {} only, but torch {} is a CUDA {} build",
                        cb.display(),
                        e.label(),
                        majors
                            .iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join(", "),
                        t.full,
                        t.cuda.major()
                    )
                },
                || vec![e.origin.clone(), t.origin.clone()],
            )),
            _ => Ok(()),
        }
    }

    /// torch and DeepSpeed: its torch requirement and the oldest release per torch minor.
    pub(super) fn pair_torch_deepspeed(&self, ia: usize, ib: usize) -> Result<(), Violation> {
        let t = &self.cat.torch[ia];
        let r = &self.cat.deepspeed[ib];
        if let Some(m) = self
            .cat
            .deepspeed_torch_minimum
            .iter()
            .find(|m| m.torch == (t.version.major(), t.version.minor()))
        {
            if r.version < m.deepspeed {
                return Err(self.violation(
                    Rule::DeepspeedTorchMinimum,
                    || {
                        format!(
                            "DeepSpeed {} does not work with torch {}.{} (torch {}): the oldest DeepSpeed that does is {}",
                            r.version, m.torch.0, m.torch.1, t.version, m.deepspeed
                        )
                    },
                    || vec![m.origin.clone()],
                ));
            }
        }
        match &r.torch {
            Some(req) if !req.matches(&t.version) => Err(self.violation(
                Rule::DeepspeedTorch,
                || {
                    format!(
                        "DeepSpeed {} requires torch `{req}`, not {}",
                        r.version, t.version
                    )
                },
                || vec![r.origin.clone()],
            )),
            _ => Ok(()),
        }
    }
}
