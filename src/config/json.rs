//! The JSON of the plugin configuration, read without serde: a small parser to a tree and
//! typed readers of an object's fields that refuse unknown ones. serde's derives and
//! serde_json made ~120 KB of the module's code (10%), and V8 compiles every function of the
//! module with TurboFan when Envoy loads it, whether it runs once or never (docs/performance.md,
//! "Start-up and memory"): start-up time and memory follow code size. Also [`quote`] for the request
//! log's JSON lines.
//!
//! Example: `Obj::new(&parse(br#"{"a":1}"#)?, "cfg", &["a"])?.int::<u32>("a")` is `Ok(Some(1))`.

use std::collections::BTreeMap;

/// A parsed JSON value. Numbers keep their text: each reader converts to its own type.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Num(String),
    Str(String),
    Arr(Vec<Json>),
    /// Fields in document order (duplicates are refused by [`Obj::new`]).
    Obj(Vec<(String, Json)>),
}

/// Nesting deeper than this is refused (the configuration needs 4 levels; the bound keeps a
/// hostile configuration from exhausting the VM's stack).
const MAX_DEPTH: usize = 64;

/// Parses one JSON document (whitespace around it allowed, nothing else).
pub fn parse(input: &[u8]) -> Result<Json, String> {
    let mut p = Parser { s: input, i: 0 };
    let v = p.value(0)?;
    p.ws();
    if p.i < p.s.len() {
        return Err(p.err("trailing characters"));
    }
    Ok(v)
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn err(&self, what: &str) -> String {
        let done = self.s.get(..self.i).unwrap_or(self.s);
        let line = done.iter().filter(|&&b| b == b'\n').count() + 1;
        let column = done.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
        format!("{what} at line {line} column {column}")
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn eat(&mut self, word: &[u8]) -> bool {
        let end = self.i + word.len();
        if self.s.get(self.i..end) == Some(word) {
            self.i = end;
            true
        } else {
            false
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json, String> {
        if depth > MAX_DEPTH {
            return Err(self.err("nested too deeply"));
        }
        self.ws();
        match self.peek() {
            None => Err(self.err("EOF while parsing a value")),
            Some(b'{') => {
                self.i += 1;
                let mut fields = Vec::new();
                self.ws();
                if self.eat(b"}") {
                    return Ok(Json::Obj(fields));
                }
                loop {
                    self.ws();
                    if self.peek() != Some(b'"') {
                        return Err(self.err("expected a field name"));
                    }
                    let name = self.string()?;
                    self.ws();
                    if !self.eat(b":") {
                        return Err(self.err("expected `:`"));
                    }
                    fields.push((name, self.value(depth + 1)?));
                    self.ws();
                    if self.eat(b"}") {
                        return Ok(Json::Obj(fields));
                    }
                    if !self.eat(b",") {
                        return Err(self.err("expected `,` or `}`"));
                    }
                }
            }
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                self.ws();
                if self.eat(b"]") {
                    return Ok(Json::Arr(items));
                }
                loop {
                    items.push(self.value(depth + 1)?);
                    self.ws();
                    if self.eat(b"]") {
                        return Ok(Json::Arr(items));
                    }
                    if !self.eat(b",") {
                        return Err(self.err("expected `,` or `]`"));
                    }
                }
            }
            Some(b'"') => self.string().map(Json::Str),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) if self.eat(b"true") => Ok(Json::Bool(true)),
            Some(_) if self.eat(b"false") => Ok(Json::Bool(false)),
            Some(_) if self.eat(b"null") => Ok(Json::Null),
            Some(_) => Err(self.err("expected value")),
        }
    }

    /// `-?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?`
    fn number(&mut self) -> Result<Json, String> {
        let start = self.i;
        let digits = |p: &mut Self| {
            let from = p.i;
            while matches!(p.peek(), Some(b'0'..=b'9')) {
                p.i += 1;
            }
            p.i > from
        };
        self.eat(b"-");
        if self.eat(b"0") {
            if matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.err("invalid number"));
            }
        } else if !digits(self) {
            return Err(self.err("invalid number"));
        }
        if self.eat(b".") && !digits(self) {
            return Err(self.err("invalid number"));
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if !digits(self) {
                return Err(self.err("invalid number"));
            }
        }
        let text = self.s.get(start..self.i).unwrap_or_default();
        Ok(Json::Num(String::from_utf8_lossy(text).into_owned()))
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let text = self.s.get(self.i..self.i + 4).and_then(|h| std::str::from_utf8(h).ok());
        match text.and_then(|h| u32::from_str_radix(h, 16).ok().filter(|_| h.bytes().all(|b| b.is_ascii_hexdigit()))) {
            Some(v) => {
                self.i += 4;
                Ok(v)
            }
            None => Err(self.err("invalid \\u escape")),
        }
    }

    /// A string at `"`: escapes decoded, UTF-8 checked, control characters refused.
    fn string(&mut self) -> Result<String, String> {
        self.i += 1;
        let mut out: Vec<u8> = Vec::new();
        loop {
            let run = self.i;
            while matches!(self.peek(), Some(b) if b != b'"' && b != b'\\' && b >= 0x20) {
                self.i += 1;
            }
            out.extend_from_slice(self.s.get(run..self.i).unwrap_or_default());
            match self.peek() {
                None => return Err(self.err("EOF while parsing a string")),
                Some(b'"') => {
                    self.i += 1;
                    return String::from_utf8(out).map_err(|_| self.err("invalid UTF-8 in a string"));
                }
                Some(b'\\') => {
                    self.i += 1;
                    let c = self.peek().ok_or_else(|| self.err("EOF while parsing a string"))?;
                    self.i += 1;
                    let ch = match c {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let hi = self.hex4()?;
                            let code = if (0xD800..0xDC00).contains(&hi) {
                                if !self.eat(b"\\u") {
                                    return Err(self.err("lone leading surrogate"));
                                }
                                let lo = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&lo) {
                                    return Err(self.err("invalid surrogate pair"));
                                }
                                0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                            } else {
                                hi
                            };
                            char::from_u32(code).ok_or_else(|| self.err("lone trailing surrogate"))?
                        }
                        _ => return Err(self.err("invalid escape")),
                    };
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                }
                Some(_) => return Err(self.err("control character in a string")),
            }
        }
    }
}

