//! What the driver asks of a port's input and output, decided here so that the driver
//! owns no policy: when a frame read from a port counts as arrived, which ports get an
//! input probe this round (and what a probe is), and which frames go by the plane's
//! fan-out device.

use crate::gso::VNET_HDR_LEN;

/// The time a frame read at `now` reached the engine: its stamp (`stamped`, lab ns), if
/// it has one, but never before the port's previous frame (`last`, then this one's) nor
/// the last time the shard carried out what was due (`timers_ns`), nor after `now`. A
/// frame without a stamp (a super-frame) is timed when read — and so is every frame
/// after it that was stamped before that: one that arrived behind a super-frame must not
/// be timed, and so sent, ahead of it.
pub fn arrival_time(stamped: Option<u64>, last: &mut u64, timers_ns: u64, now: u64) -> u64 {
    let t = stamped.map_or(now, |s| s.clamp(timers_ns.max(*last).min(now), now));
    *last = t;
    t
}

/// Input probes: every 100 ms, each plane TAP port that read a frame in the last 2 s
/// (at most [`INPUT_PROBES_PER_ROUND`] a round, in turn) gets a probe frame sent on its
/// TAP device through a packet socket: the kernel queues it behind the frames waiting
/// for the engine there, and when the engine reads it, how long it waited is what those
/// frames waited before the engine saw them — time the lateness of writes cannot show.
pub const INPUT_PROBE_EVERY_NS: u64 = 100_000_000;
pub const INPUT_PROBE_ACTIVE_NS: u64 = 2_000_000_000;
pub const INPUT_PROBES_PER_ROUND: usize = 64;
/// A probe frame: local experimental ethertype, this tag, the lab time sent (ns, BE).
const INPUT_PROBE_TAG: &[u8; 8] = b"VEMU-IWP";

/// The probe frame sent at lab time `t_ns`.
pub fn input_probe_frame(t_ns: u64) -> [u8; 60] {
    let mut f = [0u8; 60];
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0]);
    f[6..12].copy_from_slice(&[0x02, 0x56, 0x45, 0x4d, 0x55, 0x01]);
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    f[14..22].copy_from_slice(INPUT_PROBE_TAG);
    f[22..30].copy_from_slice(&t_ns.to_be_bytes());
    f
}

/// The lab time an Ethernet frame was sent at, if it is an input probe.
pub fn input_probe_time(eth: &[u8]) -> Option<u64> {
    (eth.len() >= 30 && eth[12..14] == [0x88, 0xb5] && &eth[14..22] == INPUT_PROBE_TAG)
        .then(|| u64::from_be_bytes(eth[22..30].try_into().expect("8 bytes")))
}

/// This round's input probes at `now`: the ports, among `last_read_ns` (when each port
/// last read a frame; `None`: never, or not a port to probe), that read one in the last
/// [`INPUT_PROBE_ACTIVE_NS`], in turn from `cursor`, at most [`INPUT_PROBES_PER_ROUND`];
/// and where the next round starts (past the last port probed when the round was full).
pub fn input_probe_round(
    last_read_ns: &[Option<u64>],
    cursor: usize,
    now: u64,
) -> (Vec<usize>, usize) {
    let n = last_read_ns.len();
    let mut ports = Vec::new();
    for k in 0..n {
        let port = (cursor + k) % n;
        let Some(last) = last_read_ns[port] else { continue };
        if now.saturating_sub(last) > INPUT_PROBE_ACTIVE_NS {
            continue;
        }
        ports.push(port);
        if ports.len() == INPUT_PROBES_PER_ROUND {
            return (ports, (port + 1) % n);
        }
    }
    (ports, cursor)
}

/// Largest frame (with its virtio-net header) the fan-out device takes: a jumbo frame.
pub const FANOUT_FRAME_MAX: usize = 9216 + VNET_HDR_LEN;

/// Whether a LAN frame for a port goes by the plane's fan-out device (one write naming
/// every member port it is for): the port's far end is the LAN's bridge and its TAP
/// device exists, and the frame (`frame`: virtio-net header, then Ethernet) is plain —
/// no GSO — and no larger than [`FANOUT_FRAME_MAX`].
pub fn fans_out(to_bridge: bool, tapped: bool, frame: &[u8]) -> bool {
    let plain = frame.get(1) == Some(&0) && frame.len() <= FANOUT_FRAME_MAX;
    to_bridge && tapped && plain
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_stamped_before_a_super_frame_read_ahead_of_it_is_timed_after_it() {
        let mut last = 0;
        // A stamped frame: its stamp.
        assert_eq!(arrival_time(Some(100), &mut last, 0, 150), 100);
        // A super-frame (no stamp) read at 300, then a frame stamped at 250 that arrived
        // behind it: timed at 300, not 250 (else it would be sent first).
        assert_eq!(arrival_time(None, &mut last, 0, 300), 300);
        assert_eq!(arrival_time(Some(250), &mut last, 0, 320), 300);
        // Later stamps stand; never after the read, nor before what was carried out.
        assert_eq!(arrival_time(Some(310), &mut last, 0, 330), 310);
        assert_eq!(arrival_time(Some(900), &mut last, 0, 400), 400);
        let mut fresh = 0;
        assert_eq!(arrival_time(Some(10), &mut fresh, 50, 100), 50);
    }

    #[test]
    fn probes_go_to_recently_active_ports_in_turn_64_a_round() {
        let now = 10_000_000_000;
        // 100 ports: even ones active 1 s ago, odd ones 3 s ago, port 0 never.
        let mut last: Vec<Option<u64>> = (0..100)
            .map(|p| Some(if p % 2 == 0 { now - 1_000_000_000 } else { now - 3_000_000_000 }))
            .collect();
        last[0] = None;
        let (ports, next) = input_probe_round(&last, 0, now);
        assert_eq!(ports, (2..100).step_by(2).collect::<Vec<_>>());
        assert_eq!(next, 0, "a round that was not full starts where it did");
        // 200 active ports: 64 a round, the next round after the last one probed.
        let busy = vec![Some(now); 200];
        let (a, next) = input_probe_round(&busy, 150, now);
        assert_eq!(a.len(), INPUT_PROBES_PER_ROUND);
        assert_eq!((a[0], a[49], a[50], a[63]), (150, 199, 0, 13));
        assert_eq!(next, 14);
        assert!(input_probe_round(&[], 0, now).0.is_empty());
    }

    #[test]
    fn a_probe_frame_carries_its_time_and_nothing_else_reads_as_one() {
        let f = input_probe_frame(123_456_789);
        assert_eq!(input_probe_time(&f), Some(123_456_789));
        let mut other = f;
        other[14] = b'X';
        assert_eq!(input_probe_time(&other), None);
        assert_eq!(input_probe_time(&f[..29]), None);
    }

    #[test]
    fn only_plain_frames_to_a_tapped_bridge_port_fan_out() {
        let mut plain = vec![0u8; VNET_HDR_LEN + 1500];
        assert!(fans_out(true, true, &plain));
        assert!(!fans_out(false, true, &plain));
        assert!(!fans_out(true, false, &plain));
        plain[1] = 1; // a GSO super-frame
        assert!(!fans_out(true, true, &plain));
        assert!(!fans_out(true, true, &vec![0u8; FANOUT_FRAME_MAX + 1]));
        assert!(fans_out(true, true, &vec![0u8; FANOUT_FRAME_MAX]));
    }
}
