//! Link models read from files (issue 65): netem's tables (`jitter: {distribution:
//! {table: FILE}}`), measured delays replayed as their empirical distribution (`delay:
//! {measured: FILE}`: one delay a line, or a capture's inter-arrival times or ping round
//! trips), and a phantom load's trace of rates (`phantom: {trace: FILE}`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use vemu_link::{Distribution, Jitter, Table};

use super::*;

/// Largest delay file read, bytes (a capture of a long run fits).
pub const MAX_DELAY_FILE_BYTES: u64 = 256 << 20;

/// Which series of a capture `delay: {measured: CAPTURE, series: ...}` replays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Series {
    /// Time between consecutive captured frames.
    InterArrival,
    /// Half of each ICMP echo round trip (request to its reply, by identifier and sequence).
    HalfRtt,
}

/// A file named in a scenario (a delay file, a trace of rates, a GeoJSON city), read whole
/// as a tenant may (the `trace` reach) and within its limit: its bytes and the path as
/// the error names it.
pub(crate) fn read_file(
    p: &mut P,
    node: &Node,
    field: &str,
    what: &str,
) -> Option<(Vec<u8>, PathBuf)> {
    let name = p.string(node, field)?;
    if !p.reach(crate::Reach::Trace, node.mark, field) {
        return None;
    }
    let Some(base) = p.base.clone() else {
        p.err(
            node.mark,
            field,
            format!("{what} files are named in scenario files (relative to them): change this link with the scenario, not at run time"),
        );
        return None;
    };
    let path = base.join(&name);
    match crate::read_bytes(&path, MAX_DELAY_FILE_BYTES) {
        Ok((bytes, _)) => Some((bytes, path)),
        Err(e) => {
            p.err(node.mark, field, format!("cannot read {what} '{}': {e}", path.display()));
            None
        }
    }
}

fn display_name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

/// `distribution: {table: FILE}`: a table in netem's format.
pub(crate) fn table(p: &mut P, node: &Node, field: &str) -> Option<Distribution> {
    let entries = p.map(node, field, &["table"]);
    let Some((_, _, file)) = entries.first() else {
        p.err(node.mark, field, "expected a distribution's name or {table: FILE}");
        return None;
    };
    let f = join(field, "table");
    let (bytes, path) = read_file(p, file, &f, "distribution table")?;
    let text = String::from_utf8_lossy(&bytes);
    match Table::from_netem(&display_name(&path), &text) {
        Ok(t) => Some(Distribution::Table(t)),
        Err(e) => {
            p.err(file.mark, &f, format!("{}: {e}", path.display()));
            None
        }
    }
}

/// `delay: {measured: FILE, series: inter-arrival|rtt, correlation: 25%}`: the delay
/// (the series' mean) and the jitter (its σ, shaped by the series' own distribution).
pub(crate) fn measured(p: &mut P, node: &Node, field: &str) -> Option<(u64, Jitter)> {
    let entries = p.map(node, field, &["measured", "series", "correlation"]);
    let mut file = None;
    let mut series = None;
    let mut correlation = 0.0;
    for (k, _, v) in &entries {
        let f = join(field, k);
        match *k {
            "measured" => file = Some((*v, f)),
            "series" => {
                series = Some(p.scalar(v, &f, |s| match s {
                    "inter-arrival" => Ok(Series::InterArrival),
                    "rtt" => Ok(Series::HalfRtt),
                    _ => Err(format!("unknown series '{s}', expected inter-arrival (time between captured frames) or rtt (half of each ping's round trip)")),
                })?)
            }
            "correlation" => correlation = p.scalar(v, &f, units::percent)?,
            _ => unreachable!(),
        }
    }
    let Some((file, f)) = file else {
        p.err(node.mark, field, "expected a duration (20ms) or {measured: FILE}");
        return None;
    };
    let (bytes, path) = read_file(p, file, &f, "measured delays")?;
    let m =
        measured_series(&bytes, series).and_then(|s| Table::from_samples(&display_name(&path), &s));
    match m {
        Ok(m) => Some((
            (m.mean * 1e6).round() as u64,
            Jitter {
                amount_ns: (m.sigma * 1e6).round() as u64,
                distribution: Distribution::Table(m.table),
                correlation,
            },
        )),
        Err(e) => {
            p.err(file.mark, &f, format!("{}: {e}", path.display()));
            None
        }
    }
}