impl Json {
    fn kind(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "a boolean",
            Json::Num(_) => "a number",
            Json::Str(_) => "a string",
            Json::Arr(_) => "an array",
            Json::Obj(_) => "an object",
        }
    }
}

/// `path: expected X, got Y`.
fn wrong(path: &str, want: &str, got: &Json) -> String {
    format!("{path}: expected {want}, got {}", got.kind())
}

/// One object of the configuration, read field by field; made only when every field name is
/// one it knows, once.
pub struct Obj<'a> {
    path: String,
    fields: &'a [(String, Json)],
}

impl<'a> Obj<'a> {
    /// `v` as an object at `path` (for messages) whose field names are all in `known`.
    pub fn new(v: &'a Json, path: &str, known: &[&str]) -> Result<Obj<'a>, String> {
        let Json::Obj(fields) = v else {
            return Err(wrong(path, "an object", v));
        };
        for (n, (name, _)) in fields.iter().enumerate() {
            if !known.contains(&name.as_str()) {
                let list = known.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ");
                return Err(format!("{path}: unknown field `{name}`, expected one of {list}"));
            }
            if fields.iter().take(n).any(|(earlier, _)| earlier == name) {
                return Err(format!("{path}: duplicate field `{name}`"));
            }
        }
        Ok(Obj { path: path.to_string(), fields })
    }

    /// The path of a field, for messages and nested objects.
    pub fn path(&self, name: &str) -> String {
        if self.path.is_empty() {
            name.to_string()
        } else {
            format!("{}.{name}", self.path)
        }
    }

    /// The field's value; None when it is absent or null.
    pub fn get(&self, name: &str) -> Option<&'a Json> {
        self.fields.iter().find(|(n, _)| n == name).map(|(_, v)| v).filter(|v| **v != Json::Null)
    }

