//! A reference proxy-wasm HTTP filter for `make bench-floor` (bench/floor.py), not part of wafer.
//! The plugin configuration is a list of patterns, one per line; a request whose header names or
//! values contain one is answered 403. Which matcher runs is chosen at build time: with feature
//! `regex`, the patterns are `regex` byte regexes (as wafer's `@rx`, plus aho-corasick for its
//! literals); with `aho` only, they are literals found by aho-corasick; with neither, literals
//! found by a plain byte search (the standard library alone). So the three builds differ only in
//! the matcher's crates, and Envoy's start-up and memory with each price those crates.

use std::cell::RefCell;

extern "C" {
    fn proxy_get_buffer_bytes(buffer_type: u32, start: usize, max_size: usize, data: *mut *mut u8, size: *mut usize) -> u32;
    fn proxy_get_header_map_pairs(map_type: u32, data: *mut *mut u8, size: *mut usize) -> u32;
    #[allow(clippy::too_many_arguments)]
    fn proxy_send_local_response(
        status: u32,
        details: *const u8,
        details_size: usize,
        body: *const u8,
        body_size: usize,
        headers: *const u8,
        headers_size: usize,
        grpc_status: i32,
    ) -> u32;
}

const PLUGIN_CONFIGURATION: u32 = 7;
const REQUEST_HEADERS: u32 = 0;
const CONTINUE: u32 = 0;
const PAUSE: u32 = 1;

#[cfg(feature = "regex")]
struct Matcher {
    literals: Option<aho_corasick::AhoCorasick>,
    regexes: Vec<regex::bytes::Regex>,
}

#[cfg(feature = "regex")]
impl Matcher {
    fn new(patterns: &[String]) -> Matcher {
        let regexes = patterns
            .iter()
            .filter_map(|p| regex::bytes::RegexBuilder::new(p).unicode(false).dot_matches_new_line(true).multi_line(true).build().ok())
            .collect();
        // A literal gate before the regexes, as wafer's prefilter: each pattern's literal
        // prefixes (regex-syntax's extractor); none when a pattern has no finite set of them,
        // and every value then goes to the regexes.
        let literals = patterns.iter().map(|p| prefixes(p)).collect::<Option<Vec<_>>>().and_then(|lits| {
            aho_corasick::AhoCorasick::new(lits.into_iter().flatten()).ok()
        });
        Matcher { literals, regexes }
    }
    fn matches(&self, value: &[u8]) -> bool {
        self.literals.as_ref().is_none_or(|ac| ac.is_match(value)) && self.regexes.iter().any(|re| re.is_match(value))
    }
}

/// The literals one of which starts every match of `pattern` (case variants spelled out), or
/// None when there is no such finite, non-empty set.
#[cfg(feature = "regex")]
fn prefixes(pattern: &str) -> Option<Vec<Vec<u8>>> {
    let hir = regex_syntax::ParserBuilder::new().unicode(false).utf8(false).dot_matches_new_line(true).multi_line(true).build().parse(pattern).ok()?;
    let seq = regex_syntax::hir::literal::Extractor::new().extract(&hir);
    let lits = seq.literals()?;
    (!lits.is_empty() && lits.iter().all(|l| !l.is_empty())).then(|| lits.iter().map(|l| l.as_bytes().to_vec()).collect())
}

#[cfg(all(feature = "aho", not(feature = "regex")))]
struct Matcher(Option<aho_corasick::AhoCorasick>);

#[cfg(all(feature = "aho", not(feature = "regex")))]
impl Matcher {
    fn new(patterns: &[String]) -> Matcher {
        Matcher(aho_corasick::AhoCorasick::builder().ascii_case_insensitive(true).build(patterns).ok())
    }
    fn matches(&self, value: &[u8]) -> bool {
        self.0.as_ref().is_some_and(|ac| ac.is_match(value))
    }
}

