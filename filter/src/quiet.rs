//! Requests that need no transaction: the same as one of the last quiet ones of their plugin
//! configuration (per wasm VM, that is per worker; per process for the dynamic module) but for
//! their `x-request-id`.
//!
//! Under a rule set allowing it (`Ruleset::quiet_again`: no response phases, no rule whose
//! first link reads what a new request id changes, ...), a transaction that ran every phase
//! with no rule matching (`Transaction::quiet`) would run the same way for a request whose
//! engine input is the same but for the id. The filter keeps the last [`RECORDS`] different
//! such requests ([`Records`]; each a [`Record`]: its header block and the body bytes
//! the engine was given; several, so that interleaved repeated requests, such as health checks
//! next to an API's polling, each find theirs) and lets a request that matches one through
//! without a transaction. Without a body to inspect the header block
//! decides at once; with one the decision waits for the body's end (the filter holds the request): the same
//! bytes pass, anything else gets its transaction then, phase 1 included (which these headers
//! cannot fail: they are the quiet request's).

use std::sync::Arc;

use wafer::body::pairs::{same_except, value_range};
use wafer::Ruleset;

/// The largest header block or body a stream copies to become a record (and the largest
/// buffers it keeps for the next stream).
const KEEP: usize = 16 * 1024;

/// How many quiet requests a configuration keeps.
pub const RECORDS: usize = 4;

/// A quiet request: what the engine was given of it.
pub struct Record {
    pub ruleset: Arc<Ruleset>,
    /// Its header block as the host serialized it.
    block: Vec<u8>,
    /// Where its `x-request-id` value lies in `block` (found once: every request that is not
    /// a record's is compared with each record).
    id: Option<std::ops::Range<usize>>,
    /// The body bytes the engine was given; `None` when it was given no body (there was
    /// none, or the rule set reads none).
    body: Option<Vec<u8>>,
}

impl Record {
    /// The body a request must have to pass as this one (when it has one).
    pub fn body(&self) -> &[u8] {
        self.body.as_deref().unwrap_or_default()
    }
}

/// What the records say of a request, given its header block.
pub enum Verdict {
    /// A record's, with no body to read: no transaction.
    Pass,
    /// A record's headers; the body decides (the filter holds the request until it ends).
    Defer(Arc<Record>),
    /// A transaction, as usual.
    Run,
}

/// The last quiet requests, at most one per header block (but for the id); the oldest
/// gives way to a new one.
#[derive(Default)]
pub struct Records {
    slots: [Option<Arc<Record>>; RECORDS],
    /// The slot the next new record takes.
    next: usize,
}

impl Records {
    /// The slot whose record has this rule set and this block but for the id.
    fn find(&self, ruleset: &Arc<Ruleset>, block: &[u8]) -> Option<usize> {
        self.slots.iter().position(|r| r.as_ref().is_some_and(|r| Arc::ptr_eq(&r.ruleset, ruleset) && same_except(&r.block, block, r.id.clone())))
    }

    /// What the records say of a request, given its header block: `reads_body` when the engine
    /// would be given this request's body.
    pub fn verdict(&self, ruleset: &Arc<Ruleset>, block: &[u8], reads_body: bool) -> Verdict {
        let Some(record) = self.find(ruleset, block).and_then(|i| self.slots.get(i)).and_then(Option::as_ref) else {
            return Verdict::Run;
        };
        match (reads_body, record.body.is_some()) {
            (false, false) => Verdict::Pass,
            (true, true) => Verdict::Defer(record.clone()),
            _ => Verdict::Run,
        }
    }

    /// Keeps `record` in place of the one with its block, else of the oldest; returns the
    /// record it replaced.
    fn keep(&mut self, record: Arc<Record>) -> Option<Arc<Record>> {
        let i = self.find(&record.ruleset, &record.block).unwrap_or_else(|| {
            let i = self.next;
            self.next = (i + 1) % RECORDS;
            i
        });
        self.slots.get_mut(i)?.replace(record)
    }
}

/// A stream's copy of its request while its transaction may become a record. The buffers
/// are kept from stream to stream (up to [`KEEP`]).
#[derive(Default)]
pub struct Candidate {
    /// The header block; empty when the stream is not a candidate (a host's block never is).
    block: Vec<u8>,
    body: Vec<u8>,
    /// Whether the engine is given the body (else `body` stays empty and unused).
    with_body: bool,
}

impl Candidate {
    /// Makes the stream a candidate with its header block.
    pub fn arm(&mut self, block: &[u8], with_body: bool) {
        if self.block.capacity() > KEEP {
            self.block = Vec::new();
        }
        self.block.clear();
        self.body.clear();
        if block.len() <= KEEP {
            self.block.extend_from_slice(block);
        }
        self.with_body = with_body;
    }

    /// Not a candidate any more.
    pub fn disarm(&mut self) {
        self.block.clear();
        self.body.clear();
        if self.body.capacity() > KEEP {
            self.body = Vec::new();
        }
    }

    /// Copies a chunk given to the engine; a body larger than [`KEEP`] ends the candidacy.
    pub fn keep_body(&mut self, chunk: &[u8]) {
        if self.block.is_empty() {
            return;
        }
        if self.body.len().saturating_add(chunk.len()) > KEEP {
            self.disarm();
        } else {
            self.body.extend_from_slice(chunk);
        }
    }

