//! HTML5 tokenizer with the semantics of libinjection's `libinjection_html5.c`
//! (libinjection/libinjection, BSD-3-Clause). A simplified HTML5 state machine
//! that only needs to be as good as a browser at finding tags and attributes.
//!
//! Kept C quirks: `h5_is_white` also matches NUL (`strchr` finds the
//! terminator), and `h5_skip_white` returns a signed `char`, so a 0xFF byte
//! reads as end of input where the C code compares with `CHAR_EOF`.
//!
//! Input bytes are read with `at` (NUL past the end) and `get`; the C code
//! never reads out of range here, so that only keeps a mistake from panicking.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenType {
    DataText,
    TagNameOpen,
    TagNameClose,
    TagNameSelfClose,
    /// Declared by libinjection, never produced.
    #[allow(dead_code)]
    TagData,
    TagClose,
    AttrName,
    AttrValue,
    TagComment,
    Doctype,
}

impl TokenType {
    /// The C enum name, as libinjection's test driver prints it.
    #[cfg(test)]
    pub fn name(self) -> &'static str {
        match self {
            TokenType::DataText => "DATA_TEXT",
            TokenType::TagNameOpen => "TAG_NAME_OPEN",
            TokenType::TagNameClose => "TAG_NAME_CLOSE",
            TokenType::TagNameSelfClose => "TAG_NAME_SELFCLOSE",
            TokenType::TagData => "TAG_DATA",
            TokenType::TagClose => "TAG_CLOSE",
            TokenType::AttrName => "ATTR_NAME",
            TokenType::AttrValue => "ATTR_VALUE",
            TokenType::TagComment => "TAG_COMMENT",
            TokenType::Doctype => "DOCTYPE",
        }
    }
}

/// Start state (C `enum html5_flags`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flags {
    DataState,
    ValueNoQuote,
    ValueSingleQuote,
    ValueDoubleQuote,
    ValueBackQuote,
}

impl Flags {
    pub const ALL: [Flags; 5] = [
        Flags::DataState,
        Flags::ValueNoQuote,
        Flags::ValueSingleQuote,
        Flags::ValueDoubleQuote,
        Flags::ValueBackQuote,
    ];
}

/// The states that can be resumed by `next` (C `hs->state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Eof,
    Data,
    TagOpen,
    TagNameClose,
    BeforeAttributeName,
    AfterAttributeName,
    AfterAttributeValueQuoted,
    SelfClosingStartTag,
    BeforeAttributeValue,
    AttributeValueQuote(u8),
}

const CHAR_EOF: i32 = -1;

/// Byte `i` of the input, NUL past its end.
fn at(s: &[u8], i: usize) -> u8 {
    s.get(i).copied().unwrap_or(0)
}

/// `s[from..]`, or the empty slice if `from` is past the end.
fn tail(s: &[u8], from: usize) -> &[u8] {
    s.get(from..).unwrap_or_default()
}

/// Offset of the first `c` in `s[from..]`.
fn find(s: &[u8], from: usize, c: u8) -> Option<usize> {
    tail(s, from).iter().position(|&x| x == c)
}

/// C `h5_is_white`: `strchr(" \t\n\v\f\r", ch)`, which also matches NUL.
fn is_white(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | 0)
}

pub struct Html5<'a> {
    s: &'a [u8],
    pos: usize,
    is_close: bool,
    state: State,
    pub token_start: usize,
    pub token_len: usize,
    pub token_type: TokenType,
}

impl<'a> Html5<'a> {
    /// C `libinjection_h5_init`.
    pub fn new(s: &'a [u8], flags: Flags) -> Self {
        let state = match flags {
            Flags::DataState => State::Data,
            Flags::ValueNoQuote => State::BeforeAttributeName,
            Flags::ValueSingleQuote => State::AttributeValueQuote(b'\''),
            Flags::ValueDoubleQuote => State::AttributeValueQuote(b'"'),
            Flags::ValueBackQuote => State::AttributeValueQuote(b'`'),
        };
        Html5 {
            s,
            pos: 0,
            is_close: false,
            state,
            token_start: 0,
            token_len: 0,
            token_type: TokenType::DataText,
        }
    }

