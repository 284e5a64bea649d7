//! Variables: the closed set of SecLang variable names and how a compiled
//! target selects values from a collection.

use regex::bytes::Regex;

/// A key-selector regex (`TX:/^header_name_/`), case-insensitive. An anchored plain prefix
/// (the CRS's only kind) is matched without running the regex.
#[derive(Debug, Clone)]
pub struct KeyRegex {
    re: Regex,
    /// Lowercase prefix when the pattern is `^` and letters, digits, `_` or `-` only.
    prefix: Option<Vec<u8>>,
}

impl KeyRegex {
    pub fn new(pattern: &str) -> Result<KeyRegex, regex::Error> {
        let re = regex::bytes::RegexBuilder::new(pattern).case_insensitive(true).unicode(false).build()?;
        let prefix = pattern
            .strip_prefix('^')
            .filter(|rest| rest.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'))
            .map(|rest| rest.to_ascii_lowercase().into_bytes());
        Ok(KeyRegex { re, prefix })
    }

    pub fn is_match(&self, key: &[u8]) -> bool {
        match &self.prefix {
            Some(p) => key.get(..p.len()).is_some_and(|k| k.eq_ignore_ascii_case(p)),
            None => self.re.is_match(key),
        }
    }

    pub fn as_str(&self) -> &str {
        self.re.as_str()
    }
}

macro_rules! vars {
    ($( $v:ident = $name:literal, $coll:literal; )*) => {
        /// A SecLang variable.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Var { $($v),* }

        impl Var {
            /// Looks up a variable by name (case-insensitive).
            pub fn from_name(name: &str) -> Option<Var> {
                let up = name.to_ascii_uppercase();
                match up.as_str() {
                    $($name => Some(Var::$v),)*
                    _ => None,
                }
            }
            /// The canonical name, as used in MATCHED_VAR_NAME and logs.
            pub fn name(self) -> &'static str {
                match self { $(Var::$v => $name),* }
            }
            /// Whether the variable is a collection (takes `:key` selectors).
            pub fn is_collection(self) -> bool {
                match self { $(Var::$v => $coll),* }
            }
        }
    };
}

