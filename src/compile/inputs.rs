//! What a rule's outcome can depend on besides TX, as classes of request data: the
//! transaction replay's (`tx::replay`) rule dependencies.
//!
//! A rule has an effect only when its first link has hits (then its setvars, captures and
//! the later links run). Whether the first link has hits is a function of the values its
//! targets read, its operator's parameter (macros) and the transaction's state left by the
//! rules before it (TX, removals, the body processor). [`of_rule`] names the request data
//! the first link reads, one bit per class; the transaction compares each class with the
//! last transaction's and passes a rule that had no hits there when none of its classes
//! changed. Anything not classified here is [`VOLATILE`]: changed in every transaction.

use super::Rule;
use crate::actions::{Disruptive, SetOp};
use crate::seclang::MacroPart;
use crate::vars::{KeySel, Target, Var};

/// Data that may differ between any two transactions (time, unique id, persistent
/// collections, anything unknown).
pub const VOLATILE: u64 = 1;
/// The request line: method, target, protocol (and what is parsed from them).
pub const LINE: u64 = 1 << 1;
/// The `Cookie` headers (REQUEST_COOKIES).
pub const COOKIES: u64 = 1 << 2;
/// The body and how it was processed (and the `Content-Type` header, which multipart reads).
pub const BODY: u64 = 1 << 3;
/// The request header names, in order (and so their count).
pub const NAMES: u64 = 1 << 4;
/// Any request header value.
pub const HEADERS: u64 = 1 << 5;
/// The client's and server's addresses.
pub const ADDR: u64 = 1 << 6;
/// The client's and server's ports (a client's port changes with every connection).
pub const PORT: u64 = 1 << 7;
/// The response's status and protocol (`RESPONSE_STATUS`, `RESPONSE_PROTOCOL`, `STATUS_LINE`).
pub const RESP_LINE: u64 = 1 << 8;
/// The response header names, in order (and so their count).
pub const RESP_NAMES: u64 = 1 << 9;
/// Any response header value.
pub const RESP_HEADERS: u64 = 1 << 10;
/// The response body as the phase saw it, whether it was inspected, and the limit flag.
pub const RESP_BODY: u64 = 1 << 11;
/// Bit of the first response header name a rule reads by key (`RESPONSE_HEADERS:Content-Encoding`,
/// `RESPONSE_CONTENT_TYPE`); [`RESP_KEYS`] names at most (later names count as [`RESP_HEADERS`]).
pub const FIRST_RESP_KEY: u32 = 12;
/// How many response header names have a bit of their own.
pub const RESP_KEYS: u32 = 4;
/// Bit of the first request header name a rule reads by key (`REQUEST_HEADERS:User-Agent`);
/// the names after it take the next bits, up to bit 63 (later names count as [`HEADERS`]).
pub const FIRST_KEY: u32 = FIRST_RESP_KEY + RESP_KEYS;
/// Every response class and response key bit.
pub const RESPONSE: u64 = RESP_LINE | RESP_NAMES | RESP_HEADERS | RESP_BODY | (((1u64 << RESP_KEYS) - 1) << FIRST_RESP_KEY);

/// Header names read by key: the request's numbered from [`FIRST_KEY`], the response's
/// from [`FIRST_RESP_KEY`].
#[derive(Debug, Default)]
pub struct Keys {
    pub request: Vec<String>,
    pub response: Vec<String>,
}

/// The bit of `name` (lowercase) among `names` (numbered from `first`, at most `max`),
/// numbered when new; `full` when no bit is left.
fn key_bit(names: &mut Vec<String>, name: &str, first: u32, max: u32, full: u64) -> u64 {
    let i = match names.iter().position(|k| k == name) {
        Some(i) => i,
        None if names.len() < max as usize => {
            names.push(name.to_string());
            names.len() - 1
        }
        None => return full,
    };
    1u64 << (first + i as u32)
}

/// The bit of `name` (any case) among `names` numbered from `first`, if it has one.
fn find_bit(names: &[String], name: &[u8], first: u32) -> u64 {
    names.iter().position(|k| k.as_bytes().eq_ignore_ascii_case(name)).map_or(0, |i| 1u64 << (first + i as u32))
}

/// The bits of all of `names`, numbered from `first`.
fn all_bits(names: &[String], first: u32) -> u64 {
    (0..names.len()).fold(0, |acc, i| acc | 1u64 << (first + i as u32))
}

impl Keys {
    /// The bit of request header `name` (lowercase), numbered when new; [`HEADERS`] when no
    /// bit is left.
    fn bit(&mut self, name: &str) -> u64 {
        key_bit(&mut self.request, name, FIRST_KEY, 64 - FIRST_KEY, HEADERS)
    }

