//! Registry references of node images (`image: registry.example/frr:9`) and the policy
//! their pulls follow: what a tenant's lab may pull, and how big an image may be.

use serde::{Deserialize, Serialize};

/// How the message of every refusal of a tenant's lab starts (these and
/// [`crate::Trust`]'s).
pub const REFUSED: &str = "refused in a tenant's lab";

/// How a lab's images are pulled (made from its [`crate::Trust`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImagePolicy {
    /// A tenant's lab: the registries (`HOST[:PORT]`) its images may come from, nothing
    /// else; `None`: the owner's, any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registries: Option<Vec<String>>,
    /// The largest image, its download and its unpacked root each, bytes; `None`: no
    /// bound but [`MAX_LAYERS`] and the time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
}

/// Layers an image may have (Docker's own limit).
pub const MAX_LAYERS: usize = 127;

/// How long copying and unpacking one image may take, seconds: a tenant's, anyone's.
pub const TENANT_PULL_SECONDS: u64 = 10 * 60;
pub const OWNER_PULL_SECONDS: u64 = 60 * 60;

impl ImagePolicy {
    /// A tenant's (its pulls are held to its administrator's list).
    pub fn is_tenants(&self) -> bool {
        self.registries.is_some()
    }

    /// How long one image's pull may take.
    pub fn pull_seconds(&self) -> u64 {
        match self.is_tenants() {
            true => TENANT_PULL_SECONDS,
            false => OWNER_PULL_SECONDS,
        }
    }

    /// Why a tenant may not pull `reference` (a `docker://` reference), or `None`.
    pub fn refusal(&self, reference: &str) -> Option<String> {
        let allowed = self.registries.as_ref()?;
        let registry = registry_of(reference);
        if allowed.iter().any(|r| r.eq_ignore_ascii_case(&registry)) {
            return None;
        }
        Some(match allowed.is_empty() {
            true => format!("{}: its images may come from no registry, and this one is on '{registry}' (an administrator can list registries: vemu up --registries, or a VemuLabPolicy's 'registries' on Kubernetes)", REFUSED),
            false => format!("{}: its images may come from {} only, not from '{registry}' (an administrator can list more: vemu up --registries, or a VemuLabPolicy's 'registries' on Kubernetes)", REFUSED, allowed.join(", ")),
        })
    }
}

/// The registry (`HOST[:PORT]`) a `docker://` reference (or a bare one) names: its first
/// part when it looks like a host (has a dot or a port, or is `localhost`), else
/// Docker Hub's `docker.io`.
pub fn registry_of(reference: &str) -> String {
    let r = reference.strip_prefix("docker://").unwrap_or(reference);
    match r.split_once('/') {
        Some((first, _))
            if first.contains('.')
                || first.contains(':')
                || first == "localhost"
                || first.starts_with('[') =>
        {
            first.to_ascii_lowercase()
        }
        _ => "docker.io".to_string(),
    }
}

/// A registry as an administrator lists it, `HOST[:PORT]`: its host and port (`None`:
/// the registry's default).
pub fn registry_host_port(r: &str) -> Result<(String, Option<u16>), String> {
    let bad = || {
        format!("'{r}' is not a registry: expected HOST or HOST:PORT (e.g. registry.example:5000, 10.0.0.7:5000)")
    };
    if r.starts_with('[') {
        return Err(format!("'{r}': a registry named by an IPv6 address is not supported (skopeo cannot parse such references): give it a name (e.g. in /etc/hosts)"));
    }
    let (host, port) = match r.rsplit_once(':') {
        Some((h, p)) => (h, Some(p.parse::<u16>().map_err(|_| bad())?)),
        None => (r, None),
    };
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if host.is_empty() || host.len() > 253 || !host.split('.').all(label_ok) {
        return Err(bad());
    }
    Ok((host.to_ascii_lowercase(), port))
}

