//! MAC addresses as the switch keeps them.

/// A MAC address as the 48 low bits of a u64 (first byte on the wire = highest).
pub type Mac = u64;

pub fn mac(bytes: &[u8]) -> Mac {
    bytes[..6].iter().fold(0u64, |acc, &b| acc << 8 | b as u64)
}

/// ff:ff:ff:ff:ff:ff.
pub const BROADCAST: Mac = 0xffff_ffff_ffff;

/// Group (broadcast or multicast) addresses have the lowest bit of the first byte set.
pub fn is_group(m: Mac) -> bool {
    m >> 40 & 1 == 1
}