/// The delays (ms) of a file of measured delays: a capture's `series`, or a text file's
/// lines (no series).
pub fn measured_series(bytes: &[u8], series: Option<Series>) -> Result<Vec<f64>, String> {
    let capture = bytes.len() >= 4
        && matches!(
            u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]),
            0xa1b2_c3d4 | 0xd4c3_b2a1 | 0xa1b2_3c4d | 0x4d3c_b2a1 | 0x0a0d_0d0a
        );
    match (capture, series) {
        (true, None) => Err("a capture needs 'series': inter-arrival or rtt".to_string()),
        (true, Some(s)) => capture_series(bytes, s),
        (false, Some(_)) => {
            Err("'series' is for captures (pcap or pcapng); this file is text: one delay a line"
                .to_string())
        }
        (false, None) => text_series(&String::from_utf8_lossy(bytes)),
    }
}

/// `phantom: {trace: FILE, period: 60s}`: a phantom load following the file's rates.
pub(crate) fn phantom_trace(
    p: &mut P,
    node: &Node,
    field: &str,
) -> Option<vemu_link::PhantomTrace> {
    let entries = p.map(node, field, &["trace", "period"]);
    let mut period_ns = None;
    let mut file = None;
    for (k, _, v) in &entries {
        let f = join(field, k);
        match *k {
            "trace" => file = Some((*v, f)),
            _ => period_ns = Some(p.scalar(v, &f, units::duration_ns)?),
        }
    }
    let Some((file, f)) = file else {
        p.err(node.mark, field, "expected a rate (4Mbit) or {trace: FILE}");
        return None;
    };
    let (bytes, path) = read_file(p, file, &f, "phantom trace")?;
    let trace = rate_steps(&String::from_utf8_lossy(&bytes)).map(|steps| vemu_link::PhantomTrace {
        name: display_name(&path),
        steps,
        period_ns,
    });
    match trace.and_then(|t| t.validate().map(|_| t)) {
        Ok(t) => Some(t),
        Err(e) => {
            p.err(file.mark, &f, format!("{}: {e}", path.display()));
            None
        }
    }
}

/// `TIME RATE` a line (`10s 4Mbit`; a bare time is seconds, a rate of 0 is none), `#`
/// comments and blank lines skipped.
fn rate_steps(text: &str) -> Result<Vec<(u64, u64)>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.split('#').next().unwrap_or("").trim();
        if t.is_empty() {
            continue;
        }
        let bad = |m: String| format!("line {}: {m} (a line is TIME RATE, e.g. 10s 4Mbit)", i + 1);
        let (time, rate) =
            t.split_once(char::is_whitespace).ok_or_else(|| bad(format!("'{t}' has no rate")))?;
        let at_ns = match time.parse::<f64>() {
            Ok(s) if s.is_finite() && s >= 0.0 => (s * 1e9).round() as u64,
            _ => units::duration_ns(time).map_err(bad)?,
        };
        let bps = match rate.trim() {
            "0" | "none" => 0,
            r => units::rate_bps(r).map_err(bad)?,
        };
        out.push((at_ns, bps));
    }
    Ok(out)
}

/// One delay a line (`12.5ms`, `800us`, or a bare number of milliseconds as ping prints
/// them); `#` comments and blank lines skipped.
fn text_series(text: &str) -> Result<Vec<f64>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.split('#').next().unwrap_or("").trim();
        if t.is_empty() {
            continue;
        }
        let ms = match t.parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => v,
            Ok(_) => return Err(format!("line {}: '{t}' is not a delay", i + 1)),
            Err(_) => units::duration_ns(t)
                .map(|ns| ns as f64 / 1e6)
                .map_err(|m| format!("line {}: {m} (or a bare number of milliseconds)", i + 1))?,
        };
        out.push(ms);
    }
    Ok(out)
}

/// A captured frame: its time (ns) and link type.
struct Frame<'a> {
    t_ns: u128,
    link: pcap_file::DataLink,
    data: &'a [u8],
}

