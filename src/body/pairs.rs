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
    /// Per pair: its chunk, where its name starts there, where its value starts (the name's
    /// end), where the value ends.
    spans: Vec<[usize; 4]>,
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

    pub fn iter(&self) -> Iter<'_> {
        Iter { chunks: &self.chunks, spans: self.spans.iter() }
    }

    /// The bytes the pairs' buffers hold (their capacities).
    pub fn retained_bytes(&self) -> usize {
        self.chunks.iter().map(Vec::capacity).sum::<usize>() + self.spans.capacity() * std::mem::size_of::<[usize; 4]>()
    }

    /// The pairs as owned vectors (tests, logs).
    pub fn to_vec(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect()
    }
}

fn pair<'a>(chunks: &'a [Vec<u8>], &[c, name, value, end]: &[usize; 4]) -> Option<(&'a [u8], &'a [u8])> {
    let bytes = chunks.get(c)?.get(name..end)?;
    bytes.split_at_checked(value - name)
}

/// See [`Pairs::iter`].
pub struct Iter<'a> {
    chunks: &'a [Vec<u8>],
    spans: std::slice::Iter<'a, [usize; 4]>,
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
        let room = self.chunks.last().is_some_and(|c| c.capacity() - c.len() >= need);
        if !room {
            self.chunks.push(Vec::with_capacity(need.max(CHUNK)));
        }
        if self.spans.is_empty() {
            self.spans.reserve(16);
        }
        let at = self.chunks.len() - 1;
        if let Some(c) = self.chunks.last_mut() {
            let start = c.len();
            for p in name {
                c.extend_from_slice(p);
            }
            c.extend_from_slice(value);
            self.spans.push([at, start, start + n, start + need]);
        }
    }
}

impl std::fmt::Debug for Pairs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter().map(|(k, v)| (String::from_utf8_lossy(k), String::from_utf8_lossy(v)))).finish()
    }
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
}
