//! Network namespaces for a cluster's nodes without the privilege to make them: a clear error
//! that says what is needed, and nothing left behind. The test runs itself again as a child
//! process stripped of every capability (`setpriv --bounding-set -all`: root's uid, no
//! CAP_NET_ADMIN or CAP_SYS_ADMIN), which tries to make two nodes.

use std::process::Command;

const CHILD: &str = "MOIRAI_NETNS_PRIVILEGE_CHILD";

#[test]
fn without_the_privilege_namespaces_are_refused_clearly_and_nothing_is_left() {
    let test = "without_the_privilege_namespaces_are_refused_clearly_and_nothing_is_left";
    let Some(setpriv) = moirai_bench::requires::or_skip(
        test,
        moirai_bench::requires::on_path("setpriv").ok_or("needs `setpriv` (util-linux)".to_string()),
    ) else {
        return;
    };
    if moirai_bench::requires::or_skip(test, moirai_bench::requires::on_path("ip").ok_or("needs `ip`".to_string()))
        .is_none()
    {
        return;
    }
    let me = std::env::current_exe().unwrap();
    let out = Command::new(setpriv)
        .args(["--bounding-set", "-all", "--inh-caps", "-all", "--"])
        .arg(&me)
        .args(["--exact", "a_node_made_without_privilege", "--ignored", "--nocapture"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the child: {stdout}\n{stderr}");
    assert!(stdout.contains("1 passed"), "the child ran its check: {stdout}\n{stderr}");
    // setpriv execs the test binary: the child's pid names everything it would have made.
    let mark =
        stderr.lines().find_map(|l| l.strip_prefix("child pid ")).expect("the child says its pid").trim().to_string();
    for what in [&["netns", "list"][..], &["link", "show"][..]] {
        let listed = Command::new("ip").args(what).output().unwrap();
        let listed = String::from_utf8_lossy(&listed.stdout);
        assert!(!listed.contains(&format!("{mark}x")), "left behind by the child ({what:?}): {listed}");
    }
}

/// The child's part: run only by the test above, without capabilities.
#[test]
#[ignore = "run as a child process without capabilities by the test above"]
fn a_node_made_without_privilege() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    eprintln!("child pid {}", std::process::id());
    let err = match moirai_bench::netns::Nodes::create(2) {
        Ok(_) => panic!("two network namespaces were made without CAP_NET_ADMIN and CAP_SYS_ADMIN"),
        Err(e) => e,
    };
    assert!(
        err.contains("network namespaces for the nodes need root (CAP_NET_ADMIN, CAP_SYS_ADMIN)")
            && err.contains("Operation not permitted"),
        "{err}"
    );
}
