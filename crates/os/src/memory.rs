//! Backing a process's own memory with huge pages (Linux's transparent huge pages), where its
//! threads walk more memory than the TLB covers.
//!
//! A pool worker that carries a tuple down a long pipeline at a low rate touches every operator's
//! few dozen cache lines once per tuple. Those lines lie in separate allocations, spread over
//! thousands of 4 KiB pages (~4.7 KiB of heap per operator on 10 000 operators): beyond the cache
//! misses, each hop misses the TLB and walks the page tables. Backed by 2 MiB pages, the same
//! memory needs a few dozen TLB entries. The kernel only gives huge pages to memory that asks
//! where `/sys/kernel/mm/transparent_hugepage/enabled` says `madvise` (the default of most
//! distributions), and pages already in place stay small until `khugepaged` gets to them, which
//! takes minutes. So [`back_with_huge_pages`] marks the regions (`MADV_HUGEPAGE`: later faults
//! get huge pages) and has the kernel rebuild the pages already there at once (`MADV_COLLAPSE`,
//! Linux 6.1 and later), contents unchanged.
//!
//! Only whole huge-page regions inside one private, writable, anonymous mapping of this process
//! are asked (the heap and anonymous `mmap`s: what an allocator hands out), never files, stacks or
//! shared memory; and nothing at all where the administrator switched transparent huge pages off
//! (`never`).

use std::collections::BTreeSet;

/// `MADV_COLLAPSE` (`linux/mman.h`, Linux 6.1): rebuild a range's pages as huge pages now.
const MADV_COLLAPSE: libc::c_int = 25;

/// The huge page size where the kernel does not say (x86-64's 2 MiB).
const HUGE_PAGE_GUESS: usize = 2 << 20;

/// What `/sys/kernel/mm/transparent_hugepage/enabled` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThpMode {
    /// Huge pages for all anonymous memory that fits them.
    Always,
    /// Huge pages only where a process asks (`madvise`).
    Madvise,
    /// None: the administrator switched them off.
    Never,
}

impl ThpMode {
    /// The bracketed choice of the sysfs file (`always [madvise] never`).
    fn parse(text: &str) -> Option<ThpMode> {
        let chosen = text.split_whitespace().find(|w| w.starts_with('['))?;
        match chosen.trim_matches(|c| c == '[' || c == ']') {
            "always" => Some(ThpMode::Always),
            "madvise" => Some(ThpMode::Madvise),
            "never" => Some(ThpMode::Never),
            _ => None,
        }
    }
}

/// The kernel's transparent huge page mode; `None` where it has none (no such file).
pub fn thp_mode() -> Option<ThpMode> {
    ThpMode::parse(&std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").ok()?)
}

/// The size of a huge page (`hpage_pmd_size`), 2 MiB where the kernel does not say.
pub fn huge_page_size() -> usize {
    std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .filter(|&n: &usize| n.is_power_of_two() && n >= 4096)
        .unwrap_or(HUGE_PAGE_GUESS)
}

/// What [`back_with_huge_pages`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HugePages {
    /// Huge-page regions asked for huge pages (`MADV_HUGEPAGE` accepted).
    pub marked: usize,
    /// Of those, the regions the kernel rebuilt as huge pages at once (`MADV_COLLAPSE`).
    pub collapsed: usize,
    /// Why nothing or not everything was done, where something stood in the way (huge pages
    /// off, a kernel without `MADV_COLLAPSE`, memory it could not rebuild now).
    pub note: Option<String>,
}

