//! JSON request body processor.
//!
//! A hand-written, iterative (never recursive) JSON parser producing the
//! arguments ModSecurity v3 produces (src/request_body_processor/json.cc and
//! json.h, yajl based):
//!
//! * `JSON::addArgument` builds the name as the concatenation, over all open
//!   containers, of the container's name followed by `.` for an object or
//!   `.array_N` for an array (N = index of the element being added), then
//!   appends the current key when the innermost container is an object.
//! * `JSON::getCurrentKey` gives container and value names: `json` when no
//!   container is open (so a top-level array is named `json` and a top-level
//!   scalar becomes the single argument `json`), `""` inside an array, the
//!   key inside an object, and `empty-key` for the key `""`.
//!
//! So `{"a":{"b":1},"l":[true,{"c":null}],"":2}` gives `json.a.b=1`,
//! `json.l.array_0=true`, `json.l.array_1.c=` and `json.empty-key=2`;
//! `[[1]]` gives `json.array_0.array_0=1`.
//!
//! Values: strings are unescaped (yajl's `\u` handling, including surrogate
//! pairs, a lone high surrogate becoming `?`), numbers keep their source text,
//! booleans are `true`/`false`, `null` is the empty string.  Empty objects and
//! arrays produce nothing.
//!
//! Errors follow yajl's wording, prefixed as v3's transaction does:
//! `JSON parsing error: parse error: premature EOF`,
//! `JSON parsing error: lexical error: invalid char in json text.`, ...
//! Arguments found before the error stay in the output.  An empty body is not
//! an error (v3 only reports errors for a non-empty body).

use super::pairs::PairSink;
use super::BodyError;

/// Limits for [`parse`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonLimits {
    /// Largest number of nested containers (`SecRequestBodyJsonDepthLimit`):
    /// `{}` has depth 1.  Going deeper is an error.
    pub max_depth: usize,
    /// Largest number of arguments pushed by one call (`SecArgumentsLimit`,
    /// minus arguments already present).  Further values are parsed and
    /// validated but not pushed, as ModSecurity skips arguments over the limit.
    pub max_args: usize,
    /// Most bytes of argument names and values to push (the room the memory budget leaves:
    /// see `tx::budget`); past it the parse stops with [`OVER_BUDGET`].
    pub max_output: usize,
}

impl Default for JsonLimits {
    /// The values of ModSecurity's modsecurity.conf-recommended.
    fn default() -> Self {
        JsonLimits {
            max_depth: 512,
            max_args: 1000,
            max_output: usize::MAX,
        }
    }
}

/// Output (names + values) may not exceed `OUTPUT_FACTOR * input.len()`
/// bytes (with a floor of `OUTPUT_FLOOR`): argument names repeat the whole
/// path, so long keys above many leaves would otherwise blow up quadratically.
pub const OUTPUT_FACTOR: usize = 64;
/// See [`OUTPUT_FACTOR`].
pub const OUTPUT_FLOOR: usize = 1 << 20;

const PREFIX: &str = "JSON parsing error: ";

/// The error of a parse stopped by [`JsonLimits::max_output`].
pub const OVER_BUDGET: &str = "JSON parsing error: argument names and values exceed the memory budget";

/// Parse `input` as JSON, appending `(name, value)` arguments to `out` in
/// document order.
pub fn parse(
    input: &[u8],
    limits: &JsonLimits,
    out: &mut impl PairSink,
) -> Result<(), BodyError> {
    if input.is_empty() {
        return Ok(());
    }
    let mut p = Parser {
        lx: Lexer { s: input, pos: 0 },
        stack: Vec::new(),
        prefix: Vec::new(),
        key: Vec::new(),
        key_at: None,
        scratch: Vec::new(),
        limits: *limits,
        added: 0,
        out_bytes: 0,
        out_cap: input.len().saturating_mul(OUTPUT_FACTOR).max(OUTPUT_FLOOR),
    };
    p.run(out)
}

fn parse_err(msg: &str) -> BodyError {
    BodyError::new(format!("{PREFIX}parse error: {msg}"))
}

fn lex_err(msg: &str) -> BodyError {
    BodyError::new(format!("{PREFIX}lexical error: {msg}"))
}

const PREMATURE_EOF: &str = "premature EOF";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    LBrace,
    RBrace,
    LBracket,
    RBracket,
    Colon,
    Comma,
    /// A string without escapes: its bytes in the input (start, end).
    Str(usize, usize),
    /// A string with escapes, decoded into the parser's scratch buffer.
    Decoded,
    /// Source range of the number.
    Num(usize, usize),
    True,
    False,
    Null,
    Eof,
}

