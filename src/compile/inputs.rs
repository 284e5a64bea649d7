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
/// The response (status, headers, body): changed in every transaction (dates, timings).
pub const RESP: u64 = 1 << 8;
/// Bit of the first request header name a rule reads by key (`REQUEST_HEADERS:User-Agent`);
/// the names after it take the next bits, up to bit 63 (later names count as [`HEADERS`]).
pub const FIRST_KEY: u32 = 9;

/// Request header names read by key, numbered from [`FIRST_KEY`].
#[derive(Debug, Default)]
pub struct Keys(pub Vec<String>);

impl Keys {
    /// The bit of header `name` (lowercase), numbered when new; [`HEADERS`] when no bit is left.
    fn bit(&mut self, name: &str) -> u64 {
        let i = match self.0.iter().position(|k| k == name) {
            Some(i) => i,
            None if self.0.len() < (64 - FIRST_KEY) as usize => {
                self.0.push(name.to_string());
                self.0.len() - 1
            }
            None => return HEADERS,
        };
        1u64 << (FIRST_KEY + i as u32)
    }

    /// The bit of header `name` (any case) if it has one.
    pub fn find(&self, name: &[u8]) -> u64 {
        self.0.iter().position(|k| k.as_bytes().eq_ignore_ascii_case(name)).map_or(0, |i| 1u64 << (FIRST_KEY + i as u32))
    }

    /// Every key's bit.
    pub fn all(&self) -> u64 {
        self.0.iter().enumerate().fold(0, |acc, (i, _)| acc | 1u64 << (FIRST_KEY + i as u32))
    }
}

/// The classes the first link of `r` reads (its targets and its operator's macros), and the
/// classes the whole rule reads when it has hits: every link's targets and macros and its
/// actions' macros (setvar keys and values, initcol keys, msg, logdata, redirect), which
/// decide the rule's effects. `MATCHED_VAR*` after the first link are values of the links'
/// targets, counted there.
pub fn of_rule(r: &Rule, keys: &mut Keys) -> Inputs {
    let head = of_link(r, false, keys);
    // What the first link reads other than header values through REQUEST_HEADERS targets.
    let other = r.targets.iter().filter(|t| t.var != Var::RequestHeaders || t.count).fold(0, |acc, t| acc | of_target(t, false, keys)) | of_parts(r.operator.macros(), false, keys);
    let by_value = !r.multi_match && other & HEADER_VALUES == 0;
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
    let quiet = matches!(r.disruptive, Disruptive::Pass) && !r.log && r.severity.is_none() && links().all(|l| l.ctls.is_empty());
    Inputs { head, all, by_value, tx_writes, quiet }
}

/// What a rule reads (see [`of_rule`]).
#[derive(Debug, Clone, Copy)]
pub struct Inputs {
    /// The classes its first link reads.
    pub head: u64,
    /// The classes the whole rule reads when it has hits.
    pub all: u64,
    /// Request header values reach the first link only as values of its `REQUEST_HEADERS`
    /// targets, each tested on its own (no `multiMatch`): when only some header values
    /// changed, the link has hits only if one of those values is a hit.
    pub by_value: bool,
    /// Every setvar of every link writes TX (no persistent collection, initcol, expirevar):
    /// while the chain does not complete, the rule's only effect is on TX.
    pub tx_writes: bool,
    /// When the chain completes the rule only passes (no log, severity, ctl or disruptive
    /// action; its skip still applies).
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
        RequestUri | RequestUriRaw | RequestFilename | RequestBasename | RequestMethod | RequestProtocol | RequestLine | QueryString | ArgsGet | ArgsGetNames | PathInfo => LINE,
        Args | ArgsNames | ArgsCombinedSize => LINE | BODY,
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
        | MultipartStrictError | MultipartUnmatchedBoundary | UrlencodedError | InboundDataError => BODY,
        RemoteAddr | RemoteHost | ServerAddr => ADDR,
        RemotePort | ServerPort => PORT,
        // From the `Host` header; `Authorization`.
        ServerName | AuthType | RemoteUser => HEADERS | ADDR,
        FullRequest | FullRequestLength => LINE | COOKIES | NAMES | HEADERS | BODY,
        ResponseStatus | ResponseProtocol | ResponseHeaders | ResponseHeadersNames | ResponseContentType | ResponseContentLength | ResponseBody | StatusLine | OutboundDataError => RESP,
        _ => VOLATILE,
    }
}
