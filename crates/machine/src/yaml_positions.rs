//! Where each value of a loaded YAML document stands in its text.
//!
//! yaml-rust2's `Yaml` tree keeps no positions, yet a bad value (`cores per group: 1.5`) should
//! be named by line and column like a syntax error. The same parser's event stream carries a
//! mark for every node, so this pass rebuilds the document's shape with those marks and walks it
//! beside the loaded tree, remembering each loaded node's address. The loaded tree is never
//! changed afterwards, so the addresses stay valid for as long as it lives. An alias is marked
//! where the alias stands; the nodes copied under it have no position.

use std::collections::HashMap;

use yaml_rust2::Yaml;
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

/// 1-based line and column of the loaded nodes of one document, by the node's address.
#[derive(Debug, Default)]
pub(crate) struct Positions {
    by_address: HashMap<usize, (usize, usize)>,
}

impl Positions {
    /// The positions of the nodes of `root`, the first document loaded from `text`.
    pub(crate) fn of(text: &str, root: &Yaml) -> Positions {
        let mut shape = Shape::default();
        let mut parser = Parser::new_from_str(text);
        let mut positions = Positions::default();
        // A text the loader accepted parses again; if it did not, positions are simply absent.
        if parser.load(&mut shape, false).is_ok() {
            if let Some(node) = &shape.root {
                positions.walk(root, node);
            }
        }
        positions
    }

    /// Line and column (1-based) of `value`, when it is a node of the document.
    pub(crate) fn get(&self, value: &Yaml) -> Option<(usize, usize)> {
        self.by_address.get(&address(value)).copied()
    }

    fn walk(&mut self, value: &Yaml, node: &Node) {
        self.by_address.insert(
            address(value),
            (node.mark.line().max(1), node.mark.col() + 1),
        );
        match (value, &node.children) {
            (Yaml::Array(items), Some(children)) if items.len() == children.len() => {
                for (item, child) in items.iter().zip(children) {
                    self.walk(item, child);
                }
            }
            (Yaml::Hash(hash), Some(children)) if 2 * hash.len() == children.len() => {
                for ((key, item), pair) in hash.iter().zip(children.chunks(2)) {
                    self.walk(key, &pair[0]);
                    self.walk(item, &pair[1]);
                }
            }
            _ => {}
        }
    }
}

fn address(value: &Yaml) -> usize {
    std::ptr::from_ref(value) as usize
}

/// One node of the document's shape: its mark, and for a sequence its items, for a mapping its
/// keys and values in turn.
struct Node {
    mark: Marker,
    children: Option<Vec<Node>>,
}

#[derive(Default)]
struct Shape {
    open: Vec<Node>,
    root: Option<Node>,
}

impl Shape {
    fn close(&mut self, node: Node) {
        match self.open.last_mut() {
            Some(parent) => parent.children.get_or_insert_with(Vec::new).push(node),
            None if self.root.is_none() => self.root = Some(node),
            None => {}
        }
    }
}

impl MarkedEventReceiver for Shape {
    fn on_event(&mut self, event: Event, mark: Marker) {
        match event {
            Event::Scalar(..) | Event::Alias(_) => self.close(Node {
                mark,
                children: None,
            }),
            Event::SequenceStart(..) | Event::MappingStart(..) => self.open.push(Node {
                mark,
                children: Some(Vec::new()),
            }),
            Event::SequenceEnd | Event::MappingEnd => {
                if let Some(node) = self.open.pop() {
                    self.close(node);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use yaml_rust2::YamlLoader;

    #[test]
    fn values_are_found_at_their_line_and_column() {
        let text = "a: 1\nlevels:\n  - level: L1\n    cores per group: 1.5\n";
        let docs = YamlLoader::load_from_str(text).unwrap();
        let positions = Positions::of(text, &docs[0]);
        assert_eq!(positions.get(&docs[0]["a"]), Some((1, 4)));
        let cores = &docs[0]["levels"][0]["cores per group"];
        assert_eq!(positions.get(cores), Some((4, 22)));
        assert_eq!(positions.get(&Yaml::Integer(1)), None);
    }
}
