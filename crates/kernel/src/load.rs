//! A kernel file read, parsed, bound to `-D` values and placed in memory: what every command
//! that takes a kernel file starts from.

use std::collections::BTreeMap;
use std::path::Path;

use crate::bounded::read_kernel_text;
use crate::ir::Kernel;
use crate::layout::Layout;
use crate::listener::Listener;
use crate::{KernelError, parse_kernel_with_values};

/// A kernel file read, parsed and bound: the kernel, its parameter values (in
/// [`Kernel::params`] order) and where its arrays are placed.
#[derive(Debug, Clone)]
pub struct LoadedKernel {
    /// The file's name as messages show it.
    pub origin: String,
    /// The file's text.
    pub text: String,
    /// The parsed kernel.
    pub kernel: Kernel,
    /// Parameter values, in [`Kernel::params`] order.
    pub params: Vec<i64>,
    /// Where the arrays are placed.
    pub layout: Layout,
}

impl LoadedKernel {
    /// Reads `path`, binds the `define` values (warning `listener` of each the kernel does not
    /// use) and places the arrays, at the `--base` addresses `base` if given.
    pub fn load(
        path: &Path,
        define: &[(String, i64)],
        base: Option<&str>,
        listener: &dyn Listener,
    ) -> Result<LoadedKernel, KernelError> {
        if let Some((name, first, second)) = repeated_definition(define) {
            return Err(KernelError::Binding {
                origin: "-D".into(),
                message: format!("`{name}` is given twice ({name}={first} and {name}={second})"),
            });
        }
        let (text, kernel) = read_kernel_file_with_values(path, define)?;
        for unused in kernel.unused_definitions(define) {
            listener.warn(&format!("-D {unused}: the kernel does not use `{unused}`"));
        }
        let params = kernel.param_values(define)?;
        let bases = base.map(parse_bases).transpose()?.unwrap_or_default();
        let layout = kernel.layout(&params, &bases)?;
        for (i, j) in layout.overlaps() {
            listener.warn(&overlap_warning(&kernel, &layout, i, j));
        }
        kernel.check_subscripts(&params)?;
        kernel.check_addresses(&params, &layout)?;
        let estimate = kernel.estimate_accesses(&params)?;
        if estimate.exact && estimate.accesses > u128::from(u64::MAX) {
            return Err(KernelError::Binding {
                origin: kernel.origin.clone(),
                message: format!(
                    "the kernel makes {} accesses with these values, more than 2^64 - 1 (the \
                     largest count the tools keep)",
                    estimate.accesses
                ),
            });
        }
        Ok(LoadedKernel {
            origin: kernel.origin.clone(),
            text,
            kernel,
            params,
            layout,
        })
    }

    /// `NAME: value` of every parameter.
    pub fn param_map(&self) -> BTreeMap<String, i64> {
        self.kernel
            .params
            .iter()
            .cloned()
            .zip(self.params.iter().copied())
            .collect()
    }
}

/// The text of the kernel file at `path` and the kernel parsed from it, not yet bound (so a
/// product or division of parameters, `j*N`, is refused).
pub fn read_kernel_file(path: &Path) -> Result<(String, Kernel), KernelError> {
    read_kernel_file_with_values(path, &[])
}

/// The text of the kernel file at `path` and the kernel parsed from it with the parameter
/// values `define` folded into products and divisions of symbols
/// ([`parse_kernel_with_values`]); the kernel is not yet bound.
pub fn read_kernel_file_with_values(
    path: &Path,
    define: &[(String, i64)],
) -> Result<(String, Kernel), KernelError> {
    let origin = path.display().to_string();
    let text = read_kernel_text(path).map_err(|message| KernelError::Io {
        origin: origin.clone(),
        message,
    })?;
    let kernel = parse_kernel_with_values(&text, &origin, define)?;
    Ok((text, kernel))
}

/// Parses `NAME=VALUE` (a `-D` value): the name a C identifier (as the kernel's symbols are),
/// the value a 64-bit integer, both trimmed. Messages do not repeat the text: the caller names
/// the flag and the value.
pub fn parse_definition(text: &str) -> Result<(String, i64), String> {
    let (name, value) = text
        .split_once('=')
        .ok_or_else(|| "expected NAME=VALUE".to_owned())?;
    let name = name.trim();
    if name.is_empty() {
        return Err("the name before `=` is missing".to_owned());
    }
    if !is_identifier(name) {
        return Err(format!(
            "`{name}` is not a name (expected a letter or `_`, then letters, digits or `_`)"
        ));
    }
    let value: i64 = value
        .trim()
        .parse()
        .map_err(|_| format!("the value of `{name}` is not a 64-bit integer"))?;
    Ok((name.to_owned(), value))
}

/// True for a C identifier: a letter or `_`, then letters, digits or `_` (ASCII).
fn is_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `--base: arrays `a` (bytes 0..1600) and `b` (bytes 800..2400) overlap; ...`.
fn overlap_warning(kernel: &Kernel, layout: &Layout, i: usize, j: usize) -> String {
    let range = |k: usize| {
        format!(
            "`{}` (bytes {}..{})",
            kernel.arrays[k].name,
            layout.base[k],
            layout.base[k].saturating_add(layout.size_bytes[k])
        )
    };
    format!(
        "--base: arrays {} and {} overlap; their accesses alias (counted as the same lines)",
        range(i),
        range(j)
    )
}

/// The first name given twice in `-D` values, with its two values.
fn repeated_definition(define: &[(String, i64)]) -> Option<(&str, i64, i64)> {
    define.iter().enumerate().find_map(|(i, (name, first))| {
        define[i + 1..]
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, second)| (name.as_str(), *first, *second))
    })
}