/// Asks the kernel to back the huge-page regions holding `addresses` (in this process) with huge
/// pages, now and for later faults; best effort: a region the kernel declines stays as it was.
/// Contents are never changed.
pub fn back_with_huge_pages(addresses: impl IntoIterator<Item = usize>) -> HugePages {
    match thp_mode() {
        Some(ThpMode::Never) => {
            return HugePages { note: Some("transparent huge pages are off (`never`)".into()), ..HugePages::default() }
        }
        None => {
            return HugePages { note: Some("the kernel has no transparent huge pages".into()), ..HugePages::default() }
        }
        Some(_) => {}
    }
    let maps = match std::fs::read_to_string("/proc/self/maps") {
        Ok(text) => text,
        Err(e) => return HugePages { note: Some(format!("reading /proc/self/maps: {e}")), ..HugePages::default() },
    };
    let size = huge_page_size();
    let anonymous = anonymous_mappings(&maps);
    let mut done = HugePages::default();
    let mut collapse = true;
    for region in regions(addresses, size, &anonymous) {
        if advise(region, size, libc::MADV_HUGEPAGE).is_err() {
            continue;
        }
        done.marked += 1;
        if !collapse {
            continue;
        }
        match advise(region, size, MADV_COLLAPSE) {
            Ok(()) => done.collapsed += 1,
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                // Linux before 6.1: marked only; later faults get huge pages, `khugepaged` the rest.
                collapse = false;
                done.note = Some("this kernel cannot collapse pages now (MADV_COLLAPSE needs Linux 6.1)".into());
            }
            Err(e) => done.note = Some(format!("some regions were not rebuilt now: {e}")),
        }
    }
    done
}

/// `madvise` on one region of this process's own memory.
fn advise(start: usize, len: usize, advice: libc::c_int) -> std::io::Result<()> {
    // SAFETY: neither advice changes what any address reads: MADV_HUGEPAGE only sets a flag on
    // the mapping, and MADV_COLLAPSE copies the region's pages into a huge page under the
    // kernel's page-table locks, contents kept (threads touching it meanwhile wait in a page
    // fault). The range was read from /proc/self/maps as part of a private anonymous mapping
    // (`regions`); had it been unmapped since, the call fails with ENOMEM and touches nothing.
    let rc = unsafe { libc::madvise(start as *mut libc::c_void, len, advice) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The private, writable, anonymous mappings of a `/proc/<pid>/maps` text, as address ranges:
/// the heap and anonymous `mmap`s (no file, no `[stack]` or other special mapping).
fn anonymous_mappings(maps: &str) -> Vec<(usize, usize)> {
    maps.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let (range, perms, _offset, _dev, inode) =
                (fields.next()?, fields.next()?, fields.next()?, fields.next()?, fields.next()?);
            let path = fields.next();
            if perms != "rw-p" || inode != "0" || !matches!(path, None | Some("[heap]")) {
                return None;
            }
            let (start, end) = range.split_once('-')?;
            Some((usize::from_str_radix(start, 16).ok()?, usize::from_str_radix(end, 16).ok()?))
        })
        .collect()
}

