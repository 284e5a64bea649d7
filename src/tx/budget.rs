//! The memory budget: what the transactions in flight on one thread hold, counted in one
//! place, so that no request (nor any number of them at once) can make the VM run out of
//! memory.
//!
//! A proxy-wasm VM is one thread with one linear memory (at most 1 GiB in Envoy's V8 host,
//! and it never shrinks), and a native host runs one engine per worker thread: the budget
//! is per thread. Every transaction on the thread charges a [`Charge`] for what it holds
//! beyond its fixed-size state, and gives it back when the transaction ends:
//!
//! - the request and response body it buffered (`Transaction::append_request_body`,
//!   `append_response_body`: the buffer's growth is charged before it is allocated, with
//!   [`append`]), and with a request body that will be parsed, as much again for its
//!   parse: the body processors make at most about their input of names and values (a
//!   JSON body's output is capped at that reservation and the room left), so a body taken
//!   in can always be parsed;
//! - the parsed body (arguments, JSON, XML and multipart lists), which takes the place of
//!   the reservation once made;
//! - the byte strings of its memo tables while a phase runs (transformation results, copies
//!   of request values, the lowercase forms of large ones: `cache::Cache`), charged as they
//!   are made and given back when the tables are emptied after the phase.
//!
//! Not charged: state of a size fixed by constants (the transaction and its tables, the
//! spares kept for the next transactions, the thread's memo of earlier values), the rule
//! set, and transient scratch of one step (a transformation's output before it is kept).
//! Those are the headroom the VM needs above the budget (see docs/limits.md).
//!
//! Bodies (with their reservations) may take [`for_bodies`] of the budget, three quarters:
//! the last quarter is room for the phase running (one at a time on a thread), so that
//! bodies held by slow or stalled clients cannot leave requests no room to be inspected.
//!
//! Over the budget, a request gets the documented answer (`Transaction`): its body is
//! refused with 413 (or, with `SecRequestBodyLimitAction ProcessPartial`, inspected as far
//! as it fits), and a phase whose memo tables would pass the budget stops and answers 413.
//! The budget is the rule set's `Settings::memory_budget` (plugin configuration
//! `memory_budget_bytes`), compared with everything the thread's transactions hold.

use std::cell::Cell;

/// The budget when the configuration sets none (see [`crate::compile::DEFAULT_MEMORY_BUDGET`]).
pub const DEFAULT: usize = crate::compile::DEFAULT_MEMORY_BUDGET;

/// The smallest and largest budgets a configuration may set: below 1 MiB ordinary bodies
/// would be refused; above 384 MiB the linear memory of a V8 VM (about twice the budget at
/// its peak) could reach its 1 GiB end.
pub const MIN: usize = 1 << 20;
pub const MAX: usize = 384 << 20;

thread_local! {
    /// Bytes charged by the thread's live [`Charge`]s.
    static HELD: Cell<usize> = const { Cell::new(0) };
}

/// Bytes the transactions of this thread hold against the budget now.
pub fn held() -> usize {
    HELD.try_with(Cell::get).unwrap_or(0)
}

/// Bytes that can still be charged on this thread under `limit`.
pub fn room(limit: usize) -> usize {
    limit.saturating_sub(held())
}

/// The part of budget `limit` that bodies and their reservations may take (see the module
/// docs).
pub fn for_bodies(limit: usize) -> usize {
    limit - limit / 4
}

fn add_held(n: usize) {
    let _ = HELD.try_with(|h| h.set(h.get().saturating_add(n)));
}

fn sub_held(n: usize) {
    let _ = HELD.try_with(|h| h.set(h.get().saturating_sub(n)));
}

/// The bytes one holder (a transaction, a memo table) has charged to its thread's budget;
/// given back when it is dropped or released.
#[derive(Debug, Default)]
pub struct Charge {
    bytes: usize,
}

impl Charge {
    /// Charges `n` more bytes when the thread's total stays within `limit`; false (nothing
    /// charged) otherwise.
    pub fn try_add(&mut self, n: usize, limit: usize) -> bool {
        if n > room(limit) {
            return false;
        }
        self.add(n);
        true
    }

    /// Charges `n` more bytes whatever the total (for what was already allocated within a
    /// bound: the caller checks [`Charge::over`] after).
    pub fn add(&mut self, n: usize) {
        self.bytes = self.bytes.saturating_add(n);
        add_held(n);
    }

