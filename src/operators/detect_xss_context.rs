//! `@detectXSSContext` (wafer extension): libinjection's `@detectXSS`, and then the HTML and
//! JavaScript contexts it misses.
//!
//! libinjection parses the value as HTML from the start of a document; a fragment that only
//! makes sense inside an attribute, a namespaced or spaced tag, or JavaScript without any
//! markup reads to it as text. The grammar here reads the value lowercased, with full-width
//! forms (`＜script＞`) as ASCII, and matches:
//!
//! - an event handler attribute: `on` and at least three letters, then `=`, after a blank,
//!   a quote, `/` or `]` that ends what came before (`"onfocus=`, `<x 1='1'onxxx=1`,
//!   `src[d]=x[e]onerror=`), and the `formaction` and `srcdoc` attributes the same way;
//! - a script URL: `javascript:`, `vbscript:`, `livescript:`, `data:text/html` read without
//!   the blanks and control bytes browsers skip inside a scheme (`ja\tvascript:`), and CSS's
//!   `url(javascript`, `:expression(`, `-moz-binding`;
//! - the start of an element that runs or loads code: `<script`, `<iframe`, `<object`,
//!   `<embed`, `<applet`, `<meta`, `<base`, `<link`, `<style`, `<svg`, `<math`, `<frame`,
//!   `<frameset`, `<isindex`, `<vmlframe`, `<?import`, also with a namespace prefix and
//!   blanks (`< x: script`, `<html:script`, `<:vmlframe`);
//! - a call of a JavaScript sink: `alert`, `prompt`, `confirm`, `eval`, `atob`, `btoa`,
//!   `settimeout`, `setinterval`, `execscript`, `globaleval`, `fromcharcode`, `new function`
//!   followed (comments between allowed, not blanks) by `(` or a template literal; a tagged
//!   template call (`.call\``, `.apply\``); `document.cookie`, `document.domain`,
//!   `document.write`, `window.location` with blanks and comments around the `.`;
//! - JSFuck: a run of at least 16 of `[]()!+` and blanks with at least four `[]`.
//!
//! The work is one lowercased copy of the value (at most [`MAX_LEN`] bytes read) and linear
//! scans of it.

use super::detect_text::{full_width_at, ident, words};
use super::libinjection;

/// Bytes of a value read by the grammar (libinjection reads the whole value).
pub const MAX_LEN: usize = 16 * 1024;

const EVENT_LIKE: &[&str] = &["formaction", "srcdoc"];
const SCHEMES: &[&str] = &["javascript:", "vbscript:", "livescript:", "data:text/html", "url(javascript", ":expression(", "-moz-binding"];
const ELEMENTS: &[&str] = &["script", "iframe", "object", "embed", "applet", "meta", "base", "link", "style", "svg", "math", "frame", "frameset", "isindex", "vmlframe"];
const SINKS: &[&str] = &["alert", "prompt", "confirm", "eval", "atob", "btoa", "settimeout", "setinterval", "execscript", "globaleval", "fromcharcode"];
const PROPERTIES: &[(&str, &[&str])] = &[("document", &["cookie", "domain", "write", "writeln", "location"]), ("window", &["location"])];

/// Whether the value holds a byte every context needs: `<`, `=`, `:`, `(`, `` ` ``, `[`,
/// `.`, `-` or a full-width form's lead byte.
pub fn may_match(value: &[u8]) -> bool {
    value.iter().any(|&b| matches!(b, b'<' | b'=' | b':' | b'(' | b'`' | b'[' | b'.' | b'-' | 0xef))
}

/// `@detectXSSContext`: whether libinjection or the grammar finds XSS.
pub fn detect_xss_context(value: &[u8]) -> Option<&'static str> {
    if libinjection::detect_xss(value) {
        return Some("xss");
    }
    if !may_match(value) {
        return None;
    }
    xss_context(value)
}

/// The grammar alone (without libinjection): the context found.
pub fn xss_context(value: &[u8]) -> Option<&'static str> {
    let s = normalize(value);
    if event_handler(&s) {
        return Some("event handler");
    }
    if script_url(&s) {
        return Some("script url");
    }
    if element(&s) {
        return Some("code element");
    }
    if sink(&s) {
        return Some("javascript sink");
    }
    if jsfuck(&s) {
        return Some("jsfuck");
    }
    None
}

