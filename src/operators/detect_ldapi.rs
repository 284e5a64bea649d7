//! `@detectLDAPi` (wafer extension): LDAP filter injection (RFC 4515 filter grammar), and XPath
//! injection (the other directory query language: see [`xpath`]).
//!
//! The value is tokenized into `(`, `)`, the filter operators `&`, `|`, `!`, the comparison
//! operators `=`, `~=`, `>=`, `<=`, `*` and attribute/value text. It is an injection when it
//! closes a filter and opens another (`)(`, `*)(`), opens a composite filter (`(&(`, `(|(`,
//! `(!(`), holds a whole item `(attr=value)` next to a parenthesis it does not balance, or
//! ends a filter early with wildcards (`*))`, `*)%00`). An attribute is a name
//! (`[A-Za-z][A-Za-z0-9-]*` or an OID).

fn attr_like(s: &[u8]) -> bool {
    let t: Vec<u8> = s.iter().copied().filter(|c| !c.is_ascii_whitespace()).collect();
    !t.is_empty() && (t.first().is_some_and(u8::is_ascii_alphabetic) && t.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b';') || t.iter().all(|c| c.is_ascii_digit() || *c == b'.'))
}

/// Whether the value holds `::` or a parenthesis and a quote (XPath), or (blanks aside) a
/// parenthesis and either a `*`, a `)(` or an opening of a composite filter `(&`, `(|`, `(!`:
/// what every finding of [`detect_ldapi`] needs.
pub fn may_match(value: &[u8]) -> bool {
    // XPath: an axis (`::`), or a quote with a function call.
    if value.windows(2).any(|w| w == b"::") || value.contains(&b'(') && value.iter().any(|&c| c == b'\'' || c == b'"') {
        return true;
    }
    let mut paren = false;
    let mut star = false;
    let mut prev = 0u8;
    for &c in value.iter().filter(|c| !c.is_ascii_whitespace()) {
        if prev == b')' && c == b'(' || prev == b'(' && matches!(c, b'&' | b'|' | b'!') {
            return true;
        }
        paren |= c == b'(' || c == b')';
        star |= c == b'*';
        prev = c;
    }
    paren && star
}

/// The axes of XPath 1.0 (`child::node()`): its grammar's keywords before `::`.
const XPATH_AXES: &[&str] = &["child", "descendant", "descendant-or-self", "parent", "ancestor", "ancestor-or-self", "following", "following-sibling", "preceding", "preceding-sibling", "attribute", "self", "namespace"];

/// The XPath 1.0 functions that read the document's nodes (`name()`, `count(`): after a quote
/// and `or`/`and` they test the document rather than a value.
const XPATH_NODE_FUNCTIONS: &[&str] = &["name(", "local-name(", "text(", "node(", "position(", "last(", "count(", "string-length(", "substring(", "contains(", "starts-with("];

/// XPath injection, the other directory query language: an axis step (`child::node()`), or a
/// quote directly followed by `or`/`and` and a function of the document's nodes
/// (`x' or name()='username' or 'x'='y`).
fn xpath(value: &[u8]) -> Option<&'static str> {
    let l = String::from_utf8_lossy(value).to_ascii_lowercase();
    let mut from = 0;
    while let Some(p) = l.get(from..).and_then(|r| r.find("::")) {
        let at = from + p;
        let before = l.get(..at).unwrap_or_default();
        let axis = before.rsplit(|c: char| !(c.is_ascii_alphabetic() || c == '-')).next().unwrap_or_default();
        let after = l.get(at + 2..).unwrap_or_default();
        if XPATH_AXES.contains(&axis) && after.starts_with(|c: char| c.is_ascii_alphabetic() || c == '*' || c == '_') {
            return Some("xpath-axis");
        }
        from = at + 2;
    }
    // Each quote directly followed by `or` / `and` and a node function.
    for (q, _) in l.match_indices(['\'', '"']) {
        let rest = l.get(q + 1..).unwrap_or_default().trim_start();
        let Some(tail) = rest.strip_prefix("or").or_else(|| rest.strip_prefix("and")) else { continue };
        if !tail.starts_with(char::is_whitespace) {
            continue;
        }
        let tail = tail.trim_start();
        if XPATH_NODE_FUNCTIONS.iter().any(|f| tail.strip_prefix(f.trim_end_matches('(')).is_some_and(|r| r.trim_start().starts_with('('))) {
            return Some("xpath-quote-break");
        }
    }
    None
}

