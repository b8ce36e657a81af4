//! Bringing a share up: lay it out from the plan ([`Layout`]), then carry it out —
//! the lab's directory and diverted paths, the fast path, the plane's devices, the
//! nodes, and the engine's links, segments and tunnel sockets, waiting for `Connect`.

use super::*;

impl LocalWorker {
    /// Build this machine's share of the lab (`share`: its number in `plan.machines`
    /// and the address its tunnels use; `None`: the whole lab). Without links to other
    /// machines the share starts at once; with them it waits for [`LocalWorker::connect`],
    /// and the tunnel sockets it made are returned, as (link, address).
    pub(super) fn build_share(
        &mut self,
        plan: Plan,
        epoch: u64,
        share: Option<Share>,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Vec<(usize, SocketAddr)>> {
        let paths = LabPaths::new(&plan.name);
        let is_share = share.is_some();
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        let vxlan_port = share.as_ref().map_or(0, |s| s.vxlan_port);
        let mut layout = Layout::new(&plan, share.as_ref().map(|s| s.machine), vxlan_port, cores);
        if let Some(m) = share.as_ref().and_then(|s| plan.machines.get(s.machine)) {
            self.machine = m.name.clone();
        }
        let hosts: String = std::iter::once(
            "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n".to_string(),
        )
        .chain(plan.hosts().map(|(a, n)| format!("{a}\t{n}\n")))
        .collect();
        let local_nodes = layout.nodes.clone();
        let share_nodes: Vec<vemu_scenario::NodePlan> =
            local_nodes.iter().map(|&n| plan.nodes[n].clone()).collect();
        vemu_host::prepare_lab(&paths, &hosts, &share_nodes, plan.storage_bytes, plan.confined)?;
        self.lab = Some(paths.clone());
        let images = prepare_images(&paths, &share_nodes, &plan)?;
        mgmt_and_nat(&plan, &paths, &share_nodes)?;
        // The machine's traffic through emulated paths: the rules (in this process's
        // network namespace, the machine's) before anything else can fail, so that a
        // failed `up` removes them with the rest.
        let diverts = match share {
            None => install_diverts(&plan, &paths)?,
            Some(_) => None,
        };
        self.links_here = layout.links.clone();
        self.segs_here = layout.segments.clone();
        self.spurs_here = layout.spurs.clone();
        self.sizes = plan.segments.iter().map(|g| g.members.len()).collect();
        self.nodes = plan.nodes.iter().map(|n| n.name.clone()).collect();
        self.lab_links = plan.links.len();
        self.ifaces = share_nodes
            .iter()
            .map(|n| (n.name.clone(), n.ifaces.iter().map(|i| i.name.clone()).collect(), n.kind))
            .collect();
        // (Made before the nodes' namespaces are pinned, which it does without.)
        vemu_host::node_template(&paths)?;
        let fast = self.start_fast_path(&plan, &paths, &mut layout, vxlan_port)?;
        let (peers, names) = plane_devices(&plan, &paths, &layout, fast.is_some())?;
        // The engine's TAP devices of the links and LANs that need it from the start;
        // the others get theirs when they first do (MakeTaps).
        let impaired = |end: &PlaneEnd| layout.taps_at_start(&plan, *end);

        let tap_names = fast.as_ref().map(|_| {
            names.iter().filter(|(end, _)| impaired(end)).map(|(_, (_, t))| t.clone()).collect()
        });
        let (taps, plane_taps) =
            make_nodes(&plan, &paths, &local_nodes, &peers, tap_names, progress)?;
        if let Some(f) = &fast {
            vemu_host::plane_program(&paths, f.program(), f.egress_program())?;
        }

        // Links: hand both TAP devices of each to the engine (with the fast path, the
        // engine's own in the plane: frames reach them only while a direction needs it).
        let mut plane: HashMap<PlaneEnd, (Option<OwnedFd>, PlaneDevs)> = HashMap::new();
        if let (Some(_), Some(plane_taps)) = (&fast, plane_taps) {
            let mut plane_taps = plane_taps.into_iter();
            for (n, (end, name)) in names.iter().enumerate() {
                let veth = vemu_host::plane_index(n);
                let (tap, fd) = match impaired(end) {
                    true => plane_taps
                        .next()
                        .map(|(t, fd)| (Some(t), Some(fd)))
                        .ok_or_else(|| anyhow!("a plane device is missing"))?,
                    false => (None, None),
                };
                if let Some(t) = tap {
                    self.tap_indexes.locked().insert(name.1.clone(), t);
                }
                let e = match *end {
                    PlaneEnd::Link(l, 0) => plan.links[l].a,
                    PlaneEnd::Link(l, _) => plan.links[l].b,
                    PlaneEnd::Member(g, k) => plan.segments[g].members[k].end,
                };
                self.plane_ports.push(PlanePort {
                    port: plan.endpoint_name(e),
                    veth,
                    tap: name.1.clone(),
                });
                plane.insert(*end, (fd, PlaneDevs { veth, tap }));
            }
        }
        let mut endpoints = Vec::new();
        // One tunnel socket per engine shard (as many as the engine will run): see
        // [`Layout::shards`].
        let shards = layout.shards;
        let mut sockets: Vec<Option<std::net::UdpSocket>> = (0..shards).map(|_| None).collect();
        let mut ends = Ends { taps, plane, sockets: &mut sockets, endpoints: &mut endpoints };
        let specs = self.link_specs(&plan, &layout, share.as_ref(), &mut ends)?;
        let (segments, trunks_in) =
            self.segment_specs(&plan, &layout, share.as_ref(), &mut ends)?;
        // A node of an image runs the image's main process first, as a container engine
        // would, then its `run` commands.
        let commands = share_nodes
            .iter()
            .flat_map(|n| {
                let main = images.get(&n.name).and_then(|i| i.main_command());
                main.into_iter().chain(n.run.iter().cloned()).map(|c| (n.name.clone(), c))
            })
            .collect();
        let fast = fast.map(|path| self.fast_of(path, &paths));
        let tunnel_sockets = sockets.into_iter().map(|x| x.map(OwnedFd::from)).collect();
        let tunnel_key = match share.as_ref() {
            Some(s) => s.engine_key()?,
            None => None,
        };
        self.pending = Some(Pending {
            specs,
            segments,
            trunks_in,
            fast,
            clock: LabClock { epoch_ns: epoch },
            commands,
            log_bytes: plan.log_bytes,
            diverts,
            shards,
            tunnel_sockets,
            tunnel_key,
        });
        // A lab of this machine alone starts now; a machine's share of a lab across
        // machines when the controller says (`Connect`), even one with no tunnel (a
        // machine with no node of a small lab's: it was started twice, and the second
        // failed: "nothing is waiting to start").
        if !is_share {
            self.connect(&[], &[])?;
        }
        Ok(endpoints)
    }

    /// The engine's links here: each link with an end here (a tunnel port for the end
    /// on another machine), then each spur (a member here of a segment elsewhere, as a
    /// link toward the segment's machine).
    fn link_specs(
        &self,
        plan: &Plan,
        layout: &Layout,
        share: Option<&Share>,
        ends: &mut Ends,
    ) -> Result<Vec<LinkSpec>> {
        let here = |node: usize| layout.here(plan, node);
        let mut specs = Vec::with_capacity(self.links_here.len() + self.spurs_here.len());
        for (k, &i) in self.links_here.iter().enumerate() {
            let l = &plan.links[i];
            let mut remote = None;
            let mut take = |e: vemu_scenario::EndpointRef,
                            side: usize|
             -> Result<(Option<OwnedFd>, Option<PlaneDevs>)> {
                if let Some((fd, devs)) = ends.plane.remove(&PlaneEnd::Link(i, side)) {
                    return Ok((fd, Some(devs)));
                }
                if !here(e.node) {
                    // The far side is on another machine: a UDP socket toward it.
                    let s = share.ok_or_else(|| anyhow!("link {i} leaves this machine"))?;
                    let (addr, r) = tunnel_socket(s, i, side, layout.link_shard(k), ends.sockets)?;
                    ends.endpoints.push((i, addr));
                    remote = Some(r);
                    return Ok((None, None));
                }
                let fd = ends.taps[e.node][e.iface].take().ok_or_else(|| {
                    anyhow!("interface {} was not created", plan.endpoint_name(e))
                })?;
                Ok((Some(fd), None))
            };
            let (a, pa) = take(l.a, 0)?;
            let (b, pb) = take(l.b, 1)?;
            // An end here of a link to another machine, in the plane: the kernel's way
            // there is known when the share connects.
            let kernel_tunnel = match (remote, pa.or(pb), self.vxlan) {
                (Some(_), Some(local), Some(vxlan)) => {
                    Some(KernelTunnel { local, vxlan, remote: None })
                }
                _ => None,
            };
            specs.push(LinkSpec {
                mtu: plan.nodes[l.a.node].ifaces[l.a.iface].mtu,
                a,
                b,
                plane: pa.zip(pb).map(|(a, b)| [a, b]),
                forward: (*l.forward).clone(),
                reverse: (*l.reverse).clone(),
                seeds: link_seeds(plan, i),
                remote,
                kernel_tunnel,
                spur: None,
            });
        }
        // Members here of segments elsewhere: links toward the segment's machine (random
        // streams as the member's, below).
        for &(g, k) in &self.spurs_here {
            let seg = &plan.segments[g];
            let m = &seg.members[k];
            let s = share.ok_or_else(|| anyhow!("segment {g} leaves this machine"))?;
            let t = plan.member_tunnel(g, k);
            let (addr, remote) = tunnel_socket(s, t, 1, layout.segment_shard(g), ends.sockets)?;
            ends.endpoints.push((t, addr));
            specs.push(LinkSpec {
                mtu: plan.nodes[m.end.node].ifaces[m.end.iface].mtu,
                a: Some(ends.taps[m.end.node][m.end.iface].take().ok_or_else(|| {
                    anyhow!("interface {} was not created", plan.endpoint_name(m.end))
                })?),
                b: None,
                plane: None,
                forward: m.egress.clone(),
                reverse: m.ingress.clone(),
                seeds: member_seeds(plan, g, k),
                remote: Some(remote),
                kernel_tunnel: None,
                spur: switched_where_members_are(seg).then_some(Spur {
                    segment: g as u32,
                    vlan: m.vlan,
                    aging_ns: seg.aging_ns,
                }),
            });
        }
        Ok(specs)
    }

    /// The engine's segments here (a trunk toward each other machine with members), and
    /// the trunks that end here (bringing a segment elsewhere to its members here).
    fn segment_specs(
        &self,
        plan: &Plan,
        layout: &Layout,
        share: Option<&Share>,
        ends: &mut Ends,
    ) -> Result<(Vec<SegmentSpec>, Vec<TrunkInSpec>)> {
        let here = |node: usize| layout.here(plan, node);
        // The trunks that end here: each brings the frames of a segment elsewhere to the
        // ingress of its members here (carried out by their links' reverse directions).
        let trunks = plan.trunks();
        let mut trunks_in = Vec::new();
        if let Some(s) = share {
            for (k, &(g, _)) in trunks.iter().enumerate().filter(|(_, t)| t.1 == s.machine) {
                let t = plan.trunk_tunnel(k);
                let (addr, remote) = tunnel_socket(s, t, 1, layout.segment_shard(g), ends.sockets)?;
                ends.endpoints.push((t, addr));
                let members = self
                    .spurs_here
                    .iter()
                    .enumerate()
                    .filter(|(_, x)| x.0 == g)
                    .map(|(j, x)| (x.1 as u32, self.links_here.len() + j))
                    .collect();
                trunks_in.push(TrunkInSpec { remote, members });
            }
        }
        // Random streams: 2 per link, then 2 per segment member, all from the lab seed
        // (those of a member are its tunnel's number × 2 and the next).
        let mut segments = Vec::with_capacity(self.segs_here.len());
        for (gi, g) in plan.segments.iter().enumerate() {
            if !self.segs_here.contains(&gi) {
                continue;
            }
            let mut members = Vec::with_capacity(g.members.len());
            let mut devs = Vec::new();
            for (k, m) in g.members.iter().enumerate() {
                let e = m.end;
                let mut remote = None;
                let fd = match ends.plane.remove(&PlaneEnd::Member(gi, k)) {
                    Some((fd, d)) => {
                        devs.push(d);
                        fd
                    }
                    // A member on another machine: a UDP socket toward it.
                    None if !here(e.node) => {
                        let s = share
                            .as_ref()
                            .ok_or_else(|| anyhow!("segment {gi} leaves this machine"))?;
                        let t = plan.member_tunnel(gi, k);
                        let (addr, r) =
                            tunnel_socket(s, t, 0, layout.segment_shard(gi), ends.sockets)?;
                        ends.endpoints.push((t, addr));
                        remote = Some(r);
                        None
                    }
                    None => Some(ends.taps[e.node][e.iface].take().ok_or_else(|| {
                        anyhow!("interface {} was not created", plan.endpoint_name(e))
                    })?),
                };
                members.push(MemberSpec {
                    mtu: plan.nodes[e.node].ifaces[e.iface].mtu,
                    mac: plan.nodes[e.node].ifaces[e.iface].mac,
                    fd,
                    vlan: m.vlan,
                    egress: m.egress.clone(),
                    ingress: m.ingress.clone(),
                    seeds: member_seeds(plan, gi, k),
                    remote,
                });
            }
            let radio = g
                .wireless
                .as_ref()
                .map(|w| (w.medium.clone(), w.radios.iter().map(|r| r.start).collect()));
            let plane = (!devs.is_empty()).then_some(devs);
            // Toward each other machine with members: a trunk.
            let mut seg_trunks = Vec::new();
            for (k, &(_, m)) in trunks.iter().enumerate().filter(|(_, t)| t.0 == gi) {
                let s = share.ok_or_else(|| anyhow!("segment {gi} leaves this machine"))?;
                let t = plan.trunk_tunnel(k);
                let (addr, remote) =
                    tunnel_socket(s, t, 0, layout.segment_shard(gi), ends.sockets)?;
                ends.endpoints.push((t, addr));
                let members = g
                    .members
                    .iter()
                    .enumerate()
                    .filter(|(_, x)| plan.nodes[x.end.node].machine == m)
                    .map(|(j, _)| j)
                    .collect();
                seg_trunks.push(TrunkSpec { remote, members });
            }
            segments.push(SegmentSpec {
                members,
                capacity_bps: g.capacity_bps,
                aging_ns: g.aging_ns,
                snooping: g.snooping,
                radio,
                plane,
                trunks: seg_trunks,
                far_switching: switched_where_members_are(g),
                ipv6_off: !plan.segment_carries_ipv6(gi),
            });
        }
        Ok((segments, trunks_in))
    }

    /// The kernel fast path of this share, if it can have one (what it is, or why
    /// not, in `self.fast_path`), and the lab's VXLAN device where `layout` has ends that
    /// may cross by it (none left in `layout.crossing` if it cannot be made).
    fn start_fast_path(
        &mut self,
        plan: &Plan,
        paths: &LabPaths,
        layout: &mut Layout,
        vxlan_port: u16,
    ) -> Result<Option<Arc<FastPath>>> {
        // Nothing here it could carry is not worth a word (a lab whose every link
        // crosses machines, or one without links).
        let fast = if layout.whole.is_empty()
            && layout.lans.is_empty()
            && layout.crossing.is_empty()
        {
            self.fast_path = match plan.machines.is_empty() {
                true => "unused: the lab has no point-to-point link or plain LAN".into(),
                false => "unused: no point-to-point link has both ends on this machine, and no plain LAN is here".into(),
            };
            vemu_host::ensure_open_files(vemu_host::files_needed(plan, false))?;
            None
        } else {
            // The nodes' interfaces' far ends in the plane (see `names` below).
            match fast_path(paths, layout.plane_ends(plan).len()) {
                Ok(f) => {
                    self.fast_path = "on".into();
                    let kernel =
                        |d: &&vemu_link::Impairments| d.shaper == vemu_link::Shaper::Kernel;
                    let asks =
                        plan.links.iter().any(|l| [&*l.forward, &*l.reverse].iter().any(kernel));
                    if let (Err(why), true) = (f.shaper(), asks) {
                        eprintln!("kernel shaper unavailable ({why}): the engine shapes the directions that ask for 'shaper: kernel'");
                    }
                    let lan_asks = layout.lans.iter().any(|&g| {
                        plan.segments[g]
                            .members
                            .iter()
                            .any(|m| [&m.egress, &m.ingress].iter().any(kernel))
                    });
                    if let (Err(why), true) = (f.bridge_shaper(), lan_asks) {
                        eprintln!("kernel shaper unavailable on LAN ports ({why}): the engine switches the LANs whose ports ask for 'shaper: kernel'");
                    }
                    if !layout.crossing.is_empty() {
                        match vemu_host::plane_vxlan(paths, vxlan_port)
                            .and_then(|ix| f.route(ix, vemu_engine::Route::FromTunnel).map(|()| ix))
                        {
                            Ok(ix) => self.vxlan = Some(ix),
                            Err(e) => {
                                eprintln!("no kernel tunnel to other machines ({e:#}): the links between machines go through the engine");
                                layout.crossing.clear();
                            }
                        }
                    }
                    Some(f)
                }
                Err(why) => {
                    eprintln!("kernel fast path off ({why}): every link direction goes through the engine");
                    // Every link end then has a TAP device from the start.
                    vemu_host::ensure_open_files(vemu_host::files_needed(plan, false))?;
                    self.fast_path = format!("off: {why}");
                    None
                }
            }
        };
        Ok(fast)
    }

    /// What the engine needs of the fast path `path`: it, the plane's packet socket for
    /// input probes, and the way to make TAP devices in the plane later ([`MakeTaps`]).
    fn fast_of(&self, path: Arc<FastPath>, paths: &LabPaths) -> Fast {
        // (Without it the lab runs; only its input queues go unprobed.)
        let probe = vemu_host::plane_packet_socket(paths)
            .map_err(|e| eprintln!("vemu: {e:#}"))
            .ok()
            .map(Arc::new);
        // The engine numbers its links as `links_here`, its segments as `segs_here`.
        let (links, segs, sizes, paths, indexes) = (
            self.links_here.clone(),
            self.segs_here.clone(),
            self.sizes.clone(),
            paths.clone(),
            self.tap_indexes.clone(),
        );
        let make_taps: MakeTaps = Arc::new(move |of: TapsOf| {
            let names: Vec<String> = match of {
                TapsOf::Link(k) => {
                    let l = *links.get(k).ok_or_else(|| anyhow!("no link {k} here"))?;
                    vec![vemu_host::plane_names(l, 0).1, vemu_host::plane_names(l, 1).1]
                }
                TapsOf::Segment(k) => {
                    let g = *segs.get(k).ok_or_else(|| anyhow!("no segment {k} here"))?;
                    (0..sizes[g]).map(|m| vemu_host::plane_member_names(g, m).1).collect()
                }
                TapsOf::FanOut(shard) => vec![vemu_host::plane_fanout_name(shard)],
            };
            let made = vemu_host::plane_taps(&paths, &names)?;
            indexes.locked().extend(names.into_iter().zip(made.iter().map(|(t, _)| *t)));
            Ok(made)
        });
        Fast { path, make_taps, probe }
    }
}

/// With the fast path (`fast`), a link's interfaces and a plain LAN's are veths whose
/// peers are in the plane (a LAN's are ports of its bridge there, made here).
fn plane_devices(plan: &Plan, paths: &LabPaths, layout: &Layout, fast: bool) -> Result<PlanePeers> {
    // With the fast path, a link's interfaces and a plain LAN's are veths whose peers
    // are in the plane (a LAN's are ports of its bridge there).
    let mut peers: Vec<Vec<Option<vemu_host::PlanePeer>>> =
        plan.nodes.iter().map(|n| vec![None; n.ifaces.len()]).collect();
    // The plane's names of each link end and LAN port (veth peer, engine's TAP).
    let mut names: Vec<(PlaneEnd, (String, String))> = Vec::new();
    if fast {
        let mut bridges = HashMap::new();
        for &g in &layout.lans {
            let seg = &plan.segments[g];
            let br = vemu_host::plane_bridge(
                paths,
                g,
                seg.snooping != vemu_engine::Snooping::Off,
                seg.snooping == vemu_engine::Snooping::Querier,
                plan.segment_carries_ipv6(g),
                seg.aging_ns,
            )?;
            bridges.insert(g, br);
        }
        for end in layout.plane_ends(plan) {
            let (e, n, bridge) = match end {
                PlaneEnd::Link(l, side) => {
                    let link = &plan.links[l];
                    let e = if side == 0 { link.a } else { link.b };
                    (e, vemu_host::plane_names(l, side), None)
                }
                PlaneEnd::Member(g, k) => {
                    let e = plan.segments[g].members[k].end;
                    (e, vemu_host::plane_member_names(g, k), bridges.get(&g).cloned())
                }
            };
            peers[e.node][e.iface] = Some(vemu_host::PlanePeer {
                name: n.0.clone(),
                index: vemu_host::plane_index(names.len()),
                bridge,
            });
            names.push((end, n));
        }
    }
    Ok((peers, names))
}

/// Make the nodes `local_nodes` of `plan`, a few at a time (telling `progress` as each
/// is made), their interfaces' far ends `peers`; meanwhile the engine's TAP devices
/// `tap_names` in the plane (`None`: no fast path). The nodes' interfaces, and the
/// plane's TAP devices (index, descriptor) in the order of `tap_names`.
fn make_nodes(
    plan: &Plan,
    paths: &LabPaths,
    local_nodes: &[usize],
    peers: &[Vec<Option<vemu_host::PlanePeer>>],
    tap_names: Option<Vec<String>>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<(NodeTaps, Option<PlaneTaps>)> {
    // Nodes, a few at a time.
    let total = local_nodes.len();
    let taps: Vec<Mutex<Option<Vec<Option<OwnedFd>>>>> =
        (0..plan.nodes.len()).map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let first_error: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let plane_taps = std::thread::scope(|s| {
        // The engine's TAP devices in the plane are made meanwhile (the nodes'
        // threads spend much of their time on other things than devices).
        let plane_taps = tap_names.map(|taps| s.spawn(move || vemu_host::plane_taps(paths, &taps)));
        for _ in 0..BUILD_THREADS.min(total) {
            let tx = tx.clone();
            s.spawn(|| {
                let tx = tx;
                loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    if k >= total || first_error.locked().is_some() {
                        break;
                    }
                    let i = local_nodes[k];
                    let made = match plan.nodes[i].kind {
                        NodeKind::Host => {
                            vemu_host::create_host_node(paths, &plan.nodes[i], &peers[i])
                        }
                        NodeKind::External => vemu_host::create_external_node(&plan.nodes[i]),
                        NodeKind::Namespace => {
                            vemu_host::create_node(paths, &plan.nodes[i], &peers[i])
                        }
                    };
                    match made {
                        Ok(fds) => *taps[i].locked() = Some(fds),
                        Err(e) => {
                            let e = e.context(format!("creating node '{}'", plan.nodes[i].name));
                            first_error.locked().get_or_insert(e);
                        }
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                    let _ = tx.send(());
                }
            });
        }
        drop(tx);
        // Told at each half percent (a line to `vemu up` a node, in a 10,000-node lab,
        // woke it 10,000 times for a bar that moves by whole characters).
        let mut told = usize::MAX;
        while rx.recv().is_ok() {
            let made = done.load(Ordering::Relaxed);
            let step = made * 200 / total;
            if step != told {
                told = step;
                progress(made, total);
            }
        }
        plane_taps.map(|t| {
            t.join()
                .unwrap_or_else(|_| Err(anyhow!("the thread making the plane's devices panicked")))
        })
    });
    if let Some(e) = first_error.into_inner().unwrap() {
        return Err(e);
    }
    let plane_taps = plane_taps.transpose()?;
    let taps = taps.into_iter().map(|m| m.into_inner().unwrap().unwrap_or_default()).collect();
    Ok((taps, plane_taps))
}

/// What the engine's links and segments take their ends from while a share is laid
/// out: the nodes' TAP devices, the plane's devices, the shards' tunnel sockets (made
/// as first needed) and the tunnels' local addresses (link or tunnel, address).
struct Ends<'a> {
    taps: NodeTaps,
    plane: HashMap<PlaneEnd, (Option<OwnedFd>, PlaneDevs)>,
    sockets: &'a mut Vec<Option<std::net::UdpSocket>>,
    endpoints: &'a mut Vec<(usize, SocketAddr)>,
}

/// A node's interfaces' far ends in the plane, by node and interface (`None`: a TAP
/// device of the node's), and the plane's names of each link end and LAN port (veth
/// peer, engine's TAP) in the order of their indexes there.
type PlanePeers = (Vec<Vec<Option<vemu_host::PlanePeer>>>, Vec<(PlaneEnd, (String, String))>);

/// Each node's interfaces' descriptors (TAP devices; none for a veth), by node number.
type NodeTaps = Vec<Vec<Option<OwnedFd>>>;

/// The engine's TAP devices made in the plane: (index, descriptor) each.
type PlaneTaps = Vec<(u32, OwnedFd)>;

/// Tunnel `tunnel` (a link, a segment member: [`Plan::member_tunnel`], or a trunk)
/// whose far `side` is on another machine, carried by the tunnel socket of engine shard
/// `shard` (made the first time, in `sockets`: one UDP socket on the machine's underlay
/// address per shard, for every tunnel of that shard, whichever machine it leads to):
/// the socket's address, to hand to the far machine, and the tunnel's far end.
fn tunnel_socket(
    s: &Share,
    tunnel: usize,
    side: usize,
    shard: usize,
    sockets: &mut [Option<std::net::UdpSocket>],
) -> Result<(SocketAddr, RemoteEnd)> {
    let slot = sockets
        .get_mut(shard)
        .ok_or_else(|| anyhow!("no engine shard {shard} for tunnel {tunnel}"))?;
    if slot.is_none() {
        *slot = Some(new_tunnel_socket(s)?);
    }
    let addr = slot
        .as_ref()
        .map(|x| x.local_addr())
        .transpose()?
        .ok_or_else(|| anyhow!("no tunnel socket"))?;
    let payload = vemu_engine::tunnel::payload_for_mtu(s.underlay_mtu, s.underlay.is_ipv6());
    Ok((
        addr,
        RemoteEnd {
            side,
            link_id: tunnel as u32,
            transit_ns: 0,
            payload,
            ipv6: s.underlay.is_ipv6(),
            socket: shard,
            far: None,
        },
    ))
}

/// A UDP socket on the machine's underlay address for tunnels to other machines.
fn new_tunnel_socket(s: &Share) -> Result<std::net::UdpSocket> {
    let sock = std::net::UdpSocket::bind(SocketAddr::new(s.underlay, 0))
        .with_context(|| format!("opening a tunnel socket on {}", s.underlay))?;
    // Room for bursts while the engine is busy elsewhere (the default
    // 208 KiB holds ~60 datagrams: 4 ms at 100 Mbit/s); it serves a shard's tunnels.
    let _ = nix::sys::socket::setsockopt(
        &sock,
        nix::sys::socket::sockopt::RcvBufForce,
        &TUNNEL_SOCKET_BUFFER,
    );
    let _ = nix::sys::socket::setsockopt(
        &sock,
        nix::sys::socket::sockopt::SndBufForce,
        &TUNNEL_SOCKET_BUFFER,
    );
    // The kernel's time of arrival of each datagram: the engine measures the underlay
    // without its own wake-ups (see the driver's read_tunnels).
    let _ =
        nix::sys::socket::setsockopt(&sock, nix::sys::socket::sockopt::ReceiveTimestampns, &true);
    // Never fragmented, never sized by the kernel's path MTU cache (DF
    // set): the engine finds what the path carries by probing.
    let (level, opt) = match s.underlay.is_ipv6() {
        true => (libc::IPPROTO_IPV6, libc::IPV6_MTU_DISCOVER),
        false => (libc::IPPROTO_IP, libc::IP_MTU_DISCOVER),
    };
    let probe: libc::c_int = libc::IP_PMTUDISC_PROBE;
    // SAFETY: an int option on a socket we own.
    if unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&sock),
            level,
            opt,
            (&probe as *const libc::c_int).cast(),
            4,
        )
    } < 0
    {
        return Err(std::io::Error::last_os_error())
            .context("setting path MTU discovery on a tunnel socket");
    }
    Ok(sock)
}

