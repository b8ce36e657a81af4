//! Writing pcapng (the capture format Wireshark and tshark read): a section header,
//! one interface description per captured interface (nanosecond timestamps), and an
//! enhanced packet block per frame, with its direction (and, for a frame the emulation
//! dropped, a comment saying why). Little-endian throughout.

fn block(kind: u32, body: &[u8]) -> Vec<u8> {
    let len = (12 + body.len()) as u32;
    let mut b = Vec::with_capacity(len as usize);
    b.extend_from_slice(&kind.to_le_bytes());
    b.extend_from_slice(&len.to_le_bytes());
    b.extend_from_slice(body);
    b.extend_from_slice(&len.to_le_bytes());
    b
}

/// One option (code, value), padded to 4 bytes.
fn option(out: &mut Vec<u8>, code: u16, value: &[u8]) {
    out.extend_from_slice(&code.to_le_bytes());
    out.extend_from_slice(&(value.len() as u16).to_le_bytes());
    out.extend_from_slice(value);
    out.resize(out.len().next_multiple_of(4), 0);
}

fn end_of_options(out: &mut Vec<u8>) {
    out.extend_from_slice(&[0, 0, 0, 0]);
}

/// Section header block: starts the file.
pub fn section_header() -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&0x1A2B_3C4Du32.to_le_bytes());
    b.extend_from_slice(&1u16.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&(-1i64).to_le_bytes());
    option(&mut b, 4, b"vemu"); // shb_userappl
    end_of_options(&mut b);
    block(0x0A0D_0D0A, &b)
}

/// pcap's link type of Ethernet frames.
pub const LINKTYPE_ETHERNET: u16 = 1;

/// Interface description block of an interface whose frames are of `linktype`,
/// timestamps in nanoseconds, with a description if any (where its times come from, for
/// a node on another machine).
pub fn interface(name: &str, description: Option<&str>, linktype: u16) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&linktype.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes()); // no snapshot limit
    option(&mut b, 2, name.as_bytes()); // if_name
    if let Some(d) = description {
        // if_description (an option's length is 16 bits).
        option(&mut b, 3, &d.as_bytes()[..d.len().min(u16::MAX as usize - 3)]);
    }
    option(&mut b, 9, &[9]); // if_tsresol: 10^-9 s
    end_of_options(&mut b);
    block(1, &b)
}

/// Enhanced packet block: a frame on interface `iface` at `t_ns` (ns since 1970), with
/// a comment (`opt_comment`, Wireshark's `frame.comment`) if any.
pub fn packet(
    iface: u32,
    t_ns: u64,
    frame: &[u8],
    outgoing: bool,
    comment: Option<&str>,
) -> Vec<u8> {
    let mut b = Vec::with_capacity(frame.len() + 40);
    b.extend_from_slice(&iface.to_le_bytes());
    b.extend_from_slice(&((t_ns >> 32) as u32).to_le_bytes());
    b.extend_from_slice(&(t_ns as u32).to_le_bytes());
    b.extend_from_slice(&(frame.len() as u32).to_le_bytes());
    b.extend_from_slice(&(frame.len() as u32).to_le_bytes());
    b.extend_from_slice(frame);
    b.resize(b.len().next_multiple_of(4), 0);
    // epb_flags: direction 1 = inbound, 2 = outbound.
    option(&mut b, 2, &(if outgoing { 2u32 } else { 1u32 }).to_le_bytes());
    if let Some(c) = comment {
        option(&mut b, 1, &c.as_bytes()[..c.len().min(u16::MAX as usize - 3)]);
    }
    end_of_options(&mut b);
    block(6, &b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_framed_and_aligned() {
        for b in [
            section_header(),
            interface("r1:eth0", None, LINKTYPE_ETHERNET),
            interface("r1:eth0", Some("on machine b"), 127),
            packet(0, 1_700_000_000_123_456_789, &[1, 2, 3, 4, 5], true, None),
            packet(1, 5, &[1, 2, 3], false, Some("vemu drop: queue — odd length")),
        ] {
            assert_eq!(b.len() % 4, 0);
            let len = u32::from_le_bytes(b[4..8].try_into().unwrap()) as usize;
            assert_eq!(len, b.len());
            assert_eq!(&b[b.len() - 4..], &b[4..8]);
        }
        let p = packet(3, 0x0000_0001_0000_0002, &[0xaa; 60], false, None);
        assert_eq!(u32::from_le_bytes(p[8..12].try_into().unwrap()), 3);
        assert_eq!(u32::from_le_bytes(p[12..16].try_into().unwrap()), 1);
        assert_eq!(u32::from_le_bytes(p[16..20].try_into().unwrap()), 2);
    }
}
