//! What a back-end hands to the loop-call-context tree: the mapped objects of the target and
//! either its call stacks (sampling) or its events (exact back-ends).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::ProfileError;

/// One executable mapping of one process of the target, as the kernel reported it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mapping {
    /// Process the mapping belongs to.
    pub pid: u32,
    /// First mapped address.
    pub start: u64,
    /// One past the last mapped address.
    pub end: u64,
    /// File offset mapped at `start`.
    pub file_offset: u64,
    /// Path of the mapped file (`[vdso]` and similar for anonymous code).
    pub path: String,
}

/// One sample: where a thread was when the timer fired, with its call stack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sample {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Time of the sample in nanoseconds since the recording started.
    pub time_ns: u64,
    /// The sampled instruction pointer first, then one return address per caller frame,
    /// outwards. Return addresses are as found on the stack (the instruction after the call).
    pub stack: Vec<u64>,
    /// The unwinder stopped before the outermost frame (no unwind information, a damaged
    /// stack, or the copied stack was too short).
    pub truncated: bool,
    /// The event count the sample stands for (its period: nanoseconds for `cpu-clock`, cycles
    /// or instructions for those events); 0 in profiles written before it was kept.
    #[serde(default)]
    pub period: u64,
    /// Instructions the thread retired since its previous sample, when the sampling event
    /// was a group with an instruction counter (spec 001 embodiments 1 and 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<u64>,
}

/// How the target's first process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "code")]
pub enum TargetExit {
    /// It exited with this status.
    Exited(i32),
    /// A signal killed it.
    Signaled(i32),
    /// loopscope was interrupted and left the target running, detached.
    Detached,
}

impl std::fmt::Display for TargetExit {
    /// How the target ended, as the record line and the report header say it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TargetExit::Exited(code) => write!(f, "exited {code}"),
            TargetExit::Signaled(signal) => write!(f, "killed by signal {signal}"),
            TargetExit::Detached => f.write_str("interrupted, detached"),
        }
    }
}

/// A mapped object a profile refers to, by path and GNU build-id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectRef {
    /// Path of the file when it was recorded.
    pub path: String,
    /// Its GNU build-id in hex, when it has one.
    pub build_id: Option<String>,
    /// For a file without a build-id: its content id (a hash of its loaded segments), taken
    /// when it was recorded, so that another build at the same path is still told apart.
    /// `None` with a build-id, for a file that could not be read, and in profiles written
    /// before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_id: Option<String>,
}

impl ObjectRef {
    /// The refusal of `file`, opened as this object, when its build-id (`found`, `None` when it
    /// has none) is not the recorded one, or, for an object recorded without a build-id, when
    /// its [`content_id`] is not: the recorded addresses would fall on other code. `None` when
    /// they agree or nothing was recorded to compare. `report` and `mix` both decide with this.
    pub(crate) fn identity_mismatch(
        &self,
        file: &Path,
        found: Option<&str>,
    ) -> Option<ProfileError> {
        if let Some(recorded) = self.build_id.as_deref() {
            return (found != Some(recorded)).then(|| ProfileError::BuildIdMismatch {
                path: file.to_owned(),
                recorded: recorded.to_owned(),
                found: found.unwrap_or("none").to_owned(),
            });
        }
        let recorded = self.content_id.as_deref()?;
        let now = match found {
            Some(build_id) => Some(format!("(now with build-id {build_id})")),
            None => content_id(file),
        };
        (now.as_deref() != Some(recorded)).then(|| ProfileError::ContentMismatch {
            path: file.to_owned(),
            recorded: recorded.to_owned(),
            found: now.unwrap_or_else(|| "(unreadable)".to_owned()),
        })
    }

    /// Whether nothing identifies the build that was recorded (a profile of a file without a
    /// build-id, written before the content was identified).
    pub(crate) fn unverifiable(&self) -> bool {
        self.build_id.is_none() && self.content_id.is_none()
    }

    /// Takes the [`content_id`] of a file without a build-id, read now.
    fn identify(&mut self) {
        if self.build_id.is_none() && self.content_id.is_none() && !self.path.starts_with('[') {
            self.content_id = content_id(Path::new(&self.path));
        }
    }
}

