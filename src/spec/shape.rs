//! The shape of a spec, checked before its values: every unknown key (each with "did you
//! mean") and every value of the wrong type (in plain words: "`nodes` must be a number,
//! like `nodes = 8`"), all of them in one run.
//!
//! The keys and types come from the spec's JSON Schema ([`crate::spec::schema`]), which is
//! generated from the parser's own wire types, so this check and the parser cannot
//! disagree on which keys exist. Each offending key is then removed from the document, so
//! that the values around it are still read and checked, and a required key removed here
//! is not reported missing a second time ([`Removed`]).
//!
//! `[components]` is left to the parser: its messages (unknown component, a requirement
//! that is not a string) already name the component and come all at once.

use serde_json::Value;
use toml::de::{DeTable, DeValue};
use toml::Spanned;

use crate::core::names::did_you_mean;
use crate::error::{Diagnostic, Stage};

/// A key removed by the shape check, or one an unknown key was probably meant to be:
/// `(table, key)`, the table as `` `[cluster]` ``.
pub(crate) type Removed = Vec<(String, String)>;

/// Checks `doc` against `schema` (the spec's JSON Schema), pushes one diagnostic per
/// unknown key and per value of the wrong type, removes those keys, and returns them.
pub(crate) fn check(
    file: &str,
    text: &str,
    doc: &mut DeTable<'_>,
    schema: &Value,
    diags: &mut Vec<Diagnostic>,
) -> Removed {
    let mut removed = Vec::new();
    let mut cx = Cx {
        file,
        text,
        diags,
        removed: &mut removed,
    };
    cx.table(doc, schema, &Where::Root);
    removed
}

/// Which table a key is in, for messages.
enum Where {
    Root,
    /// `[cluster]`, `[resolve.indexes]`.
    Table(String),
    /// An entry of an array of tables: `[check].allow`.
    Entry(String),
}

impl Where {
    fn name(&self) -> String {
        match self {
            Where::Root => "the spec".into(),
            Where::Table(t) => format!("`[{t}]`"),
            Where::Entry(a) => format!("an entry of `{a}`"),
        }
    }

    fn child(&self, key: &str) -> Where {
        match self {
            Where::Root => Where::Table(key.to_string()),
            Where::Table(t) => Where::Table(format!("{t}.{key}")),
            Where::Entry(a) => Where::Table(format!("{a}.{key}")),
        }
    }

    /// The dotted path of an array under this table: `[check].allow`.
    fn array(&self, key: &str) -> String {
        match self {
            Where::Root => key.to_string(),
            Where::Table(t) => format!("[{t}].{key}"),
            Where::Entry(a) => format!("{a}.{key}"),
        }
    }
}

struct Cx<'a> {
    file: &'a str,
    text: &'a str,
    diags: &'a mut Vec<Diagnostic>,
    removed: &'a mut Removed,
}

