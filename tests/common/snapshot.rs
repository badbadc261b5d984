//! Snapshots, two kinds with one review workflow (book: "Testing → Snapshots"):
//!
//! * test-only snapshots (conflict explanations, bad-input messages, diff reports) are
//!   [`insta`] files (`*.snap`) next to their inputs: a mismatch fails with insta's unified
//!   diff and leaves `*.snap.new` beside the snapshot for `cargo insta review` (or
//!   `cargo insta accept`); with `CI=true` nothing is written;
//! * committed files that other tools, tests or the book read as they are (lockfiles,
//!   `fixtures/gen/`, the spec schema, examples inside the book) cannot carry insta's
//!   header, so [`check_file`] compares them byte for byte and fails with a unified diff;
//!   blessing rewrites them in place and `git diff` is the review.
//!
//! `INSTA_UPDATE=always` (or `GPUSTACK_BLESS=1`, its older name) accepts both kinds at once.

use std::path::Path;
use std::sync::Once;

/// Whether this run rewrites snapshots instead of comparing them: `INSTA_UPDATE=always`
/// (insta's own "accept everything") or `GPUSTACK_BLESS=1`.
pub(crate) fn bless() -> bool {
    std::env::var_os("GPUSTACK_BLESS").is_some_and(|v| v == "1")
        || std::env::var("INSTA_UPDATE")
            .is_ok_and(|v| matches!(v.as_str(), "always" | "1" | "force"))
}

/// How to accept an intended change, for failure messages.
pub(crate) const ACCEPT: &str = "review the diff above; accept it with `cargo insta review` \
    (insta snapshots) or `INSTA_UPDATE=always cargo test --test <name>` and `git diff` \
    (committed files)";

/// Compares `actual` with the committed file at `path` byte for byte, or writes it when
/// blessing. Returns a failure with a unified diff instead of panicking, so that a test can
/// report every mismatch.
pub(crate) fn check_file(path: &Path, actual: &str) -> Option<String> {
    if bless() {
        if std::fs::read_to_string(path).ok().as_deref() != Some(actual) {
            std::fs::write(path, actual).expect("write snapshot");
        }
        return None;
    }
    match std::fs::read_to_string(path) {
        Ok(expected) if expected == actual => None,
        Ok(expected) => Some(format!(
            "{} differs from the generated text:\n{}",
            path.display(),
            unified_diff(&expected, actual, &path.display().to_string())
        )),
        Err(_) => Some(format!(
            "{} is missing; `INSTA_UPDATE=always cargo test` creates it\n--- generated ---\n{actual}",
            path.display()
        )),
    }
}

/// The old name of [`check_file`].
pub(crate) fn check_snapshot(path: &Path, actual: &str) -> Option<String> {
    check_file(path, actual)
}

/// A unified diff (three lines of context) from `expected` to `actual`, cut after 200
/// lines; a difference in the final newline alone is said in words.
pub(crate) fn unified_diff(expected: &str, actual: &str, name: &str) -> String {
    let diff = similar::TextDiff::from_lines(expected, actual);
    let mut out = diff
        .unified_diff()
        .context_radius(3)
        .header(
            &format!("{name} (committed)"),
            &format!("{name} (generated)"),
        )
        .to_string();
    if out.lines().count() > 200 {
        out = out.lines().take(200).collect::<Vec<_>>().join("\n");
        out.push_str("\n… (diff cut after 200 lines)\n");
    }
    if expected.trim_end_matches('\n') == actual.trim_end_matches('\n') {
        out.push_str("(only the trailing newlines differ)\n");
    }
    out
}

/// Checks `actual` against the insta snapshot `<dir>/<name>.snap` (`dir` relative to the
/// repository root). A mismatch is returned as a failure rather than a panic, so that a loop
/// over cases reports (and leaves `.snap.new` files for) all of them; insta has printed the
/// diff by then.
pub(crate) fn check_insta(dir: &str, name: &str, actual: &str) -> Option<String> {
    static BLESS: Once = Once::new();
    BLESS.call_once(|| {
        if std::env::var_os("GPUSTACK_BLESS").is_some_and(|v| v == "1")
            && std::env::var_os("INSTA_UPDATE").is_none()
        {
            // The older alias; set before insta first reads its configuration.
            std::env::set_var("INSTA_UPDATE", "always");
        }
    });
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(super::root().join(dir));
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        settings.bind(|| insta::assert_snapshot!(name.to_string(), actual));
    }));
    caught
        .err()
        .map(|_| format!("{dir}/{name}.snap differs (diff above)"))
}
