//! What `/proc` says about a process the recording started, when no record or wait status
//! can tell.

/// Whether process `pid` exists and is not a zombie (which runs no more code and has written
/// all it will).
pub(crate) fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
}

/// The session process `pid` belongs to, if it exists: a daemon leaves its parent's session
/// (`setsid`).
pub(crate) fn session_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    // After the command: state, parent, process group, session.
    rest.split_whitespace().nth(3)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_reaped_child_is_not() {
        assert!(alive(std::process::id() as i32));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        child.wait().unwrap();
        assert!(!alive(pid));
    }

    #[test]
    fn a_child_shares_this_process_session() {
        let mut child = std::process::Command::new("sleep")
            .arg("1")
            .spawn()
            .unwrap();
        let own = session_of(std::process::id() as i32);
        assert!(own.is_some());
        assert_eq!(session_of(child.id() as i32), own);
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(session_of(child.id() as i32), None);
    }
}
