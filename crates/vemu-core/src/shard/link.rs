//! Links: adding one, and choosing each direction's path (the engine, or the kernel when
//! nothing on it needs the engine).

use super::*;

impl Core {
    /// Add a link; returns the ports of its sides a and b.
    pub fn add_link(&mut self, cfg: LinkConfig) -> [PortId; 2] {
        let link = self.links.len() as u32;
        let ports =
            [self.port(Owner::Link { link, side: 0 }), self.port(Owner::Link { link, side: 1 })];
        let counters = [self.counter(), self.counter()];
        let dirs =
            [LinkDir::new(cfg.forward, cfg.seeds[0]), LinkDir::new(cfg.reverse, cfg.seeds[1])];
        let mut transit_ns = [0; 2];
        if let Some((side, t)) = cfg.remote {
            transit_ns[side.min(1)] = t;
        }
        let kernel = cfg.kernel_path.then_some([Path::Engine; 2]);
        let remote = cfg.remote.map(|(side, _)| side.min(1));
        let spur = cfg.spur.filter(|_| remote == Some(1)).map(|sp| {
            let g = match self.spurs.iter().position(|g| g.segment == sp.segment) {
                Some(g) => g,
                None => {
                    self.spurs.push(SpurGroup {
                        segment: sp.segment,
                        aging_ns: sp.aging_ns,
                        ports: Vec::new(),
                        switch: None,
                    });
                    self.spurs.len() - 1
                }
            };
            (g as u32, self.spurs[g].add(link, sp.vlan))
        });
        self.links.push(LinkState {
            ports,
            dirs,
            counters,
            mtu: cfg.mtu,
            kernel,
            kernel_shaper: cfg.kernel_shaper,
            transit_ns,
            remote,
            spur,
        });
        self.track_qos(Hop::Link(link, 0));
        self.track_qos(Hop::Link(link, 1));
        self.choose_paths(link as usize);
        ports
    }

    /// Whether each direction of link `l` needs the engine, told to the driver when that
    /// changes: a direction goes by the kernel while it has no impairment, is up and
    /// neither end is captured, and through the kernel's token bucket while the same
    /// holds but for a rate whose shaper is the kernel's. Of a link to another machine,
    /// only the direction from here, and never through a token bucket (the driver sends
    /// it through the kernel's tunnel); the other machine decides the other.
    pub(super) fn choose_paths(&mut self, l: usize) {
        let link = &self.links[l];
        let Some(now) = link.kernel else { return };
        let watched = link.ports.iter().any(|&p| self.ports[p as usize].watched);
        let want = [0, 1].map(|d| {
            match kernel_shape(&link.dirs[d], link.mtu)
                .filter(|_| link.kernel_shaper && link.remote.is_none())
            {
                _ if watched || link.remote == Some(d) => Path::Engine,
                _ if unemulated(&link.dirs[d], link.mtu) => Path::Kernel,
                Some(shape) => Path::Shaped(shape),
                None => Path::Engine,
            }
        });
        for d in 0..2 {
            if want[d] != now[d] {
                self.events.push_back(Event::Path { port: link.ports[d], path: want[d] });
                let c = &self.counters[link.counters[d] as usize];
                // (Toward another machine the driver says when the kernel carries it:
                // [`Core::set_kernel_carried`].)
                c.kernel_path.store(want[d].in_kernel() && link.remote.is_none(), Relaxed);
                c.kernel_shaper.store(matches!(want[d], Path::Shaped(_)), Relaxed);
            }
        }
        self.links[l].kernel = Some(want);
    }

    /// The direction from link end `port` (toward another machine) goes through the
    /// kernel now (`yes`), or through the engine: what its counters say.
    pub fn set_kernel_carried(&mut self, port: PortId, yes: bool) {
        self.tunnel_carried(port, yes);
        if let Some(Owner::Link { link, side }) = self.ports.get(port as usize).map(|p| p.owner) {
            let c = &self.counters[self.links[link as usize].counters[side as usize] as usize];
            c.kernel_path.store(yes, Relaxed);
            c.tunnel_lent.store(false, Relaxed);
        }
    }

    /// The MTU of the interface at link or LAN port `port` (bytes of IP packet; 0: none),
    /// which frames on its kernel path must not exceed either.
    pub fn iface_mtu(&self, port: PortId) -> u32 {
        match self.ports.get(port as usize).map(|p| p.owner) {
            Some(Owner::Link { link, .. }) => self.links[link as usize].mtu,
            Some(Owner::Member { seg, member }) => {
                self.segments[seg as usize].members[member as usize].mtu
            }
            _ => 0,
        }
    }

    /// Whether a link or LAN with a kernel path has something on the engine's path now
    /// (its driver must have the engine's devices for it); false without a kernel path.
    pub fn needs_engine(&self, target: Target) -> bool {
        match target {
            Target::Link(l) => {
                self.links[l].kernel.is_some_and(|k| !k.iter().all(|p| p.in_kernel()))
            }
            Target::Member(g, _) => self.segments[g].kernel == Some(false),
        }
    }
}
