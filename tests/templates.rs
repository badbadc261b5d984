//! Injection safety by construction: every `{{ … }}` in every template under `generators/`
//! ends in one of the escaping filters of `gpustack::render` (`sh`, `json`, `hcl`, `word`,
//! `num`), so no value reaches a generated file unquoted.

use gpustack::render::{template_names, template_source, ESCAPING_FILTERS};

#[test]
fn every_interpolation_is_escaped() {
    let mut bad = Vec::new();
    let mut seen = 0;
    for name in template_names() {
        let src = template_source(name).unwrap();
        let mut rest = src;
        while let Some(start) = rest.find("{{") {
            let after = &rest[start + 2..];
            let end = after.find("}}").expect("unclosed {{");
            let expr = after[..end]
                .trim()
                .trim_start_matches('-')
                .trim_end_matches('-')
                .trim();
            seen += 1;
            let last = expr.rsplit('|').next().unwrap().trim();
            let filter = last.split('(').next().unwrap().trim();
            if !expr.contains('|') || !ESCAPING_FILTERS.contains(&filter) {
                let line = src[..src.len() - rest.len() + start].lines().count();
                bad.push(format!("generators/{name}:{line}: `{{{{ {expr} }}}}`"));
            }
            rest = &after[end + 2..];
        }
    }
    assert!(seen > 50, "only {seen} interpolations found");
    assert!(
        bad.is_empty(),
        "interpolations without an escaping filter ({}):\n{}",
        ESCAPING_FILTERS.join(", "),
        bad.join("\n")
    );
}

#[test]
fn quoting_functions_hold_up() {
    use gpustack::render::{hcl_quote, json_quote, sh_quote};
    assert_eq!(sh_quote("plain-1.2"), "plain-1.2");
    assert_eq!(sh_quote("a'b"), r"'a'\''b'");
    assert_eq!(sh_quote("$(id)"), "'$(id)'");
    assert_eq!(sh_quote("-rf"), "'-rf'");
    assert_eq!(json_quote("a\"b\n"), r#""a\"b\n""#);
    assert_eq!(hcl_quote("${var.x} %{if}"), r#""$${var.x} %%{if}""#);
}