/// Lowercase ASCII with the full-width forms of `!`..`~` folded, and UTF-7's forms of `<`
/// and `>` (`+ADw-`, `+AD4-`: the modified base64 of U+003C and U+003E) read as `<` and `>`;
/// other bytes kept.
fn normalize(value: &[u8]) -> Vec<u8> {
    let v = value.get(..MAX_LEN).unwrap_or(value);
    let mut out = Vec::with_capacity(v.len());
    let mut i = 0;
    while let Some(&b) = v.get(i) {
        if let Some(c) = full_width_at(v, i) {
            out.push(c.to_ascii_lowercase());
            i += 3;
            continue;
        }
        if b == b'+' {
            if let Some(w) = v.get(i + 1..i + 5) {
                if w.eq_ignore_ascii_case(b"adw-") || w.eq_ignore_ascii_case(b"ad4-") {
                    out.push(if w.get(2) == Some(&b'w') || w.get(2) == Some(&b'W') { b'<' } else { b'>' });
                    i += 5;
                    continue;
                }
            }
        }
        out.push(b.to_ascii_lowercase());
        i += 1;
    }
    out
}

fn blank(b: u8) -> bool {
    b <= b' '
}

fn skip_blank(s: &[u8], mut i: usize) -> usize {
    while s.get(i).is_some_and(|&b| blank(b)) {
        i += 1;
    }
    i
}

/// After `i`: blanks and `/* ... */` comments skipped.
fn skip_comments(s: &[u8], mut i: usize, blanks: bool) -> usize {
    loop {
        if blanks {
            i = skip_blank(s, i);
        }
        if s.get(i..i + 2) == Some(b"/*") {
            i = s.get(i + 2..).and_then(|r| r.windows(2).position(|w| w == b"*/")).map_or(s.len(), |p| i + 2 + p + 2);
            continue;
        }
        return i;
    }
}

fn event_handler(s: &[u8]) -> bool {
    for (i, w) in s.windows(2).enumerate() {
        let before = i.checked_sub(1).and_then(|j| s.get(j)).copied();
        // `/` and `]` separate attributes only inside a tag (`<svg/onload=`), not in a path
        // or a base64 value (`...bQo/onafe=`).
        let in_tag = || s.get(..i).is_some_and(|h| h.contains(&b'<'));
        if !before.is_some_and(|b| blank(b) || matches!(b, b'"' | b'\'' | b'`') || (matches!(b, b'/' | b']') && in_tag())) {
            continue;
        }
        let rest = s.get(i..).unwrap_or_default();
        let name = rest.iter().take_while(|b| b.is_ascii_lowercase()).count();
        let is_event = w == b"on" && name >= 5;
        let is_like = EVENT_LIKE.iter().any(|e| rest.get(..name) == Some(e.as_bytes()));
        if (is_event || is_like) && s.get(skip_blank(s, i + name)) == Some(&b'=') {
            return true;
        }
    }
    false
}

fn script_url(s: &[u8]) -> bool {
    // Blanks, control bytes and `\` (`\x07javascript:` as text) are skipped in a scheme.
    let compact: Vec<u8> = s.iter().copied().filter(|&b| !blank(b) && b != 0x7f).collect();
    SCHEMES.iter().any(|k| compact.windows(k.len()).any(|w| w == k.as_bytes()))
}

fn element(s: &[u8]) -> bool {
    for (i, &b) in s.iter().enumerate() {
        if b != b'<' {
            continue;
        }
        let mut p = skip_blank(s, i + 1);
        if s.get(p) == Some(&b'?') {
            if s.get(p + 1..p + 7) == Some(b"import") {
                return true;
            }
            continue;
        }
        // A namespace prefix: `x:`, `html:`, `:`.
        let n = s.get(p..).unwrap_or_default().iter().take_while(|b| b.is_ascii_alphanumeric()).count();
        let q = skip_blank(s, p + n);
        if s.get(q) == Some(&b':') {
            p = skip_blank(s, q + 1);
        }
        let n = s.get(p..).unwrap_or_default().iter().take_while(|b| b.is_ascii_alphanumeric()).count();
        let name = s.get(p..p + n).unwrap_or_default();
        let after = s.get(p + n).copied();
        if ELEMENTS.iter().any(|e| e.as_bytes() == name) && after.is_none_or(|a| blank(a) || matches!(a, b'>' | b'/')) {
            return true;
        }
    }
    false
}

fn sink(s: &[u8]) -> bool {
    for k in SINKS {
        if words(s, k).any(|end| matches!(s.get(skip_comments(s, end, false)), Some(b'(' | b'`'))) {
            return true;
        }
    }
    if words(s, "new").any(|end| {
        let p = skip_blank(s, end);
        s.get(p..p + 8) == Some(b"function") && matches!(s.get(skip_comments(s, p + 8, true)), Some(b'(' | b'`'))
    }) {
        return true;
    }
    // A tagged template call: `.call` or `.apply` then a template literal.
    for k in ["call", "apply"] {
        for end in words(s, k) {
            let start = end - k.len();
            let mut j = start;
            while j > 0 && s.get(j - 1).is_some_and(|&b| blank(b)) {
                j -= 1;
            }
            if j > 0 && s.get(j - 1) == Some(&b'.') && s.get(skip_comments(s, end, true)) == Some(&b'`') {
                return true;
            }
        }
    }
    for (obj, props) in PROPERTIES {
        for end in words(s, obj) {
            let p = skip_comments(s, end, true);
            if s.get(p) != Some(&b'.') {
                continue;
            }
            let q = skip_comments(s, p + 1, true);
            let n = s.get(q..).unwrap_or_default().iter().take_while(|&&b| ident(b)).count();
            if props.iter().any(|pr| s.get(q..q + n) == Some(pr.as_bytes())) {
                return true;
            }
        }
    }
    false
}