    /// The bit of response header `name` (lowercase); [`RESP_HEADERS`] when no bit is left.
    fn response_bit(&mut self, name: &str) -> u64 {
        key_bit(&mut self.response, name, FIRST_RESP_KEY, RESP_KEYS, RESP_HEADERS)
    }

    /// The bit of request header `name` (any case) if it has one.
    pub fn find(&self, name: &[u8]) -> u64 {
        find_bit(&self.request, name, FIRST_KEY)
    }

    /// The bit of response header `name` (any case) if it has one.
    pub fn find_response(&self, name: &[u8]) -> u64 {
        find_bit(&self.response, name, FIRST_RESP_KEY)
    }

    /// Every request header key's bit.
    pub fn all(&self) -> u64 {
        all_bits(&self.request, FIRST_KEY)
    }

    /// Every response header key's bit.
    pub fn all_response(&self) -> u64 {
        all_bits(&self.response, FIRST_RESP_KEY)
    }
}

/// The classes the first link of `r` reads (its targets and its operator's macros), and the
/// classes the whole rule reads when it has hits: every link's targets and macros and its
/// actions' macros (setvar keys and values, initcol keys, msg, logdata, redirect), which
/// decide the rule's effects. `MATCHED_VAR*` after the first link are values of the links'
/// targets, counted there.
pub fn of_rule(r: &Rule, keys: &mut Keys) -> Inputs {
    // `RULE:msg`, `RULE:logdata` and `%{rule.msg}` expand the rule's own macros: a first link
    // reading RULE reads what they read.
    let own = if reads_rule(r) { of_own_macros(r, keys) } else { 0 };
    let head = of_link(r, false, keys) | own;
    // What the first link reads other than header values through REQUEST_HEADERS targets.
    let other = r.targets.iter().filter(|t| t.var != Var::RequestHeaders || t.count).fold(0, |acc, t| acc | of_target(t, false, keys)) | of_parts(r.operator.macros(), false, keys) | own;
    let by_value = other & HEADER_VALUES == 0;
    let mut all = head;
    let mut link = Some(r);
    while let Some(l) = link {
        all |= of_link(l, true, keys);
        for sv in &l.setvars {
            all |= of_parts(&sv.key, true, keys);
            all |= match &sv.op {
                SetOp::Set(p) | SetOp::Add(p) | SetOp::Sub(p) | SetOp::Init(p) | SetOp::Expire(p) => of_parts(p, true, keys),
                SetOp::Delete => 0,
            };
        }
        for parts in [&l.msg, &l.logdata].into_iter().flatten() {
            all |= of_parts(parts, true, keys);
        }
        if let Disruptive::Redirect(parts) = &l.disruptive {
            all |= of_parts(parts, true, keys);
        }
        link = l.chain.as_deref();
    }
    let links = || std::iter::successors(Some(r), |l| l.chain.as_deref());
    let tx_writes = links().all(|l| l.setvars.iter().all(|sv| sv.collection == "tx" && !matches!(sv.op, SetOp::Init(_) | SetOp::Expire(_))));
    let quiet = matches!(r.disruptive, Disruptive::Pass) && !r.log && r.severity.is_none();
    Inputs { head, all, by_value, tx_writes, quiet }
}

/// Whether the first link of `r` reads `RULE` (a target or an operator macro).
fn reads_rule(r: &Rule) -> bool {
    r.targets.iter().any(|t| t.var == Var::Rule)
        || r.operator.macros().iter().any(|p| matches!(p, MacroPart::Var { name, .. } if Var::from_name(name) == Some(Var::Rule)))
}

/// The classes the macros of the rule's `msg` and `logdata` read (every link's), as the
/// first link sees them.
fn of_own_macros(r: &Rule, keys: &mut Keys) -> u64 {
    std::iter::successors(Some(r), |l| l.chain.as_deref()).flat_map(|l| [&l.msg, &l.logdata].into_iter().flatten()).fold(0, |acc, parts| acc | of_parts(parts, false, keys))
}

