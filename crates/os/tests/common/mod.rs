//! Helpers shared by the integration tests: live threads, unique names, temporary
//! directories and clean-up guards that run even when an assertion fails.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use moirai_os::{current_tid, Tid};

/// Reports a skipped test on the real stderr: libtest captures `eprintln!` of passing tests,
/// and a skip must never look like a silent pass.
pub fn skip(reason: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED {reason}");
}

/// A spawned thread that lives until the guard is dropped, then is joined. On request it
/// spawns a child thread of its own (which inherits its cgroup and nice value).
pub struct Sleeper {
    pub tid: Tid,
    orders: Option<mpsc::Sender<mpsc::Sender<Sleeper>>>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Sleeper {
    pub fn spawn() -> Sleeper {
        let (tid_tx, tid_rx) = mpsc::channel();
        let (orders_tx, orders_rx) = mpsc::channel::<mpsc::Sender<Sleeper>>();
        let handle = std::thread::spawn(move || {
            tid_tx.send(current_tid()).unwrap();
            // Each order is a request to spawn a child thread from *this* thread.
            while let Ok(reply) = orders_rx.recv() {
                let _ = reply.send(Sleeper::spawn());
            }
        });
        Sleeper { tid: tid_rx.recv().unwrap(), orders: Some(orders_tx), handle: Some(handle) }
    }

    /// A new thread created by this thread (not by the caller).
    pub fn spawn_child(&self) -> Sleeper {
        let (tx, rx) = mpsc::channel();
        self.orders.as_ref().unwrap().send(tx).unwrap();
        rx.recv().unwrap()
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        drop(self.orders.take());
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// A unique name for this test process: `<label>-<pid>-<n>`.
pub fn unique(label: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!("{label}-{}-{}", std::process::id(), N.fetch_add(1, Ordering::SeqCst))
}

/// A temporary directory removed (with its content) on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(label: &str) -> TempDir {
        let dir = std::env::temp_dir().join(unique(&format!("moirai-os-{label}")));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs a closure on drop: undoes what a test changed even if an assertion fails.
pub struct Cleanup(Option<Box<dyn FnOnce()>>);

impl Cleanup {
    pub fn new(f: impl FnOnce() + 'static) -> Cleanup {
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

/// The v1 cpu hierarchy if this test can change it (root, writable, cpu on v1), else `None`
/// after printing why the test is skipped.
pub fn v1_cpu_or_skip(test: &str) -> Option<moirai_os::Hierarchy> {
    if !moirai_os::is_root() {
        skip(&format!("{test}: needs root"));
        return None;
    }
    match moirai_os::CgroupLayout::detect() {
        Ok(layout) if layout.cpu().version == moirai_os::CgroupVersion::V1 && !layout.cpu().read_only => {
            Some(layout.cpu().clone())
        }
        Ok(layout) => {
            skip(&format!("{test}: the cpu controller is not on a writable v1 hierarchy here ({layout:?})"));
            None
        }
        Err(e) => {
            skip(&format!("{test}: {e}"));
            None
        }
    }
}

/// Moves `tids` back to `home` and removes `dirs` (deepest first), ignoring errors: the
/// last-resort clean-up of a cgroup test.
pub fn undo_v1(home: &std::path::Path, tids: &[Tid], dirs: &[PathBuf]) {
    for tid in tids {
        let _ = std::fs::write(home.join("tasks"), tid.to_string());
    }
    let mut dirs = dirs.to_vec();
    dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    for d in dirs {
        let _ = std::fs::remove_dir(d);
    }
}

/// The tid of a thread that has ended and left `/proc` (`join` returns a moment before the
/// kernel releases the task; 10 s at most).
pub fn ended_thread() -> Tid {
    let tid = std::thread::spawn(moirai_os::current_tid).join().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::path::Path::new(&format!("/proc/self/task/{tid}")).exists() {
        assert!(std::time::Instant::now() < deadline, "thread {tid} never left /proc");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    tid
}
