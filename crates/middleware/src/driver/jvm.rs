//! What the JVM drivers (Flink, Storm) share: the Linux thread of every Java thread from a thread
//! dump (`Thread.print` over the JVM's attach socket, or by `jcmd`), and the JVM on this machine that
//! runs an SPE's operators, found by its threads' names in `/proc`.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use moirai_os::sighting::SeenThreads;
use moirai_sched::ThreadRef;

use super::hotspot_attach;

/// How long a thread dump may take (before jcmd is killed).
const DUMP_TIMEOUT: Duration = Duration::from_secs(20);

/// Threads of a thread dump (`jcmd <pid> Thread.print` / `jstack`): (name, Linux tid).
pub fn parse_thread_dump(dump: &str) -> Vec<(String, i32)> {
    let mut out = Vec::new();
    for line in dump.lines() {
        let Some(line) = line.strip_prefix('"') else { continue };
        // The name ends at the last quote: what follows (`#12 daemon prio=5 ... nid=0x1a2b`) has none.
        let Some(end) = line.rfind('"') else { continue };
        let Some(nid) = line[end..].split_whitespace().find_map(|f| f.strip_prefix("nid=")) else { continue };
        let tid = match nid.strip_prefix("0x") {
            Some(hex) => i32::from_str_radix(hex, 16).ok(),
            None => nid.parse().ok(),
        };
        if let Some(tid) = tid {
            out.push((line[..end].to_string(), tid));
        }
    }
    out
}

/// The `jcmd` to attach to `pid`: the one beside the target's own `java` (same JDK), else
/// `$JAVA_HOME/bin/jcmd`, else `jcmd` on the PATH.
fn jcmd_for(pid: u32) -> PathBuf {
    let beside = std::fs::read_link(format!("/proc/{pid}/exe")).ok().and_then(|exe| Some(exe.parent()?.join("jcmd")));
    let home = std::env::var_os("JAVA_HOME").map(|h| PathBuf::from(h).join("bin/jcmd"));
    beside.into_iter().chain(home).find(|p| p.is_file()).unwrap_or_else(|| PathBuf::from("jcmd"))
}

/// Takes a thread dump of JVM `pid`: `Thread.print` over the JVM's attach socket
/// ([`hotspot_attach`]), or, where that cannot connect (a JVM whose socket this process cannot
/// reach), with `jcmd <pid> Thread.print`. Gives up soon after `stop` is raised (the middleware
/// is stopping): a dump can take seconds from a JVM starved of CPU.
pub fn thread_dump(pid: u32, stop: &AtomicBool) -> Result<String, String> {
    match hotspot_attach::jcmd(pid, "Thread.print", DUMP_TIMEOUT, stop) {
        Ok(dump) if dump.contains("nid=") => Ok(dump),
        Ok(dump) => Err(format!("JVM {pid}'s Thread.print has no native thread ids: {:.300}", dump.trim())),
        Err(e) if e.connected || stop.load(Ordering::SeqCst) => Err(e.message),
        Err(e) => jcmd_thread_dump(pid, stop).map_err(|jcmd| format!("{}; and {jcmd}", e.message)),
    }
}

/// [`thread_dump`] by `jcmd <pid> Thread.print`. The attach API only talks to a JVM of the same
/// effective user (or root), so when run as root for another user's JVM, jcmd runs as that user.
fn jcmd_thread_dump(pid: u32, stop: &AtomicBool) -> Result<String, String> {
    let jcmd = jcmd_for(pid);
    let mut cmd = Command::new(&jcmd);
    cmd.args([pid.to_string().as_str(), "Thread.print"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let euid = moirai_os::euid();
    if let Some((uid, gid)) = moirai_os::identity::owner(pid) {
        if euid == 0 && uid != 0 {
            cmd.uid(uid).gid(gid);
        }
    }
    let mut child = cmd.spawn().map_err(|e| {
        format!(
            "cannot run {} to map the SPE's threads: {e} (install a JDK, e.g. openjdk-17-jdk-headless, or set JAVA_HOME)",
            jcmd.display()
        )
    })?;
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() < DUMP_TIMEOUT && !stop.load(Ordering::SeqCst) => {
                std::thread::sleep(Duration::from_millis(10))
            }
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                let why = if stop.load(Ordering::SeqCst) {
                    "stopping".to_string()
                } else {
                    format!("took over {DUMP_TIMEOUT:?}")
                };
                return Err(format!("{} {pid} Thread.print {why}; killed it", jcmd.display()));
            }
        }
    };
    let (out, err) = (out.join().unwrap_or_default(), err.join().unwrap_or_default());
    if !status.success() || !out.contains("nid=") {
        let why = if err.trim().is_empty() { out.trim() } else { err.trim() };
        return Err(format!("{} {pid} Thread.print failed ({status}): {:.300}", jcmd.display(), why));
    }
    Ok(out)
}

/// Whether thread name `comm` (the kernel keeps its first 15 bytes) can belong to a thread whose
/// name starts with `full`.
pub fn comm_matches(comm: &str, full: &str) -> bool {
    let n = full.len().min(15);
    comm.len() >= n && comm.as_bytes()[..n] == full.as_bytes()[..n]
}