struct Lexer<'a> {
    s: &'a [u8],
    pos: usize,
}

fn is_ws(c: u8) -> bool {
    // yajl_lex treats \t \n \v \f \r and space as whitespace.
    matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// The bytes that end a run of plain string bytes: the quote, the backslash, control bytes
/// and the bytes of multi-byte UTF-8 sequences (validated one by one).
#[allow(clippy::indexing_slicing)] // i < 256, in a constant
const STRING_STOP: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = i < 0x20 || i >= 0x80 || i == b'"' as usize || i == b'\\' as usize;
        i += 1;
    }
    t
};

fn hex_digit(c: u8) -> Option<u32> {
    match c {
        b'0'..=b'9' => Some(u32::from(c - b'0')),
        b'a'..=b'f' => Some(u32::from(c - b'a' + 10)),
        b'A'..=b'F' => Some(u32::from(c - b'A' + 10)),
        _ => None,
    }
}

impl<'a> Lexer<'a> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        // Every whitespace byte is at most a space: one test passes the others.
        while let Some(c) = self.peek() {
            if c <= b' ' && is_ws(c) {
                self.pos += 1;
            } else {
                break;
            }
        }
    }

    #[inline]
    fn next(&mut self, scratch: &mut Vec<u8>) -> Result<Tok, BodyError> {
        self.skip_ws();
        let Some(c) = self.peek() else {
            return Ok(Tok::Eof);
        };
        let simple = match c {
            // Strings first: most tokens of a JSON body are keys and string values.
            b'"' => {
                self.pos += 1;
                return Ok(match self.string(scratch)? {
                    Some((start, end)) => Tok::Str(start, end),
                    None => Tok::Decoded,
                });
            }
            b'{' => Tok::LBrace,
            b'}' => Tok::RBrace,
            b'[' => Tok::LBracket,
            b']' => Tok::RBracket,
            b':' => Tok::Colon,
            b',' => Tok::Comma,
            b'-' | b'0'..=b'9' => return self.number(),
            b't' => return self.literal(b"true", Tok::True),
            b'f' => return self.literal(b"false", Tok::False),
            b'n' => return self.literal(b"null", Tok::Null),
            b'/' => {
                return Err(lex_err(
                    "probable comment found in input text, comments are not enabled.",
                ))
            }
            _ => return Err(lex_err("invalid char in json text.")),
        };
        self.pos += 1;
        Ok(simple)
    }

    fn literal(&mut self, word: &[u8], tok: Tok) -> Result<Tok, BodyError> {
        let end = self.pos.saturating_add(word.len());
        if self.s.get(self.pos..end) == Some(word) {
            self.pos = end;
            Ok(tok)
        } else {
            Err(lex_err("invalid string in json text."))
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
        self.pos - start
    }

    fn number(&mut self) -> Result<Tok, BodyError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(lex_err(
                    "malformed number, a digit is required after the minus sign.",
                ));
            }
        }
        if self.peek() == Some(b'0') {
            self.pos += 1;
        } else {
            self.digits();
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if self.digits() == 0 {
                return Err(lex_err(
                    "malformed number, a digit is required after the decimal point.",
                ));
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return Err(lex_err(
                    "malformed number, a digit is required after the exponent.",
                ));
            }
        }
        Ok(Tok::Num(start, self.pos))
    }

    /// Four hex digits at `at`, if present.
    fn hex4(&self, at: usize) -> Result<Option<u32>, BodyError> {
        let mut v = 0u32;
        for i in 0..4 {
            let Some(&c) = self.s.get(at + i) else {
                return Ok(None);
            };
            match hex_digit(c) {
                Some(d) => v = (v << 4) | d,
                None => {
                    return Err(lex_err(
                        "invalid (non-hex) character occurs after '\\u' inside string.",
                    ))
                }
            }
        }
        Ok(Some(v))
    }

    /// Scans a string body (opening quote consumed): its bytes in the input (start, end) when
    /// it has no escape, else None and its decoded bytes in `out`.
    fn string(&mut self, out: &mut Vec<u8>) -> Result<Option<(usize, usize)>, BodyError> {
        let start = self.pos;
        loop {
            self.plain_run();
            let Some(c) = self.peek() else {
                return Err(parse_err(PREMATURE_EOF));
            };
            match c {
                b'"' => {
                    let end = self.pos;
                    self.pos += 1;
                    return Ok(Some((start, end)));
                }
                b'\\' => {
                    out.clear();
                    out.extend_from_slice(self.s.get(start..self.pos).unwrap_or_default());
                    self.decode(out)?;
                    return Ok(None);
                }
                0..=0x1f => return Err(lex_err("invalid character inside string.")),
                _ => self.pos += self.utf8_len()?,
            }
        }
    }

    /// Moves past a run of plain string bytes (up to a [`STRING_STOP`] byte or the end).
    fn plain_run(&mut self) {
        while let Some(&c) = self.s.get(self.pos) {
            if STRING_STOP.get(usize::from(c)).copied().unwrap_or(true) {
                break;
            }
            self.pos += 1;
        }
    }

    /// Decodes the rest of a string body (from an escape at `pos`) onto `out`.
    fn decode(&mut self, out: &mut Vec<u8>) -> Result<(), BodyError> {
        loop {
            // Copy a run of plain ASCII in one go.
            let run_start = self.pos;
            self.plain_run();
            if let Some(run) = self.s.get(run_start..self.pos) {
                out.extend_from_slice(run);
            }
            let Some(c) = self.peek() else {
                return Err(parse_err(PREMATURE_EOF));
            };
            match c {
                b'"' => {
                    self.pos += 1;
                    return Ok(());
                }
                b'\\' => self.escape(out)?,
                0..=0x1f => return Err(lex_err("invalid character inside string.")),
                _ => {
                    let n = self.utf8_len()?;
                    out.extend_from_slice(self.s.get(self.pos..self.pos + n).unwrap_or_default());
                    self.pos += n;
                }
            }
        }
    }

    /// One escape sequence at `pos` (the backslash).
    fn escape(&mut self, out: &mut Vec<u8>) -> Result<(), BodyError> {
        let Some(e) = self.s.get(self.pos + 1).copied() else {
            return Err(parse_err(PREMATURE_EOF));
        };
        let simple = match e {
            b'"' => Some(b'"'),
            b'\\' => Some(b'\\'),
            b'/' => Some(b'/'),
            b'b' => Some(0x08),
            b'f' => Some(0x0c),
            b'n' => Some(b'\n'),
            b'r' => Some(b'\r'),
            b't' => Some(b'\t'),
            b'u' => None,
            _ => {
                return Err(lex_err(
                    "inside a string, '\\' occurs before a character which it may not.",
                ))
            }
        };
        if let Some(b) = simple {
            out.push(b);
            self.pos += 2;
            return Ok(());
        }
        let Some(cp) = self.hex4(self.pos + 2)? else {
            return Err(parse_err(PREMATURE_EOF));
        };
        self.pos += 6;
        if cp & 0xFC00 == 0xD800 {
            // yajl_string_decode: a high surrogate followed by another \u
            // escape is combined with it (whatever its value); alone it
            // becomes '?'.
            if self.s.get(self.pos) == Some(&b'\\') && self.s.get(self.pos + 1) == Some(&b'u') {
                let Some(lo) = self.hex4(self.pos + 2)? else {
                    return Err(parse_err(PREMATURE_EOF));
                };
                self.pos += 6;
                let combined = ((cp & 0x3F) << 10) | ((((cp >> 6) & 0xF) + 1) << 16) | (lo & 0x3FF);
                push_utf8(out, combined);
            } else {
                out.push(b'?');
            }
        } else {
            push_utf8(out, cp);
        }
        Ok(())
    }

    /// Validates the UTF-8 sequence at `pos` the way yajl_lex_utf8_char does (lead byte and
    /// continuation bytes only); its length.
    fn utf8_len(&self) -> Result<usize, BodyError> {
        let bad = || lex_err("invalid bytes in UTF8 string.");
        let lead = self.peek().ok_or_else(bad)?;
        let extra = if lead >> 5 == 0x6 {
            1
        } else if lead >> 4 == 0xE {
            2
        } else if lead >> 3 == 0x1E {
            3
        } else {
            return Err(bad());
        };
        let end = self.pos + 1 + extra;
        let seq = self.s.get(self.pos..end).ok_or_else(bad)?;
        if seq.iter().skip(1).any(|&b| b >> 6 != 0x2) {
            return Err(bad());
        }
        Ok(1 + extra)
    }
}

