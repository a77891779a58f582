use loopscope_polyhedral::Ctx;
fn main() {
    for f in std::env::args().skip(1) {
        let text = std::fs::read_to_string(&f).unwrap();
        let ctx = Ctx::new();
        let s = ctx.set(text.trim()).unwrap();
        let t = std::time::Instant::now();
        let r = s.count(&[]);
        println!("{f}: {:?} {:.2}s", r, t.elapsed().as_secs_f64());
    }
}
