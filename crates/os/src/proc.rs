//! Reading threads and CPU accounting from `/proc`.
//!
//! Every function takes the process id explicitly (use [`std::process::id`] for the calling
//! process), so the same code serves the engine (its own threads) and the middleware (threads of
//! another process).

use std::fs;
use std::io;
use std::path::PathBuf;

/// A Linux thread id, as `gettid(2)` returns and `/proc/<pid>/task/<tid>` names it.
pub type Tid = i32;

/// The calling thread's Linux thread id.
pub fn current_tid() -> Tid {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::gettid() }
}

/// CPU time the calling thread has run, in nanoseconds (`CLOCK_THREAD_CPUTIME_ID`).
pub fn current_thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant the kernel knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Clock ticks per second for the times in `/proc/<pid>/stat` (`USER_HZ`).
pub fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as u64
    } else {
        100
    }
}

/// The fields of `/proc/<pid>/task/<tid>/stat` that moirai uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadStat {
    /// The thread id.
    pub tid: Tid,
    /// The thread's name (`comm`, at most 15 bytes).
    pub name: String,
    /// One-letter state (`R`, `S`, `D`, ...).
    pub state: char,
    /// CPU time in user mode, in clock ticks.
    pub utime_ticks: u64,
    /// CPU time in kernel mode, in clock ticks.
    pub stime_ticks: u64,
    /// The nice value.
    pub nice: i32,
    /// Start time after boot, in clock ticks: with the tid, it identifies a thread even if the
    /// kernel reuses the tid later.
    pub start_ticks: u64,
}

impl ThreadStat {
    /// Parses the content of a `stat` file. The name may contain spaces and parentheses, so the
    /// fields are split after the *last* closing parenthesis.
    pub fn parse(text: &str) -> io::Result<ThreadStat> {
        let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, format!("stat: {what}: {text:?}"));
        let open = text.find('(').ok_or_else(|| bad("no '('"))?;
        let close = text.rfind(')').ok_or_else(|| bad("no ')'"))?;
        let tid = text[..open].trim().parse().map_err(|_| bad("pid"))?;
        let name = text[open + 1..close].to_string();
        // Fields after the name, numbered from 3 as in proc(5).
        let rest: Vec<&str> = text[close + 1..].split_whitespace().collect();
        let field = |n: usize| -> io::Result<&str> { rest.get(n - 3).copied().ok_or_else(|| bad("too few fields")) };
        let num = |n: usize| -> io::Result<u64> { field(n)?.parse().map_err(|_| bad("number")) };
        Ok(ThreadStat {
            tid,
            name,
            state: field(3)?.chars().next().unwrap_or('?'),
            utime_ticks: num(14)?,
            stime_ticks: num(15)?,
            nice: field(19)?.parse().map_err(|_| bad("nice"))?,
            start_ticks: num(22)?,
        })
    }
}

/// Reads a `stat` file. The kernel cuts names at 15 bytes, which may split a UTF-8 character, so
/// the bytes are converted lossily rather than rejected.
fn read_stat(path: &std::path::Path) -> io::Result<String> {
    Ok(String::from_utf8_lossy(&read_small(path)?).into_owned())
}

/// Reads a small `/proc` file in three system calls (open, read, close) where [`fs::read`] takes
/// five (it asks the size first, and reads once more to see the end): a middleware reads one per
/// thread a round. A `/proc` file of one record (`stat`, `schedstat`) is produced whole by its
/// first read, so a read that does not fill the buffer has read everything; a longer file is
/// read on to its end.
fn read_small(path: &std::path::Path) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut file = fs::File::open(path)?;
    let mut buf = vec![0u8; 1024];
    let mut len = 0;
    loop {
        let n = file.read(&mut buf[len..])?;
        len += n;
        if n == 0 || len < buf.len() {
            break;
        }
        buf.resize(2 * buf.len(), 0);
    }
    buf.truncate(len);
    Ok(buf)
}

fn task_dir(pid: u32, tid: Tid) -> PathBuf {
    PathBuf::from(format!("/proc/{pid}/task/{tid}"))
}

/// Reads `/proc/<pid>/task/<tid>/stat`.
pub fn thread_stat(pid: u32, tid: Tid) -> io::Result<ThreadStat> {
    ThreadStat::parse(&read_stat(&task_dir(pid, tid).join("stat"))?)
}

