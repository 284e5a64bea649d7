//! Name-value pairs (arguments, headers, cookies) in a few large buffers instead of two
//! allocations per pair.

/// Where a parser puts the `(name, value)` pairs it finds, in order.
pub trait PairSink {
    /// Appends a pair whose name is the concatenation of `name`'s parts.
    fn push_parts(&mut self, name: &[&[u8]], value: &[u8]);

    /// Appends a pair.
    fn push_pair(&mut self, name: &[u8], value: &[u8]) {
        self.push_parts(&[name], value);
    }
}

impl PairSink for Vec<(Vec<u8>, Vec<u8>)> {
    fn push_parts(&mut self, name: &[&[u8]], value: &[u8]) {
        self.push((name.concat(), value.to_vec()));
    }
}

/// Pairs stored in chunks of bytes. A chunk is never grown past the capacity it was made
/// with, so the bytes of a pair never move while the pairs live: the engine keys request
/// values by their address for the whole transaction.
#[derive(Default)]
pub struct Pairs {
    chunks: Vec<Vec<u8>>,
    /// Per pair: its chunk, where its name starts and ends there, where its value starts and
    /// ends.
    spans: Vec<[usize; 5]>,
}

/// Smallest chunk (a browser's request headers fit in one).
const CHUNK: usize = 4096;

impl Pairs {
    /// Becomes a copy of `other`, in its own allocations where they are large enough.
    pub fn copy_from(&mut self, other: &Pairs) {
        self.chunks.clone_from(&other.chunks);
        self.spans.clone_from(&other.spans);
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Keeps the first `n` pairs (their bytes stay where they are until the pairs are dropped).
    pub fn truncate(&mut self, n: usize) {
        self.spans.truncate(n);
    }

    /// Removes every pair, keeping one emptied chunk of the smallest size for the next pairs
    /// (a recycled request's headers then need no allocation).
    pub fn clear(&mut self) {
        self.chunks.truncate(1);
        self.chunks.retain(|c| c.capacity() == CHUNK);
        if let Some(c) = self.chunks.first_mut() {
            c.clear();
        }
        self.spans.clear();
        if self.spans.capacity() > 256 {
            self.spans = Vec::new();
        }
    }

    pub fn get(&self, i: usize) -> Option<(&[u8], &[u8])> {
        pair(&self.chunks, self.spans.get(i)?)
    }

    /// Appends the pairs of a serialized block (see [`block_spans`]) whose names `keep`
    /// accepts. The block becomes one of the chunks: its bytes are not copied.
    pub fn push_block(&mut self, block: Vec<u8>, keep: impl Fn(&[u8]) -> bool) {
        let c = self.chunks.len();
        for (name, value) in block_spans(&block) {
            if block.get(name.clone()).is_some_and(&keep) {
                self.spans.push([c, name.start, name.end, value.start, value.end]);
            }
        }
        self.chunks.push(block);
    }

    pub fn iter(&self) -> Iter<'_> {
        Iter { chunks: &self.chunks, spans: self.spans.iter() }
    }

    /// The bytes the pairs' buffers hold (their capacities).
    pub fn retained_bytes(&self) -> usize {
        self.chunks.iter().map(Vec::capacity).sum::<usize>() + self.spans.capacity() * std::mem::size_of::<[usize; 5]>()
    }

    /// The pairs as owned vectors (tests, logs).
    pub fn to_vec(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect()
    }
}

fn pair<'a>(chunks: &'a [Vec<u8>], &[c, name, name_end, value, end]: &[usize; 5]) -> Option<(&'a [u8], &'a [u8])> {
    let chunk = chunks.get(c)?;
    Some((chunk.get(name..name_end)?, chunk.get(value..end)?))
}

/// The `(name, value)` ranges of a serialized block of pairs, in order: a little-endian
/// `u32` count N, N pairs of `u32` lengths (name, value), then each name and each value
/// followed by a NUL (proxy-wasm's serialization of header maps). Ends at the first pair the
/// block does not hold.
pub fn block_spans(block: &[u8]) -> BlockSpans<'_> {
    let n = u32_at(block, 0).unwrap_or(0);
    let data = n.checked_mul(8).and_then(|t| t.checked_add(4)).unwrap_or(usize::MAX);
    BlockSpans { block, i: 0, n, p: data }
}

/// Whether two serialized blocks (see [`block_spans`]) are the same bytes but for the value of
/// the first pair of `a` named `except` (exactly those bytes: the host's names are lowercase),
/// which `b` holds at the same place with the same length: then every other pair is the same,
/// in the same order (the lengths table is part of the bytes compared). Blocks of different
/// lengths are not the same (a host's request ids all have one length).
pub fn same_but(a: &[u8], b: &[u8], except: &[u8]) -> bool {
    a.len() == b.len() && same_except(a, b, value_range(a, except))
}

