//! `multipart/form-data` request body processor.
//!
//! A port of the behaviour of ModSecurity v3
//! src/request_body_processor/multipart.cc (`Multipart::init`, `process`,
//! `process_part_header`, `process_part_data`, `parse_content_disposition`,
//! `process_boundary`, `multipart_complete`), written for a fully buffered
//! body, safe Rust and linear time.
//!
//! Kept from ModSecurity on purpose:
//! * The body is consumed in "lines" of at most 4096 bytes
//!   (MULTIPART_BUF_SIZE): a boundary is only recognised at the start of a
//!   line, a part header line longer than that is an error, the CRLF (or LF)
//!   ending a data line is held back and only becomes part of the value when
//!   more data of the same part follows.
//! * The Content-Type checks (`boundary` is matched case-sensitively, only
//!   whitespace and one `;` may precede it, the value runs to the end of the
//!   header, RFC 2046 characters only), and every MULTIPART_* flag, including
//!   MULTIPART_UNMATCHED_BOUNDARY becoming 2 once a second boundary matched
//!   (v3's "permissive" value; `@eq 1` means a real unmatched boundary).
//! * A part is a file when its Content-Disposition has a non-empty `filename`;
//!   `filename=""` makes it an ordinary field, as in v3.
//! * Part header names with bytes outside 0x21..=0x7E are a part header error
//!   (`Multipart: Invalid part header (contains invalid character).`).
//! * Error texts, prefixed with `Multipart parsing error: ` as v3's
//!   transaction does.
//!
//! * Part header errors and a missing final boundary are reported (REQBODY_ERROR)
//!   without v3's `m_flag_error`, so without MULTIPART_STRICT_ERROR, and parsing
//!   goes on after a part header error; our boundary where a part's headers or
//!   data should begin is read as a header / data line and sets
//!   MULTIPART_INVALID_PART; a `'` only counts as invalid quoting outside double
//!   quotes; a parameter after the boundary is tolerated (all as 3.0.15).
//!
//! Deliberate differences (all stricter or more informative):
//! * An error of a boundary line or wafer's bounds stops parsing; parts completed
//!   before it stay in the result (v3 reports the error and, in most cases, no
//!   arguments at all).
//! * A duplicate part header is an error (`Multipart: Duplicate part header`,
//!   as ModSecurity v2; v3 silently drops the second header).
//! * An empty boundary (`boundary=` / `boundary=""`) is an error; v3 silently
//!   skips the body.
//! * An unterminated quoted Content-Disposition parameter is error -7 (v3
//!   reads past the end of its string).
//! * Field values keep the line breaks between their lines (v3 loses them
//!   through a `std::string::assign` slip; v2 and Coraza keep them).
//! * MULTIPART_PART_HEADERS holds, per named part, each header line as sent
//!   (without its line ending), folded continuations appended after a space.

use std::collections::HashMap;

/// ModSecurity's MULTIPART_BUF_SIZE.
pub const BUF_SIZE: usize = 4096;

const PREFIX: &str = "Multipart parsing error: ";

/// Part header lines allowed per part on average: the body may hold at most
/// `max_parts * MAX_HEADERS_PER_PART` of them (wafer's bound; ModSecurity has none).
pub const MAX_HEADERS_PER_PART: usize = 4;

/// Options for [`parse`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MultipartOptions {
    /// Largest number of file parts accepted (SecUploadFileLimit).  Further
    /// file parts set MULTIPART_FILE_LIMIT_EXCEEDED and an error (parsing
    /// continues, as in v3); they are still listed in `files`.
    pub max_files: usize,
    /// Keep file contents (FILES_TMP_CONTENT) in [`MultipartFile::content`].
    pub keep_file_content: bool,
    /// Largest number of parts (fields and files): a boundary opening one more part is an
    /// error that stops parsing (wafer's bound on the work per body; the transaction passes
    /// `SecArgumentsLimit`). ModSecurity v3 has no such limit. Part header lines are bounded
    /// by `max_parts *` [`MAX_HEADERS_PER_PART`] in the whole body.
    pub max_parts: usize,
}

impl Default for MultipartOptions {
    fn default() -> Self {
        MultipartOptions {
            max_files: usize::MAX,
            keep_file_content: false,
            max_parts: usize::MAX,
        }
    }
}

/// The MULTIPART_* flag variables.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MultipartFlags {
    /// Internal `m_flag_error`: some error (also reported in
    /// [`MultipartResult::error`]) happened.
    pub error: bool,
    pub boundary_quoted: bool,
    pub boundary_whitespace: bool,
    pub data_before: bool,
    pub data_after: bool,
    pub header_folding: bool,
    pub lf_line: bool,
    pub crlf_line: bool,
    pub missing_semicolon: bool,
    pub invalid_quoting: bool,
    pub invalid_part: bool,
    pub invalid_header_folding: bool,
    pub file_limit_exceeded: bool,
    /// MULTIPART_UNMATCHED_BOUNDARY: 0, 1 (a line looked like a boundary but
    /// was not ours) or 2 (v3: a boundary matched after a first one).
    pub unmatched_boundary: u8,
}

impl MultipartFlags {
    /// MULTIPART_STRICT_ERROR.
    pub fn strict_error(&self) -> bool {
        self.error
            || self.boundary_quoted
            || self.boundary_whitespace
            || self.data_before
            || self.data_after
            || self.header_folding
            || self.lf_line
            || self.missing_semicolon
            || self.invalid_quoting
            || self.invalid_part
            || self.invalid_header_folding
            || self.file_limit_exceeded
    }

    /// MULTIPART_CRLF_LF_LINES: both CRLF and LF line endings were seen.
    pub fn crlf_lf_lines(&self) -> bool {
        self.crlf_line && self.lf_line
    }
}

/// One uploaded file (FILES, FILES_NAMES, FILES_SIZES, FILES_TMP_CONTENT).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MultipartFile {
    /// The part's `name` (FILES_NAMES).
    pub name: Vec<u8>,
    /// The part's `filename` (FILES), as sent.
    pub filename: Vec<u8>,
    /// Content length in bytes (FILES_SIZES).
    pub size: usize,
    /// The part's Content-Type header value, if any.
    pub content_type: Option<Vec<u8>>,
    /// File content when [`MultipartOptions::keep_file_content`] is set.
    pub content: Vec<u8>,
}

/// Everything a multipart body yields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MultipartResult {
    /// Ordinary fields, `(name, value)`, for ARGS / ARGS_POST.
    pub fields: Vec<(Vec<u8>, Vec<u8>)>,
    /// File parts.
    pub files: Vec<MultipartFile>,
    /// MULTIPART_PART_HEADERS: `(part name, header line)`.
    pub part_headers: Vec<(Vec<u8>, Vec<u8>)>,
    /// MULTIPART_NAME: every Content-Disposition `name` seen.
    pub names: Vec<Vec<u8>>,
    /// MULTIPART_FILENAME: every Content-Disposition `filename` seen.
    pub filenames: Vec<Vec<u8>>,
    pub flags: MultipartFlags,
    /// REQBODY_ERROR_MSG when parsing failed (`Multipart parsing error: ...`).
    pub error: Option<String>,
    /// Bytes of part headers and non-file data (SecRequestBodyNoFilesLimit).
    pub no_files_length: usize,
}

impl MultipartResult {
    /// FILES_COMBINED_SIZE.
    pub fn files_combined_size(&self) -> usize {
        self.files
            .iter()
            .fold(0usize, |a, f| a.saturating_add(f.size))
    }
}

/// Parse a multipart body.  `content_type` is the request's Content-Type
/// header value (the boundary comes from it).
pub fn parse(content_type: &[u8], body: &[u8], opts: &MultipartOptions) -> MultipartResult {
    let mut p = Parser {
        res: MultipartResult::default(),
        opts: *opts,
        boundary: Vec::new(),
        needle: Vec::new(),
        kmp: Vec::new(),
        part: None,
        in_data: false,
        reserve: Vec::new(),
        boundary_count: 0,
        complete: false,
        nfiles: 0,
        header_lines: 0,
        data_read: false,
        crlf_state: 0,
        crlf_state_buf_end: 0,
    };
    if let Err(msg) = p.init(content_type) {
        p.res.flags.error = true;
        p.res.error = Some(format!("{PREFIX}{msg}"));
        return p.res;
    }
    if let Err(msg) = p.process(body) {
        p.res.flags.error = true;
        if p.res.error.is_none() {
            p.res.error = Some(format!("{PREFIX}{msg}"));
        }
    }
    p.res
}

/// A part being built.
#[derive(Default)]
struct Part {
    name: Vec<u8>,
    filename: Vec<u8>,
    is_file: bool,
    /// `(name, value)` in order.
    headers: Vec<(Vec<u8>, Vec<u8>)>,
    /// Lowercased header name -> index in `headers`.
    header_index: HashMap<Vec<u8>, usize>,
    /// Raw header lines for MULTIPART_PART_HEADERS.
    header_lines: Vec<Vec<u8>>,
    last_header: Option<usize>,
    value: Vec<u8>,
    size: usize,
    /// This file part is over the file limit.
    over_limit: bool,
}

