//! `@detectSQLiContext` (wafer extension): libinjection's `@detectSQLi`, and then the SQL
//! contexts its fingerprints miss.
//!
//! libinjection reads a value as a short sequence of SQL tokens and matches the sequence's
//! fingerprint against the ones known to be injections; a value that is one longer statement
//! or a dialect's own syntax has a fingerprint it does not know. The grammar here reads the
//! value as SQL tokens too (lowercased, `/* ... */` comments and runs of blanks read as one
//! blank, full-width forms `ＳＥＬＥＣＴ` as ASCII) and matches:
//!
//! - a call of a function that only SQL has and only an injection needs: time delays
//!   (`sleep(`, `pg_sleep(`, `benchmark(`), file and XML access (`load_file(`, `xmltype(`,
//!   `extractvalue(`, `updatexml(`), the error and type probes (`iif(`, `unistr(`,
//!   `sysdate(`, `overlay(... placing`), with an argument that is an expression (a number,
//!   a quote, a call or `)`), and `waitfor delay '...'` / `waitfor time '...'`;
//! - a cast of a literal or a parenthesis (`'1'::int`, `)::jsonb`), and PostgreSQL's JSON
//!   operators between two string literals (`'{"a":1}' @> '{"a":1}'`, `#>>`, `?|`, ...);
//! - a second statement after `;` that changes the schema or the data (`; drop table`,
//!   `; insert into`, `; delete from`, `; exec xp_...`, `; shutdown`), T-SQL's
//!   `declare @x` and `execute immediate`;
//! - `union [all | distinct] select`;
//! - a quote closed and followed by an operator (`'or(`, `' and `, `'^`, `'-`, `'=`) in a
//!   value that ends in a comment (`--`, `-- x`, `#`): the rest of the query cut off.
//!
//! Each is a sequence of two or more tokens that does not occur in prose or in the values of
//! ordinary forms (a word alone never matches). The work is one lowercased copy of the value
//! (at most [`MAX_LEN`] bytes read) and linear scans of it.

use super::detect_text::{full_width_at, ident, words};
use super::libinjection;

/// Bytes of a value read by the grammar (libinjection reads the whole value).
pub const MAX_LEN: usize = 16 * 1024;

/// Functions only an injection calls (see the module documentation).
const FUNCTIONS: &[&str] = &["sleep", "pg_sleep", "benchmark", "load_file", "xmltype", "extractvalue", "updatexml", "iif", "unistr", "sysdate", "randomblob", "dbms_pipe.receive_message", "utl_inaddr.get_host_address"];

/// Statements that change the schema, after `;`, and the object word they take.
const DDL: &[&str] = &["drop", "create", "alter", "truncate", "rename"];
const DDL_OBJECTS: &[&str] = &["table", "database", "procedure", "function", "view", "index", "user", "schema", "trigger", "column"];

/// PostgreSQL's JSON and containment operators.
const JSON_OPS: &[&str] = &["#>>", "->>", "@>", "<@", "#>", "@?", "@@", "?|", "?&", "->", "?"];

/// Whether the value holds a byte every context needs: a parenthesis, a quote, `;`, `:`, `@`,
/// or the `n` of `union`, `declare`, `execute` (a cheap first look: values of ordinary
/// traffic without any of them are not copied).
pub fn may_match(value: &[u8]) -> bool {
    value.iter().any(|&b| matches!(b, b'(' | b'\'' | b'"' | b';' | b':' | b'@' | b'n' | b'N' | 0xef))
}

/// `@detectSQLiContext`: libinjection's fingerprint, or the name of the context found.
pub fn detect_sqli_context(value: &[u8]) -> Option<String> {
    if let Some(fp) = libinjection::detect_sqli(value) {
        return Some(fp);
    }
    if !may_match(value) {
        return None;
    }
    sql_context(value).map(String::from)
}

