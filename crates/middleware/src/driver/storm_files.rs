//! The metrics directory of Storm's CSV reporter: its files' names taken apart, their last values,
//! and listings taken only when the directory may have changed.
//!
//! A round needs the live metric files of the topology's components: those written in the last
//! [`LIVE`], newest per (topology, component, task, metric). Listing the directory and taking
//! every file's metadata each round made up a quarter of a Storm round's CPU (a `statx` per
//! file, with 100 executors some 2 000 files). The reporter creates a file once and appends to
//! it every period, so the set of files changes only when the directory does (its mtime moves
//! with every file created or removed). The listing is therefore taken again when the
//! directory's mtime, its owner or the components asked for change, when the caller says so
//! (after a new thread dump), and every [`RELIST`] unless each of its files, kept open, was seen
//! growing within [`LIVE`] — so that a topology whose files stopped being written is dropped at
//! most [`LIVE`] + [`RELIST`] after its last write, while a steady topology (every file written
//! each period) is never listed again for nothing: a listing cost as much as ten rounds' reads.
//!
//! A listing also keeps its files open (up to [`HELD`] of them) as [`CsvTail`]s: a value is then
//! one `pread` of what the reporter appended since the last round, where opening the file by its
//! name each round walked the path through a directory of thousands of entries, and reading its
//! end took five system calls. A new listing keeps the open files of the last one that are still
//! the same files (same name, same inode), and with them how far they were read.
//!
//! A listing reads the metadata (one `statx`) only of the files it needs: the metric files of the
//! components asked for, and of the other files of a topology (Storm writes some 35 metrics per
//! executor, the driver reads 2–3) only until one shows the topology live.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::DirEntry;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use super::csv_tail::CsvTail;

/// A metric file counts as live when written this recently (its topology runs).
pub const LIVE: Duration = Duration::from_secs(10);

/// The gauge a spout reports its backlog in (FLIP-33).
pub const PENDING_RECORDS: &str = "pendingRecords";

/// What a metric file holds.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum StormMetric {
    /// `receive-queue-population`: tuples in the executor's receive queue (per task, the same).
    ReceiveQueue,
    /// `__execute-count-<component>:<stream>`: tuples executed from that input.
    Executed {
        /// The upstream component.
        from: String,
    },
    /// `__emit-count-<stream>`: tuples emitted.
    Emitted,
    /// `__transfer-count-<stream>`: tuples sent, once per receiving task.
    Transferred,
    /// `pendingRecords`: a spout's backlog.
    Pending,
}

/// A metric file name taken apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetricFile {
    /// The topology id (`<name>-<n>-<epoch>`).
    pub topology: String,
    /// The component.
    pub component: String,
    /// The task.
    pub task: i64,
    /// The metric.
    pub metric: StormMetric,
}

/// Parses a file name of the CSV reporter (`storm.worker.….csv`, `storm.topology.….csv`) for the
/// metrics the driver reads; `components` are the ids the name may end its host part with (Storm
/// allows dots in hosts and component ids, so the name alone is ambiguous). `None` for any other
/// file, system streams and components, and rates (`….m1_rate.csv`).
pub fn parse_metric_file<'a>(file: &str, components: impl IntoIterator<Item = &'a str>) -> Option<MetricFile> {
    let stem = file.strip_suffix(".csv")?;
    let (rest, user) = match stem.strip_prefix("storm.worker.") {
        Some(rest) => (rest, false),
        None => (stem.strip_prefix("storm.topology.")?, true),
    };
    // The metric follows the port: `….<task>.<port>-<metric>`, and names with streams carry
    // `….<stream>.<task>.<port>-`.
    let (head, metric, streamed) = if user {
        (rest.strip_suffix(&format!("-{PENDING_RECORDS}"))?, StormMetric::Pending, false)
    } else if let Some(head) = rest.strip_suffix("-receive-queue-population") {
        (head, StormMetric::ReceiveQueue, false)
    } else if let Some((head, input)) = rest.rsplit_once("-__execute-count-") {
        let (from, stream) = input.rsplit_once(':')?;
        if from.starts_with("__") || stream.starts_with("__") || stream.contains(".m1_rate") {
            return None;
        }
        (head, StormMetric::Executed { from: from.to_string() }, true)
    } else if let Some((head, stream)) = rest.rsplit_once("-__emit-count-") {
        if stream.starts_with("__") || stream.contains(".m1_rate") {
            return None;
        }
        (head, StormMetric::Emitted, true)
    } else if let Some((head, stream)) = rest.rsplit_once("-__transfer-count-") {
        if stream.starts_with("__") || stream.contains(".m1_rate") {
            return None;
        }
        (head, StormMetric::Transferred, true)
    } else {
        return None;
    };
    let (head, port) = head.rsplit_once('.')?;
    port.parse::<u32>().ok()?;
    let (head, task) = head.rsplit_once('.')?;
    let task: i64 = task.parse().ok()?;
    let head = if streamed { head.rsplit_once('.')?.0 } else { head };
    let (topology, host_component) = head.split_once('.')?;
    let component = components
        .into_iter()
        .filter(|c| !c.starts_with("__"))
        .filter(|c| host_component.strip_suffix(c).is_some_and(|h| h.ends_with('.')))
        .max_by_key(|c| c.len())?;
    Some(MetricFile { topology: topology.to_string(), component: component.to_string(), task, metric })
}

