//! The request and response as the rules see them (variables' sources).

use crate::body::pairs::{PairSink, Pairs};
use crate::body::{json, multipart, urlencoded, xml};
use crate::vars::Var;

/// Everything known about the request and response, filled as the host feeds it.
#[derive(Debug, Default)]
pub(crate) struct Request {
    pub client_ip: String,
    pub client_port: u16,
    pub server_ip: String,
    pub server_port: u16,
    pub server_name: Vec<u8>,
    pub method: Vec<u8>,
    /// `REQUEST_URI_RAW`: as received.
    pub uri_raw: Vec<u8>,
    /// `REQUEST_URI`: percent-decoded, scheme and authority removed.
    pub uri: Vec<u8>,
    pub protocol: Vec<u8>,
    pub request_line: Vec<u8>,
    pub query_string: Vec<u8>,
    /// `REQUEST_FILENAME`: percent-decoded path without the query.
    pub filename: Vec<u8>,
    pub basename: Vec<u8>,
    pub headers: Pairs,
    pub cookies: Pairs,
    /// The values of the `Cookie` headers parsed into `cookies`, each after its length (4
    /// bytes): what REQUEST_COOKIES is made of (see `Memo::source_generation`).
    pub cookie_source: Vec<u8>,
    pub args_get: Pairs,
    pub args_post: Pairs,
    pub urlencoded_error: bool,
    /// The query string had an invalid `%` escape (its part of `urlencoded_error`).
    pub query_invalid: bool,
    pub body: Vec<u8>,
    pub body_processed: bool,
    pub inbound_data_error: bool,
    pub reqbody_error: bool,
    pub reqbody_error_msg: Vec<u8>,
    pub reqbody_processor: Vec<u8>,
    pub response_status: u16,
    pub response_protocol: String,
    pub response_headers: Pairs,
    pub response_content_type: String,
    pub response_body: Vec<u8>,
    pub response_body_seen: bool,
    pub outbound_data_error: bool,
    /// Multipart: FILES (field name -> file name), FILES_SIZES, part headers, flags set.
    pub files: Vec<(Vec<u8>, Vec<u8>)>,
    pub files_sizes: Vec<(Vec<u8>, Vec<u8>)>,
    pub files_combined_size: usize,
    pub multipart_part_headers: Vec<(Vec<u8>, Vec<u8>)>,
    pub multipart_flags: Vec<crate::vars::Var>,
    /// MULTIPART_UNMATCHED_BOUNDARY is a number in v3 (2 on ordinary bodies).
    pub multipart_unmatched_boundary: u8,
    pub multipart_name: Vec<u8>,
    pub multipart_filename: Vec<u8>,
    /// XML: `XML:/*` (text content) and `XML://@*` (attribute values).
    pub xml_text: Vec<Vec<u8>>,
    pub xml_attrs: Vec<Vec<u8>>,
    /// Bumped by every change to the request line, the cookies and the addresses (see
    /// `replay`, which compares them with the trace's once per value of this).
    pub line_gen: u32,
}

/// Percent-decodes `%XX` (no `+` to space); invalid escapes are kept.
pub fn percent_decode(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    percent_decode_into(input, &mut out);
    out
}

/// [`percent_decode`] appending to `out`: the runs between `%` signs are copied whole.
fn percent_decode_into(input: &[u8], out: &mut Vec<u8>) {
    let hex = |b: u8| -> Option<u8> {
        match b {
            b'0'..=b'9' => Some(b - b'0'),
            b'a'..=b'f' => Some(b - b'a' + 10),
            b'A'..=b'F' => Some(b - b'A' + 10),
            _ => None,
        }
    };
    let mut rest = input;
    while let Some(p) = rest.iter().position(|&b| b == b'%') {
        let (run, tail) = rest.split_at(p);
        out.extend_from_slice(run);
        match (tail.get(1).and_then(|&c| hex(c)), tail.get(2).and_then(|&c| hex(c))) {
            (Some(h), Some(l)) => {
                out.push(h << 4 | l);
                rest = tail.get(3..).unwrap_or_default();
            }
            _ => {
                out.push(b'%');
                rest = tail.get(1..).unwrap_or_default();
            }
        }
    }
    out.extend_from_slice(rest);
}

/// `buf` becomes a copy of `bytes`, in its own allocation when it is large enough.
fn set_bytes(buf: &mut Vec<u8>, bytes: &[u8]) {
    buf.clear();
    buf.extend_from_slice(bytes);
}

/// Largest buffer a recycled request keeps (a body's buffer can be megabytes).
pub(crate) const RECYCLE_MAX: usize = 64 * 1024;

/// Empties `v`, keeping its allocation unless it is larger than `keep` bytes.
fn clear_kept<T>(v: &mut Vec<T>, keep: usize) {
    if v.capacity().saturating_mul(std::mem::size_of::<T>()) > keep {
        *v = Vec::new();
    } else {
        v.clear();
    }
}

