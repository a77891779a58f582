//! A memory budget for YAML, checked before the document is built.
//!
//! yaml-rust2's loader has no limit of its own: every alias is a deep copy of its anchor's
//! node, so a 2 KB file of nested anchors ("billion laughs") expands to gigabytes. This pass
//! runs the same parser's event stream without building anything and adds up what the loader
//! would allocate (a node's fixed size plus its text, an anchored node twice since the loader
//! keeps a copy, an alias as much as its anchor), and refuses the document at the event where
//! the total passes [`YAML_EXPANSION_CAP_BYTES`] or the nesting passes [`YAML_DEPTH_CAP`].
//! Anchors under keys the import ignores count too: the loader expands them all the same.

use std::collections::HashMap;
use std::path::Path;

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

use crate::MachineError;
use crate::units::format_bytes;

/// The most memory a kerncraft YAML file may expand to (estimated as described above); real
/// files need well under 1 MiB.
pub const YAML_EXPANSION_CAP_BYTES: u64 = 64 << 20;

/// The deepest nesting of mappings and sequences a kerncraft YAML file may have.
pub const YAML_DEPTH_CAP: usize = 64;

/// What one node costs besides its text: the loader's `Yaml` value and its map or list entry.
const NODE_BYTES: u64 = 64;

/// Refuses `text` when loading it would pass the budget; `path` names it in the error.
pub(crate) fn check_expansion(text: &str, path: &Path) -> Result<(), MachineError> {
    let mut budget = Budget::default();
    let mut parser = Parser::new_from_str(text);
    let scanned = parser.load(&mut budget, true);
    if let Some((mark, message)) = budget.refused {
        return Err(MachineError::Syntax {
            path: path.to_owned(),
            line: mark.line().max(1),
            column: mark.col() + 1,
            message,
        });
    }
    // Syntax errors are left to the loader, which reports them the same way.
    let _ = scanned;
    Ok(())
}

#[derive(Default)]
struct Budget {
    used_bytes: u64,
    /// Open mappings and sequences: their anchor id (0: none) and `used_bytes` when they began.
    open: Vec<(usize, u64)>,
    /// What each anchor's node cost.
    anchors: HashMap<usize, u64>,
    refused: Option<(Marker, String)>,
}

impl Budget {
    fn charge(&mut self, bytes: u64, mark: Marker) {
        self.used_bytes = self.used_bytes.saturating_add(bytes);
        if self.used_bytes > YAML_EXPANSION_CAP_BYTES && self.refused.is_none() {
            self.refused = Some((
                mark,
                format!(
                    "the YAML expands past {} in memory (anchors and aliases are copied out); \
                     the import's cap is {} (see docs/limits.md)",
                    format_bytes(YAML_EXPANSION_CAP_BYTES),
                    format_bytes(YAML_EXPANSION_CAP_BYTES)
                ),
            ));
        }
    }

    /// A node of `bytes` ended; an anchored one is also copied into the loader's anchor table.
    fn anchored(&mut self, anchor: usize, bytes: u64, mark: Marker) {
        if anchor > 0 {
            self.anchors.insert(anchor, bytes);
            self.charge(bytes, mark);
        }
    }

    fn open(&mut self, anchor: usize, mark: Marker) {
        self.open.push((anchor, self.used_bytes));
        self.charge(NODE_BYTES, mark);
        if self.open.len() > YAML_DEPTH_CAP && self.refused.is_none() {
            self.refused = Some((
                mark,
                format!(
                    "mappings and lists nested deeper than {YAML_DEPTH_CAP} levels \
                     (see docs/limits.md)"
                ),
            ));
        }
    }

    fn close(&mut self, mark: Marker) {
        if let Some((anchor, start)) = self.open.pop() {
            self.anchored(anchor, self.used_bytes - start, mark);
        }
    }
}

impl MarkedEventReceiver for Budget {
    fn on_event(&mut self, event: Event, mark: Marker) {
        if self.refused.is_some() {
            return;
        }
        match event {
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                self.open(anchor, mark);
            }
            Event::SequenceEnd | Event::MappingEnd => self.close(mark),
            Event::Scalar(text, _, anchor, _) => {
                let bytes = NODE_BYTES + text.len() as u64;
                self.charge(bytes, mark);
                self.anchored(anchor, bytes, mark);
            }
            Event::Alias(anchor) => {
                let bytes = self.anchors.get(&anchor).copied().unwrap_or(NODE_BYTES);
                self.charge(bytes, mark);
            }
            Event::Nothing
            | Event::StreamStart
            | Event::StreamEnd
            | Event::DocumentStart
            | Event::DocumentEnd => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import_kerncraft_str;

    /// Nine levels of nine aliases each under a key the import ignores: 9^9 strings.
    fn laughs(levels: usize) -> String {
        let mut text = String::from("model name: Test\nignored:\n  a0: &a0 [\"lol\", \"lol\"]\n");
        for i in 1..=levels {
            let aliases = vec![format!("*a{}", i - 1); 9].join(", ");
            text.push_str(&format!("  a{i}: &a{i} [{aliases}]\n"));
        }
        text
    }

    #[test]
    fn billion_laughs_are_refused_before_they_expand() {
        let text = laughs(9);
        assert!(text.len() < 2048);
        let e = import_kerncraft_str(&text, Path::new("laughs.yml")).unwrap_err();
        let message = e.to_string();
        assert!(message.starts_with("laughs.yml:"), "{message}");
        assert!(
            message.contains("expands past 64 MiB in memory"),
            "{message}"
        );
        assert!(!message.contains('\n'));
    }

    #[test]
    fn a_few_aliases_are_fine() {
        let text = "model name: Test\nsockets: 1\nx: &x {a: 1}\ny: [*x, *x, *x]\n\
                    FLOPs per cycle: {DP: {total: 4}, SP: {total: 8}}\n\
                    memory hierarchy:\n  - level: L1\n    cache per group: {sets: 64, ways: 8}\n";
        let import = import_kerncraft_str(text, Path::new("ok.yml")).unwrap();
        assert_eq!(import.machine.model, "Test");
        // Two levels of laughs: 9 * 9 copies of a small list, far below the budget.
        assert!(check_expansion(&laughs(2), Path::new("ok.yml")).is_ok());
    }

    #[test]
    fn deep_nesting_is_refused() {
        let text = format!("a: {}1{}\n", "[".repeat(100), "]".repeat(100));
        let e = check_expansion(&text, Path::new("deep.yml")).unwrap_err();
        assert!(e.to_string().contains("nested deeper than 64"), "{e}");
    }

    proptest::proptest! {
        #[test]
        fn the_budget_holds_on_any_chain_of_aliases(levels in 0usize..12,
                                                     cut in 0usize..2048,
                                                     whole in proptest::prelude::any::<bool>()) {
            let text = laughs(levels);
            let cut = if whole {
                text.len()
            } else {
                (0..=cut.min(text.len())).rev().find(|&c| text.is_char_boundary(c)).unwrap_or(0)
            };
            // Whatever the depth of the chain or where it is cut: an answer, never a blow-up.
            let result = import_kerncraft_str(&text[..cut], Path::new("fuzz.yml"));
            // Nine levels expand to 9^9 copies: whole, past the budget.
            if whole && levels >= 9 {
                let message = result.map(|_| ()).unwrap_err().to_string();
                proptest::prop_assert!(message.contains("expands past"), "{}", message);
            }
        }
    }
}