/// The grammar alone (without libinjection): the context found.
pub fn sql_context(value: &[u8]) -> Option<&'static str> {
    let s = normalize(value);
    if function_call(&s) {
        return Some("sql function call");
    }
    if cast_or_json_operator(&s) {
        return Some("sql cast or json operator");
    }
    if stacked_statement(&s) {
        return Some("stacked sql statement");
    }
    if union_select(&s) {
        return Some("union select");
    }
    if quote_break(&s) {
        return Some("quote, operator and comment");
    }
    None
}

/// Lowercase ASCII, full-width forms folded, `/* ... */` comments and blanks (any byte up to
/// space) read as one space; other bytes kept.
fn normalize(value: &[u8]) -> Vec<u8> {
    let v = value.get(..MAX_LEN).unwrap_or(value);
    let mut out = Vec::with_capacity(v.len());
    let mut blank = false;
    let push = |out: &mut Vec<u8>, b: u8, blank: &mut bool| {
        if b <= b' ' {
            if !*blank {
                out.push(b' ');
            }
            *blank = true;
        } else {
            out.push(b.to_ascii_lowercase());
            *blank = false;
        }
    };
    let mut i = 0;
    while let Some(&b) = v.get(i) {
        if let Some(c) = full_width_at(v, i) {
            push(&mut out, c, &mut blank);
            i += 3;
            continue;
        }
        if b == b'/' && v.get(i + 1) == Some(&b'*') {
            let end = v.get(i + 2..).and_then(|r| r.windows(2).position(|w| w == b"*/")).map_or(v.len(), |p| i + 2 + p + 2);
            push(&mut out, b' ', &mut blank);
            i = end;
            continue;
        }
        push(&mut out, b, &mut blank);
        i += 1;
    }
    out
}

fn skip_blank(s: &[u8], mut i: usize) -> usize {
    while s.get(i) == Some(&b' ') {
        i += 1;
    }
    i
}

/// The word (identifier) at `i` and the position after it.
fn word_at(s: &[u8], i: usize) -> (&[u8], usize) {
    let n = s.get(i..).unwrap_or_default().iter().take_while(|&&b| ident(b)).count();
    (s.get(i..i + n).unwrap_or_default(), i + n)
}

fn function_call(s: &[u8]) -> bool {
    for f in FUNCTIONS {
        for end in words(s, f) {
            let p = skip_blank(s, end);
            if s.get(p) != Some(&b'(') {
                continue;
            }
            let a = skip_blank(s, p + 1);
            let arg_ok = match s.get(a) {
                // A number, a quote, `)`, `@x`, the end of the value or of a path segment.
                Some(b'0'..=b'9' | b'\'' | b'"' | b')' | b'@' | b'-' | b'/' | b'&' | b'#' | b';') | None => true,
                // A call or a column: `sleep(mod(10,5))`, `unistr(password)`.
                Some(_) => {
                    let (w, e) = word_at(s, a);
                    !w.is_empty() && matches!(s.get(skip_blank(s, e)), Some(b'(' | b')' | b','))
                }
            };
            if arg_ok {
                return true;
            }
        }
    }
    // `overlay(x placing y from 1)`.
    for end in words(s, "overlay") {
        if s.get(skip_blank(s, end)) == Some(&b'(') && words(s.get(end..).unwrap_or_default(), "placing").next().is_some() {
            return true;
        }
    }
    for end in words(s, "waitfor") {
        let (w, e) = word_at(s, skip_blank(s, end));
        if (w == b"delay" || w == b"time") && matches!(s.get(skip_blank(s, e)), Some(b'\'' | b'"')) {
            return true;
        }
    }
    false
}

