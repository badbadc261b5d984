//! A reader for the lock's own canonical form: what [`Lock::to_toml`] writes, and nothing
//! else. Every `gen` and `check` reads a lock, and the `toml` parser was a sixth of a
//! `gen all` (the book's performance chapter, "A reader for the lock's own form").
//!
//! It accepts a subset of TOML: comments, `[table]` and `[[array]]` headers with bare or
//! quoted keys, `key = value` lines, and basic strings, integers, booleans and arrays as
//! values. It builds a plain tree, which the reader's own wire types
//! ([`super::read::LockWire`]) deserialize through serde, as they do from `toml`. Anything
//! else (a literal string, a float, an inline table, a dotted key, an error of any kind)
//! gives up, and the `toml` parser reads the text, with its messages.
//!
//! The result is kept only when writing it again gives the very text read: then the text
//! is the canonical form of that lock, which the `toml` parser reads to the same lock (the
//! writer and the reader round-trip: `tests/lockfiles.rs`), so this reader can never read a
//! lock differently. It also means the `[integrity]` seals are those of the lock's
//! content, by construction ([`Lock::parse_canonical`]).

use std::ops::Range;

use serde::de::{self, IntoDeserializer, Visitor};
use serde::Deserialize;

use super::read::LockWire;
use super::{Lock, LOCK_REVISION, LOCK_VERSION};

impl Lock {
    /// The lock `text` is the canonical form of, read without the `toml` parser; none when
    /// the text is anything else (then [`Lock::parse`] reads it, and says what is wrong).
    /// A lock read here is exactly what [`Lock::to_toml`] writes, `[integrity]` included,
    /// so its seals match its tables without computing them again.
    pub(crate) fn parse_canonical(file: &str, text: &str) -> Option<Lock> {
        let root = parse(text)?;
        let Node {
            v: V::Table(keys), ..
        } = &root
        else {
            return None;
        };
        let int = |k: &str| {
            keys.iter()
                .find(|(key, _)| key == k)
                .and_then(|(_, n)| match n.v {
                    V::Int(i) => Some(i),
                    _ => None,
                })
        };
        if int("version")? != i64::from(LOCK_VERSION)
            || int("revision")? != i64::from(LOCK_REVISION)
        {
            return None;
        }
        let lock = LockWire::<false>::deserialize(root)
            .ok()?
            .into_lock(file, text)
            .ok()?;
        (lock.to_toml() == text).then_some(lock)
    }
}

/// A value and where it is in the text.
#[derive(Debug)]
struct Node {
    v: V,
    span: Range<usize>,
}

#[derive(Debug)]
enum V {
    Str(String),
    Int(i64),
    Bool(bool),
    Array(Vec<Node>),
    /// Keys in file order (a table's keys are unique in the canonical form; a repeated one
    /// is caught by writing the lock again).
    Table(Vec<(String, Node)>),
    /// `[[name]]`: the tables, in order.
    Tables(Vec<Node>),
}

/// The document as a tree; none outside the subset.
fn parse(text: &str) -> Option<Node> {
    let mut root = Node {
        v: V::Table(Vec::new()),
        span: 0..text.len(),
    };
    // The path of the table `key = value` lines go into; `[[x]]` segments name the last
    // table of the array.
    let mut path: Vec<String> = Vec::new();
    let mut p = P {
        s: text.as_bytes(),
        at: 0,
        text,
    };
    while p.at < p.s.len() {
        p.spaces();
        match p.peek() {
            None => break,
            Some(b'\n') => p.at += 1,
            Some(b'#') => p.rest_of_line()?,
            Some(b'[') => {
                let start = p.at;
                let array = p.s.get(p.at + 1) == Some(&b'[');
                p.at += if array { 2 } else { 1 };
                let mut keys = vec![p.key()?];
                while p.eat(b'.') {
                    keys.push(p.key()?);
                }
                if !p.eat(b']') || (array && !p.eat(b']')) {
                    return None;
                }
                let span = start..p.at;
                p.rest_of_line()?;
                let last = keys.pop()?;
                let parent = table_at(&mut root, &keys)?;
                if parent.len() >= MAX_KEYS {
                    return None;
                }
                let fresh = Node {
                    v: V::Table(Vec::new()),
                    span,
                };
                if array {
                    match parent.iter_mut().find(|(k, _)| *k == last) {
                        Some((
                            _,
                            Node {
                                v: V::Tables(ts), ..
                            },
                        )) => ts.push(fresh),
                        Some(_) => return None,
                        None => {
                            let span = fresh.span.clone();
                            parent.push((
                                last.clone(),
                                Node {
                                    v: V::Tables(vec![fresh]),
                                    span,
                                },
                            ));
                        }
                    }
                } else {
                    if parent.iter().any(|(k, _)| *k == last) {
                        return None;
                    }
                    parent.push((last.clone(), fresh));
                }
                keys.push(last);
                path = keys;
            }
            Some(_) => {
                let key = p.key()?;
                p.spaces();
                if !p.eat(b'=') {
                    return None;
                }
                p.spaces();
                let value = p.value(0)?;
                p.rest_of_line()?;
                let table = table_at(&mut root, &path)?;
                if table.len() >= MAX_KEYS {
                    return None;
                }
                table.push((key, value));
            }
        }
    }
    Some(root)
}

