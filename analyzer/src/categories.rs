//! Sorting sites into categories by rules over their frames (TOML; built-in defaults
//! for bellperson / bellpepper-core in `default_categories.toml`).

use crate::Error;
use crate::naming::{self, without_generics};
use crate::report::FrameRow;
use std::path::Path;

/// The name of allocations no rule claims.
pub const UNMATCHED: &str = "other (no rule matched)";

/// The built-in rules.
pub const DEFAULT_RULES: &str = include_str!("default_categories.toml");

/// A frame pattern: function-name prefix (generics removed) and source-path suffix.
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pattern {
    /// Prefix of the function name.
    pub function: Option<String>,
    /// Suffix of the source path (or any part of it when it contains no `.rs`).
    pub file: Option<String>,
}

impl Pattern {
    fn matches(&self, f: &FrameRow) -> bool {
        // The file first: it needs no allocation, and most patterns name one.
        let file_ok = || {
            self.file.as_ref().is_none_or(|p| {
                f.file.as_deref().is_some_and(|file| {
                    if p.ends_with(".rs") {
                        file.ends_with(p.as_str())
                    } else {
                        file.contains(p.as_str())
                    }
                })
            })
        };
        let function_ok = || {
            self.function
                .as_ref()
                .is_none_or(|p| without_generics(&f.function).starts_with(p.as_str()))
        };
        file_ok() && function_ok()
    }
}

/// One category and the rules that claim a site for it.
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Category {
    /// Name shown in outputs.
    pub name: String,
    /// What it is.
    #[serde(default)]
    pub description: String,
    /// Some frame matches one of these.
    #[serde(default)]
    pub frames: Vec<Pattern>,
    /// The naming frame (first outside the allocator, std, hashbrown, rayon and the
    /// tracer) matches one of these.
    #[serde(default)]
    pub innermost: Vec<Pattern>,
    /// Additionally, some frame matches one of these.
    #[serde(default)]
    pub also: Vec<Pattern>,
    /// A calibrated operation (see `analyzer calibrate`) that each allocation of this
    /// category implies beyond the allocator: the cost model adds it as indirect cost.
    #[serde(default)]
    pub indirect: Option<String>,
}

