//! Asking the CPU to bring memory into its caches ahead of use (a prefetch hint).
//!
//! A worker pool that runs a long pipeline at a low rate visits every operator once per tuple, so
//! each visit finds the operator's memory out of the caches; a hint issued while the worker still
//! runs the operator before lets the loads of the next one overlap that work instead of waiting in
//! turn.

/// Hints that the cache line holding `addr` will be read soon. Only a hint: it reads nothing,
/// never faults (an address that is not mapped, or no longer holds what it held, costs a wasted
/// hint) and does nothing on CPUs without the instruction.
#[inline]
pub fn prefetch(addr: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetcht0` is a hint: it does not access memory architecturally, cannot fault on
    // any address, and SSE (its target feature) is part of the x86-64 baseline.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(addr as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = addr;
}

/// The size of one core's L2 cache (CPU 0's), as the kernel describes it
/// (`/sys/devices/system/cpu/cpu0/cache/index*/`: level 2, data or unified); `None` where it
/// does not.
pub fn l2_bytes() -> Option<usize> {
    let dir = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache").ok()?;
    dir.flatten().find_map(|index| {
        let read = |name: &str| std::fs::read_to_string(index.path().join(name)).ok();
        let level = read("level")?;
        let kind = read("type")?;
        (level.trim() == "2" && kind.trim() != "Instruction").then(|| parse_size(&read("size")?)).flatten()
    })
}

/// A cache size as sysfs writes it: `1024K`, `32M`, or bytes.
fn parse_size(text: &str) -> Option<usize> {
    let text = text.trim();
    let (digits, unit) = match text.strip_suffix('K') {
        Some(d) => (d, 1 << 10),
        None => match text.strip_suffix('M') {
            Some(d) => (d, 1 << 20),
            None => (text, 1),
        },
    };
    digits.parse::<usize>().ok().map(|n| n * unit)
}

/// The address of what `r` points to, for [`prefetch`].
#[inline]
pub fn address_of<T: ?Sized>(r: &T) -> usize {
    r as *const T as *const u8 as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hint_on_any_address_is_harmless() {
        let v = vec![1u64; 1024];
        prefetch(address_of(&v[512]));
        // Not mapped, and null: a hint never faults.
        prefetch(0);
        prefetch(usize::MAX - 63);
        assert_eq!(v.iter().sum::<u64>(), 1024);
        assert_eq!(address_of(&v[1]) - address_of(&v[0]), 8);
    }

    #[test]
    fn cache_sizes_are_read_as_sysfs_writes_them() {
        assert_eq!(parse_size("1024K\n"), Some(1 << 20));
        assert_eq!(parse_size("32M"), Some(32 << 20));
        assert_eq!(parse_size("65536"), Some(65536));
        assert_eq!(parse_size("big"), None);
        // Whatever this machine says, it is said without a panic, and a size is a plausible one.
        if let Some(bytes) = l2_bytes() {
            assert!((64 << 10..=1 << 30).contains(&bytes), "{bytes}");
        }
    }
}