/// The range of the value of the first pair of `block` (see [`block_spans`]) named `name`.
pub fn value_range(block: &[u8], name: &[u8]) -> Option<std::ops::Range<usize>> {
    block_spans(block).find(|(n, _)| block.get(n.clone()) == Some(name)).map(|(_, v)| v)
}

/// [`same_but`] with the range of `a`'s value already found ([`value_range`]): the same
/// bytes but for that range, which `b` holds at the same place.
pub fn same_except(a: &[u8], b: &[u8], except: Option<std::ops::Range<usize>>) -> bool {
    if a.len() != b.len() {
        return false;
    }
    match except {
        Some(v) => a.get(..v.start) == b.get(..v.start) && a.get(v.end..) == b.get(v.end..),
        None => a == b,
    }
}

/// The number of pairs of a serialized block (see [`block_spans`]); `None` when the block
/// does not hold what it announces. An empty block has none.
pub fn block_len(block: &[u8]) -> Option<usize> {
    if block.is_empty() {
        return Some(0);
    }
    let n = u32_at(block, 0)?;
    if n.checked_mul(8)?.checked_add(4)? > block.len() {
        return None;
    }
    (block_spans(block).count() == n).then_some(n)
}

fn u32_at(buf: &[u8], at: usize) -> Option<usize> {
    let b = buf.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([*b.first()?, *b.get(1)?, *b.get(2)?, *b.get(3)?]) as usize)
}

/// See [`block_spans`].
pub struct BlockSpans<'a> {
    block: &'a [u8],
    /// The next pair, of `n`.
    i: usize,
    n: usize,
    /// Where the next pair's name starts.
    p: usize,
}

impl BlockSpans<'_> {
    fn step(&mut self) -> Option<(std::ops::Range<usize>, std::ops::Range<usize>)> {
        let at = self.i.checked_mul(8)?.checked_add(4)?;
        let (name_len, value_len) = (u32_at(self.block, at)?, u32_at(self.block, at.checked_add(4)?)?);
        let name_end = self.p.checked_add(name_len)?;
        let value = name_end.checked_add(1)?;
        let value_end = value.checked_add(value_len)?;
        let next = value_end.checked_add(1)?;
        if next > self.block.len() {
            return None;
        }
        let spans = (self.p..name_end, value..value_end);
        self.p = next;
        self.i += 1;
        Some(spans)
    }
}

impl Iterator for BlockSpans<'_> {
    type Item = (std::ops::Range<usize>, std::ops::Range<usize>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.i >= self.n {
            return None;
        }
        let spans = self.step();
        if spans.is_none() {
            self.i = self.n;
        }
        spans
    }
}

/// See [`Pairs::iter`].
pub struct Iter<'a> {
    chunks: &'a [Vec<u8>],
    spans: std::slice::Iter<'a, [usize; 5]>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        self.spans.find_map(|s| pair(self.chunks, s))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.spans.len()))
    }
}

impl<'a> IntoIterator for &'a Pairs {
    type Item = (&'a [u8], &'a [u8]);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl PairSink for Pairs {
    fn push_parts(&mut self, name: &[&[u8]], value: &[u8]) {
        let n: usize = name.iter().map(|p| p.len()).sum();
        let need = n + value.len();
        let room = |c: &Vec<u8>| c.capacity() - c.len() >= need;
        // The last chunk, else the first (a block pushed whole has no room, the chunk before
        // it may have).
        let at = match self.chunks.len().checked_sub(1) {
            Some(last) if self.chunks.get(last).is_some_and(room) => last,
            Some(_) if self.chunks.first().is_some_and(room) => 0,
            _ => {
                self.chunks.push(Vec::with_capacity(need.max(CHUNK)));
                self.chunks.len() - 1
            }
        };
        if self.spans.is_empty() {
            self.spans.reserve(16);
        }
        if let Some(c) = self.chunks.get_mut(at) {
            let start = c.len();
            for p in name {
                c.extend_from_slice(p);
            }
            c.extend_from_slice(value);
            self.spans.push([at, start, start + n, start + n, start + need]);
        }
    }
}

impl std::fmt::Debug for Pairs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter().map(|(k, v)| (String::from_utf8_lossy(k), String::from_utf8_lossy(v)))).finish()
    }
}