/// yajl's Utf32toUtf8 (no surrogate or range checks; above 0x1FFFFF -> '?').
fn push_utf8(out: &mut Vec<u8>, cp: u32) {
    if cp < 0x80 {
        out.push(cp as u8);
    } else if cp < 0x800 {
        out.push(0xC0 | (cp >> 6) as u8);
        out.push(0x80 | (cp & 0x3F) as u8);
    } else if cp < 0x10000 {
        out.push(0xE0 | (cp >> 12) as u8);
        out.push(0x80 | ((cp >> 6) & 0x3F) as u8);
        out.push(0x80 | (cp & 0x3F) as u8);
    } else if cp < 0x200000 {
        out.push(0xF0 | (cp >> 18) as u8);
        out.push(0x80 | ((cp >> 12) & 0x3F) as u8);
        out.push(0x80 | ((cp >> 6) & 0x3F) as u8);
        out.push(0x80 | (cp & 0x3F) as u8);
    } else {
        out.push(b'?');
    }
}

/// The current object key: in the input at `at`, else the decoded `key`.
fn key_of<'k>(input: &'k [u8], key: &'k [u8], at: Option<(usize, usize)>) -> &'k [u8] {
    match at {
        Some((a, b)) => input.get(a..b).unwrap_or_default(),
        None => key,
    }
}

