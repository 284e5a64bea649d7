//! Operators (`@name`): one closed enum; larger operators live in their own file.
//!
//! An operator is compiled once (regexes, automata, IP sets) and evaluated per
//! value. Parameters that contain `%{...}` macros are expanded per evaluation
//! through [`Expand`].

pub mod detect_cmdi;
pub mod detect_crlf;
pub mod detect_ldapi;
pub mod detect_nosqli;
pub mod detect_path_segments;
pub mod detect_path_traversal;
pub mod detect_sqli_context;
mod detect_text;
pub mod detect_ssi;
pub mod detect_ssti;
pub mod detect_xss_context;
pub mod detect_xxe;
pub mod ip_match;
pub mod libinjection;
pub mod pm;
pub mod rx;
pub mod rx_literals;
pub mod validate;
pub mod verify;

use crate::seclang::{parse_macro, MacroPart};

/// Expands `%{...}` macros against the current transaction.
pub trait Expand {
    fn expand(&self, parts: &[MacroPart]) -> Vec<u8>;

    /// An operator parameter's expansion. A context may keep it while it lives (the
    /// transaction cannot change while one link's values are tested).
    fn param<'a>(&'a self, parts: &[MacroPart]) -> std::borrow::Cow<'a, [u8]> {
        std::borrow::Cow::Owned(self.expand(parts))
    }
}

/// An operator parameter: literal, or with macros to expand per request.
#[derive(Debug, Clone)]
pub enum Param {
    Lit(Vec<u8>),
    Macro(Vec<MacroPart>),
}

impl Param {
    pub fn new(text: &str) -> Param {
        let parts = parse_macro(text);
        if parts.iter().any(|p| matches!(p, MacroPart::Var { .. })) {
            Param::Macro(parts)
        } else {
            Param::Lit(text.as_bytes().to_vec())
        }
    }

    fn value<'a>(&'a self, ctx: &'a dyn Expand) -> std::borrow::Cow<'a, [u8]> {
        match self {
            Param::Lit(v) => std::borrow::Cow::Borrowed(v),
            Param::Macro(parts) => ctx.param(parts),
        }
    }
}

/// The parameter of a numeric operator: a literal is read as a number once, at load time.
#[derive(Debug, Clone)]
pub enum Num {
    Lit(i64),
    Macro(Vec<MacroPart>),
}

impl Num {
    pub fn new(text: &str) -> Num {
        match Param::new(text) {
            Param::Lit(v) => Num::Lit(to_int(&v)),
            Param::Macro(parts) => Num::Macro(parts),
        }
    }

    fn value(&self, ctx: &dyn Expand) -> i64 {
        match self {
            Num::Lit(n) => *n,
            Num::Macro(parts) => to_int(&ctx.param(parts)),
        }
    }
}

/// What a successful match reports: captures (`TX:0`..`TX:9`) when asked for.
#[derive(Debug, Default, Clone)]
pub struct Captures(pub Vec<Vec<u8>>);

/// A compiled operator.
#[derive(Debug)]
pub enum Operator {
    Rx(rx::Rx),
    Pm(pm::Pm),
    Contains(Param),
    ContainsWord(Param),
    Streq(Param),
    StrMatch(Param),
    BeginsWith(Param),
    EndsWith(Param),
    Within(Param),
    Eq(Num),
    Ge(Num),
    Gt(Num),
    Le(Num),
    Lt(Num),
    DetectSqli,
    DetectXss,
    UnconditionalMatch,
    NoMatch,
    IpMatch(ip_match::IpSet),
    ValidateByteRange(validate::ByteRange),
    ValidateUrlEncoding,
    ValidateUtf8Encoding,
    /// `@verifyCC`, `@verifySSN`, `@verifyCPF`, `@verifySVNR`.
    Verify(verify::Verify),
    /// wafer's own detectors (`@detectCmdi`, ...): see [`Detector`].
    Detect(Detector),
}

