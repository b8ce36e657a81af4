//! The fast path's few route netlink messages: a plane device's token bucket, made or
//! changed, and read back; an IFB device made. They go through vemu-host's client
//! ([`vemu_sys::netlink::Netlink::request`]).

use netlink_packet_core::{DefaultNla, Nla, NLM_F_CREATE, NLM_F_ECHO, NLM_F_EXCL, NLM_F_REPLACE};
use netlink_packet_route::link::{InfoKind, LinkAttribute, LinkFlags, LinkInfo, LinkMessage};
use netlink_packet_route::tc::{TcAttribute, TcHandle, TcMessage, TcOption, TcStats2};
use netlink_packet_route::RouteNetlinkMessage;

/// A token bucket (`tbf`) as the root qdisc of a plane device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    pub rate_bps: u64,
    /// What may leave back to back, bytes (frames longer are cut in wire frames first;
    /// a frame longer than this and not a super-frame is dropped).
    pub burst_bytes: u32,
    /// What may wait, bytes.
    pub limit_bytes: u32,
}

/// What a plane device's token bucket did since it was first set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BucketStats {
    /// Sent on (wire frames: a super-frame counts its segments) and their bytes.
    pub frames: u64,
    pub bytes: u64,
    /// Dropped because the queue was full (a super-frame dropped whole counts once).
    pub drops: u64,
    /// Waiting now (the kernel's frames: a super-frame counts once).
    pub queue_frames: u64,
    pub queue_bytes: u64,
}

impl BucketStats {
    /// These counters with what was dropped and what waits in wire frames, given what
    /// came into the bucket (wire frames, read before these counters). The
    /// kernel counts what it sent on in wire frames but what it dropped or holds in its
    /// own frames, a TCP super-frame (several wire frames) once: so a bucket that drops
    /// super-frames seems to lose frames. What it dropped, in wire frames, is what came
    /// in and neither left nor waits; what waits is its bytes at the mean size of what
    /// came in. Exact when nothing waits; never below the kernel's own counts.
    /// (`into_frames`, `into_bytes`: what the program counted, a [`crate::Counted`].)
    pub fn in_wire_frames(self, into_frames: u64, into_bytes: u64) -> BucketStats {
        let queue_frames = match (self.queue_frames, into_frames) {
            (0, _) | (_, 0) => self.queue_frames,
            (q, n) => {
                let mean = (into_bytes / n).max(1);
                q.max((self.queue_bytes + mean / 2) / mean)
            }
        };
        let drops = into_frames.saturating_sub(self.frames + queue_frames).max(self.drops);
        BucketStats { drops, queue_frames, ..self }
    }
}

/// `tc qdisc replace`: make the root qdisc, or change it if it is a bucket already.
pub(crate) const CREATE_OR_CHANGE: u16 = NLM_F_CREATE | NLM_F_REPLACE;

/// Make something that must not exist yet.
pub(crate) const CREATE_NEW: u16 = NLM_F_CREATE | NLM_F_EXCL;

/// Ask for the answer to a `get` to be sent to the asker (a qdisc's is otherwise only
/// broadcast to the TC group).
pub(crate) const ECHO: u16 = NLM_F_ECHO;

/// The bucket's handle, `1:`.
const HANDLE: TcHandle = TcHandle { major: 1, minor: 0 };

/// `RTM_NEWQDISC` of a `tbf` root qdisc on `ifindex` (`linux/pkt_sched.h`).
pub(crate) fn tbf(ifindex: u32, b: Bucket) -> RouteNetlinkMessage {
    const TCA_TBF_PARMS: u16 = 1;
    const TCA_TBF_RATE64: u16 = 4;
    const TCA_TBF_BURST: u16 = 6;
    const TC_LINKLAYER_ETHERNET: u8 = 1;
    let rate_bytes = (b.rate_bps / 8).max(1);
    // struct tc_tbf_qopt: rate and peakrate (struct tc_ratespec: cell_log, linklayer,
    // overhead, cell_align, mpu, rate in bytes/s), limit, buffer (in the kernel's ticks
    // of 64 ns; TCA_TBF_BURST below takes its place), mtu (of the peak rate: none).
    let mut qopt = Vec::with_capacity(36);
    qopt.extend([0, TC_LINKLAYER_ETHERNET]);
    qopt.extend([0u8; 6]);
    qopt.extend((rate_bytes.min(u64::from(u32::MAX)) as u32).to_ne_bytes());
    qopt.extend([0u8; 12]);
    qopt.extend(b.limit_bytes.to_ne_bytes());
    let buffer_ticks = (u128::from(b.burst_bytes) * 1_000_000_000 / u128::from(rate_bytes)) >> 6;
    qopt.extend((buffer_ticks.min(u128::from(u32::MAX)) as u32).to_ne_bytes());
    qopt.extend(0u32.to_ne_bytes());
    let mut options = vec![TcOption::Other(DefaultNla::new(TCA_TBF_PARMS, qopt))];
    if rate_bytes > u64::from(u32::MAX) {
        options.push(TcOption::Other(DefaultNla::new(
            TCA_TBF_RATE64,
            rate_bytes.to_ne_bytes().to_vec(),
        )));
    }
    options.push(TcOption::Other(DefaultNla::new(
        TCA_TBF_BURST,
        b.burst_bytes.to_ne_bytes().to_vec(),
    )));
    let mut m = root(ifindex);
    m.attributes.push(TcAttribute::Kind("tbf".into()));
    m.attributes.push(TcAttribute::Options(options));
    RouteNetlinkMessage::NewQueueDiscipline(m)
}