/// The last value of a CSV file of the reporter (`t,value` lines: its last complete line), read
/// from its end (its last 256 bytes, or all of a shorter file) without touching its access time.
pub fn last_value(path: &Path) -> Option<f64> {
    CsvTail::open(path).ok()?.value()
}

/// The longest time a listing is used without the directory changing.
pub const RELIST: Duration = Duration::from_secs(5);
/// The most files a listing keeps open; beyond them a file is opened for each read.
pub const HELD: usize = 2048;

/// The live metric files of a directory: file → parsed name, newest file per (topology,
/// component, task, metric) only.
pub type LiveFiles = Vec<(PathBuf, MetricFile)>;

/// What one listing found, and what it was taken for.
struct Listing {
    owner: u32,
    modified: SystemTime,
    components: BTreeSet<String>,
    taken: Instant,
    topologies: BTreeSet<String>,
    files: Arc<LiveFiles>,
    /// `files`' inodes, by index.
    inodes: Vec<u64>,
    /// `files` kept open, by index (`None` beyond [`HELD`] or where opening failed).
    tails: Vec<Option<CsvTail>>,
}

impl Listing {
    /// Whether every file of the listing is kept open and was seen growing within [`LIVE`], and
    /// every live topology has a file among them: then no topology can have gone quiet since.
    fn all_growing(&self) -> bool {
        let growing = |t: &Option<CsvTail>| t.as_ref().and_then(CsvTail::grew).is_some_and(|g| g.elapsed() <= LIVE);
        !self.tails.is_empty()
            && self.tails.iter().all(growing)
            && self.topologies.iter().all(|t| self.files.iter().any(|(_, f)| &f.topology == t))
    }
}

/// One metrics directory and its last listing; see the [module docs](self).
pub struct MetricDir {
    dir: PathBuf,
    listing: Option<Listing>,
    /// [`RELIST`] (shorter in tests).
    relist_after: Duration,
}