    /// At the stream's end, with its transaction quiet: the candidate becomes a record; the
    /// buffers of the one it replaces serve the next stream when no deferred stream still
    /// holds it.
    pub fn become_record(&mut self, records: &mut Records, ruleset: &Arc<Ruleset>) {
        if self.block.is_empty() {
            return;
        }
        let body = self.with_body.then(|| std::mem::take(&mut self.body));
        let block = std::mem::take(&mut self.block);
        let record = Arc::new(Record { ruleset: ruleset.clone(), id: value_range(&block, b"x-request-id"), block, body });
        if let Some(old) = records.keep(record).and_then(|old| Arc::try_unwrap(old).ok()) {
            self.block = old.block;
            self.body = old.body.unwrap_or_default();
        }
        self.disarm();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wafer::body::pairs::block_of;

    fn block(id: &[u8], extra: &[u8]) -> Vec<u8> {
        block_of(&[(b":method", b"POST"), (b":path", b"/api"), (b"x-request-id", id), (b"x-extra", extra)])
    }

    #[test]
    fn the_record_decides_by_block_and_body() {
        let rs = Arc::new(Ruleset::compile("t", "Include @targeted").unwrap());
        let other = Arc::new(Ruleset::compile("t", "Include @targeted").unwrap());
        let mut last = Records::default();
        assert!(matches!(last.verdict(&rs, &block(b"1", b"a"), false), Verdict::Run));
        // A bodiless quiet request.
        let mut c = Candidate::default();
        c.arm(&block(b"1", b"a"), false);
        c.become_record(&mut last, &rs);
        assert!(matches!(last.verdict(&rs, &block(b"2", b"a"), false), Verdict::Pass));
        assert!(matches!(last.verdict(&rs, &block(b"2", b"a"), true), Verdict::Run), "a body the record had not");
        assert!(matches!(last.verdict(&rs, &block(b"2", b"b"), false), Verdict::Run));
        assert!(matches!(last.verdict(&other, &block(b"2", b"a"), false), Verdict::Run), "another rule set");
        // One with a body.
        c.arm(&block(b"3", b"a"), true);
        c.keep_body(b"{\"a\":");
        c.keep_body(b"1}");
        c.become_record(&mut last, &rs);
        match last.verdict(&rs, &block(b"4", b"a"), true) {
            Verdict::Defer(r) => assert_eq!(r.body(), b"{\"a\":1}"),
            _ => panic!("not deferred"),
        }
        assert!(matches!(last.verdict(&rs, &block(b"4", b"a"), false), Verdict::Run), "no body where the record had one");
        // A body over KEEP, or a block: no record; the last one stays.
        c.arm(&block(b"5", b"c"), true);
        c.keep_body(&vec![b'x'; KEEP]);
        c.keep_body(b"y");
        c.become_record(&mut last, &rs);
        assert!(matches!(last.verdict(&rs, &block(b"6", b"c"), true), Verdict::Run));
        assert!(matches!(last.verdict(&rs, &block(b"6", b"a"), true), Verdict::Defer(_)));
        c.arm(&block(b"5", &vec![b'z'; KEEP]), false);
        c.become_record(&mut last, &rs);
        assert!(matches!(last.verdict(&rs, &block(b"6", b"a"), true), Verdict::Defer(_)));
    }

    #[test]
    fn interleaved_requests_each_keep_their_record() {
        let rs = Arc::new(Ruleset::compile("t", "Include @headers-only").unwrap());
        let mut last = Records::default();
        let mut c = Candidate::default();
        let paths: Vec<Vec<u8>> = (0..=RECORDS).map(|i| format!("/path{i}").into_bytes()).collect();
        let req = |path: &[u8], id: &[u8]| block_of(&[(b":method", b"GET"), (b":path", path), (b"x-request-id", id)]);
        for p in &paths[..RECORDS] {
            c.arm(&req(p, b"1"), false);
            c.become_record(&mut last, &rs);
        }
        for p in &paths[..RECORDS] {
            assert!(matches!(last.verdict(&rs, &req(p, b"2"), false), Verdict::Pass), "{p:?}");
        }
        // The same request again replaces its own record, not the oldest.
        c.arm(&req(&paths[2], b"3"), false);
        c.become_record(&mut last, &rs);
        assert!(matches!(last.verdict(&rs, &req(&paths[0], b"4"), false), Verdict::Pass));
        // One more: the oldest gives way.
        c.arm(&req(&paths[RECORDS], b"5"), false);
        c.become_record(&mut last, &rs);
        assert!(matches!(last.verdict(&rs, &req(&paths[0], b"6"), false), Verdict::Run));
        for p in &paths[1..] {
            assert!(matches!(last.verdict(&rs, &req(p, b"6"), false), Verdict::Pass), "{p:?}");
        }
    }

    #[test]
    fn a_held_record_is_not_reused() {
        let rs = Arc::new(Ruleset::compile("t", "Include @targeted").unwrap());
        let mut last = Records::default();
        let mut c = Candidate::default();
        c.arm(&block(b"1", b"a"), true);
        c.keep_body(b"body one");
        c.become_record(&mut last, &rs);
        let Verdict::Defer(held) = last.verdict(&rs, &block(b"2", b"a"), true) else { panic!("not deferred") };
        c.arm(&block(b"3", b"b"), true);
        c.keep_body(b"body two");
        c.become_record(&mut last, &rs);
        // The deferred stream still compares with the record it was given.
        assert_eq!(held.body(), b"body one");
        assert!(matches!(last.verdict(&rs, &block(b"4", b"b"), true), Verdict::Defer(r) if r.body() == b"body two"));
    }
}
