//! Unit tests of the classes' order and names and of the report's escaping.

use super::render::{md_cell, md_code, short};
use super::*;

#[test]
fn classes_are_listed_costliest_first_with_unique_names() {
    let mut sorted = Class::ALL;
    sorted.sort();
    assert_eq!(sorted, Class::ALL);
    for c in Class::ALL {
        assert_eq!(Class::from_name(c.name()), Some(c));
        // The JSON spelling is the documented name.
        assert_eq!(
            serde_json::to_value(c).unwrap(),
            serde_json::Value::from(c.name())
        );
    }
}

#[test]
fn short_hashes_keep_the_prefix_and_twelve_digits() {
    assert_eq!(short("sha256:0123456789abcdef"), "sha256:0123456789ab");
    assert_eq!(short("sha256:01"), "sha256:01");
}

#[test]
fn markdown_cells_escape_pipes_and_backticks() {
    assert_eq!(md_cell("a|b\nc"), "a\\|b c");
    assert_eq!(md_code("x|y"), "`x\\|y`");
    assert_eq!(md_code("a`b"), "``a`b``");
    assert_eq!(md_code("`a"), "`` `a ``");
    // Nothing a lock holds can open a tag, a comment, a link or emphasis.
    assert_eq!(
        md_cell("</table><!-- [x](y) *b* _i_ &amp; ~s~ !"),
        "\\</table\\>\\<\\!-- \\[x\\](y) \\*b\\* \\_i\\_ \\&amp; \\~s\\~ \\!"
    );
    assert_eq!(md_cell("a\u{1b}[2Jb"), "a\\\\u{1b}\\[2Jb");
    assert_eq!(md_code("a\u{1b}b"), "`a\\u{1b}b`");
}
