//! Function names as profilers show them: a demangled C++ (or Rust) name with its template
//! arguments and parameter lists elided, so that `void std::__introsort_loop<__gnu_cxx::
//! __normal_iterator<double*, std::vector<double, std::allocator<double> > >, long,
//! __gnu_cxx::__ops::_Iter_less_iter>(…)` reads `std::__introsort_loop<…>(…)`.
//!
//! The rules, at the name's top level (inside no bracket):
//! - a template argument list `<…>` after a name is elided, and so is a parameter list `(…)`
//!   (an empty one stays `()`);
//! - a return type before the name (a space before the parameter list) is dropped;
//! - operators keep their symbols (`operator<`, `operator()`, `operator[]`, `operator new[]`);
//! - a bracket that groups a name rather than following one is kept and shortened inside: a
//!   lambda (`{lambda(…)#1}`, DWARF's `<lambda(…)>`), Rust's `<A as B>::f`, `(anonymous
//!   namespace)`;
//! - suffixes after the parameter list stay: ` const`, ` [clone .constprop.0]`.
//!
//! Malformed input (unbalanced brackets) is shortened as far as it can be and never panics.

/// Brackets nested deeper than this are elided whole, whatever they group: the shortener recurses
/// into groups, and a name is never that deep.
const MAX_DEPTH: usize = 16;

/// Operator symbols, longest first so that `<<=` is not read as `<`.
const OPERATORS: [&str; 40] = [
    "->*", "<<=", ">>=", "<=>", "()", "[]", "->", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||",
    "++", "--", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "\"\"", "<", ">", "+", "-", "*",
    "/", "%", "^", "&", "|", "~", "!", "=", ",",
];

/// Words before a parenthesis that is part of a type, not a parameter list.
const TYPE_OPERATORS: [&str; 6] = [
    "decltype",
    "noexcept",
    "sizeof",
    "alignof",
    "typeof",
    "__typeof__",
];

/// What the demangler writes before a name that is not a function's own (`non-virtual thunk
/// to std::ios::~ios()`): kept, so that the words are not taken for a return type.
const SPECIAL_PREFIXES: [&str; 12] = [
    "non-virtual thunk to ",
    "virtual thunk to ",
    "covariant return thunk to ",
    "construction vtable for ",
    "vtable for ",
    "typeinfo name for ",
    "typeinfo for ",
    "VTT for ",
    "guard variable for ",
    "TLS init function for ",
    "TLS wrapper function for ",
    "transaction clone for ",
];

/// `name` with template arguments and parameter lists elided and the return type dropped.
pub fn short_name(name: &str) -> String {
    for prefix in SPECIAL_PREFIXES {
        if let Some(rest) = name.strip_prefix(prefix) {
            return format!("{prefix}{}", short_name(rest));
        }
    }
    let chars: Vec<char> = name.chars().collect();
    shorten(&chars, 0)
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$'
}