impl MetricDir {
    /// The directory at `dir`, not listed yet.
    pub fn new(dir: &Path) -> Self {
        MetricDir { dir: dir.to_path_buf(), listing: None, relist_after: RELIST }
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The directory's owner (the only user whose files and JVM count) and its mtime.
    pub fn owner(&self) -> Result<(u32, SystemTime), String> {
        let meta = std::fs::metadata(&self.dir)
            .map_err(|e| format!("cannot read the metrics directory {}: {e}", self.dir.display()))?;
        let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        Ok((meta.uid(), modified))
    }

    /// The ids of the live topologies and the live metric files of `components` written by
    /// `owner`, from the last listing unless the directory (as of `modified`) may have changed
    /// or `relist` asks for a fresh one.
    pub fn live(
        &mut self,
        (owner, modified): (u32, SystemTime),
        components: &BTreeSet<&str>,
        relist: bool,
    ) -> Result<(BTreeSet<String>, Arc<LiveFiles>), String> {
        let fresh = self.listing.as_ref().is_some_and(|l| {
            !relist
                && l.owner == owner
                && l.modified == modified
                && (l.taken.elapsed() < self.relist_after || l.all_growing())
                && l.components.len() == components.len()
                && l.components.iter().zip(components).all(|(a, b)| a == b)
        });
        if !fresh {
            let (topologies, found) = self.list(owner, components)?;
            // The files still open from the last listing that are the same files.
            let mut open: HashMap<PathBuf, (u64, CsvTail)> = match self.listing.take() {
                Some(l) => l
                    .files
                    .iter()
                    .zip(l.inodes)
                    .zip(l.tails)
                    .filter_map(|(((path, _), ino), tail)| Some((path.clone(), (ino, tail?))))
                    .collect(),
                None => HashMap::new(),
            };
            let mut files = Vec::with_capacity(found.len());
            let mut inodes = Vec::with_capacity(found.len());
            let mut tails = Vec::with_capacity(found.len());
            for (k, (path, parsed, ino)) in found.into_iter().enumerate() {
                let tail = match open.remove(&path) {
                    Some((was, tail)) if was == ino && k < HELD => Some(tail),
                    _ => (k < HELD).then(|| CsvTail::open(&path).ok()).flatten(),
                };
                files.push((path, parsed));
                inodes.push(ino);
                tails.push(tail);
            }
            self.listing = Some(Listing {
                owner,
                modified,
                components: components.iter().map(|c| c.to_string()).collect(),
                taken: Instant::now(),
                topologies,
                files: Arc::new(files),
                inodes,
                tails,
            });
        }
        let l = self.listing.as_ref().expect("set above");
        Ok((l.topologies.clone(), Arc::clone(&l.files)))
    }

    /// The last value of file `k` of the last listing ([`MetricDir::live`]'s files).
    pub fn value(&mut self, k: usize) -> Option<f64> {
        let listing = self.listing.as_mut()?;
        match listing.tails.get_mut(k) {
            Some(Some(tail)) => tail.value(),
            _ => last_value(&listing.files.get(k)?.0),
        }
    }

    /// How often the reporter writes the files kept open: the median of their periods
    /// ([`CsvTail::period`]); `None` before three lines of one of them were read.
    pub fn period(&self) -> Option<Duration> {
        let mut periods: Vec<Duration> =
            self.listing.as_ref()?.tails.iter().flatten().filter_map(CsvTail::period).collect();
        if periods.is_empty() {
            return None;
        }
        let mid = periods.len() / 2;
        Some(*periods.select_nth_unstable(mid).1)
    }

    /// Lists the directory: the metadata of the metric files of `components`, and of a
    /// topology's other files until one shows it live.
    fn list(
        &self,
        owner: u32,
        components: &BTreeSet<&str>,
    ) -> Result<(BTreeSet<String>, Vec<(PathBuf, MetricFile, u64)>), String> {
        let now = SystemTime::now();
        let entries = std::fs::read_dir(&self.dir)
            .map_err(|e| format!("cannot list the metrics directory {}: {e}", self.dir.display()))?;
        // The entry's modification time and inode when it is a live file of `owner`.
        let live = |entry: &DirEntry| -> Option<(SystemTime, u64)> {
            let meta = entry.metadata().ok()?;
            let written = meta.modified().ok()?;
            let live = meta.uid() == owner && meta.is_file() && now.duration_since(written).unwrap_or_default() <= LIVE;
            live.then_some((written, meta.ino()))
        };
        let mut newest: BTreeMap<(String, String, i64, StormMetric), (SystemTime, PathBuf, MetricFile, u64)> =
            BTreeMap::new();
        let mut topologies = BTreeSet::new();
        let mut others: BTreeMap<String, Vec<DirEntry>> = BTreeMap::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            // Storm's topology ids have no dots: the id is the name's third part.
            let rest = name.strip_prefix("storm.worker.").or_else(|| name.strip_prefix("storm.topology."));
            let Some((topology, _)) = rest.and_then(|r| r.split_once('.')) else { continue };
            let Some(parsed) = parse_metric_file(name, components.iter().copied()) else {
                others.entry(topology.to_string()).or_default().push(entry);
                continue;
            };
            let Some((written, ino)) = live(&entry) else { continue };
            topologies.insert(topology.to_string());
            let key = (parsed.topology.clone(), parsed.component.clone(), parsed.task, parsed.metric.clone());
            let keep = newest.get(&key).is_none_or(|(t, _, _, _)| written > *t);
            if keep {
                newest.insert(key, (written, entry.path(), parsed, ino));
            }
        }
        for (topology, entries) in others {
            if !topologies.contains(&topology) && entries.iter().any(|e| live(e).is_some()) {
                topologies.insert(topology);
            }
        }
        Ok((topologies, newest.into_values().map(|(_, path, parsed, ino)| (path, parsed, ino)).collect()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn scratch(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("moirai-storm-files-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn queue_file(dir: &Path, topology: &str, task: i64) -> PathBuf {
        let path = dir.join(format!("storm.worker.{topology}.host.op.{task}.6700-receive-queue-population.csv"));
        std::fs::write(&path, "t,value\n1,3\n").unwrap();
        path
    }

    #[test]
    fn a_listing_is_reused_until_the_directory_changes() {
        let dir = scratch("reuse");
        let mut files = MetricDir::new(&dir);
        let ops: BTreeSet<&str> = ["op"].into();
        queue_file(&dir, "t-1-1", 1);
        let (topologies, first) = files.live(files.owner().unwrap(), &ops, false).unwrap();
        assert_eq!(topologies, ["t-1-1".to_string()].into());
        assert_eq!(first.len(), 1);
        // The value through the file kept open, also after the reporter appended a line.
        assert_eq!(files.value(0), Some(3.0));
        let path = &first[0].0;
        std::fs::write(path, "t,value\n1,3\n2,4.5\n").unwrap();
        assert_eq!(files.value(0), Some(4.5), "the held file sees what was written since");
        assert_eq!(files.value(1), None, "no such file");
        // Unchanged: the same listing (the same allocation), no new read of the directory.
        let (_, again) = files.live(files.owner().unwrap(), &ops, false).unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        // A file created: the directory's mtime moved, so it is listed again. (The mtime has
        // nanoseconds; wait a little in case the file system's clock is coarse.)
        std::thread::sleep(Duration::from_millis(20));
        queue_file(&dir, "t-2-2", 1);
        let (topologies, second) = files.live(files.owner().unwrap(), &ops, false).unwrap();
        assert_eq!(topologies.len(), 2);
        assert_eq!(second.len(), 2);
        // Asked for a fresh listing, or other components: listed again.
        let (_, forced) = files.live(files.owner().unwrap(), &ops, true).unwrap();
        assert!(!Arc::ptr_eq(&second, &forced));
        let (_, none) = files.live(files.owner().unwrap(), &["other"].into(), false).unwrap();
        assert!(none.is_empty(), "no file of component `other`");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_old_listing_is_kept_while_every_file_grows() {
        let dir = scratch("growing");
        let mut files = MetricDir::new(&dir);
        files.relist_after = Duration::ZERO;
        let ops: BTreeSet<&str> = ["op"].into();
        queue_file(&dir, "t-1-1", 1);
        queue_file(&dir, "t-1-1", 2);
        let (_, first) = files.live(files.owner().unwrap(), &ops, false).unwrap();
        assert_eq!(first.len(), 2);
        assert_eq!(files.value(0), Some(3.0));
        let (_, again) = files.live(files.owner().unwrap(), &ops, false).unwrap();
        assert!(!Arc::ptr_eq(&first, &again), "a file not read yet is not known to grow: listed again");
        assert_eq!((files.value(0), files.value(1)), (Some(3.0), Some(3.0)));
        let (_, kept) = files.live(files.owner().unwrap(), &ops, false).unwrap();
        assert!(Arc::ptr_eq(&again, &kept), "every file seen growing within LIVE: the listing stands");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_reporters_period_is_the_median_of_its_files() {
        let dir = scratch("period");
        let mut files = MetricDir::new(&dir);
        let ops: BTreeSet<&str> = ["op"].into();
        let append = |task: i64, text: &str| {
            let path = dir.join(format!("storm.worker.t-1-1.host.op.{task}.6700-receive-queue-population.csv"));
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .unwrap()
                .write_all(text.as_bytes())
                .unwrap();
        };
        // Two lines a file: no period yet.
        for task in 1..=3 {
            append(task, "t,value\n100,3\n110,3\n");
        }
        files.live(files.owner().unwrap(), &ops, false).unwrap();
        (0..3).for_each(|k| assert_eq!(files.value(k), Some(3.0)));
        assert_eq!(files.period(), None);
        // Every 10 s (Storm's default), one file a second late in its last write.
        for (task, t) in [(1, 120), (2, 120), (3, 121)] {
            append(task, &format!("{t},4\n"));
        }
        (0..3).for_each(|k| assert_eq!(files.value(k), Some(4.0)));
        assert_eq!(files.period(), Some(Duration::from_secs(10)));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_new_listing_reads_on_from_the_same_files_and_anew_from_replaced_ones() {
        let dir = scratch("keep");
        let mut files = MetricDir::new(&dir);
        let ops: BTreeSet<&str> = ["op"].into();
        let (a, b) = (queue_file(&dir, "t-1-1", 1), queue_file(&dir, "t-1-1", 2));
        let (_, listed) = files.live(files.owner().unwrap(), &ops, false).unwrap();
        assert_eq!(listed.iter().map(|f| &f.0).collect::<Vec<_>>(), [&a, &b]);
        assert_eq!((files.value(0), files.value(1)), (Some(3.0), Some(3.0)));
        // `a` appended to; `b` replaced by another file (a new inode) with a shorter history.
        std::fs::OpenOptions::new().append(true).open(&a).unwrap().write_all(b"2,8\n").unwrap();
        let moved = dir.join("b.old");
        std::fs::rename(&b, &moved).unwrap();
        std::fs::write(&b, "t,value\n9,1\n").unwrap();
        std::fs::remove_file(&moved).unwrap();
        let (_, again) = files.live(files.owner().unwrap(), &ops, true).unwrap();
        assert_eq!(again.len(), 2);
        assert_eq!(files.value(0), Some(8.0), "the file kept open reads on");
        assert_eq!(files.value(1), Some(1.0), "the replaced file is opened anew");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_topology_is_live_by_any_recent_file_of_its_owner() {
        let dir = scratch("liveness");
        let mut files = MetricDir::new(&dir);
        let ops: BTreeSet<&str> = ["op"].into();
        let old = SystemTime::now() - 2 * LIVE;
        let write = |name: String, recent: bool| {
            let path = dir.join(name);
            std::fs::write(&path, "t,value\n1,3\n").unwrap();
            if !recent {
                std::fs::File::options().write(true).open(&path).unwrap().set_modified(old).unwrap();
            }
        };
        // t-1-1: only files the driver does not read are recent.
        write("storm.worker.t-1-1.host.op.1.6700-receive-queue-population.csv".into(), false);
        write("storm.worker.t-1-1.host.op.1.6700-receive-queue-pct_full.csv".into(), true);
        // t-2-2: nothing recent; t-3-3: a file the driver reads is recent.
        write("storm.worker.t-2-2.host.op.1.6700-receive-queue-pct_full.csv".into(), false);
        write("storm.worker.t-2-2.host.op.1.6700-receive-queue-population.csv".into(), false);
        write("storm.worker.t-3-3.host.op.1.6700-receive-queue-population.csv".into(), true);
        let (topologies, live) = files.live(files.owner().unwrap(), &ops, false).unwrap();
        assert_eq!(topologies, ["t-1-1".to_string(), "t-3-3".to_string()].into());
        assert_eq!(live.iter().map(|f| f.1.topology.as_str()).collect::<Vec<_>>(), ["t-3-3"]);
        // Before any component is known, nothing is read, but the topologies are live all the same.
        let (topologies, live) = files.live(files.owner().unwrap(), &BTreeSet::new(), false).unwrap();
        assert_eq!(topologies.len(), 2);
        assert!(live.is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
