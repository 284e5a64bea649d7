//! `@ipMatch` / `@ipMatchFromFile`: IPv4/IPv6 addresses and CIDR ranges.
//!
//! Example: `SecRule REMOTE_ADDR "@ipMatch 10.0.0.0/8,192.168.1.1" "id:1,deny"`.

use std::net::IpAddr;

#[derive(Debug, Default)]
pub struct IpSet {
    v4: Vec<(u32, u32)>,   // (network, mask)
    v6: Vec<(u128, u128)>,
}

fn mask4(bits: u32) -> u32 {
    if bits == 0 { 0 } else { u32::MAX << (32 - bits.min(32)) }
}

fn mask6(bits: u32) -> u128 {
    if bits == 0 { 0 } else { u128::MAX << (128 - bits.min(128)) }
}

impl IpSet {
    pub fn parse(list: &str) -> Result<IpSet, String> {
        let mut set = IpSet::default();
        for item in list.split([',', ' ', '\n']).map(str::trim).filter(|s| !s.is_empty()) {
            let (addr, bits) = match item.split_once('/') {
                Some((a, b)) => (a, Some(b.parse::<u32>().map_err(|_| format!("@ipMatch: bad prefix length in \"{item}\""))?)),
                None => (item, None),
            };
            match addr.parse::<IpAddr>().map_err(|_| format!("@ipMatch: bad address \"{item}\""))? {
                IpAddr::V4(a) => {
                    let m = mask4(bits.unwrap_or(32));
                    if bits.is_some_and(|b| b > 32) {
                        return Err(format!("@ipMatch: bad prefix length in \"{item}\""));
                    }
                    set.v4.push((u32::from(a) & m, m));
                }
                IpAddr::V6(a) => {
                    let m = mask6(bits.unwrap_or(128));
                    if bits.is_some_and(|b| b > 128) {
                        return Err(format!("@ipMatch: bad prefix length in \"{item}\""));
                    }
                    set.v6.push((u128::from(a) & m, m));
                }
            }
        }
        Ok(set)
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        match ip {
            IpAddr::V4(a) => {
                let a = u32::from(a);
                self.v4.iter().any(|&(n, m)| a & m == n)
            }
            IpAddr::V6(a) => {
                if let Some(v4) = a.to_ipv4_mapped() {
                    return self.contains(IpAddr::V4(v4));
                }
                let a = u128::from(a);
                self.v6.iter().any(|&(n, m)| a & m == n)
            }
        }
    }

    pub fn contains_str(&self, s: &str) -> bool {
        s.trim().parse::<IpAddr>().is_ok_and(|ip| self.contains(ip))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v4_v6_and_cidr() {
        let s = IpSet::parse("127.0.0.1,10.0.0.0/8, ::1, 2001:db8::/32").unwrap();
        assert!(s.contains_str("127.0.0.1") && s.contains_str("10.2.3.4") && s.contains_str("::1"));
        assert!(s.contains_str("2001:db8:1::5") && !s.contains_str("11.0.0.1") && !s.contains_str("junk"));
        assert!(IpSet::parse("1.2.3.4/40").is_err() && IpSet::parse("nope").is_err());
    }
}
