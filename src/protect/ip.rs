//! IP addresses, CIDR lists and the client address behind trusted proxies.
//!
//! Every address is a `u128`: IPv6 as is, IPv4 mapped into `::ffff:0:0/96`, so one sorted
//! list of disjoint ranges holds both families and a lookup is one binary search
//! (`O(log n)`, tens of thousands of entries in a few steps, no allocation).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// An address as a number (IPv4 mapped into `::ffff:0:0/96`).
pub fn ip_to_u128(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(v4.to_ipv6_mapped()),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

/// Parses an address as Envoy, proxies and clients write it: `1.2.3.4`, `::1`, `[::1]`,
/// with or without a `:port` (`1.2.3.4:80`, `[::1]:80`), surrounding blanks ignored.
pub fn parse_ip(text: &str) -> Option<IpAddr> {
    let t = text.trim();
    if let Ok(ip) = t.parse::<IpAddr>() {
        return Some(ip);
    }
    if let Some(rest) = t.strip_prefix('[') {
        let (inner, _) = rest.split_once(']')?;
        return inner.parse::<Ipv6Addr>().ok().map(IpAddr::V6);
    }
    // `v4:port`
    let (host, port) = t.rsplit_once(':')?;
    if port.bytes().all(|b| b.is_ascii_digit()) {
        return host.parse::<Ipv4Addr>().ok().map(IpAddr::V4);
    }
    None
}

/// A set of CIDR blocks: sorted, merged, inclusive ranges.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct IpSet {
    ranges: Vec<(u128, u128)>,
}

/// Parses one `addr` or `addr/len` entry into an inclusive range. Host bits under the mask
/// are ignored (`10.1.2.3/8` is `10.0.0.0/8`).
pub fn parse_cidr(entry: &str) -> Result<(u128, u128), String> {
    let entry = entry.trim();
    let (addr, len) = match entry.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (entry, None),
    };
    let ip: IpAddr = addr
        .parse()
        .map_err(|_| format!("\"{entry}\" is not an IP address or CIDR block"))?;
    let (max, offset) = match ip {
        IpAddr::V4(_) => (32u32, 96u32),
        IpAddr::V6(_) => (128u32, 0u32),
    };
    let len = match len {
        None => max,
        Some(l) => match l.parse::<u32>() {
            Ok(n) if n <= max => n,
            _ => return Err(format!("\"{entry}\": prefix length must be 0-{max}")),
        },
    };
    let bits = offset + len; // significant bits of the u128
    let host_mask: u128 = if bits == 0 { u128::MAX } else { u128::MAX.checked_shr(bits).unwrap_or(0) };
    let base = ip_to_u128(ip) & !host_mask;
    Ok((base, base | host_mask))
}

impl IpSet {
    /// Builds the set; the error names the first bad entry.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<IpSet, String> {
        let mut ranges = Vec::with_capacity(entries.len());
        for e in entries {
            ranges.push(parse_cidr(e.as_ref())?);
        }
        ranges.sort_unstable();
        let mut merged: Vec<(u128, u128)> = Vec::with_capacity(ranges.len());
        for (lo, hi) in ranges {
            match merged.last_mut() {
                Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
                _ => merged.push((lo, hi)),
            }
        }
        Ok(IpSet { ranges: merged })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        let n = ip_to_u128(ip);
        // First range whose end is >= n; it contains n when its start is <= n.
        let i = self.ranges.partition_point(|&(_, hi)| hi < n);
        self.ranges.get(i).is_some_and(|&(lo, _)| lo <= n)
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Number of disjoint ranges after merging.
    pub fn len(&self) -> usize {
        self.ranges.len()
    }
}

/// The client address: with `trusted_hops` proxies in front of Envoy that each append the
/// address they saw to `X-Forwarded-For`, the client is the entry `trusted_hops` from the
/// right (everything left of it was written by the client and cannot be trusted). With no
/// trusted hops, or an `X-Forwarded-For` shorter than that (the request did not come
/// through the proxies), or an entry that is not an address, the peer address is the client.
///
/// `xff` holds every `X-Forwarded-For` header value in order (several headers are one list).
pub fn client_ip(peer: Option<IpAddr>, xff: &[&[u8]], trusted_hops: u32) -> Option<IpAddr> {
    if trusted_hops == 0 {
        return peer;
    }
    let entries = xff_entries(xff);
    let hops = trusted_hops as usize;
    if entries.len() < hops {
        return peer;
    }
    entries
        .get(entries.len() - hops)
        .and_then(|e| std::str::from_utf8(e).ok())
        .and_then(parse_ip)
        .or(peer)
}

/// The comma-separated entries of the `X-Forwarded-For` values, blanks trimmed.
pub fn xff_entries<'a>(xff: &[&'a [u8]]) -> Vec<&'a [u8]> {
    xff.iter()
        .flat_map(|v| v.split(|&b| b == b','))
        .map(|e| e.trim_ascii())
        .filter(|e| !e.is_empty())
        .collect()
}