/// All threads of a process, in tid order.
pub fn threads(pid: u32) -> io::Result<Vec<ThreadStat>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(format!("/proc/{pid}/task"))? {
        let Some(tid) = entry?.file_name().to_str().and_then(|s| s.parse::<Tid>().ok()) else {
            continue;
        };
        // A thread may exit between read_dir and the read: skip it.
        match thread_stat(pid, tid) {
            Ok(stat) => out.push(stat),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    out.sort_by_key(|t| t.tid);
    Ok(out)
}

/// The ids of a process's threads (`/proc/<pid>/task`), sorted: one directory read, nothing
/// read per thread. A thread set that stayed the same between two calls has the same threads
/// (a tid reused in between would need the kernel to hand out every other id first).
pub fn thread_ids(pid: u32) -> io::Result<Vec<Tid>> {
    let mut out: Vec<Tid> =
        fs::read_dir(format!("/proc/{pid}/task"))?.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect();
    out.sort_unstable();
    Ok(out)
}

/// The machine's CPU time since boot, in clock ticks, from the `cpu` line of `/proc/stat`:
/// `(busy, total)`, where idle and I/O wait are not busy and guest time (already counted in
/// user time) is not counted twice. The busy share of an interval is Δbusy / Δtotal.
pub fn machine_cpu_ticks() -> io::Result<(u64, u64)> {
    let text = fs::read_to_string("/proc/stat")?;
    parse_machine_cpu(&text)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "/proc/stat has no readable cpu line"))
}

fn parse_machine_cpu(text: &str) -> Option<(u64, u64)> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let f: Vec<u64> = line.split_whitespace().skip(1).map(|v| v.parse().ok()).collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal [guest guest_nice]
    let total: u64 = f.iter().take(8).sum();
    let idle = f.get(3)? + f.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

/// CPU time a thread has run, in nanoseconds: `schedstat`'s first field (exact), or `utime +
/// stime` from `stat` (clock-tick resolution) where the kernel has no schedstat.
pub fn thread_cpu_ns(pid: u32, tid: Tid) -> io::Result<u64> {
    match read_small(&task_dir(pid, tid).join("schedstat")).map(|b| String::from_utf8_lossy(&b).into_owned()) {
        Ok(text) => text
            .split_whitespace()
            .next()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("schedstat: {text:?}"))),
        Err(e) if e.kind() == io::ErrorKind::NotFound && task_dir(pid, tid).exists() => {
            let stat = thread_stat(pid, tid)?;
            Ok((stat.utime_ticks + stat.stime_ticks) * 1_000_000_000 / clock_ticks_per_second())
        }
        Err(e) => Err(e),
    }
}

/// A thread's CPU time as `/proc/<pid>/task/<tid>/schedstat` shows it, from a file kept open:
/// each read is one `pread`, where [`thread_cpu_ns`] opens, reads and closes the file (a
/// middleware reads one per operator thread a round). Once the thread has ended, a read fails
/// (the file stays bound to the ended thread, also if its tid is handed out again).
#[derive(Debug)]
pub struct ThreadCpuClock {
    file: fs::File,
}

impl ThreadCpuClock {
    /// Opens thread `tid` of `pid`'s clock; fails where the kernel keeps no `schedstat` (use
    /// [`thread_cpu_ns`] then).
    pub fn open(pid: u32, tid: Tid) -> io::Result<Self> {
        Ok(ThreadCpuClock { file: fs::File::open(task_dir(pid, tid).join("schedstat"))? })
    }

    /// The CPU time the thread has run, in nanoseconds.
    pub fn read_ns(&self) -> io::Result<u64> {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 128];
        let n = self.file.read_at(&mut buf, 0)?;
        let text = std::str::from_utf8(&buf[..n]).unwrap_or("");
        text.split_whitespace()
            .next()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("schedstat: {text:?}")))
    }
}