impl Cx<'_> {
    fn table(&mut self, table: &mut DeTable<'_>, schema: &Value, at: &Where) {
        let props = schema.get("properties").and_then(Value::as_object);
        let extra = schema.get("additionalProperties").filter(|v| v.is_object());
        let mut drop: Vec<String> = Vec::new();
        for (k, v) in table.iter_mut() {
            let key = k.get_ref().to_string();
            let sub = props.and_then(|p| p.get(&key)).or(extra);
            let Some(sub) = sub else {
                if props.is_none() && extra.is_none() {
                    continue; // an open table
                }
                self.unknown(&key, k.span().start, v.get_ref().is_table(), props, at);
                drop.push(key);
                continue;
            };
            if matches!(at, Where::Root) && key == "components" && v.get_ref().is_table() {
                continue; // its entries are the parser's (see the module documentation)
            }
            if !self.value(&key, v, sub, at) {
                drop.push(key);
            }
        }
        if !drop.is_empty() {
            for d in &drop {
                table.remove(d.as_str());
            }
            let name = at.name();
            self.removed
                .extend(drop.into_iter().map(|k| (name.clone(), k)));
        }
    }

    /// Checks a value against its schema; `false` when it must be removed.
    fn value(
        &mut self,
        key: &str,
        v: &mut Spanned<DeValue<'_>>,
        schema: &Value,
        at: &Where,
    ) -> bool {
        let Some(schema) = branch(schema, v.get_ref()) else {
            self.wrong_type(key, v, schema);
            return false;
        };
        let span = v.span();
        match v.get_mut() {
            DeValue::Table(t) => self.table(t, schema, &at.child(key)),
            DeValue::Array(items) => {
                let Some(item) = schema.get("items") else {
                    return true;
                };
                let path = at.array(key);
                let mut ok = true;
                for x in items.iter_mut() {
                    match branch(item, x.get_ref()) {
                        None => {
                            self.wrong_item(key, x, item, &path);
                            ok = false;
                        }
                        Some(s) => {
                            if let DeValue::Table(t) = x.get_mut() {
                                self.table(t, s, &Where::Entry(path.clone()));
                            }
                        }
                    }
                }
                let _ = span;
                return ok;
            }
            _ => {}
        }
        true
    }

    fn unknown(
        &mut self,
        key: &str,
        offset: usize,
        is_table: bool,
        props: Option<&serde_json::Map<String, Value>>,
        at: &Where,
    ) {
        let keys: Vec<&str> = props
            .map(|p| p.keys().map(String::as_str).collect())
            .unwrap_or_default();
        let message = match at {
            Where::Root if is_table => format!("unknown table `[{}]`", key.escape_debug()),
            _ => format!("unknown key `{}` in {}", key.escape_debug(), at.name()),
        };
        let mut d = Diagnostic::new(Stage::Spec, message).at_offset(self.file, self.text, offset);
        if let Some(s) = did_you_mean(key, keys.iter().copied()) {
            // The key meant is then missing: the hint says so, not a second error.
            self.removed.push((at.name(), s.to_string()));
            d = d.hint(format!("did you mean `{s}`?"));
        } else if matches!(at, Where::Root) {
            d = d.hint("the spec's tables are [stack], [hardware], [components], and for the generators [cluster], [image], [train], [serve], [packer], [k8s], [slurm], [storage], [network] for the site's fabric, [python] and [resolve] for the Python closure, and [check] for acknowledged warnings; see the spec reference in the book");
        } else {
            let list: Vec<String> = keys.iter().map(|k| format!("`{k}`")).collect();
            d = d.hint(format!(
                "{} takes: {}; see the spec reference in the book",
                at.name(),
                list.join(", ")
            ));
        }
        self.diags.push(d);
    }

    fn wrong_type(&mut self, key: &str, v: &Spanned<DeValue<'_>>, schema: &Value) {
        let want = wanted(schema);
        let example = example(schema).map(|e| match e.as_str() {
            "table" => format!(", like `[{key}]`"),
            e => format!(", like `{key} = {e}`"),
        });
        let mut d = Diagnostic::new(
            Stage::Spec,
            format!(
                "`{}` must be {}{}",
                key.escape_debug(),
                want.join(" or "),
                example.unwrap_or_default()
            ),
        )
        .at_offset(self.file, self.text, v.span().start);
        d = d.hint(fix(key, v.get_ref(), &want));
        self.diags.push(d);
    }

    fn wrong_item(&mut self, key: &str, x: &Spanned<DeValue<'_>>, schema: &Value, path: &str) {
        let want = wanted(schema);
        let mut d = Diagnostic::new(
            Stage::Spec,
            format!(
                "each entry of `{}` must be {}",
                path.escape_debug(),
                want.join(" or ")
            ),
        )
        .at_offset(self.file, self.text, x.span().start);
        let _ = key;
        d = d.hint(format!("this entry is {}", found(x.get_ref())));
        self.diags.push(d);
    }
}

/// The schema (or the `anyOf` branch) whose `type` the value has; the schema itself when it
/// states no type. `None` when the value has none of the types the schema allows.
fn branch<'s>(schema: &'s Value, v: &DeValue<'_>) -> Option<&'s Value> {
    if let Some(t) = schema.get("type").and_then(Value::as_str) {
        return (t == type_of(v) || (t == "number" && v.is_integer())).then_some(schema);
    }
    let branches = schema.get("anyOf").and_then(Value::as_array);
    let typed: Vec<&Value> = branches
        .into_iter()
        .flatten()
        .filter(|b| b.get("type").is_some())
        .collect();
    if typed.is_empty() {
        return Some(schema);
    }
    typed.into_iter().find_map(|b| branch(b, v))
}

