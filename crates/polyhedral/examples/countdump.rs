// Temporary harness (not committed): recount sets dumped by LOOPSCOPE_COUNT_DUMP, with timings.
use loopscope_polyhedral::Ctx;
use std::time::Instant;

fn main() {
    let path = std::env::args().nth(1).unwrap();
    let top: usize = std::env::args()
        .nth(2)
        .map(|s| s.parse().unwrap())
        .unwrap_or(5);
    let text = std::fs::read_to_string(path).unwrap();
    let ctx = Ctx::new();
    let mut rows = Vec::new();
    let mut total = 0.0;
    let (mut ok, mut bad, mut err) = (0, 0, 0);
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let vals: Vec<(String, i64)> = f[0]
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|kv| {
                let (k, v) = kv.split_once('=').unwrap();
                (k.to_string(), v.parse().unwrap())
            })
            .collect();
        let vr: Vec<(&str, i64)> = vals.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        let set = ctx.set(f[2]).unwrap();
        let t = Instant::now();
        let r = set.count(&vr);
        let dt = t.elapsed().as_secs_f64();
        total += dt;
        let rs = match &r {
            Ok(v) => format!("Ok({v})"),
            Err(e) => format!("Err({e:?})"),
        };
        if f[3].starts_with("Ok(") && rs.starts_with("Ok(") {
            if f[3] == rs {
                ok += 1
            } else {
                bad += 1;
                println!("MISMATCH old {} new {} : {}", f[3], rs, f[2]);
            }
        } else if rs.starts_with("Err") {
            err += 1;
        } else {
            ok += 1
        }
        rows.push((dt, f[1].parse::<f64>().unwrap() / 1e6, rs, f[2].to_string()));
    }
    rows.sort_by(|a, b| b.0.total_cmp(&a.0));
    for (dt, old, rs, s) in rows.iter().take(top) {
        println!("{dt:.4}s (old {old:.4}s) {rs} {}", &s[..s.len().min(400)]);
    }
    let old: f64 = rows.iter().map(|r| r.1).sum();
    println!(
        "sets {} total {total:.3}s (old {old:.3}s) same {ok} mismatched {bad} errors {err}",
        rows.len()
    );
}