/// wafer's native detectors (extensions to SecLang), one file each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detector {
    Cmdi,
    PathTraversal,
    Ssti,
    Ssi,
    Ldapi,
    Nosqli,
    Xxe,
    Crlf,
    /// `@detectSQLiPath`: libinjection's SQLi on a path and each of its segments.
    SqliPath,
    /// `@detectXSSPath`: libinjection's XSS on a path and each of its segments.
    XssPath,
    /// `@detectSQLiContext`: libinjection's SQLi, then the SQL contexts it misses.
    SqliContext,
    /// `@detectXSSContext`: libinjection's XSS, then the HTML and JavaScript contexts it misses.
    XssContext,
}

impl Detector {
    const NAMES: &'static [(&'static str, &'static str, Detector)] = &[
        ("detectcmdi", "DetectCmdi", Detector::Cmdi),
        ("detectpathtraversal", "DetectPathTraversal", Detector::PathTraversal),
        ("detectssti", "DetectSSTI", Detector::Ssti),
        ("detectssi", "DetectSSI", Detector::Ssi),
        ("detectldapi", "DetectLDAPi", Detector::Ldapi),
        ("detectnosqli", "DetectNoSQLi", Detector::Nosqli),
        ("detectxxe", "DetectXXE", Detector::Xxe),
        ("detectcrlf", "DetectCRLF", Detector::Crlf),
        ("detectsqlipath", "DetectSQLiPath", Detector::SqliPath),
        ("detectxsspath", "DetectXSSPath", Detector::XssPath),
        ("detectsqlicontext", "DetectSQLiContext", Detector::SqliContext),
        ("detectxsscontext", "DetectXSSContext", Detector::XssContext),
    ];

    fn from_name(lower: &str) -> Option<Detector> {
        Self::NAMES.iter().find(|(n, _, _)| *n == lower).map(|&(_, _, d)| d)
    }

    pub fn log_name(self) -> &'static str {
        Self::NAMES.iter().find(|(_, _, d)| *d == self).map_or("Detect", |&(_, n, _)| n)
    }

    /// Whether `value` holds what the detector's grammar cannot match without (a byte or a
    /// pair of bytes: `{` or `<%` for templates, `)(` or `*` for LDAP filters, ...), so that
    /// the values of ordinary traffic (tokens, words, user agents, numbers) are not tokenized
    /// at all. Each check is `may_match` in the detector's own file, next to the grammar it
    /// follows; `@detectCmdi` has its own check (a value without shell syntax can only be a
    /// program at its start).
    fn may_match(self, value: &[u8]) -> bool {
        match self {
            Detector::Cmdi | Detector::SqliPath | Detector::XssPath | Detector::SqliContext | Detector::XssContext => true,
            Detector::Crlf => detect_crlf::may_match(value),
            Detector::PathTraversal => detect_path_traversal::may_match(value),
            Detector::Ssti => detect_ssti::may_match(value),
            Detector::Ssi => detect_ssi::may_match(value),
            Detector::Xxe => detect_xxe::may_match(value),
            Detector::Ldapi => detect_ldapi::may_match(value),
            Detector::Nosqli => detect_nosqli::may_match(value),
        }
    }

    /// What the detector found in `value` (`TX:0` with `capture`), or `None`.
    pub fn find(self, value: &[u8]) -> Option<String> {
        if !self.may_match(value) {
            return None;
        }
        match self {
            Detector::Cmdi => detect_cmdi::detect_cmdi(value),
            Detector::PathTraversal => detect_path_traversal::detect_path_traversal(value).map(String::from),
            Detector::Ssti => detect_ssti::detect_ssti(value).map(String::from),
            Detector::Ssi => detect_ssi::detect_ssi(value).map(String::from),
            Detector::Ldapi => detect_ldapi::detect_ldapi(value).map(String::from),
            Detector::Nosqli => detect_nosqli::detect_nosqli(value).map(String::from),
            Detector::Xxe => detect_xxe::detect_xxe(value).map(String::from),
            Detector::Crlf => detect_crlf::detect_crlf(value).map(String::from),
            Detector::SqliPath => detect_path_segments::detect_sqli_path(value),
            Detector::XssPath => detect_path_segments::detect_xss_path(value).then(|| String::from("xss")),
            Detector::SqliContext => detect_sqli_context::detect_sqli_context(value),
            Detector::XssContext => detect_xss_context::detect_xss_context(value).map(String::from),
        }
    }
}