vars! {
    Args = "ARGS", true;
    ArgsGet = "ARGS_GET", true;
    ArgsPost = "ARGS_POST", true;
    ArgsNames = "ARGS_NAMES", true;
    ArgsGetNames = "ARGS_GET_NAMES", true;
    ArgsPostNames = "ARGS_POST_NAMES", true;
    ArgsCombinedSize = "ARGS_COMBINED_SIZE", false;
    RequestUri = "REQUEST_URI", false;
    RequestUriRaw = "REQUEST_URI_RAW", false;
    RequestFilename = "REQUEST_FILENAME", false;
    RequestBasename = "REQUEST_BASENAME", false;
    RequestMethod = "REQUEST_METHOD", false;
    RequestProtocol = "REQUEST_PROTOCOL", false;
    RequestLine = "REQUEST_LINE", false;
    QueryString = "QUERY_STRING", false;
    RequestHeaders = "REQUEST_HEADERS", true;
    RequestHeadersNames = "REQUEST_HEADERS_NAMES", true;
    RequestCookies = "REQUEST_COOKIES", true;
    RequestCookiesNames = "REQUEST_COOKIES_NAMES", true;
    RequestBody = "REQUEST_BODY", false;
    RequestBodyLength = "REQUEST_BODY_LENGTH", false;
    ReqbodyError = "REQBODY_ERROR", false;
    ReqbodyErrorMsg = "REQBODY_ERROR_MSG", false;
    ReqbodyProcessor = "REQBODY_PROCESSOR", false;
    RemoteAddr = "REMOTE_ADDR", false;
    RemotePort = "REMOTE_PORT", false;
    ServerAddr = "SERVER_ADDR", false;
    ServerPort = "SERVER_PORT", false;
    ServerName = "SERVER_NAME", false;
    UniqueId = "UNIQUE_ID", false;
    Tx = "TX", true;
    Env = "ENV", true;
    MatchedVar = "MATCHED_VAR", false;
    MatchedVarName = "MATCHED_VAR_NAME", false;
    MatchedVars = "MATCHED_VARS", true;
    MatchedVarsNames = "MATCHED_VARS_NAMES", true;
    ResponseStatus = "RESPONSE_STATUS", false;
    ResponseProtocol = "RESPONSE_PROTOCOL", false;
    ResponseHeaders = "RESPONSE_HEADERS", true;
    ResponseHeadersNames = "RESPONSE_HEADERS_NAMES", true;
    ResponseContentType = "RESPONSE_CONTENT_TYPE", false;
    ResponseContentLength = "RESPONSE_CONTENT_LENGTH", false;
    ResponseBody = "RESPONSE_BODY", false;
    Duration = "DURATION", false;
    WebserverErrorLog = "WEBSERVER_ERROR_LOG", true;
    Xml = "XML", true;
    Files = "FILES", true;
    FilesNames = "FILES_NAMES", true;
    FilesSizes = "FILES_SIZES", true;
    FilesCombinedSize = "FILES_COMBINED_SIZE", false;
    FilesTmpNames = "FILES_TMPNAMES", true;
    FilesTmpContent = "FILES_TMP_CONTENT", true;
    MultipartPartHeaders = "MULTIPART_PART_HEADERS", true;
    MultipartFilename = "MULTIPART_FILENAME", false;
    MultipartName = "MULTIPART_NAME", false;
    MultipartBoundaryQuoted = "MULTIPART_BOUNDARY_QUOTED", false;
    MultipartBoundaryWhitespace = "MULTIPART_BOUNDARY_WHITESPACE", false;
    MultipartCrlfLfLines = "MULTIPART_CRLF_LF_LINES", false;
    MultipartDataAfter = "MULTIPART_DATA_AFTER", false;
    MultipartDataBefore = "MULTIPART_DATA_BEFORE", false;
    MultipartFileLimitExceeded = "MULTIPART_FILE_LIMIT_EXCEEDED", false;
    MultipartHeaderFolding = "MULTIPART_HEADER_FOLDING", false;
    MultipartInvalidHeaderFolding = "MULTIPART_INVALID_HEADER_FOLDING", false;
    MultipartInvalidPart = "MULTIPART_INVALID_PART", false;
    MultipartInvalidQuoting = "MULTIPART_INVALID_QUOTING", false;
    MultipartLfLine = "MULTIPART_LF_LINE", false;
    MultipartMissingSemicolon = "MULTIPART_MISSING_SEMICOLON", false;
    MultipartSemicolonMissing = "MULTIPART_SEMICOLON_MISSING", false;
    MultipartStrictError = "MULTIPART_STRICT_ERROR", false;
    MultipartUnmatchedBoundary = "MULTIPART_UNMATCHED_BOUNDARY", false;
    ReqbodyProcessorError = "REQBODY_PROCESSOR_ERROR", false;
    ReqbodyProcessorErrorMsg = "REQBODY_PROCESSOR_ERROR_MSG", false;
    UrlencodedError = "URLENCODED_ERROR", false;
    InboundDataError = "INBOUND_DATA_ERROR", false;
    OutboundDataError = "OUTBOUND_DATA_ERROR", false;
    FullRequest = "FULL_REQUEST", false;
    FullRequestLength = "FULL_REQUEST_LENGTH", false;
    StatusLine = "STATUS_LINE", false;
    AuthType = "AUTH_TYPE", false;
    PathInfo = "PATH_INFO", false;
    RemoteHost = "REMOTE_HOST", false;
    RemoteUser = "REMOTE_USER", false;
    Userid = "USERID", false;
    Sessionid = "SESSIONID", false;
    HighestSeverity = "HIGHEST_SEVERITY", false;
    Rule = "RULE", true;
    Session = "SESSION", true;
    Ip = "IP", true;
    Global = "GLOBAL", true;
    User = "USER", true;
    Resource = "RESOURCE", true;
    Geo = "GEO", true;
    Time = "TIME", false;
    TimeDay = "TIME_DAY", false;
    TimeEpoch = "TIME_EPOCH", false;
    TimeHour = "TIME_HOUR", false;
    TimeMin = "TIME_MIN", false;
    TimeMon = "TIME_MON", false;
    TimeSec = "TIME_SEC", false;
    TimeWday = "TIME_WDAY", false;
    TimeYear = "TIME_YEAR", false;
    MscPcreLimitsExceeded = "MSC_PCRE_LIMITS_EXCEEDED", false;
    ModsecBuild = "MODSEC_BUILD", false;
}