/// The keys of the table at `path` (the last table of an array of tables).
fn table_at<'n>(root: &'n mut Node, path: &[String]) -> Option<&'n mut Vec<(String, Node)>> {
    let mut node = root;
    for k in path {
        let V::Table(keys) = &mut node.v else {
            return None;
        };
        // From the end: the table being filled is the one last added.
        let (_, next) = keys.iter_mut().rev().find(|(key, _)| key == k)?;
        node = match next {
            Node {
                v: V::Tables(ts), ..
            } => ts.last_mut()?,
            table => table,
        };
    }
    match &mut node.v {
        V::Table(keys) => Some(keys),
        _ => None,
    }
}

/// The most keys a table may have (the canonical form's largest, `[integrity]`, has one
/// per table of the lock: 73 in the largest example): more gives up, so that a hostile
/// text cannot make the key lookups quadratic.
const MAX_KEYS: usize = 512;

/// How deep arrays may nest: a hostile text gives up here rather than recursing on.
const MAX_DEPTH: usize = 4;

/// The parser's place in the text.
struct P<'t> {
    s: &'t [u8],
    at: usize,
    text: &'t str,
}

impl P<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.at).copied()
    }
    fn eat(&mut self, b: u8) -> bool {
        let hit = self.peek() == Some(b);
        if hit {
            self.at += 1;
        }
        hit
    }
    fn spaces(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.at += 1;
        }
    }
    /// Spaces, an optional comment, then the end of the line (or of the text).
    fn rest_of_line(&mut self) -> Option<()> {
        self.spaces();
        if self.peek() == Some(b'#') {
            while !matches!(self.peek(), None | Some(b'\n')) {
                self.at += 1;
            }
        }
        match self.peek() {
            None => Some(()),
            Some(b'\n') => {
                self.at += 1;
                Some(())
            }
            Some(_) => None,
        }
    }
    /// Spaces, newlines and comments, as between an array's items.
    fn gaps(&mut self) {
        loop {
            self.spaces();
            match self.peek() {
                Some(b'\n') => self.at += 1,
                Some(b'#') => {
                    while !matches!(self.peek(), None | Some(b'\n')) {
                        self.at += 1;
                    }
                }
                _ => return,
            }
        }
    }
    /// A bare or basic-string key.
    fn key(&mut self) -> Option<String> {
        self.spaces();
        let key = if self.peek() == Some(b'"') {
            self.string()?
        } else {
            let start = self.at;
            while matches!(
                self.peek(),
                Some(b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_')
            ) {
                self.at += 1;
            }
            if start == self.at {
                return None;
            }
            self.text.get(start..self.at)?.to_string()
        };
        self.spaces();
        Some(key)
    }
    /// A value; arrays nest at most [`MAX_DEPTH`] deep (the canonical form nests two).
    fn value(&mut self, depth: usize) -> Option<Node> {
        if depth > MAX_DEPTH {
            return None;
        }
        let start = self.at;
        let v = match self.peek()? {
            b'"' => V::Str(self.string()?),
            b't' if self.s[self.at..].starts_with(b"true") => {
                self.at += 4;
                V::Bool(true)
            }
            b'f' if self.s[self.at..].starts_with(b"false") => {
                self.at += 5;
                V::Bool(false)
            }
            b'[' => {
                self.at += 1;
                let mut items = Vec::new();
                loop {
                    self.gaps();
                    if self.eat(b']') {
                        break;
                    }
                    items.push(self.value(depth + 1)?);
                    self.gaps();
                    if !self.eat(b',') {
                        self.gaps();
                        if !self.eat(b']') {
                            return None;
                        }
                        break;
                    }
                }
                V::Array(items)
            }
            b'-' | b'0'..=b'9' => {
                let digits_from = self.at + usize::from(self.peek() == Some(b'-'));
                self.at = digits_from;
                while matches!(self.peek(), Some(b'0'..=b'9')) {
                    self.at += 1;
                }
                let digits = &self.text[digits_from..self.at];
                // Leading zeros, and anything after the digits (a float, a date), are
                // outside the subset.
                if digits.is_empty()
                    || (digits.len() > 1 && digits.starts_with('0'))
                    || !matches!(
                        self.peek(),
                        None | Some(b' ' | b'\t' | b'\n' | b',' | b']' | b'#')
                    )
                {
                    return None;
                }
                V::Int(self.text[start..self.at].parse().ok()?)
            }
            _ => return None,
        };
        Some(Node {
            v,
            span: start..self.at,
        })
    }
    /// A basic string (`"…"`, one line), escapes decoded.
    fn string(&mut self) -> Option<String> {
        if !self.eat(b'"') || self.s[self.at..].starts_with(b"\"\"") {
            return None;
        }
        let mut out = String::new();
        loop {
            let start = self.at;
            while !matches!(self.peek()?, b'"' | b'\\') {
                let b = self.peek()?;
                // Control characters other than tab are never written raw.
                if b < 0x20 && b != b'\t' || b == 0x7f {
                    return None;
                }
                self.at += 1;
            }
            out.push_str(self.text.get(start..self.at)?);
            if self.eat(b'"') {
                return Some(out);
            }
            self.at += 1;
            let e = self.peek()?;
            self.at += 1;
            match e {
                b'"' => out.push('"'),
                b'\\' => out.push('\\'),
                b'n' => out.push('\n'),
                b't' => out.push('\t'),
                b'r' => out.push('\r'),
                b'b' => out.push('\u{8}'),
                b'f' => out.push('\u{c}'),
                b'e' => out.push('\u{1b}'),
                b'u' | b'U' => {
                    let n = if e == b'u' { 4 } else { 8 };
                    let hex = self.text.get(self.at..self.at + n)?;
                    self.at += n;
                    out.push(char::from_u32(u32::from_str_radix(hex, 16).ok()?)?);
                }
                _ => return None,
            }
        }
    }
}

