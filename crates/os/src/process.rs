//! Signals to a process or a process group, and the parent-death signal of a child about to be
//! spawned (threads of a process, read from `/proc`, are [`crate::proc`]'s).
//!
//! A pid names a process only while it lives or, for its parent, until it is reaped: afterwards
//! the kernel may give the number to another process. A caller that signals by pid therefore
//! signals only a child it has not reaped yet (`std::process::Child` before `wait` returned), or
//! accepts that race knowingly.

use std::io;
use std::process::Command;

/// A signal, e.g. [`Signal::TERM`]; [`Signal::number`] is what `ExitStatusExt::signal` reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Signal(libc::c_int);

impl Signal {
    /// `SIGHUP`: the terminal hung up.
    pub const HUP: Signal = Signal(libc::SIGHUP);
    /// `SIGINT`: Ctrl-C; moirai's commands stop cleanly on it.
    pub const INT: Signal = Signal(libc::SIGINT);
    /// `SIGKILL`: ends the process at once; cannot be caught.
    pub const KILL: Signal = Signal(libc::SIGKILL);
    /// `SIGTERM`: asks the process to stop.
    pub const TERM: Signal = Signal(libc::SIGTERM);
    /// `SIGQUIT`: a JVM's cue to look for an attach request (or, without one, to print a
    /// thread dump); the default action of a process that does not handle it is a core dump.
    pub const QUIT: Signal = Signal(libc::SIGQUIT);
    /// `SIGSTOP`: stops the process until `SIGCONT`; cannot be caught.
    pub const STOP: Signal = Signal(libc::SIGSTOP);
    /// `SIGCONT`: resumes a stopped process.
    pub const CONT: Signal = Signal(libc::SIGCONT);

    /// The signal's number, as `kill -l` and `ExitStatusExt::signal` give it.
    pub const fn number(self) -> i32 {
        self.0
    }
}

/// `id` as a positive `pid_t`, or an `InvalidInput` error naming it: 0 and negative numbers
/// mean "my group" or "every process" to kill(2), never one process or group.
fn positive(id: u32, what: &str) -> io::Result<libc::pid_t> {
    match libc::pid_t::try_from(id) {
        Ok(pid) if pid > 0 => Ok(pid),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{id} is not a {what}: ids are in [1, {}]", libc::pid_t::MAX),
        )),
    }
}

/// `kill(pid, signal)`: 0 for a valid target, else the kernel's error.
fn kill(pid: libc::pid_t, signal: Signal) -> io::Result<()> {
    // SAFETY: kill(2) passes no memory; `pid` is a single process (> 0) or a single group (< -1),
    // as the callers checked.
    if unsafe { libc::kill(pid, signal.0) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sends `signal` to process `pid` (see the module doc on reused pids). Errors: `InvalidInput`
/// for pid 0 or one above `pid_t::MAX`; `ESRCH` when no such process exists; `EPERM` when it is
/// another user's and the caller lacks `CAP_KILL`.
pub fn signal_process(pid: u32, signal: Signal) -> io::Result<()> {
    kill(positive(pid, "process id")?, signal)
}

/// Sends `signal` to every process of process group `pgid` — the group a child leads when it
/// was spawned with `CommandExt::process_group(0)`, whose id is the child's pid. Errors as
/// [`signal_process`]; group 1 is refused too (`kill(-1, ...)` would signal every process the
/// caller may signal).
pub fn signal_group(pgid: u32, signal: Signal) -> io::Result<()> {
    let pgid = positive(pgid, "process group id")?;
    if pgid == 1 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "1 is not a process group id to signal: kill(-1) means every process",
        ));
    }
    kill(-pgid, signal)
}

