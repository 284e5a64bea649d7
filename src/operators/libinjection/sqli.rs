//! SQL tokenizer, folder and fingerprint checker with the semantics of
//! libinjection's `libinjection_sqli.c` (libinjection/libinjection at
//! v3.10.0-83, Feb 2025, with PR #60 of Oct 2025 as libmodsecurity 3.0.15
//! bundles it; BSD-3-Clause, (c) Nick Galbreath / Client9).
//!
//! The C code's quirks are kept on purpose, because `@detectSQLi` must agree with
//! it byte for byte: token values are truncated to 31 bytes, the `strchr`-based
//! character sets also accept NUL, `char` is signed (x86), and so on.
//! All work happens in a fixed-size state on the stack; nothing is allocated
//! per call (the keyword index is built once).
//!
//! Every access to the input, a token value or the token vector is checked
//! (`at`, `sub`, `tail`, `get`): a read past the end of the input gives NUL,
//! like the C caller's terminator, and an out-of-range slice gives the empty
//! slice. The indexes are in range wherever the C code is correct, so these
//! fallbacks only keep a mistake from panicking the wasm VM.
//!
//! The folding code keeps the C `if / else if` chain one branch per rule, even
//! where two rules share a body.
#![allow(clippy::if_same_then_else)]

use std::sync::OnceLock;

use libinjectionrs::sqli::sqli_data::{CharType, CHAR_MAP, SQL_KEYWORDS};

pub const FLAG_QUOTE_NONE: u32 = 1;
pub const FLAG_QUOTE_SINGLE: u32 = 2;
pub const FLAG_QUOTE_DOUBLE: u32 = 4;
pub const FLAG_SQL_ANSI: u32 = 8;
pub const FLAG_SQL_MYSQL: u32 = 16;

/// Size of a token value buffer, NUL included (C: `sizeof(stoken_t.val)`).
const TOKEN_SIZE: usize = 32;
const MAX_TOKENS: usize = 5;

pub const TYPE_NONE: u8 = 0;
pub const TYPE_KEYWORD: u8 = b'k';
pub const TYPE_UNION: u8 = b'U';
pub const TYPE_GROUP: u8 = b'B';
pub const TYPE_EXPRESSION: u8 = b'E';
pub const TYPE_SQLTYPE: u8 = b't';
pub const TYPE_FUNCTION: u8 = b'f';
pub const TYPE_BAREWORD: u8 = b'n';
pub const TYPE_NUMBER: u8 = b'1';
pub const TYPE_VARIABLE: u8 = b'v';
pub const TYPE_STRING: u8 = b's';
pub const TYPE_OPERATOR: u8 = b'o';
pub const TYPE_LOGIC_OPERATOR: u8 = b'&';
pub const TYPE_COMMENT: u8 = b'c';
pub const TYPE_COLLATE: u8 = b'A';
pub const TYPE_LEFTPARENS: u8 = b'(';
pub const TYPE_RIGHTPARENS: u8 = b')';
pub const TYPE_LEFTBRACE: u8 = b'{';
pub const TYPE_RIGHTBRACE: u8 = b'}';
pub const TYPE_DOT: u8 = b'.';
pub const TYPE_COMMA: u8 = b',';
pub const TYPE_COLON: u8 = b':';
pub const TYPE_SEMICOLON: u8 = b';';
pub const TYPE_TSQL: u8 = b'T';
pub const TYPE_UNKNOWN: u8 = b'?';
pub const TYPE_EVIL: u8 = b'X';
pub const TYPE_FINGERPRINT: u8 = b'F';
pub const TYPE_BACKSLASH: u8 = b'\\';

const CHAR_SINGLE: u8 = b'\'';
const CHAR_DOUBLE: u8 = b'"';
const CHAR_TICK: u8 = b'`';

// Character sets of the C `strlenspn` / `strlencspn` calls. `strchr(set, 0)`
// finds the terminator, so NUL is implicitly a member of every set.
const WORD_DELIMS: &[u8] = b" []{}<>:\\?=@!#~+-*/&|^%(),';\t\n\x0b\x0c\r\"\xa0\0";
const VAR_DELIMS: &[u8] = b" <>:\\?=@!#~+-*/&|^%(),';\t\n\x0b\x0c\r'`\"\0";
const MONEY_CHARS: &[u8] = b"0123456789.,\0";
const TAG_CHARS: &[u8] = b"abcdefghjiklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ\0";
const BIN_DIGITS: &[u8] = b"01\0";
const HEX_DIGITS: &[u8] = b"0123456789ABCDEFabcdef\0";

/// One token (C `stoken_t`).
#[derive(Clone, Copy, Debug)]
pub struct Token {
    pub pos: usize,
    pub len: usize,
    pub count: i32,
    pub ty: u8,
    pub str_open: u8,
    pub str_close: u8,
    pub val: [u8; TOKEN_SIZE],
}

impl Token {
    const EMPTY: Token = Token {
        pos: 0,
        len: 0,
        count: 0,
        ty: TYPE_NONE,
        str_open: 0,
        str_close: 0,
        val: [0; TOKEN_SIZE],
    };

    /// C `st_assign_char`.
    fn assign_char(&mut self, ty: u8, pos: usize, value: u8) {
        self.ty = ty;
        self.pos = pos;
        self.len = 1;
        self.val[0] = value;
        self.val[1] = 0;
    }

    /// C `st_assign`: copies at most 31 bytes and NUL-terminates.
    fn assign(&mut self, ty: u8, pos: usize, value: &[u8]) {
        let last = value.len().min(TOKEN_SIZE - 1);
        self.ty = ty;
        self.pos = pos;
        self.len = last;
        if let Some((d, rest)) = self.val.split_at_mut_checked(last) {
            if let Some(v) = value.get(..last) {
                d.copy_from_slice(v); // both are `last` bytes long
            }
            if let Some(z) = rest.first_mut() {
                *z = 0;
            }
        }
    }

    /// The first `len` bytes of the value (what C passes with an explicit length).
    fn bytes(&self) -> &[u8] {
        self.val.get(..self.len).unwrap_or(self.val.as_slice())
    }

    /// The value as a C string (up to the first NUL), as `%s` / `strchr` see it.
    pub fn c_str(&self) -> &[u8] {
        c_str(&self.val)
    }
}

pub fn c_str(b: &[u8]) -> &[u8] {
    match b.iter().position(|&c| c == 0) {
        Some(n) => b.get(..n).unwrap_or(b),
        None => b,
    }
}