impl Request {
    /// Roughly the bytes the request's buffers hold (their capacities; the small ones and the
    /// multipart and XML lists counted by length).
    pub fn retained_bytes(&self) -> usize {
        let pairs = [&self.headers, &self.cookies, &self.args_get, &self.args_post, &self.response_headers];
        let bufs = [&self.uri_raw, &self.uri, &self.request_line, &self.query_string, &self.filename, &self.basename, &self.cookie_source, &self.body, &self.response_body];
        let lists = [&self.files, &self.files_sizes, &self.multipart_part_headers];
        pairs.iter().map(|p| p.retained_bytes()).sum::<usize>()
            + bufs.iter().map(|b| b.capacity()).sum::<usize>()
            + lists.iter().flat_map(|l| l.iter()).map(|(a, b)| a.len() + b.len()).sum::<usize>()
            + self.xml_text.iter().chain(&self.xml_attrs).map(Vec::len).sum::<usize>()
    }

    /// `parse_args`: split the query string into ARGS_GET (skipped when no rule reads them).
    /// `old`: an earlier request of the same rule set, whose query arguments are taken when
    /// its query string is the same (the parse is a function of the query and `max_args`).
    pub fn set_uri(&mut self, uri: &str, method: &str, protocol: &str, max_args: usize, parse_args: bool, old: Option<&Request>) {
        let raw = uri.as_bytes();
        self.line_gen = self.line_gen.wrapping_add(1);
        set_bytes(&mut self.uri_raw, raw);
        set_bytes(&mut self.method, method.as_bytes());
        set_bytes(&mut self.protocol, protocol.as_bytes());
        let line = &mut self.request_line;
        line.clear();
        line.reserve(method.len() + uri.len() + protocol.len() + 2);
        line.extend_from_slice(method.as_bytes());
        line.push(b' ');
        line.extend_from_slice(raw);
        line.push(b' ');
        line.extend_from_slice(protocol.as_bytes());

        // The same target as the last request's (the trace's): what is derived from it alone
        // is copied, not derived again byte by byte (five passes over the target).
        if let Some(old) = old.filter(|o| o.uri_raw == self.uri_raw) {
            set_bytes(&mut self.query_string, &old.query_string);
            set_bytes(&mut self.uri, &old.uri);
            set_bytes(&mut self.basename, &old.basename);
            set_bytes(&mut self.filename, &old.filename);
        } else {
            self.derive_from_target();
        }
        if parse_args && !self.query_string.is_empty() {
            match old.filter(|o| o.query_string == self.query_string && self.args_get.is_empty()) {
                Some(old) => {
                    self.args_get.copy_from(&old.args_get);
                    self.query_invalid = old.query_invalid;
                }
                None => {
                    let opts = urlencoded::UrlencodedOptions { max_args, ..Default::default() };
                    self.query_invalid = urlencoded::parse_with(&self.query_string, &opts, &mut self.args_get).invalid_encoding;
                }
            }
            self.urlencoded_error |= self.query_invalid;
        }
    }

    /// REQUEST_URI, REQUEST_FILENAME, REQUEST_BASENAME and QUERY_STRING from the raw target.
    fn derive_from_target(&mut self) {
        let raw = self.uri_raw.as_slice();
        // A `#fragment` stays only in REQUEST_URI_RAW and REQUEST_LINE (ModSecurity 3.0.13+).
        let raw = match raw.iter().position(|&b| b == b'#') {
            Some(f) => raw.get(..f).unwrap_or(raw),
            None => raw,
        };
        self.query_string.clear();
        if let Some(q) = raw.iter().position(|&b| b == b'?') {
            self.query_string.extend_from_slice(raw.get(q + 1..).unwrap_or_default());
        }
        // REQUEST_URI: the whole target decoded; REQUEST_FILENAME: its part before a `?`.
        let decoded = &mut self.uri;
        decoded.clear();
        percent_decode_into(raw, decoded);
        let path = match decoded.iter().position(|&b| b == b'?') {
            Some(q) => decoded.get(..q).unwrap_or_default(),
            None => decoded,
        };
        let base = match path.iter().rposition(|&b| b == b'/' || b == b'\\') {
            Some(p) => path.get(p + 1..).unwrap_or_default(),
            None => b"",
        };
        set_bytes(&mut self.basename, base);
        set_bytes(&mut self.filename, path);
        // REQUEST_URI drops `scheme://authority` from absolute-form targets.
        if decoded.first().is_some_and(|&b| b != b'/') {
            if let Some(colon) = decoded.iter().position(|&b| b == b':') {
                if decoded.get(colon + 1..colon + 3) == Some(b"//") {
                    if let Some(slash) = decoded.iter().skip(colon + 3).position(|&b| b == b'/') {
                        decoded.drain(..colon + 3 + slash);
                    }
                }
            }
        }
    }

