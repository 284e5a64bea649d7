//! XML request body processor.
//!
//! A small, non-validating, iterative XML parser that produces what the CRS
//! XML targets need, following what ModSecurity v3 returns through libxml2
//! (src/variables/xml.cc evaluates the XPath expression and returns
//! `xmlNodeGetContent` of each node):
//!
//! * `XML:/*` selects the root element; its content is the concatenation of
//!   every text and CDATA node below it, in document order
//!   ([`XmlResult::root_text`]).
//! * `XML://@*` selects every attribute in the document; each value is
//!   returned separately ([`XmlResult::attr_values`]).  Namespace
//!   declarations (`xmlns`, `xmlns:p`) are not attributes for XPath and are
//!   left out.
//!
//! What the parser does: checks well-formedness (matching tags, quoting,
//! unique attributes, one root element, no stray text outside it, legal
//! characters, `]]>` and `--` rules), normalises line ends (`\r\n`, `\r` ->
//! `\n`) and attribute whitespace, decodes character references and the five
//! predefined entities.  No other entity is ever expanded: a DOCTYPE
//! (internal subset included) is skipped apart from the names of the general
//! entities it declares (`<!ENTITY name ...>`), and a reference to one of those
//! is kept literally (libxml2 would only expand internal entities; external
//! ones are never loaded by ModSecurity's default).  A reference to any other
//! name is an error, as libxml2's "Entity 'x' not defined" (which makes
//! ModSecurity set REQBODY_ERROR): with or without a DOCTYPE, and whatever
//! parameter entities the internal subset references, since none is ever
//! loaded.  Only a DOCTYPE with an external subset (`SYSTEM` / `PUBLIC`) lets
//! any name through, as libxml2 then merely warns (checked against
//! libmodsecurity 3.0.15).
//! Input may be UTF-8 (validated), UTF-16 (BOM or `<?` autodetection) or
//! declared ISO-8859-1 / US-ASCII / UTF-7; other declared encodings are an error.
//!
//! Every error yields ModSecurity's single message
//! `XML parsing error: XML: Failed parsing document.` (the precise reason is
//! in [`XmlResult::detail`]); what was parsed before it stays available, as
//! libxml2 keeps its partial document.  The empty body is an error too
//! (libxml2: "Document is empty").  Nesting deeper than
//! [`XmlLimits::max_depth`] is an error (libxml2's default limit is 256).

use std::collections::HashSet;

/// Limits for [`parse`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XmlLimits {
    /// Largest element nesting depth (the root element has depth 1).
    pub max_depth: usize,
    /// Largest number of attribute values (`XML://@*`); one more is an error. The
    /// transaction passes `SecArgumentsLimit`: each value is inspected by every rule on
    /// `XML://@*`, so their number bounds the work per body (libxml2 has no such limit).
    pub max_attrs: usize,
}

impl Default for XmlLimits {
    /// libxml2's default depth (without XML_PARSE_HUGE); no attribute limit.
    fn default() -> Self {
        XmlLimits {
            max_depth: 256,
            max_attrs: usize::MAX,
        }
    }
}

/// The REQBODY_ERROR_MSG ModSecurity v3 sets for any XML failure.
pub const ERROR_MSG: &str = "XML parsing error: XML: Failed parsing document.";

/// What an XML body yields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct XmlResult {
    /// A root element start tag was parsed (otherwise `XML:/*` yields
    /// nothing).
    pub has_root: bool,
    /// Text content of the root element (all text and CDATA below it).
    pub text: Vec<u8>,
    /// Every attribute value in document order (`XML://@*`).
    pub attr_values: Vec<Vec<u8>>,
    /// [`ERROR_MSG`] when the document is not well-formed.
    pub error: Option<String>,
    /// Why parsing failed (for debug logs).
    pub detail: Option<String>,
}

impl XmlResult {
    /// The single value of `XML:/*`, if there is a root element.
    pub fn root_text(&self) -> Option<&[u8]> {
        if self.has_root {
            Some(&self.text)
        } else {
            None
        }
    }
}

/// Parse an XML body.
pub fn parse(input: &[u8], limits: &XmlLimits) -> XmlResult {
    let mut r = XmlResult::default();
    let outcome = to_utf8(input).and_then(|doc| {
        let mut p = Parser {
            s: &doc,
            pos: 0,
            limits: *limits,
            has_doctype: false,
            entities: HashSet::new(),
            external_subset: false,
        };
        p.document(&mut r)
    });
    if let Err(detail) = outcome {
        r.error = Some(ERROR_MSG.to_string());
        r.detail = Some(detail);
    }
    r
}