/// Byte `i` of the input, NUL past its end (the C caller's terminator).
fn at(s: &[u8], i: usize) -> u8 {
    s.get(i).copied().unwrap_or(0)
}

/// `s[from..to]`, or the empty slice if that is out of range.
fn sub(s: &[u8], from: usize, to: usize) -> &[u8] {
    s.get(from..to).unwrap_or_default()
}

/// `s[from..]`, or the empty slice if `from` is past the end.
fn tail(s: &[u8], from: usize) -> &[u8] {
    s.get(from..).unwrap_or_default()
}

fn in_set(set: &[u8], c: u8) -> bool {
    set.contains(&c)
}

/// C `strlenspn`: length of the prefix made of bytes in `set`.
fn span(s: &[u8], set: &[u8]) -> usize {
    s.iter().position(|&c| !in_set(set, c)).unwrap_or(s.len())
}

/// C `strlencspn`: length of the prefix made of bytes not in `set`.
fn cspan(s: &[u8], set: &ByteSet) -> usize {
    s.iter().position(|&c| set.has(c)).unwrap_or(s.len())
}

/// A byte set as a table, for the hot `cspan`s (testing each byte against a 36-byte set
/// string cost more than the rest of the word scanning).
struct ByteSet([bool; 256]);

// Indexing a 256-entry table with a byte cannot go out of bounds.
#[allow(clippy::indexing_slicing)]
impl ByteSet {
    const fn of(set: &[u8]) -> ByteSet {
        let mut t = [false; 256];
        let mut i = 0;
        while i < set.len() {
            t[set[i] as usize] = true;
            i += 1;
        }
        ByteSet(t)
    }

    fn has(&self, c: u8) -> bool {
        self.0[usize::from(c)]
    }
}

const WORD_DELIM_SET: ByteSet = ByteSet::of(WORD_DELIMS);
const VAR_DELIM_SET: ByteSet = ByteSet::of(VAR_DELIMS);

fn memchr(s: &[u8], from: usize, c: u8) -> Option<usize> {
    s.get(from..)?
        .iter()
        .position(|&x| x == c)
        .map(|i| i + from)
}

/// C `memchr2` over `s[from..to]`: first index of the pair `c0 c1`.
fn memchr2(s: &[u8], from: usize, to: usize, c0: u8, c1: u8) -> Option<usize> {
    let h = s.get(from..to)?;
    if h.len() < 2 {
        return None;
    }
    h.windows(2).position(|w| w == [c0, c1]).map(|i| i + from)
}

/// C `my_memmem` over `s[from..]`.
fn memmem(s: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    let h = s.get(from..)?;
    if needle.is_empty() || h.len() < needle.len() {
        return None;
    }
    h.windows(needle.len())
        .position(|w| w == needle)
        .map(|i| i + from)
}

/// C `char_is_white`: `strchr(" \t\n\v\f\r\240\000", ch)`.
fn char_is_white(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | 0xa0 | 0)
}

fn upcase(c: u8) -> u8 {
    if c.is_ascii_lowercase() {
        c - 0x20
    } else {
        c
    }
}

/// `cstrcasecmp(a, b, b.len()) == 0` where `a` is an upper-case literal.
fn cstrcase_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(&x, &y)| x == upcase(y))
}

// ---------------------------------------------------------------- keywords

/// The keyword table (`sql_keywords`: SQL words, operators, and the SQLi
/// fingerprints as `'0' + FINGERPRINT` with type `F`), by word: one hash and
/// one comparison per lookup (the C code's binary search made ~13).
fn keyword_table() -> &'static KeywordMap {
    static TABLE: OnceLock<KeywordMap> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut m = KeywordMap::with_capacity_and_hasher(SQL_KEYWORDS.len(), Default::default());
        for k in SQL_KEYWORDS {
            // A word listed twice keeps its smallest type (what sorting the pairs and
            // dropping later duplicates kept before).
            let t = m.entry(k.word.as_bytes()).or_insert(k.token_type);
            *t = (*t).min(k.token_type);
        }
        m
    })
}

type KeywordMap = std::collections::HashMap<&'static [u8], u8, std::hash::BuildHasherDefault<crate::fx::Fx>>;

/// C `is_keyword` / `bsearch_keyword_type`: type of `key` (ASCII-upcased), or 0.
pub fn lookup_word(key: &[u8]) -> u8 {
    let mut buf = [0u8; 64];
    if key.len() > buf.len() {
        return 0; // longer than any table word
    }
    for (d, &c) in buf.iter_mut().zip(key) {
        *d = upcase(c);
    }
    let key = sub(&buf, 0, key.len());
    keyword_table().get(key).copied().unwrap_or(0)
}

// ---------------------------------------------------------------- state

/// C `struct libinjection_sqli_state`.
pub struct SqliState<'a> {
    s: &'a [u8],
    flags: u32,
    pos: usize,
    /// Index of the token being filled (C `sf->current`).
    pub current: usize,
    pub tokenvec: [Token; MAX_TOKENS + 3],
    pub fingerprint: [u8; 8],
    /// Stands in for `tokenvec[current]` should `current` ever be out of range.
    spare: Token,
    stats_comment_ddx: u32,
    stats_comment_hash: u32,
    stats_tokens: u32,
}

fn normalize_flags(flags: u32) -> u32 {
    if flags == 0 {
        FLAG_QUOTE_NONE | FLAG_SQL_ANSI
    } else {
        flags
    }
}

impl<'a> SqliState<'a> {
    /// C `libinjection_sqli_init`.
    pub fn new(s: &'a [u8], flags: u32) -> Self {
        SqliState {
            s,
            flags: normalize_flags(flags),
            pos: 0,
            current: 0,
            tokenvec: [Token::EMPTY; MAX_TOKENS + 3],
            fingerprint: [0; 8],
            spare: Token::EMPTY,
            stats_comment_ddx: 0,
            stats_comment_hash: 0,
            stats_tokens: 0,
        }
    }

    /// C `libinjection_sqli_reset`.
    fn reset(&mut self, flags: u32) {
        *self = SqliState::new(self.s, flags);
    }

    /// `tokenvec[current]`, the token being filled.
    fn cur(&mut self) -> &mut Token {
        match self.tokenvec.get_mut(self.current) {
            Some(t) => t,
            None => &mut self.spare,
        }
    }

    fn at(&self, i: usize) -> u8 {
        at(self.s, i)
    }

