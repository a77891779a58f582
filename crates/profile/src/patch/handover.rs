//! The two files between `record` and the runtime in the target: the handover (what to patch,
//! written once by `record`) and one result per process (what was measured, written by the
//! runtime when the process ends). Both are JSON.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::plan::SitePatch;
use crate::ProfileError;
use crate::exact::ThreadTree;
use crate::exact::markers::Site;

/// The environment variable holding the handover file's path: set by `record` for the target
/// only, read by the runtime (it is the runtime's interface, not a policy switch).
pub const HANDOVER_VARIABLE: &str = "LOOPSCOPE_PATCH_HANDOVER";
/// The handover format this build writes and reads.
pub const HANDOVER_VERSION: u32 = 1;

/// Which file a process runs, as `stat` tells it: the runtime patches only the executable the
/// handover was made for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileIdentity {
    /// Path when analysed.
    pub path: String,
    /// `st_dev`.
    pub device: u64,
    /// `st_ino`.
    pub inode: u64,
    /// `st_size`.
    pub bytes: u64,
}

impl FileIdentity {
    /// The identity of the file at `path` (symbolic links followed).
    pub fn of(path: &Path) -> std::io::Result<FileIdentity> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path)?;
        Ok(FileIdentity {
            path: path.display().to_string(),
            device: m.dev(),
            inode: m.ino(),
            bytes: m.size(),
        })
    }

    /// Whether `other` is the same file (the path may differ).
    pub fn same_file(&self, other: &FileIdentity) -> bool {
        (self.device, self.inode, self.bytes) == (other.device, other.inode, other.bytes)
    }
}

/// One marker site and how it is patched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedSite {
    /// Its roles (static address).
    pub site: Site,
    /// How it is instrumented.
    pub patch: SitePatch,
}

/// What `record` hands to the runtime.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Handover {
    /// [`HANDOVER_VERSION`].
    pub version: u32,
    /// The objects to patch: the executable first, then the shared libraries asked for
    /// (`--libraries`), each found among the loaded objects by its file. Their indexes are the
    /// objects' indexes in the profile.
    pub objects: Vec<ObjectPlan>,
    /// Some object has VEX/EVEX instructions: the slow path saves the whole extended state.
    #[serde(default = "yes")]
    pub vector_extensions: bool,
    /// Directory where each process writes its result.
    pub results: PathBuf,
}

/// How one object is patched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectPlan {
    /// The file the sites are for.
    pub file: FileIdentity,
    /// Static address of `main`'s entry (the executable): events count from there to `main`'s
    /// return; `None` in the executable counts from the start.
    pub main_entry: Option<u64>,
    /// Entry address of each function, by function index.
    pub functions: Vec<u64>,
    /// Every marker site, by address.
    pub sites: Vec<PlannedSite>,
    /// Blocks with a counter (block-counting mode), 0 otherwise.
    pub counted_blocks: u32,
}

impl Handover {
    /// Sites over all objects (site ids run on from one object to the next).
    pub fn site_count(&self) -> usize {
        self.objects.iter().map(|o| o.sites.len()).sum()
    }

    /// Counted blocks over all objects (counter indexes run on likewise).
    pub fn counted_blocks(&self) -> usize {
        self.objects.iter().map(|o| o.counted_blocks as usize).sum()
    }
}

impl Handover {
    /// Writes the handover to `path`.
    pub fn write(&self, path: &Path) -> Result<(), ProfileError> {
        let bytes = serde_json::to_vec(self).map_err(|e| ProfileError::Io {
            path: path.to_owned(),
            action: "write",
            source: e.into(),
        })?;
        std::fs::write(path, bytes).map_err(|source| ProfileError::Io {
            path: path.to_owned(),
            action: "write",
            source,
        })
    }

    /// Reads and checks a handover.
    pub fn read(path: &Path) -> Result<Handover, ProfileError> {
        let bytes = loopscope_machine::read_bounded(path, crate::PROFILE_CAP_BYTES, "handovers")
            .map_err(|source| ProfileError::Io {
                path: path.to_owned(),
                action: "read",
                source,
            })?;
        Handover::parse(path, &bytes)
    }

    /// Parses handover bytes; `path` is only used in messages.
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<Handover, ProfileError> {
        let bad = |what: String| ProfileError::BadProfile {
            path: path.to_owned(),
            what,
        };
        let handover: Handover = serde_json::from_slice(bytes)
            .map_err(|e| bad(format!("line {}: damaged handover: {e}", e.line())))?;
        if handover.version != HANDOVER_VERSION {
            return Err(bad(format!(
                "handover version {}; this runtime reads version {HANDOVER_VERSION}",
                handover.version
            )));
        }
        if handover.objects.is_empty() {
            return Err(bad("no object to patch".into()));
        }
        for (o, object) in handover.objects.iter().enumerate() {
            let counted = object.counted_blocks;
            for (i, s) in object.sites.iter().enumerate() {
                let bad_index = s
                    .site
                    .function_entry
                    .is_some_and(|f| f as usize >= object.functions.len())
                    || s.site.counted_block.is_some_and(|c| c >= counted)
                    || matches!(s.patch, SitePatch::Covered { by } | SitePatch::FallThrough { by, .. }
                        if by as usize >= i);
                if bad_index {
                    return Err(bad(format!("object {o}, site {i}: an index out of range")));
                }
            }
        }
        Ok(handover)
    }
}