type Res<T> = Result<T, String>;

/// Decode the input to UTF-8 (borrowing when it already is).
/// UTF-7 (RFC 2152) to UTF-8, as libxml2 decodes a document declared so: ASCII stands for
/// itself; `+` opens a run of modified base64 (no padding) of UTF-16 big-endian code units,
/// closed by `-` (which is dropped) or by any byte outside the base64 alphabet; `+-` is `+`.
fn utf7(input: &[u8]) -> Res<Vec<u8>> {
    let b64 = |c: u8| -> Option<u32> {
        match c {
            b'A'..=b'Z' => Some(u32::from(c - b'A')),
            b'a'..=b'z' => Some(u32::from(c - b'a') + 26),
            b'0'..=b'9' => Some(u32::from(c - b'0') + 52),
            b'+' => Some(62),
            b'/' => Some(63),
            _ => None,
        }
    };
    let bad = || "Invalid UTF-7 input".to_string();
    let mut out = String::with_capacity(input.len());
    let mut units: Vec<u16> = Vec::new();
    let mut i = 0;
    while let Some(&c) = input.get(i) {
        i += 1;
        if c != b'+' {
            if !c.is_ascii() {
                return Err(bad());
            }
            out.push(char::from(c));
            continue;
        }
        if input.get(i) == Some(&b'-') {
            out.push('+');
            i += 1;
            continue;
        }
        let (mut acc, mut bits) = (0u32, 0u32);
        units.clear();
        while let Some(v) = input.get(i).and_then(|&c| b64(c)) {
            acc = (acc << 6) | v;
            bits += 6;
            i += 1;
            if bits >= 16 {
                bits -= 16;
                units.push(u16::try_from(acc >> bits).map_err(|_| bad())?);
                acc &= (1 << bits) - 1;
            }
        }
        if input.get(i) == Some(&b'-') {
            i += 1;
        }
        for ch in char::decode_utf16(units.iter().copied()) {
            out.push(ch.map_err(|_| bad())?);
        }
    }
    Ok(out.into_bytes())
}

fn to_utf8(input: &[u8]) -> Res<std::borrow::Cow<'_, [u8]>> {
    use std::borrow::Cow;
    let utf16 = |body: &[u8], be: bool| -> Res<Cow<'_, [u8]>> {
        if !body.len().is_multiple_of(2) {
            return Err("Truncated UTF-16 input".into());
        }
        let units = body.chunks_exact(2).map(|c| match c {
            [a, b] if be => u16::from_be_bytes([*a, *b]),
            [a, b] => u16::from_le_bytes([*a, *b]),
            _ => 0,
        });
        let mut out = String::with_capacity(body.len() / 2);
        for ch in char::decode_utf16(units) {
            out.push(ch.map_err(|_| "Invalid UTF-16 input".to_string())?);
        }
        Ok(Cow::Owned(out.into_bytes()))
    };
    match input {
        [0xEF, 0xBB, 0xBF, rest @ ..] => {
            std::str::from_utf8(rest).map_err(|_| "Input is not proper UTF-8".to_string())?;
            Ok(Cow::Borrowed(rest))
        }
        [0xFE, 0xFF, rest @ ..] => utf16(rest, true),
        [0xFF, 0xFE, rest @ ..] => utf16(rest, false),
        [0x00, b'<', 0x00, b'?', ..] => utf16(input, true),
        [b'<', 0x00, b'?', 0x00, ..] => utf16(input, false),
        _ => {
            let enc = declared_encoding(input).map(|e| e.to_ascii_lowercase());
            match enc.as_deref() {
                None | Some(b"utf-8" | b"utf8" | b"us-ascii" | b"ascii") => {
                    std::str::from_utf8(input)
                        .map_err(|_| "Input is not proper UTF-8".to_string())?;
                    Ok(Cow::Borrowed(input))
                }
                Some(b"iso-8859-1" | b"iso8859-1" | b"iso_8859-1" | b"latin1" | b"latin-1") => {
                    let s: String = input.iter().map(|&b| char::from(b)).collect();
                    Ok(Cow::Owned(s.into_bytes()))
                }
                Some(b"utf-7" | b"utf7" | b"unicode-1-1-utf-7") => Ok(Cow::Owned(utf7(input)?)),
                Some(other) => Err(format!(
                    "Unsupported encoding {}",
                    String::from_utf8_lossy(other)
                )),
            }
        }
    }
}