/// Load the kernel fast path for a lab with links or LANs it can carry on this machine,
/// or say why not.
fn fast_path(paths: &LabPaths, dense_devices: usize) -> Result<Arc<FastPath>, String> {
    if !fast_path_wanted() {
        return Err(format!("{FAST_PATH_ENV}=off"));
    }
    vemu_host::create_plane(paths).map_err(|e| format!("{e:#}"))?;
    let ctl = vemu_host::netlink::Netlink::open_in(&paths.plane()).map_err(|e| format!("{e:#}"))?;
    let dense = u32::try_from(dense_devices)
        .map_err(|_| format!("{dense_devices} plane devices are too many"))?;
    let fast = FastPath::load(ctl, dense).map_err(|e| format!("{e:#}"))?;
    // Attached and taken off again: whether the kernel takes them is known now, while
    // the lab can still do without; they are back once the nodes are made.
    vemu_host::plane_blocks(paths)
        .and_then(|()| vemu_host::plane_program(paths, fast.program(), fast.egress_program()))
        .and_then(|()| vemu_host::plane_program_off(paths))
        .map_err(|e| format!("{e:#}"))?;
    Ok(Arc::new(fast))
}

/// Whether the members of segment `g` on each machine other than its switch's are
/// switched among themselves there ([`Spur`]): not through a shared capacity or a radio
/// channel, which only the segment's machine has.
fn switched_where_members_are(g: &vemu_scenario::SegmentPlan) -> bool {
    g.wireless.is_none() && g.capacity_bps.is_none()
}

