//! The paths to other machines, as the core decides them: one probe per far socket for
//! all the tunnel ports that share it, the probe schedule, the datagram size and
//! underlay delay each port takes from the answers, and when a link end goes through
//! the kernel's tunnel (only while its direction may take the kernel path and the path
//! carries its frames whole).

use super::*;
use vemu_core::tunnel::{payload_for_mtu, probe_sizes, SAFE_PAYLOAD};
use vemu_core::{LEND_IDLE_NS, PROBES_EARLY, PROBE_EARLY_NS, PROBE_LATER_NS};

/// A link whose side b is on another machine: (its local port a, its tunnel port b).
fn remote_link(core: &mut Core, forward: Impairments) -> (PortId, PortId) {
    let [a, b] = core.add_link(LinkConfig {
        forward,
        reverse: imp(),
        seeds: [1, 2],
        mtu: 1500,
        kernel_path: true,
        kernel_shaper: true,
        remote: Some((1, 0)),
        spur: None,
    });
    (a, b)
}

/// What the counters of the direction toward the far side say: (datagram size in use,
/// underlay one-way delay ns, carried by the kernel).
fn toward_far(core: &Core, link: usize) -> (u64, u64, bool) {
    let st = core.counters(Target::Link(link))[0].snapshot();
    (st.path_payload_bytes, st.transit_ns, st.kernel_path)
}

fn round(core: &mut Core, now: u64) -> Vec<(PortId, usize)> {
    let mut out = Vec::new();
    core.handle_probe_timeout(now, &mut out);
    out
}

/// The routes asked of the driver: (link end, through the kernel's tunnel, split).
fn tunnel_routes(core: &mut Core) -> Vec<(PortId, bool, bool)> {
    std::iter::from_fn(|| core.poll_event())
        .filter_map(|e| match e {
            Event::TunnelRoute { port, kernel, split } => Some((port, kernel, split)),
            _ => None,
        })
        .collect()
}

#[test]
fn tunnels_to_one_far_socket_share_one_probe_and_what_it_finds() {
    let mut core = Core::new();
    let links: Vec<_> = (0..4).map(|_| remote_link(&mut core, imp())).collect();
    let jumbo = payload_for_mtu(9000, false);
    // Links 0 and 1 reach far socket 7, link 2 socket 9; link 3's is not known yet.
    for (i, far) in [Some(7), Some(7), Some(9), None].into_iter().enumerate() {
        core.add_tunnel(links[i].1, far, jumbo, false);
    }
    for i in 0..4 {
        assert_eq!(toward_far(&core, i).0, SAFE_PAYLOAD as u64);
    }
    assert_eq!(core.probe_timeout(), Some(0));
    let probes = round(&mut core, 0);
    // One probe set per known far socket: the round trip (0) and every size above the
    // safe one.
    let larger: Vec<usize> =
        probe_sizes(jumbo, false).into_iter().filter(|&s| s > SAFE_PAYLOAD).collect();
    let want: Vec<(PortId, usize)> = [links[0].1, links[2].1]
        .into_iter()
        .flat_map(|p| std::iter::once((p, 0)).chain(larger.iter().map(move |&s| (p, s))))
        .collect();
    assert_eq!(probes, want);
    // What link 0's probe finds holds for link 1 too, and for nobody else.
    core.handle_probe_answer(links[0].1, 0, 400 * US);
    core.handle_probe_answer(links[0].1, jumbo, 410 * US);
    assert_eq!(toward_far(&core, 0), (jumbo as u64, 200 * US, false));
    assert_eq!(toward_far(&core, 1), (jumbo as u64, 200 * US, false));
    assert_eq!(toward_far(&core, 2), (SAFE_PAYLOAD as u64, 0, false));
    assert_eq!(core.tunnel_payload(links[1].1), jumbo);
    // A shorter round trip is the better estimate of the underlay; a longer is not.
    core.handle_probe_answer(links[0].1, 0, 300 * US);
    core.handle_probe_answer(links[0].1, 0, 900 * US);
    assert_eq!(toward_far(&core, 1).1, 150 * US);
    // The local kernel refusing one port's datagram as too long (its interface shrank)
    // takes the whole path back to the safe size at once, the prober too.
    core.handle_too_big(links[1].1);
    for (i, &(_, tunnel)) in links[..2].iter().enumerate() {
        assert_eq!(toward_far(&core, i).0, SAFE_PAYLOAD as u64, "link {i}");
        assert_eq!(core.tunnel_payload(tunnel), SAFE_PAYLOAD);
    }
}