fn cast_or_json_operator(s: &[u8]) -> bool {
    // `'...'::type`, `)::type`.
    for (i, w) in s.windows(2).enumerate() {
        if w == b"::" {
            let before = i.checked_sub(1).and_then(|j| s.get(j)).copied();
            let before = if before == Some(b' ') { i.checked_sub(2).and_then(|j| s.get(j)).copied() } else { before };
            let (t, _) = word_at(s, skip_blank(s, i + 2));
            if matches!(before, Some(b'\'' | b'"' | b')')) && t.first().is_some_and(u8::is_ascii_alphabetic) {
                return true;
            }
        }
    }
    // `'...' OP '...'`: a JSON operator before an opening quote, after a closing quote (or,
    // for the operators of two or more symbols that only JSON has, after a column name).
    for op in JSON_OPS {
        let o = op.as_bytes();
        for (i, w) in s.windows(o.len()).enumerate() {
            if w != o || s.get(skip_blank(s, i + o.len())) != Some(&b'\'') {
                continue;
            }
            let spaced = i > 0 && s.get(i - 1) == Some(&b' ');
            let b = if spaced { i.checked_sub(2) } else { i.checked_sub(1) }.and_then(|j| s.get(j)).copied();
            let strong = !matches!(*op, "->" | "->>" | "?");
            // `'a'?'b'` without blanks is not read as an operator (`?` alone is too common).
            let ok = match b {
                Some(b'\'') => *op != "?" || (spaced && s.get(i + 1) == Some(&b' ')),
                Some(c) => strong && spaced && ident(c),
                None => false,
            };
            if ok {
                return true;
            }
        }
    }
    false
}

fn stacked_statement(s: &[u8]) -> bool {
    for (i, &b) in s.iter().enumerate() {
        if b != b';' {
            continue;
        }
        let (w, e) = word_at(s, skip_blank(s, i + 1));
        let (w2, e2) = word_at(s, skip_blank(s, e));
        let ok = match w {
            _ if DDL.iter().any(|d| d.as_bytes() == w) => DDL_OBJECTS.iter().any(|o| o.as_bytes() == w2),
            b"insert" => w2 == b"into",
            b"delete" => w2 == b"from",
            b"update" => !w2.is_empty() && word_at(s, skip_blank(s, e2)).0 == b"set",
            b"exec" | b"execute" => w2.starts_with(b"xp_") || w2.starts_with(b"sp_") || w2 == b"master" || w2 == b"immediate",
            b"shutdown" => w2.is_empty(),
            _ => false,
        };
        if ok {
            return true;
        }
    }
    for end in words(s, "declare") {
        if s.get(skip_blank(s, end)) == Some(&b'@') && s.get(skip_blank(s, end) + 1).is_some_and(|&b| ident(b)) {
            return true;
        }
    }
    for end in words(s, "execute") {
        if word_at(s, skip_blank(s, end)).0 == b"immediate" {
            return true;
        }
    }
    false
}

fn union_select(s: &[u8]) -> bool {
    words(s, "union").any(|end| {
        let (w, e) = word_at(s, skip_blank(s, end));
        let w = if w == b"all" || w == b"distinct" { word_at(s, skip_blank(s, e)).0 } else { w };
        w == b"select"
    })
}

/// SQL operators that may follow a closing quote.
const OPERATORS: &[&str] = &["or", "and", "xor", "not", "like", "rlike", "regexp", "glob", "div", "mod", "is", "in", "between", "having", "order", "group", "limit", "procedure", "into"];

