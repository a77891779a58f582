//! Symbol names as people read them: Rust (legacy and v0) and C++ (Itanium) manglings
//! demangled, and of a C++ symbol the demangler refuses, at least its qualified name.

/// Brackets nested deeper than this end the reading of a mangled name: no real name is that
/// deep, and a hostile one must not make the reader recurse without bound.
const MAX_MANGLED_DEPTH: usize = 64;

/// The readable name of a symbol: Rust (legacy and v0) and C++ manglings demangled.
pub fn demangle(raw: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(raw) {
        return format!("{d:#}");
    }
    if raw.starts_with("_Z") {
        if let Some(text) = demangle_cpp(raw) {
            return text;
        }
        if let Some(name) = leading_name(raw) {
            return name;
        }
    }
    raw.to_owned()
}

fn demangle_cpp(raw: &str) -> Option<String> {
    let symbol = cpp_demangle::Symbol::new(raw).ok()?;
    symbol
        .demangle(&cpp_demangle::DemangleOptions::default())
        .ok()
}

/// The qualified name at the start of an Itanium-mangled symbol the demangler could not read
/// whole (it refuses some template expressions, such as GCC's `sr` in the `enable_if` of a
/// return type), with `(…)` for a function's parameters: `_ZSt9__fill_a1IPffE…` reads
/// `std::__fill_a1<float*, float>(…)`. A template argument list the demangler cannot read
/// either is elided whole, `<…>`, never cut inside. `None` unless a name was read.
fn leading_name(raw: &str) -> Option<String> {
    let mangled = raw.strip_prefix("_Z")?.as_bytes();
    let name = read_name(mangled)?;
    let text = name
        .demangled(mangled)
        .unwrap_or_else(|| name.elided.clone());
    let params = if name.function { "(…)" } else { "" };
    Some(format!("{text}{params}"))
}

/// The name at the start of an encoding (after `_Z`), as far as it was read.
struct MangledName {
    /// Where its bytes start (after `N` and its qualifiers) and end (after the `E` closing a
    /// nested name); `None` when it was not read to its end.
    bytes: Option<(usize, usize)>,
    nested: bool,
    /// It ends in template arguments: a function template's encoding then has a return type.
    templated: bool,
    /// A constructor or destructor, which has no return type even when templated.
    structor: bool,
    /// Something follows it: a function's parameters (a variable has none).
    function: bool,
    /// The name with every template argument list written `<…>`.
    elided: String,
}

impl MangledName {
    /// The name as the demangler reads it alone, in an encoding made up around it (returning
    /// void, taking nothing): `None` when it refuses that too.
    fn demangled(&self, mangled: &[u8]) -> Option<String> {
        let (start, end) = self.bytes?;
        let name = std::str::from_utf8(mangled.get(start..end)?).ok()?;
        let returns = self.templated && !self.structor;
        let made_up = format!(
            "_Z{}{name}{}v",
            if self.nested { "N" } else { "" },
            if returns { "v" } else { "" }
        );
        let text = demangle_cpp(&made_up)?;
        let text = text.strip_suffix("()")?;
        if returns {
            text.strip_prefix("void ").map(str::to_owned)
        } else {
            Some(text.to_owned())
        }
    }
}

/// Reads the name, nested (`N…E`) or not, at the start of `mangled`.
fn read_name(mangled: &[u8]) -> Option<MangledName> {
    let nested = mangled.first() == Some(&b'N');
    let mut at = usize::from(nested);
    while nested && matches!(mangled.get(at), Some(b'r' | b'V' | b'K' | b'R' | b'O')) {
        at += 1;
    }
    let start = at;
    let mut parts: Vec<String> = Vec::new();
    let (mut templated, mut structor) = (false, false);
    loop {
        match next_part(mangled, at, &parts, nested)? {
            Part::Name {
                text,
                end,
                is_structor,
            } => {
                (at, templated) = (end, false);
                structor |= is_structor;
                parts.push(text);
                // An unscoped name is one name (after `std`) and perhaps its arguments.
                if !nested
                    && mangled.get(at) != Some(&b'I')
                    && parts.len() > usize::from(parts[0] == "std")
                {
                    break;
                }
            }
            Part::Arguments { end } => {
                (at, templated) = (end, true);
                if let Some(last) = parts.last_mut() {
                    last.push_str("<…>");
                }
                if !nested {
                    break;
                }
            }
            Part::Linkage => at += 1,
            Part::None => break,
        }
    }
    if parts.last().is_none_or(|p| p == "std") {
        return None;
    }
    let closed = !nested || mangled.get(at) == Some(&b'E');
    let end = at + usize::from(nested && closed);
    Some(MangledName {
        bytes: closed.then_some((start, end)),
        nested,
        templated,
        structor,
        function: closed && end < mangled.len(),
        elided: parts.join("::"),
    })
}

