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
}

impl ObjectRef {
    /// The refusal of `file`, opened as this object, when its build-id (`found`, `None` when it
    /// has none) is not the recorded one: the recorded addresses would fall on other code. `None`
    /// when they agree or no build-id was recorded. `report` and `mix` both decide with this.
    pub(crate) fn build_id_mismatch(
        &self,
        file: &Path,
        found: Option<&str>,
    ) -> Option<ProfileError> {
        let recorded = self.build_id.as_deref()?;
        (found != Some(recorded)).then(|| ProfileError::BuildIdMismatch {
            path: file.to_owned(),
            recorded: recorded.to_owned(),
            found: found.unwrap_or("none").to_owned(),
        })
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
        };
        let file = Path::new("/tmp/app.orig");
        assert!(
            object(Some("aa11"))
                .build_id_mismatch(file, Some("aa11"))
                .is_none()
        );
        assert!(object(None).build_id_mismatch(file, Some("bb22")).is_none());
        let refusal = object(Some("aa11")).build_id_mismatch(file, None).unwrap();
        assert_eq!(
            refusal.to_string(),
            "/tmp/app.orig: build-id none differs from the recorded aa11 (rebuilt since `record`?)"
        );
        assert!(refusal.is_bad_input());
        let refusal = object(Some("aa11"))
            .build_id_mismatch(file, Some("bb22"))
            .unwrap();
        assert!(
            refusal
                .to_string()
                .contains("build-id bb22 differs from the recorded aa11")
        );
    }
}