/// What a rule reads (see [`of_rule`]).
#[derive(Debug, Clone, Copy)]
pub struct Inputs {
    /// The classes its first link reads.
    pub head: u64,
    /// The classes the whole rule reads when it has hits.
    pub all: u64,
    /// Request header values reach the first link only as values of its `REQUEST_HEADERS`
    /// targets, each tested on its own (with `multiMatch`, each after each transformation):
    /// when only some header values changed, the link has hits only if one of those values
    /// is a hit.
    pub by_value: bool,
    /// Every setvar of every link writes TX (no persistent collection, initcol, expirevar):
    /// while the chain does not complete, the rule's only effect is on TX.
    pub tx_writes: bool,
    /// When the chain completes the rule only passes (no log, severity or disruptive action;
    /// its ctls and its skip still apply: they read nothing but the transaction's state).
    pub quiet: bool,
}

/// Every bit of the header names read by key, and [`HEADERS`].
pub const HEADER_VALUES: u64 = HEADERS | !((1u64 << FIRST_KEY) - 1);

fn of_link(l: &Rule, later: bool, keys: &mut Keys) -> u64 {
    let targets = l.targets.iter().fold(0, |acc, t| acc | of_target(t, later, keys));
    targets | of_parts(l.operator.macros(), later, keys)
}

fn of_parts(parts: &[MacroPart], later: bool, keys: &mut Keys) -> u64 {
    parts.iter().fold(0, |acc, p| match p {
        MacroPart::Lit(_) => acc,
        MacroPart::Var { name, key } => acc | of_macro(name, key.as_deref(), later, keys),
    })
}

fn of_macro(name: &str, key: Option<&str>, later: bool, keys: &mut Keys) -> u64 {
    let Some(var) = Var::from_name(name) else { return VOLATILE };
    let sel = match key {
        Some(k) if var.is_collection() => KeySel::Key(k.to_ascii_lowercase()),
        _ => KeySel::All,
    };
    of_target(&Target { var, sel, count: false, exclude: Vec::new() }, later, keys)
}

fn of_target(t: &Target, later: bool, keys: &mut Keys) -> u64 {
    use Var::*;
    match t.var {
        MatchedVar | MatchedVarName | MatchedVars | MatchedVarsNames if later => 0,
        // Left by the rules before this one: the same when they did the same.
        Tx | HighestSeverity | Rule => 0,
        // A constant.
        ModsecBuild => 0,
        RequestUri | RequestUriRaw | RequestFilename | RequestBasename | RequestMethod | RequestProtocol | RequestLine | QueryString | ArgsGet | ArgsGetNames | PathInfo => LINE,
        // URLENCODED_ERROR: an invalid escape in the query or in a urlencoded body.
        Args | ArgsNames | ArgsCombinedSize | UrlencodedError => LINE | BODY,
        RequestCookies | RequestCookiesNames => COOKIES,
        RequestHeaders if t.count => NAMES,
        RequestHeaders => match &t.sel {
            KeySel::Key(k) => keys.bit(k),
            _ => HEADERS,
        },
        RequestHeadersNames => NAMES,
        RequestBody | RequestBodyLength | ReqbodyError | ReqbodyErrorMsg | ReqbodyProcessor | ReqbodyProcessorError | ReqbodyProcessorErrorMsg | ArgsPost | ArgsPostNames | Xml | Files
        | FilesNames | FilesSizes | FilesCombinedSize | FilesTmpNames | FilesTmpContent | MultipartPartHeaders | MultipartFilename | MultipartName | MultipartBoundaryQuoted
        | MultipartBoundaryWhitespace | MultipartCrlfLfLines | MultipartDataAfter | MultipartDataBefore | MultipartFileLimitExceeded | MultipartHeaderFolding
        | MultipartInvalidHeaderFolding | MultipartInvalidPart | MultipartInvalidQuoting | MultipartLfLine | MultipartMissingSemicolon | MultipartSemicolonMissing
        | MultipartStrictError | MultipartUnmatchedBoundary | InboundDataError => BODY,
        RemoteAddr | RemoteHost | ServerAddr => ADDR,
        RemotePort | ServerPort => PORT,
        // From the `Host` header; `Authorization`.
        ServerName | AuthType | RemoteUser => HEADERS | ADDR,
        FullRequest | FullRequestLength => LINE | COOKIES | NAMES | HEADERS | BODY,
        ResponseStatus | ResponseProtocol | StatusLine => RESP_LINE,
        ResponseHeaders if t.count => RESP_NAMES,
        ResponseHeaders => match &t.sel {
            KeySel::Key(k) => keys.response_bit(k),
            _ => RESP_HEADERS,
        },
        ResponseHeadersNames => RESP_NAMES,
        // From the `Content-Type` header.
        ResponseContentType => keys.response_bit("content-type"),
        // The body's length, when it was inspected.
        ResponseContentLength | ResponseBody | OutboundDataError => RESP_BODY,
        _ => VOLATILE,
    }
}