impl Operator {
    /// The macro parts of the parameter (`@lt %{tx.x}`); empty when it has none.
    pub fn macros(&self) -> &[MacroPart] {
        match self {
            Operator::Contains(Param::Macro(p))
            | Operator::ContainsWord(Param::Macro(p))
            | Operator::Streq(Param::Macro(p))
            | Operator::StrMatch(Param::Macro(p))
            | Operator::BeginsWith(Param::Macro(p))
            | Operator::EndsWith(Param::Macro(p))
            | Operator::Within(Param::Macro(p))
            | Operator::Eq(Num::Macro(p))
            | Operator::Ge(Num::Macro(p))
            | Operator::Gt(Num::Macro(p))
            | Operator::Le(Num::Macro(p))
            | Operator::Lt(Num::Macro(p)) => p,
            _ => &[],
        }
    }

    /// Whether the result is a function of the value alone (no macro in the parameter), worth
    /// remembering: `@unconditionalMatch` and `@noMatch` cost nothing.
    pub fn pure(&self) -> bool {
        self.macros().is_empty() && !matches!(self, Operator::UnconditionalMatch | Operator::NoMatch)
    }

    /// Compiles `@name param`. `data_file` resolves `@pmFromFile` names.
    pub fn compile(name: &str, param: &str, data_file: &dyn Fn(&str) -> Option<String>) -> Result<Operator, String> {
        let p = || Param::new(param);
        Ok(match name.to_ascii_lowercase().as_str() {
            "rx" => Operator::Rx(rx::Rx::new(param)?),
            "pm" => Operator::Pm(pm::Pm::new(param.split_ascii_whitespace().map(|s| s.as_bytes().to_vec()).collect())?),
            "pmfromfile" | "pmf" => {
                let mut words = Vec::new();
                for file in param.split_ascii_whitespace() {
                    let text = data_file(file).ok_or_else(|| format!("@pmFromFile: data file \"{file}\" not found among the embedded files"))?;
                    words.extend(pm::data_file_lines(&text).map(|l| l.as_bytes().to_vec()));
                }
                Operator::Pm(pm::Pm::new(words)?)
            }
            "ipmatchfromfile" | "ipmatchf" => {
                let mut list = String::new();
                for file in param.split_ascii_whitespace() {
                    let text = data_file(file).ok_or_else(|| format!("@ipMatchFromFile: data file \"{file}\" not found among the embedded files"))?;
                    for l in pm::data_file_lines(&text) {
                        list.push_str(l);
                        list.push(',');
                    }
                }
                Operator::IpMatch(ip_match::IpSet::parse(&list)?)
            }
            "contains" => Operator::Contains(p()),
            "containsword" => Operator::ContainsWord(p()),
            "streq" => Operator::Streq(p()),
            "strmatch" => Operator::StrMatch(p()),
            "beginswith" => Operator::BeginsWith(p()),
            "endswith" => Operator::EndsWith(p()),
            "within" => Operator::Within(p()),
            "eq" => Operator::Eq(Num::new(param)),
            "ge" => Operator::Ge(Num::new(param)),
            "gt" => Operator::Gt(Num::new(param)),
            "le" => Operator::Le(Num::new(param)),
            "lt" => Operator::Lt(Num::new(param)),
            "detectsqli" => Operator::DetectSqli,
            "detectxss" => Operator::DetectXss,
            "unconditionalmatch" => Operator::UnconditionalMatch,
            "nomatch" => Operator::NoMatch,
            // No network inside the proxy-wasm VM: these never match (the compiler
            // logs a warning at load time).
            "rbl" | "geolookup" => Operator::NoMatch,
            "ipmatch" => Operator::IpMatch(ip_match::IpSet::parse(param)?),
            "validatebyterange" => Operator::ValidateByteRange(validate::ByteRange::parse(param)?),
            "validateurlencoding" => Operator::ValidateUrlEncoding,
            "validateutf8encoding" => Operator::ValidateUtf8Encoding,
            "verifycc" => Operator::Verify(verify::Verify::new(verify::Check::CreditCard, param)?),
            "verifyssn" => Operator::Verify(verify::Verify::new(verify::Check::Ssn, param)?),
            "verifycpf" => Operator::Verify(verify::Verify::new(verify::Check::Cpf, param)?),
            "verifysvnr" => Operator::Verify(verify::Verify::new(verify::Check::Svnr, param)?),
            other => match Detector::from_name(other) {
                Some(d) => Operator::Detect(d),
                None => return Err(format!("unknown operator \"@{other}\"")),
            },
        })
    }