/// The huge-page regions (`size` bytes, aligned) holding `addresses` that lie wholly inside one of
/// `mappings`, in address order, each once.
fn regions(addresses: impl IntoIterator<Item = usize>, size: usize, mappings: &[(usize, usize)]) -> Vec<usize> {
    let starts: BTreeSet<usize> = addresses.into_iter().map(|a| a & !(size - 1)).collect();
    starts
        .into_iter()
        .filter(|&r| mappings.iter().any(|&(start, end)| start <= r && r.checked_add(size).is_some_and(|e| e <= end)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mode_is_the_bracketed_choice() {
        assert_eq!(ThpMode::parse("always [madvise] never\n"), Some(ThpMode::Madvise));
        assert_eq!(ThpMode::parse("[always] madvise never"), Some(ThpMode::Always));
        assert_eq!(ThpMode::parse("always madvise [never]"), Some(ThpMode::Never));
        assert_eq!(ThpMode::parse("always madvise never"), None);
    }

    #[test]
    fn only_whole_regions_inside_private_anonymous_mappings_are_asked() {
        let maps = "\
55d0c0000000-55d0c0900000 rw-p 00000000 00:00 0                          [heap]
7f0000000000-7f0000300000 rw-p 00000000 00:00 0 \n\
7f0000400000-7f0000800000 rw-p 00000000 08:01 1234                       /data/file
7f0000800000-7f0000c00000 r--p 00000000 00:00 0 \n\
7ffc00000000-7ffc00400000 rw-p 00000000 00:00 0                          [stack]
7f0001000000-7f0001400000 rw-s 00000000 00:05 77                         /dev/zero (deleted)
";
        let anonymous = anonymous_mappings(maps);
        assert_eq!(anonymous, [(0x55d0c0000000, 0x55d0c0900000), (0x7f0000000000, 0x7f0000300000)]);
        let mb2 = 2 << 20;
        let asked = regions(
            [
                0x55d0c0000010, // the heap's first region
                0x55d0c01fffff, // the same region again
                0x55d0c0880000, // the heap's last 1 MiB: no whole region
                0x7f0000100000, // the anonymous mapping's first region
                0x7f0000200000, // its second: only 1 MiB of it is mapped
                0x7f0000500000, // a file
                0x7f0000900000, // read-only
                0x7ffc00100000, // the stack
                0x7f0001000000, // shared
            ],
            mb2,
            &anonymous,
        );
        assert_eq!(asked, [0x55d0c0000000, 0x7f0000000000]);
    }

    /// AnonHugePages of this process's mappings that overlap `range`, in KiB (asking for huge
    /// pages splits a mapping at the regions' edges).
    fn anon_huge_kib(range: std::ops::Range<usize>) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").expect("/proc/self/smaps");
        let (mut inside, mut kib) = (false, 0);
        for line in smaps.lines() {
            let bounds = line.split_once(' ').and_then(|(r, _)| r.split_once('-'));
            if let Some((Ok(s), Ok(e))) =
                bounds.map(|(s, e)| (usize::from_str_radix(s, 16), usize::from_str_radix(e, 16)))
            {
                inside = s < range.end && range.start < e;
            } else if let Some(kb) = line.strip_prefix("AnonHugePages:").filter(|_| inside) {
                kib += kb.trim().trim_end_matches("kB").trim().parse::<u64>().unwrap_or(0);
            }
        }
        kib
    }

    #[test]
    fn memory_in_small_pages_is_rebuilt_in_huge_pages_with_its_contents() {
        // 16 MiB of its own (an allocation this large is an anonymous mapping of its own), every
        // 4 KiB page written, so faulted in as small pages.
        let size = huge_page_size();
        let mut block: Vec<u64> = (0..(16 << 20) / 8).map(|i| i as u64 * 7).collect();
        let first = block.as_ptr() as usize;
        let span = first..first + block.len() * 8;
        let before = anon_huge_kib(span.clone());
        let addresses: Vec<usize> = (0..block.len()).step_by(4096 / 8).map(|i| first + i * 8).collect();
        let done = back_with_huge_pages(addresses);
        match thp_mode() {
            None | Some(ThpMode::Never) => {
                assert_eq!((done.marked, done.collapsed), (0, 0));
                assert!(done.note.is_some());
            }
            Some(_) => {
                // At least 7 whole regions lie inside 16 MiB, whatever its alignment.
                assert!(done.marked >= (16 << 20) / size - 1, "{done:?}");
                if done.collapsed > 0 {
                    // Every region it rebuilt is a huge page now (under `always` some may have
                    // been one already: the count need not grow by all of them).
                    let after = anon_huge_kib(span);
                    assert!(
                        after >= (done.collapsed * size / 1024) as u64,
                        "AnonHugePages {before} → {after} kB after {done:?}"
                    );
                } else {
                    assert!(done.note.is_some(), "nothing rebuilt, and not said why: {done:?}");
                }
            }
        }
        assert!(block.iter().enumerate().all(|(i, &v)| v == i as u64 * 7), "contents kept");
        block[0] = 1;
        assert_eq!(block[0], 1);
    }
}
