//! What the state file holds, and reading it back.
//!
//! One JSON document, rewritten whole after every change (see [`super::RestoreLog`]): the
//! records of original values, each keyed by `(pid, tid, start_ticks)`, plus the writer's
//! identity so that a running middleware's state is never restored behind its back.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::cgroup::Hierarchy;
use crate::error::OsError;
use crate::proc::{thread_stat, Tid};
use crate::realtime::SchedClass;

/// Version of the state file format.
pub(crate) const FORMAT: u32 = 1;

/// A thread's nice value before moirai first changed it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct NiceRecord {
    pub(crate) pid: u32,
    pub(crate) tid: Tid,
    pub(crate) start_ticks: u64,
    pub(crate) nice: i32,
}

/// A thread's scheduling class before moirai first changed it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SchedRecord {
    pub(crate) pid: u32,
    pub(crate) tid: Tid,
    pub(crate) start_ticks: u64,
    pub(crate) class: SchedClass,
}

/// A session group's nice value before moirai first changed it (see [`crate::autogroup`]): the
/// group by its kernel id, and the process it was changed through.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct AutogroupRecord {
    pub(crate) pid: u32,
    pub(crate) start_ticks: u64,
    pub(crate) group: u64,
    pub(crate) nice: i32,
}

/// A thread's cpu cgroup before moirai first moved it; `None` if it was already inside
/// moirai's tree (born there from a thread moirai had moved).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ThreadRecord {
    pub(crate) pid: u32,
    pub(crate) tid: Tid,
    pub(crate) start_ticks: u64,
    pub(crate) original: Option<PathBuf>,
}

/// A process's cpu cgroup (its main thread's) before moirai first moved one of its threads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ProcessRecord {
    pub(crate) pid: u32,
    pub(crate) start_ticks: u64,
    pub(crate) original: Option<PathBuf>,
}

/// A controller moirai enabled in a `cgroup.subtree_control` it does not own.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ControllerRecord {
    pub(crate) dir: PathBuf,
    pub(crate) controller: String,
}

/// Everything the state file holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct State {
    pub(crate) format: u32,
    /// The moirai process that wrote the file, and its start time: a running writer's state
    /// must not be restored behind its back.
    pub(crate) writer_pid: u32,
    pub(crate) writer_start_ticks: u64,
    pub(crate) nice: Vec<NiceRecord>,
    pub(crate) sched: Vec<SchedRecord>,
    /// Session groups (absent in files of older moirai versions).
    #[serde(default)]
    pub(crate) autogroups: Vec<AutogroupRecord>,
    /// Per process reniced: what threads born later may have inherited (absent in files of
    /// older moirai versions).
    #[serde(default)]
    pub(crate) heirs: Vec<super::heirs::HeirRecord>,
    /// The cpu hierarchy the cgroup records refer to.
    pub(crate) cgroup: Option<Hierarchy>,
    /// The instance directory (`<mount>/moirai/<instance>`).
    pub(crate) instance: Option<PathBuf>,
    pub(crate) processes: Vec<ProcessRecord>,
    pub(crate) threads: Vec<ThreadRecord>,
    /// Directories moirai created, in creation order (parents before children).
    pub(crate) groups: Vec<PathBuf>,
    pub(crate) controllers: Vec<ControllerRecord>,
}

impl State {
    /// True if nothing remains to be restored.
    pub(crate) fn is_empty(&self) -> bool {
        self.nice.is_empty()
            && self.sched.is_empty()
            && self.autogroups.is_empty()
            && self.heirs.is_empty()
            && self.processes.is_empty()
            && self.threads.is_empty()
            && self.groups.is_empty()
            && self.controllers.is_empty()
    }
}

/// Whether a recorded thread is still the one that was recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Identity {
    /// Same tid, same start time: the recorded thread.
    Same,
    /// No such thread in that process any more.
    Gone,
    /// The tid exists but started at another time: the kernel reused it.
    Reused,
}

/// Checks that thread `tid` of `pid` still started at `start_ticks`.
pub(crate) fn identity(pid: u32, tid: Tid, start_ticks: u64) -> Identity {
    match thread_stat(pid, tid) {
        Ok(stat) if stat.start_ticks == start_ticks => Identity::Same,
        Ok(_) => Identity::Reused,
        Err(_) => Identity::Gone,
    }
}

/// Reads and parses a state file; `None` if it does not exist.
pub(crate) fn load(path: &Path) -> Result<Option<State>, OsError> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(OsError::StateFile { path: path.to_path_buf(), detail: format!("cannot read it: {e}") }),
    };
    let state: State = serde_json::from_str(&text).map_err(|e| OsError::StateFile {
        path: path.to_path_buf(),
        detail: format!("is not a moirai state file ({e}): move it away or choose another path"),
    })?;
    if state.format != FORMAT {
        return Err(OsError::StateFile {
            path: path.to_path_buf(),
            detail: format!("has format {}, this moirai reads format {FORMAT}", state.format),
        });
    }
    Ok(Some(state))
}