    /// The name as ModSecurity prints it in "Matched ... Operator `Rx'" lines.
    pub fn log_name(&self) -> &'static str {
        match self {
            Operator::Rx(_) => "Rx",
            Operator::Pm(_) => "Pm",
            Operator::Contains(_) => "Contains",
            Operator::ContainsWord(_) => "ContainsWord",
            Operator::Streq(_) => "StrEq",
            Operator::StrMatch(_) => "StrMatch",
            Operator::BeginsWith(_) => "BeginsWith",
            Operator::EndsWith(_) => "EndsWith",
            Operator::Within(_) => "Within",
            Operator::Eq(_) => "Eq",
            Operator::Ge(_) => "Ge",
            Operator::Gt(_) => "Gt",
            Operator::Le(_) => "Le",
            Operator::Lt(_) => "Lt",
            Operator::DetectSqli => "DetectSQLi",
            Operator::DetectXss => "DetectXSS",
            Operator::UnconditionalMatch => "UnconditionalMatch",
            Operator::NoMatch => "NoMatch",
            Operator::IpMatch(_) => "IpMatch",
            Operator::ValidateByteRange(_) => "ValidateByteRange",
            Operator::ValidateUrlEncoding => "ValidateUrlEncoding",
            Operator::ValidateUtf8Encoding => "ValidateUtf8Encoding",
            Operator::Verify(v) => v.log_name(),
            Operator::Detect(d) => d.log_name(),
        }
    }

    /// Evaluates the operator on one value. On a match, fills `caps` when
    /// `capture` is set (index 0 is the whole match).
    pub fn eval(&self, value: &[u8], ctx: &dyn Expand, capture: bool, caps: &mut Captures) -> bool {
        match self {
            Operator::Rx(r) => r.eval(value, capture, caps),
            Operator::Pm(p) => p.eval(value, capture, caps),
            Operator::Contains(p) => {
                let needle = p.value(ctx);
                let found = find(value, &needle).is_some();
                if found && capture {
                    caps.0 = vec![needle.to_vec()];
                }
                found
            }
            Operator::ContainsWord(p) => contains_word(value, &p.value(ctx)),
            Operator::Streq(p) => value == p.value(ctx).as_ref(),
            Operator::StrMatch(p) => find(value, &p.value(ctx)).is_some(),
            Operator::BeginsWith(p) => value.starts_with(&p.value(ctx)),
            Operator::EndsWith(p) => value.ends_with(&p.value(ctx)),
            Operator::Within(p) => {
                let hay = p.value(ctx);
                value.is_empty() || find(&hay, value).is_some()
            }
            Operator::Eq(_) | Operator::Ge(_) | Operator::Gt(_) | Operator::Le(_) | Operator::Lt(_) => {
                self.numeric().is_some_and(|(cmp, p)| cmp.holds(to_int(value), p.value(ctx)))
            }
            Operator::DetectSqli => match libinjection::detect_sqli(value) {
                Some(fp) => {
                    if capture {
                        caps.0 = vec![fp.into_bytes()];
                    }
                    true
                }
                None => false,
            },
            Operator::DetectXss => libinjection::detect_xss(value),
            Operator::UnconditionalMatch => true,
            Operator::NoMatch => false,
            Operator::IpMatch(set) => std::str::from_utf8(value).ok().is_some_and(|s| set.contains_str(s)),
            Operator::ValidateByteRange(r) => r.invalid(value),
            Operator::ValidateUrlEncoding => validate::url_encoding_invalid(value),
            Operator::ValidateUtf8Encoding => validate::utf8_invalid(value),
            Operator::Verify(v) => v.eval(value, capture, caps),
            Operator::Detect(d) => match d.find(value) {
                Some(what) => {
                    if capture {
                        caps.0 = vec![what.into_bytes()];
                    }
                    true
                }
                None => false,
            },
        }
    }
}

