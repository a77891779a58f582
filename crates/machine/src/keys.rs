//! The keys a machine file may hold. A key the format does not know is refused by name, table
//! path and position: a misspelt `streaming_size_byte` would otherwise be dropped and the
//! model would silently simulate another cache.

use std::path::Path;

use toml::de::{DeTable, DeValue};

use crate::MachineError;

/// What a key holds: a value, a table of known keys, or a list of such tables.
enum Shape {
    Value,
    Table(&'static [(&'static str, Shape)]),
    Tables(&'static [(&'static str, Shape)]),
}

const MACHINE: &[(&str, Shape)] = &[
    ("format_version", Shape::Value),
    ("model", Shape::Value),
    ("vendor", Shape::Value),
    ("microarchitecture", Shape::Value),
    ("sockets", Shape::Value),
    ("cores", Shape::Value),
    ("threads_per_core", Shape::Value),
    ("nominal_hz", Shape::Value),
    ("tsc_hz", Shape::Value),
    ("caches", Shape::Tables(CACHE)),
    ("isa", Shape::Value),
    ("peak_flops_per_cycle", Shape::Table(PEAK_FLOPS)),
    ("source", Shape::Value),
    ("measured", Shape::Table(MEASURED)),
];

const CACHE: &[(&str, Shape)] = &[
    ("level", Shape::Value),
    ("kind", Shape::Value),
    ("size_bytes", Shape::Value),
    ("line_bytes", Shape::Value),
    ("ways", Shape::Value),
    ("sets", Shape::Value),
    ("shared_by", Shape::Value),
    ("replacement", Shape::Value),
    ("write_allocate", Shape::Value),
    ("write_back", Shape::Value),
];

const PEAK_FLOPS: &[(&str, Shape)] = &[("dp", Shape::Value), ("sp", Shape::Value)];

const MEASURED: &[(&str, Shape)] = &[
    ("caches", Shape::Tables(MEASURED_CACHE)),
    ("bandwidth", Shape::Tables(BANDWIDTH)),
    ("peak_gflops", Shape::Table(PEAK_GFLOPS)),
    ("duration_s", Shape::Value),
    ("partial", Shape::Value),
    ("notes", Shape::Value),
    ("core_hz", Shape::Value),
    ("memory_latency_ns", Shape::Value),
    ("add_latency_ns", Shape::Value),
    ("implausible", Shape::Tables(IMPLAUSIBLE)),
];

const IMPLAUSIBLE: &[(&str, Shape)] = &[
    ("level", Shape::Value),
    ("kernel", Shape::Value),
    ("threads", Shape::Value),
    ("vector_bytes", Shape::Value),
    ("reason", Shape::Value),
];

const MEASURED_CACHE: &[(&str, Shape)] = &[
    ("level", Shape::Value),
    ("kind", Shape::Value),
    ("size_bytes", Shape::Value),
    ("latency_cycles", Shape::Value),
    ("latency_ns", Shape::Value),
    ("advertised_size_bytes", Shape::Value),
    ("confidence", Shape::Value),
    ("method", Shape::Value),
    ("streaming_size_bytes", Shape::Value),
];

const BANDWIDTH: &[(&str, Shape)] = &[
    ("level", Shape::Value),
    ("kernel", Shape::Value),
    ("threads", Shape::Value),
    ("cores", Shape::Value),
    ("working_set_bytes", Shape::Value),
    ("gb_per_s", Shape::Value),
    ("gb_per_s_with_write_allocate", Shape::Value),
    ("method", Shape::Value),
    ("vector_bytes", Shape::Value),
];

const PEAK_GFLOPS: &[(&str, Shape)] = &[
    ("dp", Shape::Value),
    ("sp", Shape::Value),
    ("threads", Shape::Value),
    ("method", Shape::Value),
];

/// An unknown key: its dotted path, where it starts, and the known key it most resembles.
struct Unknown {
    path: String,
    offset: usize,
    known: &'static [(&'static str, Shape)],
}