/// Appends `n` in decimal.
fn push_decimal(out: &mut Vec<u8>, mut n: usize) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        if let Some(d) = digits.get_mut(at) {
            *d = b'0' + (n % 10) as u8;
        }
        n /= 10;
        if n == 0 || at == 0 {
            break;
        }
    }
    out.extend_from_slice(digits.get(at..).unwrap_or_default());
}

/// `getCurrentKey`: the name part contributed by the innermost container.
fn current_key<'b>(stack: &[Frame], key: &'b [u8]) -> &'b [u8] {
    match stack.last() {
        None => b"json",
        Some(f) if f.is_array => b"",
        Some(_) if key.is_empty() => b"empty-key",
        Some(_) => key,
    }
}

struct Frame {
    is_array: bool,
    /// End of this container's name inside `prefix`; its separator (`.` or
    /// `.array_N`) follows.
    name_end: usize,
    /// Prefix length before this container's contribution.
    base: usize,
    /// Index of the next element (arrays).
    counter: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// A value is required (top level, after ':' or after ',' in an array).
    Value,
    /// Just after '[': a value or ']'.
    ArrayFirst,
    /// Just after '{': a key or '}'.
    ObjectFirst,
    /// After ',' in an object: a key.
    ObjectKey,
    /// After a key: ':'.
    Colon,
    /// After a complete value.
    AfterValue,
}

struct Parser<'a> {
    lx: Lexer<'a>,
    stack: Vec<Frame>,
    /// Concatenated names and separators of all open containers.
    prefix: Vec<u8>,
    /// Current object key, when decoded (see `key_at`).
    key: Vec<u8>,
    /// Current object key, when it had no escape: where it is in the input.
    key_at: Option<(usize, usize)>,
    scratch: Vec<u8>,
    limits: JsonLimits,
    added: usize,
    out_bytes: usize,
    out_cap: usize,
}

