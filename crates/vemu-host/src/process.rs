//! The processes of a lab's nodes: found by network namespace, and ended.

use super::*;

/// Inode of a namespace file (what `/proc/PID/ns/net` of its members points to).
pub(crate) fn ns_inode(path: &Path) -> Option<u64> {
    fs::metadata(path).ok().map(|m| m.ino())
}

/// Every process whose network namespace is one of `inodes`.
pub(crate) fn processes_in(inodes: &HashSet<u64>) -> Vec<i32> {
    let me = std::process::id() as i32;
    let Ok(dir) = fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me)
        .filter(|pid| {
            ns_inode(Path::new(&format!("/proc/{pid}/ns/net"))).is_some_and(|i| inodes.contains(&i))
        })
        .collect()
}

/// Whether `pid` is the first process of a PID namespace below the machine's (a node's
/// init): its `NSpid` line ends in 1.
pub(crate) fn is_node_init(pid: i32) -> bool {
    let Ok(status) = fs::read_to_string(format!("/proc/{pid}/status")) else { return false };
    status.lines().find_map(|l| l.strip_prefix("NSpid:")).is_some_and(|l| {
        let ids: Vec<&str> = l.split_whitespace().collect();
        ids.len() > 1 && ids.last() == Some(&"1")
    })
}

/// Stop every process in the given network namespaces: SIGTERM, then SIGKILL for those
/// still there after `grace`. The nodes' inits ignore SIGTERM and are not waited for;
/// they get SIGKILL at the end (which ends what is left of their node), unless
/// `keep_inits` (a node that stops but may start again keeps its PID namespace).
pub fn kill_processes(netns: &[PathBuf], grace: Duration, keep_inits: bool) {
    let inodes: HashSet<u64> = netns.iter().filter_map(|p| ns_inode(p)).collect();
    if inodes.is_empty() {
        return;
    }
    let others = || -> Vec<i32> {
        processes_in(&inodes).into_iter().filter(|&p| !is_node_init(p)).collect()
    };
    let signal = |pids: &[i32], sig| {
        for &pid in pids {
            // SAFETY: plain kill(2).
            unsafe { libc::kill(pid, sig) };
        }
    };
    let pids = others();
    signal(&pids, libc::SIGTERM);
    let deadline = Instant::now() + grace;
    let mut left = pids;
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        left = others();
    }
    let last = if keep_inits { others() } else { processes_in(&inodes) };
    if last.is_empty() {
        return;
    }
    signal(&last, libc::SIGKILL);
    let deadline = Instant::now() + Duration::from_secs(2);
    let remaining = || if keep_inits { others() } else { processes_in(&inodes) };
    while !remaining().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
}