    /// C `libinjection_sqli_tokenize`: fills `tokenvec[current]`.
    pub fn tokenize(&mut self) -> bool {
        let slen = self.s.len();
        if slen == 0 {
            return false;
        }
        *self.cur() = Token::EMPTY;
        if self.pos == 0 && self.flags & (FLAG_QUOTE_SINGLE | FLAG_QUOTE_DOUBLE) != 0 {
            let delim = if self.flags & FLAG_QUOTE_SINGLE != 0 {
                CHAR_SINGLE
            } else {
                CHAR_DOUBLE
            };
            let s = self.s;
            self.pos = parse_string_core(s, 0, self.cur(), delim, 0);
            self.stats_tokens += 1;
            return true;
        }
        while let Some(&ch) = self.s.get(self.pos) {
            self.pos = self.dispatch(ch);
            if self.cur().ty != TYPE_NONE {
                self.stats_tokens += 1;
                return true;
            }
        }
        false
    }

    /// C `char_parse_map[ch](sf)`.
    fn dispatch(&mut self, ch: u8) -> usize {
        let class = CHAR_MAP.get(usize::from(ch)).copied();
        match class.unwrap_or(CharType::Other) {
            CharType::White => self.pos + 1,
            CharType::Bang | CharType::Op2 => self.parse_operator2(),
            CharType::String => self.parse_string(),
            CharType::Hash => self.parse_hash(),
            CharType::Money => self.parse_money(),
            CharType::Op1 | CharType::Unary => self.parse_operator1(),
            CharType::LeftParens
            | CharType::RightParens
            | CharType::Comma
            | CharType::Semicolon
            | CharType::LeftBrace
            | CharType::RightBrace => self.parse_char(),
            CharType::Dash => self.parse_dash(),
            CharType::Number => self.parse_number(),
            CharType::Slash => self.parse_slash(),
            CharType::Variable => self.parse_var(),
            CharType::Word => self.parse_word(),
            CharType::BString => self.parse_xbstring(BIN_DIGITS),
            CharType::XString => self.parse_xbstring(HEX_DIGITS),
            CharType::EString => self.parse_estring(),
            CharType::NQString => self.parse_nqstring(),
            CharType::QString => self.parse_qstring_core(0),
            CharType::UString => self.parse_ustring(),
            CharType::BWord => self.parse_bword(),
            CharType::Backslash => self.parse_backslash(),
            CharType::Tick => self.parse_tick(),
            CharType::Other => self.parse_other(),
        }
    }

    fn parse_operator1(&mut self) -> usize {
        let (pos, c) = (self.pos, self.at(self.pos));
        self.cur().assign_char(TYPE_OPERATOR, pos, c);
        pos + 1
    }

    fn parse_other(&mut self) -> usize {
        let (pos, c) = (self.pos, self.at(self.pos));
        self.cur().assign_char(TYPE_UNKNOWN, pos, c);
        pos + 1
    }

    fn parse_char(&mut self) -> usize {
        let (pos, c) = (self.pos, self.at(self.pos));
        self.cur().assign_char(c, pos, c);
        pos + 1
    }

    fn parse_eol_comment(&mut self) -> usize {
        let (s, pos) = (self.s, self.pos);
        match memchr(s, pos, b'\n') {
            None => {
                self.cur().assign(TYPE_COMMENT, pos, tail(s, pos));
                s.len()
            }
            Some(e) => {
                self.cur().assign(TYPE_COMMENT, pos, sub(s, pos, e));
                e + 1
            }
        }
    }

    fn parse_hash(&mut self) -> usize {
        self.stats_comment_hash += 1;
        if self.flags & FLAG_SQL_MYSQL != 0 {
            self.stats_comment_hash += 1;
            self.parse_eol_comment()
        } else {
            let pos = self.pos;
            self.cur().assign_char(TYPE_OPERATOR, pos, b'#');
            pos + 1
        }
    }

    fn parse_dash(&mut self) -> usize {
        let (s, pos, slen) = (self.s, self.pos, self.s.len());
        if pos + 2 < slen && at(s, pos + 1) == b'-' && char_is_white(at(s, pos + 2)) {
            self.parse_eol_comment()
        } else if pos + 2 == slen && at(s, pos + 1) == b'-' {
            self.parse_eol_comment()
        } else if pos + 1 < slen && at(s, pos + 1) == b'-' && self.flags & FLAG_SQL_ANSI != 0 {
            self.stats_comment_ddx += 1;
            self.parse_eol_comment()
        } else {
            self.cur().assign_char(TYPE_OPERATOR, pos, b'-');
            pos + 1
        }
    }

    fn parse_slash(&mut self) -> usize {
        let (s, pos, slen) = (self.s, self.pos, self.s.len());
        if pos + 1 == slen || at(s, pos + 1) != b'*' {
            return self.parse_operator1();
        }
        let end = memchr2(s, pos + 2, slen, b'*', b'/');
        let clen = match end {
            None => slen - pos,
            Some(p) => p + 2 - pos,
        };
        // A "/*" inside the comment (PostgreSQL nesting), or a MySQL "/*!"
        // conditional comment, makes the token evil. The C window for the nested
        // search is one byte longer than the comment body; kept as is.
        let nested = match end {
            Some(p) => memchr2(s, pos + 2, p + 1, b'/', b'*').is_some(),
            None => false,
        };
        let mysql = pos + 2 < slen && at(s, pos + 2) == b'!';
        let ty = if nested || mysql {
            TYPE_EVIL
        } else {
            TYPE_COMMENT
        };
        self.cur().assign(ty, pos, sub(s, pos, pos + clen));
        pos + clen
    }

    fn parse_backslash(&mut self) -> usize {
        let (s, pos) = (self.s, self.pos);
        if pos + 1 < s.len() && at(s, pos + 1) == b'N' {
            self.cur().assign(TYPE_NUMBER, pos, sub(s, pos, pos + 2));
            pos + 2
        } else {
            self.cur().assign_char(TYPE_BACKSLASH, pos, at(s, pos));
            pos + 1
        }
    }

    fn parse_operator2(&mut self) -> usize {
        let (s, pos, slen) = (self.s, self.pos, self.s.len());
        if pos + 1 >= slen {
            return self.parse_operator1();
        }
        if pos + 2 < slen && sub(s, pos, pos + 3) == b"<=>" {
            self.cur().assign(TYPE_OPERATOR, pos, sub(s, pos, pos + 3));
            return pos + 3;
        }
        let ch = lookup_word(sub(s, pos, pos + 2));
        if ch != 0 {
            self.cur().assign(ch, pos, sub(s, pos, pos + 2));
            return pos + 2;
        }
        if at(s, pos) == b':' {
            self.cur().assign(TYPE_COLON, pos, sub(s, pos, pos + 1));
            pos + 1
        } else {
            self.parse_operator1()
        }
    }

