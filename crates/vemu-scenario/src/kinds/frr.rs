//! `kind: frr`: FRRouting, started by its init script with the daemons of the common
//! routing protocols; the startup configuration is its integrated `frr.conf`.

use super::{Kind, KindFile};

pub(super) struct Frr;

/// zebra, staticd and the routing protocols' daemons (each idle without configuration).
const DAEMONS: &str = "zebra=yes
bgpd=yes
ospfd=yes
ospf6d=yes
ripd=yes
ripngd=yes
isisd=yes
bfdd=yes
staticd=yes
vtysh_enable=yes
zebra_options=\"  -A 127.0.0.1 -s 90000000\"
bgpd_options=\"   -A 127.0.0.1\"
ospfd_options=\"  -A 127.0.0.1\"
ospf6d_options=\" -A ::1\"
ripd_options=\"   -A 127.0.0.1\"
ripngd_options=\" -A ::1\"
isisd_options=\"  -A 127.0.0.1\"
bfdd_options=\"   -A 127.0.0.1\"
staticd_options=\"-A 127.0.0.1\"
";

impl Kind for Frr {
    fn name(&self) -> &'static str {
        "frr"
    }

    fn files(&self, startup: Option<&str>) -> Vec<KindFile> {
        let conf = startup.map_or_else(
            || "frr defaults traditional\nlog syslog informational\n".to_string(),
            str::to_string,
        );
        vec![
            ("/etc/frr/daemons", DAEMONS.to_string(), 0o640),
            ("/etc/frr/frr.conf", conf, 0o640),
            ("/etc/frr/vtysh.conf", "service integrated-vtysh-config\n".to_string(), 0o640),
        ]
    }

    fn start(&self) -> &'static str {
        "/usr/lib/frr/frrinit.sh start"
    }

    /// Every daemon the daemons file asks for, zebra and watchfrr answer vtysh (vtysh
    /// itself answers `show version` before any of them runs).
    fn ready(&self) -> &'static str {
        r#"ds=$(vtysh -c 'show daemons') && for d in zebra watchfrr $(sed -n 's/^\([a-z0-9]*d\)=yes$/\1/p' /etc/frr/daemons); do case " $ds " in *" $d "*) ;; *) exit 1;; esac; done"#
    }

    fn save(&self) -> (&'static str, &'static str) {
        ("vtysh -c 'write memory' >/dev/null", "/etc/frr/frr.conf")
    }
}
