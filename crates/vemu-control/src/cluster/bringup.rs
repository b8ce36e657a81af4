//! Bringing a lab up across machines, in two phases: every machine builds its share
//! (nodes, devices, tunnel sockets) and says where its tunnels listen; then each is
//! told where its tunnels' far ends are (and which links the kernel's VXLAN carries)
//! and starts. A failed phase takes every share down again: never a half-built lab.
//!
//! It talks to the machines through [`Machine`], so that the phases and the rollback
//! are tested with fake agents (below) as well as real ones (`tests/machines`).

use std::net::{IpAddr, SocketAddr};

use vemu_scenario::Plan;

use super::AgentClient;
use vemu_machine::worker::{Share, WorkerReply, WorkerRequest};

/// One machine's agent, as the bring-up sees it.
pub(super) trait Machine: Sync {
    fn call(&self, lab: &str, req: &WorkerRequest) -> WorkerReply;
    /// Names it for people ("the agent at 10.0.0.2:7070").
    fn what(&self) -> String;
    /// Its underlay address: where its tunnel sockets listen.
    fn underlay_ip(&self) -> IpAddr;
}

impl Machine for AgentClient {
    fn call(&self, lab: &str, req: &WorkerRequest) -> WorkerReply {
        AgentClient::call(self, lab, req)
    }

    fn what(&self) -> String {
        AgentClient::what(self)
    }

    fn underlay_ip(&self) -> IpAddr {
        self.route.address.ip()
    }
}

/// A lab to bring up on `machines`.
pub(super) struct BringUp<'a, M> {
    pub lab: &'a str,
    pub machines: &'a [M],
    /// Each tunnel's machines (sides a and b), links first ([`Plan::tunnel_machines`]).
    pub tunnel_at: &'a [[usize; 2]],
    pub lease_s: u64,
    pub vxlan_port: u16,
    /// The lab's key of its tunnel datagrams (hex), sent to every machine.
    pub tunnel_key: String,
    /// The lab clock's reading as the orders go, ns.
    pub lab_now_ns: u64,
}

/// What the shares said in phase 1: each tunnel's two sockets, and the underlay address
/// of each machine that made the lab's VXLAN device.
struct Built {
    ends: Vec<[Option<SocketAddr>; 2]>,
    vxlan: Vec<Option<IpAddr>>,
}

