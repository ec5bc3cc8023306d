//! cgroup cpu groups, v1 and v2: where the controller is, which group a thread is in, and the
//! groups one middleware instance creates, weighs and fills.
//!
//! - [`layout`]: detecting the host's layout from `/proc/self/mountinfo` ([`CgroupLayout`],
//!   [`Hierarchy`]), weight files and their ranges.
//! - [`membership`]: which group a thread or process is in, from `/proc/<pid>/task/<tid>/cgroup`.
//! - [`tree`]: [`CgroupTree`], the groups `<cpu mount>/moirai/<instance>/<group>` with their
//!   weights and threads, every change recorded in a [`crate::restore::RestoreLog`].
//! - [`rt_budget`]: the real-time budget (`cpu.rt_runtime_us`) v1 groups need before real-time
//!   threads may run in them (`CONFIG_RT_GROUP_SCHED`).
//! - `fs`: the cgroupfs operations themselves and what their errnos mean.
//!
//! The original Lachesis forked `cgcreate`/`cgclassify` and knew only v1; here everything is a
//! direct cgroupfs write, and v2 per-thread groups use the kernel's threaded subtrees.

pub(crate) mod fs;
pub mod layout;
pub mod membership;
pub mod rt_budget;
pub mod tree;

pub use layout::{
    shares_to_weight, weight_to_shares, CgroupLayout, CgroupVersion, Hierarchy, CPU_SHARES_RANGE, CPU_WEIGHT_RANGE,
};
pub use membership::{cgroup_path_in, process_cgroup, thread_cgroup};
pub use tree::{sanitize_group_name, validate_group_name, CgroupTree, DEFAULT_BASE};