/// Make the images of the nodes here ready (each copied and unpacked once in the
/// machine's store: [`vemu_host::images`], as the plan's policy allows) and give each
/// node its own; by node name. A tenant's images count against its lab's storage.
fn prepare_images(
    paths: &LabPaths,
    nodes: &[vemu_scenario::NodePlan],
    plan: &vemu_scenario::Plan,
) -> Result<HashMap<String, vemu_host::images::Image>> {
    let mut ready: HashMap<&str, vemu_host::images::Image> = HashMap::new();
    let mut by_node = HashMap::new();
    let mut counted = 0u64;
    for n in nodes {
        let Some(reference) = n.image.as_deref() else { continue };
        if !ready.contains_key(reference) {
            let shown = || {
                format!(
                    "node {}: image {}",
                    n.name,
                    vemu_host::images::display_reference(reference)
                )
            };
            let image =
                vemu_host::images::prepare_image(reference, &plan.images).with_context(shown)?;
            if plan.images.is_tenants() && !ready.values().any(|i| i.digest == image.digest) {
                counted += image.size_bytes;
                if counted > plan.storage_bytes {
                    return Err(anyhow::anyhow!(
                        "the lab's images take {} MiB, more than its storage ({} MiB, scenario key 'storage'): a tenant's images count against it",
                        counted >> 20,
                        plan.storage_bytes >> 20
                    ))
                    .with_context(shown);
                }
            }
            ready.insert(reference, image);
        }
        let image = ready[reference].clone();
        vemu_host::images::assign_image(paths, &n.name, &image)?;
        by_node.insert(n.name.clone(), image);
    }
    Ok(by_node)
}

