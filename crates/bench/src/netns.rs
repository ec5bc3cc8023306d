//! "Nodes" on one machine: network namespaces joined by a bridge, each with an address of its
//! own, so that processes started in different namespaces talk over the network stack (veth
//! pairs, a Linux bridge) as processes on different hosts do, while the scheduler, `/proc` and
//! the clock stay shared.
//!
//! [`Nodes::create`] makes a bridge in the root namespace (its address is the root namespace's
//! on the segment, where a JobManager can listen) and one namespace per node, each with one end
//! of a veth pair on the bridge and `lo` up. Everything is named after the creating process
//! (`moirai-<pid>x<seq>-n<k>`, bridge `mb<pid>x<seq>`, veths `mv<pid>x<seq><a|b><k>`) and
//! removed when the guard drops — also when creation fails half way, and what a crashed process
//! left behind (its pid no longer running) is removed before anything new is made. Needs root
//! (CAP_NET_ADMIN and CAP_SYS_ADMIN for `ip netns`); without, [`Nodes::create`] says so and
//! leaves nothing behind.

use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// The prefix of every namespace made here.
pub const NETNS_PREFIX: &str = "moirai-";
/// The prefix of every bridge made here.
const BRIDGE_PREFIX: &str = "mb";
/// The prefix of every veth made here.
const VETH_PREFIX: &str = "mv";

static SEQ: AtomicU32 = AtomicU32::new(0);

/// One node: a network namespace and its address on the bridge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// The namespace's name (`ip netns exec <name> ...`).
    pub netns: String,
    /// Its address on the bridge.
    pub addr: Ipv4Addr,
}

/// Network namespaces on a bridge, removed when dropped.
#[derive(Debug)]
pub struct Nodes {
    bridge: Option<String>,
    /// The root namespace's address on the bridge.
    host: Ipv4Addr,
    nodes: Vec<Node>,
    /// Made, to be removed: namespaces and root-side links.
    made_netns: Vec<String>,
    made_links: Vec<String>,
}

/// Runs `ip args...`; its stderr in the error.
fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip").args(args).output().map_err(|e| {
        format!("cannot run `ip` ({e}): the nodes' network namespaces need iproute2 (apt-get install iproute2)")
    })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("`ip {}` failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
    }
}

/// The stdout of `ip args...` (empty when it fails).
fn ip_out(args: &[&str]) -> String {
    Command::new("ip").args(args).output().map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default()
}

/// The pid in a name made here (`<prefix><pid>x<seq>...`), if it is one.
fn owner(name: &str, prefix: &str) -> Option<u32> {
    let (pid, rest) = name.strip_prefix(prefix)?.split_once('x')?;
    rest.starts_with(|c: char| c.is_ascii_digit()).then_some(())?;
    pid.parse().ok()
}

fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Removes namespaces, bridges and veths a process that is no longer running made here; returns
/// what it removed.
pub fn remove_stale() -> Vec<String> {
    let mut removed = Vec::new();
    for line in ip_out(&["netns", "list"]).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        if owner(name, NETNS_PREFIX).is_some_and(|pid| !alive(pid)) && ip(&["netns", "delete", name]).is_ok() {
            removed.push(format!("netns {name}"));
        }
    }
    for line in ip_out(&["-o", "link", "show"]).lines() {
        // "12: mb123x0: <...>" or "13: mv123x0a1@if12: <...>"
        let Some(name) = line.split(": ").nth(1).map(|n| n.split('@').next().unwrap_or(n)) else { continue };
        let stale = [BRIDGE_PREFIX, VETH_PREFIX].iter().any(|p| owner(name, p).is_some_and(|pid| !alive(pid)));
        if stale && ip(&["link", "delete", name]).is_ok() {
            removed.push(format!("link {name}"));
        }
    }
    removed
}

