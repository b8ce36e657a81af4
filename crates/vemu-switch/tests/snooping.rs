//! IGMP/MLD snooping against RFC 4541's forwarding rules (and the Linux bridge's
//! behaviour without a querier), on a virtual clock.

use vemu_switch::snoop::{
    classify, igmp_general_query, mld_general_query, Class, MEMBERSHIP_NS, QUERY_INTERVAL_NS,
    QUERY_RESPONSE_NS, STARTUP_QUERY_INTERVAL_NS,
};
use vemu_switch::{Delivery, PortConfig, Snooping, Switch, DEFAULT_AGING_NS};

const S: u64 = 1_000_000_000;

fn host_mac(n: u8) -> [u8; 6] {
    [0x02, 0, 0, 0, 0, n]
}

fn eth(dst: [u8; 6], src: [u8; 6], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&src);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

fn group_mac4(g: [u8; 4]) -> [u8; 6] {
    [0x01, 0x00, 0x5e, g[1] & 0x7f, g[2], g[3]]
}

/// An IPv4 packet from host `n` to `dst` with protocol `proto`.
fn ipv4(n: u8, dst: [u8; 4], proto: u8, payload: &[u8]) -> Vec<u8> {
    let mut ip =
        vec![0x45, 0, 0, (20 + payload.len()) as u8, 0, 0, 0, 0, 1, proto, 0, 0, 10, 0, 0, n];
    ip.extend_from_slice(&dst);
    ip.extend_from_slice(payload);
    eth(group_mac4(dst), host_mac(n), 0x0800, &ip)
}

fn igmp(n: u8, to: [u8; 4], kind: u8, group: [u8; 4]) -> Vec<u8> {
    let mut m = vec![kind, 0, 0, 0];
    m.extend_from_slice(&group);
    ipv4(n, to, 2, &m)
}

/// IGMPv3 report from host `n`: (record type, group, number of sources).
fn igmp3(n: u8, records: &[(u8, [u8; 4], u16)]) -> Vec<u8> {
    let mut m = vec![0x22, 0, 0, 0, 0, 0];
    m.extend_from_slice(&(records.len() as u16).to_be_bytes());
    for (t, g, nsrc) in records {
        m.extend_from_slice(&[*t, 0]);
        m.extend_from_slice(&nsrc.to_be_bytes());
        m.extend_from_slice(g);
        for _ in 0..*nsrc {
            m.extend_from_slice(&[10, 9, 9, 9]);
        }
    }
    ipv4(n, [224, 0, 0, 22], 2, &m)
}

fn udp4(n: u8, group: [u8; 4]) -> Vec<u8> {
    ipv4(n, group, 17, &[0; 12])
}

fn group6(last: [u8; 4]) -> [u8; 16] {
    [0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, last[0], last[1], last[2], last[3]]
}

/// An IPv6 packet from host `n` to `dst`; `hbh` puts a hop-by-hop header first.
fn ipv6(n: u8, dst: [u8; 16], next: u8, hbh: bool, payload: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    if hbh {
        body.extend_from_slice(&[next, 0, 0x05, 0x02, 0, 0, 0x01, 0x00]);
    }
    body.extend_from_slice(payload);
    let mut ip = vec![0x60, 0, 0, 0, 0, body.len() as u8, if hbh { 0 } else { next }, 1];
    ip.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, n]);
    ip.extend_from_slice(&dst);
    ip.extend_from_slice(&body);
    let mac = [0x33, 0x33, dst[12], dst[13], dst[14], dst[15]];
    eth(mac, host_mac(n), 0x86dd, &ip)
}

/// MLDv2 report from host `n`: (record type, group).
fn mld2(n: u8, records: &[(u8, [u8; 16])]) -> Vec<u8> {
    let mut m = vec![143, 0, 0, 0, 0, 0];
    m.extend_from_slice(&(records.len() as u16).to_be_bytes());
    for (t, g) in records {
        m.extend_from_slice(&[*t, 0, 0, 0]);
        m.extend_from_slice(g);
    }
    ipv6(n, group6([0, 0, 0, 0x16]), 58, true, &m)
}

fn switch(n: usize, s: Snooping) -> Switch {
    let mut sw = Switch::new(&vec![PortConfig::default(); n], DEFAULT_AGING_NS);
    sw.set_snooping(s);
    sw
}

