//! Rule evaluation: collecting variable values, transformations, operators,
//! chains, actions, and the phase loop.

use std::borrow::Cow;

use super::{log, InterruptAction, Interruption, Transaction};
use crate::actions::{Ctl, Disruptive, SetOp};
use crate::compile::{EngineMode, Entry, Rule, Ruleset, Speed};
use super::cache::{byte_set, same_bytes, untouched, write_name, Group, RawItem, Scan, Val, KNOWN_MIN, UNION_MIN};
use crate::compile::prefilter::Satisfied;
use crate::compile::inputs::Inputs;
use crate::compile::quick::Quick;
use crate::operators::{to_int, Captures, Expand, Operator};
use crate::seclang::MacroPart;
use crate::vars::{KeySel, Source, Target, Var};

/// `MATCHED_VAR`, `MATCHED_VAR_NAME` and `MATCHED_VARS` of the current rule.
#[derive(Debug, Default)]
pub(crate) struct Matched {
    pub var: Vec<u8>,
    pub var_name: String,
    /// `vars[..n]` are this rule's matches; slots beyond are kept for reuse.
    pub vars: Vec<(String, Vec<u8>)>,
    pub n: usize,
}

impl Matched {
    fn record(&mut self, name: &str, value: &[u8]) {
        self.var.clear();
        self.var.extend_from_slice(value);
        self.var_name.clear();
        self.var_name.push_str(name);
        if let Some((n, v)) = self.vars.get_mut(self.n) {
            n.clear();
            n.push_str(name);
            v.clear();
            v.extend_from_slice(value);
        } else {
            self.vars.push((name.to_string(), value.to_vec()));
        }
        self.n += 1;
    }

    pub fn list(&self) -> &[(String, Vec<u8>)] {
        self.vars.get(..self.n).unwrap_or_default()
    }

    /// Emptied for the next transaction, keeping its buffers (unless they grew large).
    pub(crate) fn recycled(mut self) -> Matched {
        let small = self.vars.len() <= 64 && self.vars.iter().all(|(n, v)| n.capacity() <= 256 && v.capacity() <= 4096);
        if !small || self.var.capacity() > 4096 || self.var_name.capacity() > 256 {
            return Matched::default();
        }
        self.var.clear();
        self.var_name.clear();
        self.n = 0;
        self
    }
}

/// Matches of one chain link, in reusable buffers (no allocation per match
/// once warm).
#[derive(Default)]
pub(crate) struct HitPool {
    hits: Vec<Hit>,
    n: usize,
}

impl HitPool {
    /// Few hits, none large: worth keeping for the next transaction.
    pub(crate) fn small(&self) -> bool {
        self.hits.len() <= 256 && self.hits.iter().all(|h| h.value.capacity() <= 4096 && h.captures.len() <= 10)
    }

    fn push(&mut self, name: &dyn Fn(&mut String), value: &[u8], caps: Option<&[Vec<u8>]>) {
        if self.n == self.hits.len() {
            self.hits.push(Hit::default());
        }
        if let Some(h) = self.hits.get_mut(self.n) {
            h.name.clear();
            name(&mut h.name);
            h.value.clear();
            h.value.extend_from_slice(value);
            h.has_captures = caps.is_some();
            match caps {
                Some(c) => {
                    // Into the buffers of the hit this slot held before (no allocation for a
                    // rule that captures on every request, as 920450 does per header).
                    h.captures.truncate(c.len());
                    for (i, src) in c.iter().enumerate() {
                        match h.captures.get_mut(i) {
                            Some(dst) => {
                                dst.clear();
                                dst.extend_from_slice(src);
                            }
                            None => h.captures.push(src.clone()),
                        }
                    }
                }
                None => h.captures.clear(),
            }
        }
        self.n += 1;
    }
}

/// Counters of the rule being evaluated, read by the profiler around each rule.
#[derive(Default)]
pub(crate) struct Probe {
    pub values: std::cell::Cell<u64>,
    pub skipped: std::cell::Cell<u64>,
    pub ran: std::cell::Cell<u64>,
    /// Links evaluated on their own value list (not a shared group).
    pub unshared: std::cell::Cell<u64>,
}

fn bump(c: &std::cell::Cell<u64>) {
    c.set(c.get().wrapping_add(1));
}

/// A `ctl:ruleRemoveTarget*` in force for this transaction.
#[derive(Debug, Clone)]
pub(crate) struct TargetRemoval {
    /// The address of the `ctl` (in the rule set) that made it: removals from the same ctls in
    /// the same order mean the same masks (see `Transaction::source_generation`).
    pub origin: usize,
    pub ids: Vec<(u64, u64)>,
    /// The tag's id (`Ruleset::tag_id`); None: not by tag, or a tag no rule has.
    pub tag: Option<u32>,
    pub var: Var,
    pub sel: KeySel,
}

/// The name of a value (`ARGS:id`), built only when a rule matches it.
#[derive(Debug, Clone)]
pub(crate) enum VName<'a> {
    Plain(&'static str),
    Keyed(&'static str, &'a [u8]),
    Count(&'static str),
    Owned(String),
}

impl VName<'_> {
    pub fn write(&self, out: &mut String) {
        match self {
            VName::Plain(n) => out.push_str(n),
            VName::Keyed(n, k) => {
                out.push_str(n);
                out.push(':');
                out.push_str(&String::from_utf8_lossy(k));
            }
            VName::Count(n) => {
                out.push('&');
                out.push_str(n);
            }
            VName::Owned(s) => out.push_str(s),
        }
    }
}

impl TargetRemoval {
    /// Whether this removal concerns `rule` (by id or tag).
    pub fn applies_to(&self, rule: &Rule) -> bool {
        self.ids.iter().any(|&(a, b)| (a..=b).contains(&rule.id)) || self.tag.is_some_and(|tag| rule.tag_ids.contains(&tag))
    }
}

/// One value a target produced. `stable` values live in the request data
/// for the whole transaction, so their address identifies them (caches).
pub(crate) struct Value<'a> {
    pub name: VName<'a>,
    pub value: Cow<'a, [u8]>,
    pub stable: bool,
}

fn push_list<'a>(out: &mut Vec<Value<'a>>, t: &Target, prefix: &'static str, list: impl IntoIterator<Item = (&'a [u8], &'a [u8])>, names: bool, removed: &impl Fn(&[u8]) -> bool) {
    for (k, v) in list {
        if t.sel.matches(k) && !t.excluded(k) && !removed(k) {
            out.push(Value { name: VName::Keyed(prefix, k), value: Cow::Borrowed(if names { k } else { v }), stable: true });
        }
    }
}

/// The pairs of a list of owned pairs, as `push_list` takes them.
fn owned(list: &[(Vec<u8>, Vec<u8>)]) -> impl Iterator<Item = (&[u8], &[u8])> {
    list.iter().map(|(k, v)| (k.as_slice(), v.as_slice()))
}

fn scalar<'a>(out: &mut Vec<Value<'a>>, var: Var, v: Cow<'a, [u8]>) {
    let stable = matches!(v, Cow::Borrowed(_));
    out.push(Value { name: VName::Plain(var.name()), value: v, stable });
}

/// Collects the values of one target. `rule` is the chain head (for
/// `ctl:ruleRemoveTarget*`).
/// `MODSEC_BUILD`: the build number of the ModSecurity v3 release whose semantics wafer
/// follows, as libmodsecurity 3.0.15 reports it (major, minor, patch level two digits each, then
/// 100 for a release), so rules that check the engine's version before using a feature
/// (`SecRule MODSEC_BUILD "@lt 020901100" ...`) see what ModSecurity v3 shows them.
const MODSEC_BUILD: &[u8] = b"030015100";