impl Nodes {
    /// `count` namespaces on a fresh bridge, on a /24 of 10.77.0.0/16 that no interface of the
    /// root namespace uses. Stale ones of crashed runs are removed first.
    pub fn create(count: usize) -> Result<Nodes, String> {
        if !(1..=9).contains(&count) {
            return Err(format!("{count} nodes: between 1 and 9 network namespaces are supported"));
        }
        remove_stale();
        let tag = format!("{}x{}", std::process::id(), SEQ.fetch_add(1, Ordering::SeqCst));
        let subnet = free_subnet(&tag)?;
        let mut nodes = Nodes {
            bridge: None,
            host: Ipv4Addr::new(10, 77, subnet, 1),
            nodes: Vec::new(),
            made_netns: Vec::new(),
            made_links: Vec::new(),
        };
        let bridge = format!("{BRIDGE_PREFIX}{tag}");
        ip(&["link", "add", &bridge, "type", "bridge"]).map_err(privilege)?;
        nodes.made_links.push(bridge.clone());
        nodes.bridge = Some(bridge.clone());
        ip(&["addr", "add", &format!("{}/24", nodes.host), "dev", &bridge])?;
        ip(&["link", "set", &bridge, "up"])?;
        for k in 1..=count {
            let netns = format!("{NETNS_PREFIX}{tag}-n{k}");
            ip(&["netns", "add", &netns]).map_err(privilege)?;
            nodes.made_netns.push(netns.clone());
            let (outer, inner) = (format!("{VETH_PREFIX}{tag}a{k}"), format!("{VETH_PREFIX}{tag}b{k}"));
            ip(&["link", "add", &outer, "type", "veth", "peer", "name", &inner])?;
            nodes.made_links.push(outer.clone());
            ip(&["link", "set", &outer, "master", &bridge, "up"])?;
            ip(&["link", "set", &inner, "netns", &netns])?;
            let addr = Ipv4Addr::new(10, 77, subnet, 10 + k as u8);
            ip(&["-n", &netns, "link", "set", "lo", "up"])?;
            ip(&["-n", &netns, "addr", "add", &format!("{addr}/24"), "dev", &inner])?;
            ip(&["-n", &netns, "link", "set", &inner, "up"])?;
            nodes.nodes.push(Node { netns, addr });
        }
        Ok(nodes)
    }

    /// The nodes.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The root namespace's address on the bridge.
    pub fn host(&self) -> Ipv4Addr {
        self.host
    }
}

fn privilege(e: String) -> String {
    if e.contains("Operation not permitted") || e.contains("Permission denied") {
        format!(
            "{e}: network namespaces for the nodes need root (CAP_NET_ADMIN, CAP_SYS_ADMIN); run as root, or run the \
             cluster without namespaces"
        )
    } else {
        e
    }
}

/// A third octet for 10.77.X.0/24 that no address of the root namespace is in.
fn free_subnet(tag: &str) -> Result<u8, String> {
    let used = ip_out(&["-o", "-4", "addr", "show"]);
    let start = tag.bytes().fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(b as u32));
    (0..200u32)
        .map(|i| (20 + (start + i) % 200) as u8)
        .find(|s| !used.contains(&format!(" 10.77.{s}.")))
        .ok_or_else(|| "no free /24 in 10.77.0.0/16 for the nodes' bridge".to_string())
}

impl Drop for Nodes {
    /// Removes every namespace and link made (a namespace takes its veth end along).
    fn drop(&mut self) {
        for netns in self.made_netns.drain(..) {
            let _ = ip(&["netns", "delete", &netns]);
        }
        for link in self.made_links.drain(..).rev() {
            // A veth whose peer's namespace went is gone already.
            let _ = ip(&["link", "delete", &link]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_made_here_carry_their_makers_pid() {
        assert_eq!(owner("moirai-4711x0-n1", NETNS_PREFIX), Some(4711));
        assert_eq!(owner("mb4711x12", BRIDGE_PREFIX), Some(4711));
        assert_eq!(owner("mv4711x3a2", VETH_PREFIX), Some(4711));
        assert_eq!(owner("moirai-spe-x", NETNS_PREFIX), None);
        assert_eq!(owner("eth0", VETH_PREFIX), None);
        assert_eq!(owner("mb0", BRIDGE_PREFIX), None, "someone else's bridge");
    }
}
