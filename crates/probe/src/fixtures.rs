//! Recorded probe runs for tests: curves whose points are `[size_bytes, value, median]`, as the
//! JSON report keeps them, with their knees found afresh by today's rules.

use crate::knee::Point;
use crate::run::{Curve, curve_knees};

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
            Curve {
                name: name.into(),
                unit: c["unit"].as_str().unwrap().into(),
                knees: curve_knees(name, &points),
                points,
            }
        })
        .collect()
}