fn yes() -> bool {
    true
}

/// How a process ended, as its runtime saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "code")]
pub enum Ending {
    /// `exit` or a return from `main` (the runtime's destructor ran).
    Exit,
    /// `_exit` or `_Exit`, with this status.
    QuickExit(i32),
    /// A fatal signal, caught before the process died of it.
    Signal(i32),
    /// The process executed another program.
    Exec,
}

/// A site the runtime could not patch as planned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    /// Site index in the handover.
    pub site: u32,
    /// Why.
    pub reason: String,
}

/// What one process of the target measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProcessResult {
    /// Process id.
    pub pid: u32,
    /// How it ended.
    pub ending: Ending,
    /// Set when the process ran a program other than the one analysed (then nothing else is).
    #[serde(default)]
    pub uninstrumented: Option<String>,
    /// Set when the runtime could not start; nothing was patched.
    #[serde(default)]
    pub failure: Option<String>,
    /// One tree per thread.
    #[serde(default)]
    pub threads: Vec<ThreadTree>,
    /// Executions per counted block, summed over the process's threads (the objects' blocks one
    /// after another, in the handover's order).
    #[serde(default)]
    pub executions: Vec<u64>,
    /// Cycles in the runtime's handlers.
    #[serde(default)]
    pub analysis_cycles: u64,
    /// Events met while the thread was already in the runtime's handler (a signal handler of
    /// the program interrupting it), not counted.
    #[serde(default)]
    pub dropped_events: u64,
    /// Sites patched with a jump (each counted once, including those under another's jump).
    #[serde(default)]
    pub jump_sites: u64,
    /// Sites patched with an `int3`.
    #[serde(default)]
    pub trap_sites: u64,
    /// Sites planned but left alone (site ids run over all objects).
    #[serde(default)]
    pub refused: Vec<Refusal>,
    /// Objects planned that were not loaded in this process (indexes in the handover).
    #[serde(default)]
    pub unloaded: Vec<u32>,
    /// Threads whose state could not be taken (busy in the handler when the process died).
    #[serde(default)]
    pub lost_threads: u32,
}

impl ProcessResult {
    /// Parses a result file's bytes; `path` is only used in messages.
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<ProcessResult, ProfileError> {
        serde_json::from_slice(bytes).map_err(|e| ProfileError::BadProfile {
            path: path.to_owned(),
            what: format!("line {}: damaged runtime result: {e}", e.line()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn handover() -> Handover {
        Handover {
            version: HANDOVER_VERSION,
            objects: vec![ObjectPlan {
                file: FileIdentity {
                    path: "/bin/x".into(),
                    device: 1,
                    inode: 2,
                    bytes: 3,
                },
                main_entry: Some(0x1000),
                functions: vec![0x1000],
                sites: vec![PlannedSite {
                    site: Site {
                        address: 0x1000,
                        function_entry: Some(0),
                        ..Site::default()
                    },
                    patch: SitePatch::Jump {
                        bytes: 5,
                        instructions: 2,
                        flags_dead: false,
                    },
                }],
                counted_blocks: 0,
            }],
            vector_extensions: true,
            results: "/tmp/r".into(),
        }
    }

    #[test]
    fn a_handover_reads_back_and_bad_indexes_are_refused() {
        let bytes = serde_json::to_vec(&handover()).unwrap();
        assert_eq!(Handover::parse(Path::new("h"), &bytes).unwrap(), handover());
        let mut bad = handover();
        bad.objects[0].sites[0].site.function_entry = Some(4);
        let bytes = serde_json::to_vec(&bad).unwrap();
        let e = Handover::parse(Path::new("h"), &bytes)
            .unwrap_err()
            .to_string();
        assert!(e.contains("out of range"), "{e}");
        let mut old = handover();
        old.version = 0;
        let bytes = serde_json::to_vec(&old).unwrap();
        assert!(Handover::parse(Path::new("h"), &bytes).is_err());
    }

    proptest! {
        #[test]
        fn damaged_files_give_errors_not_panics(cut in 0usize..600, flip in 0usize..600, byte: u8) {
            let mut bytes = serde_json::to_vec(&handover()).unwrap();
            if flip < bytes.len() {
                bytes[flip] = byte;
            }
            bytes.truncate(cut);
            let _ = Handover::parse(Path::new("h"), &bytes);
            let _ = ProcessResult::parse(Path::new("r"), &bytes);
        }
    }
}