/// CPU time thread `tid` *of the calling process* has run, in nanoseconds — the same figure as
/// [`thread_cpu_ns`] (the scheduler's `sum_exec_runtime`), read with one `clock_gettime(2)` on
/// the thread's CPU clock instead of opening and parsing a `/proc` file: about a microsecond
/// instead of tens (an engine answering a scrape reads one per operator thread). The clock id
/// is built from the tid as glibc's `pthread_getcpuclockid` builds it (`~tid << 3 |
/// CPUCLOCK_PERTHREAD | CPUCLOCK_SCHED`); the kernel accepts it for any thread of the caller's
/// thread group. A thread that ended (or belongs to another process) is `NotFound`.
pub fn own_thread_cpu_ns(tid: Tid) -> io::Result<u64> {
    const CPUCLOCK_PERTHREAD: libc::clockid_t = 4;
    const CPUCLOCK_SCHED: libc::clockid_t = 2;
    if tid <= 0 {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{tid} is not a thread id")));
    }
    let clock = ((!tid) << 3) | CPUCLOCK_PERTHREAD | CPUCLOCK_SCHED;
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec into `ts`, which lives for the call.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        let e = io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::EINVAL) | Some(libc::ESRCH) => {
                io::Error::new(io::ErrorKind::NotFound, format!("thread {tid} of this process: {e}"))
            }
            _ => e,
        });
    }
    Ok(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// CPU time (user + system) of a whole process, all its threads, in nanoseconds: read from the
/// kernel's CPU clock of the process (`clock_getcpuclockid(3)`, the scheduler's own count, at
/// nanosecond resolution), or, where that clock cannot be read, from `/proc/<pid>/stat` at
/// clock-tick resolution (10 ms: an idle middleware's few milliseconds over a benchmark's point
/// read 0 there).
pub fn process_cpu_ns(pid: u32) -> io::Result<u64> {
    if let Some(ns) = process_cpu_clock_ns(pid) {
        return Ok(ns);
    }
    let stat = ThreadStat::parse(&read_stat(std::path::Path::new(&format!("/proc/{pid}/stat")))?)?;
    Ok((stat.utime_ticks + stat.stime_ticks) * 1_000_000_000 / clock_ticks_per_second())
}

/// The CPU clock of process `pid`, in nanoseconds; `None` when it cannot be read (no such
/// process, or not a process's main thread).
fn process_cpu_clock_ns(pid: u32) -> Option<u64> {
    let pid = libc::pid_t::try_from(pid).ok().filter(|&p| p > 0)?;
    let mut clock: libc::clockid_t = 0;
    // SAFETY: clock_getcpuclockid writes one clockid_t into `clock`, which lives for the call.
    if unsafe { libc::clock_getcpuclockid(pid, &mut clock) } != 0 {
        return None;
    }
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec into `ts`, which lives for the call.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return None;
    }
    Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// CPU time (user + system) of a whole process and of its children that it waited for
/// (`cutime + cstime`: e.g. the `jcmd` a middleware runs for a thread dump), in nanoseconds:
/// the process's own at nanosecond resolution (see [`process_cpu_ns`]), its children's at
/// clock-tick resolution (the kernel keeps no finer count of them).
pub fn process_and_children_cpu_ns(pid: u32) -> io::Result<u64> {
    let text = read_stat(std::path::Path::new(&format!("/proc/{pid}/stat")))?;
    let bad = || io::Error::new(io::ErrorKind::InvalidData, format!("stat: too few fields: {text:?}"));
    let close = text.rfind(')').ok_or_else(bad)?;
    // Fields 14..=17 (utime, stime, cutime, cstime), numbered from 3 after the name.
    let ticks: Vec<u64> = text[close + 1..]
        .split_whitespace()
        .skip(14 - 3)
        .take(4)
        .map(|f| f.parse::<i64>().map(|v| v.max(0) as u64))
        .collect::<Result<Vec<u64>, _>>()
        .map_err(|_| bad())?;
    if ticks.len() < 4 {
        return Err(bad());
    }
    let tick_ns = |t: u64| t * 1_000_000_000 / clock_ticks_per_second();
    let own = process_cpu_clock_ns(pid).unwrap_or_else(|| tick_ns(ticks[0] + ticks[1]));
    Ok(own + tick_ns(ticks[2] + ticks[3]))
}

/// How many times thread `tid` of process `pid` went to sleep so far (`voluntary_ctxt_switches`
/// of `/proc/<pid>/task/<tid>/status`): its wake-ups, for a thread that should not wake.
pub fn thread_voluntary_switches(pid: u32, tid: Tid) -> io::Result<u64> {
    let status = fs::read_to_string(task_dir(pid, tid).join("status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidData, "no voluntary_ctxt_switches in /proc/<pid>/task/<tid>/status")
        })
}

/// Resident set size of a process, in bytes (`VmRSS` of `/proc/<pid>/status`).
pub fn process_rss_bytes(pid: u32) -> io::Result<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no VmRSS in /proc/<pid>/status"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_with_spaces_and_parentheses() {
        let line = "4242 (my (odd) name) S 1 2 3 4 5 6 7 8 9 10 111 222 13 14 20 -5 1 0 98765 0 0";
        let s = ThreadStat::parse(line).unwrap();
        assert_eq!(s.tid, 4242);
        assert_eq!(s.name, "my (odd) name");
        assert_eq!(s.state, 'S');
        assert_eq!((s.utime_ticks, s.stime_ticks), (111, 222));
        assert_eq!(s.nice, -5);
        assert_eq!(s.start_ticks, 98765);
    }

    #[test]
    fn a_small_read_takes_a_proc_record_whole_and_a_longer_file_to_its_end() {
        let stat = read_small(std::path::Path::new("/proc/self/stat")).unwrap();
        assert_eq!(stat.last(), Some(&b'\n'), "the whole record, to its newline");
        assert_eq!(
            String::from_utf8_lossy(&stat).split_whitespace().next(),
            Some(std::process::id().to_string().as_str())
        );
        let path = std::env::temp_dir().join(format!("moirai-os-read-small-{}", std::process::id()));
        let long: Vec<u8> = (0..5000u32).map(|i| b'a' + (i % 26) as u8).collect();
        fs::write(&path, &long).unwrap();
        let read = read_small(&path);
        fs::remove_file(&path).unwrap();
        assert_eq!(read.unwrap(), long, "longer than the first buffer: read on to the end");
    }

    #[test]
    fn a_clock_kept_open_reads_what_proc_reads_until_its_thread_ends() {
        let me = std::process::id();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let spinner = std::thread::spawn(move || {
            let tid = current_tid();
            tid_tx.send(tid).unwrap();
            // 30 ms of CPU, not of wall time (on a busy machine the two differ many times over).
            while own_thread_cpu_ns(tid).unwrap() < 30_000_000 {
                std::hint::black_box(0u64);
            }
            let _ = rx.recv();
        });
        let tid = tid_rx.recv().unwrap();
        let clock = ThreadCpuClock::open(me, tid).unwrap();
        let first = clock.read_ns().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(60));
        let (held, fresh) = (clock.read_ns().unwrap(), thread_cpu_ns(me, tid).unwrap());
        assert!(held >= first && held >= 10_000_000, "the spinner ran 30 ms: {first} then {held} ns");
        assert!(held.abs_diff(fresh) < 5_000_000, "held {held} ns, read anew {fresh} ns: the same clock");
        drop(tx);
        spinner.join().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while clock.read_ns().is_ok() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(clock.read_ns().is_err(), "a clock of an ended thread reads nothing");
    }

    #[test]
    fn thread_ids_are_this_process_threads() {
        let me = std::process::id();
        let ids = thread_ids(me).unwrap();
        assert!(ids.contains(&current_tid()) && ids.contains(&(me as Tid)), "{ids:?}");
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        assert!(thread_ids(u32::MAX / 2).is_err());
    }

    #[test]
    fn a_process_cpu_counts_its_children_it_waited_for() {
        let me = std::process::id();
        // Own time first, so that the total (read after it) is never the smaller.
        let children = || {
            let own = process_cpu_ns(me).unwrap();
            process_and_children_cpu_ns(me).unwrap() - own
        };
        let before = children();
        // A child that burns CPU (a shell loop: well over one clock tick), waited for.
        let status = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done"])
            .status()
            .unwrap();
        assert!(status.success());
        let after = children();
        assert!(after >= before + 10_000_000, "children's CPU {before} ns before, {after} ns after");
        assert!(process_and_children_cpu_ns(u32::MAX / 2).is_err());
    }

    #[test]
    fn the_machine_cpu_line_is_read() {
        let text = "cpu  100 5 50 800 40 1 2 3 7 0\ncpu0 50 2 25 400 20 0 1 1 3 0\nintr 1\n";
        // busy = user + nice + system + irq + softirq + steal; guest is inside user already.
        assert_eq!(parse_machine_cpu(text), Some((161, 1001)));
        assert_eq!(parse_machine_cpu("cpu0 1 2 3 4\n"), None);
        let (busy, total) = machine_cpu_ticks().unwrap();
        assert!(busy <= total && total > 0);
    }

    #[test]
    fn rejects_truncated_stat() {
        assert!(ThreadStat::parse("12 (x) S 1 2").is_err());
        assert!(ThreadStat::parse("garbage").is_err());
    }

    #[test]
    fn a_name_cut_inside_a_utf8_character_is_read() {
        // 14 ASCII bytes and a 2-byte 'é': the kernel keeps 15 bytes, half of the 'é'.
        let name = b"aaaaaaaaaaaaaa\xc3\xa9\0";
        let (tid, stop) = (std::sync::mpsc::channel(), std::sync::mpsc::channel::<()>());
        let thread = std::thread::spawn(move || {
            // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes.
            unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr()) };
            tid.0.send(current_tid()).unwrap();
            let _ = stop.1.recv();
        });
        let tid = tid.1.recv().unwrap();
        let stat = thread_stat(std::process::id(), tid);
        let listed = threads(std::process::id());
        stop.0.send(()).unwrap();
        thread.join().unwrap();
        assert!(stat.unwrap().name.starts_with("aaaaaaaaaaaaaa"));
        assert!(listed.unwrap().iter().any(|t| t.tid == tid));
    }

    #[test]
    fn finds_own_thread_and_cpu_time() {
        let pid = std::process::id();
        let tid = current_tid();
        let mine = threads(pid).unwrap();
        assert!(mine.iter().any(|t| t.tid == tid), "own tid {tid} not in /proc/{pid}/task");
        // Burn a little CPU so the counter is certainly non-zero and grows.
        let before = thread_cpu_ns(pid, tid).unwrap();
        let mut x = 1u64;
        while thread_cpu_ns(pid, tid).unwrap() == before {
            for i in 0..100_000u64 {
                x = std::hint::black_box(x.wrapping_mul(i | 1));
            }
        }
        assert!(thread_cpu_ns(pid, tid).unwrap() > before);
        assert!(process_rss_bytes(pid).unwrap() > 0);
    }

    #[test]
    fn another_process_s_cpu_is_read_finer_than_a_clock_tick_and_agrees_with_proc() {
        // A child that burns ~30 ms of CPU, then waits to be read.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; read _"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let ticks = |pid: u32| {
            let stat =
                ThreadStat::parse(&read_stat(std::path::Path::new(&format!("/proc/{pid}/stat"))).unwrap()).unwrap();
            (stat.utime_ticks + stat.stime_ticks) * 1_000_000_000 / clock_ticks_per_second()
        };
        let tick = 1_000_000_000 / clock_ticks_per_second();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        // Until the loop is done: the count stands still.
        let mut last = process_cpu_ns(pid).unwrap();
        loop {
            std::thread::sleep(std::time::Duration::from_millis(200));
            let now = process_cpu_ns(pid).unwrap();
            if now == last || std::time::Instant::now() > deadline {
                break;
            }
            last = now;
        }
        let (fine, coarse) = (process_cpu_ns(pid).unwrap(), ticks(pid));
        assert!(fine > 0 && fine % tick != 0, "{fine} ns: not a multiple of the {tick} ns tick");
        // The kernel's clock-tick split (utime + stime) is the same count, sampled and rounded.
        assert!(fine.abs_diff(coarse) <= 2 * tick + fine / 10, "clock {fine} ns, /proc {coarse} ns");
        assert!(process_and_children_cpu_ns(pid).unwrap() >= fine);
        drop(child.stdin.take());
        child.wait().unwrap();
        assert!(process_cpu_ns(pid).is_err(), "a process that was reaped has no CPU clock nor /proc entry");
    }

    #[test]
    fn a_thread_of_this_process_reads_its_cpu_clock_as_proc_does() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let spinner = std::thread::spawn(move || {
            let me = current_tid();
            // Spins until /proc says it ran 20 ms (however busy the machine is), then waits.
            while thread_cpu_ns(std::process::id(), me).unwrap() < 20_000_000 {
                std::hint::black_box(0u64);
            }
            tx.send(me).unwrap();
            done_rx.recv().unwrap();
        });
        let tid = rx.recv().unwrap();
        let before = thread_cpu_ns(std::process::id(), tid).unwrap();
        let clock = own_thread_cpu_ns(tid).unwrap();
        let after = thread_cpu_ns(std::process::id(), tid).unwrap();
        assert!(clock >= 20_000_000, "the thread spun 20 ms: {clock} ns");
        assert!(before <= clock + 1_000_000 && clock <= after + 1_000_000, "{before} <= {clock} <= {after} (ns)");
        done_tx.send(()).unwrap();
        spinner.join().unwrap();
        // join returns when the thread has exited; the kernel releases its task (and its
        // /proc entry) a moment later.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while own_thread_cpu_ns(tid).is_ok() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(own_thread_cpu_ns(tid).unwrap_err().kind(), io::ErrorKind::NotFound, "an ended thread");
        assert_eq!(own_thread_cpu_ns(0).unwrap_err().kind(), io::ErrorKind::InvalidInput);
        assert_eq!(own_thread_cpu_ns(1).unwrap_err().kind(), io::ErrorKind::NotFound, "not a thread of this process");
    }

    #[test]
    fn voluntary_switches_count_the_sleeps() {
        let (pid, tid) = (std::process::id(), current_tid());
        let before = thread_voluntary_switches(pid, tid).unwrap();
        for _ in 0..3 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let after = thread_voluntary_switches(pid, tid).unwrap();
        assert!(after >= before + 3, "three sleeps: {before} -> {after}");
        assert_eq!(thread_voluntary_switches(pid, 0).unwrap_err().kind(), io::ErrorKind::NotFound);
    }
}
