//! Linux node virtualization for vemu: a node is a network namespace, a UTS namespace
//! (hostname = node name) and a mount namespace, all pinned by bind mounts so that they
//! cost no process. In its mount namespace a node sees the lab's `/etc/hosts`, its own
//! `/sys` and `/run`, and copy-on-write overlays of `/etc`, `/var/lib` and `/var/log`
//! holding its own files (so one daemon runs in every node with its own configuration,
//! pid files and sockets).
//! An interface is a veth whose peer is in the lab's plane (the engine, the kernel's
//! fast path or a LAN bridge carries its frames there), or a TAP whose descriptor the
//! engine holds; all are configured through netlink from one process.
//!
//! Modules: [`paths`](LabPaths) (where a lab lives), `setup` (its state and limits),
//! `mounts` (mount namespaces), `plane`, `node` (making and entering nodes), `process`
//! (ending them), `remove`, `lock`; [`confine`] (tenants' nodes), [`cgroup`], [`devices`]
//! (a confined node's device allow-list), [`tap`],
//! [`netlink`], [`nic`], [`divert`].
//!
//! Every object carries the lab's name. A lab's state lives on a tmpfs of its own at
//! `/run/vemu/LAB/`, where the namespaces are pinned; `/run/netns/vemu-LAB.NODE` is a
//! symlink to the pinned network namespace, so that `ip netns` lists and enters nodes.
//! [`remove_lab`] removes all of it, also after a crash, with one lazy unmount of the
//! lab's tmpfs (unmounting namespaces one by one costs an RCU grace period each).

pub mod cgroup;
pub mod confine;
pub mod cpu_wait;
pub mod devices;
pub mod divert;
pub mod images;
pub mod mgmt_nat;
pub mod nic;
pub mod tap;

mod lock;
mod mounts;
mod node;
mod paths;
mod plane;
mod process;
mod remove;
mod setup;
mod tenant_root;

pub use lock::*;
// The system helpers this layer shares with the engine (`vemu-sys`), where they were.
pub use mounts::*;
pub use node::*;
pub use paths::*;
pub use plane::*;
pub use process::*;
pub use remove::*;
pub use setup::*;
pub use vemu_sys::netns::in_netns;
pub use vemu_sys::{cpus, netlink};

use std::collections::HashSet;
use std::fs;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sched::{unshare, CloneFlags};
use vemu_scenario::NodePlan;
