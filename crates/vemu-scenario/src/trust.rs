//! Whose scenario it is. The machine's owner's (`vemu up` by root) may use everything;
//! a tenant's (a Kubernetes VemuLab, `vemu up --tenant`) only its own nodes, plus what
//! an administrator allows: every feature that reads the machine's files or reaches
//! beyond the lab's nodes ([`Reach`]) is refused, naming its field, before anything is
//! read or built.

use serde::{Deserialize, Serialize};

/// A feature of scenarios that reaches beyond the lab's own nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reach {
    /// `files: {P: {from: F}}` or `{template: F}`: a file of the controller's machine
    /// copied (or rendered) into a node.
    From,
    /// `trace:` of a wireless segment: an ns-2 movement file of the controller's machine.
    Trace,
    /// `kind: host`: the machine itself in the lab.
    Host,
    /// `kind: external`: a NIC of the machine in the lab.
    External,
    /// `divert:`: the machine's own traffic through emulated paths.
    Divert,
    /// `isolation: none`: a node's processes among the machine's (they see and can
    /// signal every process of it).
    SharedPids,
}

impl Reach {
    pub const ALL: [Reach; 6] =
        [Reach::From, Reach::Trace, Reach::Host, Reach::External, Reach::Divert, Reach::SharedPids];

    /// Its name in `--tenant` lists and VemuLabPolicy's `allow`.
    pub fn name(self) -> &'static str {
        match self {
            Reach::From => "from",
            Reach::Trace => "trace",
            Reach::Host => "host",
            Reach::External => "external",
            Reach::Divert => "divert",
            Reach::SharedPids => "shared-pids",
        }
    }

    pub fn from_name(s: &str) -> Option<Reach> {
        Reach::ALL.into_iter().find(|r| r.name() == s)
    }

    /// What the feature does, for the refusal.
    fn what(self) -> &'static str {
        match self {
            Reach::From => "reads a file of the controller's machine",
            Reach::Trace => "reads a movement file of the controller's machine",
            Reach::Host => "puts the machine itself in the lab",
            Reach::External => "puts a NIC of the machine in the lab",
            Reach::Divert => "sends the machine's own traffic through the lab",
            Reach::SharedPids => "runs a node's processes among the machine's",
        }
    }
}

/// How the message of every refusal starts.
pub const REFUSED: &str = "refused in a tenant's lab";

/// Whose scenario is loaded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Trust {
    /// The machine's owner's: everything.
    #[default]
    Owner,
    /// A tenant's: its nodes, plus these.
    Tenant(Vec<Reach>),
}

impl Trust {
    /// `--tenant LIST`: `none`, or comma-separated [`Reach`] names.
    pub fn tenant(list: &str) -> Result<Trust, String> {
        if list.trim() == "none" {
            return Ok(Trust::Tenant(Vec::new()));
        }
        let mut allowed = Vec::new();
        for w in list.split(',').map(str::trim) {
            match Reach::from_name(w) {
                Some(r) => allowed.push(r),
                None => {
                    return Err(format!(
                        "'{w}' is not a feature a tenant can be allowed: none, or a list of {}",
                        Reach::ALL.map(Reach::name).join(", ")
                    ))
                }
            }
        }
        allowed.sort();
        allowed.dedup();
        Ok(Trust::Tenant(allowed))
    }

    pub fn allows(&self, r: Reach) -> bool {
        match self {
            Trust::Owner => true,
            Trust::Tenant(allowed) => allowed.contains(&r),
        }
    }

    /// Why `r` is refused, or `None` when it is allowed.
    pub(crate) fn refusal(&self, r: Reach) -> Option<String> {
        (!self.allows(r)).then(|| format!("{REFUSED}: it {} (an administrator can allow '{}': vemu up --tenant, or a VemuLabPolicy on Kubernetes)", r.what(), r.name()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenant_lists_are_read_and_bad_names_said() {
        assert_eq!(Trust::tenant("none"), Ok(Trust::Tenant(vec![])));
        assert_eq!(
            Trust::tenant("trace, from,from"),
            Ok(Trust::Tenant(vec![Reach::From, Reach::Trace]))
        );
        assert!(Trust::tenant("from,root").unwrap_err().contains("'root'"));
        assert!(
            Trust::Owner.allows(Reach::Divert)
                && !Trust::Tenant(vec![Reach::From]).allows(Reach::Divert)
        );
        for r in Reach::ALL {
            assert_eq!(Reach::from_name(r.name()), Some(r));
            assert_eq!(serde_json::to_string(&r).unwrap(), format!("\"{}\"", r.name()));
        }
    }
}