    /// The current token's bytes (cut at the end of the input).
    pub fn token(&self) -> &'a [u8] {
        let t = tail(self.s, self.token_start);
        t.get(..self.token_len).unwrap_or(t)
    }

    /// C `libinjection_h5_next`: advance to the next token; false at the end.
    pub fn next_token(&mut self) -> bool {
        match self.state {
            State::Eof => false,
            State::Data => self.data(),
            State::TagOpen => self.tag_open(),
            State::TagNameClose => self.tag_name_close(),
            State::BeforeAttributeName => self.before_attribute_name(),
            State::AfterAttributeName => self.after_attribute_name(),
            State::AfterAttributeValueQuoted => self.after_attribute_value_quoted(),
            State::SelfClosingStartTag => self.self_closing_start_tag(),
            State::BeforeAttributeValue => self.before_attribute_value(),
            State::AttributeValueQuote(q) => self.attribute_value_quote(q),
        }
    }

    fn len(&self) -> usize {
        self.s.len()
    }

    fn emit(&mut self, ty: TokenType, start: usize, len: usize) -> bool {
        self.token_type = ty;
        self.token_start = start;
        self.token_len = len;
        true
    }

    /// C `h5_skip_white`: the next non-white byte as a signed char, or EOF.
    fn skip_white(&mut self) -> i32 {
        while let Some(&c) = self.s.get(self.pos) {
            match c {
                0x00 | 0x20 | 0x09 | 0x0a | 0x0b | 0x0c | 0x0d => self.pos += 1,
                _ => return c as i8 as i32,
            }
        }
        CHAR_EOF
    }

    fn data(&mut self) -> bool {
        let pos = self.pos;
        match find(self.s, pos, b'<') {
            None => {
                self.state = State::Eof;
                let len = self.len() - pos;
                self.emit(TokenType::DataText, pos, len);
                len != 0
            }
            Some(i) => {
                self.emit(TokenType::DataText, pos, i);
                self.pos = pos + i + 1;
                self.state = State::TagOpen;
                if i == 0 {
                    return self.tag_open();
                }
                true
            }
        }
    }

    fn tag_open(&mut self) -> bool {
        let Some(&c) = self.s.get(self.pos) else {
            return false;
        };
        match c {
            b'!' => {
                self.pos += 1;
                self.markup_declaration_open()
            }
            b'/' => {
                self.pos += 1;
                self.is_close = true;
                self.end_tag_open()
            }
            b'?' => {
                self.pos += 1;
                self.bogus_comment()
            }
            b'%' => {
                // not in spec: "<% ... %>" comments of IE <= 9 and old Safari
                self.pos += 1;
                self.bogus_comment2()
            }
            c if c.is_ascii_alphabetic() || c == 0 => self.tag_name(),
            _ => {
                if self.pos == 0 {
                    return self.data();
                }
                self.state = State::Data;
                self.emit(TokenType::DataText, self.pos - 1, 1)
            }
        }
    }

    fn end_tag_open(&mut self) -> bool {
        let Some(&c) = self.s.get(self.pos) else {
            return false;
        };
        if c == b'>' {
            return self.data();
        } else if c.is_ascii_alphabetic() {
            return self.tag_name();
        }
        self.is_close = false;
        self.bogus_comment()
    }

    fn tag_name_close(&mut self) -> bool {
        self.is_close = false;
        self.emit(TokenType::TagNameClose, self.pos, 1);
        self.pos += 1;
        self.state = if self.pos < self.len() {
            State::Data
        } else {
            State::Eof
        };
        true
    }

    fn tag_name(&mut self) -> bool {
        let start = self.pos;
        let mut pos = start;
        while let Some(&c) = self.s.get(pos) {
            if c == 0 {
                // NULs are allowed (and ignored by some old browsers) in tag names
                pos += 1;
            } else if is_white(c) {
                self.pos = pos + 1;
                self.state = State::BeforeAttributeName;
                return self.emit(TokenType::TagNameOpen, start, pos - start);
            } else if c == b'/' {
                self.pos = pos + 1;
                self.state = State::SelfClosingStartTag;
                return self.emit(TokenType::TagNameOpen, start, pos - start);
            } else if c == b'>' {
                if self.is_close {
                    self.pos = pos + 1;
                    self.is_close = false;
                    self.state = State::Data;
                    return self.emit(TokenType::TagClose, start, pos - start);
                }
                self.pos = pos;
                self.state = State::TagNameClose;
                return self.emit(TokenType::TagNameOpen, start, pos - start);
            } else {
                pos += 1;
            }
        }
        self.state = State::Eof;
        self.emit(TokenType::TagNameOpen, start, self.len() - start)
    }

    /// C `h5_state_before_attribute_name`. The C mutual recursion with
    /// `h5_state_self_closing_start_tag` ("<a / / / ...") is a loop here.
    fn before_attribute_name(&mut self) -> bool {
        loop {
            match self.skip_white() {
                CHAR_EOF => return false,
                0x2f => {
                    // '/': self-closing start tag
                    self.pos += 1;
                    match self.s.get(self.pos) {
                        None => return false,
                        Some(b'>') => return self.self_close(),
                        Some(_) => {}
                    }
                }
                0x3e => {
                    // '>'
                    self.state = State::Data;
                    self.emit(TokenType::TagNameClose, self.pos, 1);
                    self.pos += 1;
                    return true;
                }
                _ => return self.attribute_name(),
            }
        }
    }

    fn attribute_name(&mut self) -> bool {
        let start = self.pos;
        let mut pos = start + 1;
        while let Some(&c) = self.s.get(pos) {
            let (state, next) = if is_white(c) {
                (State::AfterAttributeName, pos + 1)
            } else if c == b'/' {
                (State::SelfClosingStartTag, pos + 1)
            } else if c == b'=' {
                (State::BeforeAttributeValue, pos + 1)
            } else if c == b'>' {
                (State::TagNameClose, pos)
            } else {
                pos += 1;
                continue;
            };
            self.state = state;
            self.pos = next;
            return self.emit(TokenType::AttrName, start, pos - start);
        }
        self.state = State::Eof;
        self.pos = self.len();
        self.emit(TokenType::AttrName, start, self.len() - start)
    }

    fn after_attribute_name(&mut self) -> bool {
        match self.skip_white() {
            CHAR_EOF => false,
            0x2f => {
                self.pos += 1;
                self.self_closing_start_tag()
            }
            0x3d => {
                // '='
                self.pos += 1;
                self.before_attribute_value()
            }
            0x3e => self.tag_name_close(),
            _ => self.attribute_name(),
        }
    }

    fn before_attribute_value(&mut self) -> bool {
        let c = self.skip_white();
        if c == CHAR_EOF {
            self.state = State::Eof;
            return false;
        }
        match c {
            0x22 => self.attribute_value_quote(b'"'),
            0x27 => self.attribute_value_quote(b'\''),
            0x60 => self.attribute_value_quote(b'`'), // non-standard (IE)
            _ => self.attribute_value_no_quote(),
        }
    }

    fn attribute_value_quote(&mut self, q: u8) -> bool {
        // Skip the opening quote, except when the input starts in this state.
        if self.pos > 0 {
            self.pos += 1;
        }
        let start = self.pos.min(self.len());
        match find(self.s, start, q) {
            None => {
                self.state = State::Eof;
                self.emit(TokenType::AttrValue, start, self.len() - start)
            }
            Some(i) => {
                self.state = State::AfterAttributeValueQuoted;
                self.pos = start + i + 1;
                self.emit(TokenType::AttrValue, start, i)
            }
        }
    }

    fn attribute_value_no_quote(&mut self) -> bool {
        let start = self.pos;
        let mut pos = start;
        while let Some(&c) = self.s.get(pos) {
            if is_white(c) {
                self.pos = pos + 1;
                self.state = State::BeforeAttributeName;
                return self.emit(TokenType::AttrValue, start, pos - start);
            } else if c == b'>' {
                self.pos = pos;
                self.state = State::TagNameClose;
                return self.emit(TokenType::AttrValue, start, pos - start);
            }
            pos += 1;
        }
        self.state = State::Eof;
        self.emit(TokenType::AttrValue, start, self.len() - start)
    }

    fn after_attribute_value_quoted(&mut self) -> bool {
        let Some(&c) = self.s.get(self.pos) else {
            return false;
        };
        if is_white(c) {
            self.pos += 1;
            self.before_attribute_name()
        } else if c == b'/' {
            self.pos += 1;
            self.self_closing_start_tag()
        } else if c == b'>' {
            self.state = State::Data;
            self.emit(TokenType::TagNameClose, self.pos, 1);
            self.pos += 1;
            true
        } else {
            self.before_attribute_name()
        }
    }

    fn self_closing_start_tag(&mut self) -> bool {
        match self.s.get(self.pos) {
            None => false,
            Some(b'>') => self.self_close(),
            Some(_) => self.before_attribute_name(),
        }
    }

    /// The "/>" token; `pos` is at '>' (and > 0, a '/' precedes it).
    fn self_close(&mut self) -> bool {
        self.state = State::Data;
        self.emit(TokenType::TagNameSelfClose, self.pos - 1, 2);
        self.pos += 1;
        true
    }

    fn bogus_comment(&mut self) -> bool {
        let start = self.pos;
        match find(self.s, start, b'>') {
            None => {
                self.pos = self.len();
                self.state = State::Eof;
                self.emit(TokenType::TagComment, start, self.len() - start)
            }
            Some(i) => {
                self.pos = start + i + 1;
                self.state = State::Data;
                self.emit(TokenType::TagComment, start, i)
            }
        }
    }

    /// "<% ... %>"
    fn bogus_comment2(&mut self) -> bool {
        let start = self.pos;
        let mut pos = start;
        loop {
            let idx = find(self.s, pos, b'%').map(|i| i + pos);
            match idx {
                Some(i) if i + 1 < self.len() => {
                    if at(self.s, i + 1) != b'>' {
                        pos = i + 1;
                        continue;
                    }
                    self.pos = i + 2;
                    self.state = State::Data;
                    return self.emit(TokenType::TagComment, start, i - start);
                }
                _ => {
                    self.pos = self.len();
                    self.state = State::Eof;
                    return self.emit(TokenType::TagComment, start, self.len() - start);
                }
            }
        }
    }

    fn markup_declaration_open(&mut self) -> bool {
        let rest = tail(self.s, self.pos);
        if rest
            .get(..7)
            .is_some_and(|p| p.eq_ignore_ascii_case(b"DOCTYPE"))
        {
            self.doctype()
        } else if rest.starts_with(b"[CDATA[") {
            self.pos += 7;
            self.cdata()
        } else if rest.starts_with(b"--") {
            self.pos += 2;
            self.comment()
        } else {
            self.bogus_comment()
        }
    }

    /// Comments end at EOF, "-->" or "-!>" (NULs allowed after the first '-').
    fn comment(&mut self) -> bool {
        let start = self.pos;
        let end = self.len();
        let mut pos = start;
        loop {
            let idx = find(self.s, pos, b'-').map(|i| i + pos);
            let idx = match idx {
                Some(i) if i + 3 <= end => i,
                _ => {
                    self.state = State::Eof;
                    return self.emit(TokenType::TagComment, start, end - start);
                }
            };
            let mut offset = 1;
            while idx + offset < end && at(self.s, idx + offset) == 0 {
                offset += 1;
            }
            if idx + offset == end {
                self.state = State::Eof;
                return self.emit(TokenType::TagComment, start, end - start);
            }
            let c = at(self.s, idx + offset);
            if c != b'-' && c != b'!' {
                pos = idx + 1;
                continue;
            }
            offset += 1;
            if idx + offset == end {
                self.state = State::Eof;
                return self.emit(TokenType::TagComment, start, end - start);
            }
            if at(self.s, idx + offset) != b'>' {
                pos = idx + 1;
                continue;
            }
            offset += 1;
            self.pos = idx + offset;
            self.state = State::Data;
            return self.emit(TokenType::TagComment, start, idx - start);
        }
    }

    fn cdata(&mut self) -> bool {
        let start = self.pos;
        let end = self.len();
        let mut pos = start;
        loop {
            let idx = find(self.s, pos, b']').map(|i| i + pos);
            match idx {
                Some(i) if i + 3 <= end => {
                    if at(self.s, i + 1) == b']' && at(self.s, i + 2) == b'>' {
                        self.state = State::Data;
                        self.pos = i + 3;
                        return self.emit(TokenType::DataText, start, i - start);
                    }
                    pos = i + 1;
                }
                _ => {
                    self.state = State::Eof;
                    return self.emit(TokenType::DataText, start, end - start);
                }
            }
        }
    }

    fn doctype(&mut self) -> bool {
        let start = self.pos;
        match find(self.s, start, b'>') {
            None => {
                self.state = State::Eof;
                self.emit(TokenType::Doctype, start, self.len() - start)
            }
            Some(i) => {
                self.state = State::Data;
                self.pos = start + i + 1;
                self.emit(TokenType::Doctype, start, i)
            }
        }
    }
}
