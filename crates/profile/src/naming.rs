//! Profile file names for runs of many processes: `prof.%r` becomes `prof.3` in rank 3, so
//! every process of `mpirun -np 4 loopscope record -o 'prof.%r' -- ./app` writes its own file.
//! The caller finds the values (the rank in the launcher's environment, its own process id,
//! the host name); this module only substitutes them.

use crate::ProfileError;

/// What the placeholders of an output name stand for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameValues {
    /// `%r`: the process's rank in its parallel job.
    pub rank: u32,
    /// `%p`: a process id.
    pub pid: u32,
    /// `%h`: the host name.
    pub host: String,
}

/// Whether `template` has a placeholder (`%r`, `%p`, `%h` or `%%`).
pub fn has_placeholders(template: &str) -> bool {
    template.contains('%')
}

/// `template` with `%r`, `%p` and `%h` replaced and `%%` made `%`; any other `%` is an error
/// naming its position.
pub fn expand_output_name(template: &str, values: &NameValues) -> Result<String, ProfileError> {
    let bad = |what: String| ProfileError::Options {
        what: format!("-o {template}: {what}"),
    };
    let mut out = String::with_capacity(template.len() + 8);
    let mut chars = template.char_indices();
    while let Some((at, c)) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next().map(|(_, c)| c) {
            Some('r') => out.push_str(&values.rank.to_string()),
            Some('p') => out.push_str(&values.pid.to_string()),
            Some('h') => out.push_str(&values.host),
            Some('%') => out.push('%'),
            Some(other) => {
                return Err(bad(format!(
                    "unknown placeholder %{other} at character {}; expected %r (rank), %p \
                     (process id), %h (host) or %% (a percent sign)",
                    at + 1
                )));
            }
            None => {
                return Err(bad(
                    "ends in a lone %; write %% for a percent sign".to_owned()
                ));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn values() -> NameValues {
        NameValues {
            rank: 3,
            pid: 4242,
            host: "node07".into(),
        }
    }

    #[test]
    fn placeholders_are_replaced() {
        let name = expand_output_name("run/%h/prof.%r.%p.100%%", &values()).unwrap();
        assert_eq!(name, "run/node07/prof.3.4242.100%");
        assert_eq!(expand_output_name("plain", &values()).unwrap(), "plain");
    }

    #[test]
    fn unknown_and_dangling_percents_are_errors() {
        let unknown = expand_output_name("prof.%x", &values())
            .unwrap_err()
            .to_string();
        assert!(unknown.contains("%x at character 6"), "{unknown}");
        let dangling = expand_output_name("prof.%", &values())
            .unwrap_err()
            .to_string();
        assert!(dangling.contains("lone %"), "{dangling}");
    }

    proptest! {
        #[test]
        fn any_template_expands_or_fails_without_panicking(template in "\\PC{0,40}") {
            if let Ok(name) = expand_output_name(&template, &values()) {
                if !template.contains('%') {
                    prop_assert_eq!(name, template);
                }
            }
        }
    }
}