impl<M: Machine> BringUp<'_, M> {
    /// Build and connect every share. What went wrong, one message per machine and
    /// phase — empty when the lab is up everywhere; otherwise every machine in
    /// `teardown` was told to take its share down.
    pub fn run(&self, plan: &Plan, clock_epoch_ns: u64, teardown: &[usize]) -> Vec<String> {
        let mut failed = match self.build(plan, clock_epoch_ns) {
            Ok(built) => self.connect(plan, &built),
            Err(failed) => failed,
        };
        if !failed.is_empty() {
            let go = WorkerRequest::Teardown;
            for r in self.on_each(teardown, |_| go.clone()) {
                if let WorkerReply::Error(e) = r {
                    failed.push(format!("and taking it down: {e}"));
                }
            }
        }
        failed
    }

    /// Send each machine of `to` its order (made by `order` from its number) side by
    /// side; their answers in that order.
    fn on_each(
        &self,
        to: &[usize],
        order: impl Fn(usize) -> WorkerRequest + Sync,
    ) -> Vec<WorkerReply> {
        std::thread::scope(|s| {
            let order = &order;
            let handles: Vec<_> = to
                .iter()
                .map(|&m| s.spawn(move || self.machines[m].call(self.lab, &order(m))))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| WorkerReply::error("a thread panicked")))
                .collect()
        })
    }

    /// Phase 1: every machine builds its share.
    fn build(&self, plan: &Plan, clock_epoch_ns: u64) -> Result<Built, Vec<String>> {
        let all: Vec<usize> = (0..self.machines.len()).collect();
        let replies = self.on_each(&all, |m| WorkerRequest::Build {
            plan: plan.clone(),
            clock_epoch_ns,
            share: Some(Share {
                machine: m,
                underlay: self.machines[m].underlay_ip(),
                underlay_mtu: 0,
                lab_now_ns: self.lab_now_ns,
                lease_s: self.lease_s,
                vxlan_port: self.vxlan_port,
                tunnel_key: Some(self.tunnel_key.clone()),
            }),
        });
        let mut built = Built {
            ends: vec![[None; 2]; self.tunnel_at.len()],
            vxlan: vec![None; self.machines.len()],
        };
        let mut failed = Vec::new();
        for (m, r) in replies.into_iter().enumerate() {
            match r {
                WorkerReply::Endpoints(eps, has_vxlan) => {
                    if has_vxlan {
                        built.vxlan[m] = Some(self.machines[m].underlay_ip());
                    }
                    for (l, addr) in eps {
                        // The socket of machine m for link l serves m's side.
                        if let Some(at) = self.tunnel_at.get(l) {
                            built.ends[l][usize::from(at[0] != m)] = Some(addr);
                        }
                    }
                }
                WorkerReply::Error(e) => failed.push(e.message),
                _ => failed.push(format!(
                    "{}: an answer that is not its tunnels",
                    self.machines[m].what()
                )),
            }
        }
        if failed.is_empty() {
            Ok(built)
        } else {
            Err(failed)
        }
    }

    /// Phase 2: each machine joins its tunnels to their far ends and starts.
    fn connect(&self, plan: &Plan, built: &Built) -> Vec<String> {
        let all: Vec<usize> = (0..self.machines.len()).collect();
        let crossing = |m: usize| {
            self.tunnel_at
                .iter()
                .enumerate()
                .filter(move |(_, at)| at[0] != at[1] && at.contains(&m))
        };
        let far = |m: usize, at: &[usize; 2]| if at[0] == m { 1 } else { 0 };
        let replies = self.on_each(&all, |m| {
            // For each tunnel of machine m: the far side's socket.
            let peers: Vec<(usize, SocketAddr)> = crossing(m)
                .filter_map(|(l, at)| built.ends[l][far(m, at)].map(|a| (l, a)))
                .collect();
            // The links of machine m whose both machines have the kernel's tunnel: the
            // far one's address (links come first in `tunnel_at`).
            let vxlan: Vec<(usize, IpAddr)> = match built.vxlan[m] {
                None => Vec::new(),
                Some(_) => crossing(m)
                    .filter(|(l, _)| *l < plan.links.len())
                    .filter_map(|(l, at)| built.vxlan[at[far(m, at)]].map(|a| (l, a)))
                    .collect(),
            };
            WorkerRequest::Connect { peers, vxlan }
        });
        replies
            .into_iter()
            .filter_map(|r| match r {
                WorkerReply::Error(e) => Some(e.message),
                _ => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use vemu_machine::worker::WorkerError;

    /// An agent that answers as a real one would, or refuses one kind of order.
    struct Fake {
        ip: IpAddr,
        /// Refuses orders whose name starts so ("Build", "Connect").
        refuse: Option<&'static str>,
        vxlan: bool,
        /// Orders received, by name, with the peers of a `Connect`.
        seen: Mutex<Vec<String>>,
    }

    impl Fake {
        fn new(last: u8) -> Fake {
            Fake {
                ip: IpAddr::from([10, 0, 0, last]),
                refuse: None,
                vxlan: false,
                seen: Mutex::default(),
            }
        }
    }

    impl Machine for Fake {
        fn call(&self, _lab: &str, req: &WorkerRequest) -> WorkerReply {
            let name = format!("{req:?}");
            let kind = name.split([' ', '{']).next().unwrap_or_default().to_string();
            let seen = match req {
                WorkerRequest::Connect { peers, vxlan } => format!("Connect {peers:?} {vxlan:?}"),
                _ => kind.clone(),
            };
            self.seen.lock().unwrap().push(seen);
            if self.refuse == Some(kind.as_str()) {
                return WorkerReply::Error(WorkerError::caller(format!(
                    "{}: no room",
                    self.what()
                )));
            }
            match req {
                WorkerRequest::Build { plan, share: Some(share), .. } => {
                    // One socket per tunnel this machine has a side of.
                    let eps = plan
                        .tunnel_machines()
                        .iter()
                        .enumerate()
                        .filter(|(_, at)| at[0] != at[1] && at.contains(&share.machine))
                        .map(|(l, _)| (l, SocketAddr::new(self.ip, 4000 + l as u16)))
                        .collect();
                    WorkerReply::Endpoints(eps, self.vxlan)
                }
                _ => WorkerReply::Done,
            }
        }

        fn what(&self) -> String {
            format!("the agent at {}", self.ip)
        }

        fn underlay_ip(&self) -> IpAddr {
            self.ip
        }
    }

    const THREE: &str = "machines: {m1: 10.0.0.1, m2: 10.0.0.2, m3: 10.0.0.3}\nnodes: {a: {machine: m1}, b: {machine: m2}, c: {machine: m3}, d: {machine: m1}}\nlinks:\n  - endpoints: [a, b]\n  - endpoints: [b, c]\n  - endpoints: [a, d]\n";

    fn bring_up(machines: &[Fake]) -> Vec<String> {
        let plan = vemu_scenario::load_str(THREE, "t.yaml", "t", Some("unit-bringup")).unwrap();
        let tunnel_at = plan.tunnel_machines();
        let up = BringUp {
            lab: "unit-bringup",
            machines,
            tunnel_at: &tunnel_at,
            lease_s: 30,
            vxlan_port: 0,
            tunnel_key: "00".repeat(32),
            lab_now_ns: 0,
        };
        up.run(&plan, 0, &[0, 1, 2])
    }

    fn seen(f: &Fake) -> Vec<String> {
        f.seen.lock().unwrap().clone()
    }

    #[test]
    fn each_machine_is_told_the_far_ends_of_its_own_tunnels() {
        let machines = [Fake::new(1), Fake::new(2), Fake::new(3)];
        assert_eq!(bring_up(&machines), Vec::<String>::new());
        // a:b crosses m1-m2 (tunnel 0), b:c m2-m3 (tunnel 1); a:d stays on m1.
        assert_eq!(seen(&machines[0]), ["Build", "Connect [(0, 10.0.0.2:4000)] []"]);
        assert_eq!(
            seen(&machines[1]),
            ["Build", "Connect [(0, 10.0.0.1:4000), (1, 10.0.0.3:4001)] []"]
        );
        assert_eq!(seen(&machines[2]), ["Build", "Connect [(1, 10.0.0.2:4001)] []"]);
    }

    #[test]
    fn the_kernel_tunnel_joins_links_whose_both_machines_have_it() {
        let mut machines = [Fake::new(1), Fake::new(2), Fake::new(3)];
        machines[0].vxlan = true;
        machines[1].vxlan = true;
        assert_eq!(bring_up(&machines), Vec::<String>::new());
        // a:b (m1-m2) both have it; b:c does not (m3 has none), nor does m3 learn any.
        assert_eq!(seen(&machines[0])[1], "Connect [(0, 10.0.0.2:4000)] [(0, 10.0.0.2)]");
        assert_eq!(
            seen(&machines[1])[1],
            "Connect [(0, 10.0.0.1:4000), (1, 10.0.0.3:4001)] [(0, 10.0.0.1)]"
        );
        assert_eq!(seen(&machines[2])[1], "Connect [(1, 10.0.0.2:4001)] []");
    }

    #[test]
    fn a_share_that_cannot_be_built_takes_every_share_down_and_connects_none() {
        let mut machines = [Fake::new(1), Fake::new(2), Fake::new(3)];
        machines[1].refuse = Some("Build");
        let failed = bring_up(&machines);
        assert_eq!(failed, ["the agent at 10.0.0.2: no room"]);
        for m in &machines {
            assert_eq!(seen(m), ["Build", "Teardown"], "{}", m.what());
        }
    }

    #[test]
    fn a_share_that_cannot_connect_takes_every_share_down() {
        let mut machines = [Fake::new(1), Fake::new(2), Fake::new(3)];
        machines[2].refuse = Some("Connect");
        let failed = bring_up(&machines);
        assert_eq!(failed, ["the agent at 10.0.0.3: no room"]);
        for m in &machines {
            let s = seen(m);
            assert_eq!((s.len(), s[0].as_str(), s[2].as_str()), (3, "Build", "Teardown"));
        }
    }

    #[test]
    fn a_share_that_cannot_go_says_so_beside_the_first_failure() {
        let mut machines = [Fake::new(1), Fake::new(2), Fake::new(3)];
        machines[0].refuse = Some("Build");
        machines[2].refuse = Some("Teardown");
        let failed = bring_up(&machines);
        assert_eq!(
            failed,
            [
                "the agent at 10.0.0.1: no room",
                "and taking it down: the agent at 10.0.0.3: no room"
            ]
        );
    }
}