impl Category {
    /// Whether the site with these frames, named by `inner`, is in this category.
    fn claims(&self, frames: &[FrameRow], inner: Option<&FrameRow>) -> bool {
        let any = |ps: &[Pattern]| frames.iter().any(|f| ps.iter().any(|p| p.matches(f)));
        (self.frames.is_empty() || any(&self.frames))
            && (self.innermost.is_empty()
                || inner.is_some_and(|f| self.innermost.iter().any(|p| p.matches(f))))
            && (self.also.is_empty() || any(&self.also))
            && !(self.frames.is_empty() && self.innermost.is_empty())
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesFile {
    category: Vec<Category>,
}

/// Parses rules from TOML text, refusing a category that could claim no site (only
/// `also`, which narrows what `frames` or `innermost` claim), and names that would
/// read as another category's: repeated, empty, or [`UNMATCHED`]'s.
pub fn parse_rules(text: &str, path: &Path) -> Result<Vec<Category>, Error> {
    let rules = read_rules(text, path)?;
    let refuse = |reason: String| Error::Rules {
        path: path.to_owned(),
        reason,
    };
    for (i, c) in rules.iter().enumerate() {
        if c.name.trim().is_empty() {
            return Err(refuse(format!("category {} has an empty name", i + 1)));
        }
        if c.name.trim() == UNMATCHED {
            return Err(refuse(format!(
                "category \"{UNMATCHED}\" is the name of what no rule claims: name it otherwise"
            )));
        }
        if rules[..i]
            .iter()
            .any(|earlier| earlier.name.trim() == c.name.trim())
        {
            return Err(refuse(format!(
                "category \"{}\" is named twice: each name is one row of the outputs",
                c.name
            )));
        }
        if c.frames.is_empty() && c.innermost.is_empty() {
            return Err(refuse(format!(
                "category \"{}\" has neither `frames` nor `innermost`, so it claims no site \
                 (`also` only narrows what they claim)",
                c.name
            )));
        }
    }
    Ok(rules)
}

fn read_rules(text: &str, path: &Path) -> Result<Vec<Category>, Error> {
    toml::from_str::<RulesFile>(text)
        .map(|r| r.category)
        .map_err(|e| {
            // The message and its line, not the error's display: that quotes the
            // source over several lines, and errors are one line.
            let line = e
                .span()
                .and_then(|s| text.get(..s.start))
                .map(|before| before.matches('\n').count() + 1);
            let message = e.message().split_whitespace().collect::<Vec<_>>().join(" ");
            Error::Rules {
                path: path.to_owned(),
                reason: match line {
                    Some(line) => format!("line {line}: {message}"),
                    None => message,
                },
            }
        })
}

/// The built-in rules.
pub fn default_rules() -> Vec<Category> {
    parse_rules(DEFAULT_RULES, Path::new("default_categories.toml"))
        .expect("the built-in rules parse (tested)")
}

/// The index of the first rule that claims a site with these frames, or
/// `rules.len()` (unmatched).
pub fn classify(rules: &[Category], frames: &[FrameRow]) -> usize {
    let inner = naming::naming_frame(frames);
    rules
        .iter()
        .position(|c| c.claims(frames, inner))
        .unwrap_or(rules.len())
}

/// The name of category `i` from [`classify`].
pub fn category_name(rules: &[Category], i: usize) -> &str {
    rules.get(i).map_or(UNMATCHED, |c| c.name.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(function: &str, file: &str) -> FrameRow {
        FrameRow::test(function, file, None)
    }

    #[test]
    fn default_rules_parse_and_order_matters() {
        let rules = default_rules();
        assert!(rules.len() >= 6);
        let boolean_lc = [
            frame("insert_or_update<S>", "/x/bellpepper-core-0.2.1/src/lc.rs"),
            frame("lc<S>", "/x/bellpepper-core-0.2.1/src/gadgets/boolean.rs"),
            frame(
                "enforce<S>",
                "/x/bellperson-0.27.0/src/groth16/prover/mod.rs",
            ),
        ];
        assert_eq!(
            rules[classify(&rules, &boolean_lc)].name,
            "Boolean::lc temporaries"
        );
        let enforce_lc = [boolean_lc[0].clone(), boolean_lc[2].clone()];
        assert_eq!(
            rules[classify(&rules, &enforce_lc)].name,
            "enforce LinearCombination buffers"
        );
        let growth = [
            frame("grow_one<T>", "/rustc/x/library/alloc/src/raw_vec/mod.rs"),
            frame("alloc<S>", "/x/bellperson-0.27.0/src/groth16/prover/mod.rs"),
        ];
        assert_eq!(
            rules[classify(&rules, &growth)].name,
            "prover assignment vectors"
        );
        let abc = [
            frame("grow_one<T>", "/rustc/x/library/alloc/src/raw_vec/mod.rs"),
            frame(
                "enforce<S>",
                "/x/bellperson-0.27.0/src/groth16/prover/mod.rs",
            ),
        ];
        assert_eq!(rules[classify(&rules, &abc)].name, "prover a/b/c vectors");
        // A function whose name only starts with `enforce` builds its combinations
        // outside any closure: a gadget's, not an enforce buffer.
        let inclusion = [
            boolean_lc[0].clone(),
            frame(
                "enforce_inclusion<T>",
                "/x/storage-proofs-porep-19.1.0/src/stacked/circuit/params.rs",
            ),
        ];
        assert_eq!(
            rules[classify(&rules, &inclusion)].name,
            "gadget LinearCombinations"
        );
        // A Num cloned whole (neptune's Elt::clone) is not MultiEq's.
        let num_clone = [
            frame("clone<S>", "/x/bellpepper-core-0.2.1/src/lc.rs"),
            frame("clone<S>", "/x/bellpepper-core-0.2.1/src/gadgets/num.rs"),
        ];
        assert_eq!(rules[classify(&rules, &num_clone)].name, "Num clones");
        // The mirror prover's assignments, their bytes, and its own bookkeeping.
        let mirror = |function: &str| {
            [
                frame("grow_one<T>", "/rustc/x/library/alloc/src/raw_vec/mod.rs"),
                frame(function, "/w/synth-driver/src/mirror.rs"),
            ]
        };
        let name = |frames: &[FrameRow]| categories_name(&rules, frames);
        assert_eq!(name(&mirror("alloc<F>")), "prover assignment vectors");
        assert_eq!(name(&mirror("alloc_input<F>")), "prover assignment vectors");
        assert_eq!(
            name(&mirror("witness_bytes")),
            "witness bytes for the multiexp"
        );
        assert_eq!(name(&mirror("synthesize<C>")), UNMATCHED);
        let native = [frame(
            "create_proof_batch_priority_inner<E>",
            "/x/bellperson-0.27.0/src/groth16/prover/native.rs",
        )];
        assert_eq!(name(&native), "witness bytes for the multiexp");
        // Poseidon's per-hash vectors are a gadget's, not the circuit's construction.
        let round = [frame("full_round<S>", "/x/neptune-11.0.0/src/circuit.rs")];
        assert_eq!(
            rules[classify(&rules, &round)].name,
            "gadget bit and word vectors"
        );
    }

    fn categories_name<'r>(rules: &'r [Category], frames: &[FrameRow]) -> &'r str {
        category_name(rules, classify(rules, frames))
    }

    #[test]
    fn bad_rules_name_the_file() {
        let err = parse_rules("[[category]]\nnom = 1", Path::new("mine.toml")).unwrap_err();
        let err = err.to_string();
        assert!(err.starts_with("mine.toml: line 2: "), "{err}");
        assert!(err.contains("nom"), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }

    #[test]
    fn rules_that_could_claim_nothing_or_read_as_another_category_are_refused() {
        let parse = |text: &str| parse_rules(text, Path::new("mine.toml"));
        let one = "[[category]]\nname = \"a\"\nframes = [{ function = \"f\" }]\n";
        assert_eq!(parse(one).unwrap().len(), 1);
        for (text, says) in [
            (
                "[[category]]\nname = \"a\"\nalso = [{ function = \"f\" }]\n".to_owned(),
                "category \"a\" has neither `frames` nor `innermost`",
            ),
            (
                format!("{one}{}", one.replace("\"f\"", "\"g\"")),
                "category \"a\" is named twice",
            ),
            (
                one.replace("\"a\"", &format!("\"{UNMATCHED}\"")),
                "is the name of what no rule claims",
            ),
            (
                one.replace("\"a\"", "\" \""),
                "category 1 has an empty name",
            ),
        ] {
            let err = parse(&text).unwrap_err().to_string();
            assert!(
                err.starts_with("mine.toml: ") && err.contains(says),
                "{err}"
            );
        }
    }
}