/// The `X-Forwarded-For` value to send upstream: the client address followed by the
/// entries the trusted proxies appended; the spoofable entries left of the client dropped.
pub fn sanitized_xff(client: IpAddr, xff: &[&[u8]], trusted_hops: u32) -> String {
    let entries = xff_entries(xff);
    let hops = trusted_hops as usize;
    let mut out = client.to_string();
    if hops > 0 && entries.len() >= hops {
        for e in entries.iter().skip(entries.len() - hops + 1) {
            out.push_str(", ");
            out.push_str(&String::from_utf8_lossy(e));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn cidr_sets_v4_and_v6() {
        let set = IpSet::parse(&["10.0.0.0/8", "192.168.1.7", "2001:db8::/32", "10.1.2.3/16", "0.0.0.0/32"]).unwrap();
        assert!(set.contains(ip("10.200.3.4")));
        assert!(!set.contains(ip("11.0.0.0")));
        assert!(!set.contains(ip("9.255.255.255")));
        assert!(set.contains(ip("192.168.1.7")));
        assert!(!set.contains(ip("192.168.1.8")));
        assert!(set.contains(ip("2001:db8:ffff::1")));
        assert!(!set.contains(ip("2001:db9::1")));
        assert!(set.contains(ip("0.0.0.0")));
        // 10.1.0.0/16 lies in 10/8: merged.
        assert_eq!(set.len(), 4);
        // IPv4 entries do not match IPv6 addresses outside ::ffff:0:0/96.
        assert!(!set.contains(ip("::a00:1")));
        assert!(set.contains(ip("::ffff:10.0.0.1")));
    }

    #[test]
    fn whole_spaces_and_edges() {
        let all = IpSet::parse(&["::/0"]).unwrap();
        assert!(all.contains(ip("1.2.3.4")) && all.contains(ip("ffff::1")));
        let v4 = IpSet::parse(&["0.0.0.0/0"]).unwrap();
        assert!(v4.contains(ip("255.255.255.255")) && !v4.contains(ip("::1")));
        let top = IpSet::parse(&["ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128"]).unwrap();
        assert!(top.contains(ip("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")));
        assert!(IpSet::parse::<&str>(&[]).unwrap().is_empty());
        assert!(!IpSet::default().contains(ip("1.1.1.1")));
    }

    #[test]
    fn bad_entries_are_named() {
        assert!(IpSet::parse(&["10.0.0.0/33"]).unwrap_err().contains("10.0.0.0/33"));
        assert!(IpSet::parse(&["::/129"]).is_err());
        assert!(IpSet::parse(&["example.com"]).unwrap_err().contains("example.com"));
        assert!(IpSet::parse(&["10.0.0.0/x"]).is_err());
        assert!(IpSet::parse(&["10.0.0.0/-1"]).is_err());
    }

    #[test]
    fn many_entries_agree_with_a_linear_scan() {
        // 20,000 /24 blocks spread over the space, then probes on and around them.
        let mut entries = Vec::new();
        let mut x: u32 = 12345;
        for _ in 0..20_000 {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            entries.push(format!("{}/24", Ipv4Addr::from(x & 0xffff_ff00)));
        }
        let set = IpSet::parse(&entries).unwrap();
        let ranges: Vec<(u128, u128)> = entries.iter().map(|e| parse_cidr(e).unwrap()).collect();
        for probe in 0..50_000u32 {
            let a = IpAddr::V4(Ipv4Addr::from(probe.wrapping_mul(2_654_435_761)));
            let n = ip_to_u128(a);
            let linear = ranges.iter().any(|&(lo, hi)| lo <= n && n <= hi);
            assert_eq!(set.contains(a), linear, "{a}");
        }
    }

    #[test]
    fn addresses_with_ports() {
        assert_eq!(parse_ip("1.2.3.4:80"), Some(ip("1.2.3.4")));
        assert_eq!(parse_ip("[::1]:80"), Some(ip("::1")));
        assert_eq!(parse_ip(" ::1 "), Some(ip("::1")));
        assert_eq!(parse_ip("[::1]"), Some(ip("::1")));
        assert_eq!(parse_ip("nope"), None);
        assert_eq!(parse_ip("1.2.3.4:x"), None);
        assert_eq!(parse_ip(""), None);
    }

    #[test]
    fn client_behind_trusted_hops() {
        let peer = Some(ip("10.0.0.1"));
        let xff: &[&[u8]] = &[b"6.6.6.6, 1.2.3.4", b" 10.0.0.9"];
        assert_eq!(client_ip(peer, xff, 0), peer);
        assert_eq!(client_ip(peer, xff, 1), Some(ip("10.0.0.9")));
        assert_eq!(client_ip(peer, xff, 2), Some(ip("1.2.3.4")));
        assert_eq!(client_ip(peer, xff, 3), Some(ip("6.6.6.6")));
        // Shorter than the hops: not through the proxies, the peer is the client.
        assert_eq!(client_ip(peer, xff, 4), peer);
        assert_eq!(client_ip(peer, &[b"garbage"], 1), peer);
        assert_eq!(client_ip(peer, &[], 1), peer);
        assert_eq!(sanitized_xff(ip("1.2.3.4"), xff, 2), "1.2.3.4, 10.0.0.9");
        assert_eq!(sanitized_xff(ip("10.0.0.1"), xff, 0), "10.0.0.1");
        assert_eq!(sanitized_xff(ip("10.0.0.9"), xff, 1), "10.0.0.9");
    }
}