/// What comes next in a name.
enum Part {
    /// One more name (`std`, a source name, a constructor, an operator), ending at `end`.
    Name {
        text: String,
        end: usize,
        is_structor: bool,
    },
    /// The template arguments of the last name, ending at `end`.
    Arguments { end: usize },
    /// The `L` of a name with internal linkage.
    Linkage,
    /// Nothing more of the name.
    None,
}

/// The part of a name at `at`, after `parts`; `None` when it cannot be read (a length or an
/// argument list running past the end).
fn next_part(mangled: &[u8], at: usize, parts: &[String], nested: bool) -> Option<Part> {
    let last_is_name = parts.last().is_some_and(|p| p != "std");
    let name = |text: String, length: usize, is_structor: bool| Part::Name {
        text,
        end: at + length,
        is_structor,
    };
    Some(match (mangled.get(at), mangled.get(at + 1)) {
        (Some(b'S'), Some(b't')) if parts.is_empty() => name("std".into(), 2, false),
        (Some(b'L'), Some(b'0'..=b'9')) => Part::Linkage,
        (Some(b'0'..=b'9'), _) => {
            let (text, end) = source_name(mangled, at)?;
            name(text, end - at, false)
        }
        (Some(b'C'), Some(b'1'..=b'5')) if last_is_name => name(class_name(parts), 2, true),
        (Some(b'D'), Some(b'0'..=b'5')) if last_is_name => {
            name(format!("~{}", class_name(parts)), 2, true)
        }
        (Some(&first @ b'a'..=b'z'), Some(&second)) if nested || !last_is_name => {
            match operator_symbol([first, second]) {
                Some(symbol) => name(format!("operator{symbol}"), 2, false),
                None => Part::None,
            }
        }
        (Some(b'I'), _) if last_is_name => Part::Arguments {
            end: skip_group(mangled, at, MAX_MANGLED_DEPTH)?,
        },
        _ => Part::None,
    })
}

/// Operator names by their codes, as the demangler writes them after `operator` (a
/// conversion, `cv`, names a type and is not read).
const OPERATORS: [(&[u8; 2], &str); 49] = [
    (b"nw", " new"),
    (b"na", " new[]"),
    (b"dl", " delete"),
    (b"da", " delete[]"),
    (b"ps", "+"),
    (b"ng", "-"),
    (b"ad", "&"),
    (b"de", "*"),
    (b"co", "~"),
    (b"pl", "+"),
    (b"mi", "-"),
    (b"ml", "*"),
    (b"dv", "/"),
    (b"rm", "%"),
    (b"an", "&"),
    (b"or", "|"),
    (b"eo", "^"),
    (b"aS", "="),
    (b"pL", "+="),
    (b"mI", "-="),
    (b"mL", "*="),
    (b"dV", "/="),
    (b"rM", "%="),
    (b"aN", "&="),
    (b"oR", "|="),
    (b"eO", "^="),
    (b"ls", "<<"),
    (b"rs", ">>"),
    (b"lS", "<<="),
    (b"rS", ">>="),
    (b"eq", "=="),
    (b"ne", "!="),
    (b"lt", "<"),
    (b"gt", ">"),
    (b"le", "<="),
    (b"ge", ">="),
    (b"ss", "<=>"),
    (b"nt", "!"),
    (b"aa", "&&"),
    (b"oo", "||"),
    (b"pp", "++"),
    (b"mm", "--"),
    (b"cm", ","),
    (b"pm", "->*"),
    (b"pt", "->"),
    (b"cl", "()"),
    (b"ix", "[]"),
    (b"qu", "?"),
    (b"aw", " co_await"),
];

fn operator_symbol(code: [u8; 2]) -> Option<&'static str> {
    OPERATORS
        .iter()
        .find(|(c, _)| **c == code)
        .map(|&(_, symbol)| symbol)
}

/// The class a constructor or destructor belongs to: the last part without its arguments.
fn class_name(parts: &[String]) -> String {
    let last = parts.last().map_or("", String::as_str);
    last.strip_suffix("<…>").unwrap_or(last).to_owned()
}