/// Makes the child that `cmd` spawns receive `signal` when its parent dies
/// (`prctl(PR_SET_PDEATHSIG)`), so that it never outlives a parent killed outright; a child whose
/// parent died between `fork` and `prctl` — it would never get the signal — exits with status 1
/// before `exec`. Linux counts the *thread* that spawned the child as its parent: spawn from a
/// thread that lives as long as the child should (e.g. the main thread), or the child gets
/// `signal` when that thread ends. The setting survives `exec` but not a change of credentials
/// (a set-user-ID program).
pub fn set_parent_death_signal(cmd: &mut Command, signal: Signal) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id() as libc::pid_t;
    let number = signal.0 as libc::c_ulong;
    // SAFETY: the closure runs in the forked child before exec and calls only prctl, getppid and
    // _exit, which are async-signal-safe; it allocates nothing and takes no lock.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, number, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent died between fork and prctl: the signal will never come, so leave now.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::is_running;
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    use std::process::{Child, ExitStatus, Stdio};
    use std::time::{Duration, Instant};

    /// The child's exit status within 10 s; kills it and fails the test otherwise.
    fn exit_within(child: &mut Child, what: &str) -> ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{what}: the child {} is still running", child.id());
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    #[test]
    fn a_signalled_child_dies_of_that_signal() {
        let mut child = Command::new("sleep").arg("300").spawn().unwrap();
        signal_process(child.id(), Signal::TERM).unwrap();
        assert_eq!(exit_within(&mut child, "SIGTERM").signal(), Some(Signal::TERM.number()));
        let mut child = Command::new("sleep").arg("300").spawn().unwrap();
        signal_process(child.id(), Signal::KILL).unwrap();
        assert_eq!(exit_within(&mut child, "SIGKILL").signal(), Some(libc::SIGKILL));
    }

    #[test]
    fn a_signalled_group_takes_the_grandchildren_along() {
        // The shell (the group's leader) starts a sleep in its group and prints its pid.
        let mut child = Command::new("sh")
            .args(["-c", "sleep 300 & echo $!; wait"])
            .process_group(0)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line).unwrap();
        let grandchild: u32 = line.trim().parse().unwrap();
        assert!(is_running(grandchild));
        signal_group(child.id(), Signal::KILL).unwrap();
        assert_eq!(exit_within(&mut child, "the group's leader").signal(), Some(libc::SIGKILL));
        // Orphaned, the grandchild is reaped by init (or a subreaper): gone or a zombie.
        let deadline = Instant::now() + Duration::from_secs(10);
        while is_running(grandchild) {
            assert!(Instant::now() < deadline, "the grandchild {grandchild} outlived its group's signal");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    #[test]
    fn ids_that_name_more_than_one_process_are_refused() {
        for id in [0, 1 << 31, u32::MAX] {
            let e = signal_process(id, Signal::CONT).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "process {id}: {e}");
            assert!(e.to_string().contains(&id.to_string()), "{e}");
        }
        for id in [0, 1, u32::MAX] {
            let e = signal_group(id, Signal::CONT).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "group {id}: {e}");
        }
        // pid_t::MAX lies above any pid_max Linux allows (2^22): no such process.
        let e = signal_process(libc::pid_t::MAX as u32, Signal::CONT).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ESRCH), "{e}");
    }

    /// Spawns `sleep 300` from a thread that ends at once, with or without a parent-death signal.
    fn spawned_by_an_ending_thread(death_signal: Option<Signal>) -> Child {
        std::thread::spawn(move || {
            let mut cmd = Command::new("sleep");
            cmd.arg("300");
            if let Some(signal) = death_signal {
                set_parent_death_signal(&mut cmd, signal);
            }
            cmd.spawn().unwrap()
        })
        .join()
        .unwrap()
    }

    #[test]
    fn a_child_gets_its_parent_death_signal_when_its_parent_ends() {
        // Linux counts the spawning thread as the parent: its end is the parent's death.
        let mut child = spawned_by_an_ending_thread(Some(Signal::TERM));
        assert_eq!(exit_within(&mut child, "parent-death signal").signal(), Some(Signal::TERM.number()));
        // Without the setting, the same child lives on.
        let mut control = spawned_by_an_ending_thread(None);
        std::thread::sleep(Duration::from_millis(100));
        let alive = control.try_wait().unwrap().is_none();
        let _ = control.kill();
        let _ = control.wait();
        assert!(alive, "a child without a parent-death signal ended by itself");
    }
}
