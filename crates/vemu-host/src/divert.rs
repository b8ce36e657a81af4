//! The machine's traffic through emulated paths (`divert:`, GINE's diversion): an
//! nftables table in the machine's network namespace (the controller's) marks the
//! connections whose first outgoing packet matches a path's expression (conntrack mark),
//! and xtables rules (`iptables`/`ip6tables`, mangle table) queue their packets to
//! netfilter queues — outgoing ones (the connection's original direction) to the path's
//! forward queue, incoming replies to its reverse queue — where the engine holds each
//! for its emulated time, or drops it. (The queueing is xtables' NFQUEUE target because
//! kernels without nftables' `queue` statement, as this project's CI machine, still
//! have it.) The rules say `--queue-bypass`: while nothing listens on a queue (before
//! the engine starts, after a crash) packets pass as if there were no rule. `down` and
//! `clean` delete all of it, in the namespace it was made in.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

use crate::LabPaths;

/// The nftables table of a lab's diverted paths: `vemu_divert_` and the lab name in hex
/// (nftables names take no '-'; hex keeps two labs' names apart).
pub fn table_name(lab: &str) -> String {
    format!("vemu_divert_{}", lab.bytes().map(|b| format!("{b:02x}")).collect::<String>())
}

/// First netfilter queue of a lab: from a hash of its name, 32 queues (16 paths) apart,
/// in 8192 … 62591.
pub fn queue_base(lab: &str) -> u16 {
    let h = lab
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
    8192 + (h % 1700) as u16 * 32
}

/// The nftables ruleset for paths whose matches are `matches` (checked by the scenario
/// parser): path i's connections get conntrack mark `base + 2i` (only a connection with
/// none yet). Priority −175: after conntrack (−200), before xtables' mangle (−150).
pub fn ruleset(lab: &str, matches: &[&str]) -> String {
    let (t, base) = (table_name(lab), queue_base(lab) as u32);
    let mut out = format!("table inet {t} {{\n  comment \"vemu lab {lab}: the machine's traffic through emulated paths\"\n");
    out += "  chain out {\n    type filter hook output priority -175; policy accept;\n";
    for (i, m) in matches.iter().enumerate() {
        let q = base + 2 * i as u32;
        out += &format!("    ct state new ct mark 0 {m} ct mark set {q}\n");
    }
    out + "  }\n}\n"
}

/// The xtables chains of a lab (mangle table): outgoing packets and replies.
fn chains(lab: &str) -> [String; 2] {
    let h = queue_base(lab);
    [format!("VEMU_{h}_OUT"), format!("VEMU_{h}_IN")]
}

/// xtables commands (arguments after `-t mangle`) that queue the marked connections'
/// packets: path i's outgoing packets to queue `base + 2i`, its replies to `base + 2i + 1`
/// — but for the packets the engine sends again (socket mark `reinject_mark`).
pub fn queue_rules(lab: &str, paths: usize, reinject_mark: u32) -> Vec<Vec<String>> {
    let base = queue_base(lab) as u32;
    let [out, inn] = chains(lab);
    let mut cmds = vec![vec!["-N".into(), out.clone()], vec!["-N".into(), inn.clone()]];
    cmds.push(
        ["-A", &out, "-m", "mark", "--mark", &format!("{reinject_mark:#x}"), "-j", "RETURN"]
            .map(String::from)
            .to_vec(),
    );
    for i in 0..paths as u32 {
        let m = base + 2 * i;
        for (chain, dir, q) in [(&out, "ORIGINAL", m), (&inn, "REPLY", m + 1)] {
            cmds.push(
                [
                    "-A",
                    chain,
                    "-m",
                    "connmark",
                    "--mark",
                    &m.to_string(),
                    "-m",
                    "conntrack",
                    "--ctdir",
                    dir,
                    "-j",
                    "NFQUEUE",
                    "--queue-num",
                    &q.to_string(),
                    "--queue-bypass",
                ]
                .map(String::from)
                .to_vec(),
            );
        }
    }
    cmds.push(["-A", "OUTPUT", "-j", &out].map(String::from).to_vec());
    cmds.push(["-A", "INPUT", "-j", &inn].map(String::from).to_vec());
    cmds
}