/// The end of the `<length><identifier>` source name at `at`.
fn source_name_end(mangled: &[u8], at: usize) -> Option<usize> {
    let tail = mangled.get(at..)?;
    let digits = tail.iter().take_while(|b| b.is_ascii_digit()).count();
    let length: usize = std::str::from_utf8(&tail[..digits]).ok()?.parse().ok()?;
    // The length comes from the symbol itself, so a hostile one may not fit.
    let end = at.checked_add(digits)?.checked_add(length)?;
    (end <= mangled.len()).then_some(end)
}

/// The `<length><identifier>` source name at `at`, and where it ends.
fn source_name(mangled: &[u8], at: usize) -> Option<(String, usize)> {
    let end = source_name_end(mangled, at)?;
    let digits = mangled[at..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .count();
    let name = String::from_utf8_lossy(&mangled[at + digits..end]).into_owned();
    Some((name, end))
}

/// What a bracket of a mangled name holds, which decides how lowercase letters read in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Holds {
    /// Types and template arguments (`I`, `N`, `J`, `F`, `Z`, `Dw`, `L_Z`): a lowercase
    /// letter is a builtin type.
    Types,
    /// An expression (`X`, `DT`, `Dt`, `DO`, and the operators with operand lists): two
    /// lowercase letters are an operator.
    Expression,
    /// A lambda's parameters (`Ul…E`), after which come its number and `_`.
    Lambda,
}

/// The index just past the `E` closing the bracket (such as a template argument list `I…E`)
/// that opens at `open`. Source names are skipped by their length and literals, template
/// parameters and substitutions whole, so that their digits and letters close nothing. `None`
/// when the bracket is not closed, or brackets nest deeper than `depth_left`.
fn skip_group(m: &[u8], open: usize, depth_left: usize) -> Option<usize> {
    let mut open_brackets: Vec<Holds> = Vec::new();
    let mut at = open;
    loop {
        let in_expression = open_brackets.last() == Some(&Holds::Expression);
        let opens = match (*m.get(at)?, m.get(at + 1).copied()) {
            (b'0'..=b'9', _) => {
                at = source_name_end(m, at)?;
                continue;
            }
            (b'E', _) => {
                at += 1;
                if open_brackets.pop()? == Holds::Lambda {
                    at = skip_number(m, at);
                    at += usize::from(m.get(at) == Some(&b'_'));
                }
                if open_brackets.is_empty() {
                    return Some(at);
                }
                continue;
            }
            (b'I' | b'N' | b'J' | b'F' | b'Z', _) => (Holds::Types, 1),
            (b'X', _) => (Holds::Expression, 1),
            (b'D', Some(b'T' | b't' | b'O')) => (Holds::Expression, 2),
            (b'D', Some(b'w')) => (Holds::Types, 2),
            (b'U', Some(b'l')) => (Holds::Lambda, 2),
            (b'L', Some(b'_')) => (Holds::Types, 3),
            // A call, an initializer list, a braced or parenthesised initializer, a pack's
            // size: operators whose operands run to an `E`.
            (b'c', Some(b'l'))
            | (b'i', Some(b'l'))
            | (b't', Some(b'l'))
            | (b'p', Some(b'i'))
            | (b's', Some(b'P'))
                if in_expression =>
            {
                (Holds::Expression, 2)
            }
            (b'L', _) => {
                at = skip_literal(m, at + 1, depth_left)?;
                continue;
            }
            _ => {
                at = skip_token(m, at, in_expression)?;
                continue;
            }
        };
        if open_brackets.len() >= depth_left {
            return None;
        }
        open_brackets.push(opens.0);
        at += opens.1;
    }
}

/// The index past one token at `at` that neither opens nor closes a bracket.
fn skip_token(m: &[u8], at: usize, in_expression: bool) -> Option<usize> {
    Some(match (*m.get(at)?, m.get(at + 1).copied()) {
        // Vector, float and bit-int types with a size: `Dv4_`, `DF16_`, `DB8_`.
        (b'D', Some(b'v' | b'F' | b'B' | b'U')) => skip_past(m, at + 2, b'_')?,
        (b'D', Some(_)) => at + 2,
        // An unnamed type: `Ut_`, `Ut0_`.
        (b'U', Some(b't')) => skip_past(m, at + 2, b'_')?,
        // `St`, `Sa`, ... and `Ts`, `Tu`, `Te`; else `S_`, `S0_`, `T_`, `T1_`.
        (b'S' | b'T', Some(b'a'..=b'z')) => at + 2,
        (b'S' | b'T', _) => skip_past(m, at + 1, b'_')?,
        // An array's size: `A3_`.
        (b'A', _) => {
            let after = skip_number(m, at + 1);
            after + usize::from(m.get(after) == Some(&b'_'))
        }
        // A function parameter: `fp_`, `fp0_`, `fL0p_`.
        (b'f', Some(b'p' | b'L')) => skip_past(m, at + 2, b'_')?,
        // A discriminator: `_0`, `__12_`.
        (b'_', _) => skip_number(m, at + 1),
        (b'a'..=b'z', Some(b'a'..=b'z')) if in_expression => at + 2,
        _ => at + 1,
    })
}