/// The `java` processes of this machine, with the names (`comm`, cut to 15 bytes) of their threads.
pub fn java_processes() -> Result<Vec<(u32, Vec<String>)>, String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").map_err(|e| format!("cannot list /proc: {e}"))?.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        let is_java = std::fs::read_link(format!("/proc/{pid}/exe"))
            .ok()
            .is_some_and(|exe| exe.file_name().is_some_and(|n| n == "java"));
        if !is_java {
            continue;
        }
        let Ok(threads) = moirai_os::proc::threads(pid) else { continue };
        out.push((pid, threads.into_iter().map(|t| t.name).collect()));
    }
    Ok(out)
}

/// Picks the JVM with the highest score (threads named like the SPE's operators): `preferred` when
/// it scores at all, else the single best. `what` names the operators in the error, `fix` says how
/// to name the JVM instead.
pub fn pick_jvm(mut scores: Vec<(usize, u32)>, preferred: Option<u32>, what: &str, fix: &str) -> Result<u32, String> {
    scores.retain(|&(score, _)| score > 0);
    if let Some(pid) = preferred.filter(|p| scores.iter().any(|&(_, q)| q == *p)) {
        return Ok(pid);
    }
    scores.sort_unstable_by(|a, b| b.cmp(a));
    match scores.as_slice() {
        [] => Err(format!("no JVM on this machine runs {what}; {fix}")),
        [(_, pid)] => Ok(*pid),
        [(best, pid), (next, _), ..] if best > next => Ok(*pid),
        more => {
            Err(format!("several JVMs run {what} (pids {:?}); {fix}", more.iter().map(|(_, p)| p).collect::<Vec<_>>()))
        }
    }
}

/// The threads `tids` of `pid` with their start times now, so that a tid the kernel reuses later
/// is never touched; threads already gone are left out. `seen` keeps a file of each open, so that
/// [`any_gone`] later checks them with a read each.
pub fn stamp(seen: &mut SeenThreads, pid: u32, tids: impl IntoIterator<Item = i32>) -> Vec<ThreadRef> {
    tids.into_iter().filter_map(|tid| Some(ThreadRef { tid, start_ticks: seen.start_ticks(pid, tid).ok()? })).collect()
}

/// Whether a mapped thread ended, or its tid now belongs to another thread. A thread whose
/// `/proc` entry cannot be read for lack of descriptors is not gone: the mapping is kept (the
/// translator checks each thread's start time again before it changes it).
pub fn any_gone<'a>(seen: &mut SeenThreads, pid: u32, threads: impl IntoIterator<Item = &'a ThreadRef>) -> bool {
    threads.into_iter().any(|t| match seen.start_ticks(pid, t.tid) {
        Ok(start_ticks) => start_ticks != t.start_ticks,
        Err(e) => !moirai_os::limits::is_out_of_descriptors(&e),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dumps_give_names_and_native_ids() {
        let dump = r#"12345:
"Reference Handler" #2 daemon prio=10 os_prio=0 cpu=0.31ms elapsed=30.10s tid=0x00007f nid=0x3001 waiting on condition  [0x00007f]
   java.lang.Thread.State: RUNNABLE
"Thread-40-busy-executor[2, 2]" #227 prio=5 os_prio=0 cpu=5943.89ms elapsed=11.02s tid=0x00007f nid=0x7bd8 runnable  [0x00007f]
"a \"quoted\" name" #3 prio=5 tid=0x1 nid=17 runnable
"GC Thread#0" os_prio=0 cpu=3.00ms elapsed=30.00s tid=0x00007f runnable
"#;
        assert_eq!(
            parse_thread_dump(dump),
            vec![
                ("Reference Handler".to_string(), 0x3001),
                ("Thread-40-busy-executor[2, 2]".to_string(), 0x7bd8),
                (r#"a \"quoted\" name"#.to_string(), 17),
            ]
        );
    }

    #[test]
    fn thread_comm_cuts_match_full_names() {
        assert!(comm_matches("syn0/op1 (1/2)#", "syn0/op1 (1/2)#"));
        assert!(comm_matches("Source: syn0/so", "Source: syn0/source (1/1)#"));
        assert!(comm_matches("A (1/1)#0", "A (1/1)#"));
        assert!(!comm_matches("A (1/1)#0", "AB (1/1)#"));
        assert!(!comm_matches("B (1/1)#0", "A (1/1)#"));
    }

    #[test]
    fn the_best_scoring_jvm_is_picked_and_ties_are_refused() {
        let pick = |s: Vec<(usize, u32)>, p| pick_jvm(s, p, "the operators", "set `pid`");
        assert_eq!(pick(vec![(3, 10), (5, 11)], None), Ok(11));
        assert_eq!(pick(vec![(3, 10), (5, 11)], Some(10)), Ok(10), "preferred when it scores");
        assert_eq!(pick(vec![(0, 10), (5, 11)], Some(10)), Ok(11), "not when it does not");
        let e = pick(vec![(5, 10), (5, 11)], None).unwrap_err();
        assert!(e.contains("several JVMs") && e.contains("set `pid`"), "{e}");
        let e = pick(vec![(0, 10)], None).unwrap_err();
        assert!(e.contains("no JVM on this machine runs the operators; set `pid`"), "{e}");
    }
}