pub fn detect_ldapi(value: &[u8]) -> Option<&'static str> {
    if value.windows(2).any(|w| w == b"::") || value.contains(&b'(') && value.iter().any(|&c| c == b'\'' || c == b'"') {
        if let Some(hit) = xpath(value) {
            return Some(hit);
        }
    }
    let v: Vec<u8> = value.iter().copied().filter(|c| !c.is_ascii_whitespace()).collect();
    let get = |i: usize| v.get(i).copied();
    for i in 0..v.len() {
        let c = get(i);
        let n1 = get(i + 1);
        let n2 = get(i + 2);
        match c {
            Some(b')') => {
                if n1 == Some(b'(') {
                    // `)(` followed by an item or a composite filter.
                    let rest = v.get(i + 2..).unwrap_or_default();
                    if matches!(n2, Some(b'&' | b'|' | b'!' | b'(')) || rest.iter().position(|&x| x == b'=').is_some_and(|e| attr_like(rest.get(..e).map(|a| a.strip_suffix(b"~").or(a.strip_suffix(b">")).or(a.strip_suffix(b"<")).unwrap_or(a)).unwrap_or_default())) {
                        return Some("filter-break");
                    }
                }
                if i > 0 && get(i - 1) == Some(b'*') && (n1 == Some(b')') || n1 == Some(0) || n1.is_none() && v.first() == Some(&b'*')) {
                    return Some("wildcard-close");
                }
            }
            Some(b'(') => {
                if matches!(n1, Some(b'&' | b'|' | b'!')) && matches!(n2, Some(b'(')) {
                    return Some("composite");
                }
                // `(attr=*)` or `(attr=value)` items with a `*`.
                let rest = v.get(i + 1..).unwrap_or_default();
                if let Some(close) = rest.iter().position(|&x| x == b')') {
                    let item = rest.get(..close).unwrap_or_default();
                    if let Some(e) = item.iter().position(|&x| x == b'=') {
                        let attr = item.get(..e).unwrap_or_default();
                        let val = item.get(e + 1..).unwrap_or_default();
                        if attr_like(attr) && val.contains(&b'*') && (v.first() == Some(&b'*') || v.contains(&b'|') || v.contains(&b'&') || i > 0) {
                            return Some("wildcard-item");
                        }
                    }
                }
            }
            Some(b'*') if i == 0 && matches!(n1, Some(b')' | b'(')) => return Some("wildcard-close"),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::detect_ldapi as d;

    #[test]
    fn filter_injections() {
        for s in ["*)(uid=*))(|(uid=*", "admin)(&)", "*)(&", "*))%00".replace("%00", "\0").as_str(), "x)(|(mail=*))", "*(|(mail=*))", "(&(objectClass=*))", "admin*)((|userpassword=*)", "*)(objectClass=*", ")(cn=*", "x' or name()='username' or 'x'='ys", "count(/child::node())", "' and string-length(name(/*[1]))>0 or '", "\" or count(//user) > 0 or \"", "/descendant::*"] {
            assert!(d(s.as_bytes()).is_some(), "{s:?}");
        }
    }

    #[test]
    fn text_passes() {
        for s in ["john.smith", "a (b) c", "smile :)(", "f(x)=y", "x = (a) * (b)", "(555) 123-4567", "*", "Tom & Jerry (1940)", "see (note) (2)", "std::vector<int>", "Foo::bar()", "It's a name (or title) field", "don't or won't count (maybe)", "Rock 'n' roll or count(1)", "a::b", "10:30::00"] {
            assert!(d(s.as_bytes()).is_none(), "{s}");
        }
    }
}