    /// Empties everything for the next transaction, keeping the buffers' allocations (up to
    /// `keep` bytes each, at most [`RECYCLE_MAX`]): a recycled request's URI, headers and
    /// arguments need no allocation. Every field is named, so a new one cannot be forgotten here.
    pub fn recycle(&mut self, keep: usize) {
        let keep = keep.min(RECYCLE_MAX);
        let Request {
            client_ip,
            client_port,
            server_ip,
            server_port,
            server_name,
            method,
            uri_raw,
            uri,
            protocol,
            request_line,
            query_string,
            filename,
            basename,
            headers,
            cookies,
            cookie_source,
            args_get,
            args_post,
            urlencoded_error,
            query_invalid,
            body,
            body_processed,
            inbound_data_error,
            reqbody_error,
            reqbody_error_msg,
            reqbody_processor,
            response_status,
            response_protocol,
            response_headers,
            response_content_type,
            response_body,
            response_body_seen,
            outbound_data_error,
            files,
            files_sizes,
            files_combined_size,
            multipart_part_headers,
            multipart_flags,
            multipart_unmatched_boundary,
            multipart_name,
            multipart_filename,
            xml_text,
            xml_attrs,
            line_gen,
        } = self;
        client_ip.clear();
        server_ip.clear();
        response_protocol.clear();
        response_content_type.clear();
        (*client_port, *server_port, *response_status, *files_combined_size, *multipart_unmatched_boundary) = (0, 0, 0, 0, 0);
        *line_gen = 0;
        for flag in [urlencoded_error, query_invalid, body_processed, inbound_data_error, reqbody_error, response_body_seen, outbound_data_error] {
            *flag = false;
        }
        let buffers = [server_name, method, uri_raw, uri, protocol, request_line, query_string, filename, basename, body, cookie_source];
        for buf in buffers.into_iter().chain([reqbody_error_msg, reqbody_processor, response_body, multipart_name, multipart_filename]) {
            clear_kept(buf, keep);
        }
        for pairs in [headers, cookies, args_get, args_post, response_headers] {
            pairs.clear();
        }
        for list in [files, files_sizes, multipart_part_headers] {
            *list = Vec::new();
        }
        *multipart_flags = Vec::new();
        *xml_text = Vec::new();
        *xml_attrs = Vec::new();
    }

    #[cfg(test)]
    pub fn add_request_header(&mut self, name: &[u8], value: &[u8]) {
        self.add_request_header_limited(name, value, true, usize::MAX, None);
    }

    /// Adds a request header; `parse_cookies`: split `Cookie` into REQUEST_COOKIES (skipped
    /// when no rule reads them), keeping at most `max_cookies` cookies in all.
    /// `old`: an earlier request of the same rule set (the same limit), whose cookies are
    /// taken when its only `Cookie` header was this one and this is the first.
    pub fn add_request_header_limited(&mut self, name: &[u8], value: &[u8], parse_cookies: bool, max_cookies: usize, old: Option<&Request>) {
        self.header_added(name, value, parse_cookies, max_cookies, old);
        self.headers.push_pair(name, value);
    }

    /// Adds the request headers serialized in `block` (see [`crate::body::pairs::block_spans`])
    /// whose names do not start with `:` (pseudo-headers), as
    /// [`Request::add_request_header_limited`] adds one. The block is kept as it is: the
    /// names and values are not copied.
    pub fn add_request_header_block(&mut self, block: Vec<u8>, parse_cookies: bool, max_cookies: usize, old: Option<&Request>) {
        self.add_block(|r| &mut r.headers, block, |r, name, value| r.header_added(name, value, parse_cookies, max_cookies, old));
    }

    /// Pushes a header block's pairs other than pseudo-headers into the pairs `field` picks,
    /// then calls `added` with each new one (the pairs are out of the request meanwhile, so
    /// `added` may change the rest of it).
    fn add_block(&mut self, field: fn(&mut Request) -> &mut Pairs, block: Vec<u8>, mut added: impl FnMut(&mut Request, &[u8], &[u8])) {
        let mut pairs = std::mem::take(field(self));
        let first = pairs.len();
        pairs.push_block(block, |name| !name.starts_with(b":"));
        for i in first..pairs.len() {
            if let Some((name, value)) = pairs.get(i) {
                added(self, name, value);
            }
        }
        *field(self) = pairs;
    }

    /// What a request header means besides itself: its cookies, the server name.
    fn header_added(&mut self, name: &[u8], value: &[u8], parse_cookies: bool, max_cookies: usize, old: Option<&Request>) {
        if parse_cookies && name.eq_ignore_ascii_case(b"cookie") {
            match old.filter(|o| self.cookie_source.is_empty() && only_cookie_header(&o.cookie_source, value)) {
                Some(o) => {
                    self.line_gen = self.line_gen.wrapping_add(1);
                    self.cookie_source.extend_from_slice(&o.cookie_source);
                    self.cookies.copy_from(&o.cookies);
                }
                None => self.add_cookies(value, max_cookies),
            }
        } else if name.eq_ignore_ascii_case(b"host") {
            let host = value.split(|&b| b == b':').next().unwrap_or_default();
            set_bytes(&mut self.server_name, host);
        }
    }

