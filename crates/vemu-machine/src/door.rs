//! Doors into nodes: how a command, a terminal or the API's `exec` reaches a node. A
//! node on this machine is entered (its namespaces, cgroups and confinement); a node on
//! another machine of a lab across machines is reached through that machine's agent.
//! The worker that built the lab says which ([`crate::worker::Worker::door`]); the command
//! line, the API and the agents all enter nodes here, never around it.

use std::process::Command;

use anyhow::Result;

use crate::route::AgentRoute;

/// The command line of an interactive shell in a node: `preferred` (the user's `$SHELL`;
/// bash without its rc files) where the node has it, else the node's `/bin/sh` — chosen
/// inside the node, whose root may be an image's (an Alpine image has no bash).
pub fn shell_argv(preferred: &str) -> Vec<String> {
    let pick = r#"if [ -x "$0" ]; then case "$0" in *bash) exec "$0" --norc -i ;; *) exec "$0" -i ;; esac; fi; exec /bin/sh -i"#;
    ["/bin/sh", "-c", pick, preferred].map(String::from).to_vec()
}

/// The way into one node.
pub enum Door {
    /// The node is on this machine.
    Here(HereDoor),
    /// The node is on another machine: its agent runs commands there, for lab `lab`
    /// (the agent's name for the lab's share).
    Agent { route: AgentRoute, lab: String },
}

/// A node on this machine: node `node` of the lab (or share) whose files are at `paths`.
#[derive(Clone, Debug)]
pub struct HereDoor {
    paths: vemu_host::LabPaths,
    node: String,
}

impl HereDoor {
    pub fn new(paths: vemu_host::LabPaths, node: &str) -> HereDoor {
        HereDoor { paths, node: node.to_string() }
    }

    /// The files of the node's lab (or share) on this machine.
    pub fn paths(&self) -> &vemu_host::LabPaths {
        &self.paths
    }

    pub fn node(&self) -> &str {
        &self.node
    }

    /// The node's own directory (its files, its log): where the API's commands start.
    pub fn node_dir(&self) -> std::path::PathBuf {
        self.paths.node_dir(&self.node)
    }

    /// Open the node (before a fork): fails if the node does not exist.
    pub fn open(&self) -> Result<Entered> {
        let entry = vemu_host::NodeEntry::open(&self.paths, &self.node)?;
        Ok(Entered { entry, lab: self.paths.lab_name().to_string(), node: self.node.clone() })
    }
}

/// A node opened for one command.
pub struct Entered {
    entry: vemu_host::NodeEntry,
    lab: String,
    node: String,
}

impl Entered {
    /// Start `cmd` inside the node with `spawn` (e.g. `Command::spawn`), with `VEMU_LAB`
    /// and `VEMU_NODE` set; its working directory stays the one `cmd` was given.
    pub fn spawn<T: Send>(
        self,
        cmd: &mut Command,
        spawn: impl FnOnce(&mut Command) -> std::io::Result<T> + Send,
    ) -> std::io::Result<T> {
        cmd.env("VEMU_LAB", &self.lab).env("VEMU_NODE", &self.node);
        self.entry.spawn(cmd, spawn)
    }
}
