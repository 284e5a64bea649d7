//! Variables: the closed set of SecLang variable names and how a compiled
//! target selects values from a collection.

use regex::bytes::Regex;

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
}

/// How a target picks keys from a collection.
#[derive(Debug, Clone)]
pub enum KeySel {
    All,
    /// Case-insensitive key (stored lowercased).
    Key(String),
    /// Case-insensitive regex on the key.
    Regex(Regex),
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
