//! `@detectSSI` (wafer extension): server-side include directives. The grammar of an SSI
//! element is `<!--#` directive (attribute `=` quoted value)* `-->`; the value is an
//! injection when it holds `<!--#` followed (after optional whitespace) by one of the
//! directives Apache and nginx execute: `exec`, `include`, `echo`, `config`, `set`,
//! `printenv`, `fsize`, `flastmod`, `if`, `elif`, `else`, `endif`, `block`. The closing
//! `-->` is not required (a truncated directive still runs on some servers).

const DIRECTIVES: &[&str] = &["exec", "include", "echo", "config", "set", "printenv", "fsize", "flastmod", "if", "elif", "else", "endif", "block"];

/// Whether the value holds a comment's start `<!--`, where every directive begins.
pub fn may_match(value: &[u8]) -> bool {
    value.windows(4).any(|w| w == b"<!--")
}

pub fn detect_ssi(value: &[u8]) -> Option<&'static str> {
    let s = String::from_utf8_lossy(value).to_ascii_lowercase();
    let mut from = 0;
    while let Some(p) = s.get(from..).and_then(|r| r.find("<!--")) {
        let rest = s.get(from + p + 4..).unwrap_or_default().trim_start();
        if let Some(d) = rest.strip_prefix('#') {
            let d = d.trim_start();
            let word: String = d.chars().take_while(char::is_ascii_alphabetic).collect();
            if let Some(k) = DIRECTIVES.iter().find(|k| **k == word) {
                let after = d.get(word.len()..).unwrap_or_default();
                // A directive is followed by whitespace, an attribute or the end of the comment.
                if after.is_empty() || after.starts_with(|c: char| c.is_whitespace() || c == '-') || (word == "printenv" || word == "else" || word == "endif") {
                    return Some(k);
                }
            }
        }
        from += p + 4;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::detect_ssi as d;

    #[test]
    fn directives() {
        for s in ["<!--#exec cmd=\"id\"-->", "<!--#include virtual=\"/etc/passwd\"-->", "<!-- #echo var=\"DOCUMENT_ROOT\" -->", "<!--#printenv -->", "x<!--#EXEC cmd=\"ls\"", "<!--#config errmsg=\"x\"-->", "<!--#set var=\"a\" value=\"b\" -->"] {
            assert!(d(s.as_bytes()).is_some(), "{s}");
        }
    }

    #[test]
    fn comments_pass() {
        for s in ["<!-- comment -->", "<!--# a note -->", "<!--#executive summary-->", "#exec", "<!--[if IE]>", "include this"] {
            assert!(d(s.as_bytes()).is_none(), "{s}");
        }
    }
}