/// The index just past the group opening at `open` (its matching closer), or `None` when it is
/// not closed. Operator symbols and `->` inside do not count as brackets.
fn group_end(chars: &[char], open: usize) -> Option<usize> {
    let mut stack: Vec<char> = Vec::new();
    let mut i = open;
    while i < chars.len() {
        let c = chars[i];
        if let Some(len) = operator_at(chars, i) {
            i += len;
            continue;
        }
        match c {
            '(' | '<' | '[' | '{' => stack.push(closer(c)),
            '-' if chars.get(i + 1) == Some(&'>') => i += 1,
            // A stray closer of another kind ends nothing; only the expected one pops.
            ')' | '>' | ']' | '}' if stack.last() == Some(&c) => {
                stack.pop();
                if stack.is_empty() {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

fn closer(open: char) -> char {
    match open {
        '(' => ')',
        '<' => '>',
        '[' => ']',
        _ => '}',
    }
}

const OPERATOR_WORD: [char; 8] = ['o', 'p', 'e', 'r', 'a', 't', 'o', 'r'];

/// When `operator` starts at `i` (a whole word), the length of `operator` and its symbol.
fn operator_at(chars: &[char], i: usize) -> Option<usize> {
    let word_end = i + OPERATOR_WORD.len();
    if chars.get(i..word_end)? != OPERATOR_WORD.as_slice()
        || (i > 0 && is_ident(chars[i - 1]))
        || chars.get(word_end).is_some_and(|&c| is_ident(c))
    {
        return None;
    }
    let rest = &chars[word_end..];
    let symbol = OPERATORS
        .iter()
        .find(|op| {
            let op: Vec<char> = op.chars().collect();
            rest.starts_with(&op)
        })
        .map_or(0, |op| op.chars().count());
    Some(OPERATOR_WORD.len() + symbol)
}

/// The shortened text of `chars`, `depth` groups deep.
fn shorten(chars: &[char], depth: usize) -> String {
    let mut out = String::new();
    // Where in `out` the name starts when a return type comes before it.
    let mut name_start: Option<usize> = None;
    let mut parameters_seen = false;
    // Just after an operator's symbol (and the space of `operator< <int>`): a `<` there is the
    // operator's template argument list.
    let mut after_operator = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if let Some(len) = operator_at(chars, i) {
            out.extend(&chars[i..i + len]);
            i += len;
            // `operator new[]`, a conversion `operator int`: the words up to the parameter list
            // belong to the operator.
            if len == OPERATOR_WORD.len() {
                while i < chars.len() && chars[i] != '(' && chars[i] != '<' {
                    out.push(chars[i]);
                    i += 1;
                }
            }
            after_operator = true;
            continue;
        }
        match c {
            '<' | '(' | '[' | '{' => {
                let Some(end) = group_end(chars, i) else {
                    // Unclosed: say that something was cut, and stop.
                    out.push(c);
                    out.push('…');
                    break;
                };
                let last = out.chars().last();
                let follows_name = after_operator
                    || last.is_some_and(is_ident)
                    || (c == '(' && matches!(last, Some('>' | ']' | '}')));
                let in_type = is_type_operator(&out);
                let text = group(c, &chars[i + 1..end - 1], follows_name && !in_type, depth);
                out.push_str(&text);
                parameters_seen |= c == '(' && follows_name && !in_type;
                i = end;
            }
            ' ' if !parameters_seen && !after_operator => {
                out.push(' ');
                name_start = Some(out.len());
                i += 1;
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
        if c != ' ' {
            after_operator = false;
        }
    }
    match name_start {
        Some(start) if parameters_seen && start < out.len() => out[start..].to_owned(),
        _ => out,
    }
}

/// The text of one group opened by `open` around `inner`: elided when it is a template
/// argument or parameter list (`elide`), kept and shortened inside when it groups a name.
fn group(open: char, inner: &[char], elide: bool, depth: usize) -> String {
    let close = closer(open);
    let text: String = inner.iter().collect();
    if inner.is_empty() {
        return format!("{open}{close}");
    }
    match open {
        '[' => format!("[{text}]"),
        '(' if text == "anonymous namespace" => format!("({text})"),
        '(' | '<' if elide => format!("{open}…{close}"),
        _ if depth >= MAX_DEPTH => format!("{open}…{close}"),
        _ => format!("{open}{}{close}", shorten(inner, depth + 1)),
    }
}

/// Whether the text so far ends in a word whose parenthesis is part of a type (`decltype`).
fn is_type_operator(before: &str) -> bool {
    let word: String = before
        .chars()
        .rev()
        .take_while(|&c| is_ident(c))
        .collect::<Vec<char>>()
        .into_iter()
        .rev()
        .collect();
    TYPE_OPERATORS.contains(&word.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[track_caller]
    fn shortens(name: &str, expected: &str) {
        assert_eq!(short_name(name), expected, "{name}");
    }

    #[test]
    fn template_arguments_and_parameters_are_elided() {
        shortens(
            "void std::__introsort_loop<__gnu_cxx::__normal_iterator<double*, std::vector<double, \
             std::allocator<double> > >, long, __gnu_cxx::__ops::_Iter_less_iter>(__gnu_cxx::\
             __normal_iterator<double*, std::vector<double, std::allocator<double> > >, \
             __gnu_cxx::__normal_iterator<double*, std::vector<double, std::allocator<double> > \
             >, long, __gnu_cxx::__ops::_Iter_less_iter) [clone .isra.0]",
            "std::__introsort_loop<…>(…) [clone .isra.0]",
        );
        shortens(
            "std::vector<int, std::allocator<int> >::_M_realloc_insert<int const&>(__gnu_cxx::\
             __normal_iterator<int*, std::vector<int, std::allocator<int> > >, int const&)",
            "std::vector<…>::_M_realloc_insert<…>(…)",
        );
        shortens("main", "main");
        shortens("main()", "main()");
        shortens("foo(int)", "foo(…)");
        shortens(
            "Accumulator<double>::scale(double)",
            "Accumulator<…>::scale(…)",
        );
        shortens("ns::Widget::size() const", "ns::Widget::size() const");
    }

    #[test]
    fn return_types_are_dropped() {
        shortens("unsigned long f<int>(int)", "f<…>(…)");
        shortens(
            "std::vector<int, std::allocator<int> > make<int>(unsigned long)",
            "make<…>(…)",
        );
        // No parameter list: nothing to tell a return type from.
        shortens(
            "__unguarded_insertion_sort<a, b>",
            "__unguarded_insertion_sort<…>",
        );
    }

    #[test]
    fn nested_templates_collapse_to_one_ellipsis() {
        shortens("a<b<c<d<e> > > >::f<g<h> >(i<j<k> >)", "a<…>::f<…>(…)");
        shortens(
            "Outer<int>::Inner<char>::run()",
            "Outer<…>::Inner<…>::run()",
        );
    }

    #[test]
    fn operators_keep_their_symbols() {
        shortens(
            "bool operator< <int>(Point<int> const&, Point<int> const&)",
            "operator< <…>(…)",
        );
        shortens("bool operator<(Point const&, Point const&)", "operator<(…)");
        shortens(
            "Point::operator<(Point const&) const",
            "Point::operator<(…) const",
        );
        shortens("Matrix::operator()(int, int)", "Matrix::operator()(…)");
        shortens(
            "std::vector<double, std::allocator<double> >::operator[](unsigned long)",
            "std::vector<…>::operator[](…)",
        );
        shortens(
            "std::ostream& operator<< <char>(std::ostream&, char const*)",
            "operator<< <…>(…)",
        );
        shortens("Iter::operator->() const", "Iter::operator->() const");
        shortens("Big::operator>>=(int)", "Big::operator>>=(…)");
        shortens("operator new[](unsigned long)", "operator new[](…)");
        shortens(
            "Handle::operator bool() const",
            "Handle::operator bool() const",
        );
        shortens(
            "Wrapper<int>::operator std::vector<int, std::allocator<int> >()",
            "Wrapper<…>::operator std::vector<…>()",
        );
        // An operator inside template arguments does not unbalance them.
        shortens("Sort<&Point::operator<>::run(int)", "Sort<…>::run(…)");
    }

    #[test]
    fn lambdas_keep_their_mark() {
        shortens(
            "main::{lambda(double, double)#1}::operator()(double, double) const",
            "main::{lambda(…)#1}::operator()(…) const",
        );
        shortens(
            "__gnu_cxx::__ops::_Iter_comp_iter<main::{lambda(double, double)#1}>",
            "__gnu_cxx::__ops::_Iter_comp_iter<…>",
        );
        shortens(
            "main(int, char**)::<lambda(double, double)>",
            "main(…)::<lambda(…)>",
        );
        shortens(
            "void std::__adjust_heap<__gnu_cxx::__normal_iterator<double*, std::vector<double, \
             std::allocator<double> > >, long, double, __gnu_cxx::__ops::_Iter_comp_iter<main::\
             {lambda(double, double)#1}> >(__gnu_cxx::__normal_iterator<double*, std::vector<\
             double, std::allocator<double> > >, long, long, double, __gnu_cxx::__ops::\
             _Iter_comp_iter<main::{lambda(double, double)#1}>) [clone .constprop.0]",
            "std::__adjust_heap<…>(…) [clone .constprop.0]",
        );
    }

    #[test]
    fn groups_that_are_names_stay() {
        shortens(
            "(anonymous namespace)::helper(int)",
            "(anonymous namespace)::helper(…)",
        );
        shortens(
            "<alloc::vec::Vec<T,A> as core::ops::drop::Drop>::drop",
            "<alloc::vec::Vec<…> as core::ops::drop::Drop>::drop",
        );
        shortens(
            "core::ptr::drop_in_place<alloc::string::String>",
            "core::ptr::drop_in_place<…>",
        );
        shortens("app::main::{{closure}}", "app::main::{{closure}}");
        shortens(
            "non-virtual thunk to std::basic_fstream<char, std::char_traits<char> >::~basic_fstream()",
            "non-virtual thunk to std::basic_fstream<…>::~basic_fstream()",
        );
        shortens(
            "decltype (({parm#1}.begin)()) std::begin<std::vector<int> >(std::vector<int>&)",
            "std::begin<…>(…)",
        );
    }

    #[test]
    fn malformed_names_are_cut_not_panicked_on() {
        shortens("f<int", "f<…");
        shortens("g(int", "g(…");
        shortens("h>)]}", "h>)]}");
        shortens("", "");
        let deep = "{".repeat(100) + &"}".repeat(100);
        assert!(short_name(&deep).chars().count() <= deep.chars().count());
    }

    proptest! {
        #[test]
        fn never_panics_and_never_grows_much(name in "[a-z:<>(){}\\[\\] ,&*#~=!-]{0,60}") {
            let short = short_name(&name);
            // Each elision replaces at least two characters by three.
            prop_assert!(short.chars().count() <= name.chars().count() + 2);
        }

        #[test]
        fn never_panics_on_any_text(name in "\\PC{0,80}") {
            let _ = short_name(&name);
        }
    }
}