impl Part {
    fn header(&self, lower_name: &[u8]) -> Option<&[u8]> {
        self.header_index
            .get(lower_name)
            .and_then(|&i| self.headers.get(i))
            .map(|(_, v)| v.as_slice())
    }
}

struct Parser {
    res: MultipartResult,
    opts: MultipartOptions,
    boundary: Vec<u8>,
    /// `--` + boundary, and its KMP failure table.
    needle: Vec<u8>,
    kmp: Vec<usize>,
    part: Option<Part>,
    /// `m_mpp_state`: headers done, reading data.
    in_data: bool,
    /// Line ending held back from the previous data line.
    reserve: Vec<u8>,
    boundary_count: usize,
    complete: bool,
    nfiles: usize,
    /// Part header lines seen in the whole body.
    header_lines: usize,
    /// `m_mpp_substate_part_data_read`: a data line of the current part was read (a line
    /// matching the boundary before that is data, and flags MULTIPART_INVALID_PART).
    data_read: bool,
    /// `m_crlf_state`: 0, 1 (last byte `\r`), 2 (line ended with a bare LF), 3 (with CRLF).
    crlf_state: u8,
    /// `m_crlf_state_buf_end`: `crlf_state` when the previous line was complete.
    crlf_state_buf_end: u8,
}

/// A part header error: v3 records the message (REQBODY_ERROR) and goes on parsing, without
/// its `m_flag_error` (so without MULTIPART_STRICT_ERROR); wafer's own bounds stop parsing.
enum HeaderError {
    Soft(String),
    Hard(String),
}

impl From<&str> for HeaderError {
    fn from(s: &str) -> Self {
        HeaderError::Soft(s.to_string())
    }
}

impl From<String> for HeaderError {
    fn from(s: String) -> Self {
        HeaderError::Soft(s)
    }
}

/// C `isspace` in the "C" locale.
fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn is_token_char(c: u8) -> bool {
    if c <= 32 || c >= 127 {
        return false;
    }
    !matches!(
        c,
        b'(' | b')'
            | b'<'
            | b'>'
            | b'@'
            | b','
            | b';'
            | b':'
            | b'\\'
            | b'"'
            | b'/'
            | b'['
            | b']'
            | b'?'
            | b'='
    )
}

