//! Starting the target: fork a child that waits until its events are
//! open, then let it `exec`; reap it when it is done.

use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::{ProfileError, TargetExit};

fn command_error(command: &str, what: &str) -> ProfileError {
    ProfileError::Command {
        command: command.to_string(),
        what: what.to_string(),
    }
}

/// The target's first process.
pub(super) struct Child {
    pid: libc::pid_t,
    command: String,
    /// Writing a byte here lets the child `exec`; closing it unwritten makes it exit.
    go: Option<OwnedFd>,
    /// Closed by a successful `exec` (close-on-exec); carries `errno` when `exec` fails.
    exec_errors: Option<OwnedFd>,
    /// Readable once the child has exited (Linux 5.3 and later).
    pidfd: Option<OwnedFd>,
    released: bool,
    reaped: bool,
}

fn pipe() -> Result<(OwnedFd, OwnedFd), ProfileError> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(system("pipe2", io::Error::last_os_error()));
    }
    // SAFETY: pipe2 succeeded, so both descriptors are open and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn system(what: &str, source: io::Error) -> ProfileError {
    ProfileError::System {
        what: what.to_string(),
        source,
    }
}

fn c_string(bytes: &[u8], command: &str) -> Result<CString, ProfileError> {
    CString::new(bytes).map_err(|_| command_error(command, "an argument contains a NUL byte"))
}

impl Child {
    /// Forks a child that blocks until [`Child::exec`] (or exits if this `Child` is dropped
    /// first). Everything the child needs is prepared here, before the fork: between fork
    /// and exec it may only make async-signal-safe calls.
    pub(super) fn fork_waiting(
        program: &Path,
        command: &[OsString],
    ) -> Result<Child, ProfileError> {
        let shown = command
            .first()
            .map(|c| c.to_string_lossy().into_owned())
            .unwrap_or_default();
        let path = c_string(program.as_os_str().as_bytes(), &shown)?;
        let args = command
            .iter()
            .map(|arg| c_string(arg.as_bytes(), &shown))
            .collect::<Result<Vec<_>, _>>()?;
        let mut argv: Vec<*const libc::c_char> = args.iter().map(|arg| arg.as_ptr()).collect();
        argv.push(std::ptr::null());
        let (go_read, go_write) = pipe()?;
        let (errors_read, errors_write) = pipe()?;
        // SAFETY: the child only runs `wait_then_exec`, which makes async-signal-safe calls
        // on memory prepared before the fork and never returns.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(system("fork", io::Error::last_os_error()));
        }
        if pid == 0 {
            // SAFETY: in the child right after fork; the pointers come from `path`, `argv`
            // and `args`, alive in this copy of the address space until exec or _exit.
            unsafe {
                wait_then_exec(
                    go_read.as_raw_fd(),
                    go_write.as_raw_fd(),
                    errors_read.as_raw_fd(),
                    errors_write.as_raw_fd(),
                    path.as_ptr(),
                    argv.as_ptr(),
                )
            }
        }
        drop((go_read, errors_write));
        Ok(Child {
            pid,
            command: shown,
            go: Some(go_write),
            exec_errors: Some(errors_read),
            pidfd: open_pidfd(pid),
            released: false,
            reaped: false,
        })
    }

    pub(super) fn pid(&self) -> libc::pid_t {
        self.pid
    }

    /// Lets the child `exec` and waits until it has (or has failed to).
    pub(super) fn exec(&mut self) -> Result<(), ProfileError> {
        let go = self.go.take();
        if let Some(go) = &go {
            let byte = 1u8;
            // SAFETY: writes one byte from a live local to an open pipe.
            let written = unsafe { libc::write(go.as_raw_fd(), (&byte as *const u8).cast(), 1) };
            if written != 1 {
                return Err(system("releasing the target", io::Error::last_os_error()));
            }
        }
        drop(go);
        self.released = true;
        let Some(errors) = self.exec_errors.take() else {
            return Ok(());
        };
        let mut errno = [0u8; 4];
        let got = read_full(errors.as_raw_fd(), &mut errno);
        if got == errno.len() {
            self.reap_blocking();
            let cause = io::Error::from_raw_os_error(i32::from_ne_bytes(errno));
            return Err(command_error(
                &self.command,
                &format!("cannot execute: {cause}"),
            ));
        }
        Ok(())
    }

    /// Makes a child that was never released exit, and reaps it.
    pub(super) fn abandon(mut self) {
        self.go = None;
        self.reap_blocking();
    }

    /// Sends SIGINT to the target's first process, as a terminal's Ctrl-C would.
    pub(super) fn interrupt(&self) {
        if !self.reaped {
            // SAFETY: kill has no memory effects; the pid is our unreaped child, so it
            // cannot have been reused.
            unsafe { libc::kill(self.pid, libc::SIGINT) };
        }
    }

    /// A descriptor that becomes readable when the child exits, if the kernel has pidfds.
    pub(super) fn exit_fd(&self) -> Option<RawFd> {
        self.pidfd.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// The child's end, if it has ended.
    pub(super) fn try_wait(&mut self) -> Result<Option<TargetExit>, ProfileError> {
        if self.reaped {
            return Ok(None);
        }
        let mut status = 0;
        // SAFETY: `status` is a valid, writable int.
        let got = unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) };
        match got {
            0 => Ok(None),
            pid if pid == self.pid => {
                self.reaped = true;
                Ok(Some(exit_of(status)))
            }
            _ => {
                let error = io::Error::last_os_error();
                if error.kind() == io::ErrorKind::Interrupted {
                    return Ok(None);
                }
                Err(system("waiting for the target", error))
            }
        }
    }

    fn reap_blocking(&mut self) {
        if self.reaped {
            return;
        }
        let mut status = 0;
        loop {
            // SAFETY: `status` is a valid, writable int.
            let got = unsafe { libc::waitpid(self.pid, &mut status, 0) };
            if got >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                break;
            }
        }
        self.reaped = true;
    }
}