    fn parse_string(&mut self) -> usize {
        let (s, pos) = (self.s, self.pos);
        parse_string_core(s, pos, self.cur(), at(s, pos), 1)
    }

    fn parse_estring(&mut self) -> usize {
        let (s, pos) = (self.s, self.pos);
        if pos + 2 >= s.len() || at(s, pos + 1) != CHAR_SINGLE {
            return self.parse_word();
        }
        parse_string_core(s, pos, self.cur(), CHAR_SINGLE, 2)
    }

    fn parse_ustring(&mut self) -> usize {
        let (s, pos) = (self.s, self.pos);
        if pos + 2 < s.len() && at(s, pos + 1) == b'&' && at(s, pos + 2) == b'\'' {
            self.pos += 2;
            let p = self.parse_string();
            let t = self.cur();
            t.str_open = b'u';
            if t.str_close == b'\'' {
                t.str_close = b'u';
            }
            p
        } else {
            self.parse_word()
        }
    }

    fn parse_qstring_core(&mut self, offset: usize) -> usize {
        let (s, slen) = (self.s, self.s.len());
        let pos = self.pos + offset;
        if pos >= slen
            || (at(s, pos) != b'q' && at(s, pos) != b'Q')
            || pos + 2 >= slen
            || at(s, pos + 1) != b'\''
        {
            return self.parse_word();
        }
        let mut ch = at(s, pos + 2);
        // `char` is signed in C: bytes >= 0x80 are "< 33" too.
        if (ch as i8) < 33 {
            return self.parse_word();
        }
        ch = match ch {
            b'(' => b')',
            b'[' => b']',
            b'{' => b'}',
            b'<' => b'>',
            c => c,
        };
        match memchr2(s, pos + 3, slen, ch, b'\'') {
            None => {
                let t = self.cur();
                t.assign(TYPE_STRING, pos + 3, tail(s, pos + 3));
                t.str_open = b'q';
                t.str_close = 0;
                slen
            }
            Some(e) => {
                let t = self.cur();
                t.assign(TYPE_STRING, pos + 3, sub(s, pos + 3, e));
                t.str_open = b'q';
                t.str_close = b'q';
                e + 2
            }
        }
    }

    fn parse_nqstring(&mut self) -> usize {
        let (s, pos) = (self.s, self.pos);
        if pos + 2 < s.len() && at(s, pos + 1) == CHAR_SINGLE {
            return self.parse_estring();
        }
        self.parse_qstring_core(1)
    }

    /// C `parse_bstring` (`b'0101'`) and `parse_xstring` (`x'ABCD'`).
    fn parse_xbstring(&mut self, digits: &[u8]) -> usize {
        let (s, pos, slen) = (self.s, self.pos, self.s.len());
        if pos + 2 >= slen || at(s, pos + 1) != b'\'' {
            return self.parse_word();
        }
        let wlen = span(tail(s, pos + 2), digits);
        if pos + 2 + wlen >= slen || at(s, pos + 2 + wlen) != b'\'' {
            return self.parse_word();
        }
        self.cur()
            .assign(TYPE_NUMBER, pos, sub(s, pos, pos + wlen + 3));
        pos + 2 + wlen + 1
    }

    fn parse_bword(&mut self) -> usize {
        let (s, pos) = (self.s, self.pos);
        match memchr(s, pos, b']') {
            None => {
                self.cur().assign(TYPE_BAREWORD, pos, tail(s, pos));
                s.len()
            }
            Some(e) => {
                self.cur().assign(TYPE_BAREWORD, pos, sub(s, pos, e + 1));
                e + 1
            }
        }
    }

    fn parse_word(&mut self) -> usize {
        let (s, pos) = (self.s, self.pos);
        let wlen = cspan(tail(s, pos), &WORD_DELIM_SET);
        self.cur()
            .assign(TYPE_BAREWORD, pos, sub(s, pos, pos + wlen));

        // "SELECT.1" or "SELECT`col`": a keyword before '.' or '`' stands alone.
        let t = *self.cur();
        for (i, &c) in t.bytes().iter().enumerate() {
            if c == b'.' || c == b'`' {
                let ch = lookup_word(sub(&t.val, 0, i));
                if ch != TYPE_NONE && ch != TYPE_BAREWORD {
                    let cur = self.cur();
                    *cur = Token::EMPTY;
                    cur.assign(ch, pos, sub(s, pos, pos + i));
                    return pos + i;
                }
            }
        }
        if wlen < TOKEN_SIZE {
            let ch = lookup_word(sub(&t.val, 0, wlen));
            self.cur().ty = if ch == 0 { TYPE_BAREWORD } else { ch };
        }
        pos + wlen
    }

    fn parse_tick(&mut self) -> usize {
        let (s, pos) = (self.s, self.pos);
        let p = parse_string_core(s, pos, self.cur(), CHAR_TICK, 1);
        let ch = lookup_word(self.cur().bytes());
        self.cur().ty = if ch == TYPE_FUNCTION {
            TYPE_FUNCTION
        } else {
            TYPE_BAREWORD
        };
        p
    }

    fn parse_var(&mut self) -> usize {
        let (s, slen) = (self.s, self.s.len());
        let mut pos = self.pos + 1;
        if pos < slen && at(s, pos) == b'@' {
            pos += 1;
            self.cur().count = 2;
        } else {
            self.cur().count = 1;
        }
        if pos < slen {
            if at(s, pos) == b'`' {
                self.pos = pos;
                let p = self.parse_tick();
                self.cur().ty = TYPE_VARIABLE;
                return p;
            } else if at(s, pos) == CHAR_SINGLE || at(s, pos) == CHAR_DOUBLE {
                self.pos = pos;
                let p = self.parse_string();
                self.cur().ty = TYPE_VARIABLE;
                return p;
            }
        }
        let xlen = cspan(tail(s, pos), &VAR_DELIM_SET);
        self.cur()
            .assign(TYPE_VARIABLE, pos, sub(s, pos, pos + xlen));
        pos + xlen
    }

