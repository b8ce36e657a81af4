//! Where a lab's objects live: its state directory and namespace pins ([`LabPaths`]),
//! the names of machines' shares.

use super::*;

pub const NETNS_DIR: &str = "/run/netns";

pub const STATE_DIR: &str = "/run/vemu";

/// Prefix of every network namespace vemu creates.
pub const NETNS_PREFIX: &str = "vemu-";

/// Where a lab keeps its state.
#[derive(Debug, Clone)]
pub struct LabPaths {
    pub lab: String,
    pub dir: PathBuf,
}

impl LabPaths {
    /// A lab's paths, or (`lab` a [`share_name`]) those of a machine's share of one.
    pub fn new(lab: &str) -> LabPaths {
        LabPaths { lab: lab.to_string(), dir: Path::new(STATE_DIR).join(lab) }
    }
    /// The lab's own name (a share's is its lab's): what programs in nodes see as `VEMU_LAB`.
    pub fn lab_name(&self) -> &str {
        share_of(&self.lab).map_or(&self.lab, |(lab, _)| lab)
    }
    pub fn netns_name(&self, node: &str) -> String {
        format!("{NETNS_PREFIX}{}.{node}", self.lab)
    }
    /// The symlink `ip netns` sees.
    pub fn netns(&self, node: &str) -> PathBuf {
        Path::new(NETNS_DIR).join(self.netns_name(node))
    }
    /// Where the network namespace is pinned.
    pub fn netns_pin(&self, node: &str) -> PathBuf {
        self.dir.join("netns").join(node)
    }
    /// Where the lab's plane namespace is pinned: the far ends of the nodes' link
    /// interfaces and the engine's TAP devices for them (see [`create_plane`]).
    pub fn plane(&self) -> PathBuf {
        self.dir.join("plane")
    }
    pub fn uts(&self, node: &str) -> PathBuf {
        self.dir.join("uts").join(node)
    }
    /// Where the node's mount namespace (its private view of the filesystem) is pinned.
    pub fn mnt(&self, node: &str) -> PathBuf {
        self.dir.join("mnt").join(node)
    }
    /// Where the node's PID namespace is pinned, once its first process runs.
    pub fn pidns(&self, node: &str) -> PathBuf {
        self.dir.join("pid").join(node)
    }
    /// Present for a node with PIDs of its own (`isolation: pid`); its lock guards the
    /// making of the node's PID namespace.
    pub fn pidns_wanted(&self, node: &str) -> PathBuf {
        self.dir.join("pid").join(format!("{node}.wanted"))
    }
    /// Present when the lab is a tenant's: its nodes are confined ([`confine`]).
    pub fn confined(&self) -> PathBuf {
        self.dir.join("confined")
    }
    /// Present once the node's own `/sys` is mounted ([`node_sysfs`]); its lock guards
    /// the mounting.
    pub fn sys_mounted(&self, node: &str) -> PathBuf {
        self.dir.join("sys").join(node)
    }
    /// The node's private directories: `upper/` and `work/` of its overlays on
    /// [`PRIVATE_OVERLAYS`], and `run/`, its `/run`.
    pub fn node_fs(&self, node: &str) -> PathBuf {
        self.dir.join("fs").join(node)
    }
    pub fn hosts(&self) -> PathBuf {
        self.dir.join("hosts")
    }
    /// A node's working directory (the current directory of its `run` commands).
    pub fn node_dir(&self, node: &str) -> PathBuf {
        self.dir.join("nodes").join(node)
    }
    /// The controller's HTTP API (root only).
    pub fn socket(&self) -> PathBuf {
        self.dir.join("api.sock")
    }
    /// Bearer token of the API's TCP listener, when there is one (root only).
    pub fn api_token(&self) -> PathBuf {
        self.dir.join("api-token")
    }
    /// Address of the API's TCP listener, when there is one.
    pub fn api_address(&self) -> PathBuf {
        self.dir.join("api-address")
    }
    pub fn plan(&self) -> PathBuf {
        self.dir.join("plan.json")
    }
    pub fn pid_file(&self) -> PathBuf {
        self.dir.join("daemon.pid")
    }
    /// Logs outlive the lab, so they are kept under /var/log.
    pub fn log_dir(&self) -> PathBuf {
        Path::new("/var/log/vemu").join(&self.lab)
    }
    /// Output of a node's `run` commands.
    pub fn node_log(&self, node: &str) -> PathBuf {
        self.log_dir().join(format!("{node}.log"))
    }
}

/// The name under which an agent keeps machine `machine`'s share of lab `lab` (its
/// directory, namespaces, cgroups and logs; its lock is [`LabLock`]'s of that name, held
/// by the agent while it holds the share). It can never be a lab's own name ('@' is not
/// allowed in one), so a lab's controller may run on a machine that also holds a share
/// of the lab.
pub fn share_name(lab: &str, machine: &str) -> String {
    format!("{lab}@{machine}")
}

/// The lab and the machine of a share's name ([`share_name`]); `None` for a lab's own.
pub fn share_of(name: &str) -> Option<(&str, &str)> {
    name.split_once('@')
}
