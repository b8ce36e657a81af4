//! The paths to other machines, decided: which tunnel port probes each far socket for
//! the others, when probe rounds go, the datagram size and the underlay's one-way delay
//! each tunnel port uses (from the probes' answers and the local kernel's refusals), and
//! whether a link end with a kernel tunnel goes through it — only while its direction
//! may take the kernel path and the underlay's path carries its frames whole. The
//! driver sends and receives the probes and carries out [`Event::TunnelRoute`].

use super::*;
use crate::tunnel::{PathMtu, SAFE_PAYLOAD};

/// Probe rounds: every [`PROBE_EARLY_NS`] for the first [`PROBES_EARLY`] (the far engine
/// may start a little later), then every [`PROBE_LATER_NS`]. Half the shortest round
/// trip seen is the underlay's one-way delay, taken off the link's delay toward the far
/// side.
pub const PROBES_EARLY: u32 = 25;
pub const PROBE_EARLY_NS: u64 = 200_000_000;
pub const PROBE_LATER_NS: u64 = 1_000_000_000;

/// The tunnel ports of a shard and the link ends that may use the kernel's tunnel.
#[derive(Default)]
pub(in crate::shard) struct Tunnels {
    paths: Vec<TunnelPath>,
    /// Each tunnel port's place in `paths` (looked up for every frame a tunnel sends).
    by_port: FxHashMap<PortId, usize>,
    kernel: Vec<KernelEnd>,
    next_probe_ns: Option<u64>,
    rounds: u32,
}

/// One tunnel port's view of its path.
struct TunnelPath {
    port: PortId,
    /// The far socket (the driver's name for it), if known.
    far: Option<u64>,
    /// The path's prober (an index in `paths`): the first port to the same far socket.
    /// `None`: this port probes.
    prober: Option<usize>,
    mtu: PathMtu,
    /// The shortest round trip measured so far, ns.
    min_rtt_ns: Option<u64>,
}

/// A link end whose direction the kernel's tunnel may carry.
struct KernelEnd {
    port: PortId,
    /// The link's tunnel port (whose path it needs to carry `needs_payload` bytes).
    tunnel: PortId,
    needs_payload: usize,
    /// The core has its direction on the kernel path; the kernel's tunnel carries it.
    wants: bool,
    on: bool,
}

impl Tunnels {
    fn index(&self, port: PortId) -> Option<usize> {
        self.by_port.get(&port).copied()
    }

    fn payload(&self, port: PortId) -> Option<usize> {
        self.index(port).map(|i| self.paths[i].mtu.payload())
    }
}

impl Core {
    /// Port `port` is a tunnel port (the far side of a link, or a trunk, on another
    /// machine) to the far socket `far` — the driver's name for it: ports with the same
    /// one share the path, and the first of them probes it for all (`None`: not known,
    /// never probed). The underlay's interface carries `max_payload` bytes of UDP a
    /// datagram (`ipv6`: over IPv6).
    pub fn add_tunnel(&mut self, port: PortId, far: Option<u64>, max_payload: usize, ipv6: bool) {
        let t = &mut self.tunnels;
        let prober = far.and_then(|f| t.paths.iter().position(|p| p.far == Some(f)));
        let mtu = PathMtu::new(max_payload, ipv6);
        let payload = mtu.payload() as u64;
        t.by_port.insert(port, t.paths.len());
        t.paths.push(TunnelPath { port, far, prober, mtu, min_rtt_ns: None });
        t.next_probe_ns.get_or_insert(0);
        self.set_path_payload(port, payload);
    }

    /// The direction from link end `port` may go through the kernel's tunnel of the
    /// link's tunnel port `tunnel`, whose path must carry `needs_payload` bytes a datagram
    /// for it (a whole frame and its headers). [`Event::Path`] of `port` then says
    /// nothing to the driver; [`Event::TunnelRoute`] does.
    pub fn add_kernel_tunnel(&mut self, port: PortId, tunnel: PortId, needs_payload: usize) {
        let end = KernelEnd { port, tunnel, needs_payload, wants: false, on: false };
        self.tunnels.kernel.push(end);
    }

    /// The datagram size tunnel port `port` sends in now (bytes of UDP payload).
    pub fn tunnel_payload(&self, port: PortId) -> usize {
        self.tunnels.payload(port).unwrap_or(SAFE_PAYLOAD)
    }

    /// When the next probe round is due (none without tunnel ports).
    pub fn probe_timeout(&self) -> Option<u64> {
        self.tunnels.next_probe_ns
    }

