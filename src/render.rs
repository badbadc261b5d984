//! Rendering: the embedded minijinja templates of `generators/`, and the escaping filters
//! every interpolation goes through. The only module that knows minijinja exists.
//!
//! Templates lay text out; every value they print comes from a plan (`crate::plan`), and
//! every `{{ … }}` ends in one of the filters below, chosen for the file's language, so
//! that no value can close a string, start a command or add a key:
//!
//! | filter | for | what it does |
//! |---|---|---|
//! | `sh` | shell words | single-quotes (`'` → `'\''`) unless the word is plainly safe; refuses control characters |
//! | `json` | JSON, YAML, Dockerfile exec form | a JSON string (YAML accepts it as a double-quoted scalar) |
//! | `hcl` | HCL strings | a quoted HCL string, `${` and `%{` escaped |
//! | `word` | bare words (tags, versions, names) | passes `[A-Za-z0-9._:/@+=,%-]` only, fails the render otherwise |
//! | `num` | numbers | integers only |
//!
//! `tests/templates.rs` checks that no interpolation goes without one of them.

use std::cell::Cell;
use std::sync::OnceLock;

use minijinja::{Environment, Error as JinjaError, ErrorKind, UndefinedBehavior, Value};
use serde::Serialize;

use crate::error::{Diagnostic, Error, Stage};

include!(concat!(env!("OUT_DIR"), "/templates.rs"));

/// The filters an interpolation may end in.
pub const ESCAPING_FILTERS: &[&str] = &["sh", "json", "hcl", "word", "num", "heredoc", "cmd"];

/// The terminator of the quoted heredocs the `heredoc` filter's text goes into.
pub const HEREDOC_EOF: &str = "GPUSTACK_PYLOCK_EOF";

/// A generated file, relative to the target's output directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderedFile {
    /// `Dockerfile`, `scripts/base.sh`: relative, `/`-separated, no `..`.
    pub path: String,
    /// The text.
    pub contents: String,
    /// Whether it should be executable (scripts).
    pub executable: bool,
}

impl RenderedFile {
    /// A file; executable when it is a shell script or batch script.
    pub fn new(path: impl Into<String>, contents: String) -> RenderedFile {
        let path = path.into();
        let executable = path.ends_with(".sh") || path.ends_with(".sbatch");
        RenderedFile {
            path,
            contents,
            executable,
        }
    }
}

/// Whether `s` can be printed bare in shell, YAML, HCL and Dockerfiles alike.
pub fn is_plain_word(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:/@+=,%-".contains(&b))
        && !s.starts_with('-')
}

