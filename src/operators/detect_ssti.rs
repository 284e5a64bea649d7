//! `@detectSSTI` (wafer extension): server-side template injection.
//!
//! The value is scanned for template delimiters: `{{ }}` (Jinja, Twig, Handlebars, Go),
//! `{% %}`, `${ }` (FreeMarker, EL, Velocity, Thymeleaf), `#{ }`, `*{ }`, `@( )` (Razor),
//! `<%= %>` / `<% %>` (ERB, JSP), `[[ ]]`, `{= =}` and `#set(`/`#foreach(` (Velocity). The
//! expression inside is tokenized (numbers, names, strings, operators) and is an injection
//! when it evaluates or reaches: an arithmetic operator between two operands (`7*7`,
//! `7*'7'`), a call (`x()` / `x.y(`), a dunder (`__class__`), a filter (`|attr`), an index
//! with a string, or a name of the template runtime (`config`, `self`, `request`, `T(`).
//! A bare name (`{{name}}`, `${user.name}`) is a placeholder, not an injection.

const RUNTIME: &[&str] = &["config", "self", "_self", "request", "settings", "app", "env", "lipsum", "cycler", "joiner", "namespace", "url_for", "get_flashed_messages", "range", "class", "getclass", "runtime", "process", "system", "exec", "freemarker", "velocity", "product", "object", "java", "dump", "include", "import", "application", "session", "global", "constructor", "__proto__", "require", "this", "tojson", "g", "cookies", "os", "popen", "subprocess", "getruntime", "forname", "newinstance", "new", "smarty"];

const OPENERS: &[(&str, &str)] = &[("{{", "}}"), ("{%", "%}"), ("${", "}"), ("#{", "}"), ("*{", "}"), ("@{", "}"), ("@(", ")"), ("<%=", "%>"), ("<%", "%>"), ("[[", "]]"), ("{=", "=}"), ("#set(", ")"), ("#foreach(", ")"), ("{#", "#}"), ("<#", ">"), ("{php}", "{/php}"), ("{$", "}")];

fn expr_is_injection(e: &str) -> bool {
    let e = e.trim();
    if e.is_empty() {
        return false;
    }
    let lower = e.to_ascii_lowercase();
    if lower.contains("__") || lower.contains("t(java") || lower.starts_with("t(") || lower.contains("|attr") || lower.contains("|join") || lower.contains("|e") && lower.contains('(') {
        return true;
    }
    // Tokens: operands and operators.
    let b = lower.as_bytes();
    let mut i = 0;
    let mut prev_operand = false;
    let mut prev_op: Option<u8> = None;
    let mut idents: Vec<&str> = Vec::new();
    while let Some(&c) = b.get(i) {
        if c.is_ascii_digit() {
            let n = b.get(i..).unwrap_or_default().iter().take_while(|x| x.is_ascii_digit() || **x == b'.').count();
            if prev_op.is_some_and(|o| matches!(o, b'*' | b'+' | b'-' | b'/' | b'%')) && prev_operand {
                return true;
            }
            prev_operand = true;
            prev_op = None;
            i += n;
            continue;
        }
        if c.is_ascii_alphabetic() || c == b'_' || c == b'$' {
            let n = b.get(i..).unwrap_or_default().iter().take_while(|x| x.is_ascii_alphanumeric() || **x == b'_' || **x == b'$').count();
            let id = lower.get(i..i + n).unwrap_or_default();
            idents.push(id);
            i += n;
            // A call: `name(`.
            if b.get(i) == Some(&b'(') {
                return true;
            }
            if prev_op.is_some_and(|o| matches!(o, b'*' | b'+' | b'-' | b'/' | b'%')) && prev_operand && idents.len() > 1 {
                return true;
            }
            prev_operand = true;
            prev_op = None;
            continue;
        }
        if c == b'\'' || c == b'"' {
            let n = b.get(i + 1..).unwrap_or_default().iter().position(|&x| x == c).map_or(b.len() - i, |p| p + 2);
            if prev_op.is_some_and(|o| matches!(o, b'*' | b'+')) && prev_operand {
                return true;
            }
            if prev_op == Some(b'[') {
                return true;
            }
            prev_operand = true;
            prev_op = None;
            i += n;
            continue;
        }
        if c == b'|' && prev_operand {
            return true;
        }
        if !c.is_ascii_whitespace() {
            if c == b'.' && prev_operand && idents.last().is_some_and(|id| RUNTIME.contains(id)) && idents.len() == 1 {
                return true;
            }
            prev_op = Some(c);
        }
        i += 1;
    }
    idents.first().is_some_and(|id| matches!(*id, "config" | "self" | "_self" | "request" | "settings" | "lipsum" | "cycler" | "joiner" | "namespace"))
}

