//! Python against torch, vLLM, DeepSpeed and the extras: a wheel or support for the
//! interpreter.

use crate::core::Component;

use super::{Ctx, Rule, Violation};

impl<'c> Ctx<'c> {
    /// Python and torch: the wheel's Python range.
    pub(super) fn pair_python_torch(&self, ia: usize, ib: usize) -> Result<(), Violation> {
        let py = &self.cat.python[ia].version;
        let t = &self.cat.torch[ib];
        if t.python.matches(py) {
            Ok(())
        } else {
            Err(self.violation(
                Rule::WheelPython,
                || {
                    format!(
                        "torch {} publishes wheels for Python `{}` only, not {py}",
                        t.full, t.python
                    )
                },
                || vec![t.python_origin.clone()],
            ))
        }
    }

    /// Python and vLLM: its Python range.
    pub(super) fn pair_python_vllm(&self, ia: usize, ib: usize) -> Result<(), Violation> {
        let py = &self.cat.python[ia].version;
        let r = &self.cat.vllm[ib];
        if r.python.matches(py) {
            Ok(())
        } else {
            Err(self.violation(
                Rule::WheelPython,
                || {
                    format!(
                        "vLLM {} supports Python `{}` only, not {py}",
                        r.version, r.python
                    )
                },
                || vec![r.origin.clone()],
            ))
        }
    }

    /// Python and DeepSpeed: its Python range.
    pub(super) fn pair_python_deepspeed(&self, ia: usize, ib: usize) -> Result<(), Violation> {
        let py = &self.cat.python[ia].version;
        let r = &self.cat.deepspeed[ib];
        match &r.python {
            Some(req) if !req.matches(py) => Err(self.violation(
                Rule::WheelPython,
                || {
                    format!(
                        "DeepSpeed {} supports Python `{req}` only, not {py}",
                        r.version
                    )
                },
                || vec![r.origin.clone()],
            )),
            _ => Ok(()),
        }
    }

    /// Python and an extra: its Python range.
    pub(super) fn pair_python_extra(
        &self,
        ia: usize,
        cb: Component,
        ib: usize,
    ) -> Result<(), Violation> {
        let py = &self.cat.python[ia].version;
        let e = &self.cat.extras[ib];
        match &e.python {
            Some(req) if !req.matches(py) => Err(self.violation(
                Rule::ExtraPython,
                || {
                    format!(
                        "{} {} requires Python `{req}`, not {py}",
                        cb.display(),
                        e.label()
                    )
                },
                || vec![e.origin.clone()],
            )),
            _ => Ok(()),
        }
    }
}