/// Check a registry reference as written (`[HOST[:PORT]/]PATH[:TAG][@DIGEST]`, the
/// distribution project's grammar): `Err` says what is wrong.
pub fn check_registry_reference(r: &str) -> Result<(), String> {
    let (rest, digest) = match r.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (r, None),
    };
    if let Some(d) = digest {
        let ok = d.split_once(':').is_some_and(|(alg, hex)| {
            !alg.is_empty()
                && alg
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+._-".contains(c))
                && hex.len() >= 32
                && hex.chars().all(|c| c.is_ascii_hexdigit())
        });
        if !ok {
            return Err(format!("'{r}': '{d}' is not a digest (ALGORITHM:HEX, e.g. sha256:…)"));
        }
    }
    let mut parts: Vec<&str> = rest.split('/').collect();
    let first = parts[0];
    let has_host = parts.len() > 1
        && (first.contains('.')
            || first.contains(':')
            || first == "localhost"
            || first.starts_with('['));
    if has_host {
        registry_host_port(first).map_err(|e| format!("'{r}': {e}"))?;
        parts.remove(0);
    }
    let last = parts.len() - 1;
    // The tag, after the last path component's colon.
    if let Some((name, tag)) = parts[last].split_once(':') {
        let tag_ok = !tag.is_empty()
            && tag.len() <= 128
            && tag.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
            && !tag.starts_with(['.', '-']);
        if !tag_ok {
            return Err(format!(
                "'{r}': '{tag}' is not a tag (letters, digits, '_', '.', '-'; at most 128)"
            ));
        }
        parts[last] = name;
    }
    for p in &parts {
        let ok = !p.is_empty()
            && p.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
            && p.starts_with(|c: char| c.is_ascii_alphanumeric())
            && p.ends_with(|c: char| c.is_ascii_alphanumeric());
        if !ok {
            return Err(format!("'{r}': '{p}' is not a repository name part (lower-case letters, digits and '.', '_', '-' between them)"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_references_registry_is_its_first_part_when_it_looks_like_a_host() {
        assert_eq!(registry_of("docker://127.0.0.1:5000/a/b:1"), "127.0.0.1:5000");
        assert_eq!(registry_of("docker://Reg.Example/frr:9"), "reg.example");
        assert_eq!(registry_of("docker://localhost/x"), "localhost");
        assert_eq!(registry_of("docker://debian:12"), "docker.io");
        assert_eq!(registry_of("docker://library/debian"), "docker.io");
        assert_eq!(registry_of("containers-storage:x"), "docker.io");
    }

    #[test]
    fn references_are_checked_by_the_registry_grammar() {
        for ok in [
            "debian:12",
            "registry.example/frr:9.1",
            "127.0.0.1:5078/vemu-test/alpha:1",
            "localhost/a_b/c-d",
            "r.example/x@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ] {
            assert_eq!(check_registry_reference(ok), Ok(()), "{ok}");
        }
        for (bad, says) in [
            ("[::1]:5078/y:1", "IPv6"),
            ("Debian:12", "repository name"),
            ("a//b", "repository name"),
            ("r.example:99999/a", "not a registry"),
            ("a:b:c", "tag"),
            ("x@md5", "digest"),
        ] {
            let e = check_registry_reference(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn a_tenant_pulls_from_listed_registries_only() {
        let owner = ImagePolicy::default();
        assert_eq!(owner.refusal("docker://anything.example/x"), None);
        let none = ImagePolicy { registries: Some(vec![]), max_bytes: Some(1) };
        assert!(none.refusal("docker://debian:12").unwrap().contains("no registry"));
        let some =
            ImagePolicy { registries: Some(vec!["reg.example:5000".into()]), max_bytes: None };
        assert_eq!(some.refusal("docker://reg.example:5000/frr:9"), None);
        let e = some.refusal("docker://127.0.0.1:5078/probe:1").unwrap();
        assert!(e.contains("'127.0.0.1:5078'") && e.contains("reg.example:5000 only"), "{e}");
        assert!(some.refusal("docker://reg.example/frr:9").is_some(), "another port");
    }
}