    /// Time has reached `now`: if a probe round is due, the probes to send, each as
    /// (tunnel port, size) in `out` (size 0: the round-trip probe).
    pub fn handle_probe_timeout(&mut self, now: u64, out: &mut Vec<(PortId, usize)>) {
        if self.tunnels.next_probe_ns.is_none_or(|t| t > now) {
            return;
        }
        for i in 0..self.tunnels.paths.len() {
            let t = &mut self.tunnels.paths[i];
            if t.far.is_none() || t.prober.is_some() {
                continue;
            }
            let before = t.mtu.payload();
            out.extend(t.mtu.round().into_iter().map(|size| (t.port, size)));
            let (port, after) = (t.port, t.mtu.payload());
            if after != before {
                self.set_path_payload(port, after as u64);
                self.follow_prober(i);
            }
        }
        let t = &mut self.tunnels;
        t.rounds += 1;
        let every = if t.rounds < PROBES_EARLY { PROBE_EARLY_NS } else { PROBE_LATER_NS };
        t.next_probe_ns = Some(now + every);
        self.choose_tunnel_routes();
    }

    /// The far side answered tunnel port `port`'s probe of `size` bytes after `rtt_ns`
    /// (the underlay's round trip alone: the driver takes off how long either side held
    /// it).
    pub fn handle_probe_answer(&mut self, port: PortId, size: usize, rtt_ns: u64) {
        let Some(i) = self.tunnels.index(port) else { return };
        let t = &mut self.tunnels.paths[i];
        let mut changed = false;
        if t.min_rtt_ns.is_none_or(|m| rtt_ns < m) {
            t.min_rtt_ns = Some(rtt_ns);
            self.set_transit(port, rtt_ns / 2);
            changed = true;
        }
        // Datagrams of this size cross (larger ones: use them).
        let t = &mut self.tunnels.paths[i];
        let grew = t.mtu.answered(size);
        if grew {
            let payload = t.mtu.payload() as u64;
            self.set_path_payload(port, payload);
        }
        if changed || grew {
            self.follow_prober(i);
        }
        if grew {
            self.choose_tunnel_routes();
        }
    }

    /// The local kernel refused a datagram of tunnel port `port` as too long (the
    /// machine's own interface shrank): its path, and every port sharing it, falls back
    /// to the safe size now, and a kernel tunnel that no longer fits is left at once.
    pub fn handle_too_big(&mut self, port: PortId) {
        let Some(i) = self.tunnels.index(port) else { return };
        let t = &mut self.tunnels.paths[i];
        if !t.mtu.too_big() {
            return;
        }
        let prober = t.prober.unwrap_or(i);
        let p = &mut self.tunnels.paths[prober];
        p.mtu.too_big();
        let (prober_port, payload) = (p.port, p.mtu.payload() as u64);
        self.set_path_payload(prober_port, payload);
        self.follow_prober(prober);
        self.set_path_payload(port, payload);
        self.choose_tunnel_routes();
    }

    /// The ports whose path `prober` probes take its datagram size and round trip (and
    /// their counters the size and the underlay's one-way delay).
    fn follow_prober(&mut self, prober: usize) {
        let (mtu, rtt) = {
            let p = &self.tunnels.paths[prober];
            (p.mtu.clone(), p.min_rtt_ns)
        };
        for i in 0..self.tunnels.paths.len() {
            let t = &mut self.tunnels.paths[i];
            if t.prober != Some(prober) {
                continue;
            }
            let port = t.port;
            let payload_changed = t.mtu.payload() != mtu.payload();
            let rtt_changed = rtt.filter(|&r| t.min_rtt_ns != Some(r));
            (t.mtu, t.min_rtt_ns) = (mtu.clone(), rtt);
            if payload_changed {
                self.set_path_payload(port, mtu.payload() as u64);
            }
            if let Some(r) = rtt_changed {
                self.set_transit(port, r / 2);
            }
        }
    }

    /// Whether `port`'s direction is one a kernel tunnel may carry; if so, it wants the
    /// kernel path now (`kernel`) or not, and the routes are chosen again.
    pub(super) fn tunnel_path(&mut self, port: PortId, kernel: bool) -> bool {
        let Some(end) = self.tunnels.kernel.iter_mut().find(|k| k.port == port) else {
            return false;
        };
        end.wants = kernel;
        self.choose_tunnel_routes();
        true
    }

    /// The kernel tunnel of `port` carries its direction now, or not (the driver did
    /// what [`Event::TunnelRoute`] asked).
    pub(super) fn tunnel_carried(&mut self, port: PortId, yes: bool) {
        if let Some(end) = self.tunnels.kernel.iter_mut().find(|k| k.port == port) {
            end.on = yes;
        }
    }

    /// Each link end with a kernel tunnel goes through it while the core has its
    /// direction on the kernel path and the tunnel port's path carries its frames whole;
    /// through the engine otherwise (the engine's tunnel cuts frames into pieces that
    /// fit). Asked of the driver where that differs from what it carries out.
    fn choose_tunnel_routes(&mut self) {
        for k in 0..self.tunnels.kernel.len() {
            let end = &self.tunnels.kernel[k];
            let fits = self.tunnels.payload(end.tunnel).is_some_and(|p| p >= end.needs_payload);
            let want = end.wants && fits;
            if want != end.on {
                self.events.push_back(Event::TunnelRoute { port: end.port, kernel: want });
            }
        }
    }
}