    pub fn str(&self, name: &str) -> Result<Option<String>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(Json::Str(s)) => Ok(Some(s.clone())),
            Some(v) => Err(wrong(&self.path(name), "a string", v)),
        }
    }

    pub fn boolean(&self, name: &str) -> Result<Option<bool>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(Json::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(wrong(&self.path(name), "a boolean", v)),
        }
    }

    /// A non-negative integer that fits `T`.
    pub fn int<T: TryFrom<u64>>(&self, name: &str) -> Result<Option<T>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => integer(v, &self.path(name)).map(Some),
        }
    }

    pub fn float(&self, name: &str) -> Result<Option<f64>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(Json::Num(t)) => t.parse().map(Some).map_err(|_| format!("{}: invalid number {t}", self.path(name))),
            Some(v) => Err(wrong(&self.path(name), "a number", v)),
        }
    }

    /// An array's items (empty when absent).
    pub fn array(&self, name: &str) -> Result<&'a [Json], String> {
        match self.get(name) {
            None => Ok(&[]),
            Some(Json::Arr(items)) => Ok(items),
            Some(v) => Err(wrong(&self.path(name), "an array", v)),
        }
    }

    /// An array's items, each read by `read` at its own path (empty when absent).
    pub fn each<T>(&self, name: &str, read: impl Fn(&Json, &str) -> Result<T, String>) -> Result<Vec<T>, String> {
        let at = self.path(name);
        self.array(name)?.iter().enumerate().map(|(i, v)| read(v, &format!("{at}[{i}]"))).collect()
    }

    /// An array of strings; None when absent.
    pub fn strings(&self, name: &str) -> Result<Option<Vec<String>>, String> {
        self.get(name).map(|v| strings(v, &self.path(name))).transpose()
    }

    /// An array of non-negative integers (empty when absent).
    pub fn ints<T: TryFrom<u64>>(&self, name: &str) -> Result<Vec<T>, String> {
        let path = self.path(name);
        self.array(name)?.iter().enumerate().map(|(i, v)| integer(v, &format!("{path}[{i}]"))).collect()
    }

    /// An object of strings (empty when absent); a repeated name is refused.
    pub fn string_map(&self, name: &str) -> Result<BTreeMap<String, String>, String> {
        self.map(name, |v, path| match v {
            Json::Str(s) => Ok(s.clone()),
            _ => Err(wrong(path, "a string", v)),
        })
    }

    /// An object of values read by `each` (empty when absent); a repeated name is refused.
    pub fn map<T>(&self, name: &str, each: impl Fn(&Json, &str) -> Result<T, String>) -> Result<BTreeMap<String, T>, String> {
        let path = self.path(name);
        let mut out = BTreeMap::new();
        match self.get(name) {
            None => {}
            Some(Json::Obj(fields)) => {
                for (k, v) in fields {
                    let item = each(v, &format!("{path}.{k}"))?;
                    if out.insert(k.clone(), item).is_some() {
                        return Err(format!("{path}: duplicate field `{k}`"));
                    }
                }
            }
            Some(v) => return Err(wrong(&path, "an object", v)),
        }
        Ok(out)
    }
}

/// An array of strings at `path`.
pub fn strings(v: &Json, path: &str) -> Result<Vec<String>, String> {
    let Json::Arr(items) = v else {
        return Err(wrong(path, "an array", v));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, v)| match v {
            Json::Str(s) => Ok(s.clone()),
            _ => Err(wrong(&format!("{path}[{i}]"), "a string", v)),
        })
        .collect()
}

fn integer<T: TryFrom<u64>>(v: &Json, path: &str) -> Result<T, String> {
    match v {
        Json::Num(t) => t
            .parse::<u64>()
            .ok()
            .and_then(|n| T::try_from(n).ok())
            .ok_or_else(|| format!("{path}: {t} is not an integer in range")),
        _ => Err(wrong(path, "an integer", v)),
    }
}