/// The index past a literal `L<type><value>E` whose type starts at `at`.
fn skip_literal(m: &[u8], at: usize, depth_left: usize) -> Option<usize> {
    let mut at = match (*m.get(at)?, m.get(at + 1).copied()) {
        (b'0'..=b'9', _) => source_name_end(m, at)?,
        (b'N', _) => skip_group(m, at, depth_left.checked_sub(1)?)?,
        (b'S' | b'D', _) => skip_token(m, at, false)?,
        _ => at + 1,
    };
    // The value: digits, `n` for a minus, hexadecimal for a float; never an `E`.
    while *m.get(at)? != b'E' {
        at += 1;
    }
    Some(at + 1)
}

/// The index past an optional number (`n` for a minus, then digits) at `at`.
fn skip_number(m: &[u8], at: usize) -> usize {
    let at = at + usize::from(m.get(at) == Some(&b'n'));
    at + m
        .get(at..)
        .map_or(0, |t| t.iter().take_while(|b| b.is_ascii_digit()).count())
}

/// The index just past the next `byte` from `at`.
fn skip_past(m: &[u8], at: usize, byte: u8) -> Option<usize> {
    let offset = m.get(at..)?.iter().position(|&b| b == byte)?;
    Some(at + offset + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leading_name_refuses_a_length_that_overflows() {
        assert_eq!(leading_name("_Z18446744073709551615x"), None);
    }

    #[test]
    fn demangles_cpp_and_rust() {
        assert_eq!(demangle("_Z3fooi"), "foo(int)");
        assert_eq!(
            demangle("_ZN4core9panicking5panic17h0123456789abcdefE"),
            "core::panicking::panic"
        );
        assert_eq!(demangle("main"), "main");
        assert_eq!(demangle("_Zgarbage"), "_Zgarbage");
    }

    #[test]
    fn template_classes_are_demangled_whole() {
        for (raw, shown) in [
            (
                "_ZN2ns6MatrixIdLi3EE5applyEi",
                "ns::Matrix<double, 3>::apply(int)",
            ),
            (
                "_ZNK2ns6MatrixIdLi3EE5applyEi",
                "ns::Matrix<double, 3>::apply(int) const",
            ),
            (
                "_ZN2ns6MatrixIdLin3EEC2Ev",
                "ns::Matrix<double, -3>::Matrix()",
            ),
            (
                "_ZN2ns6MatrixIbLb1EE5applyEi",
                "ns::Matrix<bool, true>::apply(int)",
            ),
            (
                "_ZNSt6vectorIiSaIiEE9push_backERKi",
                "std::vector<int, std::allocator<int> >::push_back(int const&)",
            ),
            (
                "_ZN5OuterIlE5InnerIcE1fEl",
                "Outer<long>::Inner<char>::f(long)",
            ),
            (
                "_ZNSt6vectorIiSaIiEE17_M_realloc_insertIJRKiEEEvN9__gnu_cxx17__normal_iteratorIPiS1_EEDpOT_",
                "void std::vector<int, std::allocator<int> >::_M_realloc_insert<int const&>\
                 (__gnu_cxx::__normal_iterator<int*, std::vector<int, std::allocator<int> > >, \
                 int const&)",
            ),
        ] {
            assert_eq!(demangle(raw), shown, "{raw}");
        }
    }

    /// Symbols GCC writes that the demangler refuses (an `sr` in an `enable_if`), each with
    /// its name as `c++filt` shows it and the parameters elided.
    #[test]
    fn a_name_the_demangler_refuses_keeps_its_whole_leading_name() {
        for (raw, shown) in [
            (
                "_ZSt9__fill_a1IPffEN9__gnu_cxx11__enable_ifIXsrSt11__is_scalarIT0_E7__valueEvE6__typeET_S8_RKS4_",
                "std::__fill_a1<float*, float>(…)",
            ),
            (
                "_ZN2ns6MatrixIdLi3EE2atIiEENSt9enable_ifIXsrSt11is_integralIT_E5valueEdE4typeES5_",
                "ns::Matrix<double, 3>::at<int>(…)",
            ),
            (
                "_ZSt4swapIN7Konsole12LinePropertyEENSt9enable_ifIXsrSt6__and_IJSt6__not_ISt15__is_tuple_likeIT_EESt21is_move_constructibleIS6_ESt18is_move_assignableIS6_EEE5valueEvE4typeERS6_SG_",
                "std::swap<Konsole::LineProperty>(…)",
            ),
        ] {
            assert!(demangle_cpp(raw).is_none(), "the demangler now reads {raw}");
            assert_eq!(demangle(raw), shown, "{raw}");
        }
        assert_eq!(
            leading_name("_ZN2ns3fooIiEEvT_"),
            Some("ns::foo<int>(…)".into())
        );
        assert_eq!(leading_name("_ZN2ns3varE"), Some("ns::var".into()));
        assert_eq!(
            leading_name("_ZN2ns3BoxIiEplIiEENSt9enable_ifIXsrSt11is_integralIT_E5valueEvE4typeEv"),
            Some("ns::Box<int>::operator+<int>(…)".into())
        );
        assert_eq!(leading_name("_ZSt"), None);
        assert_eq!(leading_name("_Z99x"), None);
    }

    #[test]
    fn template_arguments_nobody_reads_are_elided_whole() {
        // A class template whose argument is itself an `enable_if` with `sr`.
        let raw = "_ZN2ns3BoxINSt9enable_ifIXsrSt11is_integralIiE5valueEvE4typeEE3putIiEEvT_";
        assert_eq!(leading_name(raw), Some("ns::Box<…>::put<…>(…)".into()));
        let ctor = "_ZN2ns3BoxINSt9enable_ifIXsrSt11is_integralIiE5valueEvE4typeEEC2Ev";
        assert_eq!(leading_name(ctor), Some("ns::Box<…>::Box(…)".into()));
        let operator = "_ZN2ns3BoxINSt9enable_ifIXsrSt11is_integralIiE5valueEvE4typeEEixEm";
        assert_eq!(
            leading_name(operator),
            Some("ns::Box<…>::operator[](…)".into())
        );
        // An argument list that never closes is not cut: there is no name to show.
        assert_eq!(leading_name("_ZN2ns6MatrixIdLi3E"), None);
    }

    #[test]
    fn template_argument_lists_end_where_their_brackets_close() {
        for (mangled, rest) in [
            ("IdLi3EE5apply", "5apply"),
            ("IiSaIiEE9push_back", "9push_back"),
            ("I3E_xE1f", "1f"),
            ("IA3_iUlvE_Ut0_DF16_S0_T_fp_E1g", "1g"),
            ("IXclL_Z1fvEEEE1h", "1h"),
            ("ILN2ns4ModeE2EEE1k", "E1k"),
        ] {
            let m = mangled.as_bytes();
            let end = skip_group(m, 0, MAX_MANGLED_DEPTH).unwrap_or_else(|| panic!("{mangled}"));
            assert_eq!(&mangled[end..], rest, "{mangled}");
        }
        assert_eq!(skip_group(b"IiSaIiE", 0, MAX_MANGLED_DEPTH), None);
        let deep = format!("{}{}", "I".repeat(100), "E".repeat(100));
        assert_eq!(skip_group(deep.as_bytes(), 0, MAX_MANGLED_DEPTH), None);
    }

    proptest::proptest! {
        #[test]
        fn demangling_any_symbol_never_panics(tail in "[0-9A-Za-z_@.]{0,40}") {
            let _ = demangle(&format!("_Z{tail}"));
            let _ = leading_name(&format!("_ZN{tail}"));
            let _ = skip_group(format!("I{tail}").as_bytes(), 0, MAX_MANGLED_DEPTH);
        }

        /// Real template arguments with parts replaced: the bracket reader meets hostile
        /// lengths, literals and nesting.
        #[test]
        fn reading_a_damaged_symbol_never_panics(
            damage in proptest::collection::vec((0..120usize, "[0-9A-Za-z_]"), 0..6),
        ) {
            let mut raw = "_ZN2ns6MatrixIdLi3EE2atIiEENSt9enable_ifIXsrSt11is_integralIT_E5valueEdE4typeES5_".to_owned();
            for (at, text) in damage {
                let at = at.min(raw.len());
                raw.replace_range(at..(at + 1).min(raw.len()), &text);
            }
            let _ = demangle(&raw);
            let _ = leading_name(&raw);
        }
    }
}