/// RFC 2046 boundary characters (v3 `boundary_characters_valid`).
fn boundary_characters_valid(b: &[u8]) -> bool {
    let n = b.len();
    b.iter().enumerate().all(|(i, &c)| {
        c.is_ascii_alphanumeric()
            || (c == b' ' && i + 1 != n)
            || matches!(
                c,
                b'\'' | b'(' | b')' | b'+' | b'_' | b',' | b'-' | b'.' | b'/' | b':' | b'=' | b'?'
            )
    })
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

/// v3 `count_boundary_params`: occurrences of "boundary" (case-insensitive)
/// that have a '=' somewhere after them.
fn count_boundary_params(s: &[u8]) -> usize {
    let lower = s.to_ascii_lowercase();
    // Position of the last '=' decides, for every occurrence, whether one
    // follows: linear instead of one strchr per occurrence.
    let last_eq = lower.iter().rposition(|&c| c == b'=');
    let mut count = 0;
    let mut from = 0;
    while let Some(i) = lower.get(from..).and_then(|h| find(h, b"boundary")) {
        let after = from + i + 8;
        if matches!(last_eq, Some(e) if e >= after) {
            count += 1;
        }
        from = after;
    }
    count
}

/// Strip trailing CR / LF (ModSecurity `chomp`).
fn chomp(mut s: &[u8]) -> &[u8] {
    while let Some((&last, rest)) = s.split_last() {
        if last == b'\n' || last == b'\r' {
            s = rest;
        } else {
            break;
        }
    }
    s
}

/// Bytes up to the first NUL: what C string functions see of a line.
fn cstr(s: &[u8]) -> &[u8] {
    match s.iter().position(|&c| c == 0) {
        Some(i) => s.get(..i).unwrap_or(s),
        None => s,
    }
}

fn escape_for_msg(s: &[u8]) -> String {
    String::from_utf8_lossy(s).into_owned()
}

impl Parser {
    fn init(&mut self, ct: &[u8]) -> Result<(), String> {
        if ct.is_empty() {
            return Err("Multipart: Content-Type header not available.".into());
        }
        // C strings stop at NUL.
        let ct = cstr(ct);
        if ct.len() > 1024 {
            return Err("Multipart: Invalid boundary in C-T (length).".into());
        }
        let mime = b"multipart/form-data";
        if !ct
            .get(..mime.len())
            .map(|m| m.eq_ignore_ascii_case(mime))
            .unwrap_or(false)
        {
            return Err("Multipart: Invalid MIME type.".into());
        }
        if count_boundary_params(ct) > 1 {
            return Err("Multipart: Multiple boundary parameters in C-T.".into());
        }
        let Some(bpos) = find(ct, b"boundary") else {
            if count_boundary_params(ct) > 0 {
                return Err("Multipart: Invalid boundary in C-T (case sensitivity).".into());
            }
            return Err("Multipart: Boundary not found in C-T.".into());
        };
        // Only whitespace and one ';' between the MIME type and "boundary".
        let mut seen_semicolon = false;
        for &c in ct.get(mime.len()..bpos).unwrap_or(&[]) {
            if !is_space(c) {
                if !seen_semicolon && c == b';' {
                    seen_semicolon = true;
                } else {
                    return Err("Multipart: Invalid boundary in C-T (malformed).".into());
                }
            }
        }
        if !seen_semicolon {
            self.res.flags.missing_semicolon = true;
        }
        let after_name = bpos + 8;
        let Some(eq) = ct
            .get(after_name..)
            .and_then(|s| s.iter().position(|&c| c == b'='))
            .map(|i| after_name + i)
        else {
            return Err("Multipart: Invalid boundary in C-T (malformed).".into());
        };
        for &c in ct.get(after_name..eq).unwrap_or(&[]) {
            if is_space(c) {
                self.res.flags.boundary_whitespace = true;
            } else {
                return Err("Multipart: Invalid boundary in C-T (parameter name).".into());
            }
        }
        let b = ct.get(eq + 1..).unwrap_or(&[]);
        if b.first().copied().map(is_space).unwrap_or(false) {
            self.res.flags.boundary_whitespace = true;
        }
        let quoted = if b.len() >= 2 {
            b.strip_prefix(b"\"").and_then(|x| x.strip_suffix(b"\""))
        } else {
            None
        };
        let boundary = match quoted {
            Some(inner) => {
                self.res.flags.boundary_quoted = true;
                inner
            }
            None => {
                if b.first() == Some(&b'"') || (b.len() >= 2 && b.last() == Some(&b'"')) {
                    return Err("Multipart: Invalid boundary in C-T (quote).".into());
                }
                b
            }
        };
        if boundary.is_empty() {
            return Err("Multipart: Invalid boundary in C-T (empty).".into());
        }
        if count_boundary_params(boundary) != 0 {
            return Err("Multipart: Invalid boundary in C-T (content).".into());
        }
        // v3 tolerates a parameter after the boundary (`boundary=x; charset=utf-8`).
        let boundary = match boundary.iter().position(|&c| c == b';') {
            Some(semi) if !boundary_characters_valid(boundary) => boundary.get(..semi).unwrap_or(&[]),
            _ => boundary,
        };
        if !boundary_characters_valid(boundary) {
            return Err("Multipart: Invalid boundary in C-T (characters).".into());
        }
        self.boundary = boundary.to_vec();
        self.needle = Vec::with_capacity(boundary.len() + 2);
        self.needle.extend_from_slice(b"--");
        self.needle.extend_from_slice(boundary);
        self.kmp = kmp_table(&self.needle);
        Ok(())
    }

    fn process(&mut self, body: &[u8]) -> Result<(), String> {
        if body.is_empty() {
            return Ok(());
        }
        let mut pos = 0;
        let mut contains_line = true;
        while pos < body.len() {
            let start = pos;
            let mut held_cr = false;
            let mut ended = false;
            while let Some(&c) = body.get(pos) {
                if c == b'\r' && pos - start == BUF_SIZE - 1 {
                    // v3 never takes '\r' as the last byte of its buffer.
                    held_cr = true;
                    ended = true;
                    break;
                }
                pos += 1;
                if c == b'\n' || pos - start == BUF_SIZE {
                    ended = true;
                    break;
                }
            }
            let chunk = body.get(start..pos).unwrap_or(&[]);
            if !ended {
                // Unterminated last line: only a final boundary counts.
                return self.finish(Some((chunk, contains_line)));
            }
            let full = chunk.len() == BUF_SIZE;
            self.process_chunk(chunk, contains_line, full || held_cr)?;
            contains_line = !held_cr && chunk.last() == Some(&b'\n');
            self.track_line_ending(chunk, held_cr);
            if self.complete {
                if pos < body.len() {
                    self.res.flags.data_after = true;
                }
                return self.finish(None);
            }
        }
        self.finish(None)
    }

    /// v3's `m_crlf_state` / `m_crlf_state_buf_end` after a line (`chunk`) was processed:
    /// `crlf_state_buf_end` is 2 when that line ended with a bare LF. With `held_cr` the
    /// `\r` that ended the chunk is the next chunk's first byte.
    fn track_line_ending(&mut self, chunk: &[u8], held_cr: bool) {
        // The state after a run of bytes without '\n': 1 after '\r', else 0.
        let after = |prev: u8, run: &[u8]| match run.last() {
            Some(b'\r') => 1,
            Some(_) => 0,
            None => prev,
        };
        let (last, init) = match chunk.split_last() {
            Some((&l, init)) => (l, init),
            None => return,
        };
        if held_cr {
            self.crlf_state_buf_end = after(self.crlf_state, chunk);
            self.crlf_state = 1;
        } else if last == b'\n' {
            let s = if after(self.crlf_state, init) == 1 { 3 } else { 2 };
            self.crlf_state = s;
            self.crlf_state_buf_end = s;
        } else {
            let s = after(self.crlf_state, init);
            self.crlf_state_buf_end = s;
            self.crlf_state = after(s, &[last]);
        }
    }

    /// A part header error: recorded (the first one is REQBODY_ERROR_MSG), parsing goes on.
    fn soft_error(&mut self, msg: String) {
        if self.res.error.is_none() {
            self.res.error = Some(format!("{PREFIX}{msg}"));
        }
    }

    /// `multipart_complete` for a body that was not empty. Its errors do not set
    /// v3's `m_flag_error` (no MULTIPART_STRICT_ERROR from them).
    fn finish(&mut self, tail: Option<(&[u8], bool)>) -> Result<(), String> {
        if self.complete {
            return Ok(());
        }
        if self.boundary_count == 0 {
            self.soft_error("Multipart: No boundaries found in payload.".into());
            return Ok(());
        }
        if let Some((t, true)) = tail {
            let n = self.boundary.len();
            if t.len() == n + 4
                && t.starts_with(b"--")
                && t.get(2..2 + n) == Some(self.boundary.as_slice())
                && t.ends_with(b"--")
            {
                if self.crlf_state_buf_end == 2 {
                    self.res.flags.lf_line = true;
                }
                if !self.data_read {
                    // The final boundary where the part's data should begin.
                    self.res.flags.invalid_part = true;
                }
                self.process_boundary(true);
                self.complete = true;
                return Ok(());
            }
        }
        self.soft_error("Multipart: Final boundary missing.".into());
        Ok(())
    }

    fn process_chunk(
        &mut self,
        chunk: &[u8],
        contains_line: bool,
        overflow: bool,
    ) -> Result<(), String> {
        let line = cstr(chunk);
        let n = self.boundary.len();
        let mut processed_as_boundary = false;
        if contains_line && line.len() > 3 && line.starts_with(b"--") {
            let ours = line.len() >= n + 2 && line.get(2..2 + n) == Some(self.boundary.as_slice());
            if ours && self.crlf_state_buf_end == 2 {
                // The line before the boundary ended with a bare LF.
                self.res.flags.lf_line = true;
            }
            if ours && !self.data_read && self.boundary_count > 0 {
                // Our boundary where the part's headers or data should begin: v3 takes the
                // line as a header or data line and flags the part as invalid.
                self.res.flags.invalid_part = true;
            } else if ours {
                if self.boundary_count > 0 {
                    self.res.flags.unmatched_boundary = 2;
                }
                let mut end = 2 + n;
                let mut is_final = false;
                if line.get(end..end + 2) == Some(b"--") {
                    is_final = true;
                    end += 2;
                }
                match line.get(end..) {
                    Some(b"\r\n") => self.res.flags.crlf_line = true,
                    Some(b"\n") => self.res.flags.lf_line = true,
                    _ => {
                        return Err(format!(
                            "Multipart: Invalid boundary: {}",
                            escape_for_msg(line)
                        ))
                    }
                }
                if !is_final && self.boundary_count >= self.opts.max_parts {
                    // The part this boundary ends stays; no new one opens.
                    self.process_boundary(true);
                    return Err(format!(
                        "Multipart: more than {} parts (SecArgumentsLimit).",
                        self.opts.max_parts
                    ));
                }
                self.process_boundary(is_final);
                if is_final {
                    self.complete = true;
                }
                processed_as_boundary = true;
                self.boundary_count += 1;
            } else {
                if self.res.flags.boundary_quoted
                    && line.len() >= n + 3
                    && line.get(2) == Some(&b'"')
                    && line.get(3..3 + n) == Some(self.boundary.as_slice())
                {
                    return Err("Multipart: Invalid boundary (quotes).".into());
                }
                let ws = line
                    .get(2..)
                    .map(|s| s.iter().take_while(|&&c| is_space(c)).count())
                    .unwrap_or(0);
                if ws > 0 && line.get(2 + ws..2 + ws + n) == Some(self.boundary.as_slice()) {
                    return Err("Multipart: Invalid boundary (whitespace).".into());
                }
                self.res.flags.unmatched_boundary = 1;
            }
        } else if contains_line && kmp_contains(chunk, &self.needle, &self.kmp) {
            self.res.flags.unmatched_boundary = 1;
        }

        if processed_as_boundary {
            return Ok(());
        }
        if self.part.is_none() {
            self.res.flags.data_before = true;
            return Ok(());
        }
        if !self.in_data {
            if overflow {
                return Err(format!(
                    "Multipart: Part header line over {BUF_SIZE} bytes long"
                ));
            }
            match self.process_part_header(chunk) {
                Ok(()) => Ok(()),
                Err(HeaderError::Soft(msg)) => {
                    self.soft_error(msg);
                    Ok(())
                }
                Err(HeaderError::Hard(msg)) => Err(msg),
            }
        } else {
            self.process_part_data(chunk);
            Ok(())
        }
    }

    fn process_part_header(&mut self, chunk: &[u8]) -> Result<(), HeaderError> {
        if chunk.contains(&0) {
            return Err("Multipart: Nul byte in part headers.".into());
        }
        self.res.no_files_length = self.res.no_files_length.saturating_add(chunk.len());
        let len = chunk.len();
        if len > 1 && chunk.get(len - 2) == Some(&b'\r') {
            self.res.flags.crlf_line = true;
        } else {
            self.res.flags.lf_line = true;
        }
        let Some(part) = self.part.as_mut() else {
            return Ok(());
        };

        if chunk == b"\r\n" || chunk == b"\n" {
            // End of the part headers.
            let Some(cd) = part.header(b"content-disposition").map(<[u8]>::to_vec) else {
                return Err("Multipart: Part missing Content-Disposition header.".into());
            };
            if let Err(rc) = parse_content_disposition(
                &cd,
                part,
                &mut self.res.flags,
                &mut self.res.names,
                &mut self.res.filenames,
            ) {
                return Err(format!(
                    "Multipart: Invalid Content-Disposition header ({rc}): {}",
                    escape_for_msg(&cd)
                )
                .into());
            }
            if part.name.is_empty() {
                return Err("Multipart: Content-Disposition header missing name field.".into());
            }
            if !part.filename.is_empty() {
                if find(&cd, b"filename=").is_none() {
                    return Err("Multipart: Invalid Content-Disposition header (filename).".into());
                }
                part.is_file = true;
                if self.nfiles >= self.opts.max_files {
                    part.over_limit = true;
                    if !self.res.flags.file_limit_exceeded {
                        self.res.flags.file_limit_exceeded = true;
                        if self.res.error.is_none() {
                            self.res.error = Some(format!(
                                "{PREFIX}Multipart: Upload file limit exceeded {}. \
                                 Use SecUploadFileLimit to change the limit.",
                                self.opts.max_files
                            ));
                        }
                    }
                } else {
                    self.nfiles += 1;
                }
            }
            self.in_data = true;
            part.last_header = None;
            return Ok(());
        }

        let first = chunk.first().copied().unwrap_or(0);
        if is_space(first) {
            // Header folding.
            self.res.flags.header_folding = true;
            let Some(idx) = part.last_header else {
                return Err("Multipart: Invalid part header (folding error).".into());
            };
            let ws = chunk.iter().take_while(|&&c| is_space(c)).count();
            if chunk.iter().take(ws).any(|&c| c != b'\t' && c != b' ') {
                self.res.flags.invalid_header_folding = true;
            }
            let cont = chomp(chunk.get(ws..).unwrap_or(&[]));
            let Some((_, value)) = part.headers.get_mut(idx) else {
                return Ok(());
            };
            value.push(b' ');
            value.extend_from_slice(cont);
            if value.len() > BUF_SIZE {
                return Err("Multipart: Part header too long.".into());
            }
            if let Some(raw) = part.header_lines.get_mut(idx) {
                raw.push(b' ');
                raw.extend_from_slice(cont);
            }
            return Ok(());
        }

        let Some(colon) = chunk.iter().position(|&c| c == b':') else {
            return Err(format!(
                "Multipart: Invalid part header (colon missing): {}",
                escape_for_msg(chomp(chunk))
            )
            .into());
        };
        let name = chunk.get(..colon).unwrap_or(&[]);
        if name.is_empty() {
            return Err("Multipart: Invalid part header (header name missing).".into());
        }
        if name.iter().any(|&c| !(0x21..=0x7e).contains(&c)) {
            return Err("Multipart: Invalid part header (contains invalid character).".into());
        }
        let rest = chunk.get(colon + 1..).unwrap_or(&[]);
        let ws = rest
            .iter()
            .take_while(|&&c| c == b' ' || c == b'\t')
            .count();
        let value = chomp(rest.get(ws..).unwrap_or(&[]));
        let lower = name.to_ascii_lowercase();
        if part.header_index.contains_key(&lower) {
            return Err(format!(
                "Multipart: Duplicate part header: {}.",
                escape_for_msg(name)
            )
            .into());
        }
        part.header_index.insert(lower, part.headers.len());
        part.last_header = Some(part.headers.len());
        part.headers.push((name.to_vec(), value.to_vec()));
        part.header_lines.push(chomp(chunk).to_vec());
        // Part headers are bounded with the parts: a part needs one or two, and 87,000 in
        // 1 MiB cost 50 bytes of memory per byte of body.
        self.header_lines = self.header_lines.saturating_add(1);
        let max = self.opts.max_parts.saturating_mul(MAX_HEADERS_PER_PART);
        if self.header_lines > max {
            return Err(HeaderError::Hard(format!("Multipart: more than {max} part headers (SecArgumentsLimit x {MAX_HEADERS_PER_PART}).")));
        }
        Ok(())
    }

    fn process_part_data(&mut self, chunk: &[u8]) {
        self.data_read = true;
        let Some(part) = self.part.as_mut() else {
            return;
        };
        let hold = if chunk.ends_with(b"\r\n") {
            2
        } else if chunk.ends_with(b"\n") {
            1
        } else {
            0
        };
        let data = chunk.get(..chunk.len() - hold).unwrap_or(&[]);
        let prev = std::mem::take(&mut self.reserve);
        if part.is_file {
            part.size = part.size.saturating_add(prev.len() + data.len());
            if self.opts.keep_file_content && !part.over_limit {
                part.value.extend_from_slice(&prev);
                part.value.extend_from_slice(data);
            }
        } else {
            self.res.no_files_length = self
                .res
                .no_files_length
                .saturating_add(prev.len() + data.len());
            part.value.extend_from_slice(&prev);
            part.value.extend_from_slice(data);
        }
        self.reserve = prev;
        self.reserve.clear();
        self.reserve
            .extend_from_slice(chunk.get(chunk.len() - hold..).unwrap_or(&[]));
    }

    fn process_boundary(&mut self, last: bool) {
        if let Some(part) = self.part.take() {
            if part.name.is_empty() {
                self.res.flags.invalid_part = true;
            } else {
                for line in part.header_lines.iter() {
                    self.res
                        .part_headers
                        .push((part.name.clone(), line.clone()));
                }
                if part.is_file {
                    let content_type = part.header(b"content-type").map(<[u8]>::to_vec);
                    self.res.files.push(MultipartFile {
                        name: part.name,
                        filename: part.filename,
                        size: part.size,
                        content_type,
                        content: part.value,
                    });
                } else {
                    self.res.fields.push((part.name, part.value));
                }
            }
        }
        self.reserve.clear();
        self.in_data = false;
        self.data_read = false;
        if !last {
            self.part = Some(Part::default());
        }
    }
}

/// v3 `parse_content_disposition`; `Err` carries its negative return code.
fn parse_content_disposition(
    v: &[u8],
    part: &mut Part,
    flags: &mut MultipartFlags,
    names: &mut Vec<Vec<u8>>,
    filenames: &mut Vec<Vec<u8>>,
) -> Result<(), i32> {
    // NUL-terminated view: 0 means "end of string".
    let at = |i: usize| -> u8 { v.get(i).copied().unwrap_or(0) };
    let is_ws = |c: u8| c == b'\t' || c == b' ';
    if !v.starts_with(b"form-data") {
        return Err(-1);
    }
    let mut p = 9;
    while is_ws(at(p)) {
        p += 1;
    }
    if at(p) == 0 {
        return Ok(());
    }
    if at(p) != b';' {
        return Err(-2);
    }
    p += 1;
    while at(p) != 0 {
        while is_ws(at(p)) {
            p += 1;
        }
        if at(p) == 0 {
            return Err(-3);
        }
        let start = p;
        while at(p) != 0 && at(p) != b'=' && !is_ws(at(p)) {
            p += 1;
        }
        if at(p) == 0 {
            return Err(-4);
        }
        let pname = v.get(start..p).unwrap_or(&[]);
        while is_ws(at(p)) {
            p += 1;
        }
        if at(p) == 0 {
            return Err(-5);
        }
        if at(p) != b'=' {
            return Err(-13);
        }
        p += 1;
        while is_ws(at(p)) {
            p += 1;
        }
        if at(p) == 0 {
            return Err(-6);
        }
        let mut value = Vec::new();
        let q = at(p);
        let double_quoted = q == b'"';
        if q == b'"' || q == b'\'' {
            if q == b'\'' {
                flags.invalid_quoting = true;
            }
            p += 1;
            if at(p) == 0 {
                return Err(-7);
            }
            loop {
                let c = at(p);
                if c == 0 {
                    // Unterminated quoted value.
                    return Err(-7);
                }
                if c == b'\\' {
                    let next = at(p + 1);
                    if next == 0 {
                        return Err(-8);
                    }
                    if next == q || next == b'\\' {
                        p += 1;
                    }
                } else if c == q {
                    break;
                }
                value.push(at(p));
                p += 1;
            }
            p += 1; // closing quote
        } else {
            let start = p;
            while at(p) != 0 && is_token_char(at(p)) {
                p += 1;
            }
            value.extend_from_slice(v.get(start..p).unwrap_or(&[]));
        }

        match pname {
            b"name" => {
                // v3 validate_quotes: a `'` in a value not enclosed in double quotes.
                if !double_quoted && value.contains(&b'\'') {
                    flags.invalid_quoting = true;
                }
                names.push(value.clone());
                if !part.name.is_empty() {
                    return Err(-14);
                }
                part.name = value;
            }
            b"filename" => {
                if !double_quoted && value.contains(&b'\'') {
                    flags.invalid_quoting = true;
                }
                filenames.push(value.clone());
                if !part.filename.is_empty() {
                    return Err(-15);
                }
                part.filename = value;
            }
            _ => return Err(-11),
        }

        if at(p) != 0 {
            while is_ws(at(p)) {
                p += 1;
            }
            if at(p) == 0 {
                return Ok(());
            }
            if at(p) != b';' {
                if p > 0 && matches!(at(p - 1), b'\'' | b'"') {
                    flags.invalid_quoting = true;
                }
                return Err(-12);
            }
            p += 1;
        }
    }
    Ok(())
}

fn kmp_table(needle: &[u8]) -> Vec<usize> {
    let mut t = vec![0usize; needle.len()];
    let mut k = 0;
    for i in 1..needle.len() {
        while k > 0 && needle.get(i) != needle.get(k) {
            k = t.get(k - 1).copied().unwrap_or(0);
        }
        if needle.get(i) == needle.get(k) {
            k += 1;
        }
        if let Some(slot) = t.get_mut(i) {
            *slot = k;
        }
    }
    t
}

fn kmp_contains(hay: &[u8], needle: &[u8], t: &[usize]) -> bool {
    if needle.is_empty() {
        return false;
    }
    let mut k = 0;
    for &c in hay {
        while k > 0 && needle.get(k) != Some(&c) {
            k = t.get(k - 1).copied().unwrap_or(0);
        }
        if needle.get(k) == Some(&c) {
            k += 1;
            if k == needle.len() {
                return true;
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    const CT: &[u8] = b"multipart/form-data; boundary=XyZ";

    fn crlf(s: &str) -> Vec<u8> {
        s.replace('\n', "\r\n").into_bytes()
    }

    fn go(ct: &[u8], body: &[u8]) -> MultipartResult {
        parse(ct, body, &MultipartOptions::default())
    }

    fn s(b: &[u8]) -> String {
        String::from_utf8_lossy(b).into_owned()
    }

    fn fields(r: &MultipartResult) -> Vec<(String, String)> {
        r.fields.iter().map(|(n, v)| (s(n), s(v))).collect()
    }

    fn f(n: &str, v: &str) -> (String, String) {
        (n.to_string(), v.to_string())
    }

    const SIMPLE: &str = "--XyZ\n\
Content-Disposition: form-data; name=\"a\"\n\
\n\
hello\n\
--XyZ\n\
Content-Disposition: form-data; name=\"up\"; filename=\"x.php\"\n\
Content-Type: text/plain\n\
\n\
<?php echo 1; ?>\n\
line2\n\
--XyZ--\n";

    #[test]
    fn fields_and_files_with_crlf() {
        let r = go(CT, &crlf(SIMPLE));
        assert_eq!(r.error, None);
        assert_eq!(fields(&r), vec![f("a", "hello")]);
        assert_eq!(r.files.len(), 1);
        let file = &r.files[0];
        assert_eq!(file.name, b"up");
        assert_eq!(file.filename, b"x.php");
        assert_eq!(file.size, "<?php echo 1; ?>\r\nline2".len());
        assert_eq!(file.content_type.as_deref(), Some(&b"text/plain"[..]));
        assert!(file.content.is_empty());
        assert_eq!(r.files_combined_size(), file.size);
        assert!(!r.flags.strict_error(), "{:?}", r.flags);
        assert!(r.flags.crlf_line && !r.flags.lf_line);
        assert_eq!(r.flags.unmatched_boundary, 2);
        assert_eq!(r.names, vec![b"a".to_vec(), b"up".to_vec()]);
        assert_eq!(r.filenames, vec![b"x.php".to_vec()]);
    }

    #[test]
    fn lf_only_lines_parse_but_set_lf_line() {
        let r = go(CT, SIMPLE.as_bytes());
        assert_eq!(r.error, None);
        assert_eq!(fields(&r), vec![f("a", "hello")]);
        assert_eq!(r.files[0].size, "<?php echo 1; ?>\nline2".len());
        assert!(r.flags.lf_line && !r.flags.crlf_line);
        assert!(!r.flags.crlf_lf_lines());
        assert!(r.flags.strict_error());
    }

    #[test]
    fn mixed_line_endings_set_crlf_lf_lines() {
        let body = b"--XyZ\r\nContent-Disposition: form-data; name=\"a\"\n\r\nv\r\n--XyZ--\r\n";
        let r = go(CT, body);
        assert_eq!(r.error, None);
        assert!(r.flags.crlf_lf_lines());
    }

    #[test]
    fn multi_line_field_value_keeps_inner_line_breaks() {
        let body = crlf("--XyZ\nContent-Disposition: form-data; name=\"t\"\n\nl1\nl2\n\n--XyZ--\n");
        let r = go(CT, &body);
        assert_eq!(fields(&r), vec![f("t", "l1\r\nl2\r\n")]);
    }

    #[test]
    fn keep_file_content_option() {
        let opts = MultipartOptions {
            keep_file_content: true,
            ..Default::default()
        };
        let r = parse(CT, &crlf(SIMPLE), &opts);
        assert_eq!(r.files[0].content, b"<?php echo 1; ?>\r\nline2".to_vec());
    }

    #[test]
    fn part_headers_keyed_by_part_name() {
        let r = go(CT, &crlf(SIMPLE));
        let h: Vec<(String, String)> = r.part_headers.iter().map(|(n, v)| (s(n), s(v))).collect();
        assert_eq!(
            h,
            vec![
                f("a", "Content-Disposition: form-data; name=\"a\""),
                f(
                    "up",
                    "Content-Disposition: form-data; name=\"up\"; filename=\"x.php\""
                ),
                f("up", "Content-Type: text/plain"),
            ]
        );
    }

    #[test]
    fn header_names_are_case_insensitive() {
        let body =
            crlf("--XyZ\ncontent-disposition: form-data; name=\"_charset_\"\n\nutf-7\n--XyZ--\n");
        let r = go(CT, &body);
        assert_eq!(r.error, None);
        assert_eq!(fields(&r), vec![f("_charset_", "utf-7")]);
        assert_eq!(r.part_headers.len(), 1);
    }

    #[test]
    fn empty_filename_is_a_field() {
        let body = crlf(
            "--XyZ\nContent-Disposition: form-data; name=\"f\"; filename=\"\"\n\ndata\n--XyZ--\n",
        );
        let r = go(CT, &body);
        assert!(r.files.is_empty());
        assert_eq!(fields(&r), vec![f("f", "data")]);
    }

    #[test]
    fn final_boundary_without_trailing_newline_completes() {
        let body = b"--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nv\r\n--XyZ--";
        let r = go(CT, body);
        assert_eq!(r.error, None);
        assert_eq!(fields(&r), vec![f("a", "v")]);
        assert!(!r.flags.data_after);
    }

    #[test]
    fn missing_final_boundary_is_an_error() {
        let body = crlf("--XyZ\nContent-Disposition: form-data; name=\"a\"\n\nv\n");
        let r = go(CT, &body);
        assert_eq!(
            r.error.as_deref(),
            Some("Multipart parsing error: Multipart: Final boundary missing.")
        );
        let r = go(
            CT,
            b"--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nv\r\n--XyZ-- ",
        );
        assert!(r.error.is_some());
    }

    #[test]
    fn no_boundary_in_body_is_an_error() {
        let r = go(CT, b"just some text\r\n");
        assert_eq!(
            r.error.as_deref(),
            Some("Multipart parsing error: Multipart: No boundaries found in payload.")
        );
        assert!(r.flags.data_before);
    }

    #[test]
    fn empty_body_is_fine() {
        let r = go(CT, b"");
        assert_eq!(r.error, None);
        assert!(!r.flags.strict_error());
    }

    #[test]
    fn only_final_boundary() {
        let r = go(CT, b"--XyZ--\r\n");
        assert_eq!(r.error, None);
        assert!(r.fields.is_empty());
    }

    #[test]
    fn data_before_and_after() {
        let body = crlf(
            "preamble\n--XyZ\nContent-Disposition: form-data; name=\"a\"\n\nv\n--XyZ--\nepilogue\n",
        );
        let r = go(CT, &body);
        assert_eq!(r.error, None);
        assert!(r.flags.data_before);
        assert!(r.flags.data_after);
        assert!(r.flags.strict_error());
        assert_eq!(fields(&r), vec![f("a", "v")]);
    }

    #[test]
    fn unmatched_boundary_detected() {
        let body = crlf(
            "--XyZ\nContent-Disposition: form-data; name=\"a\"\n\nv\n--XyZ2\n--other\n--XyZ--\n",
        );
        let r = go(CT, &body);
        // "--XyZ2\r\n" starts with our boundary but has trailing garbage.
        assert_eq!(
            r.error.as_deref(),
            Some("Multipart parsing error: Multipart: Invalid boundary: --XyZ2\r\n")
        );
        let body = crlf(
            "--XyZ\nContent-Disposition: form-data; name=\"a\"\n\nv\n--other\nx --XyZ y\n--XyZ--\n",
        );
        let r = go(CT, &body);
        assert_eq!(r.error, None);
        // v3 overwrites 1 with 2 when the next boundary matches.
        assert_eq!(r.flags.unmatched_boundary, 2);
        let body = crlf("--XyZ\nContent-Disposition: form-data; name=\"a\"\n\nv\n--other\n");
        let r = go(CT, &body);
        assert_eq!(r.flags.unmatched_boundary, 1);
        let body = crlf("--XyZ\nContent-Disposition: form-data; name=\"a\"\n\nv x--XyZ\n");
        let r = go(CT, &body);
        assert_eq!(r.flags.unmatched_boundary, 1);
    }

    #[test]
    fn whitespace_before_boundary_is_an_error() {
        let body =
            crlf("--XyZ\nContent-Disposition: form-data; name=\"a\"\n\nv\n--  XyZ\n--XyZ--\n");
        let r = go(CT, &body);
        assert_eq!(
            r.error.as_deref(),
            Some("Multipart parsing error: Multipart: Invalid boundary (whitespace).")
        );
    }

    #[test]
    fn quoted_boundary_used_with_quotes_is_an_error() {
        let ct = b"multipart/form-data; boundary=\"XyZ\"";
        let body = crlf("--\"XyZ\"\nContent-Disposition: form-data; name=\"a\"\n\nv\n--XyZ--\n");
        let r = go(ct, &body);
        assert!(r.flags.boundary_quoted);
        assert_eq!(
            r.error.as_deref(),
            Some("Multipart parsing error: Multipart: Invalid boundary (quotes).")
        );
        let ok = go(ct, &crlf(SIMPLE));
        assert_eq!(ok.error, None);
        assert!(ok.flags.boundary_quoted && ok.flags.strict_error());
    }

    #[test]
    fn content_type_checks() {
        let cases: &[(&[u8], &str)] = &[
            (b"", "Multipart: Content-Type header not available."),
            (b"text/plain; boundary=a", "Multipart: Invalid MIME type."),
            (
                b"multipart/form-data",
                "Multipart: Boundary not found in C-T.",
            ),
            (
                b"multipart/form-data; Boundary=a",
                "Multipart: Invalid boundary in C-T (case sensitivity).",
            ),
            (
                b"multipart/form-data; boundary=a; boundary=b",
                "Multipart: Multiple boundary parameters in C-T.",
            ),
            (
                b"multipart/form-data; x=y; boundary=a",
                "Multipart: Invalid boundary in C-T (malformed).",
            ),
            (
                b"multipart/form-data; boundary",
                "Multipart: Invalid boundary in C-T (malformed).",
            ),
            (
                b"multipart/form-data; boundaryx=a",
                "Multipart: Invalid boundary in C-T (parameter name).",
            ),
            (
                b"multipart/form-data; boundary=\"a",
                "Multipart: Invalid boundary in C-T (quote).",
            ),
            (
                b"multipart/form-data; boundary=a\"",
                "Multipart: Invalid boundary in C-T (quote).",
            ),
            (
                b"multipart/form-data; boundary=",
                "Multipart: Invalid boundary in C-T (empty).",
            ),
            (
                b"multipart/form-data; boundary=\"\"",
                "Multipart: Invalid boundary in C-T (empty).",
            ),
            (
                b"multipart/form-data; boundary=a<b",
                "Multipart: Invalid boundary in C-T (characters).",
            ),
            (
                b"multipart/form-data; boundary=a ",
                "Multipart: Invalid boundary in C-T (characters).",
            ),
        ];
        for (ct, want) in cases {
            let r = go(ct, b"--a--\r\n");
            assert_eq!(
                r.error.as_deref(),
                Some(format!("Multipart parsing error: {want}").as_str()),
                "{}",
                s(ct)
            );
            assert!(r.flags.error && r.flags.strict_error());
        }
        let long = [&b"multipart/form-data; boundary="[..], &[b'a'; 1000][..]].concat();
        assert!(go(&long, b"")
            .error
            .as_deref()
            .unwrap_or("")
            .contains("(length)"));
    }

    #[test]
    fn content_type_flags() {
        let r = go(b"multipart/form-data boundary=XyZ", &crlf(SIMPLE));
        assert_eq!(r.error, None);
        assert!(r.flags.missing_semicolon && r.flags.strict_error());
        let r = go(b"multipart/form-data; boundary =XyZ", &crlf(SIMPLE));
        assert_eq!(r.error, None);
        assert!(r.flags.boundary_whitespace);
        let r = go(b"Multipart/Form-Data;boundary=XyZ", &crlf(SIMPLE));
        assert_eq!(r.error, None);
        assert!(!r.flags.strict_error());
    }

    #[test]
    fn header_folding_flags_and_value() {
        let body = crlf("--XyZ\nContent-Disposition: form-data;\n name=\"a\"\nContent-Type: text/plain;\n\tcharset=utf-7\n\nv\n--XyZ--\n");
        let r = go(CT, &body);
        assert_eq!(r.error, None);
        assert!(r.flags.header_folding && !r.flags.invalid_header_folding);
        assert_eq!(fields(&r), vec![f("a", "v")]);
        assert_eq!(
            s(&r.part_headers[1].1),
            "Content-Type: text/plain; charset=utf-7"
        );
        let body =
            b"--XyZ\r\nContent-Disposition: form-data;\r\n\x0b name=\"a\"\r\n\r\nv\r\n--XyZ--\r\n";
        let r = go(CT, body);
        assert_eq!(r.error, None);
        assert!(r.flags.invalid_header_folding);
        let body =
            crlf("--XyZ\n folded\nContent-Disposition: form-data; name=\"a\"\n\nv\n--XyZ--\n");
        assert_eq!(
            go(CT, &body).error.as_deref(),
            Some("Multipart parsing error: Multipart: Invalid part header (folding error).")
        );
    }

    #[test]
    fn invalid_header_character_is_rejected() {
        for h in [
            &b"\x0eContent-Disposition"[..],
            b"Content-Disposition\x0e",
            b"Content- Disposition",
        ] {
            let mut body = b"--boundary\r\n".to_vec();
            body.extend_from_slice(h);
            body.extend_from_slice(b": form-data; name=\"file\"; filename=\"1.php\"\r\nContent-Disposition: form-data; name=\"post\"\r\n\r\nx\r\n--boundary--");
            let r = go(b"multipart/form-data; boundary=boundary", &body);
            assert_eq!(
                r.error.as_deref(),
                Some("Multipart parsing error: Multipart: Invalid part header (contains invalid character).")
            );
        }
        let body = crlf("--XyZ\nContent-!Disposition: x\nContent-Disposition: form-data; name=\"a\"\n\nv\n--XyZ--\n");
        assert_eq!(go(CT, &body).error, None);
    }

    #[test]
    fn header_errors() {
        let cases: &[(&str, &str)] = &[
            ("--XyZ\nContent-Type: text/plain\n\nv\n--XyZ--\n", "Multipart: Part missing Content-Disposition header."),
            ("--XyZ\nno colon here\n\nv\n--XyZ--\n", "Multipart: Invalid part header (colon missing): no colon here"),
            ("--XyZ\n: x\n\nv\n--XyZ--\n", "Multipart: Invalid part header (header name missing)."),
            ("--XyZ\nContent-Disposition: form-data\n\nv\n--XyZ--\n", "Multipart: Content-Disposition header missing name field."),
            ("--XyZ\nContent-Disposition: form-data; name=a\nContent-Disposition: form-data; name=b\n\nv\n--XyZ--\n", "Multipart: Duplicate part header: Content-Disposition."),
            ("--XyZ\nContent-Disposition: attachment; name=a\n\nv\n--XyZ--\n", "Multipart: Invalid Content-Disposition header (-1): attachment; name=a"),
        ];
        for (body, want) in cases {
            let r = go(CT, &crlf(body));
            assert_eq!(
                r.error.as_deref(),
                Some(format!("Multipart parsing error: {want}").as_str()),
                "{body:?}"
            );
        }
        let r = go(
            CT,
            b"--XyZ\r\nContent-Disposition: form-data; name=\"a\x00\"\r\n\r\nv\r\n--XyZ--\r\n",
        );
        assert_eq!(
            r.error.as_deref(),
            Some("Multipart parsing error: Multipart: Nul byte in part headers.")
        );
    }

    #[test]
    fn content_disposition_return_codes() {
        let cases: &[(&str, i32)] = &[
            ("form-data x", -2),
            ("form-data; ", -3),
            ("form-data; name", -4),
            ("form-data; name ", -5),
            ("form-data; name x", -13),
            ("form-data; name= ", -6),
            ("form-data; name=\"", -7),
            ("form-data; name=\"abc", -7),
            ("form-data; name=\"a\\", -8),
            ("form-data; foo=bar", -11),
            ("form-data; name=a b", -12),
            ("form-data; name=a; name=b", -14),
            ("form-data; name=a; filename=x; filename=y", -15),
        ];
        for (cd, rc) in cases {
            let mut part = Part::default();
            let mut fl = MultipartFlags::default();
            let (mut n, mut fname) = (Vec::new(), Vec::new());
            let got =
                parse_content_disposition(cd.as_bytes(), &mut part, &mut fl, &mut n, &mut fname);
            assert_eq!(got, Err(*rc), "{cd}");
        }
    }

    #[test]
    fn content_disposition_values() {
        let mut part = Part::default();
        let mut fl = MultipartFlags::default();
        let (mut n, mut fname) = (Vec::new(), Vec::new());
        let r = parse_content_disposition(
            br#"form-data; name="a\"b\\c\d"; filename='f.txt';"#,
            &mut part,
            &mut fl,
            &mut n,
            &mut fname,
        );
        assert_eq!(r, Ok(()));
        assert_eq!(s(&part.name), r#"a"b\c\d"#);
        assert_eq!(s(&part.filename), "f.txt");
        assert!(fl.invalid_quoting);
        let mut part = Part::default();
        let mut fl = MultipartFlags::default();
        let r = parse_content_disposition(
            b"form-data;name=tok",
            &mut part,
            &mut fl,
            &mut n,
            &mut fname,
        );
        assert_eq!(r, Ok(()));
        assert_eq!(part.name, b"tok");
        assert!(!fl.invalid_quoting);
    }

    #[test]
    fn filename_needs_literal_filename_equals() {
        let body = crlf(
            "--XyZ\nContent-Disposition: form-data; name=\"a\"; filename = \"x\"\n\nv\n--XyZ--\n",
        );
        let r = go(CT, &body);
        assert_eq!(
            r.error.as_deref(),
            Some("Multipart parsing error: Multipart: Invalid Content-Disposition header (filename).")
        );
    }

    #[test]
    fn part_without_headers_is_invalid_part() {
        // v3: the second boundary line, where the part's headers begin, is a header line
        // (colon missing: REQBODY_ERROR) and flags the part as invalid.
        let body = crlf("--XyZ\n--XyZ\nContent-Disposition: form-data; name=\"a\"\n\nv\n--XyZ--\n");
        let r = go(CT, &body);
        assert_eq!(
            r.error.as_deref(),
            Some("Multipart parsing error: Multipart: Invalid part header (colon missing): --XyZ")
        );
        assert!(r.flags.invalid_part && r.flags.strict_error() && !r.flags.error);
        assert_eq!(fields(&r), vec![f("a", "v")]);
    }

    #[test]
    fn invalid_quoting_flag_from_name_value() {
        // A `'` inside double quotes is fine (ModSecurity PR #2661, in 3.0.15), unquoted or
        // single-quoted it is invalid quoting.
        let body = crlf("--XyZ\nContent-Disposition: form-data; name=\"a'b\"\n\nv\n--XyZ--\n");
        let r = go(CT, &body);
        assert_eq!(r.error, None);
        assert!(!r.flags.invalid_quoting && !r.flags.strict_error(), "{:?}", r.flags);
        for cd in ["name=a'b", "name='ab'", "name=\"a\"; filename=x'y"] {
            let body = crlf(&format!("--XyZ\nContent-Disposition: form-data; {cd}\n\nv\n--XyZ--\n"));
            let r = go(CT, &body);
            assert_eq!(r.error, None, "{cd}");
            assert!(r.flags.invalid_quoting && r.flags.strict_error(), "{cd}");
        }
    }

    /// The flags libmodsecurity 3.0.15 sets for these bodies (each checked in-process with
    /// one `SecRule MULTIPART_x "!@eq 0"` rule per flag): `e` = m_flag_error (only errors of
    /// the boundary lines and the Content-Type), `err` = REQBODY_ERROR.
    #[test]
    fn flags_as_libmodsecurity_3_0_15() {
        type Check = fn(&MultipartFlags) -> bool;
        let cases: &[(&str, &[u8], &str, bool, bool, Check)] = &[
            // name, Content-Type, body (\n = CRLF unless "lf:"), strict, err, flag
            ("ok", CT, "--XyZ\nContent-Disposition: form-data; name=\"a\"\n\n1\n--XyZ--\n", false, false, |f| f.unmatched_boundary == 2),
            ("lf", CT, "lf:--XyZ\nContent-Disposition: form-data; name=\"a\"\n\n1\n--XyZ--\n", true, false, |f| f.lf_line),
            ("quoted", b"multipart/form-data; boundary=\"XyZ\"", "--XyZ\nContent-Disposition: form-data; name=\"a\"\n\n1\n--XyZ--\n", true, false, |f| f.boundary_quoted),
            ("whitespace", b"multipart/form-data; boundary =XyZ", "--XyZ\nContent-Disposition: form-data; name=\"a\"\n\n1\n--XyZ--\n", true, false, |f| f.boundary_whitespace),
            ("semicolon", b"multipart/form-data boundary=XyZ", "--XyZ\nContent-Disposition: form-data; name=\"a\"\n\n1\n--XyZ--\n", true, false, |f| f.missing_semicolon),
            ("charset after boundary", b"multipart/form-data; boundary=XyZ; charset=utf-8", "--XyZ\nContent-Disposition: form-data; name=\"a\"\n\n1\n--XyZ--\n", false, false, |f| !f.error),
            ("data before", CT, "junk\n--XyZ\nContent-Disposition: form-data; name=\"a\"\n\n1\n--XyZ--\n", true, false, |f| f.data_before),
            ("data after", CT, "--XyZ\nContent-Disposition: form-data; name=\"a\"\n\n1\n--XyZ--\njunk", true, false, |f| f.data_after),
            ("folding", CT, "--XyZ\nContent-Disposition: form-data;\n name=\"a\"\n\n1\n--XyZ--\n", true, false, |f| f.header_folding && !f.invalid_header_folding),
            ("invalid folding", CT, "--XyZ\nContent-Disposition: form-data;\n\x0bname=\"a\"\n\n1\n--XyZ--\n", true, false, |f| f.invalid_header_folding),
            ("quote in double quotes", CT, "--XyZ\nContent-Disposition: form-data; name=\"a\"; filename=\"te'st.txt\"\n\n1\n--XyZ--\n", false, false, |f| !f.invalid_quoting),
            ("single quotes", CT, "--XyZ\nContent-Disposition: form-data; name='a'\n\n1\n--XyZ--\n", true, false, |f| f.invalid_quoting),
            // Part header errors: REQBODY_ERROR, parsing goes on, no m_flag_error.
            ("bad header name", CT, "--XyZ\n\x0eContent-Disposition: form-data; name=\"a\"\nContent-Disposition: form-data; name=\"b\"\n\n1\n--XyZ--", false, true, |f| !f.error && !f.invalid_part),
            ("colon missing", CT, "--XyZ\nfoo\nContent-Disposition: form-data; name=\"a\"\n\n1\n--XyZ--\n", false, true, |f| f.unmatched_boundary == 2),
            ("nul in header", CT, "--XyZ\nContent-Disposition: form-data; name=\"a\"\nX: \0\n\n1\n--XyZ--\n", false, true, |f| !f.error),
            ("missing final boundary", CT, "--XyZ\nContent-Disposition: form-data; name=\"a\"\n\n1\n", false, true, |f| !f.error),
            ("no content-disposition", CT, "--XyZ\nX-A: 1\n\n1\n--XyZ\nContent-Disposition: form-data; name=\"a\"\n\n1\n--XyZ--\n", true, true, |f| f.invalid_part && !f.error),
            // CRS 932180-3: an empty part, then a line that looks like a boundary but is not ours.
            ("unmatched after error", CT, "--XyZ\nContent-Disposition: form-data; name=\"a\"\n\n1\n--XyZ\n\nBIN\n--0000--\n", false, true, |f| f.unmatched_boundary == 1),
            // Our boundary where part data should begin: data, and an invalid part.
            ("boundary as first data line", CT, "--XyZ\nContent-Disposition: form-data; name=\"a\"\n\n--XyZx\n--XyZ--\n", true, false, |f| f.invalid_part && !f.error),
            ("final boundary without data", CT, "--XyZ\nContent-Disposition: form-data; name=\"a\"\n\n--XyZ--", true, false, |f| f.invalid_part),
            ("bare LF before the boundary", CT, "--XyZ\nContent-Disposition: form-data; name=\"a\"\n\nv\x01--XyZ--\n", true, false, |f| f.lf_line && f.crlf_lf_lines()),
            // Errors of boundary lines set m_flag_error.
            ("junk after boundary", CT, "--XyZ\nContent-Disposition: form-data; name=\"a\"\n\n1\n--XyZ junk\n--XyZ--\n", true, true, |f| f.error),
            ("whitespace before boundary", CT, "--XyZ\nContent-Disposition: form-data; name=\"a\"\n\n1\n-- XyZ\n--XyZ--\n", true, true, |f| f.error),
        ];
        for (name, ct, body, strict, err, check) in cases {
            let body: Vec<u8> = match body.strip_prefix("lf:") {
                Some(b) => b.as_bytes().to_vec(),
                // \x01 marks a bare LF in a CRLF body.
                None => crlf(body).into_iter().map(|c| if c == 1 { b'\n' } else { c }).collect(),
            };
            let r = go(ct, &body);
            assert_eq!(r.flags.strict_error(), *strict, "{name}: {:?}", r.flags);
            assert_eq!(r.error.is_some(), *err, "{name}: {:?}", r.error);
            assert!(check(&r.flags), "{name}: {:?}", r.flags);
        }
    }

    #[test]
    fn file_limit_exceeded() {
        let body = crlf("--XyZ\nContent-Disposition: form-data; name=\"f1\"; filename=\"a\"\n\n1\n--XyZ\nContent-Disposition: form-data; name=\"f2\"; filename=\"b\"\n\n22\n--XyZ\nContent-Disposition: form-data; name=\"x\"\n\ny\n--XyZ--\n");
        let opts = MultipartOptions {
            max_files: 1,
            ..Default::default()
        };
        let r = parse(CT, &body, &opts);
        assert!(r.flags.file_limit_exceeded && r.flags.strict_error());
        assert_eq!(
            r.error.as_deref(),
            Some("Multipart parsing error: Multipart: Upload file limit exceeded 1. Use SecUploadFileLimit to change the limit.")
        );
        assert_eq!(r.files.len(), 2);
        assert_eq!(r.files_combined_size(), 3);
        assert_eq!(fields(&r), vec![f("x", "y")]);
    }

    /// Found by the pathological-input check (tests/src/bin/pathological.rs): 15,000 tiny
    /// parts in 1 MiB made the CRS work superlinear; the parts are now bounded.
    #[test]
    fn parts_over_the_limit_stop_parsing() {
        let body = crlf("--XyZ\nContent-Disposition: form-data; name=\"a\"\n\n1\n--XyZ\nContent-Disposition: form-data; name=\"b\"; filename=\"f\"\n\n2\n--XyZ\nContent-Disposition: form-data; name=\"c\"\n\n3\n--XyZ--\n");
        let opts = |max_parts| MultipartOptions { max_parts, ..Default::default() };
        let r = parse(CT, &body, &opts(3));
        assert_eq!(r.error, None);
        assert_eq!((r.fields.len(), r.files.len()), (2, 1));
        let r = parse(CT, &body, &opts(2));
        assert_eq!(
            r.error.as_deref(),
            Some("Multipart parsing error: Multipart: more than 2 parts (SecArgumentsLimit).")
        );
        assert_eq!(fields(&r), vec![f("a", "1")]);
        assert_eq!(r.files.len(), 1);
    }

    /// Found by the pathological-input check: 87,000 distinct headers in one part.
    #[test]
    fn part_headers_over_the_limit_stop_parsing() {
        let mut body = String::from("--XyZ\nContent-Disposition: form-data; name=\"a\"\n");
        for i in 0..8 {
            body.push_str(&format!("X-h{i}: 1\n"));
        }
        body.push_str("\nv\n--XyZ--\n");
        let body = crlf(&body);
        let ok = MultipartOptions { max_parts: 3, ..Default::default() };
        assert_eq!(parse(CT, &body, &ok).error, None);
        let over = MultipartOptions { max_parts: 2, ..Default::default() };
        assert_eq!(
            parse(CT, &body, &over).error.as_deref(),
            Some("Multipart parsing error: Multipart: more than 8 part headers (SecArgumentsLimit x 4).")
        );
    }

    #[test]
    fn long_header_line_is_an_error() {
        let mut body = b"--XyZ\r\nContent-Disposition: form-data; name=\"".to_vec();
        body.extend(vec![b'a'; 5000]);
        body.extend_from_slice(b"\"\r\n\r\nv\r\n--XyZ--\r\n");
        let r = go(CT, &body);
        assert_eq!(
            r.error.as_deref(),
            Some("Multipart parsing error: Multipart: Part header line over 4096 bytes long")
        );
    }

    #[test]
    fn long_data_lines_are_chunked_without_loss() {
        let data: Vec<u8> = (0..20_000u32).map(|i| b'a' + (i % 26) as u8).collect();
        let mut body = b"--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n".to_vec();
        body.extend_from_slice(&data);
        body.extend_from_slice(b"\r\n--XyZ--\r\n");
        let r = go(CT, &body);
        assert_eq!(r.error, None);
        assert_eq!(r.fields[0].1, data);
    }

    #[test]
    fn cr_at_buffer_edge_is_not_lost() {
        // Put a "\r\n" exactly where v3's buffer is full.
        let mut body = b"--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n".to_vec();
        let mut data = vec![b'x'; BUF_SIZE - 1];
        data.extend_from_slice(b"\r\nmore");
        body.extend_from_slice(&data);
        body.extend_from_slice(b"\r\n--XyZ--\r\n");
        let r = go(CT, &body);
        assert_eq!(r.error, None);
        assert_eq!(r.fields[0].1, data);
    }

    #[test]
    fn boundary_after_long_line_chunk_is_data() {
        // The boundary text does not start a line (it follows a 4096-byte
        // chunk without newline), so it is data, as in v3.
        let mut body = b"--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n".to_vec();
        body.extend(vec![b'y'; BUF_SIZE]);
        body.extend_from_slice(b"--XyZ--\r\n--XyZ--\r\n");
        let r = go(CT, &body);
        assert_eq!(r.error, None);
        assert_eq!(r.fields[0].1.len(), BUF_SIZE + 7);
    }

    #[test]
    fn hostile_many_parts_and_headers() {
        let mut body = Vec::new();
        for i in 0..20_000 {
            body.extend_from_slice(
                format!("--XyZ\r\nContent-Disposition: form-data; name=\"n{i}\"\r\n\r\nv\r\n")
                    .as_bytes(),
            );
        }
        body.extend_from_slice(b"--XyZ--\r\n");
        let r = go(CT, &body);
        assert_eq!(r.error, None);
        assert_eq!(r.fields.len(), 20_000);

        let mut body = b"--XyZ\r\n".to_vec();
        for i in 0..50_000 {
            body.extend_from_slice(format!("X-H{i}: v\r\n").as_bytes());
        }
        body.extend_from_slice(
            b"Content-Disposition: form-data; name=\"a\"\r\n\r\nv\r\n--XyZ--\r\n",
        );
        let r = go(CT, &body);
        assert_eq!(r.error, None);
        assert_eq!(r.part_headers.len(), 50_001);
    }

    #[test]
    fn hostile_boundary_like_lines_stay_linear() {
        // Lines full of near-misses of a 900-byte boundary: a naive scan
        // would cost len * boundary per line.
        let bnd = vec![b'a'; 900];
        let ct = [&b"multipart/form-data; boundary="[..], &bnd[..]].concat();
        let mut near = b"--".to_vec();
        near.extend(vec![b'a'; 899]);
        near.push(b'b');
        let mut body = b"--".to_vec();
        body.extend_from_slice(&bnd);
        body.extend_from_slice(b"\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n");
        for _ in 0..300 {
            body.push(b'x');
            for _ in 0..3 {
                body.extend_from_slice(&near);
            }
            body.push(b'\n');
        }
        body.extend_from_slice(b"--");
        body.extend_from_slice(&bnd);
        body.extend_from_slice(b"--\r\n");
        let t = std::time::Instant::now();
        let r = go(&ct, &body);
        assert_eq!(r.error, None);
        assert_eq!(r.flags.unmatched_boundary, 2);
        assert!(t.elapsed().as_secs() < 5);
    }

    #[test]
    fn crs_922130_bodies_fail_on_invalid_header_characters() {
        let bodies: [&[u8]; 4] = [
            include_bytes!("../../testdata/body/crs-922130-1.multipart"),
            include_bytes!("../../testdata/body/crs-922130-2.multipart"),
            include_bytes!("../../testdata/body/crs-922130-4.multipart"),
            include_bytes!("../../testdata/body/crs-922130-7.multipart"),
        ];
        for body in bodies {
            let r = go(b"multipart/form-data; boundary=boundary", body);
            assert_eq!(
                r.error.as_deref(),
                Some("Multipart parsing error: Multipart: Invalid part header (contains invalid character).")
            );
        }
    }

    #[test]
    fn crs_922110_every_part_content_type_is_visible() {
        let body = include_bytes!("../../testdata/body/crs-922110-2.multipart");
        let r = go(
            b"multipart/form-data; boundary=----WebKitFormBoundary",
            body,
        );
        assert_eq!(r.error, None);
        let cts: Vec<(String, String)> = r
            .part_headers
            .iter()
            .filter(|(_, h)| h.to_ascii_lowercase().starts_with(b"content-type"))
            .map(|(n, h)| (s(n), s(h)))
            .collect();
        assert_eq!(
            cts,
            vec![
                f("username", "Content-Type: text/plain; charset=utf-7"),
                f("dummy", "Content-Type: text/plain; charset=utf-8"),
            ]
        );
        assert_eq!(fields(&r)[0], f("username", "+ADw-img+ACA-src+AD0-x+AD4-"));
    }

    #[test]
    fn crs_922100_charset_part_is_keyed_by_name() {
        let body = include_bytes!("../../testdata/body/crs-922100-1.multipart");
        let r = go(b"multipart/form-data; boundary=boundary", body);
        assert_eq!(r.error, None);
        assert_eq!(
            r.part_headers
                .iter()
                .filter(|(n, _)| n == b"_charset_")
                .count(),
            1
        );
        assert_eq!(fields(&r)[0], f("_charset_", "utf-7"));
    }

    #[test]
    fn crs_920120_file_part_name_and_filename() {
        let body = include_bytes!("../../testdata/body/crs-920120-2.multipart");
        let ct =
            b"multipart/form-data; boundary=---------------------------627652292512397580456702590";
        let r = go(ct, body);
        assert_eq!(r.error, None);
        assert_eq!(r.files.len(), 1);
        assert_eq!(r.files[0].name, b"fi=le");
        assert_eq!(r.files[0].filename, b"test");
        assert_eq!(r.files[0].size, "email: security@example.com\n".len());
        assert_eq!(fields(&r), vec![f("note", "Contact info.")]);
    }

    #[test]
    fn every_prefix_and_corruption_is_handled_without_panic() {
        let body = crlf(SIMPLE);
        for i in 0..=body.len() {
            let _ = go(CT, &body[..i]);
        }
        for i in 0..body.len() {
            for b in [0u8, b'\n', b'\r', b'-', b'"', b' ', 0xff] {
                let mut m = body.clone();
                m[i] = b;
                let _ = go(CT, &m);
            }
        }
    }
}