fn quote_break(s: &[u8]) -> bool {
    // The value ends in a comment: `--` (then at most a few bytes) or `#`.
    let t = s.strip_suffix(b" ").unwrap_or(s);
    let ends_in_comment = t.ends_with(b"#") || t.windows(2).rposition(|w| w == b"--").is_some_and(|p| t.len() - p <= 6 && t.get(p + 2..).is_some_and(|r| r.is_empty() || r.first() == Some(&b' ') || r.first() == Some(&b'-')));
    if !ends_in_comment {
        return false;
    }
    for (i, &b) in s.iter().enumerate() {
        if b != b'\'' && b != b'"' {
            continue;
        }
        let p = skip_blank(s, i + 1);
        let op = match s.get(p) {
            Some(b'^' | b'|' | b'&' | b'=' | b'<' | b'>' | b'!' | b'+' | b'*' | b'/' | b'%') => true,
            // `'-email--`, not the comment itself (`'--`).
            Some(b'-') => s.get(p + 1) != Some(&b'-'),
            _ => {
                let (w, _) = word_at(s, p);
                OPERATORS.iter().any(|o| o.as_bytes() == w)
            }
        };
        if op {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(s: &str) -> Option<&'static str> {
        sql_context(s.as_bytes())
    }

    #[test]
    fn function_calls() {
        for s in ["SeleCT sLeEp (mOD(10,5))", "\" ORDER BY 1,SLEEP(5),BENCHMARK(1000000,MD5('A')),4", "or benchmark(50000000,MD5(1))#", "1);iif(5462=8866,1,1/0)", "load_file(", "XMLType(", "sysdate(", "unistr(password)::int", "overlay(password placing '' from 1 for 0)::int", "))))) waitfor delay '0:0:20' --", "1 and pg_sleep(5)", "x'/**/and/**/sleep/**/(3)#", "ＳＬＥＥＰ(5)"] {
            assert!(ctx(s).is_some(), "{s}");
        }
    }

    #[test]
    fn casts_and_json_operators() {
        for s in ["OR '{\"b\":2}'::jsonb < '{\"a\":1, \"b\":2}'::jsonb", "'{\"a\": {\"b\": [\"foo\",\"bar\"]}}'::json #>> '{a,b,1}'", "get/OR '{\"a\":\"b\"}' ? 'a'", "x' and data @> '{\"a\":\"a\"}", "1'::int"] {
            assert!(ctx(s).is_some(), "{s}");
        }
    }

    #[test]
    fn stacked_statements_and_union() {
        for s in [";DROP/*test*/TABLE test;", "1; drop table users", "x'; insert into users values(1)", "1;delete from t", "1; update users set a=1", "'; exec xp_cmdshell 'dir'", "1;shutdown", "declare @b\n", "EXECUTE IMMEDIATE \"", " UNION ALL SELECT 'INJ'||'ECT'||'XXX',2,3--", "1 union/**/select 1"] {
            assert!(ctx(s).is_some(), "{s}");
        }
    }

    #[test]
    fn a_quote_closed_by_an_operator_and_a_comment() {
        for s in ["'or(glob 1)--", "x'^email--", "x'-email--", "admin' or 1 -- -", "a\" and b=b#", "x' order by 3--"] {
            assert!(ctx(s).is_some(), "{s}");
        }
        for s in ["Rock 'n' roll -- forever", "I'm tired --", "x'--", "it's 'a' or 'b'", "size 5' - 6' tall", "see 'docs' #"] {
            assert_eq!(ctx(s), None, "{s}");
        }
    }

    #[test]
    fn prose_and_ordinary_values_pass() {
        for s in [
            "I need 8 hours of sleep (at least)",
            "sleep well; see you tomorrow",
            "std::string and std::vector<int>",
            "fe80::1ff:fe23:4567:890a",
            "The union selected a new chair",
            "Please drop the table near the door; thanks",
            "It's 'ok' ? yes",
            "SELECT name, price FROM products WHERE category = ? ORDER BY price",
            "Tom & Jerry; Ben & Jerry's",
            "declare your income by May",
            "email me @ jane@example.com",
            "a::b",
            "Ben's 'tips'::",
            "benchmark results (2024)",
            "",
        ] {
            assert_eq!(ctx(s), None, "{s}");
        }
    }

    #[test]
    fn libinjection_comes_first_and_hostile_input_is_bounded() {
        assert!(detect_sqli_context(b"1' or '1'='1").is_some());
        assert_eq!(detect_sqli_context(b"hello world"), None);
        let big = "sleep(".repeat(100_000);
        assert!(normalize(big.as_bytes()).len() <= MAX_LEN);
        let junk: Vec<u8> = (0..50_000u32).map(|i| (i * 7919 % 256) as u8).collect();
        let _ = detect_sqli_context(&junk);
        assert_eq!(normalize("/* unterminated".as_bytes()), b" ");
    }
}
