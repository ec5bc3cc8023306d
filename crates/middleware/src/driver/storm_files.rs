//! The metrics directory of Storm's CSV reporter: its files' names taken apart, their last values,
//! and listings taken only when the directory may have changed.
//!
//! A round needs the live metric files of the topology's components: those written in the last
//! [`LIVE`], newest per (topology, component, task, metric). Listing the directory and taking
//! every file's metadata each round made up a quarter of a Storm round's CPU (a `statx` per
//! file, with 100 executors some 2 000 files). The reporter creates a file once and appends to
//! it every period, so the set of files changes only when the directory does (its mtime moves
//! with every file created or removed). The listing is therefore taken again when the
//! directory's mtime, its owner or the components asked for change, when the caller says so (a
//! thread of the worker came or went), and every [`RELIST`] — so that a topology whose files
//! stopped being written is dropped at most [`LIVE`] + [`RELIST`] after its last write.
//!
//! A listing also keeps its files open (up to [`HELD`] of them): a value is then one seek and one
//! read, where opening the file by its name each round walked the path through a directory of
//! thousands of entries.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

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

/// The last value of a CSV file of the reporter (`t,value` lines), read from its end (its last
/// 256 bytes, or all of a shorter file) without touching its access time.
pub fn last_value(path: &Path) -> Option<f64> {
    tail_value(&moirai_os::file::open_without_atime(path).ok()?)
}

/// The last value of an open CSV file of the reporter: a seek to 256 bytes before its end (or to
/// its start) and one read.
fn tail_value(mut file: &File) -> Option<f64> {
    const TAIL: u64 = 256;
    if file.seek(SeekFrom::End(-(TAIL as i64))).is_err() {
        file.seek(SeekFrom::Start(0)).ok()?;
    }
    let mut tail = String::new();
    file.take(TAIL).read_to_string(&mut tail).ok()?;
    let line = tail.lines().rev().find(|l| !l.trim().is_empty())?;
    line.rsplit(',').next()?.trim().parse().ok().filter(|v: &f64| v.is_finite())
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
    /// `files`' open handles, by index (`None` beyond [`HELD`] or where opening failed).
    handles: Vec<Option<File>>,
}

/// One metrics directory and its last listing; see the [module docs](self).
pub struct MetricDir {
    dir: PathBuf,
    listing: Option<Listing>,
}

impl MetricDir {
    /// The directory at `dir`, not listed yet.
    pub fn new(dir: &Path) -> Self {
        MetricDir { dir: dir.to_path_buf(), listing: None }
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
                && l.taken.elapsed() < RELIST
                && l.components.len() == components.len()
                && l.components.iter().zip(components).all(|(a, b)| a == b)
        });
        if !fresh {
            let (topologies, files) = self.list(owner, components)?;
            let handles = files
                .iter()
                .enumerate()
                .map(|(k, (path, _))| (k < HELD).then(|| moirai_os::file::open_without_atime(path).ok()).flatten())
                .collect();
            self.listing = Some(Listing {
                owner,
                modified,
                components: components.iter().map(|c| c.to_string()).collect(),
                taken: Instant::now(),
                topologies,
                files: Arc::new(files),
                handles,
            });
        }
        let l = self.listing.as_ref().expect("set above");
        Ok((l.topologies.clone(), Arc::clone(&l.files)))
    }

    /// The last value of file `k` of the last listing ([`MetricDir::live`]'s files).
    pub fn value(&self, k: usize) -> Option<f64> {
        let listing = self.listing.as_ref()?;
        match listing.handles.get(k) {
            Some(Some(file)) => tail_value(file),
            _ => last_value(&listing.files.get(k)?.0),
        }
    }

    /// Lists the directory: every file's metadata is read.
    fn list(&self, owner: u32, components: &BTreeSet<&str>) -> Result<(BTreeSet<String>, LiveFiles), String> {
        let now = SystemTime::now();
        let entries = std::fs::read_dir(&self.dir)
            .map_err(|e| format!("cannot list the metrics directory {}: {e}", self.dir.display()))?;
        let mut newest: BTreeMap<(String, String, i64, StormMetric), (SystemTime, PathBuf, MetricFile)> =
            BTreeMap::new();
        let mut topologies = BTreeSet::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            // Storm's topology ids have no dots: the id is the name's third part.
            let rest = name.strip_prefix("storm.worker.").or_else(|| name.strip_prefix("storm.topology."));
            let Some((topology, _)) = rest.and_then(|r| r.split_once('.')) else { continue };
            let Ok(meta) = entry.metadata() else { continue };
            let Ok(written) = meta.modified() else { continue };
            if meta.uid() != owner || !meta.is_file() || now.duration_since(written).unwrap_or_default() > LIVE {
                continue;
            }
            topologies.insert(topology.to_string());
            let Some(parsed) = parse_metric_file(name, components.iter().copied()) else { continue };
            let key = (parsed.topology.clone(), parsed.component.clone(), parsed.task, parsed.metric.clone());
            let keep = newest.get(&key).is_none_or(|(t, _, _)| written > *t);
            if keep {
                newest.insert(key, (written, entry.path(), parsed));
            }
        }
        Ok((topologies, newest.into_values().map(|(_, path, parsed)| (path, parsed)).collect()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