    /// ModSecurity v3 cookie parsing: split on `;`, key = up to the first `=`
    /// (left-trimmed), empty keys skipped, values kept raw.
    fn add_cookies(&mut self, value: &[u8], max_cookies: usize) {
        self.line_gen = self.line_gen.wrapping_add(1);
        self.cookie_source.extend_from_slice(&cookie_len(value));
        self.cookie_source.extend_from_slice(value);
        let mut value = value;
        while let Some((last, rest)) = value.split_last() {
            if last.is_ascii_whitespace() {
                value = rest;
            } else {
                break;
            }
        }
        for c in value.split(|&b| b == b';') {
            if self.cookies.len() >= max_cookies {
                break;
            }
            if c.is_empty() {
                continue;
            }
            let (k, v) = match c.iter().position(|&b| b == b'=') {
                Some(p) => (c.get(..p).unwrap_or_default(), c.get(p + 1..).unwrap_or_default()),
                None => (c, &b""[..]),
            };
            let start = k.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(k.len());
            let k = k.get(start..).unwrap_or_default();
            if k.is_empty() {
                continue;
            }
            self.cookies.push_pair(k, v);
        }
    }

    pub fn add_response_header(&mut self, name: &[u8], value: &[u8]) {
        self.response_header_added(name, value);
        self.response_headers.push_pair(name, value);
    }

    /// Adds the response headers serialized in `block` as
    /// [`Request::add_request_header_block`] adds the request's.
    pub fn add_response_header_block(&mut self, block: Vec<u8>) {
        self.add_block(|r| &mut r.response_headers, block, Request::response_header_added);
    }

    /// What a response header means besides itself: the content type (in the buffer kept
    /// from the last request).
    fn response_header_added(&mut self, name: &[u8], value: &[u8]) {
        if name.eq_ignore_ascii_case(b"content-type") {
            let ct = value.split(|&b| b == b';').next().unwrap_or_default();
            self.response_content_type.clear();
            self.response_content_type.push_str(String::from_utf8_lossy(ct).trim());
            self.response_content_type.make_ascii_lowercase();
        }
    }

    /// `FULL_REQUEST`: request line, headers, blank line, body.
    pub fn full_request(&self) -> Vec<u8> {
        let mut out = self.request_line.clone();
        out.push(b'\n');
        for (k, v) in self.headers.iter() {
            out.extend_from_slice(k);
            out.extend_from_slice(b": ");
            out.extend_from_slice(v);
            out.push(b'\n');
        }
        out.push(b'\n');
        out.extend_from_slice(&self.body);
        out
    }

