//! Fenced code blocks of the book's Markdown pages, for the tests that run, quote or
//! rewrite them (`tests/book.rs`, `tests/book_transcripts.rs`, `tests/examples.rs`, …).

use std::ops::Range;

/// A fenced code block (```` ``` ```` … ```` ``` ````).
pub(crate) struct Block {
    /// The info string after the opening fence: `toml spec`, `console`, `rust,ignore`, ….
    pub(crate) info: String,
    /// The body's byte range in the page: from the line after the opening fence up to the
    /// closing fence's line (every body line with its newline).
    pub(crate) body: Range<usize>,
    /// The opening fence's line number, from 1.
    pub(crate) line: usize,
    /// Whether the fence is indented (a block inside a list item).
    pub(crate) indented: bool,
}

impl Block {
    /// The body's text.
    pub(crate) fn text<'a>(&self, page: &'a str) -> &'a str {
        &page[self.body.clone()]
    }
}

/// Every fenced code block of `page`, in order. A fence is a line that starts, after any
/// indentation, with three backticks; a block without a closing fence runs to the end.
pub(crate) fn code_blocks(page: &str) -> Vec<Block> {
    let mut lines = Vec::new();
    let mut at = 0;
    for line in page.split_inclusive('\n') {
        lines.push((at, line));
        at += line.len();
    }
    let fence = |line: &str| line.trim_start().starts_with("```");
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let (start, line) = lines[i];
        i += 1;
        if !fence(line) {
            continue;
        }
        let body_start = start + line.len();
        let mut body_end = page.len();
        while i < lines.len() {
            let (s, l) = lines[i];
            i += 1;
            if fence(l) {
                body_end = s;
                break;
            }
        }
        out.push(Block {
            info: line.trim_start()[3..].trim().to_string(),
            body: body_start..body_end,
            line: page[..start].matches('\n').count() + 1,
            indented: !line.starts_with("```"),
        });
    }
    out
}

/// The body of the first block of `page` whose info string is `info`.
pub(crate) fn code_block<'a>(page: &'a str, info: &str) -> Option<&'a str> {
    code_blocks(page)
        .into_iter()
        .find(|b| b.info == info)
        .map(|b| &page[b.body])
}