    fn parse_money(&mut self) -> usize {
        let (s, pos, slen) = (self.s, self.pos, self.s.len());
        if pos + 1 == slen {
            self.cur().assign_char(TYPE_BAREWORD, pos, b'$');
            return slen;
        }
        // $1,000.00 or $1.000,00
        let xlen = span(tail(s, pos + 1), MONEY_CHARS);
        if xlen == 0 {
            if at(s, pos + 1) == b'$' {
                // $$ ... $$ (PostgreSQL)
                return match memchr2(s, pos + 2, slen, b'$', b'$') {
                    None => {
                        let t = self.cur();
                        t.assign(TYPE_STRING, pos + 2, tail(s, pos + 2));
                        t.str_open = b'$';
                        t.str_close = 0;
                        slen
                    }
                    Some(e) => {
                        let t = self.cur();
                        t.assign(TYPE_STRING, pos + 2, sub(s, pos + 2, e));
                        t.str_open = b'$';
                        t.str_close = b'$';
                        e + 2
                    }
                };
            }
            // $tag$ ... $tag$ (PostgreSQL)
            let xlen = span(tail(s, pos + 1), TAG_CHARS);
            if xlen == 0 || pos + xlen + 1 == slen || at(s, pos + xlen + 1) != b'$' {
                self.cur().assign_char(TYPE_BAREWORD, pos, b'$');
                return pos + 1;
            }
            let body = pos + xlen + 2;
            match memmem(s, body, sub(s, pos, body)) {
                None => {
                    let t = self.cur();
                    t.assign(TYPE_STRING, body, tail(s, body));
                    t.str_open = b'$';
                    t.str_close = 0;
                    slen
                }
                Some(e) => {
                    let t = self.cur();
                    t.assign(TYPE_STRING, body, sub(s, body, e));
                    t.str_open = b'$';
                    t.str_close = b'$';
                    e + xlen + 2
                }
            }
        } else if xlen == 1 && at(s, pos + 1) == b'.' {
            // "$." is a word
            self.parse_word()
        } else {
            self.cur()
                .assign(TYPE_NUMBER, pos, sub(s, pos, pos + 1 + xlen));
            pos + 1 + xlen
        }
    }

    fn parse_number(&mut self) -> usize {
        let (s, slen) = (self.s, self.s.len());
        let mut pos = self.pos;
        if at(s, pos) == b'0' && pos + 1 < slen {
            let digits = match at(s, pos + 1) {
                b'X' | b'x' => Some(HEX_DIGITS),
                b'B' | b'b' => Some(BIN_DIGITS),
                _ => None,
            };
            if let Some(digits) = digits {
                let xlen = span(tail(s, pos + 2), digits);
                if xlen == 0 {
                    self.cur().assign(TYPE_BAREWORD, pos, sub(s, pos, pos + 2));
                    return pos + 2;
                }
                self.cur()
                    .assign(TYPE_NUMBER, pos, sub(s, pos, pos + 2 + xlen));
                return pos + 2 + xlen;
            }
        }
        let start = pos;
        while pos < slen && at(s, pos).is_ascii_digit() {
            pos += 1;
        }
        if pos < slen && at(s, pos) == b'.' {
            pos += 1;
            while pos < slen && at(s, pos).is_ascii_digit() {
                pos += 1;
            }
            if pos - start == 1 {
                self.cur().assign_char(TYPE_DOT, start, b'.');
                return pos;
            }
        }
        let (mut have_e, mut have_exp) = (false, false);
        if pos < slen && (at(s, pos) == b'E' || at(s, pos) == b'e') {
            have_e = true;
            pos += 1;
            if pos < slen && (at(s, pos) == b'+' || at(s, pos) == b'-') {
                pos += 1;
            }
            while pos < slen && at(s, pos).is_ascii_digit() {
                have_exp = true;
                pos += 1;
            }
        }
        // Oracle float/double suffix: "1.2f", "1d;", "1fUNION"
        if pos < slen
            && matches!(at(s, pos), b'd' | b'D' | b'f' | b'F')
            && (pos + 1 == slen
                || char_is_white(at(s, pos + 1))
                || matches!(at(s, pos + 1), b';' | b'u' | b'U'))
        {
            pos += 1;
        }
        // "1234.e", "10.10E", "1e": an exponent without digits. MySQL reads such a number as
        // nothing at all ("1.e(1)" is "(1)", "1 1.e/1" is "1/1"), so it makes no token and
        // tokenizing goes on after it (libinjection PR #60; before, it was a bareword).
        if have_e && !have_exp {
            return pos;
        }
        self.cur().assign(TYPE_NUMBER, start, sub(s, start, pos));
        pos
    }

    // ------------------------------------------------------------ folding