/// The serialized block of `pairs` (see [`block_spans`]), as a proxy-wasm host hands over a
/// header map: for tests and tools that feed a transaction as a host does.
pub fn block_of(pairs: &[(&[u8], &[u8])]) -> Vec<u8> {
    let size = 4 + pairs.iter().map(|(n, v)| 10 + n.len() + v.len()).sum::<usize>();
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(&(pairs.len() as u32).to_le_bytes());
    for (n, v) in pairs {
        out.extend_from_slice(&(n.len() as u32).to_le_bytes());
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
    }
    for (n, v) in pairs {
        out.extend_from_slice(n);
        out.push(0);
        out.extend_from_slice(v);
        out.push(0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_keep_their_bytes_in_place_as_more_come() {
        let mut p = Pairs::default();
        p.push_pair(b"a", b"1");
        let first = p.get(0).map(|(k, _)| k.as_ptr());
        let big = vec![b'x'; 3 * CHUNK];
        for i in 0..200u32 {
            p.push_parts(&[b"k", i.to_string().as_bytes()], if i == 7 { &big } else { b"value" });
        }
        assert_eq!(p.get(0).map(|(k, _)| k.as_ptr()), first);
        assert_eq!(p.len(), 201);
        assert_eq!(p.get(8), Some((&b"k7"[..], &big[..])));
        assert_eq!(p.get(200), Some((&b"k199"[..], &b"value"[..])));
        p.truncate(1);
        assert_eq!(p.to_vec(), vec![(b"a".to_vec(), b"1".to_vec())]);
        // Cleared pairs start over in their first chunk: nothing of the old ones shows.
        p.clear();
        assert!(p.is_empty() && p.get(0).is_none());
        p.push_pair(b"b", b"2");
        assert_eq!(p.to_vec(), vec![(b"b".to_vec(), b"2".to_vec())]);
        assert_eq!(p.get(0).map(|(k, _)| k.as_ptr()), first);
    }

    #[test]
    fn blocks_compare_but_for_one_name() {
        let a = block_of(&[(b":path", b"/a"), (b"x-request-id", b"1"), (b"user-agent", b"u")]);
        let b = block_of(&[(b":path", b"/a"), (b"x-request-id", b"2"), (b"user-agent", b"u")]);
        assert!(same_but(&a, &b, b"x-request-id"));
        assert!(!same_but(&a, &b, b"user-agent"));
        assert!(same_but(&a, &a, b""));
        // Another value, name, order, count, or a block cut short: not the same.
        for other in [
            block_of(&[(b":path", b"/b"), (b"x-request-id", b"2"), (b"user-agent", b"u")]),
            block_of(&[(b":path", b"/a"), (b"x-request-id", b"2"), (b"user-agent", b"v")]),
            block_of(&[(b":path", b"/a"), (b"x-request-ie", b"2"), (b"user-agent", b"u")]),
            block_of(&[(b":path", b"/a"), (b"user-agent", b"u"), (b"x-request-id", b"2")]),
            block_of(&[(b":path", b"/a"), (b"x-request-id", b"2")]),
            block_of(&[(b":path", b"/a"), (b"x-request-id", b"2"), (b"user-agent", b"u"), (b"x", b"")]),
            // An id of another length (the lengths table differs too).
            block_of(&[(b":path", b"/a"), (b"x-request-id", b"22"), (b"user-agent", b"u")]),
            a[..a.len() - 1].to_vec(),
            Vec::new(),
        ] {
            assert!(!same_but(&a, &other, b"x-request-id"), "{other:?}");
        }
    }

    /// A block's pairs are the pairs pushed one by one (those `keep` accepts), read in place
    /// among pairs pushed before and after; a block cut short gives the pairs it holds.
    #[test]
    fn blocks_give_the_pairs_they_serialize_in_place() {
        let pairs: &[(&[u8], &[u8])] = &[(b":path", b"/a?b=1"), (b"x-empty", b""), (b"\xff\xfe", b"\x00bin\xff"), (b"a", b"1"), (b"a", b"2")];
        let b = block_of(pairs);
        assert_eq!(block_len(&b), Some(5));
        let mut p = Pairs::default();
        p.push_pair(b"Host", b"h");
        let moved = b.clone();
        let at = moved.as_ptr();
        p.push_block(moved, |n| !n.starts_with(b":"));
        p.push_pair(b"z", b"9");
        let mut want = vec![(b"Host".to_vec(), b"h".to_vec())];
        want.extend(pairs.iter().skip(1).map(|(n, v)| (n.to_vec(), v.to_vec())));
        want.push((b"z".to_vec(), b"9".to_vec()));
        assert_eq!(p.to_vec(), want);
        // Read where the block holds it: after the count, 5 length pairs, ":path\0/a?b=1\0".
        let (name, _) = p.get(1).unwrap();
        assert_eq!(name.as_ptr(), at.wrapping_add(4 + 40 + 13));
        for cut in 0..b.len() {
            let got: Vec<_> = block_spans(&b[..cut]).map(|(n, v)| (b[n].to_vec(), b[v].to_vec())).collect();
            assert!(got.len() < 5, "cut at {cut}");
            assert_eq!(got, pairs[..got.len()].iter().map(|(n, v)| (n.to_vec(), v.to_vec())).collect::<Vec<_>>());
            assert_eq!(block_len(&b[..cut]), if cut == 0 { Some(0) } else { None }, "cut at {cut}");
        }
        let mut big = b.clone();
        big[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        // A count the block cannot hold puts its data past the end: no pair.
        assert_eq!(block_len(&big), None);
        assert_eq!(block_spans(&big).count(), 0);
    }
}
