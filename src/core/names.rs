//! How names typed by a user are compared, and the "did you mean" hint.

/// Closest candidate by edit distance, for "did you mean" hints, and only a close one:
/// at most a third of the longer name's characters edited (a swap of two neighbours counts
/// as one edit), and never more than 3. `zz` suggests nothing for `os`; a 900 KB word is
/// not compared at all (its length alone is too far from every candidate).
///
/// Names are compared as [`name_key`]s, so `RTX4090` is distance 0 from `rtx-4090`.
///
/// ```
/// use gpustack::error::did_you_mean;
/// assert_eq!(did_you_mean("nmae", ["name", "os"]), Some("name"));
/// assert_eq!(did_you_mean("zz", ["name", "os"]), None);
/// ```
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    const MAX_EDITS: usize = 3;
    let mut best: Option<(usize, &str)> = None;
    let w = name_key(word);
    let wl = w.chars().count();
    for c in candidates {
        let k = name_key(c);
        let kl = k.chars().count();
        if wl.abs_diff(kl) > MAX_EDITS {
            continue;
        }
        let d = levenshtein(&w, &k);
        if d <= MAX_EDITS && d * 3 <= wl.max(kl) && best.is_none_or(|(bd, _)| d < bd) {
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

/// Edit distance between two strings, by characters: insertions, deletions,
/// substitutions and swaps of two neighbours (optimal string alignment), each one edit.
pub(crate) fn levenshtein(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev2: Vec<usize> = vec![0; b.len() + 1];
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 0..a.len() {
        let mut cur = vec![i + 1; b.len() + 1];
        for j in 0..b.len() {
            cur[j + 1] = (prev[j] + usize::from(a[i] != b[j]))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
            if i > 0 && j > 0 && a[i] == b[j - 1] && a[i - 1] == b[j] {
                cur[j + 1] = cur[j + 1].min(prev2[j - 1] + 1);
            }
        }
        prev2 = std::mem::replace(&mut prev, cur);
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