fn send(sw: &mut Switch, now: u64, port: u32, frame: &[u8]) -> (Delivery, Vec<u32>) {
    let mut out = Vec::new();
    let d = sw.forward_frame(now, port, frame, &mut out);
    (d, out)
}

const G1: [u8; 4] = [239, 1, 1, 1];
const G2: [u8; 4] = [239, 2, 2, 2];

#[test]
fn frames_are_classified_by_what_snooping_needs() {
    assert_eq!(
        classify(&igmp(1, G1, 0x16, G1)),
        Class::Report { v6: false, joins: vec![0x01005e010101], leaves: vec![] }
    );
    assert_eq!(
        classify(&igmp(1, [224, 0, 0, 2], 0x17, G1)),
        Class::Report { v6: false, joins: vec![], leaves: vec![0x01005e010101] }
    );
    // IGMPv3: EXCLUDE {} and ALLOW joins, INCLUDE {} leaves, INCLUDE {S} joins.
    let r = igmp3(1, &[(4, G1, 0), (3, G2, 0), (1, [239, 3, 3, 3], 2), (6, [239, 4, 4, 4], 1)]);
    assert_eq!(
        classify(&r),
        Class::Report {
            v6: false,
            joins: vec![0x01005e010101, 0x01005e030303],
            leaves: vec![0x01005e020202]
        }
    );
    assert_eq!(
        classify(&ipv4(1, [224, 0, 0, 1], 2, &[0x11, 100, 0, 0, 0, 0, 0, 0])),
        Class::Query { v6: false }
    );
    assert_eq!(classify(&udp4(1, G1)), Class::Data { v6: false, group: 0x01005e010101 });
    assert_eq!(
        classify(&udp4(1, [224, 0, 0, 5])),
        Class::Flood,
        "OSPF's 224.0.0.5 reaches everyone"
    );
    let sol = group6([0xff, 0, 0, 7]);
    assert_eq!(
        classify(&mld2(1, &[(4, sol)])),
        Class::Report { v6: true, joins: vec![0x3333ff000007], leaves: vec![] }
    );
    assert_eq!(
        classify(&mld2(1, &[(3, sol)])),
        Class::Report { v6: true, joins: vec![], leaves: vec![0x3333ff000007] }
    );
    // A neighbour solicitation to a solicited-node group is data of that group.
    assert_eq!(
        classify(&ipv6(2, sol, 58, false, &[135, 0, 0, 0])),
        Class::Data { v6: true, group: 0x3333ff000007 }
    );
    assert_eq!(
        classify(&ipv6(2, group6([0, 0, 0, 1]), 58, false, &[134, 0, 0, 0])),
        Class::Flood,
        "ff02::1 reaches everyone"
    );
    assert_eq!(classify(&mld_general_query()), Class::Query { v6: true });
    assert_eq!(classify(&igmp_general_query()), Class::Query { v6: false });
    // Truncated and damaged frames never panic.
    for f in [igmp3(1, &[(4, G1, 3)]), mld2(1, &[(4, sol)])] {
        for cut in 0..f.len() {
            let _ = classify(&f[..cut]);
        }
    }
}

#[test]
fn without_a_querier_multicast_floods_as_on_the_linux_bridge() {
    let mut sw = switch(4, Snooping::On);
    assert_eq!(send(&mut sw, 0, 1, &igmp(1, G1, 0x16, G1)), (Delivery::Flood, vec![0, 2, 3]));
    assert_eq!(send(&mut sw, S, 2, &udp4(2, G1)), (Delivery::Flood, vec![0, 1, 3]));
    assert_eq!(sw.group_count(), 1, "groups are learned all the same");
}