/// The series of a pcap or pcapng capture, ms.
fn capture_series(bytes: &[u8], series: Series) -> Result<Vec<f64>, String> {
    let mut times = Vec::new();
    let mut rtt = Rtt::default();
    let mut take = |f: Frame| match series {
        Series::InterArrival => times.push(f.t_ns),
        Series::HalfRtt => rtt.frame(&f),
    };
    let bad = |e: pcap_file::PcapError| format!("not a readable capture: {e}");
    if bytes.starts_with(&[0x0a, 0x0d, 0x0d, 0x0a]) {
        let mut r = pcap_file::pcapng::PcapNgReader::new(bytes).map_err(bad)?;
        // Ticks per second of each interface (if_tsresol; 10^6 unless it says).
        let mut ticks: Vec<(u128, pcap_file::DataLink)> = Vec::new();
        while let Some(b) = r.next_block() {
            match b.map_err(bad)? {
                pcap_file::pcapng::Block::InterfaceDescription(idb) => {
                    let mut per_s = 1_000_000u128;
                    for o in &idb.options {
                        if let pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption::IfTsResol(r) = o {
                            let n = (*r & 0x7f).min(30) as u32;
                            per_s = if r & 0x80 == 0 { 10u128.pow(n.min(18)) } else { 1u128 << n };
                        }
                    }
                    ticks.push((per_s, idb.linktype));
                }
                pcap_file::pcapng::Block::EnhancedPacket(epb) => {
                    let Some(&(per_s, link)) = ticks.get(epb.interface_id as usize) else {
                        return Err(format!(
                            "a packet of interface {} that was never described",
                            epb.interface_id
                        ));
                    };
                    // pcap-file hands the raw tick count over as nanoseconds.
                    let raw = epb.timestamp.as_nanos();
                    take(Frame { t_ns: raw * 1_000_000_000 / per_s, link, data: &epb.data });
                }
                _ => {}
            }
        }
    } else {
        let mut r = pcap_file::pcap::PcapReader::new(bytes).map_err(bad)?;
        let link = r.header().datalink;
        while let Some(pkt) = r.next_packet() {
            let pkt = pkt.map_err(bad)?;
            take(Frame { t_ns: pkt.timestamp.as_nanos(), link, data: &pkt.data });
        }
    }
    match series {
        Series::InterArrival => {
            if times.len() < 3 {
                return Err(format!(
                    "{} frames: at least 3 are needed for inter-arrival times",
                    times.len()
                ));
            }
            Ok(times.windows(2).map(|w| w[1].saturating_sub(w[0]) as f64 / 1e6).collect())
        }
        Series::HalfRtt => {
            if rtt.half_ms.len() < 2 {
                return Err(format!(
                    "{} ping round trips found: at least 2 are needed (ICMP echo requests and their replies)",
                    rtt.half_ms.len()
                ));
            }
            Ok(rtt.half_ms)
        }
    }
}

/// An echo request: (v6, identifier, sequence, requester's address, target's address).
type Echo = (bool, u16, u16, Vec<u8>, Vec<u8>);

/// ICMP echo requests waiting for their replies, and the half round trips found.
#[derive(Default)]
struct Rtt {
    /// When each request was seen, ns.
    waiting: HashMap<Echo, u128>,
    half_ms: Vec<f64>,
}

/// Most echo requests remembered without a reply (a capture of one direction only).
const MAX_WAITING: usize = 1 << 20;

impl Rtt {
    fn frame(&mut self, f: &Frame) {
        use etherparse::{Icmpv4Type, Icmpv6Type, NetSlice, SlicedPacket, TransportSlice};
        use pcap_file::DataLink;
        let sliced = match f.link {
            DataLink::ETHERNET => SlicedPacket::from_ethernet(f.data),
            DataLink::LINUX_SLL => SlicedPacket::from_linux_sll(f.data),
            DataLink::RAW | DataLink::IPV4 | DataLink::IPV6 => SlicedPacket::from_ip(f.data),
            _ => return,
        };
        let Ok(s) = sliced else { return };
        let (src, dst) = match &s.net {
            Some(NetSlice::Ipv4(ip)) => (
                ip.header().source_addr().octets().to_vec(),
                ip.header().destination_addr().octets().to_vec(),
            ),
            Some(NetSlice::Ipv6(ip)) => (
                ip.header().source_addr().octets().to_vec(),
                ip.header().destination_addr().octets().to_vec(),
            ),
            None => return,
        };
        let (v6, request, echo) = match &s.transport {
            Some(TransportSlice::Icmpv4(i)) => match i.icmp_type() {
                Icmpv4Type::EchoRequest(e) => (false, true, e),
                Icmpv4Type::EchoReply(e) => (false, false, e),
                _ => return,
            },
            Some(TransportSlice::Icmpv6(i)) => match i.icmp_type() {
                Icmpv6Type::EchoRequest(e) => (true, true, e),
                Icmpv6Type::EchoReply(e) => (true, false, e),
                _ => return,
            },
            _ => return,
        };
        if request {
            if self.waiting.len() < MAX_WAITING {
                self.waiting.entry((v6, echo.id, echo.seq, src, dst)).or_insert(f.t_ns);
            }
        } else if let Some(sent) = self.waiting.remove(&(v6, echo.id, echo.seq, dst, src)) {
            self.half_ms.push(f.t_ns.saturating_sub(sent) as f64 / 2e6);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_series_reads_bare_milliseconds_and_units() {
        assert_eq!(
            text_series("# rtt\n12.5\n\n800us # a comment\n1s\n").unwrap(),
            vec![12.5, 0.8, 1000.0]
        );
        assert!(text_series("1\nfast\n").unwrap_err().starts_with("line 2:"));
        assert!(text_series("-3\n").unwrap_err().contains("'-3'"));
    }
}