    fn header(&self, name: &[u8]) -> Option<&[u8]> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v)
    }

    /// The body length the `Content-Length` header announces, if it is a number.
    pub(crate) fn content_length(&self) -> Option<usize> {
        std::str::from_utf8(self.header(b"content-length")?).ok()?.trim().parse().ok()
    }

    /// The processor chosen from Content-Type when no `ctl:requestBodyProcessor`
    /// chose one: URLENCODED, MULTIPART (as ModSecurity) and JSON (wafer also
    /// parses JSON bodies without a ctl rule, so `ARGS` covers them).
    pub fn default_body_processor(&self) -> Option<&'static str> {
        let ct = self.header(b"content-type")?;
        if ct.is_ascii() {
            // Every real Content-Type: its bytes, trimmed as `str::trim` trims ASCII text, no copy.
            let ct = trim_space(ct);
            return body_processor_of(ct, trim_space(ct.split(|&b| b == b';').next().unwrap_or_default()));
        }
        let ct = String::from_utf8_lossy(ct).trim().to_ascii_lowercase();
        body_processor_of(ct.as_bytes(), ct.split(';').next().unwrap_or("").trim().as_bytes())
    }

    /// The body processor in force: `ctl`'s (a `ctl:requestBodyProcessor`), else the one the
    /// Content-Type selects.
    pub fn body_processor<'a>(&self, ctl: Option<&'a str>) -> Option<&'a str> {
        ctl.or_else(|| self.default_body_processor())
    }

    /// Takes what `old` (an earlier request of the same rule set) made of the same JSON body
    /// instead of parsing it again: the parse is a function of the body's bytes, the depth
    /// and argument limits (the rule set's) and the room the query's arguments left. False,
    /// and nothing changed, when that does not hold.
    pub fn reuse_json(&mut self, old: &Request) -> bool {
        let same = !self.body_processed
            && old.body_processed
            && old.reqbody_processor == b"JSON"
            && self.args_post.is_empty()
            && old.args_get.len() == self.args_get.len()
            && old.body == self.body;
        if same {
            self.body_processed = true;
            set_bytes(&mut self.reqbody_processor, b"JSON");
            self.args_post.copy_from(&old.args_post);
            self.reqbody_error = old.reqbody_error;
            set_bytes(&mut self.reqbody_error_msg, &old.reqbody_error_msg);
        }
        same
    }

    /// Parses the body with `processor` into the body variables, a JSON body's names and
    /// values capped at `max_output` bytes (the room the memory budget leaves). True when
    /// that cap stopped the parse.
    ///
    /// `no_files_limit` is `SecRequestBodyNoFilesLimit` (0: none), with ModSecurity v3's
    /// semantics (checked against libmodsecurity 3.0.15): a URLENCODED, JSON or XML body
    /// longer than it is not parsed, a MULTIPART body whose part headers and non-file data
    /// are longer is parsed; both set REQBODY_ERROR (with ModSecurity's message) and
    /// INBOUND_DATA_ERROR. A body without a processor is not measured.
    pub fn parse_body(&mut self, processor: Option<&str>, json_depth: usize, max_args: usize, max_output: usize, no_files_limit: usize) -> bool {
        if self.body_processed {
            return false;
        }
        self.body_processed = true;
        self.reqbody_processor = processor.unwrap_or("").as_bytes().to_vec();
        let over_no_files = |len: usize| no_files_limit > 0 && len > no_files_limit;
        if matches!(processor, Some("URLENCODED" | "JSON" | "XML")) && over_no_files(self.body.len()) {
            self.set_no_files_error();
            return false;
        }
        let room = max_args.saturating_sub(self.args_get.len());
        match processor {
            Some("URLENCODED") => {
                let opts = urlencoded::UrlencodedOptions { max_args: room, ..Default::default() };
                let report = urlencoded::parse_with(&self.body, &opts, &mut self.args_post);
                self.urlencoded_error |= report.invalid_encoding;
            }
            Some("JSON") => {
                // One more than the room: an argument over SecArgumentsLimit aborts the
                // parse with REQBODY_ERROR, as in ModSecurity.
                let limits = json::JsonLimits { max_depth: json_depth, max_args: room.saturating_add(1), max_output };
                let before = self.args_post.len();
                let result = json::parse(&self.body, &limits, &mut self.args_post);
                if self.args_post.len() - before > room {
                    self.args_post.truncate(before + room);
                    self.reqbody_error = true;
                    self.reqbody_error_msg = b"JSON parsing error: parse error: client cancelled parse via callback return value".to_vec();
                } else if let Err(e) = result {
                    if e.msg == json::OVER_BUDGET {
                        return true;
                    }
                    if !self.body.is_empty() {
                        self.reqbody_error = true;
                        self.reqbody_error_msg = e.msg.into_bytes();
                    }
                }
            }
            Some("MULTIPART") => {
                let ct = self.header(b"content-type").unwrap_or_default().to_vec();
                let opts = multipart::MultipartOptions { max_files: usize::MAX, keep_file_content: false, max_parts: max_args };
                let m = multipart::parse(&ct, &self.body, &opts);
                for (k, v) in m.fields.iter().take(room) {
                    self.args_post.push_pair(k, v);
                }
                for f in &m.files {
                    self.files.push((f.name.clone(), f.filename.clone()));
                    self.files_sizes.push((f.name.clone(), f.size.to_string().into_bytes()));
                }
                self.files_combined_size = m.files_combined_size();
                self.multipart_part_headers = m.part_headers.clone();
                self.multipart_name = m.names.last().cloned().unwrap_or_default();
                self.multipart_filename = m.filenames.last().cloned().unwrap_or_default();
                let f = &m.flags;
                let flags = [
                    (f.strict_error(), Var::MultipartStrictError),
                    (f.boundary_quoted, Var::MultipartBoundaryQuoted),
                    (f.boundary_whitespace, Var::MultipartBoundaryWhitespace),
                    (f.data_before, Var::MultipartDataBefore),
                    (f.data_after, Var::MultipartDataAfter),
                    (f.header_folding, Var::MultipartHeaderFolding),
                    (f.lf_line, Var::MultipartLfLine),
                    (f.crlf_lf_lines(), Var::MultipartCrlfLfLines),
                    (f.missing_semicolon, Var::MultipartMissingSemicolon),
                    (f.invalid_quoting, Var::MultipartInvalidQuoting),
                    (f.invalid_part, Var::MultipartInvalidPart),
                    (f.invalid_header_folding, Var::MultipartInvalidHeaderFolding),
                    (f.file_limit_exceeded, Var::MultipartFileLimitExceeded),
                ];
                self.multipart_unmatched_boundary = f.unmatched_boundary;
                self.multipart_flags = flags.iter().filter(|(on, _)| *on).map(|(_, v)| *v).collect();
                if let Some(e) = m.error {
                    self.reqbody_error = true;
                    self.reqbody_error_msg = e.into_bytes();
                } else if over_no_files(m.no_files_length) {
                    self.set_no_files_error();
                }
            }
            Some("XML") => {
                let limits = xml::XmlLimits { max_attrs: max_args, ..Default::default() };
                let x = xml::parse(&self.body, &limits);
                if let Some(t) = x.root_text() {
                    self.xml_text.push(t.to_vec());
                }
                self.xml_attrs = x.attr_values;
                if let Some(e) = x.error {
                    self.reqbody_error = true;
                    self.reqbody_error_msg = e.into_bytes();
                }
            }
            _ => {}
        }
        false
    }
}

