//! Command lines shown for a person to copy: each word quoted as a POSIX shell needs it, so
//! that pasting the line runs the same words.

use std::borrow::Cow;

/// `word` as a POSIX shell reads it back: unchanged when it holds only characters no shell
/// treats specially, else in single quotes (a `'` inside written `'\''`); the empty word is
/// `''`.
pub fn shell_word(word: &str) -> Cow<'_, str> {
    let plain = |c: char| c.is_ascii_alphanumeric() || "@%+=:,./-_".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        Cow::Borrowed(word)
    } else {
        Cow::Owned(format!("'{}'", word.replace('\'', r"'\''")))
    }
}

/// The words joined by spaces, each quoted by [`shell_word`].
pub fn shell_words<S: AsRef<str>>(words: impl IntoIterator<Item = S>) -> String {
    words
        .into_iter()
        .map(|w| shell_word(w.as_ref()).into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_words_a_shell_would_change_are_quoted() {
        assert_eq!(
            shell_words([
                "./args",
                "abc",
                "de f",
                "",
                "a;rm -rf x",
                "$HOME",
                "it's",
                "-o=x/y.1"
            ]),
            r#"./args abc 'de f' '' 'a;rm -rf x' '$HOME' 'it'\''s' -o=x/y.1"#
        );
        for special in [
            "~", "#x", "a*", "b?", "`c`", "\"d\"", "e\nf", "g\\", "é", "!x",
        ] {
            assert!(shell_word(special).starts_with('\''), "{special}");
        }
    }

    #[test]
    fn a_shell_reads_the_words_back() {
        let words = ["a b", "", "it's", "$(echo no)", "x\ny", "'", "\\"];
        let Ok(out) = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("printf '%s\\0' {}", shell_words(words)))
            .output()
        else {
            eprintln!("skipped: no sh");
            return;
        };
        let back: Vec<&str> = std::str::from_utf8(&out.stdout)
            .unwrap()
            .split_terminator('\0')
            .collect();
        assert_eq!(back, words);
    }
}
