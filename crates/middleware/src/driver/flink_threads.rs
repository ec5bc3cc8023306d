//! Flink's thread names taken apart: which subtask a thread of the TaskManager's JVM works for,
//! and how (its task thread — where a FLIP-27 source's reader works too —, a legacy source's
//! thread, the output flusher, the timer threads), as a thread dump lists them (see
//! [`super::flink`]).

use std::collections::HashMap;

/// What a thread does for its subtask.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ThreadRole {
    /// The task's own (mailbox) thread, named exactly as the task.
    Task,
    /// `Legacy Source Thread - <task>`: where a legacy `SourceFunction` runs (Flink 1.x only; a
    /// FLIP-27 source has none, its reader runs in the task thread).
    LegacySource,
    /// `OutputFlusher for <task>`: flushes output buffers on the buffer timeout.
    OutputFlusher,
    /// `System Time Trigger for <task>`: processing-time timers; also `Time Trigger for <task>`,
    /// which a FLIP-27 source's task has beside it (1.20, 2.x), and the only name before Flink 1.12.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::jvm::parse_thread_dump;

    /// A thread dump of a Flink 2.3.0 TaskManager (moirai's SYN job, parallelism 2, cut to one
    /// subtask per vertex): a FLIP-27 source has no legacy source thread — its reader works in the
    /// task thread — but two timer threads; the source's coordinator (a JobManager thread) and
    /// the job's other threads are no subtask's. Flink 1.20.3 names the same job's threads alike.
    const DUMP_2_3: &str = r#"9949:
Full thread dump OpenJDK 64-Bit Server VM (17.0.15+6-Debian-1 mixed mode, sharing):

"SourceCoordinator-Source: syn0/source" #73 prio=5 os_prio=0 cpu=1.43ms elapsed=22.43s tid=0x00007f87000387c0 nid=0x2772 waiting on condition  [0x00007f8716743000]
"Source: syn0/source (1/2)#0" #79 prio=5 os_prio=0 cpu=969.00ms elapsed=21.84s tid=0x00007f87000cd0a0 nid=0x277a waiting on condition  [0x00007f8716943000]
"syn0/op1 (1/2)#0" #81 prio=5 os_prio=0 cpu=123.11ms elapsed=21.71s tid=0x00007f87000e7be0 nid=0x277d waiting on condition  [0x00007f8716343000]
"OutputFlusher for syn0/op1 (1/2)#0" #83 daemon prio=5 os_prio=0 cpu=8.98ms elapsed=21.69s tid=0x00007f877404c1c0 nid=0x277f waiting on condition  [0x00007f8716143000]
"OutputFlusher for Source: syn0/source (1/2)#0" #84 daemon prio=5 os_prio=0 cpu=9.82ms elapsed=21.69s tid=0x00007f87700403a0 nid=0x2780 waiting on condition  [0x00007f8716043000]
"syn0/sink: Writer (1/2)#0" #86 prio=5 os_prio=0 cpu=53.44ms elapsed=21.68s tid=0x00007f87000ee050 nid=0x2782 waiting on condition  [0x00007f8715e43000]
"System Time Trigger for syn0/op1 (1/2)#0" #102 daemon prio=5 os_prio=0 cpu=1.74ms elapsed=21.32s tid=0x00007f877406d920 nid=0x2793 waiting on condition  [0x00007f8714e43000]
"System Time Trigger for syn0/sink: Writer (1/2)#0" #105 daemon prio=5 os_prio=0 cpu=1.24ms elapsed=21.32s tid=0x00007f86f84729a0 nid=0x2796 waiting on condition  [0x00007f8714b43000]
"Time Trigger for Source: syn0/source (1/2)#0" #108 daemon prio=5 os_prio=0 cpu=9.63ms elapsed=21.30s tid=0x00007f8770055950 nid=0x2799 waiting on condition  [0x00007f8715543000]
"System Time Trigger for Source: syn0/source (1/2)#0" #111 daemon prio=5 os_prio=0 cpu=1.66ms elapsed=21.28s tid=0x00007f87700565f0 nid=0x279c waiting on condition  [0x00007f8715343000]
"flink-pekko.actor.default-dispatcher-5" #30 prio=5 os_prio=0 cpu=80.00ms elapsed=30.00s tid=0x00007f nid=0x2700 waiting on condition
"#;

    #[test]
    fn a_flip27_source_maps_to_its_task_thread_and_timers_on_flink_2() {
        let index = index_threads(&parse_thread_dump(DUMP_2_3));
        assert_eq!(
            index[&("Source: syn0/source".to_string(), 0, 2)],
            vec![
                (ThreadRole::Task, 0x277a),
                (ThreadRole::OutputFlusher, 0x2780),
                (ThreadRole::TimeTrigger, 0x2799),
                (ThreadRole::TimeTrigger, 0x279c)
            ]
        );
        assert_eq!(
            index[&("syn0/sink: Writer".to_string(), 0, 2)],
            vec![(ThreadRole::Task, 0x2782), (ThreadRole::TimeTrigger, 0x2796)]
        );
        assert_eq!(
            index[&("syn0/op1".to_string(), 0, 2)],
            vec![(ThreadRole::Task, 0x277d), (ThreadRole::OutputFlusher, 0x277f), (ThreadRole::TimeTrigger, 0x2793)]
        );
        // The coordinator and the actor system's threads are no subtask's.
        assert_eq!(index.len(), 3, "{index:?}");
    }
}