#[test]
fn probe_rounds_come_often_at_first_then_every_second() {
    let mut core = Core::new();
    let (_, t) = remote_link(&mut core, imp());
    assert_eq!(core.probe_timeout(), None, "no tunnel, no probes");
    core.add_tunnel(t, Some(0), payload_for_mtu(1500, false), false);
    let mut at = Vec::new();
    while let Some(due) = core.probe_timeout().filter(|&d| d < 40 * 1_000 * MS) {
        // Early calls do nothing.
        if due > 0 {
            assert!(round(&mut core, due - 1).is_empty());
        }
        assert!(!round(&mut core, due).is_empty());
        at.push(due);
    }
    let early = PROBES_EARLY as usize;
    assert!(at[..early].windows(2).all(|w| w[1] - w[0] == PROBE_EARLY_NS), "{at:?}");
    assert!(at[early - 1..].windows(2).all(|w| w[1] - w[0] == PROBE_LATER_NS), "{at:?}");
    assert_eq!(at[early], (early as u64 - 1) * PROBE_EARLY_NS + PROBE_LATER_NS);
}

#[test]
fn a_link_end_takes_the_kernel_tunnel_only_while_unimpaired_and_the_path_carries_it_whole() {
    let mut core = Core::new();
    let (a, t) = remote_link(&mut core, imp());
    let jumbo = payload_for_mtu(9000, false);
    core.add_tunnel(t, Some(0), jumbo, false);
    let needs = 1500 + 26;
    core.add_kernel_tunnel(a, t, needs);
    // Its direction is on the kernel path, but the path is not known to carry 1526 bytes:
    // no kernel tunnel yet, and the core's Path event is not the driver's business.
    let evs: Vec<Event> = std::iter::from_fn(|| core.poll_event()).collect();
    assert!(evs.iter().all(|e| !matches!(e, Event::Path { port, .. } if *port == a)), "{evs:?}");
    assert!(!evs.iter().any(|e| matches!(e, Event::TunnelRoute { .. })));
    round(&mut core, 0);
    assert_eq!(tunnel_routes(&mut core), []);
    // Answers of a smaller size than it needs change nothing; the size it needs does.
    core.handle_probe_answer(t, 1400, 200 * US);
    assert_eq!(tunnel_routes(&mut core), []);
    core.handle_probe_answer(t, jumbo, 200 * US);
    assert_eq!(tunnel_routes(&mut core), [(a, true, false)]);
    // Asked again at each round until the driver says it is done; then not.
    round(&mut core, PROBE_EARLY_NS);
    assert_eq!(tunnel_routes(&mut core), [(a, true, false)]);
    core.set_kernel_carried(a, true);
    assert!(toward_far(&core, 0).2);
    round(&mut core, 2 * PROBE_EARLY_NS);
    assert_eq!(tunnel_routes(&mut core), []);
    // The path shrinks (the local kernel refuses a datagram): back to the engine at once.
    core.handle_too_big(t);
    assert_eq!(tunnel_routes(&mut core), [(a, false, false)]);
    core.set_kernel_carried(a, false);
    core.handle_probe_answer(t, jumbo, 200 * US);
    assert_eq!(tunnel_routes(&mut core), [(a, true, false)]);
    core.set_kernel_carried(a, true);
    // An impairment needs the engine: the end leaves the kernel tunnel; without it, back.
    core.apply(Command::Patch {
        target: Target::Link(0),
        dir: 0,
        patch: ImpairmentsPatch { delay_ns: Some(MS), ..Default::default() },
    });
    assert_eq!(tunnel_routes(&mut core), [(a, false, false)]);
    core.set_kernel_carried(a, false);
    core.apply(Command::Patch {
        target: Target::Link(0),
        dir: 0,
        patch: ImpairmentsPatch { delay_ns: Some(0), ..Default::default() },
    });
    assert_eq!(tunnel_routes(&mut core), [(a, true, false)]);
}

