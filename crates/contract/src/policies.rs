//! The short names of moirai's scheduling policies, in one table: `moirai schedule --policy`,
//! `moirai bench --compare`, `--threading policy:NAME` and the engine's adapter all read it.
//!
//! A policy runs at the **OS level** (the middleware turns its priorities into nice values or
//! cgroup weights) or at the **user level** (the engine's policy executor orders its ready queue
//! by it); STAFiLOS' schedulers (`rr`, `qbs`, `rb`) exist only at the user level. Besides the
//! table, `script:"<expression>"` (both levels) and `metric:<metric>` (user level) name policies
//! by their definition.
//!
//! ```
//! use moirai_contract::policies;
//!
//! assert_eq!(policies::os_level().collect::<Vec<_>>(), ["qs", "hr", "fcfs", "random"]);
//! assert!(policies::find("qbs").is_some_and(|p| p.user_level && !p.os_level));
//! ```

/// One named policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NamedPolicy {
    /// The short name.
    pub name: &'static str,
    /// The middleware may run it (through Linux).
    pub os_level: bool,
    /// The engine's policy executor may run it.
    pub user_level: bool,
    /// What it does, in a few words.
    pub about: &'static str,
}

/// Every named policy.
pub const POLICIES: [NamedPolicy; 7] = [
    NamedPolicy { name: "qs", os_level: true, user_level: true, about: "queue size: the longest input queue first" },
    NamedPolicy {
        name: "hr",
        os_level: true,
        user_level: true,
        about: "highest rate: output per unit of cost along the path",
    },
    NamedPolicy {
        name: "fcfs",
        os_level: true,
        user_level: true,
        about: "first come, first served: the oldest head tuple",
    },
    NamedPolicy { name: "random", os_level: true, user_level: true, about: "random priorities every round" },
    NamedPolicy {
        name: "rr",
        os_level: false,
        user_level: true,
        about: "STAFiLOS' round robin: equal priorities, a quantum each",
    },
    NamedPolicy {
        name: "qbs",
        os_level: false,
        user_level: true,
        about: "STAFiLOS' quantum-based: two classes, sources at a fixed interval",
    },
    NamedPolicy { name: "rb", os_level: false, user_level: true, about: "STAFiLOS' rate-based (as hr)" },
];

/// The policy named `name`, if the table has it.
pub fn find(name: &str) -> Option<&'static NamedPolicy> {
    POLICIES.iter().find(|p| p.name == name)
}

/// The names the middleware runs, in the table's order.
pub fn os_level() -> impl Iterator<Item = &'static str> {
    POLICIES.iter().filter(|p| p.os_level).map(|p| p.name)
}

/// The names the engine's policy executor runs, in the table's order.
pub fn user_level() -> impl Iterator<Item = &'static str> {
    POLICIES.iter().filter(|p| p.user_level).map(|p| p.name)
}

/// When a scheduler acts: the middleware on an SPE's threads (`moirai schedule --activation`),
/// the engine's policy executor on its ready queue (`--threading policy:qs:2:activation=always`),
/// the simulator's middleware. The rule itself is `moirai_sched::activation`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActivationMode {
    /// Only while scheduling can help: the machine saturated and the SPE falling behind
    /// (the default).
    #[default]
    Auto,
    /// Always, from the first round (for comparisons, and for SPEs that report no backlog and
    /// run on a machine whose CPU is always busy).
    Always,
}

impl std::str::FromStr for ActivationMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(ActivationMode::Auto),
            "always" => Ok(ActivationMode::Always),
            other => Err(format!("unknown activation mode '{other}': use auto or always")),
        }
    }
}

/// The activation rule's CPU threshold unless configured: the share of the machine's CPU at
/// which it counts as fully used (`moirai_sched::activation`'s default, here for the crates that
/// take the setting without the rule; moirai-middleware's tests check that they agree).
pub const DEFAULT_ACTIVATION_THRESHOLD: f64 = 0.9;

/// The accepted range of the activation threshold (`moirai_sched::activation::CPU_THRESHOLD_RANGE`).
pub const ACTIVATION_THRESHOLD_RANGE: std::ops::RangeInclusive<f64> = 0.5..=1.0;

/// The accepted range of the activation rule's lag, how much input waiting counts as behind
/// (`moirai_sched::activation::LAG_RANGE`).
pub const ACTIVATION_LAG_RANGE: std::ops::RangeInclusive<std::time::Duration> =
    std::time::Duration::from_millis(10)..=std::time::Duration::from_secs(10);

impl ActivationMode {
    /// Its name in flags and files.
    pub fn as_str(self) -> &'static str {
        match self {
            ActivationMode::Auto => "auto",
            ActivationMode::Always => "always",
        }
    }
}
