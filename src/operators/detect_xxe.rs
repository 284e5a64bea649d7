//! `@detectXXE` (wafer extension): XML external entities and their relatives.
//!
//! The value is scanned as XML markup declarations: it is an injection when it holds
//! - `<!ENTITY` (any entity declaration: external ones read files and URLs, internal ones
//!   nest into billion-laughs expansions; requests have no use for either), or a parameter
//!   entity reference `%name;` inside a DOCTYPE;
//! - `<!DOCTYPE name SYSTEM "..."` or `PUBLIC "..." "..."` (an external DTD);
//! - an XInclude element (`<xi:include`, or any prefix bound to
//!   `http://www.w3.org/2001/XInclude`);
//! - an XSLT document reaching out (`document(`, `xsl:include`/`xsl:import` with `href`).
//!
//! Case and whitespace inside the declarations are ignored as XML parsers ignore them.

/// A value that is one parameter-entity reference (`%remote;`): only a DTD has them, so it is
/// the half of an attack whose declaration is sent elsewhere.
fn parameter_entity_reference(value: &[u8]) -> bool {
    let v = value.trim_ascii();
    let name = v.strip_prefix(b"%").and_then(|r| r.strip_suffix(b";")).unwrap_or_default();
    // Three characters at least: `%s;` and `%ld;` are format strings.
    name.len() >= 3 && name.first().is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_') && name.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.'))
}

/// Whether the value holds `<!` (`<!ENTITY`, `<!DOCTYPE`, `<![CDATA[`), `xi:` or `xinclude`
/// (XInclude) or `xsl` (XSLT), in any case, or is `%...;`: what every finding of
/// [`detect_xxe`] needs.
pub fn may_match(value: &[u8]) -> bool {
    let ci = |pat: &[u8]| value.windows(pat.len()).any(|w| w.eq_ignore_ascii_case(pat));
    value.trim_ascii().starts_with(b"%") && value.trim_ascii().ends_with(b";") || value.contains(&b'<') && (value.windows(2).any(|w| w == b"<!") || ci(b"xi:") || ci(b"xinclude") || ci(b"xsl"))
}

pub fn detect_xxe(value: &[u8]) -> Option<&'static str> {
    if parameter_entity_reference(value) {
        return Some("parameter-entity");
    }
    if !value.contains(&b'<') {
        return None;
    }
    let s = String::from_utf8_lossy(value).to_ascii_lowercase();
    let compact: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if compact.contains("<!entity") || compact.contains("<! entity") {
        return Some("entity");
    }
    if let Some(p) = compact.find("<!doctype") {
        let decl = compact.get(p..).unwrap_or_default();
        let head = decl.split(['[', '>']).next().unwrap_or_default();
        if head.contains(" system ") || head.contains(" system\"") || head.contains(" system'") || head.contains(" public ") {
            return Some("external-dtd");
        }
        if decl.find('%').is_some_and(|q| decl.get(q + 1..).is_some_and(|r| r.chars().take_while(|c| c.is_alphanumeric() || *c == '_').count() > 0 && r.contains(';'))) {
            return Some("parameter-entity");
        }
    }
    // CDATA sections that hold nothing but markup delimiters: a tag written in pieces so that
    // no `<script` appears (`<![CDATA[<]]>SCRIPT<![CDATA[>]]>`).
    let mut from = 0;
    while let Some(p) = compact.get(from..).and_then(|r| r.find("<![cdata[")) {
        let start = from + p + 9;
        let rest = compact.get(start..).unwrap_or_default();
        if let Some(end) = rest.find("]]>") {
            let inner = rest.get(..end).unwrap_or_default();
            if !inner.is_empty() && inner.contains(['<', '>']) && inner.chars().all(|c| matches!(c, '<' | '>' | '/' | ' ')) {
                return Some("cdata-split");
            }
        }
        from = start;
    }
    if compact.contains("<xi:include") || compact.contains("www.w3.org/2001/xinclude") {
        return Some("xinclude");
    }
    if (compact.contains("<xsl:include") || compact.contains("<xsl:import")) && compact.contains("href") || compact.contains("xsl") && compact.contains("document(") {
        return Some("xslt");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::detect_xxe as d;

    #[test]
    fn declarations() {
        for s in ["<!DOCTYPE foo [<!ENTITY xxe SYSTEM \"file:///etc/passwd\">]><foo>&xxe;</foo>", "<!DOCTYPE x [<!ENTITY % p SYSTEM \"http://e/x.dtd\"> %p;]>", "<!DOCTYPE x SYSTEM \"http://evil/x.dtd\">", "<!doctype  x  PUBLIC \"a\" \"http://e/\">", "<root xmlns:xi=\"http://www.w3.org/2001/XInclude\"><xi:include href=\"file:///etc/passwd\"/></root>", "<!DOCTYPE xxe [<!ENTITY foo \"aaaaaa\">]>", "<!DOCTYPE x [ %remote; ]>", "%remote;", " %foo; ", "<foo><![CDATA[<]]>SCRIPT<![CDATA[>]]>alert(1)<![CDATA[<]]>/SCRIPT<![CDATA[>]]></foo>"] {
            assert!(d(s.as_bytes()).is_some(), "{s}");
        }
    }

    #[test]
    fn documents_pass() {
        for s in ["<?xml version=\"1.0\"?><a>b</a>", "<!DOCTYPE html><html></html>", "<p>100% sure; yes</p>", "<a href=\"x\">entity</a>", "<!-- system -->", "100%;", "50% off; today", "%s;", "%ld;", "<![CDATA[a < b]]>", "<![CDATA[<p>hi</p>]]>", "%d%;"] {
            assert!(d(s.as_bytes()).is_none(), "{s}");
        }
    }
}
