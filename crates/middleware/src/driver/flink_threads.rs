//! Flink's thread names taken apart: which subtask a thread of the TaskManager's JVM works for,
//! and how (its task thread, a legacy source's thread, the output flusher, the timer thread), as
//! a thread dump lists them (see [`super::flink`]).

use std::collections::HashMap;

/// What a thread does for its subtask.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ThreadRole {
    /// The task's own (mailbox) thread, named exactly as the task.
    Task,
    /// `Legacy Source Thread - <task>`: where a `SourceFunction` runs.
    LegacySource,
    /// `OutputFlusher for <task>`: flushes output buffers on the buffer timeout.
    OutputFlusher,
    /// `System Time Trigger for <task>` (`Time Trigger for` before Flink 1.12): processing-time timers.
    TimeTrigger,
}

/// A Flink thread name taken apart: which subtask it works for and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskThreadName<'a> {
    /// The task (vertex) name.
    pub task: &'a str,
    /// Subtask index, from 0.
    pub subtask: usize,
    /// Parallelism.
    pub parallelism: usize,
    /// Execution attempt (0 when the name has none, as before Flink 1.12).
    pub attempt: u32,
    /// Its role.
    pub role: ThreadRole,
}

/// Parses `"<task> (i/n)#attempt"`, with the helper prefixes; `None` for other threads.
pub fn parse_thread_name(name: &str) -> Option<TaskThreadName<'_>> {
    const PREFIXES: [(&str, ThreadRole); 4] = [
        ("Legacy Source Thread - ", ThreadRole::LegacySource),
        ("OutputFlusher for ", ThreadRole::OutputFlusher),
        ("System Time Trigger for ", ThreadRole::TimeTrigger),
        ("Time Trigger for ", ThreadRole::TimeTrigger),
    ];
    let (rest, role) = PREFIXES
        .iter()
        .find_map(|(p, role)| name.strip_prefix(p).map(|r| (r, *role)))
        .unwrap_or((name, ThreadRole::Task));
    let (rest, attempt) = match rest.rsplit_once(")#") {
        Some((head, a)) => (head, a.parse().ok()?),
        None => (rest.strip_suffix(')')?, 0),
    };
    let (task, counts) = rest.rsplit_once(" (")?;
    let (i, n) = counts.split_once('/')?;
    let (i, n): (usize, usize) = (i.parse().ok()?, n.parse().ok()?);
    if task.is_empty() || i == 0 || i > n {
        return None;
    }
    Some(TaskThreadName { task, subtask: i - 1, parallelism: n, attempt, role })
}

/// Subtask threads found in a dump: (task name, subtask, parallelism) → threads of the newest
/// attempt, the task thread first.
pub type ThreadIndex = HashMap<(String, usize, usize), Vec<(ThreadRole, i32)>>;

/// Indexes the task threads of a dump.
pub fn index_threads(threads: &[(String, i32)]) -> ThreadIndex {
    let mut newest: HashMap<(String, usize, usize), (u32, Vec<(ThreadRole, i32)>)> = HashMap::new();
    for (name, tid) in threads {
        let Some(t) = parse_thread_name(name) else { continue };
        let entry = newest.entry((t.task.to_string(), t.subtask, t.parallelism)).or_insert((t.attempt, Vec::new()));
        if t.attempt > entry.0 {
            *entry = (t.attempt, Vec::new());
        }
        if t.attempt == entry.0 {
            entry.1.push((t.role, *tid));
        }
    }
    newest
        .into_iter()
        .map(|(k, (_, mut v))| {
            v.sort();
            (k, v)
        })
        .collect()
}
