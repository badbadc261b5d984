//! How names typed by a user are compared, and the "did you mean" hint.

/// Closest candidate by edit distance, for "did you mean" hints.
///
/// Names are compared as [`name_key`]s, so `RTX4090` is distance 0 from `rtx-4090`.
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let mut best: Option<(usize, &str)> = None;
    let w = name_key(word);
    for c in candidates {
        let d = levenshtein(&w, &name_key(c));
        if d <= 2.max(w.len() / 3) && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

/// How names are compared when a user types them (GPU ids and aliases, component names,
/// catalog families, targets): ASCII case, whitespace, hyphens and underscores do not count.
///
/// ```
/// use gpustack::core::names::name_key;
/// assert_eq!(name_key("RTX 4090"), name_key("rtx-4090"));
/// assert_eq!(name_key(" A100_80GB "), name_key("a100-80gb"));
/// ```
pub fn name_key(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_whitespace() && *c != '-' && *c != '_')
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// Levenshtein edit distance between two strings, by characters.
pub(crate) fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// A relative, `/`-separated path with no empty, `.` or `..` component: the only file names
/// a plan may produce and `emit` may write (both check it, so it lives below both).
pub(crate) fn relative_ok(p: &str) -> bool {
    !p.is_empty()
        && !p.starts_with('/')
        && p.split('/').all(|c| !c.is_empty() && c != "." && c != "..")
}