#[test]
fn with_a_querier_groups_reach_members_and_routers_only() {
    let mut sw = switch(5, Snooping::On);
    // A multicast router on port 4 queries: it becomes a router port.
    assert_eq!(
        send(&mut sw, 0, 4, &ipv4(9, [224, 0, 0, 1], 2, &[0x11, 100, 0, 0, 0, 0, 0, 0])).0,
        Delivery::Flood
    );
    // Reports go to router ports only.
    assert_eq!(send(&mut sw, S, 1, &igmp(1, G1, 0x16, G1)), (Delivery::Multicast, vec![4]));
    assert_eq!(send(&mut sw, S, 3, &igmp3(3, &[(4, G1, 0)])), (Delivery::Multicast, vec![4]));
    // Data: members and routers, never back to the sender.
    assert_eq!(send(&mut sw, 2 * S, 2, &udp4(2, G1)), (Delivery::Multicast, vec![1, 3, 4]));
    assert_eq!(send(&mut sw, 2 * S, 1, &udp4(1, G1)), (Delivery::Multicast, vec![3, 4]));
    // A group nobody joined: routers only. Link-local control and broadcast: everyone.
    assert_eq!(send(&mut sw, 2 * S, 2, &udp4(2, G2)), (Delivery::Multicast, vec![4]));
    assert_eq!(send(&mut sw, 2 * S, 2, &udp4(2, [224, 0, 0, 5])).1, vec![0, 1, 3, 4]);
    // A leave takes the port out at once (one host per port).
    send(&mut sw, 3 * S, 1, &igmp(1, [224, 0, 0, 2], 0x17, G1));
    assert_eq!(send(&mut sw, 3 * S, 2, &udp4(2, G1)).1, vec![3, 4]);
    // A port that goes down forgets its groups.
    sw.set_port_up(3, false);
    assert_eq!(send(&mut sw, 3 * S, 2, &udp4(2, G1)).1, vec![4]);
    // Memberships end without reports; the querier's presence too: then flood again.
    send(&mut sw, 4 * S, 1, &igmp(1, G1, 0x16, G1));
    let query = ipv4(9, [224, 0, 0, 1], 2, &[0x11, 100, 0, 0, 0, 0, 0, 0]);
    send(&mut sw, 200 * S, 4, &query);
    assert_eq!(send(&mut sw, 4 * S + MEMBERSHIP_NS - 1, 2, &udp4(2, G1)).1, vec![1, 4]);
    assert_eq!(
        send(&mut sw, 4 * S + MEMBERSHIP_NS + 1, 2, &udp4(2, G1)).1,
        vec![4],
        "port 1 did not report again"
    );
    assert_eq!(
        send(&mut sw, 456 * S, 2, &udp4(2, G1)).0,
        Delivery::Flood,
        "no querier heard for 255 s"
    );
}

#[test]
fn the_switch_as_querier_keeps_start_up_chatter_off_other_ports() {
    let mut sw = switch(4, Snooping::Querier);
    let sol = |n: u8| group6([0xff, 0, 0, n]);
    // Each host reports its solicited-node group: no router port, so nobody hears it.
    for h in 0..4u8 {
        assert_eq!(
            send(&mut sw, 0, h as u32, &mld2(h, &[(4, sol(h))])),
            (Delivery::Multicast, vec![])
        );
    }
    // Address resolution reaches the one host that owns the address.
    assert_eq!(
        send(&mut sw, S, 0, &ipv6(0, sol(2), 58, false, &[135, 0, 0, 0])),
        (Delivery::Multicast, vec![2])
    );
    assert_eq!(
        send(&mut sw, S, 0, &ipv6(0, group6([0, 0, 0, 1]), 58, false, &[134, 0, 0, 0])).1,
        vec![1, 2, 3]
    );
    // IPv4 too, with no querier heard: the switch is one.
    send(&mut sw, S, 3, &igmp3(3, &[(2, G1, 0)]));
    assert_eq!(send(&mut sw, S, 0, &udp4(0, G1)), (Delivery::Multicast, vec![3]));
}

#[test]
fn the_querier_sends_general_queries_on_schedule() {
    let mut sw = switch(3, Snooping::Querier);
    sw.set_port_up(2, false);
    assert_eq!(sw.next_query_ns(), Some(0));
    let q = sw.poll_queries(0);
    assert_eq!(q.len(), 2, "IGMPv3 and MLDv2");
    assert!(q.iter().all(|(ports, _)| ports == &[0, 1]), "to the ports that are up");
    assert_eq!(q[0].1, igmp_general_query());
    assert_eq!(q[1].1, mld_general_query());
    assert!(sw.poll_queries(1).is_empty());
    assert_eq!(sw.next_query_ns(), Some(STARTUP_QUERY_INTERVAL_NS));
    assert_eq!(sw.poll_queries(STARTUP_QUERY_INTERVAL_NS).len(), 2);
    assert_eq!(sw.next_query_ns(), Some(STARTUP_QUERY_INTERVAL_NS + QUERY_INTERVAL_NS));
    assert_eq!(switch(3, Snooping::On).next_query_ns(), None);
}