pub(crate) fn collect<'a>(t: &'a Transaction, target: &Target, rule: Option<&Rule>, out: &mut Vec<Value<'a>>) {
    let start = out.len();
    let rule = rule.filter(|r| affected(t, r.index));
    let removed = |k: &[u8]| -> bool {
        let Some(rule) = rule else { return false };
        t.removed_targets.iter().any(|r| {
            r.var == target.var
                && r.sel.matches(k)
                && r.applies_to(rule)
        })
    };
    let r = &t.req;
    let var = target.var;
    let name = var.name();
    if !var.is_collection() && removed(b"") {
        // `ctl:ruleRemoveTarget*=...;REQUEST_FILENAME` drops a whole scalar.
        return;
    }
    match var {
        Var::Args => {
            push_list(out, target, name, &r.args_get, false, &removed);
            push_list(out, target, name, &r.args_post, false, &removed);
        }
        Var::ArgsGet => push_list(out, target, name, &r.args_get, false, &removed),
        Var::ArgsPost => push_list(out, target, name, &r.args_post, false, &removed),
        Var::ArgsNames => {
            push_list(out, target, name, &r.args_get, true, &removed);
            push_list(out, target, name, &r.args_post, true, &removed);
        }
        Var::ArgsGetNames => push_list(out, target, name, &r.args_get, true, &removed),
        Var::ArgsPostNames => push_list(out, target, name, &r.args_post, true, &removed),
        Var::ArgsCombinedSize => {
            let n: usize = r.args_get.iter().chain(r.args_post.iter()).map(|(k, v)| k.len() + v.len()).sum();
            scalar(out, var, Cow::Owned(n.to_string().into_bytes()));
        }
        Var::RequestHeaders => push_list(out, target, name, &r.headers, false, &removed),
        Var::RequestHeadersNames => push_list(out, target, name, &r.headers, true, &removed),
        Var::RequestCookies => push_list(out, target, name, &r.cookies, false, &removed),
        Var::RequestCookiesNames => push_list(out, target, name, &r.cookies, true, &removed),
        Var::ResponseHeaders => push_list(out, target, name, &r.response_headers, false, &removed),
        Var::ResponseHeadersNames => push_list(out, target, name, &r.response_headers, true, &removed),
        Var::RequestUri => scalar(out, var, Cow::Borrowed(&r.uri)),
        Var::RequestUriRaw => scalar(out, var, Cow::Borrowed(&r.uri_raw)),
        Var::RequestFilename => scalar(out, var, Cow::Borrowed(&r.filename)),
        Var::RequestBasename => scalar(out, var, Cow::Borrowed(&r.basename)),
        Var::RequestMethod => scalar(out, var, Cow::Borrowed(&r.method)),
        Var::RequestProtocol => scalar(out, var, Cow::Borrowed(&r.protocol)),
        Var::RequestLine => scalar(out, var, Cow::Borrowed(&r.request_line)),
        Var::QueryString => scalar(out, var, Cow::Borrowed(&r.query_string)),
        Var::RequestBody => {
            // What the CRS regression suite expects: the raw body is visible
            // unless the XML or MULTIPART processor parsed it (then only with
            // forceRequestBodyVariable). ModSecurity v3 always fills it, which
            // CRS lists as a quirk (XML element names would then match).
            let p = r.reqbody_processor.as_slice();
            let raw_ok = p.is_empty() || p == b"URLENCODED" || p == b"JSON" || t.force_request_body_variable;
            if r.body_processed && raw_ok && !r.body.is_empty() {
                scalar(out, var, Cow::Borrowed(&r.body));
            }
        }
        // Always there, as in ModSecurity v3: empty until a non-empty body was processed (so
        // `@eq 0` holds in phase 1 and for a request without a body).
        Var::RequestBodyLength => {
            let len = if r.body_processed && !r.body.is_empty() { Cow::Owned(r.body.len().to_string().into_bytes()) } else { Cow::Borrowed(&b""[..]) };
            scalar(out, var, len);
        }
        Var::ReqbodyError => scalar(out, var, Cow::Borrowed(if r.reqbody_error { b"1" } else { b"0" })),
        Var::ReqbodyErrorMsg => scalar(out, var, Cow::Borrowed(&r.reqbody_error_msg)),
        Var::ReqbodyProcessor => {
            let p = r.body_processor(t.body_processor.as_deref()).unwrap_or_default();
            scalar(out, var, Cow::Borrowed(p.as_bytes()));
        }
        Var::RemoteAddr => scalar(out, var, Cow::Borrowed(r.client_ip.as_bytes())),
        Var::RemotePort => scalar(out, var, Cow::Owned(r.client_port.to_string().into_bytes())),
        Var::ServerAddr => scalar(out, var, Cow::Borrowed(r.server_ip.as_bytes())),
        Var::ServerPort => scalar(out, var, Cow::Owned(r.server_port.to_string().into_bytes())),
        Var::ServerName => scalar(out, var, Cow::Borrowed(&r.server_name)),
        Var::UniqueId => scalar(out, var, Cow::Borrowed(t.unique_id.as_bytes())),
        Var::Tx => {
            if let KeySel::Key(k) = &target.sel {
                // The common case (`TX:anomaly_score`): one lookup.
                if let Some((key, v)) = t.tx.get_key_value(k.as_str()) {
                    if !target.excluded(k.as_bytes()) && !removed(k.as_bytes()) {
                        out.push(Value { name: VName::Keyed("TX", key.as_bytes()), value: Cow::Borrowed(v.as_slice()), stable: false });
                    }
                }
                return finish_count(out, start, target, name);
            }
            // In key order (the map's is arbitrary), each pair taken once.
            let from = out.len();
            out.extend(
                t.tx.iter()
                    .filter(|(k, _)| target.sel.matches(k.as_bytes()) && !target.excluded(k.as_bytes()) && !removed(k.as_bytes()))
                    .map(|(k, v)| Value { name: VName::Keyed("TX", k.as_bytes()), value: Cow::Borrowed(v.as_slice()), stable: false }),
            );
            if let Some(added) = out.get_mut(from..) {
                added.sort_unstable_by(|a, b| match (&a.name, &b.name) {
                    (VName::Keyed(_, x), VName::Keyed(_, y)) => x.cmp(y),
                    _ => std::cmp::Ordering::Equal,
                });
            }
        }
        Var::MatchedVar => {
            if !t.matched.var_name.is_empty() {
                out.push(Value { name: VName::Plain(var.name()), value: Cow::Borrowed(&t.matched.var), stable: false });
            }
        }
        Var::MatchedVarName => {
            if !t.matched.var_name.is_empty() {
                out.push(Value { name: VName::Plain(var.name()), value: Cow::Borrowed(t.matched.var_name.as_bytes()), stable: false });
            }
        }
        Var::MatchedVars | Var::MatchedVarsNames => {
            for (n, v) in t.matched.list() {
                if target.sel.matches(n.as_bytes()) && !target.excluded(n.as_bytes()) {
                    let value: &[u8] = if var == Var::MatchedVars { v } else { n.as_bytes() };
                    out.push(Value { name: VName::Owned(format!("{}:{n}", var.name())), value: Cow::Borrowed(value), stable: false });
                }
            }
        }
        Var::ResponseStatus => {
            if r.response_status != 0 {
                scalar(out, var, Cow::Owned(r.response_status.to_string().into_bytes()));
            }
        }
        Var::ResponseProtocol => scalar(out, var, Cow::Borrowed(r.response_protocol.as_bytes())),
        Var::ResponseContentType => scalar(out, var, Cow::Borrowed(r.response_content_type.as_bytes())),
        Var::ResponseContentLength => {
            if r.response_body_seen {
                scalar(out, var, Cow::Owned(r.response_body.len().to_string().into_bytes()));
            }
        }
        Var::ResponseBody => {
            if r.response_body_seen {
                scalar(out, var, Cow::Borrowed(&r.response_body));
            }
        }
        Var::Duration => scalar(out, var, Cow::Borrowed(b"0")),
        Var::ModsecBuild => scalar(out, var, Cow::Borrowed(MODSEC_BUILD)),
        Var::WebserverErrorLog | Var::Env | Var::Geo => {}
        Var::Session | Var::Ip | Var::Global | Var::User | Var::Resource => {
            let cname = var.name().to_ascii_lowercase();
            if let Some(col) = t.collections.iter().find(|c| c.name == cname) {
                for (k, e) in &col.vars {
                    if target.sel.matches(k.as_bytes()) && !target.excluded(k.as_bytes()) && !removed(k.as_bytes()) {
                        out.push(Value { name: VName::Keyed(var.name(), k.as_bytes()), value: Cow::Borrowed(e.value.as_slice()), stable: false });
                    }
                }
            }
        }
        Var::Xml => {
            // `ctl:ruleRemoveTarget*=...;XML:/*` removes the target whose name is that one
            // (ModSecurity v3 compares the full names: `XML` alone does not remove `XML:/*`).
            let same = |a: &KeySel, b: &KeySel| match (a, b) {
                (KeySel::All, KeySel::All) => true,
                (KeySel::Key(x), KeySel::Key(y)) => x == y,
                _ => false,
            };
            if rule.is_some_and(|rule| t.removed_targets.iter().any(|x| x.var == Var::Xml && same(&x.sel, &target.sel) && x.applies_to(rule))) {
                return;
            }
            let list = match &target.sel {
                KeySel::Key(k) if k == "//@*" => &r.xml_attrs,
                KeySel::Key(k) if k == "/*" => &r.xml_text,
                _ => &r.xml_text,
            };
            for v in list {
                out.push(Value { name: VName::Plain("XML"), value: Cow::Borrowed(v.as_slice()), stable: true });
            }
        }
        Var::Files | Var::FilesTmpNames => push_list(out, target, name, owned(&r.files), false, &removed),
        Var::FilesNames => push_list(out, target, name, owned(&r.files), true, &removed),
        Var::FilesSizes => push_list(out, target, name, owned(&r.files_sizes), false, &removed),
        Var::FilesTmpContent => {}
        Var::FilesCombinedSize => scalar(out, var, Cow::Owned(r.files_combined_size.to_string().into_bytes())),
        Var::MultipartPartHeaders => push_list(out, target, name, owned(&r.multipart_part_headers), false, &removed),
        Var::MultipartName => scalar(out, var, Cow::Borrowed(&r.multipart_name)),
        Var::MultipartFilename => scalar(out, var, Cow::Borrowed(&r.multipart_filename)),
        Var::MultipartBoundaryQuoted
        | Var::MultipartBoundaryWhitespace
        | Var::MultipartCrlfLfLines
        | Var::MultipartDataAfter
        | Var::MultipartDataBefore
        | Var::MultipartFileLimitExceeded
        | Var::MultipartHeaderFolding
        | Var::MultipartInvalidHeaderFolding
        | Var::MultipartInvalidPart
        | Var::MultipartInvalidQuoting
        | Var::MultipartLfLine
        | Var::MultipartMissingSemicolon
        | Var::MultipartSemicolonMissing
        | Var::MultipartStrictError => {
            let alias = if var == Var::MultipartSemicolonMissing { Var::MultipartMissingSemicolon } else { var };
            let set = r.multipart_flags.contains(&alias);
            scalar(out, var, Cow::Borrowed(if set { b"1" } else { b"0" }));
        }
        Var::MultipartUnmatchedBoundary => {
            scalar(out, var, Cow::Owned(r.multipart_unmatched_boundary.to_string().into_bytes()));
        }
        Var::ReqbodyProcessorError => scalar(out, var, Cow::Borrowed(if r.reqbody_error { b"1" } else { b"0" })),
        Var::ReqbodyProcessorErrorMsg => scalar(out, var, Cow::Borrowed(&r.reqbody_error_msg)),
        Var::UrlencodedError => scalar(out, var, Cow::Borrowed(if r.urlencoded_error { b"1" } else { b"0" })),
        Var::InboundDataError => scalar(out, var, Cow::Borrowed(if r.inbound_data_error { b"1" } else { b"0" })),
        Var::OutboundDataError => scalar(out, var, Cow::Borrowed(if r.outbound_data_error { b"1" } else { b"0" })),
        Var::FullRequest => scalar(out, var, Cow::Owned(r.full_request())),
        Var::FullRequestLength => scalar(out, var, Cow::Owned(r.full_request().len().to_string().into_bytes())),
        Var::StatusLine => {
            if r.response_status != 0 {
                scalar(out, var, Cow::Owned(format!("{} {}", r.response_protocol, r.response_status).into_bytes()));
            }
        }
        Var::AuthType => {
            if let Some((_, v)) = r.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(b"authorization")) {
                let kind = v.split(|&b| b == b' ').next().unwrap_or_default();
                scalar(out, var, Cow::Borrowed(kind));
            }
        }
        Var::PathInfo => scalar(out, var, Cow::Borrowed(&r.filename)),
        Var::RemoteHost => scalar(out, var, Cow::Borrowed(r.client_ip.as_bytes())),
        Var::RemoteUser | Var::Userid | Var::Sessionid => {}
        Var::HighestSeverity => scalar(out, var, Cow::Owned(t.highest_severity.to_string().into_bytes())),
        Var::Rule => {
            if let Some(rule) = rule {
                let ctx = Ctx::new(t, Some(rule));
                for k in ["id", "msg", "severity", "logdata", "ver", "rev", "phase"] {
                    if target.sel.matches(k.as_bytes()) {
                        out.push(Value { name: VName::Owned(format!("RULE:{k}")), value: Cow::Owned(ctx.lookup("RULE", Some(k))), stable: false });
                    }
                }
            }
        }
        Var::Time | Var::TimeDay | Var::TimeEpoch | Var::TimeHour | Var::TimeMin | Var::TimeMon | Var::TimeSec | Var::TimeWday | Var::TimeYear => {
            scalar(out, var, Cow::Owned(super::time::value(var, t.now_ms).into_bytes()));
        }
        Var::MscPcreLimitsExceeded => scalar(out, var, Cow::Borrowed(b"0")),
    }
    finish_count(out, start, target, name);
}