impl<'a> Parser<'a> {
    fn run(&mut self, out: &mut impl PairSink) -> Result<(), BodyError> {
        let mut state = State::Value;
        loop {
            if state == State::AfterValue && self.stack.is_empty() {
                // yajl_state_parse_complete: anything but whitespace is
                // "trailing garbage", even bytes the lexer would reject.
                self.lx.skip_ws();
                if self.lx.pos < self.lx.s.len() {
                    return Err(parse_err("trailing garbage"));
                }
                return Ok(());
            }
            let tok = self.lx.next(&mut self.scratch)?;
            state = match state {
                State::Value | State::ArrayFirst => match tok {
                    Tok::RBracket if state == State::ArrayFirst => {
                        self.close();
                        State::AfterValue
                    }
                    Tok::LBrace => {
                        self.open(false)?;
                        State::ObjectFirst
                    }
                    Tok::LBracket => {
                        self.open(true)?;
                        State::ArrayFirst
                    }
                    Tok::Str(a, b) => {
                        let s = self.lx.s;
                        self.emit(s.get(a..b).unwrap_or_default(), out)?;
                        State::AfterValue
                    }
                    Tok::Decoded => {
                        let v = std::mem::take(&mut self.scratch);
                        let r = self.emit(&v, out);
                        self.scratch = v;
                        r?;
                        State::AfterValue
                    }
                    Tok::Num(a, b) => {
                        let s = self.lx.s;
                        self.emit(s.get(a..b).unwrap_or(&[]), out)?;
                        State::AfterValue
                    }
                    Tok::True => {
                        self.emit(b"true", out)?;
                        State::AfterValue
                    }
                    Tok::False => {
                        self.emit(b"false", out)?;
                        State::AfterValue
                    }
                    Tok::Null => {
                        self.emit(b"", out)?;
                        State::AfterValue
                    }
                    Tok::Eof => return Err(parse_err(PREMATURE_EOF)),
                    _ => return Err(parse_err("unallowed token at this point in JSON text")),
                },
                State::ObjectFirst | State::ObjectKey => match tok {
                    Tok::Str(a, b) => {
                        self.key_at = Some((a, b));
                        State::Colon
                    }
                    Tok::Decoded => {
                        std::mem::swap(&mut self.key, &mut self.scratch);
                        self.key_at = None;
                        State::Colon
                    }
                    Tok::RBrace if state == State::ObjectFirst => {
                        self.close();
                        State::AfterValue
                    }
                    Tok::Eof => return Err(parse_err(PREMATURE_EOF)),
                    _ => return Err(parse_err("invalid object key (must be a string)")),
                },
                State::Colon => match tok {
                    Tok::Colon => State::Value,
                    Tok::Eof => return Err(parse_err(PREMATURE_EOF)),
                    _ => {
                        return Err(parse_err(
                            "object key and value must be separated by a colon (':')",
                        ))
                    }
                },
                State::AfterValue => {
                    let in_array = self.stack.last().map(|f| f.is_array).unwrap_or(false);
                    match (tok, in_array) {
                        (Tok::Comma, true) => State::Value,
                        (Tok::RBracket, true) => {
                            self.close();
                            State::AfterValue
                        }
                        (Tok::Comma, false) => State::ObjectKey,
                        (Tok::RBrace, false) => {
                            self.close();
                            State::AfterValue
                        }
                        (Tok::Eof, _) => return Err(parse_err(PREMATURE_EOF)),
                        (_, true) => {
                            return Err(parse_err("after array element, I expect ',' or ']'"))
                        }
                        (_, false) => {
                            return Err(parse_err(
                                "after key and value, inside map, I expect ',' or '}'",
                            ))
                        }
                    }
                }
            };
        }
    }

    /// Rewrite the innermost array's `.array_N` separator after its counter
    /// changed.
    fn refresh_array_suffix(&mut self) {
        if let Some(f) = self.stack.last() {
            if f.is_array {
                let (end, n) = (f.name_end, f.counter);
                self.prefix.truncate(end);
                self.prefix.extend_from_slice(b".array_");
                push_decimal(&mut self.prefix, n);
            }
        }
    }

    fn bump_parent(&mut self) {
        if let Some(f) = self.stack.last_mut() {
            if f.is_array {
                f.counter = f.counter.saturating_add(1);
                self.refresh_array_suffix();
            }
        }
    }

    fn open(&mut self, is_array: bool) -> Result<(), BodyError> {
        if self.stack.len() >= self.limits.max_depth {
            return Err(BodyError::new(format!("{PREFIX}JSON depth limit exceeded")));
        }
        let base = self.prefix.len();
        let name = current_key(&self.stack, key_of(self.lx.s, &self.key, self.key_at));
        self.prefix.extend_from_slice(name);
        let name_end = self.prefix.len();
        self.clear_key();
        if is_array {
            self.prefix.extend_from_slice(b".array_0");
        } else {
            self.prefix.push(b'.');
        }
        self.stack.push(Frame {
            is_array,
            name_end,
            base,
            counter: 0,
        });
        Ok(())
    }

    fn close(&mut self) {
        if let Some(f) = self.stack.pop() {
            self.prefix.truncate(f.base);
        }
        self.bump_parent();
    }

    fn emit(&mut self, value: &[u8], out: &mut impl PairSink) -> Result<(), BodyError> {
        if self.added < self.limits.max_args {
            let key = current_key(&self.stack, key_of(self.lx.s, &self.key, self.key_at));
            let len = self.prefix.len() + key.len();
            self.out_bytes = self
                .out_bytes
                .saturating_add(len)
                .saturating_add(value.len());
            if self.out_bytes > self.limits.max_output {
                return Err(BodyError::new(OVER_BUDGET));
            }
            if self.out_bytes > self.out_cap {
                return Err(BodyError::new(format!(
                    "{PREFIX}argument names and values exceed {} bytes",
                    self.out_cap
                )));
            }
            out.push_parts(&[&self.prefix, key], value);
            self.added += 1;
        }
        self.clear_key();
        self.bump_parent();
        Ok(())
    }