    /// Gives `n` of its bytes back (at most what it holds).
    pub fn sub(&mut self, n: usize) {
        let n = n.min(self.bytes);
        self.bytes -= n;
        sub_held(n);
    }

    /// Whether the thread's total is over `limit`.
    pub fn over(&self, limit: usize) -> bool {
        held() > limit
    }

    /// The bytes this holder has charged.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Gives everything back.
    pub fn release(&mut self) {
        sub_held(std::mem::take(&mut self.bytes));
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.release();
    }
}

/// Appends `chunk` to `buf`, its growth charged to `charge` within `limit` before it is
/// allocated, and the allocation itself fallible: false (nothing appended, nothing charged)
/// when the growth does not fit the budget or the memory cannot be had. The buffer grows to
/// `expected` bytes at once when the chunk fits in them (the length the body announced:
/// one allocation, none of the copies and freed blocks of doubling), else doubles while the
/// doubling fits, else grows by what the chunk needs.
pub(crate) fn append(buf: &mut Vec<u8>, chunk: &[u8], charge: &mut Charge, limit: usize, expected: usize) -> bool {
    let need = buf.len().saturating_add(chunk.len());
    let cap = buf.capacity();
    if need > cap {
        let room = room(limit);
        let doubled = need.max(cap.saturating_mul(2)).max(16 * 1024);
        let target = if expected >= need && expected - cap <= room {
            expected
        } else if doubled - cap <= room {
            doubled
        } else {
            need
        };
        if !charge.try_add(target - cap, limit) {
            return false;
        }
        if buf.try_reserve_exact(target - buf.len()).is_err() {
            charge.sub(target - cap);
            return false;
        }
        // The allocator may give more than asked: what it gave is what the buffer holds.
        charge.add(buf.capacity().saturating_sub(target));
    }
    buf.extend_from_slice(chunk);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_count_for_the_thread_and_come_back_when_dropped() {
        let base = held();
        let mut a = Charge::default();
        assert!(a.try_add(600, base + 1000));
        let mut b = Charge::default();
        assert!(!b.try_add(401, base + 1000), "over the limit: refused");
        assert_eq!(b.bytes(), 0);
        assert!(b.try_add(400, base + 1000));
        assert_eq!(held(), base + 1000);
        assert_eq!(room(base + 1000), 0);
        drop(a);
        assert_eq!(held(), base + 400);
        b.add(10_000);
        assert!(b.over(base + 1000));
        b.sub(9_000);
        assert_eq!(held(), base + 1_400);
        b.release();
        assert_eq!((held(), b.bytes()), (base, 0));
    }

    #[test]
    fn a_buffer_grows_only_within_the_budget() {
        let base = held();
        let limit = base + 100_000;
        let mut buf = Vec::new();
        let mut c = Charge::default();
        assert!(append(&mut buf, &[b'a'; 10_000], &mut c, limit, 0));
        assert_eq!(c.bytes(), buf.capacity(), "the capacity is what is charged");
        // Doubling while it fits, then exactly what the data needs.
        while append(&mut buf, &[b'b'; 10_000], &mut c, limit, 0) {
            assert_eq!(c.bytes(), buf.capacity());
            assert!(held() <= limit);
        }
        assert!(buf.len() <= 100_000 && buf.len() >= 90_000, "{}", buf.len());
        let len = buf.len();
        assert!(!append(&mut buf, &[b'c'; 20_000], &mut c, limit, 0));
        assert_eq!(buf.len(), len, "a refused chunk leaves the buffer as it was");
        assert!(buf.iter().all(|&b| b == b'a' || b == b'b'));
        drop(c);
        assert_eq!(held(), base);
        // An announced length is allocated at once, when it fits.
        let (mut buf, mut c) = (Vec::new(), Charge::default());
        assert!(append(&mut buf, &[b'a'; 1000], &mut c, limit, 50_000));
        assert_eq!((buf.capacity(), c.bytes()), (50_000, 50_000));
        assert!(append(&mut buf, &[b'a'; 49_000], &mut c, limit, 50_000));
        assert_eq!(buf.capacity(), 50_000, "no growth after");
        let (mut buf, mut c) = (Vec::new(), Charge::default());
        assert!(append(&mut buf, &[b'a'; 1000], &mut c, limit, 1 << 30));
        assert!(buf.capacity() < 100_000, "an announced length past the budget is not allocated");
    }
}