#[test]
fn a_full_size_link_takes_the_kernel_tunnel_in_fragments_and_lends_bulk_to_the_engine() {
    let mut core = Core::new();
    let (a, t) = remote_link(&mut core, imp());
    let plain = payload_for_mtu(1500, false);
    core.add_tunnel(t, Some(0), plain, false);
    let needs = 1500 + 26;
    core.add_kernel_tunnel(a, t, needs);
    // Each round probes a datagram of what a frame needs, which only fragments carry.
    let probes = round(&mut core, 0);
    assert!(probes.contains(&(t, needs)), "{probes:?}");
    // Whole datagrams of the interface's size cross: not enough for whole frames.
    core.handle_probe_answer(t, plain, 200 * US);
    assert_eq!(tunnel_routes(&mut core), []);
    // Fragments cross: the kernel's tunnel, split.
    core.handle_probe_answer(t, needs, 200 * US);
    assert_eq!(tunnel_routes(&mut core), [(a, true, true)]);
    core.set_kernel_carried(a, true);
    let lent = |core: &Core| {
        let st = core.counters(Target::Link(0))[0].snapshot();
        (st.kernel_path, st.tunnel_lent)
    };
    assert_eq!(lent(&core), (true, false));
    // A frame the engine reads of it: the kernel lent it (super-frames came); nothing is
    // asked while frames keep coming, and it goes back after LEND_IDLE_NS without.
    core.handle_frame(MS, a, udp(300, 1));
    assert_eq!(lent(&core), (false, true));
    assert_eq!(core.probe_timeout(), Some(MS + LEND_IDLE_NS));
    core.handle_frame(30 * MS, a, udp(300, 2));
    round(&mut core, MS + LEND_IDLE_NS);
    assert_eq!(tunnel_routes(&mut core), []);
    assert_eq!(core.probe_timeout(), Some(30 * MS + LEND_IDLE_NS));
    round(&mut core, 30 * MS + LEND_IDLE_NS);
    assert_eq!(tunnel_routes(&mut core), [(a, true, true)]);
    core.set_kernel_carried(a, true);
    assert_eq!(lent(&core), (true, false));
    assert_eq!(core.probe_timeout(), Some(PROBE_EARLY_NS));
    // The underlay stops carrying fragments: MISSES_TO_SHRINK rounds without an answer
    // take it back to the engine (whose tunnel cuts frames in pieces that fit).
    let mut asked = Vec::new();
    for r in 1..=4 {
        let probes = round(&mut core, r * PROBE_EARLY_NS);
        assert!(probes.contains(&(t, needs)), "{probes:?}");
        core.handle_probe_answer(t, plain, 200 * US);
        asked.extend(tunnel_routes(&mut core));
    }
    assert_eq!(asked, [(a, false, false)]);
    core.set_kernel_carried(a, false);
    // A frame read now is the engine's own: nothing lent.
    core.handle_frame(PROBE_LATER_NS, a, udp(300, 3));
    assert_eq!(lent(&core), (false, false));
}

#[test]
fn an_ipv6_tunnel_probes_no_fragments() {
    let mut core = Core::new();
    let (a, t) = remote_link(&mut core, imp());
    core.add_tunnel(t, Some(0), payload_for_mtu(1500, true), true);
    core.add_kernel_tunnel(a, t, 1500 + 26);
    let probes = round(&mut core, 0);
    assert!(probes.iter().all(|&(_, size)| size <= payload_for_mtu(1500, true)), "{probes:?}");
    core.handle_probe_answer(t, 1500 + 26, 200 * US);
    assert_eq!(tunnel_routes(&mut core), []);
}