/// REQBODY_ERROR_MSG of a body over `SecRequestBodyNoFilesLimit` (ModSecurity v3's text).
pub const NO_FILES_LIMIT_MSG: &[u8] = b"Request body excluding files is bigger than the maximum expected.";

impl Request {
    /// The body is over `SecRequestBodyNoFilesLimit`: REQBODY_ERROR and INBOUND_DATA_ERROR.
    fn set_no_files_error(&mut self) {
        self.reqbody_error = true;
        self.inbound_data_error = true;
        set_bytes(&mut self.reqbody_error_msg, NO_FILES_LIMIT_MSG);
    }
}

/// How `cookie_source` records the length of a `Cookie` header's value.
fn cookie_len(value: &[u8]) -> [u8; 4] {
    u32::try_from(value.len()).unwrap_or(u32::MAX).to_le_bytes()
}

/// Whether `source` (a request's `cookie_source`) is `value` as its only `Cookie` header.
fn only_cookie_header(source: &[u8], value: &[u8]) -> bool {
    source.len() == value.len() + 4 && source.get(..4) == Some(&cookie_len(value)[..]) && source.get(4..) == Some(value)
}

/// `v` without the ASCII characters `str::trim` removes (`\t`, `\n`, `\x0B`, `\x0C`, `\r`, space)
/// at either end.
fn trim_space(v: &[u8]) -> &[u8] {
    let space = |b: &u8| matches!(b, b'\t'..=b'\r' | b' ');
    let start = v.iter().position(|b| !space(b)).unwrap_or(v.len());
    let end = v.iter().rposition(|b| !space(b)).map_or(start, |i| i + 1);
    v.get(start..end).unwrap_or_default()
}

