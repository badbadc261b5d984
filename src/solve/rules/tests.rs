//! [`Ctx::pair_key`] and [`Ctx::join`] must agree with [`Ctx::check_pair`]: arc
//! consistency trusts them to skip checks.

use super::*;
use std::collections::BTreeMap;

fn pair(ctx: &Ctx<'_>, x: Component, a: Cand, y: Component, b: Cand) -> bool {
    if x < y {
        ctx.check_pair(x, a, y, b).is_ok()
    } else {
        ctx.check_pair(y, b, x, a).is_ok()
    }
}

fn check(cat: &Catalog, hardware: &str) {
    let mut text = format!("[stack]\nname = \"keys\"\n[hardware]\n{hardware}\n[components]\n");
    for c in ["cudnn", "nccl", "python", "torch", "vllm", "deepspeed"] {
        text.push_str(&format!("{c} = \"*\"\n"));
    }
    for c in Component::EXTRAS {
        text.push_str(&format!("{} = \"*\"\n", c.name()));
    }
    let spec = Spec::parse("keys.toml", &text, cat).unwrap();
    let ctx = Ctx::quiet(cat, &spec);
    let mut checked = 0;
    for x in Component::ALL {
        for y in Component::ALL {
            if x == y {
                continue;
            }
            let (xs, ys) = (ctx.candidates(x), ctx.candidates(y));
            if !has_rule(x, y) {
                assert!(xs
                    .iter()
                    .all(|&a| ys.iter().all(|&b| pair(&ctx, x, a, y, b))));
                continue;
            }
            // Candidates of `x` with one key: the same answers against every `y`.
            let mut rows: BTreeMap<PairKey<'_>, Vec<bool>> = BTreeMap::new();
            for &a in &xs {
                let row: Vec<bool> = ys.iter().map(|&b| pair(&ctx, x, a, y, b)).collect();
                checked += row.len();
                // Candidates of `y` with one key: the same answer against `a`.
                let mut cols: BTreeMap<PairKey<'_>, bool> = BTreeMap::new();
                for (&b, &ok) in ys.iter().zip(&row) {
                    if let Some(k) = ctx.pair_key(y, b, x) {
                        let first = *cols.entry(k).or_insert(ok);
                        assert_eq!(first, ok, "{x:?} {a:?} vs {y:?} {b:?}");
                    }
                    // A pin: a pass needs equal keys, or an `Any`.
                    let (ja, jb) = (ctx.join(x, a, y), ctx.join(y, b, x));
                    if ok {
                        assert!(
                            ja == jb || ja == Join::Any || jb == Join::Any,
                            "{x:?} {a:?} vs {y:?} {b:?}: {ja:?} {jb:?}"
                        );
                    }
                }
                if let Some(k) = ctx.pair_key(x, a, y) {
                    let first = rows.entry(k).or_insert_with(|| row.clone());
                    assert_eq!(*first, row, "{x:?} {a:?} against {y:?}");
                }
            }
        }
    }
    assert!(checked > 10_000, "{checked}");
}

#[test]
fn keys_and_pins_agree_with_the_rules_on_the_stock_catalog() {
    let cat = Catalog::stock().unwrap();
    for hardware in [
        "gpus = [\"h100\"]",
        "gpus = [\"v100\"]\ndriver = \"535.54.03\"",
        "gpus = [\"rtx-4090\"]\ndriver = \"550.144.03\"",
        "gpus = [\"t4\", \"a100\"]",
    ] {
        check(&cat, hardware);
    }
}

#[test]
fn keys_and_pins_agree_with_the_rules_on_a_synthetic_catalog() {
    // Copies share every field but their versions and pins: keys must tell them apart
    // where a rule does, and group them where none does.
    let cat = Catalog::from_layers(&[crate::synth::scaled_catalog(2)]).unwrap();
    check(&cat, "gpus = [\"h100\"]\ndriver = \"550.54.15\"");
}