/// Single-quotes a shell word unless it is plainly safe.
pub fn sh_quote(s: &str) -> String {
    if is_plain_word(s) && !s.contains('=') && !s.contains('%') {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// A JSON string literal (valid as a YAML double-quoted scalar and in Dockerfile exec form).
pub fn json_quote(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for ch in s.chars() {
        match ch {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f || c == '\u{2028}' || c == '\u{2029}' => {
                o.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// A quoted HCL string: JSON escapes plus `${` → `$${` and `%{` → `%%{`.
pub fn hcl_quote(s: &str) -> String {
    json_quote(s).replace("${", "$${").replace("%{", "%%{")
}

fn text(v: &Value) -> Result<String, JinjaError> {
    if let Some(s) = v.as_str() {
        return Ok(s.to_string());
    }
    if v.is_number() {
        return Ok(v.to_string());
    }
    if v.is_true() || v.kind() == minijinja::value::ValueKind::Bool {
        return Ok(v.to_string());
    }
    Err(JinjaError::new(
        ErrorKind::InvalidOperation,
        format!("cannot quote a {} ({v})", v.kind()),
    ))
}

fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_keep_trailing_newline(true);
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    // Templates compile on first use: `gen docker` does not pay for the Packer templates.
    env.set_loader(|name| Ok(template_source(name).map(str::to_string)));
    env.add_filter("sh", |v: Value| {
        let s = text(&v)?;
        // Single quotes hold a newline for the shell, but not for the Dockerfile line or
        // heredoc the word may sit in: a value with control characters is refused (load
        // validation keeps them out; this is the second line of defence).
        if s.chars().any(char::is_control) {
            return Err(JinjaError::new(
                ErrorKind::InvalidOperation,
                format!(
                    "`{}` holds control characters and cannot be printed as a shell word",
                    s.escape_debug()
                ),
            ));
        }
        Ok(sh_quote(&s))
    });
    env.add_filter("json", |v: Value| text(&v).map(|s| json_quote(&s)));
    env.add_filter("hcl", |v: Value| text(&v).map(|s| hcl_quote(&s)));
    env.add_filter("word", |v: Value| {
        let s = text(&v)?;
        if is_plain_word(&s) {
            Ok(s)
        } else {
            Err(JinjaError::new(
                ErrorKind::InvalidOperation,
                format!("`{s}` is not a plain word and cannot be printed bare"),
            ))
        }
    });
    // The body of a quoted heredoc (`<<'GPUSTACK_PYLOCK_EOF'`): a quoted heredoc expands
    // nothing, so the text is safe as it is unless a line of it ends the heredoc, or it
    // holds control characters other than newlines, or does not end in one.
    env.add_filter("heredoc", |v: Value| {
        let s = text(&v)?;
        if s.lines().any(|l| l == HEREDOC_EOF)
            || s.chars().any(|c| c.is_control() && c != '\n')
            || !s.ends_with('\n')
        {
            return Err(JinjaError::new(
                ErrorKind::InvalidOperation,
                "a heredoc body must end in a newline, hold no control characters and no terminator line".to_string(),
            ));
        }
        Ok(s)
    });
    // A command's literal program and options (`apt-get install -y --no-install-recommends`,
    // from `plan::install`, never data): words of letters, digits and `._/:=*+-` only; its
    // arguments are printed with `sh`.
    env.add_filter("cmd", |v: Value| {
        let s = text(&v)?;
        let ok = !s.is_empty()
            && s.split(' ').all(|w| {
                !w.is_empty()
                    && w.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"._/:=*+-".contains(&b))
            });
        if ok {
            Ok(s)
        } else {
            Err(JinjaError::new(
                ErrorKind::InvalidOperation,
                format!("`{}` is not a literal command", s.escape_debug()),
            ))
        }
    });
    env.add_filter("num", |v: Value| {
        if v.is_integer() {
            Ok(v.to_string())
        } else {
            Err(JinjaError::new(
                ErrorKind::InvalidOperation,
                format!("`{v}` is not an integer"),
            ))
        }
    });
    env
}

fn env() -> &'static Environment<'static> {
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    ENV.get_or_init(environment)
}

thread_local! {
    /// Set while [`plans_only`] runs: templates are neither compiled nor rendered.
    static PLANS_ONLY: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` (a [`crate::plan::generate_many`]) with the templates left out: every typed
/// plan is built and every check outside the templates runs (the plans' refusals, the
/// scripts built in Rust, the output paths), but each templated file comes back empty.
/// What `gpustack lock` checks a lock with, so that a lock `gen` would refuse is refused
/// without rendering every file twice (book/src/performance.md, "Cold lock").
pub(crate) fn plans_only<T>(f: impl FnOnce() -> T) -> T {
    /// Turns the flag back off, also when `f` panics.
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            PLANS_ONLY.with(|p| p.set(false));
        }
    }
    PLANS_ONLY.with(|p| p.set(true));
    let _reset = Reset;
    f()
}

fn templates_off() -> bool {
    PLANS_ONLY.with(Cell::get)
}

/// Renders template `name` (relative to `generators/`) with `ctx`.
pub fn render(name: &str, ctx: &impl Serialize) -> Result<String, Error> {
    render_with(name, &Context::new(ctx))
}

/// A template context converted once, for a plan that renders several files: each file
/// then shares it instead of converting the plan again.
pub struct Context(Value);

impl Context {
    /// Converts `ctx` for the templates.
    pub fn new(ctx: &impl Serialize) -> Context {
        if templates_off() {
            return Context(Value::UNDEFINED);
        }
        Context(Value::from_serialize(ctx))
    }

    /// This context with `name` (also when it is set already) bound to `value`: a file
    /// rendered once per item of a plan shares the plan's converted value instead of
    /// converting the whole plan again for each item.
    pub fn with(&self, name: &'static str, value: &impl Serialize) -> Context {
        if templates_off() {
            return Context(Value::UNDEFINED);
        }
        let item = Value::from_iter([(name, Value::from_serialize(value))]);
        // The last map that has a key answers for it (minijinja's `MergeDict`).
        Context(minijinja::value::merge_maps([self.0.clone(), item]))
    }
}

/// Renders template `name` with a context converted beforehand.
pub fn render_with(name: &str, ctx: &Context) -> Result<String, Error> {
    if templates_off() {
        return Ok(String::new());
    }
    let t = env().get_template(name).map_err(|e| internal(name, &e))?;
    t.render(ctx.0.clone()).map_err(|e| internal(name, &e))
}

fn internal(name: &str, e: &JinjaError) -> Error {
    let mut msg = format!("cannot render `generators/{name}`: {e}");
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        msg.push_str(&format!(": {s}"));
        src = s.source();
    }
    Diagnostic::new(Stage::Generate, msg)
        .hint("a value in the lock cannot be written safely into this file; check the lock's request, or report a bug")
        .into()
}

/// The names of every embedded template.
pub fn template_names() -> impl Iterator<Item = &'static str> {
    TEMPLATES.iter().map(|(n, _)| *n)
}

/// The source of an embedded template.
pub fn template_source(name: &str) -> Option<&'static str> {
    TEMPLATES.iter().find(|(n, _)| *n == name).map(|(_, s)| *s)
}

#[cfg(test)]
mod tests {
    use super::Context;

    /// `with` binds its name over the converted context, also over a name the context
    /// already has; the rest of the context stays.
    #[test]
    fn with_binds_over_the_context() {
        let base = Context::new(&serde_json::json!({ "plan": { "x": 1 }, "ns": "first" }));
        for ns in ["first", "second"] {
            let ctx = base.with("ns", &ns);
            assert_eq!(ctx.0.get_attr("ns").unwrap().as_str(), Some(ns));
            assert_eq!(
                ctx.0
                    .get_attr("plan")
                    .unwrap()
                    .get_attr("x")
                    .unwrap()
                    .as_i64(),
                Some(1)
            );
        }
        let item = base.with("stage", &"build");
        assert_eq!(item.0.get_attr("stage").unwrap().as_str(), Some("build"));
        assert_eq!(item.0.get_attr("ns").unwrap().as_str(), Some("first"));
    }
}