/// Substring search (empty needle matches).
pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    memchr_find(hay, needle)
}

fn memchr_find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let first = *needle.first()?;
    let mut i = 0;
    while i + needle.len() <= hay.len() {
        let rest = hay.get(i..)?;
        let off = rest.iter().position(|&b| b == first)?;
        i += off;
        if hay.get(i..i + needle.len()) == Some(needle) {
            return Some(i);
        }
        i += 1;
    }
    None
}

fn contains_word(value: &[u8], word: &[u8]) -> bool {
    if word.is_empty() {
        return true;
    }
    let is_word = |b: Option<&u8>| b.is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_');
    let mut start = 0;
    while let Some(off) = value.get(start..).and_then(|h| find(h, word)) {
        let pos = start + off;
        let before = if pos == 0 { None } else { value.get(pos - 1) };
        if !is_word(before) && !is_word(value.get(pos + word.len())) {
            return true;
        }
        start = pos + 1;
    }
    false
}

/// A numeric comparison (`@lt`, `@le`, `@eq`, `@ge`, `@gt`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    Lt,
    Le,
    Eq,
    Ge,
    Gt,
}

impl Cmp {
    /// `a` compared with `b` (the value's number with the operator's).
    pub fn holds(self, a: i64, b: i64) -> bool {
        match self {
            Cmp::Lt => a < b,
            Cmp::Le => a <= b,
            Cmp::Eq => a == b,
            Cmp::Ge => a >= b,
            Cmp::Gt => a > b,
        }
    }
}

impl Operator {
    /// The comparison and parameter of a numeric operator.
    pub fn numeric(&self) -> Option<(Cmp, &Num)> {
        match self {
            Operator::Lt(n) => Some((Cmp::Lt, n)),
            Operator::Le(n) => Some((Cmp::Le, n)),
            Operator::Eq(n) => Some((Cmp::Eq, n)),
            Operator::Ge(n) => Some((Cmp::Ge, n)),
            Operator::Gt(n) => Some((Cmp::Gt, n)),
            _ => None,
        }
    }
}