impl crate::Profile {
    /// Identifies every object without a build-id by its content id, read from the files
    /// now: call it right after recording, before the files can change, so that `report` and
    /// `mix` refuse another build at the same path as they do one with another build-id.
    pub fn identify_unversioned_objects(&mut self) {
        self.objects.iter_mut().for_each(ObjectRef::identify);
        if let crate::Recording::Ptrace(run) | crate::Recording::Patch(run) = &mut self.recording {
            run.objects.iter_mut().for_each(ObjectRef::identify);
        }
    }
}

/// What identifies an ELF file's build without a build-id: the size of its loaded segments and
/// an FNV-1a hash of their addresses and bytes (`4096+12345:0123456789abcdef`), the code and
/// data a profile's addresses point into. Debug information and symbols are outside it, so
/// stripping a binary keeps its identity; any change to its code does not. `None` for a file
/// that cannot be read or is not ELF.
pub fn content_id(path: &Path) -> Option<String> {
    use object::{Object, ObjectSegment};
    let data = crate::file::read_binary(path).ok()?;
    let file = object::File::parse(&*data).ok()?;
    let mut hash = Fnv1a::default();
    let mut sizes = Vec::new();
    for segment in file.segments() {
        let bytes = segment.data().ok()?;
        hash.write(&segment.address().to_le_bytes());
        hash.write(&(bytes.len() as u64).to_le_bytes());
        hash.write(bytes);
        sizes.push(bytes.len().to_string());
    }
    (!sizes.is_empty()).then(|| format!("{}:{:016x}", sizes.join("+"), hash.0))
}

/// 64-bit FNV-1a: stable across builds and platforms, which `std`'s hasher does not promise.
struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv1a {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_another_build_id_than_the_recorded_one_is_a_mismatch() {
        let object = |build_id: Option<&str>| ObjectRef {
            path: "/bin/app".into(),
            build_id: build_id.map(str::to_owned),
            content_id: None,
        };
        let file = Path::new("/tmp/app.orig");
        assert!(
            object(Some("aa11"))
                .identity_mismatch(file, Some("aa11"))
                .is_none()
        );
        assert!(object(None).identity_mismatch(file, Some("bb22")).is_none());
        let refusal = object(Some("aa11")).identity_mismatch(file, None).unwrap();
        assert_eq!(
            refusal.to_string(),
            "/tmp/app.orig: build-id none differs from the recorded aa11 (rebuilt since `record`?)"
        );
        assert!(refusal.is_bad_input());
        let refusal = object(Some("aa11"))
            .identity_mismatch(file, Some("bb22"))
            .unwrap();
        assert!(
            refusal
                .to_string()
                .contains("build-id bb22 differs from the recorded aa11")
        );
    }

    #[test]
    fn without_a_build_id_the_loaded_code_identifies_the_build() {
        let this = std::env::current_exe().unwrap();
        let id = content_id(&this).expect("a test binary is ELF");
        let recorded = ObjectRef {
            path: this.display().to_string(),
            build_id: None,
            content_id: Some(id.clone()),
        };
        assert!(recorded.identity_mismatch(&this, None).is_none());
        assert!(!recorded.unverifiable());
        let other = ObjectRef {
            content_id: Some(format!("{id}0")),
            ..recorded.clone()
        };
        let refusal = other.identity_mismatch(&this, None).unwrap();
        assert!(refusal.is_bad_input());
        assert!(
            refusal
                .to_string()
                .contains(&format!("loaded code {id} differs from the recorded {id}0")),
            "{refusal}"
        );
        let text = tempfile::NamedTempFile::new().unwrap();
        assert!(content_id(text.path()).is_none());
        let unreadable = recorded.identity_mismatch(text.path(), None).unwrap();
        assert!(
            unreadable.to_string().contains("(unreadable)"),
            "{unreadable}"
        );
        let old = ObjectRef {
            content_id: None,
            ..recorded
        };
        assert!(old.unverifiable() && old.identity_mismatch(&this, None).is_none());
    }
}
