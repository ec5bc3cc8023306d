//! Test helpers: live threads, temporary directories, clean-up guards, and two stand-ins for
//! cgroupfs — a file-level emulation of cgroup v2 in a temporary directory, and a shim that
//! passes everything to the real kernel except the cpu controller files (which a hybrid host's
//! cgroup2 mount does not have).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex};

use crate::cgroup::fs::{CgroupFs, KernelFs};
use crate::cgroup::membership::tgid_of;
use crate::proc::{current_tid, Tid};

/// Reports a skipped test on the real stderr: libtest captures `eprintln!` of passing tests,
/// and a skip must never look like a silent pass.
pub(crate) fn skip(reason: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED {reason}");
}

/// The tid of a thread that has ended and left `/proc`: `join` returns once the thread cleared
/// its tid, a moment before the kernel releases the task, so wait for that (10 s at most).
pub(crate) fn ended_thread() -> Tid {
    let tid = std::thread::spawn(current_tid).join().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while Path::new(&format!("/proc/self/task/{tid}")).exists() {
        assert!(std::time::Instant::now() < deadline, "thread {tid} never left /proc");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    tid
}

/// A spawned thread that lives until the guard is dropped, then is joined.
pub(crate) struct Sleeper {
    pub(crate) tid: Tid,
    stop: Option<mpsc::Sender<()>>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Sleeper {
    pub(crate) fn spawn() -> Sleeper {
        let (tid_tx, tid_rx) = mpsc::channel();
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let handle = std::thread::spawn(move || {
            tid_tx.send(current_tid()).unwrap();
            let _ = stop_rx.recv();
        });
        Sleeper { tid: tid_rx.recv().unwrap(), stop: Some(stop_tx), handle: Some(handle) }
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// A unique name for this test process: `<label>-<pid>-<n>`.
pub(crate) fn unique(label: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!("{label}-{}-{}", std::process::id(), N.fetch_add(1, Ordering::SeqCst))
}

/// A temporary directory removed (with its content) on drop.
pub(crate) struct TempDir(pub(crate) PathBuf);

impl TempDir {
    pub(crate) fn new(label: &str) -> TempDir {
        let dir = std::env::temp_dir().join(unique(&format!("moirai-os-{label}")));
        fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Runs a closure on drop: undoes what a test changed even if an assertion fails.
pub(crate) struct Cleanup(Option<Box<dyn FnOnce()>>);

impl Cleanup {
    pub(crate) fn new(f: impl FnOnce() + 'static) -> Cleanup {
        Cleanup(Some(Box::new(f)))
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}

fn errno(code: i32) -> io::Error {
    io::Error::from_raw_os_error(code)
}

/// The ids listed in a `cgroup.procs` or `cgroup.threads` file that still run: the kernel drops a
/// task from its group when it exits, so one that has left `/proc` is not a member (the test
/// harness's other threads come and go while a test moves the whole process).
fn ids(file: &Path) -> Vec<Tid> {
    fs::read_to_string(file)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|s| s.parse().ok())
        .filter(|id: &Tid| Path::new(&format!("/proc/{id}")).exists())
        .collect()
}

fn set_ids(file: &Path, ids: &[Tid]) {
    let text: String = ids.iter().map(|i| format!("{i}\n")).collect();
    fs::write(file, text).unwrap();
}

fn words(file: &Path) -> BTreeSet<String> {
    fs::read_to_string(file).unwrap_or_default().split_whitespace().map(str::to_string).collect()
}

/// A file-level emulation of a cgroup v2 hierarchy in a temporary directory: `mkdir` creates
/// the core files (and `cpu.weight` when the parent enabled cpu), and writes to `cgroup.procs`,
/// `cgroup.threads`, `cgroup.type`, `cgroup.subtree_control` and `cpu.weight` follow the rules
/// of cgroup-v2.rst that moirai relies on (threaded only while empty; threads move only inside
/// their process's threaded domain; weights in [1, 10000]; rmdir only when empty). Every write
/// is logged, in order.
#[derive(Debug)]
pub(crate) struct FakeCgroupFs {
    root: PathBuf,
    writes: Mutex<Vec<(PathBuf, String)>>,
}

impl FakeCgroupFs {
    pub(crate) fn new(root: &Path, controllers: &str) -> FakeCgroupFs {
        fs::write(root.join("cgroup.controllers"), format!("{controllers}\n")).unwrap();
        for f in ["cgroup.subtree_control", "cgroup.procs", "cgroup.threads"] {
            fs::write(root.join(f), "").unwrap();
        }
        FakeCgroupFs { root: root.to_path_buf(), writes: Mutex::new(Vec::new()) }
    }

    /// The writes so far, in order.
    pub(crate) fn writes(&self) -> Vec<(PathBuf, String)> {
        self.writes.lock().unwrap().clone()
    }

    fn dirs(&self) -> Vec<PathBuf> {
        fn walk(d: &Path, out: &mut Vec<PathBuf>) {
            out.push(d.to_path_buf());
            for e in fs::read_dir(d).unwrap().flatten() {
                if e.path().is_dir() {
                    walk(&e.path(), out);
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.root, &mut out);
        out
    }

    fn is_threaded(dir: &Path) -> bool {
        fs::read_to_string(dir.join("cgroup.type")).is_ok_and(|t| t.trim() == "threaded")
    }

    fn children(dir: &Path) -> Vec<PathBuf> {
        fs::read_dir(dir).unwrap().flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect()
    }
}

impl CgroupFs for FakeCgroupFs {
    fn mkdir(&self, dir: &Path) -> io::Result<()> {
        fs::create_dir(dir)?;
        let parent = dir.parent().unwrap();
        let enabled = fs::read_to_string(parent.join("cgroup.subtree_control")).unwrap_or_default();
        fs::write(dir.join("cgroup.type"), "domain\n")?;
        fs::write(dir.join("cgroup.controllers"), &enabled)?;
        for f in ["cgroup.subtree_control", "cgroup.procs", "cgroup.threads"] {
            fs::write(dir.join(f), "")?;
        }
        if enabled.split_whitespace().any(|c| c == "cpu") {
            fs::write(dir.join("cpu.weight"), "100\n")?;
        }
        Ok(())
    }

    fn rmdir(&self, dir: &Path) -> io::Result<()> {
        if !dir.is_dir() {
            return Err(errno(libc::ENOENT));
        }
        if !Self::children(dir).is_empty()
            || !ids(&dir.join("cgroup.procs")).is_empty()
            || !ids(&dir.join("cgroup.threads")).is_empty()
        {
            return Err(errno(libc::EBUSY));
        }
        for e in fs::read_dir(dir)?.flatten() {
            fs::remove_file(e.path())?;
        }
        fs::remove_dir(dir)
    }

    fn read(&self, file: &Path) -> io::Result<String> {
        match file.file_name().and_then(|n| n.to_str()) {
            Some("cgroup.procs" | "cgroup.threads") if file.is_file() => {
                Ok(ids(file).iter().map(|i| format!("{i}\n")).collect())
            }
            _ => fs::read_to_string(file),
        }
    }

    fn write(&self, file: &Path, value: &str) -> io::Result<()> {
        if !file.is_file() {
            return Err(errno(libc::ENOENT));
        }
        self.writes.lock().unwrap().push((file.to_path_buf(), value.to_string()));
        let dir = file.parent().unwrap();
        match file.file_name().unwrap().to_str().unwrap() {
            "cgroup.procs" => {
                let pid: Tid = value.trim().parse().map_err(|_| errno(libc::EINVAL))?;
                let tids: Vec<Tid> = fs::read_dir(format!("/proc/{pid}/task"))
                    .map_err(|_| errno(libc::ESRCH))?
                    .flatten()
                    .filter_map(|e| e.file_name().to_str()?.parse().ok())
                    .collect();
                for d in self.dirs() {
                    let procs: Vec<Tid> = ids(&d.join("cgroup.procs")).into_iter().filter(|p| *p != pid).collect();
                    set_ids(&d.join("cgroup.procs"), &procs);
                    let threads: Vec<Tid> =
                        ids(&d.join("cgroup.threads")).into_iter().filter(|t| !tids.contains(t)).collect();
                    set_ids(&d.join("cgroup.threads"), &threads);
                }
                let mut procs = ids(file);
                procs.push(pid);
                set_ids(file, &procs);
                let mut threads = ids(&dir.join("cgroup.threads"));
                threads.extend(&tids);
                set_ids(&dir.join("cgroup.threads"), &threads);
            }
            "cgroup.threads" => {
                let tid: Tid = value.trim().parse().map_err(|_| errno(libc::EINVAL))?;
                let pid = tgid_of(tid).ok_or_else(|| errno(libc::ESRCH))? as Tid;
                let mut domain = dir.to_path_buf();
                while Self::is_threaded(&domain) {
                    domain = domain.parent().unwrap().to_path_buf();
                }
                if !ids(&domain.join("cgroup.procs")).contains(&pid) {
                    // Not the same threaded domain as the thread's process.
                    return Err(errno(libc::EOPNOTSUPP));
                }
                for d in self.dirs() {
                    let threads: Vec<Tid> = ids(&d.join("cgroup.threads")).into_iter().filter(|t| *t != tid).collect();
                    set_ids(&d.join("cgroup.threads"), &threads);
                }
                let mut threads = ids(file);
                threads.push(tid);
                set_ids(file, &threads);
            }
            "cgroup.type" => {
                if value.trim() != "threaded" {
                    return Err(errno(libc::EINVAL));
                }
                let parent = dir.parent().unwrap();
                let parent_enabled = words(&parent.join("cgroup.subtree_control"));
                if !ids(&dir.join("cgroup.procs")).is_empty()
                    || !ids(&dir.join("cgroup.threads")).is_empty()
                    || parent_enabled.iter().any(|c| c != "cpu")
                {
                    return Err(errno(libc::EOPNOTSUPP));
                }
                fs::write(file, "threaded\n")?;
                if fs::read_to_string(parent.join("cgroup.type")).is_ok_and(|t| t.trim() == "domain") {
                    fs::write(parent.join("cgroup.type"), "domain threaded\n")?;
                }
            }
            "cgroup.subtree_control" => {
                let mut enabled = words(file);
                let available = words(&dir.join("cgroup.controllers"));
                for op in value.split_whitespace() {
                    let (sign, name) = op.split_at(1);
                    match sign {
                        "+" if available.contains(name) => {
                            enabled.insert(name.to_string());
                            if name == "cpu" {
                                for c in Self::children(dir) {
                                    fs::write(c.join("cpu.weight"), "100\n")?;
                                }
                            }
                        }
                        "-" => {
                            if Self::children(dir)
                                .iter()
                                .any(|c| words(&c.join("cgroup.subtree_control")).contains(name))
                            {
                                return Err(errno(libc::EBUSY));
                            }
                            enabled.remove(name);
                            if name == "cpu" {
                                for c in Self::children(dir) {
                                    let _ = fs::remove_file(c.join("cpu.weight"));
                                }
                            }
                        }
                        _ => return Err(errno(libc::ENOENT)),
                    }
                }
                fs::write(file, enabled.into_iter().collect::<Vec<_>>().join(" "))?;
            }
            "cpu.weight" => {
                let w: u64 = value.trim().parse().map_err(|_| errno(libc::EINVAL))?;
                if !(1..=10_000).contains(&w) {
                    return Err(errno(libc::ERANGE));
                }
                fs::write(file, format!("{w}\n"))?;
            }
            _ => fs::write(file, value)?,
        }
        Ok(())
    }

    fn is_dir(&self, dir: &Path) -> bool {
        dir.is_dir()
    }
}

/// The real cgroupfs, except that the cpu controller is pretended: listed in
/// `cgroup.controllers`, enabled in `cgroup.subtree_control` in memory, `cpu.weight` kept in
/// memory. Everything else — mkdir, rmdir, `cgroup.type`, `cgroup.procs`, `cgroup.threads` —
/// goes to the kernel, which enforces thread mode for real.
#[derive(Debug, Default)]
pub(crate) struct CpuShimFs {
    enabled: Mutex<BTreeSet<PathBuf>>,
    weights: Mutex<BTreeMap<PathBuf, String>>,
    pub(crate) shimmed_writes: Mutex<Vec<(PathBuf, String)>>,
}

impl CpuShimFs {
    fn parent_enabled(&self, file: &Path) -> bool {
        let group = file.parent().unwrap();
        group.parent().is_some_and(|p| self.enabled.lock().unwrap().contains(p))
    }
}

impl CgroupFs for CpuShimFs {
    fn mkdir(&self, dir: &Path) -> io::Result<()> {
        KernelFs.mkdir(dir)
    }

    fn rmdir(&self, dir: &Path) -> io::Result<()> {
        KernelFs.rmdir(dir)?;
        self.enabled.lock().unwrap().remove(dir);
        self.weights.lock().unwrap().retain(|f, _| !f.starts_with(dir));
        Ok(())
    }

    fn read(&self, file: &Path) -> io::Result<String> {
        let dir = file.parent().unwrap();
        match file.file_name().unwrap().to_str().unwrap() {
            "cgroup.controllers" => Ok(format!("{} cpu\n", KernelFs.read(file)?.trim())),
            "cgroup.subtree_control" => {
                let real = KernelFs.read(file)?;
                let cpu = if self.enabled.lock().unwrap().contains(dir) { " cpu" } else { "" };
                Ok(format!("{}{cpu}\n", real.trim()))
            }
            "cpu.weight" if self.parent_enabled(file) => {
                Ok(self.weights.lock().unwrap().get(file).cloned().unwrap_or_else(|| "100\n".into()))
            }
            "cpu.weight" => Err(errno(libc::ENOENT)),
            _ => KernelFs.read(file),
        }
    }

    fn write(&self, file: &Path, value: &str) -> io::Result<()> {
        let dir = file.parent().unwrap();
        match (file.file_name().unwrap().to_str().unwrap(), value.trim()) {
            ("cgroup.subtree_control", "+cpu") => {
                self.shimmed_writes.lock().unwrap().push((file.to_path_buf(), value.into()));
                self.enabled.lock().unwrap().insert(dir.to_path_buf());
                Ok(())
            }
            ("cgroup.subtree_control", "-cpu") => {
                self.shimmed_writes.lock().unwrap().push((file.to_path_buf(), value.into()));
                self.enabled.lock().unwrap().remove(dir);
                Ok(())
            }
            ("cpu.weight", w) if self.parent_enabled(file) => {
                self.shimmed_writes.lock().unwrap().push((file.to_path_buf(), value.into()));
                self.weights.lock().unwrap().insert(file.to_path_buf(), format!("{w}\n"));
                Ok(())
            }
            ("cpu.weight", _) => Err(errno(libc::ENOENT)),
            _ => KernelFs.write(file, value),
        }
    }

    fn is_dir(&self, dir: &Path) -> bool {
        dir.is_dir()
    }
}