/// `&VAR`: replaces the values collected since `start` by their count.
fn finish_count(out: &mut Vec<Value<'_>>, start: usize, target: &Target, name: &'static str) {
    if target.count {
        let n = out.len() - start;
        out.truncate(start);
        // Small counts (most: `&REQUEST_HEADERS:Content-Type`) from a table, not a new string.
        let value = match DIGITS.get(n) {
            Some(d) => Cow::Borrowed(d.as_bytes()),
            None => Cow::Owned(n.to_string().into_bytes()),
        };
        out.push(Value { name: VName::Count(name), value, stable: false });
    }
}

/// The numbers 0 to 9 as text.
const DIGITS: [&str; 10] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"];

/// Macro expansion context: the transaction and the rule being run.
pub(crate) struct Ctx<'a> {
    pub t: &'a Transaction,
    pub rule: Option<&'a Rule>,
    /// The last operator parameter expanded (by its address): one expansion per link
    /// evaluation, not one per value (`@within %{tx.restricted_headers_basic}` on 16 headers).
    param_memo: std::cell::OnceCell<(usize, Vec<u8>)>,
}

impl<'a> Ctx<'a> {
    pub(crate) fn new(t: &'a Transaction, rule: Option<&'a Rule>) -> Ctx<'a> {
        Ctx { t, rule, param_memo: std::cell::OnceCell::new() }
    }
}

impl Expand for Ctx<'_> {
    fn expand(&self, parts: &[MacroPart]) -> Vec<u8> {
        let mut out = Vec::new();
        self.expand_into(parts, &mut out);
        out
    }

    fn param<'b>(&'b self, parts: &[MacroPart]) -> Cow<'b, [u8]> {
        let key = parts.as_ptr() as usize;
        match self.param_memo.get() {
            Some((k, v)) if *k == key => Cow::Borrowed(v),
            Some(_) => Cow::Owned(self.expand(parts)),
            None => Cow::Borrowed(&self.param_memo.get_or_init(|| (key, self.expand(parts))).1),
        }
    }
}

impl Ctx<'_> {
    /// [`Expand::expand`] appended to `out`; `%{tx.x}` copied straight from the variable.
    fn expand_into(&self, parts: &[MacroPart], out: &mut Vec<u8>) {
        for p in parts {
            match p {
                MacroPart::Lit(s) => out.extend_from_slice(s.as_bytes()),
                MacroPart::Var { name, key: Some(k) } if name.eq_ignore_ascii_case("tx") && !k.bytes().any(|b| b.is_ascii_uppercase()) => {
                    if let Some(v) = self.t.tx.get(k.as_str()) {
                        out.extend_from_slice(v);
                    }
                }
                MacroPart::Var { name, key } => out.extend_from_slice(&self.lookup(name, key.as_deref())),
            }
        }
    }

    fn lookup(&self, name: &str, key: Option<&str>) -> Vec<u8> {
        if name.eq_ignore_ascii_case("rule") {
            let Some(rule) = self.rule else { return Vec::new() };
            return match key.unwrap_or("").to_ascii_lowercase().as_str() {
                "id" => rule.id.to_string().into_bytes(),
                "msg" => rule.msg.as_ref().map(|m| self.expand(m)).unwrap_or_default(),
                "severity" => rule.severity.map(|s| s.to_string().into_bytes()).unwrap_or_default(),
                "logdata" => rule.logdata.as_ref().map(|m| self.expand(m)).unwrap_or_default(),
                "ver" => rule.ver.clone().unwrap_or_default().into_bytes(),
                "rev" => rule.rev.clone().unwrap_or_default().into_bytes(),
                "phase" => rule.phase.to_string().into_bytes(),
                _ => Vec::new(),
            };
        }
        // The common case (`%{tx.critical_anomaly_score}` in setvars): one lookup, no parsing.
        if let (true, Some(k)) = (name.eq_ignore_ascii_case("tx"), key) {
            let v = if k.bytes().any(|b| b.is_ascii_uppercase()) {
                self.t.tx.get(k.to_ascii_lowercase().as_str())
            } else {
                self.t.tx.get(k)
            };
            return v.cloned().unwrap_or_default();
        }
        let Some(var) = Var::from_name(name) else { return Vec::new() };
        let sel = match key {
            Some(k) if var.is_collection() => KeySel::Key(k.to_ascii_lowercase()),
            _ => KeySel::All,
        };
        let target = Target { var, sel, count: false, exclude: Vec::new() };
        let mut vals = Vec::new();
        collect(self.t, &target, None, &mut vals);
        vals.into_iter().next().map(|v| v.value.into_owned()).unwrap_or_default()
    }
}

/// What one matched value recorded.
#[derive(Default)]
struct Hit {
    name: String,
    value: Vec<u8>,
    has_captures: bool,
    captures: Vec<Vec<u8>>,
}

/// Runs the operator of `link` on one (transformed) value, using the
/// prefilter and the libinjection memo when the value is stable.
fn op_matches(t: &Transaction, link: &Rule, ctx: &Ctx<'_>, v: &Val<'_>, stable: bool, caps: &mut Captures, prefilter: bool) -> bool {
    caps.0.clear();
    if let (true, Some(req)) = (prefilter, &link.prefilter) {
        let possible = if stable {
            t.cache.borrow_mut().scan(v, &t.rs.prefilter).satisfies(req)
        } else {
            Scan::new(v.bytes(), &t.rs.prefilter).satisfies(req)
        };
        if !possible {
            bump(&t.probe.skipped);
            return link.negated;
        }
    }
    bump(&t.probe.ran);
    let m = match (&link.operator, stable) {
        (Operator::DetectSqli, true) => match t.cache.borrow_mut().sqli(v) {
            Some(fp) => {
                if link.capture {
                    caps.0 = vec![fp.as_bytes().to_vec()];
                }
                true
            }
            None => false,
        },
        (Operator::DetectXss, true) => t.cache.borrow_mut().xss(v),
        _ => link.operator.eval(v.bytes(), ctx, link.capture, caps),
    };
    m != link.negated
}

/// Applies one transformation (memoized for stable values). The flag says
/// whether the value changed.
fn step<'a>(t: &Transaction, stable: bool, cur: Val<'a>, tf: crate::transforms::Transform) -> (Val<'a>, bool) {
    if stable {
        let before = cur.bytes().as_ptr();
        let next = t.cache.borrow_mut().apply(cur, tf);
        let changed = next.bytes().as_ptr() != before;
        (next, changed)
    } else {
        match tf.apply(cur.bytes()) {
            Cow::Borrowed(_) => (cur, false),
            Cow::Owned(o) => (Val::R(std::rc::Rc::from(o)), true),
        }
    }
}

/// Which runtime target removals (ctl:ruleRemoveTarget*) concern this rule, one bit each:
/// rules with the same ones share a list (e.g. all 941xxx after 941010). None past 32.
fn removal_mask(t: &Transaction, head: &Rule) -> Option<u32> {
    if !affected(t, head.index) {
        return Some(0);
    }
    let mut mask = 0u32;
    for (i, r) in t.removed_targets.iter().enumerate() {
        if r.applies_to(head) {
            if i >= 32 {
                return None;
            }
            mask |= 1 << i;
        }
    }
    Some(mask)
}