/// Parses `--base A=0,B=800,C=0x640`: array names and their addresses (decimal or `0x` hex).
pub fn parse_bases(text: &str) -> Result<Vec<(String, u64)>, KernelError> {
    let bad = |message: String| KernelError::Binding {
        origin: "--base".into(),
        message,
    };
    text.split(',')
        .map(|part| {
            let (name, addr) = part
                .split_once('=')
                .ok_or_else(|| bad(format!("expected NAME=ADDRESS, found `{part}`")))?;
            let addr = addr.trim();
            let value = match addr.strip_prefix("0x").or_else(|| addr.strip_prefix("0X")) {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => addr.parse(),
            }
            .map_err(|_| bad(format!("address of `{name}` is not a number: `{addr}`")))?;
            Ok((name.trim().to_owned(), value))
        })
        .collect::<Result<Vec<(String, u64)>, KernelError>>()
        .and_then(|bases| {
            for (i, (name, _)) in bases.iter().enumerate() {
                if bases[..i].iter().any(|(n, _)| n == name) {
                    return Err(bad(format!("`{name}` is given twice")));
                }
            }
            Ok(bases)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::listener::Silent;
    use proptest::prelude::*;

    #[test]
    fn definitions_and_bases_parse() {
        assert_eq!(parse_definition(" N = -3 "), Ok(("N".into(), -3)));
        assert_eq!(parse_definition("_n2=7"), Ok(("_n2".into(), 7)));
        assert_eq!(parse_definition("N").unwrap_err(), "expected NAME=VALUE");
        assert_eq!(
            parse_definition("N=x").unwrap_err(),
            "the value of `N` is not a 64-bit integer"
        );
        assert!(parse_definition("N=1e3").is_err());
        assert_eq!(
            parse_definition(" =5").unwrap_err(),
            "the name before `=` is missing"
        );
        for bad in ["1x=5", "a b=5", "a-b=5", "\u{feff}N=5", "N\0=5", "é=1"] {
            let e = parse_definition(bad).unwrap_err();
            assert!(e.contains("is not a name"), "{bad}: {e}");
        }
        assert_eq!(
            parse_bases("A=0, B=0x40").unwrap(),
            [("A".to_string(), 0), ("B".to_string(), 64)]
        );
        let e = parse_bases("A=zz").unwrap_err().to_string();
        assert_eq!(e, "--base: address of `A` is not a number: `zz`");
        let e = parse_bases("A").unwrap_err().to_string();
        assert_eq!(e, "--base: expected NAME=ADDRESS, found `A`");
        let e = parse_bases("A=0, A=8").unwrap_err().to_string();
        assert_eq!(e, "--base: `A` is given twice");
    }

    #[test]
    fn a_name_defined_twice_is_refused() {
        let define = [
            ("N".to_string(), 5),
            ("M".to_string(), 1),
            ("N".to_string(), 6),
        ];
        let e = LoadedKernel::load(Path::new("/nonexistent.c"), &define, None, &Silent)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "-D: `N` is given twice (N=5 and N=6)");
    }

    struct Heard(std::sync::Mutex<Vec<String>>);

    impl Listener for Heard {
        fn warn(&self, message: &str) {
            self.0.lock().unwrap().push(message.to_owned());
        }
    }

    #[test]
    fn a_loaded_kernel_is_bound_and_placed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("copy.c");
        std::fs::write(
            &path,
            "double a[N], b[N];\nfor (int i = 0; i < N; ++i)\n  b[i] = a[i];\n",
        )
        .unwrap();
        let define = [("N".to_string(), 10), ("M".to_string(), 1)];
        let heard = Heard(Default::default());
        let loaded = LoadedKernel::load(&path, &define, Some("b=0x1000"), &heard).unwrap();
        assert_eq!(loaded.params, [10]);
        // `a` follows the highest end placed so far, aligned to 64 bytes.
        assert_eq!(loaded.layout.base, [4096 + 128, 4096]);
        assert_eq!(loaded.param_map().get("N"), Some(&10));
        assert_eq!(
            *heard.0.lock().unwrap(),
            ["-D M: the kernel does not use `M`"]
        );
        let heard = Heard(Default::default());
        LoadedKernel::load(&path, &define[..1], Some("a=0,b=8"), &heard).unwrap();
        assert_eq!(
            *heard.0.lock().unwrap(),
            [
                "--base: arrays `a` (bytes 0..80) and `b` (bytes 8..88) overlap; their accesses \
                 alias (counted as the same lines)"
            ]
        );
        let heard = Heard(Default::default());
        LoadedKernel::load(&path, &define[..1], Some("a=0,b=80"), &heard).unwrap();
        assert!(heard.0.lock().unwrap().is_empty());
        let missing = dir.path().join("missing.c");
        let e = LoadedKernel::load(&missing, &[], None, &Silent).unwrap_err();
        assert!(
            e.to_string()
                .starts_with(&format!("{}: cannot read: ", missing.display()))
        );
    }

    proptest! {
        #[test]
        fn parsers_never_panic(text in "\\PC{0,40}") {
            let _ = parse_definition(&text);
            let _ = parse_bases(&text);
        }

        #[test]
        fn accepted_definitions_have_identifier_names(text in "[ -~]{0,12}|[a-zA-Z_0-9 =-]{0,12}") {
            if let Ok((name, _)) = parse_definition(&text) {
                prop_assert!(is_identifier(&name));
                prop_assert!(!name.is_empty() && !name.as_bytes()[0].is_ascii_digit());
            }
        }
    }
}