impl Var {
    /// What the variable's values are a function of, if of the request line and the body only.
    pub fn source(self) -> Source {
        match self {
            // XML: only the XML processor fills it (from the body), and a body it parsed has no
            // generation (see `Transaction::source_generation`).
            Var::Args | Var::ArgsNames | Var::ArgsGet | Var::ArgsGetNames | Var::ArgsPost | Var::ArgsPostNames | Var::Xml => Source::LineAndBody,
            Var::RequestCookies
            | Var::RequestCookiesNames
            | Var::RequestUri
            | Var::RequestUriRaw
            | Var::RequestFilename
            | Var::RequestBasename
            | Var::RequestMethod
            | Var::RequestProtocol
            | Var::RequestLine
            | Var::QueryString => Source::Line,
            _ => Source::Other,
        }
    }

    /// Variables whose values are request or response data that does not
    /// change while a phase runs (rules cannot write them), and are borrowed
    /// from it: their collected values can be shared by rules in a phase.
    /// Every variable made of the request line, cookies and body ([`Var::source`]) is.
    pub fn is_phase_stable(self) -> bool {
        self.source() != Source::Other
            || matches!(
                self,
                Var::RequestHeaders
                    | Var::RequestHeadersNames
                    | Var::ResponseHeaders
                    | Var::ResponseHeadersNames
                    | Var::RequestBody
                    | Var::Xml
                    | Var::Files
                    | Var::FilesNames
                    | Var::FilesSizes
                    | Var::MultipartPartHeaders
                    | Var::ResponseBody
                    | Var::ResponseContentType
                    | Var::PathInfo
            )
    }
}

/// See [`Var::source`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Anything else (headers, TX, the response, ...).
    Other,
    /// The request line (method, target, protocol) and the `Cookie` headers: cookies and the
    /// parts of the request line.
    Line,
    /// Those and the body (urlencoded or JSON): the ARGS family.
    LineAndBody,
}

/// How a target picks keys from a collection.
#[derive(Debug, Clone)]
pub enum KeySel {
    All,
    /// Case-insensitive key (stored lowercased).
    Key(String),
    /// Case-insensitive regex on the key.
    Regex(KeyRegex),
}

impl KeySel {
    pub fn matches(&self, key: &[u8]) -> bool {
        match self {
            KeySel::All => true,
            KeySel::Key(k) => key.eq_ignore_ascii_case(k.as_bytes()),
            KeySel::Regex(r) => r.is_match(key),
        }
    }
}

/// A compiled target of a rule: `VAR`, `VAR:key`, `VAR:/re/`, `&VAR...`,
/// with the exclusions (`!VAR:key`) written for the same variable.
#[derive(Debug, Clone)]
pub struct Target {
    pub var: Var,
    pub sel: KeySel,
    pub count: bool,
    pub exclude: Vec<KeySel>,
}

impl Target {
    pub fn excluded(&self, key: &[u8]) -> bool {
        self.exclude.iter().any(|e| e.matches(key))
    }
}

#[cfg(test)]
mod tests {
    use super::KeyRegex;

    #[test]
    fn key_regex_prefix_matches_as_the_regex_does() {
        let keys: [&[u8]; 8] = [b"header_name_920450_host", b"HEADER_NAME_920450_x", b"header_name_920450_", b"header_name_92045", b"xheader_name_920450_a", b"", b"a-b_c", b"A-B_cd"];
        for pattern in ["^header_name_920450_", "^a-b_c", "^", "^a.b", "^(a|x)", "header"] {
            let k = KeyRegex::new(pattern).unwrap();
            let re = regex::bytes::RegexBuilder::new(pattern).case_insensitive(true).unicode(false).build().unwrap();
            for key in keys {
                assert_eq!(k.is_match(key), re.is_match(key), "/{pattern}/ on {:?}", String::from_utf8_lossy(key));
            }
        }
        assert!(KeyRegex::new("^header_").unwrap().prefix.is_some());
        assert!(KeyRegex::new("^a.b").unwrap().prefix.is_none());
    }
}