/// Run `iptables` and `ip6tables` with `-t mangle` and `args`; the first failure's message.
fn xtables(args: &[String]) -> Result<()> {
    for tool in ["iptables", "ip6tables"] {
        let out =
            Command::new(tool).args(["-w", "-t", "mangle"]).args(args).output().with_context(
                || format!("running {tool} (the diverted paths need it: apt-get install iptables)"),
            )?;
        if !out.status.success() {
            bail!(
                "{tool} -t mangle {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
    }
    Ok(())
}

/// Delete a lab's xtables chains and the jumps to them (what exists of them), and the
/// mangle tables iptables-nft made for them when nothing else is left in them.
fn remove_queue_rules(lab: &str) {
    let [out, inn] = chains(lab);
    for (hook, chain) in [("OUTPUT", &out), ("INPUT", &inn)] {
        for args in [vec!["-D", hook, "-j", chain], vec!["-F", chain], vec!["-X", chain]] {
            let args: Vec<String> = args.into_iter().map(String::from).collect();
            let _ = xtables(&args);
        }
    }
    for (tool, family) in [("iptables", "ip"), ("ip6tables", "ip6")] {
        let Ok(o) = Command::new(tool).args(["-w", "-t", "mangle", "-S"]).output() else {
            continue;
        };
        let rules = String::from_utf8_lossy(&o.stdout);
        let empty = o.status.success()
            && rules.lines().all(|l| l.starts_with("-P ") && l.ends_with(" ACCEPT"));
        let nft_table = Command::new("nft")
            .args(["list", "table", family, "mangle"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if empty && nft_table {
            let _ = nft("", &["delete", "table", family, "mangle"]);
        }
    }
}

/// Run nft with `args`, `stdin` its input; its error is what it wrote.
pub(crate) fn nft(stdin: &str, args: &[&str]) -> Result<()> {
    let mut child = Command::new("nft")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context(
            "running nft (diverted paths and mgmt nat need nftables: apt-get install nftables)",
        )?;
    child.stdin.take().expect("piped").write_all(stdin.as_bytes())?;
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!("{}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// Put a lab's diversion rules in place in the calling process's network namespace
/// (pinned first, so that `down` and `clean` remove them there); packets marked
/// `reinject_mark` are the engine's and pass. Returns the first queue.
pub fn install(paths: &LabPaths, matches: &[&str], reinject_mark: u32) -> Result<u16> {
    crate::pin_host_netns(paths)?;
    let rules = ruleset(&paths.lab, matches);
    // Check first: a match nftables refuses is the scenario's error, with nothing made.
    nft(&rules, &["-c", "-f", "-"]).context("nftables refuses a divert match")?;
    nft(&rules, &["-f", "-"]).context("adding the divert rules")?;
    for args in queue_rules(&paths.lab, matches.len(), reinject_mark) {
        xtables(&args).context("adding the divert rules")?;
    }
    Ok(queue_base(&paths.lab))
}

/// Delete a lab's diversion rules, in the namespace they were made in (nothing if none).
pub(crate) fn remove(paths: &LabPaths, netns: &Path) -> Result<()> {
    if !netns.exists() {
        return Ok(());
    }
    let table = table_name(&paths.lab);
    crate::in_netns(netns, || {
        remove_queue_rules(&paths.lab);
        let listed = Command::new("nft")
            .args(["list", "table", "inet", &table])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if listed.is_ok_and(|s| s.success()) {
            nft("", &["delete", "table", "inet", &table]).context("deleting the divert rules")?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_mark_new_connections_and_queue_both_ways() {
        let r = ruleset("my-lab", &["tcp dport 443", "ip daddr 192.0.2.1"]);
        let q = queue_base("my-lab") as u32;
        assert!(r.starts_with("table inet vemu_divert_6d792d6c6162 {"), "{r}");
        assert!(r.contains(&format!("ct state new ct mark 0 tcp dport 443 ct mark set {q}\n")));
        assert!(r.contains(&format!(
            "ct state new ct mark 0 ip daddr 192.0.2.1 ct mark set {}\n",
            q + 2
        )));
        let x: Vec<String> =
            queue_rules("my-lab", 2, 0x5645_4d55).iter().map(|a| a.join(" ")).collect();
        assert_eq!(x[2], format!("-A VEMU_{q}_OUT -m mark --mark 0x56454d55 -j RETURN"));
        assert!(x.contains(&format!("-A VEMU_{q}_IN -m connmark --mark {} -m conntrack --ctdir REPLY -j NFQUEUE --queue-num {} --queue-bypass", q + 2, q + 3)), "{x:?}");
        assert_eq!(x.last().unwrap(), &format!("-A INPUT -j VEMU_{q}_IN"));
        assert!((8192..=62592 - 32).contains(&q));
        assert_ne!(queue_base("a"), queue_base("b"));
    }
}
