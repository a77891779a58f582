//! The profile file: a first line naming the format and its version, then one JSON document
//! (self-describing, so a profile can be read by other tools and by later versions). Written
//! atomically: a crash or an interrupt never leaves half a profile under the final name.

use std::io::Read;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::exact::ExactRun;
use crate::sample::SampledRun;
use crate::{ObjectRef, ProfileError};

/// The first line's word.
pub const PROFILE_MAGIC: &str = "loopscope-profile";
/// The format version this build writes and reads.
pub const PROFILE_VERSION: u32 = 1;
/// The largest profile read (it is held in memory while it is decoded).
pub const PROFILE_CAP_BYTES: u64 = 1 << 30;

/// A recording: what ran, the objects it used and what the back-end measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Profile {
    /// The command line recorded.
    pub command: Vec<String>,
    /// The flags `record` was given that shape what is recorded (the back-end, what is counted,
    /// how it samples), in `record`'s spelling, so that the recording can be made again; `None`
    /// in profiles written before they were stored, whose flags are unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record_flags: Option<Vec<String>>,
    /// The objects the recording refers to, with their build-ids.
    pub objects: Vec<ObjectRef>,
    /// Wall time of the same command run once without loopscope, in nanoseconds, when asked.
    pub native_wall_ns: Option<u64>,
    /// What the back-end measured.
    pub recording: Recording,
}

/// The back-end's own data.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "backend", rename_all = "snake_case")]
pub enum Recording {
    /// Timer samples with call stacks.
    Sample(SampledRun),
    /// Exact per-thread trees from markers.
    Ptrace(ExactRun),
    /// Exact per-thread trees from patched markers (the same data as `ptrace`, and how the
    /// sites were patched in [`ExactRun::patch`]).
    Patch(ExactRun),
}

impl Recording {
    /// The back-end's name as `--backend` spells it.
    pub fn backend(&self) -> &'static str {
        match self {
            Recording::Sample(_) => "sample",
            Recording::Ptrace(_) => "ptrace",
            Recording::Patch(_) => "patch",
        }
    }

    /// The exact run, for either exact back-end.
    pub fn exact(&self) -> Option<&ExactRun> {
        match self {
            Recording::Ptrace(run) | Recording::Patch(run) => Some(run),
            Recording::Sample(_) => None,
        }
    }
}

impl Profile {
    /// A sampled profile; the objects are the mapped files that at least one sample's stack
    /// touches, with build-ids read from the files now.
    pub fn sampled(command: Vec<String>, run: SampledRun) -> Profile {
        let mut paths: Vec<&str> = Vec::new();
        for s in &run.samples {
            for &address in &s.stack {
                if let Some(m) = run.mapping_at(s.pid, s.time_ns, address)
                    && !paths.contains(&m.path.as_str())
                {
                    paths.push(&m.path);
                }
            }
        }
        let objects = paths
            .into_iter()
            .map(|path| ObjectRef {
                path: path.to_owned(),
                build_id: build_id(Path::new(path)),
                content_id: None,
            })
            .collect();
        Profile {
            command,
            record_flags: None,
            objects,
            native_wall_ns: None,
            recording: Recording::Sample(run),
        }
    }

    /// An exact profile.
    pub fn exact(command: Vec<String>, run: ExactRun) -> Profile {
        Profile {
            command,
            record_flags: None,
            objects: run.objects.clone(),
            native_wall_ns: None,
            recording: Recording::Ptrace(run),
        }
    }

    /// An exact profile from the patch back-end.
    pub fn patched(command: Vec<String>, run: ExactRun) -> Profile {
        Profile {
            command,
            record_flags: None,
            objects: run.objects.clone(),
            native_wall_ns: None,
            recording: Recording::Patch(run),
        }
    }

    /// Writes the profile to `path` atomically, by the rules every result file follows
    /// ([`loopscope_machine::write_atomically_with`]: regular files only, links written
    /// through, an existing file's mode kept).
    pub fn write(&self, path: &Path) -> Result<(), ProfileError> {
        loopscope_machine::write_atomically_with(path, |out| {
            writeln!(out, "{PROFILE_MAGIC} {PROFILE_VERSION}")?;
            serde_json::to_writer(&mut *out, self).map_err(std::io::Error::from)
        })
        .map_err(|e| match e {
            loopscope_machine::MachineError::Io { source, .. } => ProfileError::Io {
                path: path.to_owned(),
                action: "write",
                source,
            },
            // A target that is not a regular file: the user's choice of path.
            other => ProfileError::Options {
                what: other.to_string(),
            },
        })
    }

    /// Reads a profile written by [`Profile::write`], within [`PROFILE_CAP_BYTES`].
    pub fn read(path: &Path) -> Result<Profile, ProfileError> {
        let io = |source| ProfileError::Io {
            path: path.to_owned(),
            action: "read",
            source,
        };
        // The magic word first, so that a device or a large file of another kind is not read.
        let mut head = Vec::new();
        loopscope_machine::refuse_pipe(path).map_err(io)?;
        std::fs::File::open(path)
            .and_then(|f| f.take(PROFILE_MAGIC.len() as u64).read_to_end(&mut head))
            .map_err(io)?;
        if head != PROFILE_MAGIC.as_bytes() {
            return Profile::parse(path, &head);
        }
        let bytes =
            loopscope_machine::read_bounded(path, PROFILE_CAP_BYTES, "profiles").map_err(io)?;
        Profile::parse(path, &bytes)
    }