fn type_of(v: &DeValue<'_>) -> &'static str {
    match v {
        DeValue::String(_) => "string",
        DeValue::Integer(_) => "integer",
        DeValue::Float(_) => "number",
        DeValue::Boolean(_) => "boolean",
        DeValue::Datetime(_) => "datetime",
        DeValue::Array(_) => "array",
        DeValue::Table(_) => "object",
    }
}

/// The types a schema allows, in words: `a number`, `a string`.
fn wanted(schema: &Value) -> Vec<&'static str> {
    let words = |t: &str| match t {
        "integer" => "a number",
        "number" => "a number",
        "string" => "a string",
        "boolean" => "`true` or `false`",
        "array" => "a list",
        "object" => "a table",
        _ => "another type",
    };
    if let Some(t) = schema.get("type").and_then(Value::as_str) {
        return vec![words(t)];
    }
    schema
        .get("anyOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|b| b.get("type").and_then(Value::as_str))
        .map(words)
        .collect()
}

/// What a value is, in words: `the string "16"`, `the number 550`.
fn found(v: &DeValue<'_>) -> String {
    match v {
        DeValue::String(s) => format!("the string \"{}\"", s.escape_debug()),
        DeValue::Integer(i) => format!("the number {}", i.as_str()),
        DeValue::Float(f) => format!("the number {}", f.as_str()),
        DeValue::Boolean(b) => format!("`{b}`"),
        DeValue::Datetime(d) => format!("the date {d}"),
        DeValue::Array(_) => "a list".into(),
        DeValue::Table(_) => "a table".into(),
    }
}

/// The schema's first example as TOML (`8`, `"550.54.15"`, `["sm_90"]`), or `table` for a
/// table; `None` without one.
fn example(schema: &Value) -> Option<String> {
    if schema.get("type").and_then(Value::as_str) == Some("object") {
        return Some("table".into());
    }
    let e = schema
        .get("examples")
        .and_then(Value::as_array)
        .and_then(|a| a.first())?;
    let v = toml::Value::try_from(e).ok()?;
    Some(v.to_string())
}

/// The hint for a value of the wrong type: the fix when it is plain (quotes to remove or
/// add, a list of one), otherwise what the value is.
fn fix(key: &str, v: &DeValue<'_>, want: &[&str]) -> String {
    let key = key.escape_debug();
    match v {
        DeValue::String(s) if want.contains(&"a number") && s.trim().parse::<i64>().is_ok() => {
            format!("remove the quotes: `{key} = {}`", s.trim())
        }
        DeValue::String(s)
            if want.contains(&"`true` or `false`") && matches!(s.trim(), "true" | "false") =>
        {
            format!("remove the quotes: `{key} = {}`", s.trim())
        }
        DeValue::String(s) if want == ["a list"] => {
            format!(
                "write a list, even of one: `{key} = [\"{}\"]`",
                s.escape_debug()
            )
        }
        DeValue::Integer(i) if want.contains(&"a string") => {
            format!("quote it: `{key} = \"{}\"`", i.as_str())
        }
        DeValue::Float(f) if want.contains(&"a string") => {
            format!("quote it: `{key} = \"{}\"`", f.as_str())
        }
        DeValue::Boolean(b) if want.contains(&"a string") => {
            format!("quote it: `{key} = \"{b}\"`")
        }
        other => format!("it is {} here", found(other)),
    }
}

#[cfg(test)]
mod tests {
    fn errors(spec: &str) -> String {
        let cat = crate::Catalog::stock().unwrap();
        match crate::Spec::parse("gpustack.toml", spec, &cat) {
            Ok(_) => String::new(),
            Err(e) => e.to_string(),
        }
    }

    /// Shape problems do not hide the others: an unknown key, a wrong type and an unknown
    /// GPU in one run, in file order, and the missing `nodes` is not reported twice.
    #[test]
    fn shape_and_value_problems_come_together() {
        let text = errors(
            "[stack]\nname = \"Demo\"\n[hardware]\ngpus = [\"h1000\"]\n[components]\ntorch = \"*\"\n[cluster]\nfabric = \"infiniband\"\nnodes = \"2\"\ngpus_per_node = 8\n[slurm]\npartition = \"gpu\"\ntimee = \"1:00:00\"\n",
        );
        let firsts: Vec<&str> = text.lines().filter(|l| l.starts_with("error:")).collect();
        assert_eq!(
            firsts,
            [
                "error: invalid stack name `Demo`: expected [a-z0-9][a-z0-9-]*, at most 63 characters",
                "error: unknown GPU `h1000`",
                "error: `nodes` must be a number, like `nodes = 8`",
                "error: unknown key `timee` in `[slurm]`",
            ],
            "{text}"
        );
    }

    #[test]
    fn every_problem_in_file_order_in_plain_words() {
        let text = errors(
            "[stack]\nname = \"demo\"\nflavour = 1\n[hardware]\ngpus = \"h100\"\ndriver = 550\n[components]\ntorch = \"*\"\n[cluster]\nfabric = \"infiniband\"\nnodes = \"16\"\ngpus_per_node = 8\nnodez = 2\n",
        );
        insta::assert_snapshot!(text, @r#"
        error: unknown key `flavour` in `[stack]`
          --> gpustack.toml:3:1
           |
         3 | flavour = 1
           | ^

        hint: `[stack]` takes: `name`, `os`; see the spec reference in the book

        error: `gpus` must be a list, like `gpus = ["a10"]`
          --> gpustack.toml:5:8
           |
         5 | gpus = "h100"
           |        ^

        hint: write a list, even of one: `gpus = ["h100"]`

        error: `driver` must be a string, like `driver = "550.54.15"`
          --> gpustack.toml:6:10
           |
         6 | driver = 550
           |          ^

        hint: quote it: `driver = "550"`

        error: `nodes` must be a number, like `nodes = 8`
          --> gpustack.toml:11:9
            |
         11 | nodes = "16"
            |         ^

        hint: remove the quotes: `nodes = 16`

        error: unknown key `nodez` in `[cluster]`
          --> gpustack.toml:13:1
            |
         13 | nodez = 2
            | ^

        hint: did you mean `nodes`?
        "#);
    }
}