    fn clear_key(&mut self) {
        self.key_at = None;
        self.key.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lim() -> JsonLimits {
        JsonLimits {
            max_depth: 512,
            max_args: 100_000,
            max_output: usize::MAX,
        }
    }

    fn run(input: &str) -> Result<Vec<(String, String)>, String> {
        run_bytes(input.as_bytes(), &lim())
    }

    fn run_bytes(input: &[u8], l: &JsonLimits) -> Result<Vec<(String, String)>, String> {
        let mut out = Vec::new();
        parse(input, l, &mut out).map_err(|e| e.msg)?;
        Ok(strs(out))
    }

    fn strs(out: Vec<(Vec<u8>, Vec<u8>)>) -> Vec<(String, String)> {
        out.into_iter()
            .map(|(n, v)| {
                (
                    String::from_utf8_lossy(&n).into_owned(),
                    String::from_utf8_lossy(&v).into_owned(),
                )
            })
            .collect()
    }

    fn p(n: &str, v: &str) -> (String, String) {
        (n.to_string(), v.to_string())
    }

    #[test]
    fn object_members_are_prefixed_with_json() {
        assert_eq!(
            run(r#"{"a":"x","b":{"c":"y"}}"#).unwrap(),
            vec![p("json.a", "x"), p("json.b.c", "y")]
        );
    }

    #[test]
    fn arrays_use_array_n_segments() {
        assert_eq!(
            run(r#"{"l":[1,2,[3,4],{"k":5}],"m":6}"#).unwrap(),
            vec![
                p("json.l.array_0", "1"),
                p("json.l.array_1", "2"),
                p("json.l.array_2.array_0", "3"),
                p("json.l.array_2.array_1", "4"),
                p("json.l.array_3.k", "5"),
                p("json.m", "6"),
            ]
        );
        // Indices of more than one digit; keys with and without escapes, one after the other.
        let many: Vec<String> = (0..12).map(|i| i.to_string()).collect();
        let out = run(&format!(r#"{{"l":[{}],"k\u0041":1,"k":2,"\"":3}}"#, many.join(","))).unwrap();
        assert_eq!(out.get(10), Some(&p("json.l.array_10", "10")));
        assert_eq!(out.get(11), Some(&p("json.l.array_11", "11")));
        assert_eq!(out.get(12..), Some(&[p("json.kA", "1"), p("json.k", "2"), p("json.\"", "3")][..]));
    }

    #[test]
    fn top_level_array_is_named_json() {
        assert_eq!(
            run(r#"[1,[2],{"a":3}]"#).unwrap(),
            vec![
                p("json.array_0", "1"),
                p("json.array_1.array_0", "2"),
                p("json.array_2.a", "3"),
            ]
        );
    }

    #[test]
    fn top_level_scalars_become_single_json_arg() {
        assert_eq!(run(r#""hello""#).unwrap(), vec![p("json", "hello")]);
        assert_eq!(run("42").unwrap(), vec![p("json", "42")]);
        assert_eq!(run(" true ").unwrap(), vec![p("json", "true")]);
        assert_eq!(run("null").unwrap(), vec![p("json", "")]);
    }

    #[test]
    fn scalar_values_as_yajl_reports_them() {
        assert_eq!(
            run(r#"{"t":true,"f":false,"n":null,"i":-12,"d":1.50e+3,"z":0}"#).unwrap(),
            vec![
                p("json.t", "true"),
                p("json.f", "false"),
                p("json.n", ""),
                p("json.i", "-12"),
                p("json.d", "1.50e+3"),
                p("json.z", "0"),
            ]
        );
    }

    #[test]
    fn empty_containers_produce_nothing() {
        assert_eq!(run("{}").unwrap(), vec![]);
        assert_eq!(run("[]").unwrap(), vec![]);
        assert_eq!(
            run(r#"{"a":{},"b":[],"c":[[],{}],"d":1}"#).unwrap(),
            vec![p("json.d", "1")]
        );
    }

    #[test]
    fn empty_containers_still_advance_array_index() {
        assert_eq!(run(r#"[[],{},7]"#).unwrap(), vec![p("json.array_2", "7")]);
    }

    #[test]
    fn empty_key_is_named_empty_key() {
        assert_eq!(
            run(r#"{"":1,"o":{"":{"x":2}}}"#).unwrap(),
            vec![p("json.empty-key", "1"), p("json.o.empty-key.x", "2")]
        );
    }

    #[test]
    fn duplicate_keys_are_all_reported() {
        assert_eq!(
            run(r#"{"a":1,"a":2}"#).unwrap(),
            vec![p("json.a", "1"), p("json.a", "2")]
        );
    }

    #[test]
    fn string_escapes_are_decoded() {
        assert_eq!(
            run(r#"{"k\"ey":"a\\b\/c\n\t\u0041\u00e9\u20ac"}"#).unwrap(),
            vec![p("json.k\"ey", "a\\b/c\n\tAé€")]
        );
    }

    #[test]
    fn surrogate_pairs_decode_to_utf8() {
        assert_eq!(run(r#""\ud83d\ude00""#).unwrap(), vec![p("json", "😀")]);
        // A lone high surrogate becomes '?', like yajl.
        assert_eq!(run(r#""\ud83dx""#).unwrap(), vec![p("json", "?x")]);
    }

    #[test]
    fn nul_escape_gives_nul_byte() {
        let mut out = Vec::new();
        parse(br#"{"a":"x\u0000y"}"#, &lim(), &mut out).unwrap();
        assert_eq!(out[0].1, b"x\0y".to_vec());
    }

    #[test]
    fn utf8_passes_through_and_invalid_utf8_is_rejected() {
        assert_eq!(run(r#"{"é":"日本"}"#).unwrap(), vec![p("json.é", "日本")]);
        let e = run_bytes(b"{\"a\":\"\xff\"}", &lim()).unwrap_err();
        assert_eq!(
            e,
            "JSON parsing error: lexical error: invalid bytes in UTF8 string."
        );
        let e = run_bytes(b"\"\xc3\"", &lim()).unwrap_err();
        assert!(e.contains("invalid bytes in UTF8"), "{e}");
    }

    #[test]
    fn empty_body_is_not_an_error() {
        assert_eq!(run("").unwrap(), vec![]);
    }

    #[test]
    fn whitespace_only_body_is_premature_eof() {
        assert_eq!(
            run("  \n").unwrap_err(),
            "JSON parsing error: parse error: premature EOF"
        );
    }

    #[test]
    fn invalid_json_errors_use_yajl_wording() {
        let cases = [
            (r#"{"a":1"#, "parse error: premature EOF"),
            (r#"{"a":1}x"#, "parse error: trailing garbage"),
            (r#"{"a":1} {}"#, "parse error: trailing garbage"),
            (
                r#"{"a" 1}"#,
                "parse error: object key and value must be separated by a colon (':')",
            ),
            (
                r#"{"a":1 "b":2}"#,
                "parse error: after key and value, inside map, I expect ',' or '}'",
            ),
            (
                "[1 2]",
                "parse error: after array element, I expect ',' or ']'",
            ),
            (
                "{1:2}",
                "parse error: invalid object key (must be a string)",
            ),
            (
                r#"{"a":1,}"#,
                "parse error: invalid object key (must be a string)",
            ),
            (
                "[1,]",
                "parse error: unallowed token at this point in JSON text",
            ),
            (
                "[,]",
                "parse error: unallowed token at this point in JSON text",
            ),
            ("{'a':1}", "lexical error: invalid char in json text."),
            ("[tru]", "lexical error: invalid string in json text."),
            ("[nul", "lexical error: invalid string in json text."),
            (
                "[-]",
                "lexical error: malformed number, a digit is required after the minus sign.",
            ),
            (
                "[1.]",
                "lexical error: malformed number, a digit is required after the decimal point.",
            ),
            (
                "[1e]",
                "lexical error: malformed number, a digit is required after the exponent.",
            ),
            (
                "/* c */ {}",
                "lexical error: probable comment found in input text, comments are not enabled.",
            ),
            (
                "[\"a\\x\"]",
                "lexical error: inside a string, '\\' occurs before a character which it may not.",
            ),
            (
                "[\"\\u12G4\"]",
                "lexical error: invalid (non-hex) character occurs after '\\u' inside string.",
            ),
            (
                "[\"a\nb\"]",
                "lexical error: invalid character inside string.",
            ),
        ];
        for (input, want) in cases {
            let got = run(input).unwrap_err();
            assert_eq!(
                got,
                format!("JSON parsing error: {want}"),
                "input {input:?}"
            );
        }
    }

    #[test]
    fn leading_zero_number_is_rejected() {
        assert!(run("[01]").is_err());
        assert!(run("01").is_err());
    }

    #[test]
    fn args_before_an_error_are_kept() {
        let mut out = Vec::new();
        let r = parse(br#"{"a":"x","b":[1,"#, &lim(), &mut out);
        assert!(r.is_err());
        assert_eq!(strs(out), vec![p("json.a", "x"), p("json.b.array_0", "1")]);
    }

    #[test]
    fn depth_limit_is_inclusive() {
        let l = JsonLimits {
            max_depth: 3,
            max_args: 10,
            max_output: usize::MAX,
        };
        assert_eq!(
            run_bytes(br#"{"a":{"b":[1]}}"#, &l).unwrap(),
            vec![p("json.a.b.array_0", "1")]
        );
        assert_eq!(
            run_bytes(br#"{"a":{"b":[[1]]}}"#, &l).unwrap_err(),
            "JSON parsing error: JSON depth limit exceeded"
        );
        let zero = JsonLimits {
            max_depth: 0,
            max_args: 10,
            max_output: usize::MAX,
        };
        assert_eq!(run_bytes(b"5", &zero).unwrap(), vec![p("json", "5")]);
        assert!(run_bytes(b"[]", &zero).is_err());
    }

    #[test]
    fn max_args_drops_extra_values_but_validates_everything() {
        let l = JsonLimits {
            max_depth: 10,
            max_args: 2,
            max_output: usize::MAX,
        };
        assert_eq!(
            run_bytes(b"[1,2,3,4]", &l).unwrap(),
            vec![p("json.array_0", "1"), p("json.array_1", "2")]
        );
        assert!(run_bytes(b"[1,2,3,4,]", &l).is_err());
    }

    #[test]
    fn hostile_deep_nesting_100k_is_rejected_without_recursion() {
        let mut s = vec![b'['; 100_000];
        s.extend(vec![b']'; 100_000]);
        let e = run_bytes(&s, &lim()).unwrap_err();
        assert_eq!(e, "JSON parsing error: JSON depth limit exceeded");
        // Even with an unbounded depth limit it is fine (heap stack only).
        let l = JsonLimits {
            max_depth: usize::MAX,
            max_args: 10,
            max_output: usize::MAX,
        };
        assert_eq!(run_bytes(&s, &l).unwrap(), vec![]);
        let mut objs = Vec::new();
        for _ in 0..100_000 {
            objs.extend_from_slice(br#"{"a":"#);
        }
        objs.push(b'1');
        objs.extend(vec![b'}'; 100_000]);
        let out = run_bytes(&objs, &l).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].0.len(), "json.".len() + 2 * (100_000 - 1) + 1);
    }

    #[test]
    fn hostile_unterminated_inputs() {
        for input in [
            "\"abc",
            "{\"abc",
            "{\"a\":\"x\\",
            "[\"\\u12",
            "[\"\\ud83d\\u",
            "[",
            "{",
            "{\"a\"",
            "{\"a\":",
            "[1,",
            "-",
        ] {
            assert!(run(input).is_err(), "{input:?}");
        }
    }

    #[test]
    fn hostile_many_args_are_capped() {
        let mut s = b"[".to_vec();
        for _ in 0..200_000 {
            s.extend_from_slice(b"0,");
        }
        s.extend_from_slice(b"0]");
        let l = JsonLimits {
            max_depth: 8,
            max_args: 1000,
            max_output: usize::MAX,
        };
        let out = run_bytes(&s, &l).unwrap();
        assert_eq!(out.len(), 1000);
        assert_eq!(out[999].0, "json.array_999");
    }

    #[test]
    fn hostile_long_key_over_many_leaves_hits_output_cap() {
        let key = "k".repeat(1 << 20);
        let mut s = format!("{{\"{key}\":[");
        for _ in 0..100_000 {
            s.push_str("0,");
        }
        s.push_str("0]}");
        let l = JsonLimits {
            max_depth: 8,
            max_args: usize::MAX,
            max_output: usize::MAX,
        };
        let e = run_bytes(s.as_bytes(), &l).unwrap_err();
        assert!(e.contains("exceed"), "{e}");
    }

    #[test]
    fn fixture_nested_document() {
        let doc = include_bytes!("../../testdata/body/nested.json");
        assert_eq!(
            run_bytes(doc, &lim()).unwrap(),
            vec![
                p("json.user.name", "x' OR 1=1--"),
                p("json.user.roles.array_0", "admin"),
                p("json.user.roles.array_1.id", "7"),
                p("json.ok", "true"),
                p("json.n", ""),
            ]
        );
    }

    #[test]
    fn every_prefix_of_a_document_is_handled_without_panic() {
        let doc = r#"{"a":[1,-2.5e-3,{"b":"\u00e9\ud83d\ude00\n"},null,true,false],"":{}}"#;
        for i in 0..=doc.len() {
            let _ = run_bytes(&doc.as_bytes()[..i], &lim());
        }
        assert!(run(doc).is_ok());
    }
}
