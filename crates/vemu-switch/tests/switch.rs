use vemu_switch::{is_group, mac, Forward, PortConfig, Switch, DEFAULT_AGING_NS};

const BCAST: u64 = 0xffff_ffff_ffff;

fn m(n: u64) -> u64 {
    0x0200_0000_0000 | n
}

fn targets(f: Forward) -> Vec<u32> {
    match f {
        Forward::Unicast(p) => vec![p],
        Forward::Flood(it) => it.collect(),
        Forward::Filter => vec![],
    }
}

fn switch(n: usize) -> Switch {
    Switch::new(&vec![PortConfig::default(); n], DEFAULT_AGING_NS)
}

#[test]
fn mac_parsing_and_group_bit() {
    assert_eq!(mac(&[0x02, 0, 0, 0, 1, 2]), 0x0200_0000_0102);
    assert!(is_group(BCAST));
    assert!(is_group(mac(&[0x33, 0x33, 0, 0, 0, 1])));
    assert!(is_group(mac(&[0x01, 0x00, 0x5e, 0, 0, 5])));
    assert!(!is_group(m(7)));
}

#[test]
fn unknown_and_broadcast_flood_everywhere_but_the_ingress() {
    let mut s = switch(5);
    assert_eq!(targets(s.forward(0, 2, BCAST, m(2))), vec![0, 1, 3, 4]);
    assert_eq!(targets(s.forward(1, 0, m(9), m(0))), vec![1, 2, 3, 4]);
}

#[test]
fn learned_addresses_go_to_one_port_and_follow_moves() {
    let mut s = switch(4);
    s.forward(0, 3, BCAST, m(3));
    assert_eq!(targets(s.forward(1, 0, m(3), m(0))), vec![3]);
    assert_eq!(targets(s.forward(2, 3, m(0), m(3))), vec![0]);
    // The station behind port 3 moves to port 1.
    s.forward(3, 1, BCAST, m(3));
    assert_eq!(targets(s.forward(4, 0, m(3), m(0))), vec![1]);
    // A frame to a station on the ingress port is filtered.
    assert!(matches!(s.forward(5, 1, m(3), m(8)), Forward::Filter));
}

#[test]
fn addresses_age_out() {
    let mut s = Switch::new(&[PortConfig::default(); 3], 1_000);
    s.forward(0, 2, BCAST, m(2));
    assert_eq!(targets(s.forward(1_000, 0, m(2), m(0))), vec![2]);
    assert_eq!(targets(s.forward(1_001, 0, m(2), m(0))), vec![1, 2]);
    // The sweep bounds the table to what was heard within the aging time.
    for t in 0..10u64 {
        s.forward(10_000 + t * 2_000, 0, BCAST, m(100 + t));
    }
    assert!(s.learned() <= 2, "{} entries", s.learned());
}

#[test]
fn vlans_separate_broadcast_domains_and_tables() {
    let cfg: Vec<PortConfig> =
        [10, 20, 10, 20, 1].iter().map(|&vlan| PortConfig { vlan }).collect();
    let mut s = Switch::new(&cfg, DEFAULT_AGING_NS);
    assert_eq!(targets(s.forward(0, 0, BCAST, m(0))), vec![2]);
    assert_eq!(targets(s.forward(1, 1, BCAST, m(1))), vec![3]);
    assert_eq!(targets(s.forward(2, 4, BCAST, m(4))), Vec::<u32>::new());
    // m(0) is known in VLAN 10 only: from VLAN 20 it is unknown, so flooded in VLAN 20.
    assert_eq!(targets(s.forward(3, 3, m(0), m(3))), vec![1]);
    assert_eq!(targets(s.forward(4, 2, m(0), m(2))), vec![0]);
}

#[test]
fn down_ports_neither_send_nor_receive_and_forget_their_stations() {
    let mut s = switch(4);
    s.forward(0, 1, BCAST, m(1));
    s.set_port_up(1, false);
    assert_eq!(targets(s.forward(1, 0, m(1), m(0))), vec![2, 3]);
    assert!(matches!(s.forward(2, 1, m(0), m(1)), Forward::Filter));
    s.set_port_up(1, true);
    assert_eq!(targets(s.forward(3, 2, BCAST, m(2))), vec![0, 1, 3]);
}

#[test]
fn many_ports_unicast_is_exact() {
    let n = 4096;
    let mut s = switch(n);
    for p in 0..n as u64 {
        s.forward(p, p as u32, BCAST, m(p));
    }
    assert_eq!(s.learned(), n);
    for p in (0..n as u64).step_by(97) {
        assert_eq!(
            targets(s.forward(n as u64 + p, 0, m(p), m(0))),
            if p == 0 { vec![] } else { vec![p as u32] }
        );
    }
}

/// Audit: 2 nodes sending from random source addresses grew the table (and the
/// controller) by 435 MB. The table stops at its cap; what it knew keeps working.
#[test]
fn a_flood_of_source_addresses_stops_at_the_cap() {
    let mut s = Switch::new(&[PortConfig::default(); 3], 10_000_000_000);
    s.set_max_learned(1000);
    s.forward(0, 2, BCAST, m(2)); // a real host, learned first
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..100_000u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.forward(i, 0, BCAST, x & 0xfeff_ffff_ffff); // unicast source bit
    }
    assert_eq!(s.learned(), 1000);
    assert_eq!(s.refused(), 100_000 - 999);
    assert_eq!(targets(s.forward(100_000, 1, m(2), m(1))), vec![2], "known addresses still switch");
    // An unknown destination floods, as with a full table on a real switch.
    assert_eq!(targets(s.forward(100_001, 1, m(77), m(1))), vec![0, 2]);
    // Once the flood's entries age out, new addresses are learned again.
    s.forward(30_000_000_000, 1, BCAST, m(5));
    assert!(s.learned() < 10, "{}", s.learned());
    assert_eq!(targets(s.forward(30_000_000_001, 0, m(5), m(6))), vec![1]);
}

#[test]
fn big_segments_get_room_for_every_port() {
    assert_eq!(switch(3).max_learned(), vemu_switch::DEFAULT_MAX_LEARNED);
    assert_eq!(switch(10_000).max_learned(), 10_000 * vemu_switch::LEARNED_PER_PORT);
}
