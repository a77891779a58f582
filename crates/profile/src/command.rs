//! Finding the program a command names, before anything is started, so that a missing or
//! non-executable command is one clear error rather than a child that dies at `exec`.

use std::ffi::{OsStr, OsString};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::ProfileError;

/// The file the first word of `command` runs (see [`resolve_command`]); an empty command is
/// an error.
pub(crate) fn resolve_program(
    command: &[OsString],
    search_path: Option<&OsStr>,
) -> Result<PathBuf, ProfileError> {
    let first = command.first().ok_or_else(|| ProfileError::Command {
        command: String::new(),
        what: "no command given".into(),
    })?;
    resolve_command(first, search_path)
}

/// The file `command` runs: itself when it holds a `/`, else the first executable of that name
/// in `search_path` (the `PATH` the target will see).
pub fn resolve_command(
    command: &OsStr,
    search_path: Option<&OsStr>,
) -> Result<PathBuf, ProfileError> {
    let name = Path::new(command);
    let shown = name.display().to_string();
    if shown.is_empty() {
        return Err(ProfileError::Command {
            command: shown,
            what: "empty command".into(),
        });
    }
    if command.as_encoded_bytes().contains(&b'/') {
        return check_executable(name)
            .map(|()| name.to_owned())
            .map_err(|what| ProfileError::Command {
                command: shown,
                what,
            });
    }
    let dirs = search_path.unwrap_or(OsStr::new("/usr/local/bin:/usr/bin:/bin"));
    std::env::split_paths(dirs)
        .map(|dir| dir.join(name))
        .find(|candidate| check_executable(candidate).is_ok())
        .ok_or_else(|| ProfileError::Command {
            command: shown,
            what: "not found in PATH".into(),
        })
}

fn check_executable(path: &Path) -> Result<(), String> {
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".to_owned(),
        _ => e.to_string(),
    })?;
    if meta.is_dir() {
        return Err("is a directory".into());
    }
    if meta.permissions().mode() & 0o111 == 0 {
        return Err("not executable (no x permission)".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_sh_and_refuses_what_cannot_run() {
        let path = Some(OsStr::new("/usr/bin:/bin"));
        assert!(resolve_command(OsStr::new("sh"), path).is_ok());
        let missing = resolve_command(OsStr::new("no-such-command-xyz"), path).unwrap_err();
        assert_eq!(
            missing.to_string(),
            "no-such-command-xyz: not found in PATH"
        );
        let dir = resolve_command(OsStr::new("/tmp/"), path).unwrap_err();
        assert!(dir.to_string().contains("is a directory"), "{dir}");
        let file = tempfile::NamedTempFile::new().unwrap();
        let err = resolve_command(file.path().as_os_str(), path).unwrap_err();
        assert!(err.to_string().contains("not executable"), "{err}");
    }
}