/// The prepared values of a link whose targets are phase-stable: built by the
/// first rule with these targets and chain in this phase, reused by the rest.
/// None when this link cannot use the shared list.
fn group(t: &Transaction, link: &Rule, head: &Rule) -> Option<std::rc::Rc<Group>> {
    let sig = link.target_sig?;
    let mask = removal_mask(t, head)?;
    let sig = sig.wrapping_mul(0x9e37_79b9) ^ mask;
    // A multiMatch group holds every changed intermediate value, not only the final ones.
    let key = (sig, link.chain_id ^ if link.multi_match { 0x8000_0000 } else { 0 });
    // Without removals the group has a slot of its own (the same key, numbered at load time).
    let slot = link.group_slot.filter(|_| mask == 0).map(|s| s as usize);
    let found = match slot {
        Some(s) => t.cache.borrow().slots.get(s).cloned().flatten(),
        None => t.cache.borrow().groups.get(&key).cloned(),
    };
    if let Some(g) = found {
        let mut cache = t.cache.borrow_mut();
        cache.stats.groups_reused += 1;
        if let Some(s) = cache.group_stats.as_mut().and_then(|m| m.get_mut(&key)) {
            s.reused += 1;
        }
        return Some(g);
    }
    // Values of the request line, cookies and body only, from the same sources as when the
    // slot's record was made: its group, without collecting and comparing the lists.
    let gen = slot.zip(link.sources).and_then(|(_, src)| t.source_generation(src == Source::LineAndBody));
    if let (Some(s), Some(gen)) = (slot, gen) {
        let known = t.memo.borrow().group_of_gen(s, gen);
        if let Some(g) = known {
            let mut cache = t.cache.borrow_mut();
            cache.stats.groups_recorded += 1;
            cache.stats.groups_whole += 1;
            cache.stats.groups_by_gen += 1;
            cache.stats.groups_built += 1;
            cache.hold_group(&g);
            cache.fill_slot(s, g.clone());
            return Some(g);
        }
    }
    let list = raw_list(t, sig, mask, link, head)?;
    let mut cache = t.cache.borrow_mut();
    let mut memo = t.memo.borrow_mut();
    // The memo's record of the slot serves a group with removals too: a record describes
    // exactly the values it was made from (compared one by one), whichever removals left them.
    let slot32 = link.group_slot;
    let most = super::cache::near_most(list.len());
    let mut seeded = None;
    let mut near = false;
    let g = match memo.group_record(slot32, &list, most, &mut cache.record_diffs) {
        // The same values as the last group of this slot: its changed values, union and
        // operators known false on all values.
        Some((rec, at)) if at.is_empty() && rec.group.as_ref().is_some_and(|g| std::rc::Rc::ptr_eq(&g.raw, &list)) => {
            cache.stats.groups_recorded += 1;
            cache.stats.groups_whole += 1;
            let g = rec.group.clone()?;
            cache.hold_group(&g);
            g
        }
        // A few values differ (Envoy's new x-request-id, a changed argument): the record's
        // changed values at the other places, the chain at these; what the record knows of
        // its values holds for the ones kept (see `Group::seed`).
        Some((rec, at)) if !at.is_empty() => {
            cache.stats.groups_near += 1;
            let mut fresh = Vec::new();
            for &i in &at {
                let Some(item) = list.get(i) else { continue };
                if item.v.raw.len() <= 4096 && untouched(&item.v.bytes, &link.chain_trigger) {
                    continue;
                }
                cache.prepare(&item.v, link.chain_id, link.multi_match, &link.transforms, &link.step_triggers, &mut memo, &mut |e| fresh.push((i, e)));
            }
            let g = cache.new_group(list.clone(), link.multi_match, slot32, |cache, changed| {
                let mut fresh = fresh.into_iter().peekable();
                for (i, e) in rec.changed.iter().filter(|(i, _)| at.binary_search(i).is_err()) {
                    while let Some(f) = fresh.next_if(|(j, _)| j < i) {
                        changed.push(f);
                    }
                    cache.hold(e.clone());
                    changed.push((*i, e.clone()));
                }
                changed.extend(fresh);
            });
            let new_values = g.seed(&rec, &at, slot_words(t, link.group_slot));
            seeded = rec.union.clone().map(|u| (u, new_values));
            if rec.open_at(&at, &list) {
                // Only values that are not memo entries differ, at places the record leaves
                // empty: the record describes this group as well as it did the last one (its
                // facts hold for the places it has), and learns what this group's rules find.
                g.record.set(rec.id);
            } else {
                near = true;
            }
            g
        }
        Some((rec, _)) => {
            cache.stats.groups_recorded += 1;
            let g = cache.new_group(list.clone(), link.multi_match, slot32, |cache, changed| {
                for (i, e) in &rec.changed {
                    cache.hold(e.clone());
                    changed.push((*i, e.clone()));
                }
            });
            if let Some(u) = &rec.union {
                let _ = g.union.set(u.clone());
            }
            g.fails.borrow_mut().clone_from(&rec.fails);
            g.record.set(rec.id);
            drop(rec);
            memo.keep_group(&g);
            g
        }
        None => {
            let g = cache.new_group(list.clone(), link.multi_match, slot32, |cache, changed| {
                // No transformation (t:none): no value changes,
                // nothing to look at one by one.
                if link.transforms.is_empty() {
                    cache.stats.chains_untouched += list.len() as u64;
                    return;
                }
                for (i, item) in list.iter().enumerate() {
                    if item.v.raw.len() <= 4096 && untouched(&item.v.bytes, &link.chain_trigger) {
                        cache.stats.chains_untouched += 1;
                        continue;
                    }
                    // As the per-value path; for multiMatch, each step whose result differs from its input.
                    cache.prepare(&item.v, link.chain_id, link.multi_match, &link.transforms, &link.step_triggers, &mut memo, &mut |e| changed.push((i, e)));
                }
            });
            memo.record_group(&g, &mut cache);
            g
        }
    };
    cache.stats.groups_built += 1;
    drop(cache);
    if let Some((mut u, values)) = seeded {
        // The record's union (a superset for the values kept) and the new values' scans.
        for e in &values {
            u.union_with(e.scan(&t.cache, &t.rs.prefilter).satisfied());
        }
        let _ = g.union.set(u);
    }
    if near {
        memo.record_group(&g, &mut t.cache.borrow_mut());
    }
    if let (Some(s), Some(gen)) = (slot, gen) {
        memo.tag_group(s, &g, gen);
    }
    drop(memo);
    let mut cache = t.cache.borrow_mut();
    if let Some(m) = cache.group_stats.as_mut() {
        let s = m.entry(key).or_insert_with(|| super::profile::GroupStat { name: super::profile::group_name(link), ..Default::default() });
        s.built += 1;
        s.values += g.raw.len() as u64;
    }
    if !slot.is_some_and(|s| cache.fill_slot(s, g.clone())) {
        cache.groups.insert(key, g.clone());
    }
    Some(g)
}

/// The collected values of a target list (by signature), once per phase: the concatenation
/// of its targets' values, each target collected once per phase whatever lists it is in.
fn raw_list(t: &Transaction, sig: u32, mask: u32, link: &Rule, head: &Rule) -> Option<std::rc::Rc<Vec<RawItem>>> {
    if let Some(l) = t.cache.borrow().lists.get(&sig) {
        return Some(l.clone());
    }
    if link.target_sigs.len() != link.targets.len() {
        return None;
    }
    let l = if let ([target], [ts]) = (link.targets.as_slice(), link.target_sigs.as_slice()) {
        target_items(t, *ts, mask, target, head)?
    } else {
        // The parts in the cache's scratch vector (given back emptied, also on failure).
        let mut parts = std::mem::take(&mut t.cache.borrow_mut().parts);
        parts.clear();
        let l = concat(t, sig, mask, link, head, &mut parts);
        parts.clear();
        t.cache.borrow_mut().parts = parts;
        l?
    };
    t.cache.borrow_mut().lists.insert(sig, l.clone());
    Some(l)
}

/// The list of a rule's targets (`parts` empty, for their lists): their lists concatenated.
fn concat(t: &Transaction, sig: u32, mask: u32, link: &Rule, head: &Rule, parts: &mut Vec<std::rc::Rc<Vec<RawItem>>>) -> Option<std::rc::Rc<Vec<RawItem>>> {
    for (target, ts) in link.targets.iter().zip(&link.target_sigs) {
        parts.push(target_items(t, *ts, mask, target, head)?);
    }
    // The very same lists as last time: the same concatenation (whose identity lets the
    // memo's group record give its group whole).
    if let Some(l) = t.memo.borrow().last_concat(sig, parts) {
        return Some(l);
    }
    let mut out = t.cache.borrow_mut().new_list();
    let list = std::rc::Rc::get_mut(&mut out)?;
    list.reserve(parts.iter().map(|p| p.len()).sum());
    for p in parts.iter() {
        list.extend(p.iter().cloned());
    }
    t.memo.borrow_mut().keep_concat(sig, parts, &link.target_sigs, mask, &out);
    Some(out)
}

/// The collected values of one target (by id and the removals that apply), once per phase.
fn target_items(t: &Transaction, ts: u32, mask: u32, target: &Target, head: &Rule) -> Option<std::rc::Rc<Vec<RawItem>>> {
    if let Some(l) = t.cache.borrow().targets.get(&(ts, mask)) {
        return Some(l.clone());
    }
    // A list of ARGS, cookies or a part of the request line collected from the very same
    // request line, cookies, body and removals as now: the same list (a body that comes again
    // is not collected and compared per target again).
    let source = t.rs.target_sources.get(ts as usize).copied().unwrap_or(Source::Other);
    let sourced = source != Source::Other;
    let gen = if sourced { t.source_generation(source == Source::LineAndBody) } else { None };
    if let Some(l) = gen.and_then(|g| t.memo.borrow().last_list_of((ts, mask), g)) {
        let mut cache = t.cache.borrow_mut();
        cache.hold_list(&l);
        cache.targets.insert((ts, mask), l.clone());
        return Some(l);
    }
    // The scratch list of `eval_link` (not in use here: lists are built before it runs).
    let mut values: Vec<Value<'_>> = recycle(std::mem::take(&mut *t.values_scratch.borrow_mut()));
    collect(t, target, Some(head), &mut values);
    let mut cache = t.cache.borrow_mut();
    let mut memo = t.memo.borrow_mut();
    // The last list of this target: its items serve where the bytes are the same at the same
    // place (a header, a cookie, an argument that came in the last request too), without a
    // lookup; the same list whole is taken as it is.
    let last = memo.last_list((ts, mask));
    let mut l = cache.new_list();
    let mut complete = false;
    // While `same`, every value so far is the last list's at its place: nothing pushed yet.
    let mut same = last.as_ref().is_some_and(|p| p.len() == values.len());
    if let Some(out) = std::rc::Rc::get_mut(&mut l) {
        let mut done = 0;
        for (j, v) in values.iter().enumerate() {
            let (prefix, key) = match (&v.name, &v.value, v.stable) {
                (VName::Plain(n), Cow::Borrowed(_), true) => (*n, None),
                (VName::Keyed(n, k), Cow::Borrowed(_), true) => (*n, Some(*k)),
                _ => break,
            };
            let same_key = |p: &RawItem| match (p.key.as_deref(), key) {
                (Some(a), Some(b)) => same_bytes(a, b),
                (a, b) => a.is_none() && b.is_none(),
            };
            let prev = last.as_ref().and_then(|p| p.get(j)).filter(|p| same_bytes(p.prefix.as_bytes(), prefix.as_bytes()) && same_key(p) && same_bytes(&p.v.raw, &v.value));
            done = j + 1;
            match (same, prev) {
                (true, Some(_)) => continue,
                (true, None) => {
                    same = false;
                    out.extend(last.iter().flat_map(|p| p.iter().take(j)).cloned());
                }
                (false, Some(p)) => {
                    out.push(p.clone());
                    continue;
                }
                (false, None) => {}
            }
            let key = key.map(|k| cache.intern(k, &mut memo).raw.clone());
            let v = cache.intern(&v.value, &mut memo);
            out.push(RawItem { prefix, key, v });
        }
        complete = done == values.len() && (same || out.len() == values.len());
    }
    *t.values_scratch.borrow_mut() = recycle(values);
    if !complete {
        return None;
    }
    let l = match (same, last) {
        (true, Some(p)) => {
            cache.return_list(l);
            p
        }
        _ => {
            memo.keep_list((ts, mask), &l);
            l
        }
    };
    if sourced {
        memo.tag_list((ts, mask), &l, gen);
    }
    // Its values stay alive to the end of the transaction: the address-keyed tables key
    // them, and the memo may let them go before (another request's list, a retired
    // generation); an address reused by other bytes must never find their entries.
    cache.hold_list(&l);
    cache.targets.insert((ts, mask), l.clone());
    Some(l)
}