/// A LAN whose members have IPv6 off (`ipv6: none`) gets IGMP queries only.
#[test]
fn a_querier_queries_only_the_families_the_lan_carries() {
    let mut sw = switch(3, Snooping::Querier);
    sw.set_query_families(true, false);
    let q = sw.poll_queries(0);
    assert_eq!(q.len(), 1);
    assert_eq!(q[0].1, igmp_general_query());
    sw.set_query_families(false, true);
    assert_eq!(
        sw.poll_queries(STARTUP_QUERY_INTERVAL_NS)
            .iter()
            .map(|(_, f)| f.clone())
            .collect::<Vec<_>>(),
        vec![mld_general_query()]
    );
}

/// A switch that starts over (its LAN comes back from the kernel's bridge) forgets the
/// memberships and floods group data until the hosts have answered its query; then it
/// snoops again with what they reported.
#[test]
fn a_switch_that_starts_over_floods_groups_until_the_hosts_have_answered() {
    let mut sw = switch(3, Snooping::Querier);
    sw.poll_queries(0);
    send(&mut sw, S, 1, &igmp(1, G1, 0x16, G1));
    assert_eq!(send(&mut sw, S, 0, &udp4(0, G1)), (Delivery::Multicast, vec![1]));
    sw.restart();
    assert_eq!(sw.group_count(), 0, "memberships forgotten");
    assert_eq!(sw.next_query_ns(), Some(0), "queries at once");
    assert_eq!(send(&mut sw, 100 * S, 0, &udp4(0, G1)).0, Delivery::Flood, "before its query");
    assert_eq!(sw.poll_queries(100 * S).len(), 2);
    assert_eq!(sw.next_query_ns(), Some(100 * S + STARTUP_QUERY_INTERVAL_NS));
    // Port 2's host (which joined meanwhile) answers; port 1's does not yet.
    send(&mut sw, 101 * S, 2, &igmp(2, G1, 0x16, G1));
    assert_eq!(
        send(&mut sw, 100 * S + QUERY_RESPONSE_NS - 1, 0, &udp4(0, G1)).0,
        Delivery::Flood,
        "hosts may still answer"
    );
    assert_eq!(
        send(&mut sw, 100 * S + QUERY_RESPONSE_NS, 0, &udp4(0, G1)),
        (Delivery::Multicast, vec![2])
    );
    // Without its own querier: flooding until a query is heard, and its answers.
    let mut sw = switch(3, Snooping::On);
    let query = ipv4(9, [224, 0, 0, 1], 2, &[0x11, 100, 0, 0, 0, 0, 0, 0]);
    send(&mut sw, 0, 2, &query);
    sw.restart();
    send(&mut sw, S, 1, &igmp(1, G1, 0x16, G1));
    assert_eq!(
        send(&mut sw, 50 * S, 0, &udp4(0, G1)).0,
        Delivery::Flood,
        "no query since the restart"
    );
    send(&mut sw, 60 * S, 2, &query);
    assert_eq!(
        send(&mut sw, 60 * S + QUERY_RESPONSE_NS, 0, &udp4(0, G1)),
        (Delivery::Multicast, vec![1, 2])
    );
}

