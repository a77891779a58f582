//! Recorded probe runs for tests: curves whose points are `[size_bytes, value, median]`, as the
//! JSON report keeps them, with their knees found afresh by today's rules.

use crate::knee::{KneeOptions, Point, find_code_knees, find_knees};
use crate::run::Curve;

/// The curves of a recorded run (`include_str!` of a file under `testdata/`).
pub(crate) fn fixture_curves(text: &str) -> Vec<Curve> {
    let doc: serde_json::Value = serde_json::from_str(text).unwrap();
    doc["curves"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let points: Vec<Point> = c["points"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| Point {
                    size_bytes: p[0].as_u64().unwrap(),
                    value: p[1].as_f64().unwrap(),
                    median: p[2].as_f64().unwrap(),
                })
                .collect();
            let name = c["name"].as_str().unwrap();
            let knees = if matches!(name, "nop_body" | "jump_chain" | "random_jump_chain") {
                find_code_knees(&points)
            } else {
                find_knees(&points, &KneeOptions::default())
            };
            Curve {
                name: name.into(),
                unit: c["unit"].as_str().unwrap().into(),
                knees,
                points,
            }
        })
        .collect()
}