    /// C `libinjection_sqli_fold`: returns the number of tokens kept.
    pub fn fold(&mut self) -> usize {
        let mut last_comment = Token::EMPTY;
        let mut pos: usize = 0;
        let mut left: usize = 0;
        let mut more = true;

        // Skip all initial comments, right-parens ( and unary operators.
        self.current = 0;
        while more {
            more = self.tokenize();
            let t = self.cur();
            if !(t.ty == TYPE_COMMENT
                || t.ty == TYPE_LEFTPARENS
                || t.ty == TYPE_SQLTYPE
                || is_unary_op(t))
            {
                break;
            }
        }
        if !more {
            return 0;
        }
        pos += 1;

        loop {
            let tv = &mut self.tokenvec;
            if pos >= MAX_TOKENS {
                let ty = |i: usize| tv.get(i).map_or(TYPE_NONE, |t| t.ty);
                let special = (ty(0) == TYPE_NUMBER
                    && (ty(1) == TYPE_OPERATOR || ty(1) == TYPE_COMMA)
                    && ty(2) == TYPE_LEFTPARENS
                    && ty(3) == TYPE_NUMBER
                    && ty(4) == TYPE_RIGHTPARENS)
                    || (ty(0) == TYPE_BAREWORD
                        && ty(1) == TYPE_OPERATOR
                        && ty(2) == TYPE_LEFTPARENS
                        && (ty(3) == TYPE_BAREWORD || ty(3) == TYPE_NUMBER)
                        && ty(4) == TYPE_RIGHTPARENS)
                    || (ty(0) == TYPE_NUMBER
                        && ty(1) == TYPE_RIGHTPARENS
                        && ty(2) == TYPE_COMMA
                        && ty(3) == TYPE_LEFTPARENS
                        && ty(4) == TYPE_NUMBER)
                    || (ty(0) == TYPE_BAREWORD
                        && ty(1) == TYPE_RIGHTPARENS
                        && ty(2) == TYPE_OPERATOR
                        && ty(3) == TYPE_LEFTPARENS
                        && ty(4) == TYPE_BAREWORD);
                if special {
                    if pos > MAX_TOKENS {
                        tv[1] = tv[MAX_TOKENS];
                        pos = 2;
                    } else {
                        pos = 1;
                    }
                    left = 0;
                }
            }

            if !more || left >= MAX_TOKENS {
                left = pos;
                break;
            }

            // get up to two tokens
            while more && pos <= MAX_TOKENS && pos - left < 2 {
                self.current = pos;
                more = self.tokenize();
                if more {
                    match self.tokenvec.get(pos) {
                        Some(&t) if t.ty == TYPE_COMMENT => last_comment = t,
                        _ => {
                            last_comment.ty = TYPE_NONE;
                            pos += 1;
                        }
                    }
                }
            }
            if pos - left < 2 {
                left = pos;
                continue;
            }

            // pos <= MAX_TOKENS + 1 < tokenvec.len() (both when C is right)
            let Some([t0, t1, ..]) = self.tokenvec.get_mut(left..) else {
                break;
            };
            let (a, b) = (t0.ty, t1.ty);
            if a == TYPE_STRING && b == TYPE_STRING {
                pos -= 1;
                continue;
            } else if a == TYPE_SEMICOLON && b == TYPE_SEMICOLON {
                pos -= 1;
                continue;
            } else if (a == TYPE_OPERATOR || a == TYPE_LOGIC_OPERATOR)
                && (is_unary_op(t1) || b == TYPE_SQLTYPE)
            {
                pos -= 1;
                left = 0;
                continue;
            } else if a == TYPE_LEFTPARENS && is_unary_op(t1) {
                pos -= 1;
                left = left.saturating_sub(1);
                continue;
            } else if syntax_merge_words(t0, t1) {
                pos -= 1;
                left = left.saturating_sub(1);
                continue;
            } else if a == TYPE_SEMICOLON
                && b == TYPE_FUNCTION
                && matches!(t1.val[0], b'I' | b'i')
                && matches!(t1.val[1], b'F' | b'f')
            {
                // T-SQL "; IF 1=1 ..."
                t1.ty = TYPE_TSQL;
                continue;
            } else if (a == TYPE_BAREWORD || a == TYPE_VARIABLE)
                && b == TYPE_LEFTPARENS
                && [
                    &b"USER_ID"[..],
                    b"USER_NAME",
                    b"DATABASE",
                    b"PASSWORD",
                    b"USER",
                    b"CURRENT_USER",
                    b"CURRENT_DATE",
                    b"CURRENT_TIME",
                    b"CURRENT_TIMESTAMP",
                    b"LOCALTIME",
                    b"LOCALTIMESTAMP",
                ]
                .iter()
                .any(|w| cstrcase_eq(w, t0.bytes()))
            {
                t0.ty = TYPE_FUNCTION;
                continue;
            } else if a == TYPE_KEYWORD
                && (cstrcase_eq(b"IN", t0.bytes()) || cstrcase_eq(b"NOT IN", t0.bytes()))
            {
                t0.ty = if b == TYPE_LEFTPARENS {
                    TYPE_OPERATOR
                } else {
                    TYPE_BAREWORD
                };
                continue;
            } else if a == TYPE_OPERATOR
                && (cstrcase_eq(b"LIKE", t0.bytes()) || cstrcase_eq(b"NOT LIKE", t0.bytes()))
            {
                if b == TYPE_LEFTPARENS {
                    t0.ty = TYPE_FUNCTION;
                }
            } else if a == TYPE_SQLTYPE
                && matches!(
                    b,
                    TYPE_BAREWORD
                        | TYPE_NUMBER
                        | TYPE_SQLTYPE
                        | TYPE_LEFTPARENS
                        | TYPE_FUNCTION
                        | TYPE_VARIABLE
                        | TYPE_STRING
                )
            {
                *t0 = *t1;
                pos -= 1;
                left = 0;
                continue;
            } else if a == TYPE_COLLATE && b == TYPE_BAREWORD {
                if t1.c_str().contains(&b'_') {
                    t1.ty = TYPE_SQLTYPE;
                    left = 0;
                }
            } else if a == TYPE_BACKSLASH {
                if is_arithmetic_op(t1) {
                    t0.ty = TYPE_NUMBER;
                } else {
                    *t0 = *t1;
                    pos -= 1;
                }
                left = 0;
                continue;
            } else if (a == TYPE_LEFTPARENS && b == TYPE_LEFTPARENS)
                || (a == TYPE_RIGHTPARENS && b == TYPE_RIGHTPARENS)
            {
                pos -= 1;
                left = 0;
                continue;
            } else if a == TYPE_LEFTBRACE && b == TYPE_BAREWORD {
                // MySQL "{ ``.``.id }": blacklisted when the word is empty.
                if t1.len == 0 {
                    t1.ty = TYPE_EVIL;
                    return left + 2;
                }
                // ODBC "{foo expr}" --> expr
                left = 0;
                pos -= 2;
                continue;
            } else if b == TYPE_RIGHTBRACE {
                pos -= 1;
                left = 0;
                continue;
            }

            // no two-token fold matched: get one more token
            while more && pos <= MAX_TOKENS && pos - left < 3 {
                self.current = pos;
                more = self.tokenize();
                if more {
                    match self.tokenvec.get(pos) {
                        Some(&t) if t.ty == TYPE_COMMENT => last_comment = t,
                        _ => {
                            last_comment.ty = TYPE_NONE;
                            pos += 1;
                        }
                    }
                }
            }
            if pos - left < 3 {
                left = pos;
                continue;
            }

            let Some([t0, t1, t2, ..]) = self.tokenvec.get_mut(left..) else {
                break;
            };
            let (a, b, c) = (t0.ty, t1.ty, t2.ty);
            if a == TYPE_NUMBER && b == TYPE_OPERATOR && c == TYPE_NUMBER {
                pos -= 2;
                left = 0;
                continue;
            } else if a == TYPE_OPERATOR && b != TYPE_LEFTPARENS && c == TYPE_OPERATOR {
                left = 0;
                pos -= 2;
                continue;
            } else if a == TYPE_LOGIC_OPERATOR && c == TYPE_LOGIC_OPERATOR {
                pos -= 2;
                left = 0;
                continue;
            } else if a == TYPE_VARIABLE
                && b == TYPE_OPERATOR
                && matches!(c, TYPE_VARIABLE | TYPE_NUMBER | TYPE_BAREWORD)
            {
                pos -= 2;
                left = 0;
                continue;
            } else if matches!(a, TYPE_BAREWORD | TYPE_NUMBER)
                && b == TYPE_OPERATOR
                && matches!(c, TYPE_NUMBER | TYPE_BAREWORD)
            {
                pos -= 2;
                left = 0;
                continue;
            } else if matches!(a, TYPE_BAREWORD | TYPE_NUMBER | TYPE_VARIABLE | TYPE_STRING)
                && b == TYPE_OPERATOR
                && t1.c_str() == b"::"
                && c == TYPE_SQLTYPE
            {
                pos -= 2;
                left = 0;
                continue;
            } else if matches!(a, TYPE_BAREWORD | TYPE_NUMBER | TYPE_STRING | TYPE_VARIABLE)
                && b == TYPE_COMMA
                && matches!(c, TYPE_NUMBER | TYPE_BAREWORD | TYPE_STRING | TYPE_VARIABLE)
            {
                pos -= 2;
                left = 0;
                continue;
            } else if matches!(a, TYPE_EXPRESSION | TYPE_GROUP | TYPE_COMMA)
                && is_unary_op(t1)
                && c == TYPE_LEFTPARENS
            {
                // "SELECT + (", "LIMIT + (": drop the unary operator
                *t1 = *t2;
                pos -= 1;
                left = 0;
                continue;
            } else if matches!(a, TYPE_KEYWORD | TYPE_EXPRESSION | TYPE_GROUP)
                && is_unary_op(t1)
                && matches!(
                    c,
                    TYPE_NUMBER | TYPE_BAREWORD | TYPE_VARIABLE | TYPE_STRING | TYPE_FUNCTION
                )
            {
                // "select - 1"
                *t1 = *t2;
                pos -= 1;
                left = 0;
                continue;
            } else if a == TYPE_COMMA
                && is_unary_op(t1)
                && matches!(c, TYPE_NUMBER | TYPE_BAREWORD | TYPE_VARIABLE | TYPE_STRING)
            {
                // ", -1" --> ",1" and back up to fold "1,-1" --> "1"
                *t1 = *t2;
                left = 0;
                pos -= 3; // pos >= 3 here
                continue;
            } else if a == TYPE_COMMA && is_unary_op(t1) && c == TYPE_FUNCTION {
                // "1,-sin(1)" --> "1,sin(1)"
                *t1 = *t2;
                pos -= 1;
                left = 0;
                continue;
            } else if a == TYPE_BAREWORD && b == TYPE_DOT && c == TYPE_BAREWORD {
                // databasename.table
                pos -= 2;
                left = 0;
                continue;
            } else if a == TYPE_EXPRESSION && b == TYPE_DOT && c == TYPE_BAREWORD {
                // "select . `foo`" --> "select `foo`"
                *t1 = *t2;
                pos -= 1;
                left = 0;
                continue;
            } else if a == TYPE_FUNCTION && b == TYPE_LEFTPARENS && c != TYPE_RIGHTPARENS {
                // USER() takes no arguments: "User(foo)" is not the function.
                if cstrcase_eq(b"USER", t0.bytes()) {
                    t0.ty = TYPE_BAREWORD;
                }
            }

            left += 1;
        }

        // with 4 or fewer tokens, a trailing comment is added back
        if left < MAX_TOKENS && last_comment.ty == TYPE_COMMENT {
            if let Some(t) = self.tokenvec.get_mut(left) {
                *t = last_comment;
            }
            left += 1;
        }
        left.min(MAX_TOKENS)
    }