/// Why the tree did not deserialize: the `toml` parser reads the text again and says.
#[derive(Debug)]
struct Refused;

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("not the lock's canonical form")
    }
}

impl std::error::Error for Refused {}

impl de::Error for Refused {
    fn custom<T: std::fmt::Display>(_: T) -> Refused {
        Refused
    }
}

/// The name serde_spanned's `Spanned` asks a deserializer for, with its three fields: a
/// value's span is given as `toml` gives it (what `Spanned` fields in the spec's wire types
/// use for messages; only for messages, and a lock with a problem is read by `toml`).
const SPANNED: &str = "$__serde_spanned_private_Spanned";
const SPANNED_FIELDS: [&str; 3] = [
    "$__serde_spanned_private_start",
    "$__serde_spanned_private_end",
    "$__serde_spanned_private_value",
];

impl<'de> de::Deserializer<'de> for Node {
    type Error = Refused;

    fn deserialize_any<W: Visitor<'de>>(self, w: W) -> Result<W::Value, Refused> {
        match self.v {
            V::Str(s) => w.visit_string(s),
            V::Int(i) => w.visit_i64(i),
            V::Bool(b) => w.visit_bool(b),
            V::Array(items) | V::Tables(items) => {
                w.visit_seq(de::value::SeqDeserializer::new(items.into_iter()))
            }
            V::Table(keys) => w.visit_map(de::value::MapDeserializer::new(keys.into_iter())),
        }
    }

    fn deserialize_option<W: Visitor<'de>>(self, w: W) -> Result<W::Value, Refused> {
        w.visit_some(self)
    }

    fn deserialize_newtype_struct<W: Visitor<'de>>(
        self,
        _: &'static str,
        w: W,
    ) -> Result<W::Value, Refused> {
        w.visit_newtype_struct(self)
    }

    fn deserialize_struct<W: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        w: W,
    ) -> Result<W::Value, Refused> {
        if name == SPANNED && fields == SPANNED_FIELDS {
            w.visit_map(Spanned {
                span: self.span.clone(),
                value: Some(self),
                next: 0,
            })
        } else {
            self.deserialize_any(w)
        }
    }

    fn deserialize_enum<W: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        w: W,
    ) -> Result<W::Value, Refused> {
        match self.v {
            V::Str(s) => w.visit_enum(s.into_deserializer()),
            _ => Err(Refused),
        }
    }

    fn deserialize_ignored_any<W: Visitor<'de>>(self, w: W) -> Result<W::Value, Refused> {
        w.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
        byte_buf unit unit_struct seq tuple tuple_struct map identifier
    }
}

