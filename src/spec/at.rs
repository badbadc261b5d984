//! Where a spec problem is reported: the file, its text and the list every table's checks add
//! to, so that one parse reports every problem at once.

use toml::Spanned as S;

use crate::error::{Diagnostic, Stage};

/// Reports problems at a span of the spec text.
pub(crate) struct At<'a> {
    pub(crate) file: &'a str,
    pub(crate) text: &'a str,
    pub(crate) diags: &'a mut Vec<Diagnostic>,
}

impl At<'_> {
    pub(crate) fn fail(&mut self, span: std::ops::Range<usize>, msg: String, hint: &str) {
        let mut d = Diagnostic::new(Stage::Spec, msg).at_offset(self.file, self.text, span.start);
        if !hint.is_empty() {
            d = d.hint(hint);
        }
        self.diags.push(d);
    }

    /// A required key: reported at its table when missing (every missing key of every
    /// table, each with the line to add), and a placeholder returned so the other checks
    /// still run.
    pub(crate) fn need<T>(
        &mut self,
        v: Option<S<T>>,
        table: (&str, &std::ops::Range<usize>),
        key: &str,
        example: &str,
        placeholder: T,
    ) -> S<T> {
        match v {
            Some(v) => v,
            None => {
                let (name, span) = table;
                self.fail(
                    span.clone(),
                    format!("`[{name}]` needs `{key}`"),
                    &format!("add `{key} = {example}` to [{name}] (the spec reference in the book lists every key)"),
                );
                S::new(span.clone(), placeholder)
            }
        }
    }

    pub(crate) fn count(&mut self, v: &S<i64>, what: &str, max: i64) -> u32 {
        let n = *v.get_ref();
        if !(1..=max).contains(&n) {
            self.fail(
                v.span(),
                format!("`{what}` must be between 1 and {max}, not {n}"),
                "",
            );
            return 1;
        }
        u32::try_from(n).unwrap_or(1)
    }
}
