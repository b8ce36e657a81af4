//! A lab's way out through the machine: the nodes' IPv4 addresses masqueraded as the
//! machine's where their packets leave it by another interface than the lab's — the
//! management bridge (`mgmt: {nat: true}`) or the host node's interfaces (`kind: host`
//! with `nat: true`, Mininet's NAT) — an nftables table of the lab's own in the
//! machine's network namespace, and the machine forwarding IPv4 while a lab needs it.
//!
//! Forwarding is the machine's setting (`net.ipv4.ip_forward`): the first lab that needs
//! it notes what it was (`/run/vemu/ip_forward.before`), and the last one to go puts it
//! back. IPv6 is not forwarded: turning it on would stop the machine accepting router
//! advertisements on its own interfaces.

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, Result};

use crate::divert::nft;
use crate::{LabPaths, STATE_DIR};

const FORWARD: &str = "/proc/sys/net/ipv4/ip_forward";

/// The nftables table of a lab's management NAT: `vemu_mgmt_` and the lab name in hex.
pub fn table_name(lab: &str) -> String {
    format!("vemu_mgmt_{}", lab.bytes().map(|b| format!("{b:02x}")).collect::<String>())
}

/// The management network's rule: `subnet`'s packets leaving by any interface but
/// `bridge` take the machine's address.
pub fn mgmt_rule(bridge: &str, subnet: ipnet::Ipv4Net) -> String {
    format!("ip saddr {subnet} oifname != \"{bridge}\" masquerade")
}

/// The host node's rule: packets that arrived on one of `ifaces` (the lab's side of the
/// machine) and leave by another interface take the machine's address.
pub fn host_rule(ifaces: &[&str]) -> String {
    let set: Vec<String> = ifaces.iter().map(|i| format!("\"{i}\"")).collect();
    let set = set.join(", ");
    format!("iifname {{ {set} }} oifname != {{ {set} }} masquerade")
}

/// The lab's table with `rules` in its postrouting chain.
pub fn ruleset(lab: &str, rules: &[String]) -> String {
    let rules: String = rules.iter().map(|r| format!("    {r}\n")).collect();
    format!(
        "table ip {t} {{\n  comment \"vemu lab {lab}: its way out through the machine\"\n  chain out {{\n    type nat hook postrouting priority srcnat; policy accept;\n{rules}  }}\n}}\n",
        t = table_name(lab)
    )
}

/// Whether nftables has `table` (family ip) here.
fn has_table(table: &str) -> bool {
    Command::new("nft")
        .args(["list", "table", "ip", table])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Put the lab's NAT in place in the calling process's network namespace (pinned
/// first, so that `down` and `clean` remove it there) and turn IPv4 forwarding on.
pub fn install(paths: &LabPaths, rules: &[String]) -> Result<()> {
    crate::pin_host_netns(paths)?;
    nft(&ruleset(&paths.lab, rules), &["-f", "-"]).context("adding the lab's NAT rules")?;
    std::fs::create_dir_all(STATE_DIR)?;
    let _lock = crate::lock::lock_file(&Path::new(STATE_DIR).join("ip_forward.lock"))?;
    let before = Path::new(STATE_DIR).join("ip_forward.before");
    let now = std::fs::read_to_string(FORWARD).context("reading net.ipv4.ip_forward")?;
    if now.trim() != "1" && !before.exists() {
        std::fs::write(&before, now.trim()).context("noting net.ipv4.ip_forward")?;
    }
    std::fs::write(FORWARD, "1").context("turning IPv4 forwarding on (mgmt nat)")
}

/// Delete the lab's NAT, in the namespace it was made in (nothing if none), and put
/// IPv4 forwarding back as it was when no other lab's NAT remains.
pub(crate) fn remove(paths: &LabPaths, netns: &Path) -> Result<()> {
    if !netns.exists() {
        return Ok(());
    }
    let table = table_name(&paths.lab);
    crate::in_netns(netns, || {
        if !has_table(&table) {
            return Ok(());
        }
        nft("", &["delete", "table", "ip", &table])
            .context("deleting the management network's NAT rules")?;
        let _lock = crate::lock::lock_file(&Path::new(STATE_DIR).join("ip_forward.lock"))?;
        let before = Path::new(STATE_DIR).join("ip_forward.before");
        let listed = Command::new("nft").args(["list", "tables", "ip"]).output()?;
        let others = String::from_utf8_lossy(&listed.stdout).contains("vemu_mgmt_");
        if let (false, Ok(v)) = (others, std::fs::read_to_string(&before)) {
            std::fs::write(FORWARD, v.trim()).context("putting net.ipv4.ip_forward back")?;
            std::fs::remove_file(&before)?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ruleset_masquerades_the_subnet_leaving_by_another_interface() {
        let rules = [
            mgmt_rule("vmb0123456789", "172.20.20.0/24".parse().unwrap()),
            host_rule(&["nat0-eth0", "vh-lab0"]),
        ];
        let r = ruleset("lab-1", &rules);
        assert!(r.starts_with("table ip vemu_mgmt_6c61622d31 {"), "{r}");
        assert!(r.contains("ip saddr 172.20.20.0/24 oifname != \"vmb0123456789\" masquerade"));
        assert!(r.contains("iifname { \"nat0-eth0\", \"vh-lab0\" } oifname != { \"nat0-eth0\", \"vh-lab0\" } masquerade"), "{r}");
    }
}
