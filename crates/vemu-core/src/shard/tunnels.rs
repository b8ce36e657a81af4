//! The paths to other machines, decided: which tunnel port probes each far socket for
//! the others, when probe rounds go, the datagram size and the underlay's one-way delay
//! each tunnel port uses (from the probes' answers and the local kernel's refusals), and
//! whether a link end with a kernel tunnel goes through it — only while its direction
//! may take the kernel path and the underlay's path carries its frames, whole or (an
//! IPv4 underlay whose interface is smaller than the link's frames) in the pieces the
//! kernel cuts its tunnel's packets into, once a probe of that size came back so. Such a
//! split route lends the direction to the engine while bulk TCP runs (see
//! [`LEND_IDLE_NS`]). The driver sends and receives the probes and carries out
//! [`Event::TunnelRoute`].

use super::*;
use crate::tunnel::{PathMtu, MISSES_TO_SHRINK, SAFE_PAYLOAD};

/// Probe rounds: every [`PROBE_EARLY_NS`] for the first [`PROBES_EARLY`] (the far engine
/// may start a little later), then every [`PROBE_LATER_NS`]. Half the shortest round
/// trip seen is the underlay's one-way delay, taken off the link's delay toward the far
/// side.
pub const PROBES_EARLY: u32 = 25;
pub const PROBE_EARLY_NS: u64 = 200_000_000;
pub const PROBE_LATER_NS: u64 = 1_000_000_000;

/// A direction the kernel's tunnel carries in pieces (its frames do not fit the
/// underlay's datagrams) is lent to the engine by the kernel's program when a GSO
/// super-frame comes (bulk TCP: the kernel's fragments cost more than the engine's
/// tunnel, which carries super-frames whole), and every later frame follows it there,
/// so that none overtakes another. The direction goes back to the kernel's tunnel once
/// the engine has read nothing of it for this long: nothing of it is in flight then.
pub const LEND_IDLE_NS: u64 = 50_000_000;