impl Drop for Child {
    /// A child never released is told to exit and reaped; a running target is left alone.
    fn drop(&mut self) {
        if !self.released {
            self.go = None;
            self.reap_blocking();
        }
    }
}

fn exit_of(status: libc::c_int) -> TargetExit {
    if libc::WIFSIGNALED(status) {
        TargetExit::Signaled(libc::WTERMSIG(status))
    } else {
        TargetExit::Exited(libc::WEXITSTATUS(status))
    }
}

/// Reads until `buffer` is full or the writer has closed; returns the bytes read.
fn read_full(fd: RawFd, buffer: &mut [u8]) -> usize {
    let mut filled = 0;
    while filled < buffer.len() {
        let rest = &mut buffer[filled..];
        // SAFETY: reads at most `rest.len()` bytes into `rest`.
        let got = unsafe { libc::read(fd, rest.as_mut_ptr().cast(), rest.len()) };
        match got {
            n if n > 0 => filled += n as usize,
            0 => break,
            _ if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => {}
            _ => break,
        }
    }
    filled
}

fn open_pidfd(pid: libc::pid_t) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: the syscall returned a new descriptor that nothing else owns.
    Some(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// The child's side: drop the parent's pipe ends, restore the signal state a new program
/// expects, wait for the go byte, exec; report `errno` if exec fails.
///
/// # Safety
/// Only to be called in a freshly forked child; `path` and `argv` must point to a valid
/// C string and a NULL-terminated array of C strings.
unsafe fn wait_then_exec(
    go_read: RawFd,
    go_write: RawFd,
    errors_read: RawFd,
    errors_write: RawFd,
    path: *const libc::c_char,
    argv: *const *const libc::c_char,
) -> ! {
    // SAFETY (whole block): close, sigemptyset, sigprocmask, signal, read, execv, write and
    // _exit are async-signal-safe; every pointer is to memory valid in this process.
    unsafe {
        libc::close(go_write);
        libc::close(errors_read);
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        // Rust ignores SIGPIPE; an ignored signal stays ignored across exec.
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        let mut byte = 0u8;
        let got = loop {
            let got = libc::read(go_read, (&mut byte as *mut u8).cast(), 1);
            if got >= 0 || *libc::__errno_location() != libc::EINTR {
                break got;
            }
        };
        if got != 1 {
            libc::_exit(127);
        }
        libc::execv(path, argv);
        let errno = (*libc::__errno_location()).to_ne_bytes();
        libc::write(errors_write, errno.as_ptr().cast(), errno.len());
        libc::_exit(127)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_released_child_runs_and_its_exit_status_is_kept() {
        let command: Vec<OsString> = vec!["sh".into(), "-c".into(), "exit 3".into()];
        let program = crate::resolve_command(&command[0], None).unwrap();
        let mut child = Child::fork_waiting(&program, &command).unwrap();
        child.exec().unwrap();
        let exit = loop {
            if let Some(exit) = child.try_wait().unwrap() {
                break exit;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        assert_eq!(exit, TargetExit::Exited(3));
    }

    #[test]
    fn a_child_never_released_exits_without_running_the_command() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let script = format!("touch {}", marker.display());
        let command: Vec<OsString> = vec!["sh".into(), "-c".into(), script.into()];
        let child = Child::fork_waiting(
            &crate::resolve_command(&command[0], None).unwrap(),
            &command,
        )
        .unwrap();
        child.abandon();
        assert!(!marker.exists());
    }

    #[test]
    fn an_exec_failure_is_a_command_error() {
        let dir = tempfile::tempdir().unwrap();
        // Executable but not a program the kernel can load (no #! line, not ELF).
        let junk = dir.path().join("junk");
        std::fs::write(&junk, [0u8, 1, 2, 3]).unwrap();
        std::fs::set_permissions(&junk, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let command = vec![junk.into_os_string()];
        let mut child = Child::fork_waiting(
            &crate::resolve_command(&command[0], None).unwrap(),
            &command,
        )
        .unwrap();
        let error = child.exec().unwrap_err();
        assert!(matches!(error, ProfileError::Command { .. }));
        assert!(error.to_string().contains("cannot execute"), "{error}");
    }
}