    // ------------------------------------------------------------ detection

    /// C `libinjection_sqli_fingerprint`: fold under `flags` and build the fingerprint.
    pub fn fingerprint(&mut self, flags: u32) -> &[u8] {
        self.reset(flags);
        let tlen = self.fold();
        let tv = &mut self.tokenvec;
        // PHP magic: an empty unterminated backquote at the end is a comment
        if tlen > 2 {
            if let Some(t) = tv.get_mut(tlen - 1) {
                if t.ty == TYPE_BAREWORD
                    && t.str_open == CHAR_TICK
                    && t.len == 0
                    && t.str_close == 0
                {
                    t.ty = TYPE_COMMENT;
                }
            }
        }
        for (f, t) in self.fingerprint.iter_mut().zip(tv.iter().take(tlen)) {
            *f = t.ty;
        }
        if let Some(f) = self.fingerprint.get_mut(tlen) {
            *f = 0;
        }
        if c_str(&self.fingerprint).contains(&TYPE_EVIL) {
            self.fingerprint = [0; 8];
            self.fingerprint[0] = TYPE_EVIL;
            tv[0].val = [0; TOKEN_SIZE];
            tv[0].ty = TYPE_EVIL;
            tv[0].val[0] = TYPE_EVIL;
            tv[1].ty = TYPE_NONE;
        }
        c_str(&self.fingerprint)
    }

    /// C `libinjection_sqli_blacklist`: is the fingerprint a known SQLi pattern?
    fn blacklist(&self) -> bool {
        let fp = c_str(&self.fingerprint);
        if fp.is_empty() {
            return false;
        }
        let mut fp2 = [0u8; 8];
        fp2[0] = b'0';
        for (d, &c) in fp2.iter_mut().skip(1).zip(fp) {
            *d = upcase(c);
        }
        lookup_word(sub(&fp2, 0, fp.len() + 1)) == TYPE_FINGERPRINT
    }

