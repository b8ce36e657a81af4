//! Whose scenario it is. The machine's owner's (`vemu up` by root) may use everything;
//! a tenant's (a Kubernetes VemuLab, `vemu up --tenant`) only its own nodes, plus what
//! an administrator allows: every feature that reads the machine's files or reaches
//! beyond the lab's nodes ([`Reach`]) is refused, naming its field, before anything is
//! read or built.

use serde::{Deserialize, Serialize};

use crate::images::REFUSED;

/// A feature of scenarios that reaches beyond the lab's own nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reach {
    /// `files: {P: {from: F}}` or `{template: F}`: a file of the controller's machine
    /// copied (or rendered) into a node.
    From,
    /// `trace:` of a wireless segment (an ns-2 movement file), or a delay file
    /// (`delay: {measured: F}`, `distribution: {table: F}`): a file of the controller's machine.
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

/// Whose scenario is loaded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Trust {
    /// The machine's owner's: everything.
    #[default]
    Owner,
    /// A tenant's: its nodes, plus what its administrator allows.
    Tenant(Tenant),
}

/// What an administrator allows a tenant beyond its own nodes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tenant {
    /// Features that reach beyond the lab.
    pub allow: Vec<Reach>,
    /// The registries its images may come from, `HOST[:PORT]` as the administrator
    /// wrote them (`vemu up --registries`, VemuLabPolicy `registries`); none: no image.
    pub registries: Vec<String>,
    /// The largest image it may use, compressed and unpacked (each), bytes
    /// ([`DEFAULT_TENANT_IMAGE_BYTES`] unless the administrator says otherwise).
    pub image_max_bytes: u64,
}

/// The largest image a tenant may use unless its administrator says otherwise: 4 GiB
/// downloaded, 4 GiB unpacked (and never more than its lab's storage).
pub const DEFAULT_TENANT_IMAGE_BYTES: u64 = 4 << 30;

impl Trust {
    /// `--tenant LIST`: `none`, or comma-separated [`Reach`] names (no registry).
    pub fn tenant(list: &str) -> Result<Trust, String> {
        let mut t = Tenant { image_max_bytes: DEFAULT_TENANT_IMAGE_BYTES, ..Tenant::default() };
        if list.trim() == "none" {
            return Ok(Trust::Tenant(t));
        }
        for w in list.split(',').map(str::trim) {
            match Reach::from_name(w) {
                Some(r) => t.allow.push(r),
                None => {
                    return Err(format!(
                        "'{w}' is not a feature a tenant can be allowed: none, or a list of {}",
                        Reach::ALL.map(Reach::name).join(", ")
                    ))
                }
            }
        }
        t.allow.sort();
        t.allow.dedup();
        Ok(Trust::Tenant(t))
    }

    /// A tenant's allowed features as a `--tenant` list (`none` when there is none).
    pub fn tenant_list(&self) -> String {
        match self {
            Trust::Tenant(t) if !t.allow.is_empty() => {
                t.allow.iter().map(|r| r.name()).collect::<Vec<_>>().join(",")
            }
            _ => "none".into(),
        }
    }

    /// A tenant allowed the registries of `list` (`HOST[:PORT]`, comma-separated) too.
    pub fn with_registries(self, list: &str) -> Result<Trust, String> {
        let Trust::Tenant(mut t) = self else {
            return Err("registries are listed for a tenant's lab only (with --tenant)".into());
        };
        for r in list.split(',').map(str::trim).filter(|r| !r.is_empty()) {
            crate::images::registry_host_port(r)?;
            if !t.registries.iter().any(|x| x == r) {
                t.registries.push(r.to_string());
            }
        }
        Ok(Trust::Tenant(t))
    }

    /// A tenant whose images may be at most `bytes` (compressed and unpacked, each).
    pub fn with_image_max(self, bytes: u64) -> Result<Trust, String> {
        match self {
            Trust::Tenant(t) => Ok(Trust::Tenant(Tenant { image_max_bytes: bytes, ..t })),
            Trust::Owner => {
                Err("an image size limit is set for a tenant's lab only (with --tenant)".into())
            }
        }
    }

    pub fn allows(&self, r: Reach) -> bool {
        match self {
            Trust::Owner => true,
            Trust::Tenant(t) => t.allow.contains(&r),
        }
    }

    /// Why `r` is refused, or `None` when it is allowed.
    pub(crate) fn refusal(&self, r: Reach) -> Option<String> {
        (!self.allows(r)).then(|| format!("{REFUSED}: it {} (an administrator can allow '{}': vemu up --tenant, or a VemuLabPolicy on Kubernetes)", r.what(), r.name()))
    }

    /// How the lab's images are pulled: any (the owner's), or as the tenant's
    /// administrator allows.
    pub fn image_policy(&self) -> crate::ImagePolicy {
        match self {
            Trust::Owner => crate::ImagePolicy::default(),
            Trust::Tenant(t) => crate::ImagePolicy {
                registries: Some(t.registries.clone()),
                max_bytes: Some(t.image_max_bytes),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenant_lists_are_read_and_bad_names_said() {
        let tenant = |allow: Vec<Reach>| {
            Trust::Tenant(Tenant {
                allow,
                registries: vec![],
                image_max_bytes: DEFAULT_TENANT_IMAGE_BYTES,
            })
        };
        assert_eq!(Trust::tenant("none"), Ok(tenant(vec![])));
        assert_eq!(Trust::tenant("trace, from,from"), Ok(tenant(vec![Reach::From, Reach::Trace])));
        assert_eq!(tenant(vec![Reach::From, Reach::Trace]).tenant_list(), "from,trace");
        assert!(Trust::tenant("from,root").unwrap_err().contains("'root'"));
        assert!(
            Trust::Owner.allows(Reach::Divert) && !tenant(vec![Reach::From]).allows(Reach::Divert)
        );
        let t = tenant(vec![]).with_registries("reg.example:5000, 127.0.0.1:5000").unwrap();
        assert_eq!(
            t.image_policy().registries,
            Some(vec!["reg.example:5000".to_string(), "127.0.0.1:5000".to_string()])
        );
        assert!(tenant(vec![]).with_registries("reg.example/x").is_err());
        assert!(Trust::Owner.with_registries("reg.example").is_err());
        assert_eq!(Trust::Owner.image_policy().registries, None);
        for r in Reach::ALL {
            assert_eq!(Reach::from_name(r.name()), Some(r));
            assert_eq!(serde_json::to_string(&r).unwrap(), format!("\"{}\"", r.name()));
        }
    }
}