/// The tunnel ports of a shard and the link ends that may use the kernel's tunnel.
#[derive(Default)]
pub(in crate::shard) struct Tunnels {
    paths: Vec<TunnelPath>,
    /// Each tunnel port's place in `paths` (looked up for every frame a tunnel sends).
    by_port: FxHashMap<PortId, usize>,
    kernel: Vec<KernelEnd>,
    /// Each kernel end's place in `kernel` (looked up for every frame of a lent one).
    kernel_by_port: FxHashMap<PortId, usize>,
    /// The largest datagram a kernel end needs (what a probe of fragments is sized to).
    frag_size: usize,
    next_probe_ns: Option<u64>,
    /// When to look for lent directions that have been idle long enough.
    next_lend_check_ns: Option<u64>,
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
    /// The largest datagram its interface sends whole (bytes of UDP payload).
    max_payload: usize,
    ipv6: bool,
    /// The underlay carries datagrams larger than the interface sends whole, in the
    /// pieces the kernel cuts them into: a probe of that size came back, and not
    /// [`MISSES_TO_SHRINK`] rounds went by since without one.
    frags: bool,
    /// This round sent a probe of fragments; one came back.
    frag_probed: bool,
    frag_answered: bool,
    frag_misses: u32,
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
    /// The route asked for / carried out is split (its frames go in pieces, and the
    /// kernel lends the direction to the engine for bulk TCP).
    asked_split: bool,
    split: bool,
    /// Lent to the engine: when it last read a frame of it.
    lent_ns: Option<u64>,
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
        t.paths.push(TunnelPath {
            port,
            far,
            prober,
            mtu,
            min_rtt_ns: None,
            max_payload,
            ipv6,
            frags: false,
            frag_probed: false,
            frag_answered: false,
            frag_misses: 0,
        });
        t.next_probe_ns.get_or_insert(0);
        self.set_path_payload(port, payload);
    }

    /// The direction from link end `port` may go through the kernel's tunnel of the
    /// link's tunnel port `tunnel`, whose path must carry `needs_payload` bytes a datagram
    /// for it (a whole frame and its headers). [`Event::Path`] of `port` then says
    /// nothing to the driver; [`Event::TunnelRoute`] does.
    pub fn add_kernel_tunnel(&mut self, port: PortId, tunnel: PortId, needs_payload: usize) {
        let end = KernelEnd {
            port,
            tunnel,
            needs_payload,
            wants: false,
            on: false,
            asked_split: false,
            split: false,
            lent_ns: None,
        };
        let t = &mut self.tunnels;
        t.kernel_by_port.insert(port, t.kernel.len());
        t.kernel.push(end);
        t.frag_size = t.frag_size.max(needs_payload);
    }

    /// The datagram size tunnel port `port` sends in now (bytes of UDP payload).
    pub fn tunnel_payload(&self, port: PortId) -> usize {
        self.tunnels.payload(port).unwrap_or(SAFE_PAYLOAD)
    }

    /// When the next probe round is due, or a lent direction may go back to the kernel
    /// (none without tunnel ports).
    pub fn probe_timeout(&self) -> Option<u64> {
        let t = &self.tunnels;
        t.next_probe_ns.into_iter().chain(t.next_lend_check_ns).min()
    }

    /// Time has reached `now`: lent directions idle for [`LEND_IDLE_NS`] go back to the
    /// kernel's tunnel, and if a probe round is due, the probes to send, each as (tunnel
    /// port, size) in `out` (size 0: the round-trip probe; a size larger than the
    /// port's interface sends whole: a probe of fragments, to be sent without DF).
    pub fn handle_probe_timeout(&mut self, now: u64, out: &mut Vec<(PortId, usize)>) {
        if self.tunnels.next_lend_check_ns.is_some_and(|t| t <= now) {
            self.return_lent(now);
        }
        if self.tunnels.next_probe_ns.is_none_or(|t| t > now) {
            return;
        }
        let frag_size = self.tunnels.frag_size;
        for i in 0..self.tunnels.paths.len() {
            let t = &mut self.tunnels.paths[i];
            if t.far.is_none() || t.prober.is_some() {
                continue;
            }
            let before = t.mtu.payload();
            out.extend(t.mtu.round().into_iter().map(|size| (t.port, size)));
            let frags_before = t.frags;
            if t.frag_probed {
                if t.frag_answered {
                    t.frag_misses = 0;
                } else {
                    t.frag_misses += 1;
                    if t.frag_misses >= MISSES_TO_SHRINK {
                        (t.frags, t.frag_misses) = (false, 0);
                    }
                }
            }
            // (Fragments only where the kernel's tunnel needs them, over IPv4: an IPv6
            // tunnel's packets are not cut by the kernel that sends them.)
            t.frag_probed = !t.ipv6 && frag_size > t.max_payload && frag_size <= u16::MAX as usize;
            t.frag_answered = false;
            if t.frag_probed {
                out.push((t.port, frag_size));
            }
            let (port, after) = (t.port, t.mtu.payload());
            if after != before {
                self.set_path_payload(port, after as u64);
            }
            if after != before || frags_before != self.tunnels.paths[i].frags {
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
        // Datagrams of this size cross (larger ones: use them); larger than the
        // interface sends whole, they crossed in pieces (as probed, over IPv4 only).
        let t = &mut self.tunnels.paths[i];
        let (mut grew, mut frags_found) = (false, false);
        if size <= t.max_payload {
            grew = t.mtu.answered(size);
        } else if !t.ipv6 {
            frags_found = !t.frags;
            (t.frags, t.frag_answered, t.frag_misses) = (true, true, 0);
        }
        if grew {
            let payload = t.mtu.payload() as u64;
            self.set_path_payload(port, payload);
        }
        if changed || grew || frags_found {
            self.follow_prober(i);
        }
        if grew || frags_found {
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
        let (mtu, rtt, frags) = {
            let p = &self.tunnels.paths[prober];
            (p.mtu.clone(), p.min_rtt_ns, p.frags)
        };
        for i in 0..self.tunnels.paths.len() {
            let t = &mut self.tunnels.paths[i];
            if t.prober != Some(prober) {
                continue;
            }
            let port = t.port;
            let payload_changed = t.mtu.payload() != mtu.payload();
            let rtt_changed = rtt.filter(|&r| t.min_rtt_ns != Some(r));
            (t.mtu, t.min_rtt_ns, t.frags) = (mtu.clone(), rtt, frags);
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
        let Some(&k) = self.tunnels.kernel_by_port.get(&port) else { return };
        let end = &mut self.tunnels.kernel[k];
        (end.on, end.split, end.lent_ns) = (yes, yes && end.asked_split, None);
    }

    /// A frame read from link end `port`: if its direction was on a split kernel
    /// tunnel, the kernel has lent it to the engine (see [`LEND_IDLE_NS`]).
    pub(super) fn lent_frame(&mut self, port: PortId, now: u64) {
        let Some(&k) = self.tunnels.kernel_by_port.get(&port) else { return };
        let end = &mut self.tunnels.kernel[k];
        if !(end.on && end.split) {
            return;
        }
        let first = end.lent_ns.is_none();
        end.lent_ns = Some(now);
        if first {
            let check = now + LEND_IDLE_NS;
            let t = &mut self.tunnels;
            t.next_lend_check_ns = Some(t.next_lend_check_ns.map_or(check, |c| c.min(check)));
            // (What its counters say: the engines carry it now.)
            if let Owner::Link { link, side } = self.ports[port as usize].owner {
                let c = &self.counters[self.links[link as usize].counters[side as usize] as usize];
                c.kernel_path.store(false, Relaxed);
                c.tunnel_lent.store(true, Relaxed);
            }
        }
    }

    /// Lent directions the engine has read nothing of for [`LEND_IDLE_NS`] are routed
    /// anew, as they are chosen now (writing the route ends the lending).
    fn return_lent(&mut self, now: u64) {
        let mut next: Option<u64> = None;
        for end in &mut self.tunnels.kernel {
            let Some(last) = end.lent_ns else { continue };
            let back = last + LEND_IDLE_NS;
            if now >= back {
                // (Not carried as chosen until the driver says so again.)
                (end.lent_ns, end.on) = (None, false);
            } else {
                next = Some(next.map_or(back, |n| n.min(back)));
            }
        }
        self.tunnels.next_lend_check_ns = next;
        self.choose_tunnel_routes();
    }

    /// Each link end with a kernel tunnel goes through it while the core has its
    /// direction on the kernel path and the tunnel port's path carries its frames —
    /// whole, or split in pieces by the kernel where the path is known to carry those;
    /// through the engine otherwise (the engine's tunnel cuts frames into pieces that
    /// fit). Asked of the driver where that differs from what it carries out (a lent
    /// direction stays lent until it goes back by [`Core::handle_probe_timeout`], or
    /// leaves the kernel path).
    fn choose_tunnel_routes(&mut self) {
        for k in 0..self.tunnels.kernel.len() {
            let end = &self.tunnels.kernel[k];
            let Some(path) = self.tunnels.index(end.tunnel).map(|i| &self.tunnels.paths[i]) else {
                continue;
            };
            let fits = path.mtu.payload() >= end.needs_payload;
            let want = end.wants && (fits || path.frags);
            let split = want && !fits;
            let lent = end.lent_ns.is_some();
            if want != end.on || (want && split != end.split && !lent) {
                let port = end.port;
                self.tunnels.kernel[k].asked_split = split;
                self.events.push_back(Event::TunnelRoute { port, kernel: want, split });
            }
        }
    }
}