/// `RTM_NEWLINK` of an IFB device `name`, up.
pub(crate) fn new_ifb(name: &str) -> RouteNetlinkMessage {
    let mut m = LinkMessage::default();
    m.header.flags = LinkFlags::Up;
    m.header.change_mask = LinkFlags::Up;
    m.attributes.push(LinkAttribute::IfName(name.to_string()));
    m.attributes.push(LinkAttribute::LinkInfo(vec![LinkInfo::Kind(InfoKind::Ifb)]));
    RouteNetlinkMessage::NewLink(m)
}

/// Whether a qdisc's description is a token bucket's.
pub(crate) fn is_tbf(m: &RouteNetlinkMessage) -> bool {
    matches!(m, RouteNetlinkMessage::NewQueueDiscipline(m) if m.attributes.iter().any(|a| matches!(a, TcAttribute::Kind(k) if k == "tbf")))
}

/// `RTM_DELQDISC` of the bucket at the root of `ifindex`.
pub(crate) fn delete_root(ifindex: u32) -> RouteNetlinkMessage {
    RouteNetlinkMessage::DelQueueDiscipline(root(ifindex))
}

/// `RTM_GETQDISC` of the bucket at the root of `ifindex`.
pub(crate) fn get_root(ifindex: u32) -> RouteNetlinkMessage {
    RouteNetlinkMessage::GetQueueDiscipline(root(ifindex))
}

fn root(ifindex: u32) -> TcMessage {
    let mut m = TcMessage::default();
    m.header.index = ifindex as i32;
    m.header.parent = TcHandle::ROOT;
    m.header.handle = HANDLE;
    m
}

/// The counters of a qdisc's description.
pub(crate) fn bucket_stats(m: &RouteNetlinkMessage) -> BucketStats {
    const TCA_STATS_PKT64: u16 = 8;
    let mut s = BucketStats::default();
    let RouteNetlinkMessage::NewQueueDiscipline(m) = m else { return s };
    for a in &m.attributes {
        let TcAttribute::Stats2(stats) = a else { continue };
        for st in stats {
            match st {
                TcStats2::Basic(b) => {
                    s.bytes = b.bytes;
                    s.frames = s.frames.max(u64::from(b.packets));
                }
                TcStats2::Queue(q) => {
                    s.drops = u64::from(q.drops);
                    s.queue_frames = u64::from(q.qlen);
                    s.queue_bytes = u64::from(q.backlog);
                }
                // (Sent only when the packet count outgrows 32 bits.)
                TcStats2::Other(nla) if nla.kind() == TCA_STATS_PKT64 => {
                    let mut v = [0u8; 8];
                    nla.emit_value(&mut v);
                    s.frames = u64::from_ne_bytes(v);
                }
                _ => {}
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn super_frames_dropped_whole_count_their_wire_frames() {
        // 100 wire frames of 1000 bytes came in; 70 left; the kernel dropped 10 of its
        // frames (30 wire frames: super-frames of three) and holds none.
        let into = (100, 100_000);
        let kernel = BucketStats { frames: 70, bytes: 70_000, drops: 10, ..Default::default() };
        let wire = kernel.in_wire_frames(into.0, into.1);
        assert_eq!((wire.drops, wire.queue_frames), (30, 0));
        assert_eq!(wire.frames, 70);
        // Two of its frames (six wire frames, 6000 bytes) wait: 24 dropped.
        let waiting = BucketStats { drops: 8, queue_frames: 2, queue_bytes: 6000, ..kernel };
        let wire = waiting.in_wire_frames(into.0, into.1);
        assert_eq!((wire.drops, wire.queue_frames), (24, 6));
        assert_eq!(into.0, wire.frames + wire.drops + wire.queue_frames);
    }

    #[test]
    fn wire_frame_counts_never_fall_below_the_kernels() {
        // Frames counted by the bucket after `into` was read: nothing seems dropped,
        // but the kernel's own count stays.
        let into = (50, 50_000);
        let kernel = BucketStats { frames: 60, bytes: 60_000, drops: 3, ..Default::default() };
        assert_eq!(kernel.in_wire_frames(into.0, into.1).drops, 3);
        // Nothing came in (a bucket never used): the kernel's counts as they are.
        let idle = BucketStats { queue_frames: 1, queue_bytes: 100, ..kernel };
        assert_eq!(idle.in_wire_frames(0, 0), idle);
    }
}
