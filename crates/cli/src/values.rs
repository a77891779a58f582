//! Numbers from flags, checked where they enter: a float flag takes a finite value inside its
//! range, so no NaN, infinity or negative zero reaches a library call (where, for one, a
//! `Duration` built from it would panic). clap runs these as value parsers, so a bad value is a
//! usage error naming the flag.

/// The longest time limit a flag accepts, in seconds (about 31 years: "no limit" in practice,
/// and far inside what a `Duration` holds).
pub const MAX_SECONDS: f64 = 1e9;

/// The largest rate, latency or bandwidth a flag accepts (GFLOP/s, ns): far above any machine,
/// small enough that products and sums of them stay finite.
pub const MAX_QUANTITY: f64 = 1e12;

/// A time limit in seconds: finite, above 0 and at most [`MAX_SECONDS`].
pub fn seconds(text: &str) -> Result<f64, String> {
    above_zero_at_most(text, MAX_SECONDS, "seconds")
}

/// A rate or a latency (GFLOP/s, ns): finite, above 0 and at most [`MAX_QUANTITY`].
pub fn positive(text: &str) -> Result<f64, String> {
    above_zero_at_most(text, MAX_QUANTITY, "a number")
}

/// A finite value above 0 and at most `most`; the error names `what` was expected.
fn above_zero_at_most(text: &str, most: f64, what: &str) -> Result<f64, String> {
    let value = finite(text)?;
    if value > 0.0 && value <= most {
        Ok(value)
    } else {
        Err(format!("expected {what} above 0 and at most {most:e}"))
    }
}

/// A percentage: finite, from 0 to 100.
pub fn percent(text: &str) -> Result<f64, String> {
    let value = finite(text)?;
    if (0.0..=100.0).contains(&value) {
        // -0 is inside the range; it means 0.
        Ok(value + 0.0)
    } else {
        Err("expected a percentage from 0 to 100".to_owned())
    }
}

/// A decimal number that is neither NaN nor infinite.
fn finite(text: &str) -> Result<f64, String> {
    let value: f64 = text
        .trim()
        .parse()
        .map_err(|_| "expected a decimal number".to_owned())?;
    if value.is_finite() {
        Ok(value)
    } else {
        Err("expected a finite number".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn seconds_are_finite_and_positive() {
        assert_eq!(seconds("30"), Ok(30.0));
        assert_eq!(seconds("0.5"), Ok(0.5));
        for bad in [
            "nan", "NaN", "inf", "-inf", "infinity", "-0", "0", "-1", "1e10", "", "x",
        ] {
            assert!(seconds(bad).is_err(), "{bad} was accepted");
        }
        assert_eq!(seconds("nan").unwrap_err(), "expected a finite number");
    }

    #[test]
    fn rates_and_percentages_are_in_range() {
        assert_eq!(positive("128"), Ok(128.0));
        for bad in ["nan", "inf", "-0", "0", "-3", "1e13"] {
            assert!(positive(bad).is_err(), "{bad} was accepted");
        }
        assert_eq!(percent("0"), Ok(0.0));
        assert!(percent("-0").unwrap().is_sign_positive());
        assert_eq!(percent("100"), Ok(100.0));
        for bad in ["nan", "-inf", "100.5", "-1"] {
            assert!(percent(bad).is_err(), "{bad} was accepted");
        }
    }

    proptest! {
        #[test]
        fn accepted_values_are_finite_and_in_range(text in "\\PC{0,12}|[-+]?[0-9.eE+-]{1,12}") {
            if let Ok(v) = seconds(&text) {
                prop_assert!(v.is_finite() && v > 0.0 && v <= MAX_SECONDS);
                prop_assert!(std::time::Duration::try_from_secs_f64(v).is_ok());
            }
            if let Ok(v) = positive(&text) {
                prop_assert!(v.is_finite() && v > 0.0 && v <= MAX_QUANTITY);
            }
            if let Ok(v) = percent(&text) {
                prop_assert!((0.0..=100.0).contains(&v) && v.is_sign_positive());
            }
        }

        #[test]
        fn any_finite_value_in_range_is_accepted(v in 1e-300f64..1e9) {
            prop_assert_eq!(seconds(&v.to_string()), Ok(v));
        }
    }
}