fn jsfuck(s: &[u8]) -> bool {
    let mut run = 0usize;
    let mut pairs = 0usize;
    let mut prev = 0u8;
    for &b in s {
        if matches!(b, b'[' | b']' | b'(' | b')' | b'!' | b'+' | b' ') {
            run += 1;
            if prev == b'[' && b == b']' {
                pairs += 1;
            }
            if run >= 16 && pairs >= 4 {
                return true;
            }
        } else {
            run = 0;
            pairs = 0;
        }
        prev = b;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(s: &str) -> Option<&'static str> {
        xss_context(s.as_bytes())
    }

    #[test]
    fn attributes_and_urls() {
        for s in ["\"onzoom=", "<x 1='1'onxxx=1", "<x onend=", "<svg/onload=alert(1)>", "  onload= ", "<img[a][b][c]src[d]=x[e]onerror=[f]\"alert(1)\">", "'formaction=", "ja\tvascript: ", "v\nb\ts\nc\nr\ti\tp\nt::", "<img src=\"livescript:document.cookie=true;\">", "x=x:url(javascript", "-moz-binding:url(http://example.com/xss.xml#xss)", "<a href=\"\\x07javascript:alert(1)\">", "<p style=\"width:expression(alert(1))\">"] {
            assert!(ctx(s).is_some(), "{s}");
        }
    }

    #[test]
    fn elements() {
        for s in ["< x: script", "<:vmlframe src=", "<v:vmlframe src=\"foo.com/sup.fml\"/>", "<html:script>x</html:script>", "<script >alert(1)", "<?import implementation =", "<BASE dsfds HREF / =", "<OBJECT data =", "<STYLE>@import'http://xss.rocks/xss.css';</STYLE>", "<meta charset=\"UTF-8\">", "＜script ＞alert(1)＜/script＞", "+ADw-script+AD4-alert(1)"] {
            assert!(ctx(s).is_some(), "{s}");
        }
    }

    #[test]
    fn javascript() {
        for s in ["prompt()", "alert('bar');", "atob()", "setInterval(code, 1)", "x\";setTimeout(name, 1)//", "new Function()", "self[\"$\"][\"globalEval\"](\"alert(1)\")", "[].sort.call`${alert}1337`", "[  ] . sort . call ` ${ alert } 1337 `", "Reflect.apply.call`${navigation.navigate}`", "document /*foo*/ .     cookie", "window.location", "alert/**/(1)", "x.parentWindow.alert(135)", "[][(![]+[])[+[]]+([![]]+[][[]])[+!+[]+[+[]]]]"] {
            assert!(ctx(s).is_some(), "{s}");
        }
    }

    #[test]
    fn text_and_markup_of_ordinary_forms_pass() {
        for s in [
            "Please confirm (by Friday) that you can come",
            "I turned it on = it works",
            "online=yes",
            "the conference on 5/6 at 10:00",
            "<div class=\"card\"><p>Hello</p></div>",
            "<b>bold</b> and <i>italic</i>",
            "x < y and y > z",
            "https://shop.example.com/help?topic=returns",
            "const user = await fetch('/api/users/42').then(r => r.json());",
            "I love javascript and rust",
            "see the documentation (document. 5)",
            "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
            "a [1] [2] (3)",
            "VGhhbmtzLCBmb3IgYWxsIHlvdXIgd29yayBzaW5jZSB5ZWFycyBvbiBDUlMuIEh1bQo/onafe=",
            "",
        ] {
            assert_eq!(ctx(s), None, "{s}");
        }
    }

    #[test]
    fn libinjection_comes_first_and_hostile_input_is_bounded() {
        assert!(detect_xss_context(b"<script>alert(1)</script>").is_some());
        assert_eq!(detect_xss_context(b"hello world"), None);
        let big = "<".repeat(100_000);
        assert!(normalize(big.as_bytes()).len() <= MAX_LEN);
        let junk: Vec<u8> = (0..50_000u32).map(|i| (i * 7919 % 256) as u8).collect();
        let _ = detect_xss_context(&junk);
        assert_eq!(ctx("/* unterminated alert"), None);
    }
}