/// The words (first, last) of the memo bits that the rules of group slot `slot` have; all of
/// them without a slot.
fn slot_words(t: &Transaction, slot: Option<u32>) -> (u32, u32) {
    slot.and_then(|s| t.rs.slot_words.get(s as usize)).copied().unwrap_or((0, (t.rs.memo_bits / 64) as u32))
}

/// What any value of `g` may satisfy (see [`Group::union`]). A superset is as good (sound)
/// and cheaper: the union of the whole raw list (shared by every group over it) and of the
/// values the chain changed.
fn group_union<'g>(t: &Transaction, g: &'g Group) -> &'g Satisfied {
    g.union.get_or_init(|| {
        let key = std::rc::Rc::as_ptr(&g.raw) as usize;
        let known = t.cache.borrow().list_unions.get(&key).cloned();
        let mut u = known.unwrap_or_else(|| {
            let mut u = Satisfied::none(t.rs.prefilter.words);
            for item in g.raw.iter() {
                u.union_with(item.v.scan(&t.cache, &t.rs.prefilter).satisfied());
            }
            t.cache.borrow_mut().list_unions.insert(key, u.clone());
            u
        });
        for (_, p) in &g.changed {
            u.union_with(p.scan(&t.cache, &t.rs.prefilter).satisfied());
        }
        t.memo.borrow_mut().keep_union(g, &u);
        u
    })
}

/// Evaluates one link of a chain; returns its hits (empty = no match).
fn eval_link(t: &Transaction, link: &Rule, head: &Rule, hits: &mut HitPool) {
    hits.n = 0;
    if let Some(g) = group(t, link, head) {
        // Known false on every value (the operator is not negated): no value can match.
        if !link.negated && link.memo_bit.is_some_and(|b| g.all_failed(b)) {
            let n = g.len() as u64;
            t.probe.values.set(t.probe.values.get().wrapping_add(n));
            t.probe.skipped.set(t.probe.skipped.get().wrapping_add(n));
            return;
        }
        if let (Some(req), false) = (&link.prefilter, link.negated) {
            if g.len() >= UNION_MIN && !group_union(t, &g).has(*req) {
                // No value can match (the operator is not negated).
                if let Some(b) = link.memo_bit {
                    t.memo.borrow_mut().all_failed(&g, b);
                }
                let n = g.len() as u64;
                t.probe.values.set(t.probe.values.get().wrapping_add(n));
                t.probe.skipped.set(t.probe.skipped.get().wrapping_add(n));
                return;
            }
        }
        let ctx = Ctx::new(t, Some(head));
        let mut caps = Captures::default();
        // A large group: when the operator is known false on every value the memo has
        // recorded, only the values it has not (see `Group::known`) can match.
        let known = match (link.memo_bit, link.negated, g.seeded()) {
            (Some(b), false, Some(k)) => Some(k).filter(|k| k.failed(b)),
            (Some(b), false, None) if g.len() >= KNOWN_MIN => Some(g.known(slot_words(t, g.slot))).filter(|k| k.failed(b)),
            _ => None,
        };
        if let Some(k) = known {
            let passed = (g.len() - k.fresh.len()) as u64;
            t.probe.values.set(t.probe.values.get().wrapping_add(passed));
            t.probe.skipped.set(t.probe.skipped.get().wrapping_add(passed));
        }
        for (item, e) in g.values_to_run(known) {
            bump(&t.probe.values);
            let name = |o: &mut String| write_name(item.prefix, &item.key, o);
            let known_false = link.memo_bit.is_some_and(|b| e.failed(b));
            let possible = !known_false && link.prefilter.as_ref().is_none_or(|req| e.scan(&t.cache, &t.rs.prefilter).satisfies(req));
            let m = if possible {
                op_matches(t, link, &ctx, &Val::R(e.raw.clone()), true, &mut caps, false) != link.negated
            } else {
                bump(&t.probe.skipped);
                caps.0.clear();
                false
            };
            if !m {
                if let (false, Some(b)) = (known_false, link.memo_bit) {
                    e.set_failed(b);
                }
            }
            if m != link.negated {
                hits.push(&name, &e.raw, link.capture.then_some(&caps.0[..]));
            }
        }
        if let (0, false, Some(b)) = (hits.n, link.negated, link.memo_bit) {
            t.memo.borrow_mut().all_failed(&g, b);
        }
        return;
    }
    bump(&t.probe.unshared);
    let ctx = Ctx::new(t, Some(head));
    // The list's allocation is reused from one evaluation to the next (see `recycle`).
    let mut values: Vec<Value<'_>> = recycle(std::mem::take(&mut *t.values_scratch.borrow_mut()));
    if link.targets.is_empty() {
        // SecAction, or a rule without targets: one empty value.
        values.push(Value { name: VName::Plain(""), value: Cow::Borrowed(&b""[..]), stable: false });
    }
    for target in &link.targets {
        collect(t, target, Some(head), &mut values);
    }
    let mut caps = Captures::default();
    for item in &values {
        bump(&t.probe.values);
        let record = |v: &Val<'_>, hits: &mut HitPool, caps: &Captures| {
            hits.push(&|o: &mut String| item.name.write(o), v.bytes(), link.capture.then_some(&caps.0[..]));
        };
        let (base, stable) = match &item.value {
            Cow::Borrowed(b) if item.stable => (Val::B(b), true),
            other => (Val::B(other.as_ref()), false),
        };
        let mut cur = base;
        if link.multi_match {
            multi_hits(t, link, &ctx, cur, stable, &mut caps, |v, caps| {
                record(v, hits, caps);
                false
            });
        } else if stable {
            let (v, hit) = stable_hit(t, link, &ctx, cur, &mut caps);
            if hit {
                record(&v, hits, &caps);
            }
        } else {
            if !link.transforms.is_empty() && !untouched(&byte_set(cur.bytes()), &link.chain_trigger) {
                for tf in &link.transforms {
                    cur = step(t, stable, cur, *tf).0;
                }
            }
            if op_matches(t, link, &ctx, &cur, stable, &mut caps, true) {
                record(&cur, hits, &caps);
            }
        }
    }
    *t.values_scratch.borrow_mut() = recycle(values);
}

/// An emptied list of values with a new lifetime, in the same allocation (`Vec`'s in-place
/// collection: the element types have one layout). `filter` would keep the old lifetime, which
/// the 'static scratch slot cannot hold.
#[allow(clippy::unnecessary_filter_map)]
fn recycle<'b>(mut v: Vec<Value<'_>>) -> Vec<Value<'b>> {
    v.clear();
    v.into_iter().filter_map(|_| None).collect()
}

/// Every bit of `Transaction::tx_digits`: each capture slot possibly present.
pub(crate) const ALL_DIGITS: u16 = (1 << 10) - 1;

/// The bit of `Transaction::tx_digits` for `key` when it is a capture slot (`0` .. `9`), else 0.
fn digit_bit(key: &str) -> u16 {
    match key.as_bytes() {
        [d @ b'0'..=b'9'] => 1 << (d - b'0'),
        _ => 0,
    }
}

/// `TX:0` .. `TX:9`, the capture slots.
const CAPTURE_KEYS: [&str; 10] = DIGITS;

/// Runs a rule (with its chain). Returns the decision if it matched.
///
/// As in ModSecurity v3, each matched value of a link immediately updates the
/// captures (`TX:0-9`), `MATCHED_VAR*` and runs that link's `setvar`s (so a
/// chain head's `setvar` is visible to the next link). `ctl`, `msg`/`logdata`
/// expansion (with the last link's captures, as the CRS tests expect), logging
/// and the disruptive action wait for the whole chain.
fn eval_rule(t: &mut Transaction, rule: &Rule, phase: u8) -> Option<Disruptive> {
    if t.profile.is_none() {
        return eval_rule_inner(t, rule, phase);
    }
    let before = (t.probe.values.get(), t.probe.skipped.get(), t.probe.ran.get(), t.probe.unshared.get());
    let start = std::time::Instant::now();
    let decision = eval_rule_inner(t, rule, phase);
    let nanos = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let after = (t.probe.values.get(), t.probe.skipped.get(), t.probe.ran.get(), t.probe.unshared.get());
    if let Some(p) = t.profile.as_mut() {
        p.rules.entry(rule.id).or_default().add(&super::profile::RuleStat {
            phase,
            evals: 1,
            values: after.0.wrapping_sub(before.0),
            skipped: after.1.wrapping_sub(before.1),
            ran: after.2.wrapping_sub(before.2),
            matched: u64::from(decision.is_some()),
            unshared: after.3.wrapping_sub(before.3),
            nanos,
        });
    }
    decision
}

fn eval_rule_inner(t: &mut Transaction, rule: &Rule, phase: u8) -> Option<Disruptive> {
    t.matched.n = 0;
    let mut pool = std::mem::take(&mut t.hit_pool);
    let mut link = Some(rule);
    t.head_hits = false;
    while let Some(l) = link {
        eval_link(t, l, rule, &mut pool);
        if pool.n == 0 {
            t.hit_pool = pool;
            return None;
        }
        t.head_hits = true;
        let last = pool.n.saturating_sub(1);
        for (k, h) in pool.hits.iter().take(pool.n).enumerate() {
            // Only this link's setvars could read a hit's captures before the next hit
            // replaces them: without setvars, the last hit's captures are the ones kept.
            if h.has_captures && (k == last || !l.setvars.is_empty()) {
                for (i, key) in CAPTURE_KEYS.iter().enumerate() {
                    match h.captures.get(i) {
                        Some(v) => tx_set(t, key, v),
                        None => tx_remove(t, key),
                    }
                }
            }
            t.matched.record(&h.name, &h.value);
            for sv in &l.setvars {
                apply_setvar(t, rule, sv);
            }
        }
        link = l.chain.as_deref();
    }
    t.hit_pool = pool;
    // Every link matched (a link without hits returned above).
    apply_ctls(t, rule);
    if let Some(sev) = rule.severity {
        t.highest_severity = t.highest_severity.min(sev);
    }
    if rule.log {
        let line = log::rule_line(t, rule, phase);
        t.logs.push(line);
    }
    Some(rule.disruptive.clone())
}