/// The body processor a trimmed Content-Type `ct` (whose part before any `;`, trimmed, is
/// `mime`) selects, in any case: urlencoded and multipart forms by prefix, JSON by type.
fn body_processor_of(ct: &[u8], mime: &[u8]) -> Option<&'static str> {
    let starts = |p: &[u8]| ct.get(..p.len()).is_some_and(|h| h.eq_ignore_ascii_case(p));
    if starts(b"application/x-www-form-urlencoded") {
        Some("URLENCODED")
    } else if starts(b"multipart/form-data") {
        Some("MULTIPART")
    } else {
        let json_suffix = mime.len().checked_sub(5).and_then(|i| mime.get(i..)).is_some_and(|t| t.eq_ignore_ascii_case(b"+json"));
        (mime.eq_ignore_ascii_case(b"application/json") || json_suffix).then_some("JSON")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The body processor a Content-Type selects, as the text path (lossy UTF-8, `str::trim`,
    /// lowercase) decides it: the bytes path for ASCII values must agree with it.
    #[test]
    fn the_content_type_selects_the_body_processor() {
        let text = |ct: &[u8]| {
            let ct = String::from_utf8_lossy(ct).trim().to_ascii_lowercase();
            let mime = ct.split(';').next().unwrap_or("").trim().to_string();
            if ct.starts_with("application/x-www-form-urlencoded") {
                Some("URLENCODED")
            } else if ct.starts_with("multipart/form-data") {
                Some("MULTIPART")
            } else {
                (mime == "application/json" || mime.ends_with("+json")).then_some("JSON")
            }
        };
        let cases: [(&[u8], Option<&str>); 16] = [
            (b"application/json", Some("JSON")),
            (b" Application/JSON ; charset=utf-8", Some("JSON")),
            (b"\x0b\tapplication/vnd.api+JSON\r\n", Some("JSON")),
            (b"application/json5", None),
            (b"+json", Some("JSON")),
            (b"json", None),
            (b"", None),
            (b"application/x-www-form-urlencoded; charset=UTF-8", Some("URLENCODED")),
            (b"APPLICATION/X-WWW-FORM-URLENCODEDX", Some("URLENCODED")),
            (b"multipart/form-data; boundary=x", Some("MULTIPART")),
            (b" \x0cMultipart/Form-Data", Some("MULTIPART")),
            (b"text/xml", None),
            (b"\xc2\xa0application/json", Some("JSON")),
            (b"application/json\xc2\xa0;x", Some("JSON")),
            (b"application/\xffjson", None),
            (b"\x1capplication/json", None),
        ];
        for (ct, want) in cases {
            let mut r = Request::default();
            r.add_request_header(b"Content-Type", ct);
            assert_eq!(r.default_body_processor(), want, "{ct:?}");
            assert_eq!(text(ct), want, "{ct:?}");
        }
        assert_eq!(Request::default().default_body_processor(), None);
    }

    #[test]
    fn uri_variables_follow_modsecurity() {
        let mut r = Request::default();
        r.set_uri("/a%20b/c.php?x=1%27&y", "GET", "HTTP/1.1", 100, true, None);
        assert_eq!(r.uri, b"/a b/c.php?x=1'&y");
        assert_eq!(r.filename, b"/a b/c.php");
        assert_eq!(r.basename, b"c.php");
        assert_eq!(r.query_string, b"x=1%27&y");
        assert_eq!(r.request_line, b"GET /a%20b/c.php?x=1%27&y HTTP/1.1");
        assert_eq!(r.args_get.to_vec(), vec![(b"x".to_vec(), b"1'".to_vec()), (b"y".to_vec(), Vec::new())]);
        let mut r = Request::default();
        r.set_uri("http://example.com/p?q", "GET", "HTTP/1.1", 100, true, None);
        assert_eq!(r.uri, b"/p?q");
    }

    #[test]
    fn an_earlier_request_of_the_same_target_gives_the_same_uri_variables() {
        let fields = |r: &Request| (r.uri.clone(), r.filename.clone(), r.basename.clone(), r.query_string.clone(), r.request_line.clone());
        for target in ["/a%20b/c.php?x=1%27&y#frag", "http://example.com/p/q%2fr?z", "/plain"] {
            let mut old = Request::default();
            old.set_uri(target, "GET", "HTTP/1.1", 100, true, None);
            // A recycled request with another target's leftovers, following `old`.
            let mut r = Request::default();
            r.set_uri("/other/x.html?long=query&more=1", "GET", "HTTP/1.1", 100, true, None);
            r.recycle(RECYCLE_MAX);
            r.set_uri(target, "POST", "HTTP/2", 100, true, Some(&old));
            let mut fresh = Request::default();
            fresh.set_uri(target, "POST", "HTTP/2", 100, true, None);
            assert_eq!(fields(&r), fields(&fresh), "{target}");
        }
        // Another target is derived, not copied.
        let mut old = Request::default();
        old.set_uri("/a/b.php?q", "GET", "HTTP/1.1", 100, true, None);
        let mut r = Request::default();
        r.set_uri("/c/d.php", "GET", "HTTP/1.1", 100, true, Some(&old));
        assert_eq!((r.filename.as_slice(), r.basename.as_slice(), r.query_string.as_slice()), (&b"/c/d.php"[..], &b"d.php"[..], &b""[..]));
    }

    #[test]
    fn an_earlier_requests_cookies_of_the_same_header_are_taken() {
        let mut old = Request::default();
        old.add_request_header_limited(b"Cookie", b" a=1; b ; =x; c=3=4 ", true, 2, None);
        let parsed = old.cookies.to_vec();
        assert_eq!(parsed.len(), 2);
        // The same single header: the same cookies (the limit included) and source.
        let mut r = Request::default();
        r.add_request_header_limited(b"cookie", b" a=1; b ; =x; c=3=4 ", true, 2, Some(&old));
        assert_eq!((r.cookies.to_vec(), &r.cookie_source), (parsed.clone(), &old.cookie_source));
        // A second header is parsed after the copy, as it would be after a parse.
        r.add_request_header_limited(b"Cookie", b"d=5", true, 3, Some(&old));
        let mut fresh = Request::default();
        fresh.add_request_header_limited(b"cookie", b" a=1; b ; =x; c=3=4 ", true, 2, None);
        fresh.add_request_header_limited(b"Cookie", b"d=5", true, 3, None);
        assert_eq!((r.cookies.to_vec(), &r.cookie_source), (fresh.cookies.to_vec(), &fresh.cookie_source));
        // Another value, or a trace with two headers, is parsed.
        let mut r = Request::default();
        r.add_request_header_limited(b"Cookie", b"a=2", true, 2, Some(&old));
        assert_eq!(r.cookies.to_vec(), vec![(b"a".to_vec(), b"2".to_vec())]);
        let mut r = Request::default();
        r.add_request_header_limited(b"Cookie", b"a=1; b ", true, 2, Some(&fresh));
        assert_eq!(r.cookies.to_vec(), vec![(b"a".to_vec(), b"1".to_vec()), (b"b".to_vec(), Vec::new())]);
    }

    /// Headers given as one serialized block mean what the same headers added one by one
    /// mean: the headers (pseudo-headers left out), the cookies, the server name.
    #[test]
    fn a_block_of_headers_is_the_headers_added_one_by_one() {
        let pairs: &[(&[u8], &[u8])] = &[(b":authority", b"ex.com"), (b"host", b"h.example:8080"), (b"cookie", b"a=1; b=2"), (b":path", b"/"), (b"x-y", b"\xff"), (b"Cookie", b"c=3")];
        let block = crate::body::pairs::block_of(pairs);
        for old in [None, Some(Request::default())] {
            let (mut one, mut all) = (Request::default(), Request::default());
            for (n, v) in pairs.iter().filter(|(n, _)| !n.starts_with(b":")) {
                one.add_request_header_limited(n, v, true, 2, old.as_ref());
            }
            all.add_request_header_limited(b"Host", b"first", true, 2, None);
            all.headers.clear();
            all.server_name.clear();
            all.add_request_header_block(block.clone(), true, 2, old.as_ref());
            assert_eq!(all.headers.to_vec(), one.headers.to_vec());
            assert_eq!((all.cookies.to_vec(), &all.cookie_source, &all.server_name), (one.cookies.to_vec(), &one.cookie_source, &one.server_name));
            assert_eq!(all.server_name, b"h.example");
            assert_eq!(all.cookies.len(), 2);
        }
        // The response's: the headers and the content type, which replaces the last one's.
        let pairs: &[(&[u8], &[u8])] = &[(b":status", b"200"), (b"content-type", b" Text/HTML; charset=utf-8"), (b"x-a", b"1")];
        let block = crate::body::pairs::block_of(pairs);
        let mut r = Request::default();
        r.add_response_header(b"content-type", b"application/json");
        r.response_headers.clear();
        r.add_response_header_block(block);
        assert_eq!(r.response_headers.to_vec(), vec![(b"content-type".to_vec(), b" Text/HTML; charset=utf-8".to_vec()), (b"x-a".to_vec(), b"1".to_vec())]);
        assert_eq!(r.response_content_type, "text/html");
    }

    #[test]
    fn an_earlier_requests_arguments_of_the_same_query_are_taken() {
        let mut old = Request::default();
        old.set_uri("/a?x=%zz&y=1+2", "GET", "HTTP/1.1", 100, true, None);
        assert!(old.urlencoded_error);
        // The same query: its arguments and its invalid escape, as a parse would give.
        let mut r = Request::default();
        r.set_uri("/b?x=%zz&y=1+2", "POST", "HTTP/1.1", 100, true, Some(&old));
        assert_eq!(r.args_get.to_vec(), old.args_get.to_vec());
        assert!(r.urlencoded_error && r.query_invalid);
        // Another query is parsed.
        let mut r = Request::default();
        r.set_uri("/a?x=1", "GET", "HTTP/1.1", 100, true, Some(&old));
        assert_eq!(r.args_get.to_vec(), vec![(b"x".to_vec(), b"1".to_vec())]);
        assert!(!r.urlencoded_error && !r.query_invalid);
        // A recycled request starts clean.
        old.recycle(RECYCLE_MAX);
        assert!(!old.urlencoded_error && !old.query_invalid && old.args_get.is_empty());
    }

    #[test]
    fn fragment_is_only_in_the_raw_uri() {
        let mut r = Request::default();
        r.set_uri("/get/a.html?I=Like&Apples=Today#tag", "GET", "HTTP/1.1", 100, true, None);
        assert_eq!(r.filename, b"/get/a.html");
        assert_eq!(r.query_string, b"I=Like&Apples=Today");
        assert_eq!(r.args_get.to_vec().last(), Some(&(b"Apples".to_vec(), b"Today".to_vec())));
        assert_eq!(r.uri_raw, b"/get/a.html?I=Like&Apples=Today#tag");
        assert!(r.request_line.ends_with(b"#tag HTTP/1.1"));
    }

    #[test]
    fn json_over_the_argument_limit_is_a_body_error() {
        let mut r = Request::default();
        r.add_request_header(b"Content-Type", b"application/json");
        r.body = br#"{"a":1,"b":2,"c":3}"#.to_vec();
        r.parse_body(Some("JSON"), 512, 2, usize::MAX, 0);
        assert!(r.reqbody_error);
        assert_eq!(r.args_post.len(), 2);
        let mut r = Request::default();
        r.body = br#"{"a":1,"b":2}"#.to_vec();
        r.parse_body(Some("JSON"), 512, 2, usize::MAX, 0);
        assert!(!r.reqbody_error);
    }

    /// Found by the pathological-input check (tests/src/bin/pathological.rs): 25,000 tiny
    /// cookies took the full CRS 4 s; cookies are now bounded like arguments.
    #[test]
    fn cookies_stop_at_the_limit() {
        let mut r = Request::default();
        r.add_request_header_limited(b"Cookie", b"a=1; b=2", true, 3, None);
        r.add_request_header_limited(b"Cookie", b"c=3; d=4; e=5", true, 3, None);
        assert_eq!(r.cookies.len(), 3);
        assert_eq!(r.cookies.to_vec().last(), Some(&(b"c".to_vec(), b"3".to_vec())));
    }

    #[test]
    fn cookies_follow_modsecurity() {
        let mut r = Request::default();
        r.add_request_header(b"Cookie", b"a=1; b=x=y;;  =z; c ");
        assert_eq!(r.cookies.to_vec(), vec![(b"a".to_vec(), b"1".to_vec()), (b"b".to_vec(), b"x=y".to_vec()), (b"c".to_vec(), Vec::new())]);
    }
}
