//! The stock catalog's identity: a digest over its files and the newest date a source
//! records as read. Computed once, by the build script (`build.rs` includes this file), so
//! that a process start (`gpustack --version` prints it) does not hash the catalog's text:
//! it was half of every cold start (book/src/performance.md). The library's unit test
//! computes it again from the embedded files and compares.

use sha2::{Digest, Sha256};

/// `sha256:…` over every file's (display path, text), in the order given, and the newest
/// date any of them records as read.
pub(crate) fn identity<'a>(
    files: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> (String, Option<&'a str>) {
    let mut h = Sha256::new();
    let mut date: Option<&str> = None;
    for (path, text) in files {
        h.update(path.as_bytes());
        h.update([0]);
        h.update(text.as_bytes());
        h.update([0]);
        for d in read_dates(text) {
            if date.is_none_or(|x| d > x) {
                date = Some(d);
            }
        }
    }
    (format!("sha256:{:x}", h.finalize()), date)
}

/// The full dates (`YYYY-MM-DD`) that follow a "read"-like word in `text`.
fn read_dates(text: &str) -> impl Iterator<Item = &str> {
    const WORDS: [&str; 6] = [
        "read ",
        "as of ",
        "retrieved ",
        "checked ",
        "accessed ",
        "fetched ",
    ];
    WORDS.into_iter().flat_map(move |w| {
        text.match_indices(w).filter_map(move |(i, _)| {
            let rest = text[i + w.len()..].trim_start_matches("on ");
            let d = rest.get(..10)?;
            let b = d.as_bytes();
            let ok = b.iter().enumerate().all(|(j, c)| {
                if j == 4 || j == 7 {
                    *c == b'-'
                } else {
                    c.is_ascii_digit()
                }
            });
            ok.then_some(d)
        })
    })
}

#[cfg(test)]
mod tests {
    use crate::catalog::{STOCK, STOCK_DATE, STOCK_DIGEST};

    /// The build script's constants are the identity of the files embedded beside them.
    #[test]
    fn build_time_identity_matches_the_embedded_files() {
        let (digest, date) = super::identity(STOCK.iter().copied());
        assert_eq!(digest, STOCK_DIGEST);
        assert_eq!(date, STOCK_DATE);
        assert!(STOCK_DATE.is_some(), "the stock catalog records read dates");
    }

    #[test]
    fn read_dates_takes_full_dates_after_read_words() {
        let t =
            "read 2026-11-22; as of 2025-01-02, checked on 2024-03-04, read 2026-1-2, retrieved x";
        let got: Vec<_> = super::read_dates(t).collect();
        assert_eq!(got, ["2026-11-22", "2025-01-02", "2024-03-04"]);
    }
}