fn apply_setvar(t: &mut Transaction, rule: &Rule, sv: &crate::actions::SetVar) {
    if sv.collection != "tx" {
        apply_persistent(t, rule, sv);
        return;
    }
    // The expanded value goes to a buffer kept by the transaction, then into the variable's
    // own allocation when it exists (most setvars update a score that exists).
    let mut value = std::mem::take(&mut t.setvar_buf);
    value.clear();
    // An expanded key (`tx.header_name_920450_%{tx.0}`) goes to another kept buffer.
    let mut key_buf = std::mem::take(&mut t.setvar_key_buf);
    key_buf.clear();
    let key = {
        let ctx = Ctx::new(t, Some(rule));
        // Most keys are literal (`tx.anomaly_score`): no expansion needed.
        let key = match sv.key.as_slice() {
            [MacroPart::Lit(k)] => Cow::Borrowed(k.as_str()),
            parts => {
                ctx.expand_into(parts, &mut key_buf);
                key_buf.make_ascii_lowercase();
                match std::str::from_utf8(&key_buf) {
                    Ok(k) => Cow::Borrowed(k),
                    Err(_) => Cow::Owned(String::from_utf8_lossy(&key_buf).into_owned()),
                }
            }
        };
        if let SetOp::Set(v) | SetOp::Add(v) | SetOp::Sub(v) = &sv.op {
            ctx.expand_into(v, &mut value);
        }
        if key.bytes().any(|b| b.is_ascii_uppercase()) {
            Cow::Owned(key.to_ascii_lowercase())
        } else {
            key
        }
    };
    match &sv.op {
        SetOp::Delete => tx_remove(t, &key),
        SetOp::Set(_) => tx_set(t, &key, &value),
        op @ (SetOp::Add(_) | SetOp::Sub(_)) => {
            let cur = t.tx.get(key.as_ref()).map(|c| crate::operators::to_int(c)).unwrap_or(0);
            let delta = crate::operators::to_int(&value);
            let n = if matches!(op, SetOp::Add(_)) { cur.saturating_add(delta) } else { cur.saturating_sub(delta) };
            value.clear();
            let _ = std::io::Write::write_fmt(&mut value, format_args!("{n}"));
            tx_set(t, &key, &value);
        }
        SetOp::Init(_) | SetOp::Expire(_) => {}
    }
    t.setvar_buf = value;
    t.setvar_key_buf = key_buf;
}

/// What a rule that wrote the TX keys in `written` (each after its length) did: their values now.
fn effect_of(t: &Transaction, written: &[u8], matched: bool) -> super::replay::Effect {
    let mut keys: Vec<&[u8]> = Vec::new();
    let mut rest = written;
    while let Some((len, tail)) = rest.split_first_chunk::<4>() {
        let n = u32::from_le_bytes(*len) as usize;
        let Some((key, tail)) = tail.split_at_checked(n) else { break };
        keys.push(key);
        rest = tail;
    }
    keys.sort_unstable();
    keys.dedup();
    // The keys were `&str`s: each is UTF-8 again.
    let writes = keys.into_iter().map(|k| String::from_utf8_lossy(k).into_owned()).map(|k| {
        let v = t.tx.get(&k).cloned();
        (k, v, Default::default())
    }).collect();
    super::replay::Effect { writes, matched }
}

/// Notes a write of `TX:key` while a rule's effect is recorded (see `replay`).
fn note_write(t: &mut Transaction, key: &str) {
    let Some(w) = t.replay.written.as_mut() else { return };
    match u32::try_from(key.len()) {
        Ok(n) => {
            w.extend_from_slice(&n.to_le_bytes());
            w.extend_from_slice(key.as_bytes());
        }
        // Not noted: no effect is kept for this rule.
        Err(_) => t.replay.written = None,
    }
}

/// Sets `TX:key` (a lowercase key), in its own allocation when it exists (or existed in an
/// earlier transaction: see `txmap`), else in a recycled key and value (see
/// `Transaction::tx_free`): the CRS sets ~100 TX variables per request.
fn tx_set(t: &mut Transaction, key: &str, value: &[u8]) {
    note_write(t, key);
    t.tx_gen = t.tx_gen.wrapping_add(1);
    t.tx_digits |= digit_bit(key);
    let (undo, n, base) = (&mut t.tx_undo, &mut t.tx_undo_n, &mut t.tx_base);
    t.tx.set(key, value, &mut t.tx_free, |old| undo_note(undo, n, base, key, old));
}

/// Deletes `TX:key`, keeping its allocations for the next new variable.
fn tx_remove(t: &mut Transaction, key: &str) {
    note_write(t, key);
    t.tx_gen = t.tx_gen.wrapping_add(1);
    // A capture slot known absent needs no lookup.
    let digit = digit_bit(key);
    if digit != 0 && t.tx_digits & digit == 0 {
        return;
    }
    t.tx_digits &= !digit;
    let (undo, n, base) = (&mut t.tx_undo, &mut t.tx_undo_n, &mut t.tx_base);
    t.tx.remove(key, |old| undo_note(undo, n, base, key, old));
}

/// Deletes every TX variable, keeping their allocations.
fn tx_clear(t: &mut Transaction) {
    // Not a write a rule's effect can be made of (not during rules: see `pre_undo`).
    t.replay.written = None;
    t.tx_base = None;
    t.tx_gen = t.tx_gen.wrapping_add(1);
    t.tx_digits = 0;
    t.tx.drain_into(&mut t.tx_free, super::recycle_tx_entry);
}

/// `initcol`, and `setvar` / `expirevar` on a persistent collection (see `persist`).
fn apply_persistent(t: &mut Transaction, rule: &Rule, sv: &crate::actions::SetVar) {
    use super::persist::{self, Change, Loaded};
    let now = t.now_ms;
    let (name, value) = {
        let ctx = Ctx::new(t, Some(rule));
        let name = String::from_utf8_lossy(&ctx.expand(&sv.key)).to_ascii_lowercase();
        let value = match &sv.op {
            SetOp::Set(v) | SetOp::Add(v) | SetOp::Sub(v) | SetOp::Init(v) | SetOp::Expire(v) => Some(ctx.expand(v)),
            SetOp::Delete => None,
        };
        (name, value)
    };
    if let SetOp::Init(_) = sv.op {
        // A second initcol of the same collection keeps the first (as ModSecurity).
        if t.collections.iter().any(|c| c.name == sv.collection) {
            return;
        }
        let key = String::from_utf8_lossy(&value.unwrap_or_default()).into_owned();
        let vars = t.store.as_ref().and_then(|s| s.load(&sv.collection, &key)).and_then(|b| persist::decode(&b, &key, now)).unwrap_or_default();
        t.collections.push(Loaded { name: sv.collection.clone(), key, vars, journal: Vec::new() });
        return;
    }
    // Without initcol the collection does not exist: the change is dropped (ModSecurity logs it).
    let Some(col) = t.collections.iter_mut().find(|c| c.name == sv.collection) else { return };
    let int = |v: &[u8]| crate::operators::to_int(v);
    let change = match (&sv.op, value) {
        (SetOp::Set(_), Some(v)) => Change::Set(name, v),
        (SetOp::Add(_), Some(v)) => Change::Add(name, int(&v)),
        (SetOp::Sub(_), Some(v)) => Change::Add(name, int(&v).saturating_neg()),
        (SetOp::Delete, _) => Change::Delete(name),
        (SetOp::Expire(_), Some(v)) => Change::Expire(name, now.saturating_add((int(&v).max(0) as u64).saturating_mul(1000))),
        _ => return,
    };
    persist::apply(&mut col.vars, &change);
    // Bounded: a transaction replays at most this many changes.
    if col.journal.len() < 1024 {
        col.journal.push(change);
    }
}

/// Whether a link of `rule` has ctls.
fn has_ctls(rule: &Rule) -> bool {
    std::iter::successors(Some(rule), |l| l.chain.as_deref()).any(|l| !l.ctls.is_empty())
}

/// The ctls of every link of `rule`, in order.
fn apply_ctls(t: &mut Transaction, rule: &Rule) {
    let mut link = Some(rule);
    while let Some(l) = link {
        for c in &l.ctls {
            apply_ctl(t, c);
        }
        link = l.chain.as_deref();
    }
}

fn apply_ctl(t: &mut Transaction, c: &Ctl) {
    // Target lists may depend on what a ctl changes (body variable, removals).
    t.cache.get_mut().clear_prepared();
    match c {
        Ctl::RuleEngine(m) => t.engine = *m,
        Ctl::RequestBodyAccess(b) => t.request_body_access = *b,
        Ctl::RequestBodyProcessor(p) => t.body_processor = Some(p.clone()),
        Ctl::ForceRequestBodyVariable(b) => t.force_request_body_variable = *b,
        Ctl::RuleRemoveById(ids) => {
            t.removed_ids.extend(ids.iter().copied());
            mark_ids(t, ids);
        }
        Ctl::RuleRemoveByTag(tag) => {
            // A tag no rule has removes nothing.
            if let Some(id) = t.rs.tag_id(tag) {
                t.removed_tags.push(id);
                mark_tag(t, id);
            }
        }
        Ctl::RuleRemoveTargetById(ids, target) => {
            t.removed_targets.push(TargetRemoval { origin: c as *const Ctl as usize, ids: ids.clone(), tag: None, var: target.var, sel: target.sel.clone() });
            mark_ids(t, ids);
        }
        Ctl::RuleRemoveTargetByTag(tag, target) => {
            let tag = t.rs.tag_id(tag);
            t.removed_targets.push(TargetRemoval { origin: c as *const Ctl as usize, ids: Vec::new(), tag, var: target.var, sel: target.sel.clone() });
            if let Some(tag) = tag {
                mark_tag(t, tag);
            }
        }
        Ctl::Ignored(_) => {}
    }
}

fn rule_removed(t: &Transaction, rule: &Rule) -> bool {
    // The lists first: the rule's fields are read only when some removal exists.
    (!t.removed_ids.is_empty() || !t.removed_tags.is_empty())
        && affected(t, rule.index)
        && (t.removed_ids.iter().any(|&(a, b)| (a..=b).contains(&rule.id)) || t.removed_tags.iter().any(|tag| rule.tag_ids.contains(tag)))
}