/// ModSecurity's numeric reading of a value: optional spaces and sign, then
/// leading digits; anything else reads as 0.
pub fn to_int(v: &[u8]) -> i64 {
    // Numeric operators run on every request for the CRS's paranoia-level and score checks:
    // ASCII values (almost all) are read in place; other values go through the `str` path
    // (not UTF-8: 0; Unicode whitespace trimmed).
    if !v.is_ascii() {
        let s = std::str::from_utf8(v).unwrap_or("").trim();
        return int_prefix(s.as_bytes());
    }
    // `str::trim` on ASCII: the bytes whose char is White_Space (0x0b included). Trailing
    // whitespace need not go: the digits end before it.
    let start = v.iter().position(|b| !matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ')).unwrap_or(v.len());
    int_prefix(v.get(start..).unwrap_or_default())
}

/// The optional sign and the leading digits of `s` as a number (saturating; none: 0).
fn int_prefix(s: &[u8]) -> i64 {
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, s.get(1..).unwrap_or_default()),
        Some(b'+') => (false, s.get(1..).unwrap_or_default()),
        _ => (false, s),
    };
    let mut n: i64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            break;
        }
        n = n.saturating_mul(10).saturating_add(i64::from(b - b'0'));
    }
    if neg {
        -n
    } else {
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NoCtx;
    impl Expand for NoCtx {
        fn expand(&self, _: &[MacroPart]) -> Vec<u8> {
            b"GET POST".to_vec()
        }
    }

    fn op(name: &str, param: &str) -> Operator {
        Operator::compile(name, param, &|_| None).unwrap()
    }

    fn ev(o: &Operator, v: &str) -> bool {
        o.eval(v.as_bytes(), &NoCtx, false, &mut Captures::default())
    }

    #[test]
    fn string_operators() {
        assert!(ev(&op("contains", "/admin"), "/x/admin/y"));
        assert!(!ev(&op("contains", "/admin"), "/x/adm"));
        assert!(ev(&op("streq", "maliciouspayload"), "maliciouspayload"));
        assert!(!ev(&op("streq", "maliciouspayload"), "maliciouspayload2"));
        assert!(ev(&op("beginsWith", "ab"), "abc") && ev(&op("endsWith", "bc"), "abc"));
        assert!(ev(&op("within", "%{tx.allowed_methods}"), "POST"));
        assert!(!ev(&op("within", "%{tx.allowed_methods}"), "PUT"));
        assert!(ev(&op("containsWord", "select"), "x select y") && !ev(&op("containsWord", "select"), "selection"));
    }

    #[test]
    fn numeric_operators() {
        assert!(ev(&op("eq", "0"), "") && ev(&op("gt", "5"), "12") && ev(&op("le", "-1"), "-3"));
        assert!(ev(&op("ge", "%{tx.x}"), "0"));
        assert_eq!(to_int(b"  42abc"), 42);
    }

    /// The in-place reading of ASCII values gives what reading through `str` (the reference
    /// below) gives, for values built from digits, signs, ASCII and Unicode whitespace and
    /// invalid UTF-8.
    #[test]
    fn to_int_matches_the_str_reading() {
        fn reference(v: &[u8]) -> i64 {
            let s = std::str::from_utf8(v).unwrap_or("").trim();
            int_prefix(s.as_bytes())
        }
        let pieces: [&[u8]; 14] = [b"0", b"7", b"42", b"-", b"+", b" ", b"\t", b"\x0b", b"\x0c", b"\r\n", b"x", "\u{a0}".as_bytes(), b"\xff", b"99999999999999999999"];
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..50_000 {
            let mut v = Vec::new();
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let mut r = state;
            for _ in 0..(r % 6) {
                r /= 6;
                v.extend_from_slice(pieces[(r % 14) as usize]);
                r /= 14;
            }
            assert_eq!(to_int(&v), reference(&v), "{v:?}");
        }
        assert_eq!(to_int(b"\x0b-12"), -12);
        assert_eq!(to_int("\u{a0}5".as_bytes()), 5);
        assert_eq!(to_int(b"5\xff"), 0);
    }

    #[test]
    fn network_operators_never_match() {
        assert!(!ev(&op("rbl", "sbl-xbl.spamhaus.org"), "127.0.0.2"));
        assert!(!ev(&op("geoLookup", ""), "1.2.3.4"));
    }

    #[test]
    fn unknown_operator_is_an_error() {
        assert!(Operator::compile("rxx", "a", &|_| None).unwrap_err().contains("@rxx"));
    }
}


#[cfg(test)]
mod detector_prefilter_tests {
    use super::Detector;