/// The management network (a bridge on this machine, before its nodes' mgmt0) and the
/// NAT rules of it and of the host nodes' way out (their interfaces are made later; the
/// rules name them).
fn mgmt_and_nat(
    plan: &Plan,
    paths: &LabPaths,
    share_nodes: &[vemu_scenario::NodePlan],
) -> Result<()> {
    let mut nat_rules = Vec::new();
    if let Some(m) = plan.mgmt.filter(|_| share_nodes.iter().any(|n| !n.mgmt.is_empty())) {
        vemu_host::make_mgmt_bridge(paths, &m.addresses(0).unwrap_or_default())?;
        if let Some(v4) = m.ipv4.filter(|_| m.nat) {
            let bridge = vemu_host::mgmt_bridge_name(&paths.lab);
            nat_rules.push(vemu_host::mgmt_nat::mgmt_rule(&bridge, v4));
        }
    }
    for n in share_nodes.iter().filter(|n| n.kind == NodeKind::Host && n.nat) {
        let ifaces: Vec<&str> = n.ifaces.iter().map(|i| i.name.as_str()).collect();
        if !ifaces.is_empty() {
            nat_rules.push(vemu_host::mgmt_nat::host_rule(&ifaces));
        }
    }
    if !nat_rules.is_empty() {
        vemu_host::mgmt_nat::install(paths, &nat_rules)?;
    }
    Ok(())
}

/// The diversion rules of a lab of this machine alone and the engine's specs of them.
fn install_diverts(plan: &Plan, paths: &LabPaths) -> Result<Option<(u16, Vec<DivertSpec>)>> {
    if plan.diverts.is_empty() {
        return Ok(None);
    }
    let matches: Vec<&str> = plan.diverts.iter().map(|d| d.matches.as_str()).collect();
    let base = vemu_host::divert::install(paths, &matches, vemu_engine::divert::REINJECT_MARK)?;
    let specs = plan
        .diverts
        .iter()
        .enumerate()
        .map(|(i, d)| DivertSpec {
            name: d.name.clone(),
            forward: d.forward.clone(),
            reverse: d.reverse.clone(),
            seeds: divert_seeds(plan, i),
        })
        .collect();
    Ok(Some((base, specs)))
}
