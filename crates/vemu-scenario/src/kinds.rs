//! Node kinds: what a router's software needs to run in a node — one module per kind
//! behind [`Kind`], as containerlab's `nodes/` registry, so that a new kind is one file
//! and a line in [`KINDS`]. A kind turns a node's `startup-config:` into files and a
//! start command (at plan time: the rest of vemu sees ordinary `files:` and `run:`),
//! says how to tell that its software is ready, and how to save its running
//! configuration (`vemu save`).
//!
//! `linux` (the default) is a node with nothing of its own; `host` and `external` are
//! the machine and a NIC's wire (`NodeKind`), not software.

mod bird;
mod frr;

/// A file a kind puts in the node: path, text, permission bits.
pub type KindFile = (&'static str, String, u32);

/// What a kind needs and knows.
pub trait Kind: Sync {
    /// Its name in `kind:`.
    fn name(&self) -> &'static str;
    /// The files of a node of this kind, its startup configuration in them (`None`: a
    /// minimal one of the kind's own).
    fn files(&self, startup: Option<&str>) -> Vec<KindFile>;
    /// The command that starts its software (first of the node's `run` commands).
    fn start(&self) -> &'static str;
    /// A command that succeeds once its software answers.
    fn ready(&self) -> &'static str;
    /// A command that makes the running configuration its file (run before it is
    /// copied out), and that file.
    fn save(&self) -> (&'static str, &'static str);
}

/// Every kind of router software vemu knows, by name.
pub static KINDS: &[&dyn Kind] = &[&frr::Frr, &bird::Bird];

/// The kind named `name`, if vemu knows it.
pub fn kind(name: &str) -> Option<&'static dyn Kind> {
    KINDS.iter().copied().find(|k| k.name() == name)
}

/// Every name `kind:` takes, for error messages.
pub fn kind_names() -> Vec<&'static str> {
    let mut names = vec!["linux"];
    names.extend(KINDS.iter().map(|k| k.name()));
    names.extend(["host", "external"]);
    names
}
