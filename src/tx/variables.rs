//! The transaction's variables as rules read them: the values of a target (`collect`, with
//! `&VAR` counts and the runtime target removals) and macro expansion (`%{...}`, [`Ctx`]).
//! The two read each other (`%{ARGS.x}` collects, `RULE:msg` expands), so they live together.

use std::borrow::Cow;

use super::removal::affected;
use super::Transaction;
use crate::compile::Rule;
use crate::operators::Expand;
use crate::seclang::MacroPart;
use crate::vars::{KeySel, Target, Var};

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
    // The rule itself for `RULE`; for removals only when some runtime removal concerns it.
    let own = rule;
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
            if let Some(rule) = own {
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
pub(crate) const DIGITS: [&str; 10] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"];

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
    pub(crate) fn expand_into(&self, parts: &[MacroPart], out: &mut Vec<u8>) {
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