    /// The prefilter never changes a verdict: `find` answers as the detector itself does.
    #[test]
    fn prefilter_keeps_every_verdict() {
        let values = [
            ";id", "whoami", "sleep 10", "for %i in (*) do x", "hello world", "plain", "12345", "../../etc/passwd", "etc/passwd",
            "php://filter", "C:\\boot.ini", "%2e%2e%2f", "{{7*7}}", "${7*7}", "#{7*7}", "<%= 7*7 %>", "[[${7*7}]]", "name",
            "<!--#exec cmd=\"id\"-->", "<!DOCTYPE x [<!ENTITY a SYSTEM \"file:///etc/passwd\">]>", "*)(uid=*))(|(uid=*", "(&(a=*))",
            "user[$ne]", "{\"$gt\": \"\"}", "' || '1'=='1", "this.password.match(/.*/)", "db.x.find()", "a\r\nSet-Cookie: x=1",
            "Tom & Jerry", "price 5 EUR", "Mozilla/5.0 (X11; Linux x86_64)", "text/html,application/xhtml+xml",
        ];
        let raw = |d: Detector, v: &[u8]| -> Option<String> {
            match d {
                Detector::Cmdi => super::detect_cmdi::detect_cmdi(v),
                Detector::PathTraversal => super::detect_path_traversal::detect_path_traversal(v).map(String::from),
                Detector::Ssti => super::detect_ssti::detect_ssti(v).map(String::from),
                Detector::Ssi => super::detect_ssi::detect_ssi(v).map(String::from),
                Detector::Ldapi => super::detect_ldapi::detect_ldapi(v).map(String::from),
                Detector::Nosqli => super::detect_nosqli::detect_nosqli(v).map(String::from),
                Detector::Xxe => super::detect_xxe::detect_xxe(v).map(String::from),
                Detector::Crlf => super::detect_crlf::detect_crlf(v).map(String::from),
                Detector::SqliPath => super::detect_path_segments::detect_sqli_path(v),
                Detector::XssPath => super::detect_path_segments::detect_xss_path(v).then(|| String::from("xss")),
                Detector::SqliContext => super::detect_sqli_context::detect_sqli_context(v),
                Detector::XssContext => super::detect_xss_context::detect_xss_context(v).map(String::from),
            }
        };
        let mut hits = 0;
        for &(_, _, d) in Detector::NAMES {
            for v in values {
                let found = d.find(v.as_bytes());
                assert_eq!(found, raw(d, v.as_bytes()), "{d:?} {v}");
                hits += usize::from(found.is_some());
            }
        }
        assert!(hits >= 15, "{hits}");
        // Values built from the pieces the grammars look for, in random order: the prefilter
        // still never decides differently from the detector.
        let pieces: &[&str] = &["..", ".", "/", "\\", "%2e", "%", "0x2e", "etc", "passwd", "proc", "windows", "php://", "data:", "file:", "c:", " ", "\t", "\0", "é", "$ne", "$", "this", "db", "s.", "b .", "find(", "'", "\"", "|", "==", "1", "(", ")", "*", "&", "!", "=", "uid", "{{", "}}", "{%", "%}", "{", "}", "<%", "%>", "#set(", "#{", "@(", "[[", "<#", "7", "+", "<!--", "#exec", "<", ">", "<!DOCTYPE", "<!ENTITY", "SYSTEM", "xi:include", "XSL", "\r", "\n", "%0d%0a", "\\r\\n", "Set-Cookie:", "Bcc:", "HTTP/1.1", ";", "cat", "id", "a", "Z", ".claude", "@fs/", "@", ".log", "_log", "2f", "%%", "logs"];
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut hits = 0;
        for _ in 0..20_000 {
            let n = 1 + next() % 7;
            let v: String = (0..n).map(|_| pieces[(next() % pieces.len() as u64) as usize]).collect();
            for &(_, _, d) in Detector::NAMES {
                let found = d.find(v.as_bytes());
                assert_eq!(found, raw(d, v.as_bytes()), "{d:?} {v:?}");
                hits += usize::from(found.is_some());
            }
        }
        assert!(hits >= 1000, "{hits}");
    }
}