/// Internet checksums of the queries (a host drops a query whose checksum is wrong).
#[test]
fn queries_carry_valid_checksums() {
    fn fold(data: &[&[u8]]) -> u16 {
        let mut sum: u32 = 0;
        for d in data {
            for p in d.chunks(2) {
                sum += u16::from_be_bytes([p[0], *p.get(1).unwrap_or(&0)]) as u32;
            }
        }
        while sum >> 16 != 0 {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        sum as u16
    }
    let q = igmp_general_query();
    assert_eq!(fold(&[&q[14..38]]), 0xffff, "IPv4 header");
    assert_eq!(fold(&[&q[38..]]), 0xffff, "IGMP");
    let q = mld_general_query();
    let (src, dst, mld) = (&q[22..38], &q[38..54], &q[62..]);
    assert_eq!(mld.len(), 28);
    assert_eq!(
        fold(&[src, dst, &(mld.len() as u32).to_be_bytes(), &[0, 0, 0, 58], mld]),
        0xffff,
        "ICMPv6"
    );
}

#[test]
fn snooping_off_floods_everything() {
    let mut sw = switch(3, Snooping::Off);
    send(&mut sw, 0, 2, &ipv4(9, [224, 0, 0, 1], 2, &[0x11, 100, 0, 0, 0, 0, 0, 0]));
    send(&mut sw, 0, 1, &igmp(1, G1, 0x16, G1));
    assert_eq!(send(&mut sw, S, 0, &udp4(0, G2)), (Delivery::Flood, vec![1, 2]));
    assert_eq!(sw.group_count(), 0);
}

/// A multicast router on the LAN: its PIM hellos make its port a router port (reports
/// reach it), and the switch's own querier stands down while another querier is heard.
#[test]
fn routers_are_found_by_their_hellos_and_queries() {
    let mut sw = switch(3, Snooping::Querier);
    assert_eq!(sw.poll_queries(0).len(), 2);
    assert_eq!(
        send(&mut sw, S, 2, &ipv4(9, [224, 0, 0, 13], 103, &[0x20, 0, 0, 0])).0,
        Delivery::Flood,
        "PIM hellos reach everyone"
    );
    assert_eq!(
        send(&mut sw, S, 0, &igmp(1, G1, 0x16, G1)),
        (Delivery::Multicast, vec![2]),
        "reports reach the router"
    );
    // Another IPv6 querier: the switch keeps only its IGMP queries.
    send(
        &mut sw,
        2 * S,
        1,
        &ipv6(
            7,
            group6([0, 0, 0, 1]),
            58,
            true,
            &[
                130, 0, 0, 0, 0x27, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2,
                125, 0, 0,
            ],
        ),
    );
    let q = sw.poll_queries(STARTUP_QUERY_INTERVAL_NS);
    assert_eq!(q.len(), 1);
    assert_eq!(q[0].1, igmp_general_query());
}

/// Frames are hostile input: random damage to reports, queries and data never panics
/// the classifier or the switch.
#[test]
fn damaged_frames_never_panic() {
    let seeds = [
        igmp3(1, &[(4, G1, 2), (3, G2, 0)]),
        mld2(1, &[(4, group6([0xff, 0, 0, 7])), (6, group6([0, 0, 0, 9]))]),
        igmp(1, G1, 0x16, G1),
        igmp_general_query(),
        mld_general_query(),
        udp4(1, G1),
    ];
    let mut sw = switch(4, Snooping::Querier);
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for round in 0..20_000u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let mut f = seeds[(x % seeds.len() as u64) as usize].clone();
        for k in 0..1 + (x >> 8) % 4 {
            let at = ((x >> (16 + k * 8)) as usize) % f.len();
            f[at] = (x >> (k * 5)) as u8;
        }
        if (x >> 40).is_multiple_of(3) {
            f.truncate(((x >> 44) as usize) % (f.len() + 1));
        }
        let _ = classify(&f);
        let _ = send(&mut sw, round, ((x >> 50) % 4) as u32, &f);
    }
}

/// A node joining group after group (a hostile one, or a broken program) fills the
/// membership table up to its bound, not the controller's memory; while joins are
/// being refused, group data floods so that no member misses it.
#[test]
fn the_membership_table_is_bounded() {
    let mut sw = switch(3, Snooping::Querier);
    send(&mut sw, 0, 1, &igmp(1, G1, 0x16, G1));
    for i in 0..20_000u32 {
        let g = (0xef00_0000u32 | (i + 10)).to_be_bytes();
        send(&mut sw, S, 2, &igmp(2, g, 0x16, g));
    }
    assert_eq!(
        sw.group_count(),
        vemu_switch::DEFAULT_MAX_LEARNED,
        "one group of port 1, the rest port 2's"
    );
    assert_eq!(sw.groups_refused(), 20_000 - (vemu_switch::DEFAULT_MAX_LEARNED as u64 - 1));
    assert_eq!(
        send(&mut sw, 2 * S, 0, &udp4(0, G1)),
        (Delivery::Flood, vec![1, 2]),
        "joins were missed: flood"
    );
    // The port goes away with its memberships: room again, snooping again.
    sw.set_port_up(2, false);
    assert_eq!(sw.group_count(), 1);
    assert_eq!(send(&mut sw, 3 * S, 0, &udp4(0, G1)), (Delivery::Multicast, vec![1]));
}