/// Whether the value holds the start of a delimiter of [`OPENERS`]: `{` (most of them), or
/// `@(`, `<%`, `<#`, `[[`, `#s` (`#set(`), `#f` (`#foreach(`).
pub fn may_match(value: &[u8]) -> bool {
    value.contains(&b'{') || value.windows(2).any(|w| matches!(w, b"@(" | b"<%" | b"<#" | b"[[" | b"#s" | b"#f"))
}

/// The delimiter of the first injected expression found.
pub fn detect_ssti(value: &[u8]) -> Option<&'static str> {
    let s = String::from_utf8_lossy(value);
    for &(open, close) in OPENERS {
        let mut from = 0;
        let mut n = 0;
        while let Some(p) = s.get(from..).and_then(|r| r.find(open)) {
            n += 1;
            if n > 64 {
                break;
            }
            let start = from + p + open.len();
            let rest = s.get(start..).unwrap_or_default();
            let end = rest.find(close).unwrap_or(rest.len().min(256));
            let inner = rest.get(..end.min(512)).unwrap_or_default();
            let inner = if open == "${" && inner.starts_with('{') { inner.trim_start_matches('{') } else { inner };
            if open.starts_with('#') && open.ends_with('(') || open == "{php}" {
                return Some(open);
            }
            // A Jinja / Twig statement with its end tag (`{% if x %}...{% endif %}`), or an
            // assignment (`{% set x = ... %}`): a template's control flow, no text's.
            if open == "{%" {
                let stmt = inner.trim().to_ascii_lowercase();
                let kw: String = stmt.chars().take_while(char::is_ascii_alphabetic).collect();
                let closed = s.get(start..).is_some_and(|r| r.to_ascii_lowercase().replace(' ', "").contains(&format!("{{%end{kw}")));
                if matches!(kw.as_str(), "if" | "for" | "macro" | "block" | "with" | "filter" | "call" | "raw" | "autoescape") && closed && stmt.len() > kw.len()
                    || kw == "set" && stmt.contains('=')
                {
                    return Some(open);
                }
            }
            if open == "<#" {
                if ["assign", "list", "if", "import", "include", "function", "macro"].iter().any(|k| inner.starts_with(k)) {
                    return Some(open);
                }
            } else if expr_is_injection(inner) {
                return Some(open);
            }
            from = start;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::detect_ssti as d;

    #[test]
    fn expressions_in_delimiters() {
        for s in ["{{7*7}}", "${7*7}", "#{7*7}", "<%= 7 * 7 %>", "{{7*'7'}}", "${{7*7}}", "*{7*7}", "@(1+2)", "[[5*5]]", "{{config.items()}}", "{{''.__class__.__mro__}}", "{{dump(app)}}", "{{app.request.server.all|join(',')}}", "${T(java.lang.Runtime).getRuntime().exec('id')}", "{% import os %}{{os.system('id')}}", "#set($x=1)", "{% if True %}49{% endif %}", "{%for x in range(3)%}{{x}}{%endfor%}", "{% set x = 7 %}", "{$smarty.version}", "<#assign ex=\"freemarker.template.utility.Execute\"?new()>", "{{self}}", "{{request.application}}", "#{ 7 * 7 }"] {
            assert!(d(s.as_bytes()).is_some(), "{s}");
        }
    }

    #[test]
    fn placeholders_and_text_pass() {
        for s in ["{{name}}", "Hello {{ user.name }}", "${HOME}", "price ${price}", "#{id}", "a {b} c", "{{#each items}}", "5*5=25", "{ \"a\": 1 }", "#set the table", "<% if x %>", "[[link]]", "email@(company).com", "{% if x %}", "100{% off", "{% endif %}", "{$price}", "{% set %}"] {
            assert!(d(s.as_bytes()).is_none(), "{s}");
        }
    }
}
