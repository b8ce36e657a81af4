//! `kind: bird`: BIRD 2; the startup configuration is its `bird.conf`, which `birdc
//! configure` reloads — so the file is the running configuration too.

use super::{Kind, KindFile};

pub(super) struct Bird;

impl Kind for Bird {
    fn name(&self) -> &'static str {
        "bird"
    }

    fn files(&self, startup: Option<&str>) -> Vec<KindFile> {
        let conf = startup.map_or_else(
            || "protocol device {}\nprotocol direct { ipv4; ipv6; }\n".to_string(),
            str::to_string,
        );
        vec![("/etc/bird/bird.conf", conf, 0o640)]
    }

    fn start(&self) -> &'static str {
        "mkdir -p /run/bird && bird -c /etc/bird/bird.conf"
    }

    fn ready(&self) -> &'static str {
        "birdc show status | grep -q 'Daemon is up and running'"
    }

    fn save(&self) -> (&'static str, &'static str) {
        ("true", "/etc/bird/bird.conf")
    }
}