/// The `encoding` pseudo-attribute of a leading XML declaration.
fn declared_encoding(input: &[u8]) -> Option<&[u8]> {
    if !input.starts_with(b"<?xml") {
        return None;
    }
    let end = find(input, b"?>")?;
    let decl = input.get(..end)?;
    let at = find(decl, b"encoding")?;
    let mut rest = decl.get(at + 8..)?;
    rest = trim_start(rest);
    rest = trim_start(rest.strip_prefix(b"=")?);
    let (&q, body) = rest.split_first()?;
    if q != b'"' && q != b'\'' {
        return None;
    }
    let close = body.iter().position(|&c| c == q)?;
    body.get(..close)
}

fn trim_start(s: &[u8]) -> &[u8] {
    let n = s.iter().take_while(|&&c| is_ws(c)).count();
    s.get(n..).unwrap_or(&[])
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

fn is_ws(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

fn is_name_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c == b':' || c >= 0x80
}

fn is_name_char(c: u8) -> bool {
    is_name_start(c) || c.is_ascii_digit() || c == b'-' || c == b'.'
}

fn is_xml_char(cp: u32) -> bool {
    matches!(cp, 0x9 | 0xA | 0xD | 0x20..=0xD7FF | 0xE000..=0xFFFD | 0x10000..=0x10FFFF)
}

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
    limits: XmlLimits,
    has_doctype: bool,
    /// General entities the internal subset declares (`<!ENTITY name ...>`; parameter
    /// entities `<!ENTITY % name ...>` are not among them). A reference to any other
    /// name is an error, as libxml2's "Entity 'x' not defined".
    entities: HashSet<&'a [u8]>,
    /// The DOCTYPE names an external subset (`SYSTEM` / `PUBLIC`).
    external_subset: bool,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn at(&self, lit: &[u8]) -> bool {
        self.s
            .get(self.pos..)
            .map(|r| r.starts_with(lit))
            .unwrap_or(false)
    }

    fn skip_ws(&mut self) -> usize {
        let start = self.pos;
        while self.peek().map(is_ws).unwrap_or(false) {
            self.pos += 1;
        }
        self.pos - start
    }

    /// Position of `lit` at or after `pos`.
    fn find_from(&self, lit: &[u8]) -> Option<usize> {
        self.s
            .get(self.pos..)
            .and_then(|r| find(r, lit))
            .map(|i| self.pos + i)
    }

    fn document(&mut self, r: &mut XmlResult) -> Res<()> {
        // Every XML construct excludes these characters.
        if let Some((i, c)) = self
            .s
            .iter()
            .enumerate()
            .find(|(_, &c)| c < 0x20 && !is_ws(c))
        {
            return Err(format!("Char 0x{c:02X} out of allowed range at {i}"));
        }
        if self.at(b"<?xml") && self.s.get(5).map(|&c| is_ws(c)).unwrap_or(false) {
            let Some(end) = self.find_from(b"?>") else {
                return Err("Unterminated XML declaration".into());
            };
            self.pos = end + 2;
        }
        // Prolog.
        loop {
            self.skip_ws();
            if self.peek().is_none() {
                return Err("Document is empty".into());
            } else if self.at(b"<!--") {
                self.comment()?;
            } else if self.at(b"<?") {
                self.pi()?;
            } else if self.at(b"<!DOCTYPE") {
                if self.has_doctype {
                    return Err("Duplicate DOCTYPE".into());
                }
                self.doctype()?;
            } else if self.peek() == Some(b'<') {
                break;
            } else {
                return Err("Start tag expected, '<' not found".into());
            }
        }
        self.content(r)?;
        // Epilogue.
        loop {
            self.skip_ws();
            if self.peek().is_none() {
                return Ok(());
            } else if self.at(b"<!--") {
                self.comment()?;
            } else if self.at(b"<?") {
                self.pi()?;
            } else {
                return Err("Extra content at the end of the document".into());
            }
        }
    }

    /// The root element and everything inside it, iteratively.
    fn content(&mut self, r: &mut XmlResult) -> Res<()> {
        let mut stack: Vec<(usize, usize)> = Vec::new();
        if !self.start_tag(r, &mut stack)? {
            return Ok(());
        }
        while !stack.is_empty() {
            let Some(c) = self.peek() else {
                return Err("Premature end of data".into());
            };
            if c == b'<' {
                if self.at(b"</") {
                    self.pos += 2;
                    let name = self.name()?;
                    self.skip_ws();
                    if self.peek() != Some(b'>') {
                        return Err("Expected '>' in end tag".into());
                    }
                    self.pos += 1;
                    let open = stack
                        .pop()
                        .and_then(|(a, b)| self.s.get(a..b))
                        .unwrap_or(&[]);
                    if self.s.get(name.0..name.1) != Some(open) {
                        return Err("Opening and ending tag mismatch".into());
                    }
                } else if self.at(b"<!--") {
                    self.comment()?;
                } else if self.at(b"<![CDATA[") {
                    self.pos += 9;
                    let Some(end) = self.find_from(b"]]>") else {
                        return Err("CData section not finished".into());
                    };
                    let raw = self.s.get(self.pos..end).unwrap_or(&[]);
                    push_normalized(&mut r.text, raw);
                    self.pos = end + 3;
                } else if self.at(b"<?") {
                    self.pi()?;
                } else if self.at(b"<!") {
                    return Err("Unexpected markup declaration in content".into());
                } else {
                    self.start_tag(r, &mut stack)?;
                }
            } else if c == b'&' {
                self.reference(&mut r.text)?;
            } else {
                let start = self.pos;
                while let Some(c) = self.peek() {
                    if c == b'<' || c == b'&' {
                        break;
                    }
                    self.pos += 1;
                }
                let raw = self.s.get(start..self.pos).unwrap_or(&[]);
                if find(raw, b"]]>").is_some() {
                    return Err("Sequence ']]>' not allowed in content".into());
                }
                push_normalized(&mut r.text, raw);
            }
        }
        Ok(())
    }

    fn name(&mut self) -> Res<(usize, usize)> {
        let start = self.pos;
        match self.peek() {
            Some(c) if is_name_start(c) => self.pos += 1,
            _ => return Err("Name expected".into()),
        }
        while self.peek().map(is_name_char).unwrap_or(false) {
            self.pos += 1;
        }
        Ok((start, self.pos))
    }

    /// A start tag at `<`.  Returns true when an element was opened (not
    /// empty-element).
    fn start_tag(&mut self, r: &mut XmlResult, stack: &mut Vec<(usize, usize)>) -> Res<bool> {
        if stack.len() >= self.limits.max_depth {
            return Err(format!(
                "Excessive depth in document: {}",
                self.limits.max_depth
            ));
        }
        self.pos += 1;
        let name = self.name()?;
        r.has_root = true;
        let mut seen: HashSet<&'a [u8]> = HashSet::new();
        loop {
            let ws = self.skip_ws();
            if self.at(b"/>") {
                self.pos += 2;
                return Ok(false);
            }
            if self.peek() == Some(b'>') {
                self.pos += 1;
                stack.push(name);
                return Ok(true);
            }
            if self.peek().is_none() {
                return Err("Premature end of data in tag".into());
            }
            if ws == 0 {
                return Err("attributes construct error".into());
            }
            let (a, b) = self.name()?;
            let s = self.s;
            let aname = s.get(a..b).unwrap_or(&[]);
            if !seen.insert(aname) {
                return Err("Attribute redefined".into());
            }
            self.skip_ws();
            if self.peek() != Some(b'=') {
                return Err("Specification mandates value for attribute".into());
            }
            self.pos += 1;
            self.skip_ws();
            let q = match self.peek() {
                Some(q @ (b'"' | b'\'')) => q,
                _ => return Err("AttValue: \" or ' expected".into()),
            };
            self.pos += 1;
            let mut value = Vec::new();
            loop {
                match self.peek() {
                    None => return Err("AttValue: ' expected".into()),
                    Some(c) if c == q => {
                        self.pos += 1;
                        break;
                    }
                    Some(b'<') => {
                        return Err("Unescaped '<' not allowed in attribute values".into())
                    }
                    Some(b'&') => self.reference(&mut value)?,
                    Some(b'\r') => {
                        self.pos += 1;
                        if self.peek() == Some(b'\n') {
                            self.pos += 1;
                        }
                        value.push(b' ');
                    }
                    Some(b'\n' | b'\t') => {
                        self.pos += 1;
                        value.push(b' ');
                    }
                    Some(c) => {
                        self.pos += 1;
                        value.push(c);
                    }
                }
            }
            let is_ns = aname == b"xmlns" || aname.starts_with(b"xmlns:");
            if !is_ns {
                if r.attr_values.len() >= self.limits.max_attrs {
                    return Err(format!(
                        "More than {} attributes (SecArgumentsLimit)",
                        self.limits.max_attrs
                    ));
                }
                r.attr_values.push(value);
            }
        }
    }

    /// `&...;` at `pos`: character reference or predefined entity.
    fn reference(&mut self, out: &mut Vec<u8>) -> Res<()> {
        let start = self.pos;
        let Some(semi) = self
            .s
            .get(start..)
            .and_then(|r| r.iter().take(64).position(|&c| c == b';'))
            .map(|i| start + i)
        else {
            return Err("EntityRef: expecting ';'".into());
        };
        let body = self.s.get(start + 1..semi).unwrap_or(&[]);
        self.pos = semi + 1;
        if let Some(num) = body.strip_prefix(b"#") {
            let (digits, radix) = match num.strip_prefix(b"x") {
                Some(h) => (h, 16),
                None => (num, 10),
            };
            let text = std::str::from_utf8(digits).map_err(|_| "Invalid char ref".to_string())?;
            if text.is_empty() || !text.chars().all(|c| c.is_digit(radix)) {
                return Err("Invalid char ref".into());
            }
            let cp =
                u32::from_str_radix(text, radix).map_err(|_| "Invalid char ref".to_string())?;
            let ch = char::from_u32(cp)
                .filter(|_| is_xml_char(cp))
                .ok_or_else(|| format!("xmlParseCharRef: invalid xmlChar value {cp}"))?;
            let mut buf = [0u8; 4];
            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
            return Ok(());
        }
        let rep: &[u8] = match body {
            b"lt" => b"<",
            b"gt" => b">",
            b"amp" => b"&",
            b"apos" => b"'",
            b"quot" => b"\"",
            _ => {
                let valid = body.first().map(|&c| is_name_start(c)).unwrap_or(false)
                    && body.iter().all(|&c| is_name_char(c));
                if !valid {
                    return Err("EntityRef: expecting name".into());
                }
                if !self.external_subset && !self.entities.contains(body) {
                    return Err(format!(
                        "Entity '{}' not defined",
                        String::from_utf8_lossy(body)
                    ));
                }
                // Never expanded: keep the reference as written.
                self.s.get(start..semi + 1).unwrap_or(&[])
            }
        };
        out.extend_from_slice(rep);
        Ok(())
    }

    fn comment(&mut self) -> Res<()> {
        self.pos += 4;
        let Some(dd) = self.find_from(b"--") else {
            return Err("Comment not terminated".into());
        };
        if self.s.get(dd + 2) != Some(&b'>') {
            return Err("Double hyphen within comment".into());
        }
        self.pos = dd + 3;
        Ok(())
    }

    fn pi(&mut self) -> Res<()> {
        self.pos += 2;
        let (a, b) = self.name()?;
        if self
            .s
            .get(a..b)
            .map(|n| n.eq_ignore_ascii_case(b"xml"))
            .unwrap_or(false)
        {
            return Err("XML declaration allowed only at the start of the document".into());
        }
        let Some(end) = self.find_from(b"?>") else {
            return Err("PI not terminated".into());
        };
        self.pos = end + 2;
        Ok(())
    }

    /// Skip `<!DOCTYPE ...>` including an internal subset, without
    /// interpreting any declaration.
    fn doctype(&mut self) -> Res<()> {
        self.has_doctype = true;
        self.pos += 9;
        self.skip_ws();
        self.name()?;
        self.skip_ws();
        // An external subset (never loaded) may declare any entity: libxml2 only warns
        // about an undeclared one then, and the document parses.
        self.external_subset = self.at(b"SYSTEM") || self.at(b"PUBLIC");
        let mut in_subset = false;
        loop {
            let Some(c) = self.peek() else {
                return Err("DOCTYPE not terminated".into());
            };
            match c {
                b'"' | b'\'' => {
                    self.pos += 1;
                    let Some(end) = self
                        .s
                        .get(self.pos..)
                        .and_then(|r| r.iter().position(|&x| x == c))
                    else {
                        return Err("DOCTYPE: unterminated literal".into());
                    };
                    self.pos += end + 1;
                }
                b'<' if in_subset && self.at(b"<!--") => self.comment()?,
                b'<' if in_subset && self.at(b"<!ENTITY") => {
                    self.pos += 8;
                    if self.skip_ws() == 0 {
                        return Err("Space required after '<!ENTITY'".into());
                    }
                    if self.peek() == Some(b'%') {
                        // A parameter entity: never referenced from content.
                        self.pos += 1;
                    } else {
                        let (a, b) = self.name()?;
                        let s: &'a [u8] = self.s;
                        if let Some(name) = s.get(a..b) {
                            self.entities.insert(name);
                        }
                    }
                }
                b'<' if in_subset && self.at(b"<?") => {
                    let Some(end) = self.find_from(b"?>") else {
                        return Err("PI not terminated".into());
                    };
                    self.pos = end + 2;
                }
                b'[' => {
                    in_subset = true;
                    self.pos += 1;
                }
                b']' if in_subset => {
                    in_subset = false;
                    self.pos += 1;
                }
                b'>' if !in_subset => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => self.pos += 1,
            }
        }
    }
}