impl IntoDeserializer<'_, Refused> for Node {
    type Deserializer = Node;
    fn into_deserializer(self) -> Node {
        self
    }
}

/// A value's span and the value, as `Spanned` reads them.
struct Spanned {
    span: Range<usize>,
    value: Option<Node>,
    next: usize,
}

impl<'de> de::MapAccess<'de> for Spanned {
    type Error = Refused;

    fn next_key_seed<K: de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Refused> {
        let Some(field) = SPANNED_FIELDS.get(self.next) else {
            return Ok(None);
        };
        seed.deserialize(de::value::BorrowedStrDeserializer::new(field))
            .map(Some)
    }

    fn next_value_seed<S: de::DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<S::Value, Refused> {
        self.next += 1;
        match self.next {
            1 => seed.deserialize(self.span.start.into_deserializer()),
            2 => seed.deserialize(self.span.end.into_deserializer()),
            _ => seed.deserialize(self.value.take().ok_or(Refused)?),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn committed() -> Vec<(String, String)> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut out = Vec::new();
        for dir in ["lockfiles", "fixtures/locks"] {
            let Ok(rd) = std::fs::read_dir(root.join(dir)) else {
                continue;
            };
            for e in rd.flatten() {
                let p = e.path();
                if p.extension().is_some_and(|x| x == "lock") {
                    out.push((
                        p.display().to_string(),
                        std::fs::read_to_string(&p).unwrap(),
                    ));
                }
            }
        }
        out.sort();
        out
    }

    /// Deep nesting gives up (to the `toml` parser, which refuses it with a message)
    /// instead of exhausting the stack.
    #[test]
    fn deep_arrays_give_up() {
        let deep = format!("x = {}1{}\n", "[".repeat(100_000), "]".repeat(100_000));
        assert!(parse(&deep).is_none());
        assert!(parse("x = [[[[1]]]]\n").is_some());
        assert!(parse("x = [[[[[[1]]]]]]\n").is_none());
        let wide: String = (0..MAX_KEYS + 1).map(|i| format!("[t{i}]\n")).collect();
        assert!(parse(&wide).is_none());
        assert!(parse(&wide[..wide.rfind('[').unwrap()]).is_some());
    }

    /// Every committed lock of the current format is read here, to the very lock the
    /// `toml` parser reads; older formats are left to `toml`.
    #[test]
    fn reads_every_current_lock_as_toml_does() {
        let mut read = 0;
        for (path, text) in committed() {
            let slow = Lock::parse_toml(&path, &text);
            match Lock::parse_canonical(&path, &text) {
                Some(fast) => {
                    read += 1;
                    assert_eq!(Some(&fast), slow.as_ref().ok(), "{path}");
                }
                None => assert!(
                    slow.as_ref().map_or(true, |l| l.to_toml() != text),
                    "{path}: canonical, but not read here"
                ),
            }
        }
        assert!(read >= 16, "only {read} locks read");
    }
}