    /// Parses the bytes of a profile file; `path` is only used in messages.
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<Profile, ProfileError> {
        let bad = |what: String| ProfileError::BadProfile {
            path: path.to_owned(),
            what,
        };
        let newline = bytes.iter().position(|&b| b == b'\n').ok_or_else(|| {
            bad(format!(
                "line 1: not a loopscope profile (expected `{PROFILE_MAGIC} {PROFILE_VERSION}`)"
            ))
        })?;
        let first = String::from_utf8_lossy(&bytes[..newline]);
        let mut words = first.split_whitespace();
        if words.next() != Some(PROFILE_MAGIC) {
            return Err(bad(format!(
                "line 1: not a loopscope profile (expected `{PROFILE_MAGIC} {PROFILE_VERSION}`)"
            )));
        }
        match words.next().map(str::parse::<u32>) {
            Some(Ok(PROFILE_VERSION)) => {}
            Some(Ok(v)) => {
                return Err(bad(format!(
                    "line 1: profile format version {v}; this loopscope reads version {PROFILE_VERSION}"
                )));
            }
            _ => return Err(bad("line 1: no format version after the magic word".into())),
        }
        let profile: Profile = serde_json::from_slice(&bytes[newline + 1..]).map_err(|e| {
            let what = if e.is_eof() {
                "truncated (the JSON ends early)".to_owned()
            } else {
                format!("damaged: {e}")
            };
            bad(format!("line {}: {what}", e.line() + 1))
        })?;
        crate::check::check_profile(&profile).map_err(|what| bad(format!("damaged: {what}")))?;
        Ok(profile)
    }
}

/// A binary's bytes, read within the cap on binaries.
pub(crate) fn read_binary(path: &Path) -> Result<Vec<u8>, ProfileError> {
    loopscope_machine::read_bounded(path, loopscope_binary::BINARY_CAP_BYTES, "binaries").map_err(
        |source| ProfileError::Io {
            path: path.to_owned(),
            action: "read",
            source,
        },
    )
}

/// The GNU build-id of an ELF file, in hex.
pub fn build_id(path: &Path) -> Option<String> {
    use object::Object;
    let data = read_binary(path).ok()?;
    let file = object::File::parse(&*data).ok()?;
    let id = file.build_id().ok()??;
    Some(id.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TargetExit;
    use proptest::prelude::*;

    fn sample_profile() -> Profile {
        let run = ExactRun {
            objects: vec![ObjectRef {
                path: "/bin/true".into(),
                build_id: Some("abcd".into()),
                content_id: None,
            }],
            threads: Vec::new(),
            tsc_hz: 2.5e9,
            analysis_cycles: 10,
            sites: 3,
            stepped_sites: 0,
            trap_cost: None,
            exit: TargetExit::Exited(0),
            wall_ns: 5,
            static_analysis_ns: 1,
            blocks: Vec::new(),
            patch: None,
        };
        Profile::exact(vec!["true".into()], run)
    }

    #[test]
    fn measured_rates_read_back_bit_for_bit() {
        // A value JSON's fast float parsing reads one unit in the last place off.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.profile");
        let mut profile = sample_profile();
        let Recording::Ptrace(run) = &mut profile.recording else {
            unreachable!("sample_profile is exact")
        };
        run.tsc_hz = 2.985_533_242_791_534_6;
        profile.write(&path).unwrap();
        let Recording::Ptrace(back) = Profile::read(&path).unwrap().recording else {
            panic!("an exact profile reads back exact")
        };
        assert_eq!(back.tsc_hz.to_bits(), 2.985_533_242_791_534_6_f64.to_bits());
    }

    #[test]
    fn a_written_profile_reads_back_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.profile");
        sample_profile().write(&path).unwrap();
        let back = Profile::read(&path).unwrap();
        assert_eq!(back.objects, sample_profile().objects);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn unbounded_inputs_and_odd_targets_are_refused() {
        let e = Profile::read(Path::new("/dev/zero")).unwrap_err();
        assert!(e.is_bad_input());
        assert!(e.to_string().contains("not a loopscope profile"), "{e}");
        // A (sparse) file past the cap is refused by its size, unread.
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let huge = dir.path().join("huge.profile");
        let file = std::fs::File::create(&huge).unwrap();
        writeln!(&file, "{PROFILE_MAGIC} {PROFILE_VERSION}").unwrap();
        file.set_len(PROFILE_CAP_BYTES + 1).unwrap();
        let e = Profile::read(&huge).unwrap_err();
        assert!(e.is_bad_input());
        assert!(
            e.to_string()
                .ends_with("larger than 1 GiB, the cap on profiles (see docs/limits.md)"),
            "{e}"
        );
        let e = sample_profile().write(Path::new("/dev/null")).unwrap_err();
        assert!(e.is_bad_input());
        assert!(e.to_string().contains("is a character device"), "{e}");
    }

    #[test]
    fn damage_is_one_line_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.profile");
        sample_profile().write(&path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let truncated = Profile::parse(&path, &bytes[..bytes.len() / 2])
            .unwrap_err()
            .to_string();
        assert!(truncated.contains("truncated"), "{truncated}");
        assert!(!truncated.contains('\n'));
        let other = Profile::parse(&path, b"hello\n{}").unwrap_err().to_string();
        assert!(other.contains("not a loopscope profile"), "{other}");
        let newer = Profile::parse(&path, b"loopscope-profile 9\n{}")
            .unwrap_err()
            .to_string();
        assert!(newer.contains("version 9"), "{newer}");
    }

    proptest! {
        #[test]
        fn corrupted_profiles_give_errors_not_panics(cut in 0usize..2000, flip in 0usize..2000, byte: u8) {
            let mut bytes = format!("{PROFILE_MAGIC} {PROFILE_VERSION}\n").into_bytes();
            bytes.extend(serde_json::to_vec(&sample_profile()).unwrap());
            if flip < bytes.len() {
                bytes[flip] = byte;
            }
            bytes.truncate(cut.max(1));
            let _ = Profile::parse(Path::new("p"), &bytes);
        }
    }
}
