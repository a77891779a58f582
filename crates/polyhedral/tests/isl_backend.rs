//! isl must be built with small integers held inline (`--with-int=imath-32`, chosen by
//! `crates/isl/build.rs`): with plain imath the analytic model runs 3-5x slower, with every count
//! the same, so no other test would notice.
//!
//! The check is at link time: `isl_sioimath_bigarg_src` exists only in isl's imath-32 backend, so
//! this test fails to link ("undefined reference to `isl_sioimath_bigarg_src`") when isl was built
//! otherwise.

use loopscope_polyhedral::Ctx;

// The function is only named, never called, so its real signature (an imath-32 value and a
// scratch buffer) does not matter here; declaring it `safe` lets the test take its address
// without an `unsafe` block.
unsafe extern "C" {
    safe fn isl_sioimath_bigarg_src();
}

#[test]
fn isl_is_built_with_small_integer_imath() {
    let f: extern "C" fn() = isl_sioimath_bigarg_src;
    assert!(!std::hint::black_box(f as *const ()).is_null());
    // isl itself, linked from the same library, works.
    let ctx = Ctx::new();
    let s = ctx.set("{ [i] : 0 <= i < 2147483648 }").unwrap();
    assert_eq!(s.count(&[]).unwrap(), 1 << 31);
}