/// Whether a rule's quick record shows that it cannot match now (see `compile::quick`).
fn cannot_match(t: &Transaction, rs: &Ruleset, q: &Quick) -> bool {
    match *q {
        Quick::Eval | Quick::Pre => false,
        Quick::TxNum { key, id, cmp, n } | Quick::TxSkip { key, id, cmp, n } => !tx_num(t, rs, key, id).is_some_and(|v| cmp.holds(v, n)),
        Quick::Group { slot, req, bit } => {
            // Built in this phase by an earlier rule (slots are cleared with every phase and ctl).
            let cache = t.cache.borrow();
            let Some(Some(g)) = cache.slots.get(slot as usize) else { return false };
            // The union exists once a rule evaluated the group (groups of UNION_MIN values or more).
            g.len() == 0 || bit.is_some_and(|b| g.all_failed(b)) || req.is_some_and(|r| g.union.get().is_some_and(|u| !u.has(r)))
        }
    }
}

/// The number in `TX:key` (None: absent), from the transaction's cache while TX is unchanged
/// (the CRS checks its paranoia levels ~150 times per request).
fn tx_num(t: &Transaction, rs: &Ruleset, key: (u32, u32), id: u8) -> Option<i64> {
    let cell = t.tx_nums.get(usize::from(id));
    if let Some((gen, v)) = cell.map(std::cell::Cell::get) {
        if gen == t.tx_gen {
            return v;
        }
    }
    let v = t.tx.get(rs.quick.key(key)).map(|v| to_int(v));
    if let Some(c) = cell {
        c.set((t.tx_gen, v));
    }
    v
}

/// Whether some runtime removal may concern the rule numbered `n` (see `Transaction::affected`).
fn affected(t: &Transaction, n: u32) -> bool {
    t.affected.get(n as usize / 64).is_some_and(|w| w & (1u64 << (n % 64)) != 0)
}

/// Marks the rules numbered `ns` as concerned by a runtime removal.
fn mark(t: &mut Transaction, ns: impl Iterator<Item = u32>) {
    let words = t.rs.quick.rules.div_ceil(64);
    if t.affected.len() < words {
        t.affected.resize(words, 0);
    }
    for n in ns {
        if let Some(w) = t.affected.get_mut(n as usize / 64) {
            *w |= 1u64 << (n % 64);
        }
    }
}

/// Marks the rules whose ids are in `ranges`.
fn mark_ids(t: &mut Transaction, ranges: &[(u64, u64)]) {
    let rs = t.rs.clone();
    for &(a, b) in ranges {
        mark(t, rs.quick.ids(a, b));
    }
}

/// Marks the rules with the tag numbered `tag`.
fn mark_tag(t: &mut Transaction, tag: u32) {
    let rs = t.rs.clone();
    mark(t, rs.quick.tagged(tag).iter().copied());
}

/// Starts phase 1 from the TX its request-independent prefix leaves (see
/// [`Quick::Pre`]): computed by the first transaction of the rule set, then copied. Only from
/// an empty TX (nothing wrote TX before phase 1), else the prefix runs as usual.
pub(crate) fn pre_apply(t: &mut Transaction, rs: &std::sync::Arc<Ruleset>) {
    if rs.quick.pre_end == 0 || !t.tx.is_empty() {
        return;
    }
    let init = rs.init.get_or_init(|| prefix_tx(rs));
    t.tx_gen = t.tx_gen.wrapping_add(1);
    t.pre_upto = init.upto;
    match t.tx_kept.take() {
        // A map a finished transaction left at these values (see `Transaction::drop`).
        Some(kept) => {
            t.tx = kept;
            t.tx_digits = ALL_DIGITS;
        }
        None => {
            // Into the empty map: each key is new (the prefix's keys are distinct), one lookup each.
            t.tx.reserve(init.tx.len());
            for (k, v) in &init.tx {
                t.tx_digits |= digit_bit(k);
                t.tx.insert_base(k, v, &mut t.tx_free);
            }
        }
    }
    t.tx_base = Some(rs.uid);
    t.tx_undo_n = 0;
}

/// Notes, before base entry `TX:key` (one of the rule set's initial variables: see `txmap`)
/// changes or goes, what it was, so that the end of the transaction can put the map back to
/// the initial variables (see `Transaction::tx_base`; what the transaction added goes with its
/// generation). Past a bound the map is emptied at the end instead.
fn undo_note(undo: &mut Vec<super::TxUndo>, n: &mut usize, base: &mut Option<u64>, key: &str, old: &[u8]) {
    if base.is_none() {
        return;
    }
    if *n >= super::TX_UNDO_MAX {
        *base = None;
        return;
    }
    let fill = |u: &mut super::TxUndo| {
        u.key.clear();
        u.key.push_str(key);
        u.old.clear();
        u.old.extend_from_slice(old);
    };
    match undo.get_mut(*n) {
        Some(u) => fill(u),
        None => {
            let mut u = super::TxUndo::default();
            fill(&mut u);
            undo.push(u);
        }
    }
    *n += 1;
}

/// Undoes the transaction's TX changes, last first: the map then holds the rule set's initial
/// variables again, and its next transaction takes it instead of inserting them one by one
/// (`pre_apply`). False when it cannot (no initial values, or changes not all noted).
pub(crate) fn tx_restore(t: &mut Transaction) -> bool {
    let n = std::mem::take(&mut t.tx_undo_n);
    let mut undo = std::mem::take(&mut t.tx_undo);
    let rs = t.rs.clone();
    let restored = match rs.init.get().filter(|_| t.tx_base == Some(rs.uid)) {
        Some(init) => {
            for u in undo.iter().take(n).rev() {
                t.tx.restore_base(&u.key, &u.old, &mut t.tx_free);
            }
            t.tx.end(&mut t.tx_free, super::recycle_tx_entry);
            t.tx.len() == init.tx.len()
        }
        None => false,
    };
    // The buffers are kept for the next transactions: not a large value's, nor more than
    // `TX_UNDO_KEEP` of them (with `tx_free`, a spare keeps at most ~1.4 MB).
    for u in undo.iter_mut().take(n) {
        u.bound();
    }
    undo.truncate(super::TX_UNDO_KEEP);
    t.tx_undo = undo;
    restored
}

/// Runs phase 1's `Quick::Pre` rules on an empty request, in order, up to the first that
/// would do more than change TX (deny, log, severity) if it matched: that one matches for
/// every request, so it and the rest run as usual. The others' outcome is the same for every
/// request (they read only TX, which only they have written so far).
fn prefix_tx(rs: &std::sync::Arc<Ruleset>) -> crate::compile::Init {
    let mut t = Transaction::new(rs.clone(), String::new());
    let list = rs.phases.first().map_or(&[][..], Vec::as_slice);
    let quick = rs.quick.phases.first().map_or(&[][..], Vec::as_slice);
    let mut upto = 0;
    // (entry, TX before it) for the rules that may interrupt; TX before the rule that ended
    // the prefix by matching.
    let mut interrupts = Vec::new();
    let mut ended = None;
    let copy = |tx: &super::TxMap| tx.iter().map(|(k, v)| (k.clone(), v.clone())).collect::<Vec<_>>();
    while upto < rs.quick.pre_end {
        if let (Some(Entry::Rule(r)), Some(q)) = (list.get(upto), quick.get(upto)) {
            if !matches!(q, Quick::Pre) {
                if !matches!(r.disruptive, Disruptive::Pass) {
                    interrupts.push((upto, copy(&t.tx)));
                }
                upto += 1;
                continue;
            }
            let risky = !matches!(r.disruptive, Disruptive::Pass) || r.log || r.severity.is_some();
            let saved = risky.then(|| copy(&t.tx));
            if eval_rule_inner(&mut t, r, 1).is_some() && risky {
                ended = saved;
                break;
            }
        }
        upto += 1;
    }
    crate::compile::Init { upto, tx: ended.unwrap_or_else(|| copy(&t.tx)), before: interrupts }
}

/// Phase 1 stopped at entry `i` of its request-independent prefix: TX as the `Pre` rules
/// before `i` alone would have left it (see [`pre_apply`]).
fn pre_undo(t: &mut Transaction, rs: &Ruleset, i: usize) {
    let Some((_, tx)) = rs.init.get().and_then(|init| init.before.iter().find(|(at, _)| *at == i)) else { return };
    tx_clear(t);
    for (k, v) in tx {
        tx_set(t, k, v);
    }
}

