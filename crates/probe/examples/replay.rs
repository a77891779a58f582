//! Finds the knees of recorded `probe --json` curves again and names them (for working on
//! the rules with real curves): `cargo run --example replay -p loopscope-probe -- RUN.json...`.
//! Levels are named against this machine's detected caches.

use loopscope_probe::{Curve, Point, assign_levels, curve_knees};

fn main() {
    let machine = loopscope_machine::detect().expect("detect the machine");
    for path in std::env::args().skip(1) {
        let text = std::fs::read_to_string(&path).expect("read the run");
        let doc: serde_json::Value = serde_json::from_str(&text).expect("parse the run");
        let curves: Vec<Curve> = doc["curves"]
            .as_array()
            .expect("curves")
            .iter()
            .map(|c| {
                let points: Vec<Point> = c["points"]
                    .as_array()
                    .expect("points")
                    .iter()
                    .map(|p| {
                        let (s, v, m) = if p.is_array() {
                            (&p[0], &p[1], &p[2])
                        } else {
                            (&p["size_bytes"], &p["value"], &p["median"])
                        };
                        Point {
                            size_bytes: s.as_u64().unwrap_or(0),
                            value: v.as_f64().unwrap_or(0.0),
                            median: m.as_f64().unwrap_or(0.0),
                        }
                    })
                    .collect();
                let name = c["name"].as_str().unwrap_or("");
                Curve {
                    name: name.into(),
                    unit: c["unit"].as_str().unwrap_or("").into(),
                    knees: curve_knees(name, &points),
                    points,
                }
            })
            .collect();
        let levels = assign_levels(&machine, &curves);
        print!("{path}:");
        for l in &levels.knees {
            print!(
                "  L{}{} {} KiB ({})",
                l.level,
                l.kind.suffix(),
                l.knee.size_bytes / 1024,
                l.method
            );
        }
        println!();
        for c in &curves {
            for k in &c.knees {
                println!(
                    "    {:18} {:>8} KiB  cliff {}..{} rise {}..{} mid {}  {:.3}->{:.3} {:.2}x",
                    c.name,
                    k.size_bytes / 1024,
                    k.cliff_lo_bytes / 1024,
                    k.cliff_hi_bytes / 1024,
                    k.rise_start_bytes / 1024,
                    k.end_bytes / 1024,
                    k.rise_mid_bytes / 1024,
                    k.before,
                    k.after,
                    k.ratio
                );
            }
        }
    }
}
