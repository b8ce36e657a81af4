//! A wireless segment's channel: the simple medium ([`crate::medium`]: airtime and an
//! optional simplified CSMA) or the 802.11 DCF ([`crate::wifi::dcf`]), behind one
//! interface, as the data path's core drives it: frames offered with their wire size,
//! time advanced, outcomes out.

use crate::medium::{Medium, MediumConfig, Neighbour, Outcome, PairCounters};
use crate::wifi::dcf::{self, Dcf};
use crate::Pos;

/// A segment's channel.
// One per wireless segment, held where it is made: the DCF (kilobytes) is boxed only
// so that the size is not doubled for the simple medium.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Air {
    Simple(Medium),
    Dcf(Box<DcfAir>),
}

/// The DCF with the medium's outcomes.
#[derive(Debug, Clone)]
pub struct DcfAir {
    pub dcf: Dcf,
    out: Vec<dcf::Outcome>,
}

impl Air {
    /// The DCF when the configuration has one ([`MediumConfig::dcf`]), else the medium.
    pub fn new(cfg: MediumConfig, positions: &[Pos]) -> Air {
        match cfg.dcf.clone() {
            Some(setup) => {
                let dcf = Dcf::new(setup.config, positions, &setup.stations);
                Air::Dcf(Box::new(DcfAir { dcf, out: Vec::new() }))
            }
            None => Air::Simple(Medium::new(cfg, positions)),
        }
    }

    /// A frame of `wire_frames` frames and `wire_bytes` bytes (Ethernet headers
    /// included) from `member`, to `dst` when known. False when it is refused (the
    /// sender is down or its queue is full).
    pub fn offer(
        &mut self,
        now_ns: u64,
        member: u32,
        id: u64,
        wire: (u32, u64),
        dst: Option<u32>,
    ) -> bool {
        match self {
            Air::Simple(m) => {
                let airtime = m.airtime_ns(wire.0, wire.1);
                m.offer(now_ns, member, id, airtime, dst)
            }
            // (An Ethernet frame's payload as 802.11 carries it: the Ethernet header
            // becomes the MAC header's addresses and an 8-byte LLC/SNAP header.)
            Air::Dcf(d) => d.dcf.offer(now_ns, member, id, wire.1.saturating_sub(14) + 8, dst),
        }
    }

    pub fn next_event_ns(&self) -> Option<u64> {
        match self {
            Air::Simple(m) => m.next_event_ns(),
            Air::Dcf(d) => d.dcf.next_event_ns(),
        }
    }

    pub fn advance(&mut self, now_ns: u64, out: &mut Vec<Outcome>) {
        match self {
            Air::Simple(m) => m.advance(now_ns, out),
            Air::Dcf(d) => {
                d.dcf.advance(now_ns, &mut d.out);
                out.extend(d.out.drain(..).map(outcome));
            }
        }
    }

    pub fn set_up(&mut self, member: u32, up: bool, out: &mut Vec<Outcome>) {
        match self {
            Air::Simple(m) => m.set_up(member, up, out),
            Air::Dcf(d) => {
                d.dcf.set_up(member, up, &mut d.out);
                out.extend(d.out.drain(..).map(outcome));
            }
        }
    }

    pub fn set_positions(&mut self, positions: &[Pos]) {
        match self {
            Air::Simple(m) => m.set_positions(positions),
            Air::Dcf(d) => d.dcf.set_positions(positions),
        }
    }

    pub fn positions(&self) -> &[Pos] {
        match self {
            Air::Simple(m) => m.positions(),
            Air::Dcf(d) => d.dcf.positions(),
        }
    }

    pub fn neighbours(&self, member: u32) -> Vec<Neighbour> {
        match self {
            Air::Simple(m) => m.neighbours(member).to_vec(),
            Air::Dcf(d) => d.dcf.neighbours(member),
        }
    }

    pub fn pairs(&self) -> Vec<((u32, u32), PairCounters)> {
        match self {
            Air::Simple(m) => m.pairs().collect(),
            Air::Dcf(d) => d.dcf.pairs().collect(),
        }
    }

    /// Capture member `member`'s radio (`on`) or stop (the simple medium has no frames of
    /// its own: nothing to capture).
    pub fn set_monitor(&mut self, member: u32, on: bool) {
        if let Air::Dcf(d) = self {
            d.dcf.set_monitor(member, on);
        }
    }

    /// The 802.11 standard of the DCF (none for the simple medium).
    pub fn standard(&self) -> Option<crate::wifi::phy::Standard> {
        match self {
            Air::Simple(_) => None,
            Air::Dcf(d) => Some(d.dcf.config().timing.standard),
        }
    }

    /// What each member's MAC did (the DCF's only).
    pub fn stations(&self) -> Option<Vec<dcf::StationStats>> {
        match self {
            Air::Simple(_) => None,
            Air::Dcf(d) => {
                Some((0..d.dcf.positions().len() as u32).map(|s| d.dcf.stats(s)).collect())
            }
        }
    }
}

/// The medium's form of a DCF outcome.
fn outcome(o: dcf::Outcome) -> Outcome {
    match o {
        dcf::Outcome::Deliver { id, receiver, at_ns } => Outcome::Deliver { id, receiver, at_ns },
        dcf::Outcome::Lost { id, receiver, at_ns, reason } => {
            Outcome::Lost { id, receiver, at_ns, collision: reason != dcf::LossReason::Sinr }
        }
        dcf::Outcome::Dropped { id, receiver, at_ns, .. } => {
            Outcome::Dropped { id, receiver, at_ns }
        }
        dcf::Outcome::Done { id } => Outcome::Done { id },
        dcf::Outcome::Heard(h) => Outcome::Heard(h),
    }
}
