//! What the tests of `moirai schedule` against real SPEs on the JVM (Flink, Storm) share: child
//! processes stopped by PID, waiting with a deadline, thread dumps taken independently of the
//! middleware, and what the middleware says it applied. Included by path (`#[path]`) by those
//! tests only.

use std::collections::BTreeMap;
use std::io::Read;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use moirai_bench::flink::FLINK;
use moirai_bench::jvm::{JvmJobs, JvmSystem};
use moirai_bench::jvm_job::JvmJob;
use moirai_os::proc::thread_stat;

pub const BIN: &str = env!("CARGO_BIN_EXE_moirai");
/// Only turns a hang into a failure; nothing here asserts on speed.
pub const PATIENCE: Duration = Duration::from_secs(90);

/// A child process killed (by PID) when dropped.
pub struct Proc(Option<Child>);

impl Proc {
    pub fn spawn(args: &[&str]) -> Proc {
        let child = Command::new(BIN)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start moirai {args:?}: {e}"));
        Proc(Some(child))
    }

    pub fn pid(&self) -> u32 {
        self.0.as_ref().expect("running").id()
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on the pid of our own child, which we have not reaped yet.
        unsafe { libc::kill(self.pid() as i32, sig) };
    }

    /// Waits for the exit; returns the exit code and stderr.
    pub fn wait(mut self) -> (Option<i32>, String) {
        let mut child = self.0.take().expect("running");
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                let mut err = String::new();
                child.stderr.take().map(|mut e| e.read_to_string(&mut err));
                return (status.code(), err);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("moirai did not exit within {PATIENCE:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Proc {
    /// SIGTERM first, so that a middleware left running by a failed test still restores the
    /// nice values and removes the cgroups it made; SIGKILL after 10 s.
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            // SAFETY: kill(2) on the pid of our own child, which we have not reaped yet.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(10);
            while c.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

pub fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    wait_for(what, || if ok() { Ok(()) } else { Err(String::new()) });
}

/// Waits until `check` passes; a timeout fails with what it said last.
pub fn wait_for(what: &str, mut check: impl FnMut() -> Result<(), String>) {
    let deadline = Instant::now() + PATIENCE;
    while let Err(why) = check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}: {why}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A directory of the test's own, removed with the guard.
pub struct TempDir(pub PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn temp_dir(test: &str) -> TempDir {
    let dir = std::env::temp_dir().join(format!("moirai-spe-test-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    TempDir(dir)
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The JVM's threads by name, from a thread dump taken here with `jcmd` (independently of the
/// middleware): name → Linux tid.
pub fn jvm_threads(pid: u32) -> BTreeMap<String, i32> {
    let out = Command::new("jcmd").args([pid.to_string().as_str(), "Thread.print"]).output().expect("jcmd runs");
    assert!(out.status.success(), "jcmd failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .filter_map(|l| {
            let name = l.strip_prefix('"')?.split('"').next()?;
            let nid = l.split(" nid=0x").nth(1)?.split_whitespace().next()?;
            Some((name.to_string(), i32::from_str_radix(nid, 16).ok()?))
        })
        .collect()
}

/// The nice value of thread `tid` of `pid` now (the thread must exist).
pub fn nice(pid: u32, tid: i32) -> i32 {
    thread_stat(pid, tid).unwrap().nice
}

/// The nice value of every thread of `pid` now: tid → nice.
pub fn thread_nices(pid: u32) -> BTreeMap<i32, i32> {
    moirai_os::proc::threads(pid).unwrap().into_iter().map(|t| (t.tid, t.nice)).collect()
}

/// Every thread of `before` (tid → nice) still running and not in `scheduled` has its nice value
/// from `before`: the middleware touched no other thread of the SPE.
pub fn assert_untouched<T>(pid: u32, before: &BTreeMap<i32, i32>, scheduled: &BTreeMap<i32, T>) {
    for (tid, nice) in before.iter().filter(|(tid, _)| !scheduled.contains_key(tid)) {
        if let Ok(stat) = thread_stat(pid, *tid) {
            assert_eq!(stat.nice, *nice, "thread {} ({tid}) was touched", stat.name);
        }
    }
}

/// Every thread of `before` (tid → nice) still running has its nice value from `before`.
pub fn assert_restored(pid: u32, before: &BTreeMap<i32, i32>) {
    for (tid, nice) in before {
        if let Ok(stat) = thread_stat(pid, *tid) {
            assert_eq!(stat.nice, *nice, "thread {} ({tid}) restored", stat.name);
        }
    }
}

/// What the middleware says policy `policy` applied, from its own /metrics: tid → (operator
/// label, value).
pub fn applied(port: u16, policy: &str) -> BTreeMap<i32, (String, i64)> {
    let Ok(resp) = ureq::get(&format!("http://127.0.0.1:{port}/metrics")).call() else { return BTreeMap::new() };
    let text = resp.into_string().unwrap();
    let label =
        |l: &str, key: &str| l.split(&format!("{key}=\"")).nth(1).unwrap().split('"').next().unwrap().to_string();
    text.lines()
        .filter(|l| l.starts_with("moirai_schedule_applied{") && label(l, "policy") == policy)
        .map(|l| {
            let v = l.rsplit(' ').next().unwrap().parse::<f64>().unwrap() as i64;
            (label(l, "tid").parse().unwrap(), (label(l, "operator"), v))
        })
        .collect()
}

/// The Flink jobs, built on first use; `None` (test skipped, with the reason) without root or a
/// JDK and Maven.
pub fn flink_jobs(test: &str) -> Option<JvmJobs> {
    flink_jobs_of(&FLINK, test)
}

/// The Flink jobs built for one version ([`FLINK`], `moirai_bench::flink::FLINK2`), when the
/// test can run.
pub fn flink_jobs_of(system: &'static JvmSystem, test: &str) -> Option<JvmJobs> {
    moirai_bench::requires::or_skip(test, moirai_bench::requires::jdk_and_maven())?;
    if !is_root() {
        eprintln!("SKIPPED {test}: needs root (CAP_SYS_NICE, cgroupfs)");
        return None;
    }
    Some(JvmJobs::build(system).unwrap_or_else(|e| panic!("cannot build the {} jobs: {e}", system.name)))
}

/// A SYN job of `ops` operators with cost, chaining off, running until stopped.
pub fn syn_job(jobs: &JvmJobs, parallelism: u32) -> JvmJob {
    let args: Vec<String> = [
        "--ops",
        "3",
        "--cost-ns",
        "2000",
        "--rate",
        "20000",
        "--duration",
        "10m",
        "--parallelism",
        &parallelism.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (job, _) = JvmJob::start_running(jobs, "syn", &args, PATIENCE)
        .unwrap_or_else(|e| panic!("the Flink job did not come up: {e}"));
    job
}

/// The subtask threads of the SYN job in a dump: tid → the subtask they work for
/// (`"syn0/op1 (1/2)"`), task threads and their helpers alike.
pub fn subtask_threads(threads: &BTreeMap<String, i32>) -> BTreeMap<i32, String> {
    let mut out = BTreeMap::new();
    for (name, &tid) in threads {
        let task = ["Legacy Source Thread - ", "OutputFlusher for ", "System Time Trigger for ", "Time Trigger for "]
            .iter()
            .find_map(|p| name.strip_prefix(p))
            .unwrap_or(name);
        if task.contains("syn0/") && task.ends_with(")#0") {
            out.insert(tid, task.trim_end_matches("#0").to_string());
        }
    }
    out
}