#[cfg(not(any(feature = "aho", feature = "regex")))]
struct Matcher(Vec<Vec<u8>>);

#[cfg(not(any(feature = "aho", feature = "regex")))]
impl Matcher {
    fn new(patterns: &[String]) -> Matcher {
        Matcher(patterns.iter().map(|p| p.to_ascii_lowercase().into_bytes()).collect())
    }
    fn matches(&self, value: &[u8]) -> bool {
        let value = value.to_ascii_lowercase();
        self.0.iter().any(|p| !p.is_empty() && value.windows(p.len()).any(|w| w == p.as_slice()))
    }
}

thread_local! {
    static MATCHER: RefCell<Option<Matcher>> = const { RefCell::new(None) };
}

/// Bytes the host handed over (allocated by `proxy_on_memory_allocate`), taken back.
fn host_bytes(data: *mut u8, size: usize) -> Vec<u8> {
    if data.is_null() {
        return Vec::new();
    }
    // SAFETY: the host filled `size` bytes of a block proxy_on_memory_allocate made with capacity `size`.
    unsafe { Vec::from_raw_parts(data, size, size.max(1)) }
}

/// The names and values of a serialized header map: count, (name length, value length) pairs,
/// then each name and value followed by a NUL.
fn header_fields(block: &[u8]) -> Vec<&[u8]> {
    let word = |at: usize| block.get(at..at + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
    let Some(n) = word(0) else { return Vec::new() };
    let mut fields = Vec::new();
    let mut at = 4 + 8 * n;
    for i in 0..n {
        for len in [word(4 + 8 * i), word(8 + 8 * i)] {
            let Some(len) = len else { return fields };
            let Some(field) = block.get(at..at + len) else { return fields };
            fields.push(field);
            at += len + 1;
        }
    }
    fields
}

#[no_mangle]
pub extern "C" fn proxy_abi_version_0_2_1() {}

#[no_mangle]
pub extern "C" fn proxy_on_memory_allocate(size: usize) -> *mut u8 {
    let mut block = Vec::<u8>::with_capacity(size.max(1));
    let p = block.as_mut_ptr();
    std::mem::forget(block);
    p
}

#[no_mangle]
pub extern "C" fn proxy_on_context_create(_context: u32, _parent: u32) {}

#[no_mangle]
pub extern "C" fn proxy_on_vm_start(_context: u32, _size: usize) -> u32 {
    1
}

#[no_mangle]
pub extern "C" fn proxy_on_configure(_context: u32, size: usize) -> u32 {
    let (mut data, mut got) = (std::ptr::null_mut(), 0);
    // SAFETY: out-pointers to locals.
    unsafe { proxy_get_buffer_bytes(PLUGIN_CONFIGURATION, 0, size, &mut data, &mut got) };
    let config = host_bytes(data, got);
    let patterns: Vec<String> = String::from_utf8_lossy(&config).lines().map(str::trim).filter(|l| !l.is_empty()).map(String::from).collect();
    MATCHER.with(|m| *m.borrow_mut() = Some(Matcher::new(&patterns)));
    1
}

#[no_mangle]
pub extern "C" fn proxy_on_request_headers(_context: u32, _headers: usize, _end_of_stream: u32) -> u32 {
    let (mut data, mut size) = (std::ptr::null_mut(), 0);
    // SAFETY: out-pointers to locals.
    unsafe { proxy_get_header_map_pairs(REQUEST_HEADERS, &mut data, &mut size) };
    let block = host_bytes(data, size);
    let hit = MATCHER.with(|m| m.borrow().as_ref().is_some_and(|m| header_fields(&block).into_iter().any(|f| m.matches(f))));
    if !hit {
        return CONTINUE;
    }
    let details = b"floor_match";
    // SAFETY: pointers to live locals with their lengths.
    unsafe { proxy_send_local_response(403, details.as_ptr(), details.len(), std::ptr::null(), 0, std::ptr::null(), 0, -1) };
    PAUSE
}