    /// C `libinjection_sqli_not_whitelist`: true if SQLi, false if benign.
    fn not_whitelist(&self) -> bool {
        let fp = c_str(&self.fingerprint);
        let tlen = fp.len();
        let tv = &self.tokenvec;
        if tlen > 1
            && fp.last() == Some(&TYPE_COMMENT)
            && memmem(self.s, 0, b"sp_password").is_some()
        {
            return true;
        }
        match *fp {
            [_, fp1] => {
                if fp1 == TYPE_UNION {
                    return self.stats_tokens != 2;
                }
                if tv[1].val[0] == b'#' {
                    return false;
                }
                if tv[0].ty == TYPE_BAREWORD && tv[1].ty == TYPE_COMMENT && tv[1].val[0] != b'/' {
                    return false;
                }
                if tv[0].ty == TYPE_NUMBER && tv[1].ty == TYPE_COMMENT && tv[1].val[0] == b'/' {
                    return true;
                }
                if tv[0].ty == TYPE_NUMBER && tv[1].ty == TYPE_COMMENT {
                    if self.stats_tokens > 2 {
                        return true;
                    }
                    // The C code indexes the input with the token's length, not
                    // its end position; `char` is signed.
                    let n = tv[0].len;
                    let ch = self.at(n);
                    if (ch as i8) <= 32 {
                        return true;
                    }
                    if ch == b'/' && self.at(n + 1) == b'*' {
                        return true;
                    }
                    if ch == b'-' && self.at(n + 1) == b'-' {
                        return true;
                    }
                    return false;
                }
                if tv[1].len > 2 && tv[1].val[0] == b'-' {
                    return false;
                }
            }
            [_, _, _] => {
                if fp == b"sos" || fp == b"s&s" {
                    // "...foo' + 'bar..." with no opening and no closing quote
                    return tv[0].str_open == 0
                        && tv[2].str_close == 0
                        && tv[0].str_close == tv[2].str_open;
                } else if fp == b"s&n"
                    || fp == b"n&1"
                    || fp == b"1&1"
                    || fp == b"1&v"
                    || fp == b"1&s"
                {
                    if self.stats_tokens == 3 {
                        return false;
                    }
                } else if tv[1].ty == TYPE_KEYWORD {
                    // only "INTO OUTFILE" / "INTO DUMPFILE" count
                    if tv[1].len < 5 || !cstrcase_eq(b"INTO", &tv[1].val[..4]) {
                        return false;
                    }
                }
            }
            _ => {}
        }
        true
    }

    /// C `lookup(LOOKUP_FINGERPRINT)` = `libinjection_sqli_check_fingerprint`.
    fn check_fingerprint(&self) -> bool {
        self.blacklist() && self.not_whitelist()
    }

    fn reparse_as_mysql(&self) -> bool {
        self.stats_comment_ddx != 0 || self.stats_comment_hash != 0
    }

    /// C `libinjection_is_sqli`: tries every quote/dialect context.
    pub fn is_sqli(&mut self) -> bool {
        let s = self.s;
        if s.is_empty() {
            return false;
        }
        self.fingerprint(FLAG_QUOTE_NONE | FLAG_SQL_ANSI);
        if self.check_fingerprint() {
            return true;
        } else if self.reparse_as_mysql() {
            self.fingerprint(FLAG_QUOTE_NONE | FLAG_SQL_MYSQL);
            if self.check_fingerprint() {
                return true;
            }
        }
        if s.contains(&CHAR_SINGLE) {
            self.fingerprint(FLAG_QUOTE_SINGLE | FLAG_SQL_ANSI);
            if self.check_fingerprint() {
                return true;
            } else if self.reparse_as_mysql() {
                self.fingerprint(FLAG_QUOTE_SINGLE | FLAG_SQL_MYSQL);
                if self.check_fingerprint() {
                    return true;
                }
            }
        }
        if s.contains(&CHAR_DOUBLE) {
            self.fingerprint(FLAG_QUOTE_DOUBLE | FLAG_SQL_MYSQL);
            if self.check_fingerprint() {
                return true;
            }
        }
        false
    }
}

/// C `parse_string_core`: a string delimited by `delim` starting at
/// `pos + offset` (offset 0 = the opening quote is only simulated).
fn parse_string_core(s: &[u8], pos: usize, st: &mut Token, delim: u8, offset: usize) -> usize {
    let start = pos + offset;
    st.str_open = if offset > 0 { delim } else { 0 };
    let mut qpos = memchr(s, start, delim);
    loop {
        match qpos {
            None => {
                st.assign(TYPE_STRING, start, s.get(start..).unwrap_or(&[]));
                st.str_close = 0;
                return s.len();
            }
            Some(q) if is_backslash_escaped(s, q, start) => qpos = memchr(s, q + 1, delim),
            Some(q) if q + 1 < s.len() && at(s, q + 1) == at(s, q) => {
                qpos = memchr(s, q + 2, delim)
            }
            Some(q) => {
                st.assign(TYPE_STRING, start, sub(s, start, q));
                st.str_close = delim;
                return q + 1;
            }
        }
    }
}

/// C `is_backslash_escaped(qpos - 1, start)`: an odd run of backslashes
/// (not before `start`) right before `q`.
fn is_backslash_escaped(s: &[u8], q: usize, start: usize) -> bool {
    sub(s, start.min(q), q)
        .iter()
        .rev()
        .take_while(|&&c| c == b'\\')
        .count()
        & 1
        == 1
}

fn is_unary_op(t: &Token) -> bool {
    if t.ty != TYPE_OPERATOR {
        return false;
    }
    match t.len {
        1 => matches!(t.val[0], b'+' | b'-' | b'!' | b'~'),
        2 => t.val[0] == b'!' && t.val[1] == b'!',
        3 => cstrcase_eq(b"NOT", &t.val[..3]),
        _ => false,
    }
}

fn is_arithmetic_op(t: &Token) -> bool {
    t.ty == TYPE_OPERATOR && t.len == 1 && matches!(t.val[0], b'*' | b'/' | b'-' | b'+' | b'%')
}

/// C `syntax_merge_words`: "UNION" + "ALL" --> "UNION ALL" when that phrase
/// is a keyword; `a` becomes the merged token.
fn syntax_merge_words(a: &mut Token, b: &Token) -> bool {
    let mergeable = |ty: u8| {
        matches!(
            ty,
            TYPE_KEYWORD
                | TYPE_BAREWORD
                | TYPE_OPERATOR
                | TYPE_UNION
                | TYPE_FUNCTION
                | TYPE_EXPRESSION
                | TYPE_TSQL
                | TYPE_SQLTYPE
        )
    };
    if !mergeable(a.ty) || !(mergeable(b.ty) || b.ty == TYPE_LOGIC_OPERATOR) {
        return false;
    }
    let (sz1, sz2) = (a.len, b.len);
    let sz3 = sz1 + sz2 + 1;
    if sz3 >= TOKEN_SIZE {
        return false;
    }
    // sz1 + 1 + sz2 < TOKEN_SIZE, so a.bytes() and b.bytes() are the first
    // sz1 and sz2 bytes of the values
    let mut tmp = [0u8; TOKEN_SIZE];
    let words = a.bytes().iter().chain(b" ").chain(b.bytes());
    for (d, &c) in tmp.iter_mut().zip(words) {
        *d = c;
    }
    let merged = sub(&tmp, 0, sz3);
    let ch = lookup_word(merged);
    if ch == 0 {
        return false;
    }
    let pos = a.pos;
    a.assign(ch, pos, merged);
    true
}