/// Append raw character data, turning `\r\n` and lone `\r` into `\n`.
fn push_normalized(out: &mut Vec<u8>, raw: &[u8]) {
    let mut i = 0;
    while let Some(&c) = raw.get(i) {
        if c == b'\r' {
            out.push(b'\n');
            if raw.get(i + 1) == Some(&b'\n') {
                i += 1;
            }
        } else {
            out.push(c);
        }
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn go(s: &[u8]) -> XmlResult {
        parse(s, &XmlLimits::default())
    }

    fn text(r: &XmlResult) -> String {
        String::from_utf8_lossy(r.root_text().unwrap_or(b"<none>")).into_owned()
    }

    fn attrs(r: &XmlResult) -> Vec<String> {
        r.attr_values
            .iter()
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .collect()
    }

    #[test]
    fn root_text_concatenates_all_descendant_text() {
        let r = go(b"<?xml version=\"1.0\"?>\n<a>x<b>y</b><c/>z<![CDATA[<w>]]></a>\n");
        assert_eq!(r.error, None, "{:?}", r.detail);
        assert_eq!(text(&r), "xyz<w>");
    }

    #[test]
    fn whitespace_text_nodes_are_kept() {
        let r = go(b"<a>\n  <b>1</b>\n</a>");
        assert_eq!(text(&r), "\n  1\n");
    }

    #[test]
    fn attribute_values_in_document_order_without_namespaces() {
        let r = go(br#"<a xmlns="urn:x" xmlns:p="urn:p" id="1"><p:b k='v&amp;w' p:z="q"/></a>"#);
        assert_eq!(r.error, None, "{:?}", r.detail);
        assert_eq!(attrs(&r), vec!["1", "v&w", "q"]);
    }

    #[test]
    fn references_are_decoded() {
        let r = go(b"<a t=\"&#x41;&#66;&lt;\">&lt;&gt;&amp;&apos;&quot;&#233;&#x1F600;</a>");
        assert_eq!(r.error, None, "{:?}", r.detail);
        assert_eq!(text(&r), "<>&'\"é😀");
        assert_eq!(attrs(&r), vec!["AB<"]);
    }

    #[test]
    fn line_ends_and_attribute_whitespace_are_normalised() {
        let r = go(b"<a v=\"x\r\ny\tz\nw&#10;\">1\r\n2\r3</a>");
        assert_eq!(text(&r), "1\n2\n3");
        assert_eq!(attrs(&r), vec!["x y z w\n"]);
    }

    #[test]
    fn comments_and_pis_are_not_text() {
        let r = go(b"<!-- c --><?pi x?><a>1<!-- no -->2<?p q?>3</a><!-- end -->");
        assert_eq!(r.error, None, "{:?}", r.detail);
        assert_eq!(text(&r), "123");
    }

    #[test]
    fn doctype_is_skipped_and_entities_not_expanded() {
        let doc = br#"<?xml version="1.0"?>
<!DOCTYPE foo [ <!ENTITY xxe SYSTEM "file:///etc/passwd"> <!ENTITY a "]>"> <!-- ' --> ]>
<foo>&xxe;&lt;</foo>"#;
        let r = go(doc);
        assert_eq!(r.error, None, "{:?}", r.detail);
        assert_eq!(text(&r), "&xxe;<");
    }

    #[test]
    fn billion_laughs_is_not_expanded() {
        let mut doc = b"<!DOCTYPE l [<!ENTITY l0 \"ha\">".to_vec();
        for i in 1..10 {
            doc.extend_from_slice(
                format!("<!ENTITY l{i} \"&l{p};&l{p};&l{p};&l{p};\">", p = i - 1).as_bytes(),
            );
        }
        doc.extend_from_slice(b"]><r>&l9;</r>");
        let r = go(&doc);
        assert_eq!(r.error, None, "{:?}", r.detail);
        assert_eq!(text(&r), "&l9;");
    }

    #[test]
    fn undeclared_entity_after_a_parameter_entity_is_an_error() {
        // XXE through an external parameter entity: `xxe` is declared nowhere wafer (or
        // ModSecurity, which loads no external DTD) can see, so libxml2 fails the document.
        let r = go(br#"<!DOCTYPE x [<!ENTITY % e PUBLIC "a" "http://h/x.dtd">%e;]><root>&xxe;</root>"#);
        assert_eq!(r.error.as_deref(), Some(ERROR_MSG));
        assert_eq!(r.detail.as_deref(), Some("Entity 'xxe' not defined"));
        // A parameter entity named like the reference does not declare it either.
        let r = go(br#"<!DOCTYPE x [<!ENTITY % xxe SYSTEM "http://h/x.dtd">]><root>&xxe;</root>"#);
        assert_eq!(r.error.as_deref(), Some(ERROR_MSG));
        // Nor does an entity of an internal subset with other names, in an attribute.
        let r = go(br#"<!DOCTYPE x [<!ENTITY a "b">]><root a="&xxe;"/>"#);
        assert_eq!(r.error.as_deref(), Some(ERROR_MSG));
        // An external subset may declare it: libxml2 only warns, ModSecurity parses.
        let r = go(br#"<!DOCTYPE x SYSTEM "http://h/x.dtd"><root a="&xxe;">&xxe;</root>"#);
        assert_eq!(r.error, None, "{:?}", r.detail);
        // A declared general entity still parses (kept literally).
        let r = go(br#"<!DOCTYPE x [<!ENTITY % e "p"><!ENTITY xxe "v">]><root>&xxe;</root>"#);
        assert_eq!(r.error, None, "{:?}", r.detail);
        assert_eq!(text(&r), "&xxe;");
    }

    #[test]
    fn undefined_entity_without_doctype_is_an_error() {
        let r = go(b"<a>&foo;</a>");
        assert_eq!(r.error.as_deref(), Some(ERROR_MSG));
    }

    #[test]
    fn malformed_documents_are_errors_with_partial_results() {
        let r = go(b"<a k=\"v\">text<b></a>");
        assert_eq!(r.error.as_deref(), Some(ERROR_MSG));
        assert!(r.has_root);
        assert_eq!(text(&r), "text");
        assert_eq!(attrs(&r), vec!["v"]);
    }

    #[test]
    fn well_formedness_errors() {
        let bad: &[&[u8]] = &[
            b"",
            b"   ",
            b"text",
            b"<a>",
            b"<a></b>",
            b"<a></a><b></b>",
            b"<a></a>trailing",
            b"<a x=1></a>",
            b"<a x=\"1\" x=\"2\"></a>",
            b"<a x=\"1\"y=\"2\"></a>",
            b"<a x=\"<\"></a>",
            b"<a>]]></a>",
            b"<a><!-- a -- b --></a>",
            b"<a>&#0;</a>",
            b"<a>&#xD800;</a>",
            b"<a>&#xZZ;</a>",
            b"<a>& b</a>",
            b"<a>\x01</a>",
            b"<a><?xml version=\"1.0\"?></a>",
            b"<a><![CDATA[x</a>",
            b"<a><!DOCTYPE x></a>",
            b"<1a/>",
            b"<a>\xff</a>",
            b"<!DOCTYPE a [",
        ];
        for doc in bad {
            let r = go(doc);
            assert_eq!(
                r.error.as_deref(),
                Some(ERROR_MSG),
                "{:?}",
                String::from_utf8_lossy(doc)
            );
        }
    }

    #[test]
    fn no_root_means_no_xml_star_value() {
        let r = go(b"<!-- only -->");
        assert!(r.root_text().is_none());
        assert!(r.error.is_some());
    }

    #[test]
    fn empty_root() {
        let r = go(b"<a/>");
        assert_eq!(r.error, None);
        assert_eq!(r.root_text(), Some(&b""[..]));
    }

    #[test]
    fn utf16_and_latin1_inputs_are_decoded() {
        let s = "<a k=\"é\">日本</a>";
        let mut le = vec![0xFF, 0xFE];
        for u in s.encode_utf16() {
            le.extend_from_slice(&u.to_le_bytes());
        }
        let r = go(&le);
        assert_eq!(r.error, None, "{:?}", r.detail);
        assert_eq!(text(&r), "日本");
        assert_eq!(attrs(&r), vec!["é"]);
        let mut be = Vec::new();
        for u in "<?xml version=\"1.0\"?><a>x</a>".encode_utf16() {
            be.extend_from_slice(&u.to_be_bytes());
        }
        assert_eq!(text(&go(&be)), "x");
        let r = go(b"<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><a>\xe9</a>");
        assert_eq!(text(&r), "é");
        let r = go(b"<?xml version=\"1.0\" encoding=\"EBCDIC\"?><a/>");
        assert!(r.error.is_some());
    }

    #[test]
    fn utf7_is_decoded_as_libxml2_does() {
        // Quotes hidden as UTF-7 (+ACc- is "'"), a '+' written '+-', and two non-ASCII
        // characters in one run closed by a byte outside base64.
        let r = go(b"<?xml version=\"1.0\" encoding=\"UTF-7\"?><a>1+ACc- or +ACc-1+ACc-=+ACc-1 1+-1 +AOkA6Q.</a>");
        assert_eq!(r.error, None, "{:?}", r.detail);
        assert_eq!(text(&r), "1' or '1'='1 1+1 \u{e9}\u{e9}.");
        // Decoded before parsing, as libxml2: a tag written in UTF-7 is markup.
        let r = go(b"<?xml version=\"1.0\" encoding=\"UTF-7\"?><a>+ADw-b+AD4-x+ADw-/b+AD4-</a>");
        assert_eq!(r.error, None, "{:?}", r.detail);
        assert_eq!(text(&r), "x");
        // A lone surrogate in a run is an error, as is a byte above 0x7F.
        assert!(go(b"<?xml version=\"1.0\" encoding=\"utf-7\"?><a>+2AA-</a>").error.is_some());
        assert!(go(b"<?xml version=\"1.0\" encoding=\"utf-7\"?><a>\xe9</a>").error.is_some());
    }

    #[test]
    fn bom_is_skipped() {
        let r = go(b"\xEF\xBB\xBF<a>1</a>");
        assert_eq!(r.error, None);
        assert_eq!(text(&r), "1");
    }

    #[test]
    fn depth_limit() {
        let l = XmlLimits { max_depth: 2, ..Default::default() };
        assert_eq!(parse(b"<a><b/></a>", &l).error, None);
        assert!(parse(b"<a><b><c/></b></a>", &l).error.is_some());
    }

    #[test]
    fn hostile_deep_nesting_100k() {
        let mut doc = Vec::new();
        for _ in 0..100_000 {
            doc.extend_from_slice(b"<a>");
        }
        for _ in 0..100_000 {
            doc.extend_from_slice(b"</a>");
        }
        assert!(go(&doc).error.is_some());
        let l = XmlLimits {
            max_depth: usize::MAX,
            ..Default::default()
        };
        let r = parse(&doc, &l);
        assert_eq!(r.error, None, "{:?}", r.detail);
    }

    #[test]
    fn hostile_many_attributes() {
        let mut doc = b"<a".to_vec();
        for i in 0..100_000 {
            doc.extend_from_slice(format!(" a{i}=\"v\"").as_bytes());
        }
        doc.extend_from_slice(b"/>");
        let r = go(&doc);
        assert_eq!(r.error, None);
        assert_eq!(r.attr_values.len(), 100_000);
    }

    /// Found by the pathological-input check (tests/src/bin/pathological.rs): 130,000
    /// attributes in 1.4 MiB took the full CRS 23 s and 950 MiB; now bounded.
    #[test]
    fn attributes_over_the_limit_are_an_error() {
        let l = XmlLimits { max_attrs: 2, ..Default::default() };
        let r = parse(b"<a x=\"1\" xmlns:p=\"u\"><b y=\"2\"/></a>", &l);
        assert_eq!(r.error, None);
        assert_eq!(r.attr_values, vec![b"1".to_vec(), b"2".to_vec()]);
        let r = parse(b"<a x=\"1\"><b y=\"2\" z=\"3\"/></a>", &l);
        assert_eq!(r.error.as_deref(), Some(ERROR_MSG));
        assert_eq!(r.detail.as_deref(), Some("More than 2 attributes (SecArgumentsLimit)"));
        assert_eq!(r.attr_values.len(), 2);
    }

    #[test]
    fn hostile_unterminated_constructs() {
        for doc in [
            &b"<a"[..],
            b"<a b",
            b"<a b=",
            b"<a b=\"x",
            b"<a><!--",
            b"<a><?pi",
            b"<a>&amp",
            b"<?xml version=\"1.0\"",
            b"<!DOCTYPE a \"",
        ] {
            assert!(
                go(doc).error.is_some(),
                "{:?}",
                String::from_utf8_lossy(doc)
            );
        }
    }

    #[test]
    fn fixture_soap_document() {
        let r = go(include_bytes!("../../testdata/body/soap.xml"));
        assert_eq!(r.error, None, "{:?}", r.detail);
        assert_eq!(text(&r), "SELECT * FROM t");
        assert_eq!(attrs(&r), vec!["../../etc/passwd"]);
    }

    #[test]
    fn every_prefix_is_handled_without_panic() {
        let doc = "<?xml version=\"1.0\"?><!DOCTYPE r [<!ENTITY e \"x\">]><r a=\"1&amp;\"><![CDATA[c]]>t&#65;<s/><!--k--></r>".as_bytes();
        for i in 0..=doc.len() {
            let _ = go(&doc[..i]);
        }
        assert_eq!(go(doc).error, None);
    }
}