/// Runs the rules of one phase. Returns the interruption decided, if any
/// (the caller applies it only when the engine is On).
pub(crate) fn run_phase(t: &mut Transaction, rs: &Ruleset, phase: u8) -> Option<Interruption> {
    let pidx = usize::from(phase - 1);
    let list = rs.phases.get(pidx)?;
    let mut i = 0;
    let mut skip = 0u32;
    // The reference reads no quick record: it evaluates every rule it reaches.
    let quick = match rs.settings.speed {
        Speed::Fast => rs.quick.phases.get(pidx).map_or(&[][..], Vec::as_slice),
        Speed::Reference => &[][..],
    };
    // Walked as the trace walked it, when its rules tested by value have no hits again.
    if let Some(run) = t.replay.run(phase) {
        if !run.probes.iter().any(|&e| probe_hits(t, rs, list, e)) {
            let mut ctls = run.ctls.iter().peekable();
            for (j, (_, e)) in run.effects.iter().enumerate() {
                redo(t, e);
                while let Some(&(_, entry)) = ctls.next_if(|c| c.0 as usize == j) {
                    if let Some(Entry::Rule(rule)) = list.get(entry as usize) {
                        apply_ctls(t, rule);
                    }
                }
            }
            if !(run.probes.is_empty() && run.effects.is_empty()) {
                t.matched.n = 0;
            }
            t.replay.adopt(phase, run);
            return None;
        }
    }
    while let Some(entry) = list.get(i) {
        // Applied with the TX phase 1 started from (also when profiling: a second run would
        // add to the counters again).
        if i < t.pre_upto && matches!(quick.get(i), Some(Quick::Pre)) {
            i += 1;
            continue;
        }
        // No hits in the last transaction, on the same data: none now (see `replay`). First,
        // over a run of such entries at once, as it needs neither the rules nor their quick
        // records' state; not a paranoia-level skip (never evaluated, never in the trace) nor
        // under a pending `skip`.
        if skip == 0 && t.replay.active {
            let to = t.replay.scan(i, pidx);
            if to > i {
                t.replay.passed += (to - i) as u64;
                i = to;
                continue;
            }
        }
        // A paranoia-level check: its skip when it holds, without evaluating it. It holds when
        // it held in the trace (it reads only TX, the trace's at this point: see `replay`),
        // else when its quick record says so and it is not removed.
        if let (0, None, Some(q @ Quick::TxSkip { .. }), Entry::Rule(rule)) = (skip, &t.profile, quick.get(i), entry) {
            if t.replay.traced_hit(rule.index) || (!cannot_match(t, rs, q) && !rule_removed(t, rule)) {
                // A hit (the replay passes it only where the trace had none).
                t.replay.record(rule.index, 0, true, false);
                (i, skip) = skip_from(rs, pidx, i, rule, list.len());
            } else {
                i += 1;
            }
            continue;
        }
        // From the rule's quick record first: most rules are passed without reading them.
        // (Not when profiling: the profile times each rule's whole evaluation.)
        if skip == 0 && t.profile.is_none() && quick.get(i).is_some_and(|q| cannot_match(t, rs, q)) {
            // Decided on data that may have changed (see `replay::Run`); no hits, where the
            // trace may have had some (its effects are then missing: the state departs).
            t.replay.plain = false;
            if let Entry::Rule(rule) = entry {
                let empty = t.replay.traced_effect(rule.index).is_some_and(|e| e.is_empty());
                t.replay.record(rule.index, 0, false, empty);
            }
            i += 1;
            continue;
        }
        let Entry::Rule(rule) = entry else {
            i += 1;
            continue;
        };
        if skip > 0 {
            skip -= 1;
            i += 1;
            continue;
        }
        if rule_removed(t, rule) {
            i += 1;
            continue;
        }
        let inputs = rs.quick.inputs.get(rule.index as usize).copied().unwrap_or(Inputs { head: u64::MAX, all: u64::MAX, by_value: false, tx_writes: false, quiet: false });
        // Reading all request headers when only some header values changed: tested on those.
        if t.replay.by_values(rule.index, &inputs).is_some_and(|at| !header_hits(t, rule, at)) {
            t.replay.probed(i);
            t.replay.passed += 1;
            t.matched.n = 0;
            i += 1;
            continue;
        }
        let decision = if let Some(e) = t.replay.effect(rule.index, inputs.all) {
            // What it did in the last transaction, on the same data and state: done again.
            redo(t, &e);
            t.matched.n = 0;
            t.replay.passed += 1;
            t.replay.record(rule.index, inputs.all, true, false);
            let matched = e.matched;
            if matched {
                if has_ctls(rule) {
                    t.replay.ctls_at(i);
                }
                apply_ctls(t, rule);
            }
            t.replay.keep_effect(rule.index, e);
            matched.then(|| rule.disruptive.clone())
        } else {
            // A rule whose only effect may be on TX: its writes are noted, to be done again,
            // and compared with the trace's where what it reads changed.
            t.replay.plain = false;
            let traced = t.replay.traced_effect(rule.index);
            if inputs.tx_writes && t.replay.worth_keeping() {
                t.replay.written = Some(std::mem::take(&mut t.replay.spare_written));
            }
            let before = t.replay.traced_hit(rule.index);
            let decision = eval_rule(t, rule, phase);
            // The phase's memo tables passed the memory budget: no more rules (the
            // transaction answers for it, see `Transaction::run_phase`).
            if t.cache.borrow().over_budget() {
                return None;
            }
            // Without hits here or there, the empty effect (see `Replay::record`).
            let mut as_traced = !t.head_hits && (!before || traced.as_ref().is_some_and(|p| p.is_empty()));
            if let Some(mut written) = t.replay.written.take() {
                if t.head_hits && (decision.is_none() || inputs.quiet) {
                    let e = effect_of(t, &written, decision.is_some());
                    as_traced = if before { traced.is_some_and(|p| p.same_as(&e)) } else { e.is_empty() };
                    t.replay.keep_effect(rule.index, std::rc::Rc::new(e));
                }
                written.clear();
                t.replay.spare_written = written;
            }
            t.replay.record(rule.index, inputs.all, t.head_hits, as_traced);
            decision
        };
        let Some(decision) = decision else {
            i += 1;
            continue;
        };
        match decision {
            Disruptive::Deny | Disruptive::Drop | Disruptive::Redirect(_) if t.engine == EngineMode::On || phase == 5 => {
                let action = match &decision {
                    Disruptive::Drop => InterruptAction::Drop,
                    Disruptive::Redirect(parts) => {
                        let ctx = Ctx::new(t, Some(rule));
                        InterruptAction::Redirect(String::from_utf8_lossy(&ctx.expand(parts)).into_owned())
                    }
                    _ => InterruptAction::Deny,
                };
                let status = match action {
                    InterruptAction::Redirect(_) if !(300..400).contains(&rule.status) => 302,
                    _ => rule.status,
                };
                if phase == 5 {
                    return None;
                }
                if i < t.pre_upto {
                    pre_undo(t, rs, i);
                }
                return Some(Interruption { status, rule_id: Some(rule.id), phase, action });
            }
            Disruptive::Allow(scope) => {
                if i < t.pre_upto {
                    pre_undo(t, rs, i);
                }
                t.set_allow(scope);
                return None;
            }
            _ => {}
        }
        (i, skip) = skip_from(rs, pidx, i, rule, list.len());
    }
    t.replay.completed = true;
    None
}

/// The TX writes of a rule's effect (see `replay::Effect`), done again.
fn redo(t: &mut Transaction, e: &super::replay::Effect) {
    for (key, v, loc) in &e.writes {
        note_write(t, key);
        t.tx_gen = t.tx_gen.wrapping_add(1);
        let digit = digit_bit(key);
        let (undo, n, base) = (&mut t.tx_undo, &mut t.tx_undo_n, &mut t.tx_base);
        match v {
            Some(v) => {
                t.tx_digits |= digit;
                t.tx.set_at(loc, key, v, &mut t.tx_free, |old| undo_note(undo, n, base, key, old));
            }
            // As `tx_remove`: a capture slot known absent needs nothing.
            None if digit != 0 && t.tx_digits & digit == 0 => {}
            None => {
                t.tx_digits &= !digit;
                t.tx.remove_at(loc, key, |old| undo_note(undo, n, base, key, old));
            }
        }
    }
}

/// Whether the rule of entry `e` of `list`, tested by value in the trace's walk of this phase,
/// may have hits now (see `replay::Run`).
fn probe_hits(t: &Transaction, rs: &Ruleset, list: &[Entry], e: u32) -> bool {
    let Some(Entry::Rule(rule)) = list.get(e as usize) else { return true };
    let Some(inputs) = rs.quick.inputs.get(rule.index as usize) else { return true };
    t.replay.by_values(rule.index, inputs).is_none_or(|at| header_hits(t, rule, at))
}

/// Whether the first link of `rule` has a hit on one of the request header values at
/// positions `at` (through its `REQUEST_HEADERS` targets; runtime target removals are not
/// applied, so a removed value may answer true: the rule is then evaluated as usual).
fn header_hits(t: &Transaction, rule: &Rule, at: &[super::replay::ChangedHeader]) -> bool {
    let ctx = Ctx::new(t, Some(rule));
    let mut caps = Captures::default();
    at.iter().any(|&(i, bytes)| {
        let Some((name, value)) = t.req.headers.get(i) else { return true };
        let selected = rule.targets.iter().any(|tg| tg.var == Var::RequestHeaders && !tg.count && tg.sel.matches(name) && !tg.excluded(name));
        selected
            && if rule.multi_match {
                multi_hits(t, rule, &ctx, Val::B(value), true, &mut caps, |_, _| true)
            } else {
                stable_hit_with(t, rule, &ctx, Val::B(value), bytes, &mut caps).1
            }
    })
}

/// `multiMatch`: `link`'s operator on `value` and on each transformation of it that changed
/// it; `hit` on each hit, until it answers true (then returns true).
fn multi_hits<'a>(t: &Transaction, link: &Rule, ctx: &Ctx<'_>, value: Val<'a>, stable: bool, caps: &mut Captures, mut hit: impl FnMut(&Val<'a>, &Captures) -> bool) -> bool {
    let mut cur = value;
    if op_matches(t, link, ctx, &cur, stable, caps, true) && hit(&cur, caps) {
        return true;
    }
    // No step can change this value: the transformed values are all the same one.
    if cur.bytes().len() <= 512 && untouched(&byte_set(cur.bytes()), &link.chain_trigger) {
        return false;
    }
    for tf in &link.transforms {
        let (next, changed) = step(t, stable, cur, *tf);
        cur = next;
        if changed && op_matches(t, link, ctx, &cur, stable, caps, true) && hit(&cur, caps) {
            return true;
        }
    }
    false
}

/// `link`'s transformations (memoized) and operator on one stable value: the value the
/// operator saw, and whether it is a hit (the prefilter decides when it can).
fn stable_hit<'a>(t: &Transaction, link: &Rule, ctx: &Ctx<'_>, cur: Val<'a>, caps: &mut Captures) -> (Val<'a>, bool) {
    let bytes = (cur.bytes().len() <= 512).then(|| byte_set(cur.bytes()));
    stable_hit_with(t, link, ctx, cur, bytes, caps)
}

/// [`stable_hit`] with the value's byte set known (`None` when over 512 bytes).
fn stable_hit_with<'a>(t: &Transaction, link: &Rule, ctx: &Ctx<'_>, cur: Val<'a>, bytes: Option<[u64; 4]>, caps: &mut Captures) -> (Val<'a>, bool) {
    if bytes.is_some_and(|b| untouched(&b, &link.chain_trigger)) {
        let hit = op_matches(t, link, ctx, &cur, true, caps, true);
        return (cur, hit);
    }
    let (v, handle) = t.cache.borrow_mut().chain(cur, link.chain_id, &link.transforms, &link.step_triggers, bytes);
    if let Some(req) = &link.prefilter {
        let scan = t.cache.borrow_mut().chain_scan(handle, &v, &t.rs.prefilter);
        if scan.is_some_and(|s| !s.satisfies(req)) {
            bump(&t.probe.skipped);
            // The regex cannot match: the operator is false.
            caps.0.clear();
            return (v, link.negated);
        }
    }
    let hit = op_matches(t, link, ctx, &v, true, caps, false);
    (v, hit)
}

/// Where phase list `pidx` goes on after `rule`, entry `i` of its `len`, matched: the entry
/// after its `skipAfter` marker, or the next entry with its `skip` count.
fn skip_from(rs: &Ruleset, pidx: usize, i: usize, rule: &Rule, len: usize) -> (usize, u32) {
    if rule.skip_after.is_some() {
        (rs.skip_target(pidx, i).unwrap_or(len), 0)
    } else {
        (i + 1, rule.skip)
    }
}
