//! Token buckets, one per (limit, client key), stored by the host in shared data.
//!
//! The engine decides and encodes; the adapter reads a slot, calls [`take`], and writes the
//! new state back with compare-and-swap (retrying when another worker wrote in between).
//!
//! Memory is bounded by construction: a key maps to one of `max_clients` slots (a stable
//! 64-bit FNV-1a hash, the same in every worker). A slot remembers whose bucket it holds
//! (the key's hash); a different key landing on it takes it over with a full bucket. So
//! shared data never holds more than `max_clients` buckets of 24 bytes, whatever the number
//! of clients; the price is that two clients colliding on one slot reset each other's bucket
//! (rare below `max_clients` active clients).

/// Bucket state: whose bucket, tokens (in thousandths), last refill (ms since the epoch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    pub owner: u64,
    pub milli_tokens: u64,
    pub last_ms: u64,
}

pub const BUCKET_BYTES: usize = 24;

impl Bucket {
    pub fn encode(&self) -> [u8; BUCKET_BYTES] {
        let mut out = [0u8; BUCKET_BYTES];
        for (dst, src) in out.chunks_exact_mut(8).zip([self.owner, self.milli_tokens, self.last_ms]) {
            dst.copy_from_slice(&src.to_le_bytes());
        }
        out
    }

    /// `None` for anything that is not a bucket (treated as an empty slot).
    pub fn decode(bytes: &[u8]) -> Option<Bucket> {
        if bytes.len() != BUCKET_BYTES {
            return None;
        }
        let mut words = bytes.chunks_exact(8).filter_map(|c| c.try_into().ok().map(u64::from_le_bytes));
        Some(Bucket { owner: words.next()?, milli_tokens: words.next()?, last_ms: words.next()? })
    }
}

/// One limit: `rate` tokens per second, at most `burst` tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limit {
    pub per_second: f64,
    pub burst: u32,
}

/// The verdict for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    /// Seconds until one token is back (for `Retry-After`), at least 1 when refused.
    pub retry_after: u64,
    pub state: Bucket,
}

/// Refills the bucket of `owner` up to `now_ms` and takes one token if there is one.
/// `prev` is the slot's current content (`None` or another owner: a full new bucket).
/// A clock going backwards refills nothing.
pub fn take(prev: Option<Bucket>, owner: u64, now_ms: u64, limit: Limit) -> Decision {
    let cap = u64::from(limit.burst.max(1)).saturating_mul(1000);
    let mut b = match prev {
        Some(b) if b.owner == owner => b,
        _ => Bucket { owner, milli_tokens: cap, last_ms: now_ms },
    };
    let elapsed = now_ms.saturating_sub(b.last_ms);
    // tokens/s * ms = milli-tokens.
    let refill = (limit.per_second.max(0.0) * elapsed as f64).min(cap as f64) as u64;
    b.milli_tokens = b.milli_tokens.saturating_add(refill).min(cap);
    b.last_ms = b.last_ms.max(now_ms);
    if b.milli_tokens >= 1000 {
        b.milli_tokens -= 1000;
        Decision { allowed: true, retry_after: 0, state: b }
    } else {
        let missing = (1000 - b.milli_tokens) as f64;
        let secs = if limit.per_second > 0.0 { (missing / 1000.0 / limit.per_second).ceil() as u64 } else { 3600 };
        Decision { allowed: false, retry_after: secs.max(1), state: b }
    }
}

/// 64-bit FNV-1a: stable across workers and builds (unlike std's randomized hasher).
pub fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &b in *part {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        // Separator so ("ab","c") and ("a","bc") differ.
        h ^= 0xff;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The slot of a key among `slots` (never 0 slots: treated as 1).
pub fn slot(owner: u64, slots: u32) -> u64 {
    // Use the high bits for the slot so the slot and the owner check are not the same bits.
    (owner >> 32).wrapping_add(owner.rotate_left(17)) % u64::from(slots.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: Limit = Limit { per_second: 10.0, burst: 20 };

    #[test]
    fn burst_then_refill() {
        let mut state = None;
        let mut allowed = 0;
        for _ in 0..25 {
            let d = take(state, 7, 1_000, L);
            allowed += u32::from(d.allowed);
            state = Some(d.state);
        }
        assert_eq!(allowed, 20);
        let d = take(state, 7, 1_000, L);
        assert!(!d.allowed);
        assert_eq!(d.retry_after, 1);
        // 10/s: 250 ms later two tokens are back, not three.
        let d1 = take(state, 7, 1_250, L);
        assert!(d1.allowed);
        let d2 = take(Some(d1.state), 7, 1_250, L);
        assert!(d2.allowed);
        assert!(!take(Some(d2.state), 7, 1_250, L).allowed);
        // Never more than the burst after a long pause.
        let mut s = Some(take(state, 7, 1_000_000, L).state);
        let mut n = 1;
        while take(s, 7, 1_000_000, L).allowed {
            s = Some(take(s, 7, 1_000_000, L).state);
            n += 1;
        }
        assert_eq!(n, 20);
    }

    #[test]
    fn other_owner_gets_a_fresh_bucket_and_clock_skew_is_harmless() {
        let empty = Bucket { owner: 1, milli_tokens: 0, last_ms: 5_000 };
        assert!(!take(Some(empty), 1, 5_000, L).allowed);
        assert!(take(Some(empty), 2, 5_000, L).allowed);
        // Clock behind the stored time: no refill, no panic.
        let d = take(Some(empty), 1, 10, L);
        assert!(!d.allowed && d.state.last_ms == 5_000);
    }

    #[test]
    fn slow_rates_and_zero() {
        let l = Limit { per_second: 0.1, burst: 1 };
        let d = take(None, 1, 0, l);
        assert!(d.allowed);
        let d = take(Some(d.state), 1, 0, l);
        assert!(!d.allowed);
        assert_eq!(d.retry_after, 10);
        let z = Limit { per_second: 0.0, burst: 1 };
        let d = take(None, 1, 0, z);
        assert!(!take(Some(d.state), 1, 99_999_999, z).allowed);
    }

    #[test]
    fn encoding_round_trips_and_rejects_junk() {
        let b = Bucket { owner: u64::MAX, milli_tokens: 12_345, last_ms: 1 << 40 };
        assert_eq!(Bucket::decode(&b.encode()), Some(b));
        assert_eq!(Bucket::decode(b"short"), None);
        assert_eq!(Bucket::decode(&[0; 25]), None);
    }

    #[test]
    fn hashing_is_stable_and_slots_are_in_range() {
        assert_eq!(fnv1a(&[b"a"]), fnv1a(&[b"a"]));
        assert_ne!(fnv1a(&[b"ab", b"c"]), fnv1a(&[b"a", b"bc"]));
        for i in 0..1000u32 {
            let h = fnv1a(&[&i.to_le_bytes()]);
            assert!(slot(h, 100) < 100);
        }
        assert_eq!(slot(12345, 0), 0);
    }
}
