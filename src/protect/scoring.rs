//! Behaviour scoring: per client, count bad outcomes (4xx answers, WAF interruptions) in a
//! sliding window; at the threshold, block the client for a cool-down.
//!
//! The window is the classic two-bucket estimate: the count of the current fixed window plus
//! the previous window's count weighted by how much of it still overlaps the sliding window.
//! State per client is 40 bytes in one shared-data slot (same slot scheme as the rate
//! limiter: bounded memory, stable hashing across workers).

/// One client's record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Score {
    pub owner: u64,
    /// Start of the current fixed window (ms since the epoch).
    pub window_start: u64,
    pub current: u32,
    pub previous: u32,
    /// Blocked while `now < blocked_until` (ms since the epoch).
    pub blocked_until: u64,
    /// How many times this client has been blocked (for logs).
    pub blocks: u64,
}

pub const SCORE_BYTES: usize = 40;

impl Score {
    pub fn encode(&self) -> [u8; SCORE_BYTES] {
        let mut out = [0u8; SCORE_BYTES];
        let counts = u64::from(self.current) | (u64::from(self.previous) << 32);
        for (dst, src) in out.chunks_exact_mut(8).zip([self.owner, self.window_start, counts, self.blocked_until, self.blocks]) {
            dst.copy_from_slice(&src.to_le_bytes());
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Option<Score> {
        if bytes.len() != SCORE_BYTES {
            return None;
        }
        let mut w = bytes.chunks_exact(8).filter_map(|c| c.try_into().ok().map(u64::from_le_bytes));
        let owner = w.next()?;
        let window_start = w.next()?;
        let counts = w.next()?;
        Some(Score {
            owner,
            window_start,
            current: counts as u32,
            previous: (counts >> 32) as u32,
            blocked_until: w.next()?,
            blocks: w.next()?,
        })
    }

    /// Whether this record blocks `owner` at `now_ms`.
    pub fn blocks(&self, owner: u64, now_ms: u64) -> bool {
        self.owner == owner && now_ms < self.blocked_until
    }
}

/// Scoring parameters (all in ms / counts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    pub window_ms: u64,
    pub threshold: u32,
    pub block_ms: u64,
}

/// The record after one more bad outcome at `now_ms`, and whether this outcome started a block.
pub fn record(prev: Option<Score>, owner: u64, now_ms: u64, p: Policy) -> (Score, bool) {
    let window = p.window_ms.max(1);
    let mut s = match prev {
        Some(s) if s.owner == owner => s,
        _ => Score { owner, window_start: now_ms, ..Score::default() },
    };
    if now_ms >= s.window_start.saturating_add(window) {
        let windows = (now_ms - s.window_start) / window;
        s.previous = if windows == 1 { s.current } else { 0 };
        s.current = 0;
        s.window_start = s.window_start.saturating_add(windows.saturating_mul(window));
    }
    s.current = s.current.saturating_add(1);
    let into = now_ms.saturating_sub(s.window_start).min(window);
    let weight = (window - into) as f64 / window as f64;
    let estimate = f64::from(s.current) + f64::from(s.previous) * weight;
    let already = now_ms < s.blocked_until;
    if !already && estimate >= f64::from(p.threshold.max(1)) {
        s.blocked_until = now_ms.saturating_add(p.block_ms);
        s.blocks = s.blocks.saturating_add(1);
        // Start over after the cool-down.
        s.current = 0;
        s.previous = 0;
        s.window_start = now_ms;
        return (s, true);
    }
    (s, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: Policy = Policy { window_ms: 10_000, threshold: 5, block_ms: 60_000 };

    #[test]
    fn threshold_in_window_blocks_for_the_cool_down() {
        let mut s = None;
        for i in 0..4 {
            let (n, blocked) = record(s, 9, 1_000 + i * 100, P);
            assert!(!blocked);
            s = Some(n);
        }
        let (n, blocked) = record(s, 9, 1_500, P);
        assert!(blocked);
        assert!(n.blocks(9, 1_500) && n.blocks(9, 61_499));
        assert!(!n.blocks(9, 61_500));
        assert!(!n.blocks(8, 2_000));
        assert_eq!(n.blocks, 1);
    }

    #[test]
    fn slow_trickle_never_blocks() {
        // One bad answer every 3 s with a 10 s window: at most ~4 in any window.
        let mut s = None;
        for i in 0..100 {
            let (n, blocked) = record(s, 1, i * 3_000, P);
            assert!(!blocked, "at {i}");
            s = Some(n);
        }
    }

    #[test]
    fn previous_window_counts_while_it_overlaps() {
        let mut s = None;
        for t in [1_000, 1_100, 1_200, 1_300] {
            s = Some(record(s, 1, t, P).0);
        }
        // Next window, 1 s in: 4 * 0.9 + 1 = 4.6 < 5; 2 more -> blocked.
        let (n, b) = record(s, 1, 12_000, P);
        assert!(!b);
        let (_, b) = record(Some(n), 1, 12_000, P);
        assert!(b);
        // Two windows later the old counts are gone.
        let (n, b) = record(s, 1, 40_000, P);
        assert!(!b);
        assert_eq!((n.current, n.previous), (1, 0));
    }

    #[test]
    fn encoding_round_trips() {
        let s = Score { owner: 3, window_start: 4, current: 5, previous: u32::MAX, blocked_until: 7, blocks: 8 };
        assert_eq!(Score::decode(&s.encode()), Some(s));
        assert_eq!(Score::decode(&[1, 2, 3]), None);
    }
}
