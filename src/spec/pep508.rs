//! A validator for PEP 508 dependency specifiers, name form (`name [extras] versionspec
//! ; marker`), as the grammar in PEP 508 ("Complete Grammar") writes it. The URL form
//! (`name @ url`) is refused before this runs: a lock resolves from indexes only.
//!
//! It only says whether a `[python]` requirement parses, and where it stops parsing;
//! uv reads the requirement itself. Without it, `transformers >= = 4` or
//! `datasets; python_version >>> '3'` reached uv at lock time, or the images at build time.

/// The environment markers PEP 508 defines (and `extra`).
const MARKER_VARS: &[&str] = &[
    "implementation_name",
    "implementation_version",
    "os_name",
    "platform_machine",
    "platform_python_implementation",
    "platform_release",
    "platform_system",
    "platform_version",
    "python_full_version",
    "python_version",
    "sys_platform",
    "extra",
];

/// Version comparison operators, longest first so `===` is not read as `==`.
const VERSION_CMP: &[&str] = &["===", "<=", "!=", "==", ">=", "~=", "<", ">"];

struct P<'a> {
    s: &'a str,
    i: usize,
}

impl P<'_> {
    fn rest(&self) -> &str {
        &self.s[self.i..]
    }
    fn ws(&mut self) {
        while self.rest().starts_with([' ', '\t']) {
            self.i += 1;
        }
    }
    fn eat(&mut self, t: &str) -> bool {
        if self.rest().starts_with(t) {
            self.i += t.len();
            true
        } else {
            false
        }
    }
    fn err<T>(&self, what: &str) -> Result<T, String> {
        Err(format!("expected {what} at column {}", self.i + 1))
    }
    /// `identifier = letterOrDigit ( ( '-' | '_' | '.' )* letterOrDigit )*`.
    fn identifier(&mut self, what: &str) -> Result<(), String> {
        let b = self.rest().as_bytes();
        if !b.first().is_some_and(u8::is_ascii_alphanumeric) {
            return self.err(what);
        }
        let mut end = 1;
        let mut last_ok = 1;
        while end < b.len() && (b[end].is_ascii_alphanumeric() || b"-_.".contains(&b[end])) {
            end += 1;
            if b[end - 1].is_ascii_alphanumeric() {
                last_ok = end;
            }
        }
        self.i += last_ok;
        Ok(())
    }
    fn version_cmp(&mut self) -> bool {
        self.ws();
        VERSION_CMP.iter().any(|op| self.eat(op))
    }
    /// `version = wsp* ( letterOrDigit | '-' | '_' | '.' | '*' | '+' | '!' )+`.
    fn version(&mut self) -> Result<(), String> {
        self.ws();
        let n = self
            .rest()
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || b"-_.*+!".contains(b))
            .count();
        if n == 0 {
            return self.err("a version");
        }
        self.i += n;
        Ok(())
    }
    /// `version_many = version_one ( wsp* ',' version_one )*`.
    fn version_many(&mut self) -> Result<(), String> {
        loop {
            if !self.version_cmp() {
                return self.err("a version operator (`==`, `>=`, `~=`, …)");
            }
            self.version()?;
            self.ws();
            if !self.eat(",") {
                return Ok(());
            }
        }
    }
    /// `marker_var = wsp* ( env_var | python_str )`.
    fn marker_var(&mut self) -> Result<(), String> {
        self.ws();
        if self.eat("'") {
            return match self.rest().find('\'') {
                Some(n) => {
                    self.i += n + 1;
                    Ok(())
                }
                None => self.err("a closing `'`"),
            };
        }
        let r = self.rest();
        match MARKER_VARS
            .iter()
            .filter(|v| {
                r.starts_with(**v)
                    && !r[v.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
            })
            .max_by_key(|v| v.len())
        {
            Some(v) => {
                self.i += v.len();
                Ok(())
            }
            None => self.err(
                "an environment marker (`python_version`, `sys_platform`, …) or a quoted string",
            ),
        }
    }
    fn keyword(&mut self, k: &str) -> bool {
        let save = self.i;
        self.ws();
        if self.eat(k)
            && !self
                .rest()
                .starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
        {
            true
        } else {
            self.i = save;
            false
        }
    }
    /// `marker_expr = marker_var marker_op marker_var | wsp* '(' marker wsp* ')'`.
    fn marker_expr(&mut self) -> Result<(), String> {
        self.ws();
        if self.eat("(") {
            self.marker()?;
            self.ws();
            return if self.eat(")") {
                Ok(())
            } else {
                self.err("`)`")
            };
        }
        self.marker_var()?;
        let op =
            self.version_cmp() || self.keyword("in") || (self.keyword("not") && self.keyword("in"));
        if !op {
            return self.err("a marker operator (`==`, `<`, `in`, `not in`, …)");
        }
        self.marker_var()
    }
    /// `marker = marker_and ( 'or' marker_and )*`, `marker_and = marker_expr ( 'and'
    /// marker_expr )*`.
    fn marker(&mut self) -> Result<(), String> {
        loop {
            self.marker_expr()?;
            while self.keyword("and") {
                self.marker_expr()?;
            }
            if !self.keyword("or") {
                return Ok(());
            }
        }
    }
}

/// Whether `req` is a PEP 508 name-form requirement; `Err` says where it stops parsing.
///
/// ```
/// use gpustack::spec::pep508::check;
/// assert!(check("transformers>=4.50").is_ok());
/// assert!(check("accelerate[deepspeed] >=1.0, <2; python_version >= '3.10' and sys_platform == 'linux'").is_ok());
/// assert!(check("flash-attn (==2.7.4.post1)").is_ok());
/// assert!(check("transformers >= = 4").is_err());
/// assert!(check("datasets; python_version >>> '3'").is_err());
/// assert!(check("peft[").is_err());
/// ```
pub fn check(req: &str) -> Result<(), String> {
    let mut p = P { s: req, i: 0 };
    p.ws();
    p.identifier("a package name")?;
    p.ws();
    if p.eat("[") {
        p.ws();
        if !p.eat("]") {
            loop {
                p.ws();
                p.identifier("an extra's name")?;
                p.ws();
                if p.eat("]") {
                    break;
                }
                if !p.eat(",") {
                    return p.err("`,` or `]`");
                }
            }
        }
    }
    p.ws();
    if p.eat("(") {
        p.version_many()?;
        p.ws();
        if !p.eat(")") {
            return p.err("`)`");
        }
    } else if p.rest().starts_with(['<', '>', '=', '!', '~']) {
        p.version_many()?;
    }
    p.ws();
    if p.eat(";") {
        p.marker()?;
    }
    p.ws();
    if p.rest().is_empty() {
        Ok(())
    } else {
        p.err("the end of the requirement")
    }
}