/// Appends `s` as a JSON string (quotes, `\"`, `\\` and control characters escaped).
pub fn quote(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_serde_json_parses() {
        for text in [
            r#"{"a":[1,-2.5e3,0,true,false,null,"x\"y\\z\/\n\u00e9\ud83d\ude00"],"b":{}}"#,
            " [ ] ",
            r#""\u0000""#,
            "0",
            "-0.0E+1",
            r#"{"a":{"b":{"c":[{"d":"é"}]}}}"#,
        ] {
            let ours = parse(text.as_bytes()).unwrap_or_else(|e| panic!("{text}: {e}"));
            let theirs: serde_json::Value = serde_json::from_str(text).unwrap();
            assert_eq!(to_serde(&ours), theirs, "{text}");
        }
    }

    fn to_serde(v: &Json) -> serde_json::Value {
        use serde_json::Value;
        match v {
            Json::Null => Value::Null,
            Json::Bool(b) => Value::Bool(*b),
            Json::Num(t) => serde_json::from_str(t).unwrap(),
            Json::Str(s) => Value::String(s.clone()),
            Json::Arr(a) => Value::Array(a.iter().map(to_serde).collect()),
            Json::Obj(f) => Value::Object(f.iter().map(|(k, v)| (k.clone(), to_serde(v))).collect()),
        }
    }

    #[test]
    fn refuses_what_serde_json_refuses() {
        let deep = "[".repeat(100_000);
        for text in [
            "", "{", "{not json", r#"{"a" 1}"#, r#"{"a":1,}"#, "[1,]", "01", "1.", "-", "1e", ".5", "+1", "tru", "nul",
            r#""abc"#, "\"a\tb\"", r#""\x""#, r#""\u12""#, r#""\ud800""#, r#""\udc00""#, r#""\ud800\u0041""#, "[1] 2",
            "{'a':1}", "\"\u{ff}\"", deep.as_str(),
        ] {
            let bytes: Vec<u8> = if text == "\"\u{ff}\"" { vec![b'"', 0xff, b'"'] } else { text.as_bytes().to_vec() };
            assert!(parse(&bytes).is_err(), "{text:?} accepted");
            if text.len() < 1000 {
                assert!(serde_json::from_slice::<serde_json::Value>(&bytes).is_err(), "{text:?}");
            }
        }
        assert_eq!(parse(b"{\n  \"a\": x}").unwrap_err(), "expected value at line 2 column 8");
    }

    #[test]
    fn objects_read_by_field() {
        let v = parse(br#"{"s":"x","n":7,"f":1.5,"b":true,"l":["a"],"m":{"k":"v"},"z":null,"big":300}"#).unwrap();
        let o = Obj::new(&v, "top", &["s", "n", "f", "b", "l", "m", "z", "big", "absent"]).unwrap();
        assert_eq!(o.str("s").unwrap().as_deref(), Some("x"));
        assert_eq!(o.int::<u32>("n").unwrap(), Some(7));
        assert_eq!(o.float("f").unwrap(), Some(1.5));
        assert_eq!(o.float("n").unwrap(), Some(7.0));
        assert_eq!(o.boolean("b").unwrap(), Some(true));
        assert_eq!(o.strings("l").unwrap(), Some(vec!["a".to_string()]));
        assert_eq!(o.string_map("m").unwrap().get("k").map(String::as_str), Some("v"));
        assert_eq!(o.str("z").unwrap(), None);
        assert_eq!(o.str("absent").unwrap(), None);
        assert!(o.int::<u8>("big").unwrap_err().contains("top.big: 300 is not an integer in range"));
        assert!(o.int::<u32>("f").is_err());
        assert_eq!(o.str("n").unwrap_err(), "top.n: expected a string, got a number");
        assert!(Obj::new(&v, "top", &["s"]).err().unwrap().starts_with("top: unknown field `n`, expected one of `s`"));
        let dup = parse(br#"{"a":1,"a":2}"#).unwrap();
        assert_eq!(Obj::new(&dup, "top", &["a"]).err().unwrap(), "top: duplicate field `a`");
        let neg = parse(br#"{"a":-1}"#).unwrap();
        assert!(Obj::new(&neg, "", &["a"]).unwrap().int::<u64>("a").is_err());
    }

    #[test]
    fn every_prefix_and_byte_change_is_an_answer_not_a_panic() {
        let doc = br#"{"directives_map":{"d":["SecRuleEngine On"]},"crs":{"paranoia_level":2,"exclusions":[{"rule_ids":[1],"tags":["t"]}],"tx":{"a":"\u00e9"}},"rate_limit":{"requests_per_second":1.5e0,"rules":[{"requests_per_second":2}]},"hardening":{"cookies":{"secure":false}},"request_log":{"collector":{"cluster":"c"}}}"#;
        let cfg = crate::config::PluginConfig::parse(doc).unwrap();
        assert_eq!(cfg.crs.as_ref().and_then(|c| c.paranoia_level), Some(2));
        assert_eq!(cfg.crs.as_ref().and_then(|c| c.tx.get("a")).map(String::as_str), Some("é"));
        assert_eq!(cfg.rate_limit.as_ref().and_then(|r| r.requests_per_second), Some(1.5));
        assert_eq!(cfg.hardening.as_ref().and_then(|h| h.cookies.as_ref()).map(|c| (c.secure, c.http_only)), Some((false, true)));
        assert_eq!(cfg.request_log.as_ref().map(|l| l.proxy_log), Some(true));
        for end in 0..doc.len() {
            let _ = crate::config::PluginConfig::parse(doc.get(..end).unwrap_or_default());
        }
        for i in 0..doc.len() {
            for b in [b'"', b'{', b'}', b'[', b']', b',', b':', b'\\', b'0', b'-', b'e', b'n', 0xff, 0] {
                let mut m = doc.to_vec();
                if let Some(c) = m.get_mut(i) {
                    *c = b;
                }
                let _ = crate::config::PluginConfig::parse(&m);
            }
        }
    }

    #[test]
    fn quoted_strings_read_back() {
        let s = "a\"b\\c\n\r\t\u{1}é/";
        let mut out = String::new();
        quote(&mut out, s);
        assert_eq!(serde_json::from_str::<String>(&out).unwrap(), s);
        assert_eq!(parse(out.as_bytes()).unwrap(), Json::Str(s.to_string()));
    }
}