/// Refuses a key the machine-file format does not have, naming its table path
/// (`measured.caches[3].streaming_size_byte`), line and column, and the key meant when one is
/// close. Text that is not TOML passes: the parser reports it.
pub(crate) fn check_known_keys(
    text: &str,
    path: &Path,
    line_column: fn(&str, usize) -> (usize, usize),
) -> Result<(), MachineError> {
    let Ok(root) = DeTable::parse(text) else {
        return Ok(());
    };
    let Some(unknown) = first_unknown(root.get_ref(), MACHINE, "") else {
        return Ok(());
    };
    let (line, column) = line_column(text, unknown.offset);
    let key = unknown.path.rsplit('.').next().unwrap_or(&unknown.path);
    let hint = match closest(key, unknown.known) {
        Some(near) => format!("did you mean `{near}`?"),
        None => format!(
            "expected one of {}",
            unknown
                .known
                .iter()
                .map(|(k, _)| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    Err(MachineError::Syntax {
        path: path.to_owned(),
        line,
        column,
        message: format!("unknown key `{}` ({hint})", unknown.path),
    })
}

fn first_unknown(
    table: &DeTable<'_>,
    known: &'static [(&'static str, Shape)],
    prefix: &str,
) -> Option<Unknown> {
    for (key, value) in table {
        let name: &str = key.get_ref();
        let path = if prefix.is_empty() {
            name.to_owned()
        } else {
            format!("{prefix}.{name}")
        };
        let Some((_, shape)) = known.iter().find(|(k, _)| *k == name) else {
            return Some(Unknown {
                path,
                offset: key.span().start,
                known,
            });
        };
        let found = match (shape, value.get_ref()) {
            (Shape::Table(inner), DeValue::Table(t)) => first_unknown(t, inner, &path),
            (Shape::Tables(inner), DeValue::Array(items)) => {
                items
                    .iter()
                    .enumerate()
                    .find_map(|(i, item)| match item.get_ref() {
                        DeValue::Table(t) => first_unknown(t, inner, &format!("{path}[{i}]")),
                        _ => None,
                    })
            }
            // A value of the wrong type is the deserialiser's to report.
            _ => None,
        };
        if found.is_some() {
            return found;
        }
    }
    None
}

/// The known key within two edits of `key` (a letter dropped, added or changed), if any.
fn closest(key: &str, known: &[(&'static str, Shape)]) -> Option<&'static str> {
    known
        .iter()
        .map(|(k, _)| (edit_distance(key, k), *k))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(above + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_single_edits() {
        assert_eq!(
            edit_distance("streaming_size_byte", "streaming_size_bytes"),
            1
        );
        assert_eq!(edit_distance("ways", "wyas"), 2);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(closest("sets", CACHE), Some("sets"));
        assert_eq!(closest("colour", CACHE), None);
    }

    /// Every key of the format's structs, with every optional field set, is known: the lists
    /// above follow the structs.
    #[test]
    fn every_field_written_is_a_known_key() {
        let text = crate::to_toml(&crate::file::full_sample()).unwrap();
        let root = DeTable::parse(&text).unwrap();
        let mut written = Vec::new();
        collect(root.get_ref(), "", &mut written);
        let mut known = Vec::new();
        collect_known(MACHINE, "", &mut known);
        written.sort();
        written.dedup();
        known.sort();
        assert_eq!(written, known);
    }

    fn collect(table: &DeTable<'_>, prefix: &str, out: &mut Vec<String>) {
        for (key, value) in table {
            let path = format!("{prefix}{}", key.get_ref());
            out.push(path.clone());
            match value.get_ref() {
                DeValue::Table(t) => collect(t, &format!("{path}."), out),
                DeValue::Array(items) => {
                    for item in items.iter() {
                        if let DeValue::Table(t) = item.get_ref() {
                            collect(t, &format!("{path}."), out);
                        }
                    }
                }
                _ => {}
            }
        }
    }

    fn collect_known(known: &[(&str, Shape)], prefix: &str, out: &mut Vec<String>) {
        for (key, shape) in known {
            let path = format!("{prefix}{key}");
            out.push(path.clone());
            if let Shape::Table(inner) | Shape::Tables(inner) = shape {
                collect_known(inner, &format!("{path}."), out);
            }
        }
    }
}
