//! Parses the arguments of `SecRule` / `SecAction`: variables, operator, actions,
//! and `%{...}` macros inside values. Offsets are relative to the argument text;
//! callers add the argument's own offset to report errors.

/// A key selector on a collection variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    None,
    /// `ARGS:name` (also `ARGS:'name'`). For `XML:/*`, the XPath expression.
    Key(String),
    /// `ARGS:/regex/`
    Regex(String),
}

/// One target in a `SecRule` variable list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VarAst {
    /// `&VAR`: the number of values, not the values.
    pub count: bool,
    /// `!VAR:key`: an exclusion from the list.
    pub negated: bool,
    /// The variable name as written (case kept; compare case-insensitively).
    pub name: String,
    pub selector: Selector,
    pub offset: usize,
}

/// `[!]@name param`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorAst {
    pub negated: bool,
    pub name: String,
    pub param: String,
    pub offset: usize,
    pub param_offset: usize,
}

/// `name` or `name:value` in an action list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionAst {
    pub name: String,
    pub value: Option<String>,
    pub offset: usize,
}

/// A piece of a value with macros: literal text or `%{VAR}` / `%{VAR.key}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MacroPart {
    Lit(String),
    Var { name: String, key: Option<String> },
}

/// Splits `A|!B:key|&C|D:/re|x/` into targets. Err carries (offset, message).
pub fn parse_variables(text: &str) -> Result<Vec<VarAst>, (usize, String)> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i <= bytes.len() {
        let start = i;
        let mut count = false;
        let mut negated = false;
        // Prefixes.
        while let Some(&c) = bytes.get(i) {
            match c {
                b'!' => negated = true,
                b'&' => count = true,
                b' ' | b'\t' => {}
                _ => break,
            }
            i += 1;
        }
        let name_start = i;
        while let Some(&c) = bytes.get(i) {
            if c == b':' || c == b'|' {
                break;
            }
            i += 1;
        }
        let name = text.get(name_start..i).unwrap_or("").trim().to_string();
        if name.is_empty() {
            return Err((start, "empty variable name".to_string()));
        }
        let mut selector = Selector::None;
        if bytes.get(i) == Some(&b':') {
            i += 1;
            let sel_start = i;
            match bytes.get(i) {
                Some(b'/') if !name.eq_ignore_ascii_case("XML") => {
                    // Regex: up to the next unescaped '/' that ends the target.
                    i += 1;
                    let re_start = i;
                    let mut end = None;
                    while let Some(&c) = bytes.get(i) {
                        if c == b'\\' {
                            i += 2;
                            continue;
                        }
                        if c == b'/' && matches!(bytes.get(i + 1), None | Some(b'|')) {
                            end = Some(i);
                            break;
                        }
                        i += 1;
                    }
                    let Some(end) = end else {
                        return Err((sel_start, "unterminated regular expression in variable selector".to_string()));
                    };
                    selector = Selector::Regex(text.get(re_start..end).unwrap_or("").to_string());
                    i = end + 1;
                }
                Some(b'\'') => {
                    i += 1;
                    let k_start = i;
                    while let Some(&c) = bytes.get(i) {
                        if c == b'\'' {
                            break;
                        }
                        i += 1;
                    }
                    if bytes.get(i) != Some(&b'\'') {
                        return Err((sel_start, "unterminated quoted selector".to_string()));
                    }
                    selector = Selector::Key(text.get(k_start..i).unwrap_or("").to_string());
                    i += 1;
                }
                _ => {
                    let k_start = i;
                    while let Some(&c) = bytes.get(i) {
                        if c == b'|' {
                            break;
                        }
                        i += 1;
                    }
                    let key = text.get(k_start..i).unwrap_or("").trim();
                    if key.is_empty() {
                        return Err((sel_start, "empty selector after ':'".to_string()));
                    }
                    selector = Selector::Key(key.to_string());
                }
            }
        }
        out.push(VarAst { count, negated, name, selector, offset: start });
        // Expect '|' or end.
        while let Some(&c) = bytes.get(i) {
            if c == b' ' || c == b'\t' {
                i += 1;
            } else {
                break;
            }
        }
        match bytes.get(i) {
            None => break,
            Some(b'|') => i += 1,
            Some(_) => return Err((i, "expected '|' between variables".to_string())),
        }
    }
    Ok(out)
}

/// Parses `[!]@name param` (no `@` means `@rx` with the whole text).
pub fn parse_operator(text: &str) -> OperatorAst {
    let lead = text.len() - text.trim_start().len();
    let mut rest = text.trim_start();
    let mut offset = lead;
    let mut negated = false;
    if let Some(r) = rest.strip_prefix('!') {
        negated = true;
        rest = r;
        offset += 1;
    }
    if let Some(r) = rest.strip_prefix('@') {
        let name_len = r.find(|c: char| c.is_whitespace()).unwrap_or(r.len());
        let name = r.get(..name_len).unwrap_or("").to_string();
        let after = r.get(name_len..).unwrap_or("");
        let param = after.trim_start_matches([' ', '\t']);
        let param_offset = offset + 1 + name_len + (after.len() - param.len());
        OperatorAst { negated, name, param: param.to_string(), offset, param_offset }
    } else {
        OperatorAst { negated, name: "rx".to_string(), param: rest.to_string(), offset, param_offset: offset }
    }
}

/// Splits `id:1,phase:2,msg:'a, b',t:none` into actions.
pub fn parse_actions(text: &str) -> Result<Vec<ActionAst>, (usize, String)> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        while let Some(&c) = bytes.get(i) {
            if c == b' ' || c == b'\t' || c == b'\n' || c == b'\r' {
                i += 1;
            } else {
                break;
            }
        }
        if i >= bytes.len() {
            break;
        }
        let start = i;
        while let Some(&c) = bytes.get(i) {
            if c == b':' || c == b',' {
                break;
            }
            i += 1;
        }
        let name = text.get(start..i).unwrap_or("").trim().to_string();
        let mut value = None;
        if bytes.get(i) == Some(&b':') {
            i += 1;
            while let Some(&c) = bytes.get(i) {
                if c == b' ' || c == b'\t' {
                    i += 1;
                } else {
                    break;
                }
            }
            if bytes.get(i) == Some(&b'\'') {
                let q = i;
                i += 1;
                let mut v = String::new();
                let mut closed = false;
                while i < bytes.len() {
                    let c = text.get(i..).and_then(|s| s.chars().next()).unwrap_or('\'');
                    if c == '\\' && bytes.get(i + 1) == Some(&b'\'') {
                        v.push('\'');
                        i += 2;
                        continue;
                    }
                    if c == '\'' {
                        closed = true;
                        i += 1;
                        break;
                    }
                    v.push(c);
                    i += c.len_utf8();
                }
                if !closed {
                    return Err((q, "unterminated quoted action value".to_string()));
                }
                value = Some(v);
            } else {
                let v_start = i;
                while let Some(&c) = bytes.get(i) {
                    if c == b',' {
                        break;
                    }
                    i += 1;
                }
                value = Some(text.get(v_start..i).unwrap_or("").trim_end().to_string());
            }
        }
        if name.is_empty() {
            return Err((start, "empty action name".to_string()));
        }
        out.push(ActionAst { name, value, offset: start });
        while let Some(&c) = bytes.get(i) {
            if c == b' ' || c == b'\t' || c == b'\n' || c == b'\r' {
                i += 1;
            } else {
                break;
            }
        }
        match bytes.get(i) {
            None => break,
            Some(b',') => i += 1,
            Some(_) => return Err((i, "expected ',' between actions".to_string())),
        }
    }
    Ok(out)
}

/// Splits a value into literal text and `%{...}` references.
pub fn parse_macro(text: &str) -> Vec<MacroPart> {
    let mut parts = Vec::new();
    let mut lit = String::new();
    let mut rest = text;
    while let Some(pos) = rest.find("%{") {
        let after = rest.get(pos + 2..).unwrap_or("");
        let Some(end) = after.find('}') else { break };
        lit.push_str(rest.get(..pos).unwrap_or(""));
        let inner = after.get(..end).unwrap_or("").trim();
        if !lit.is_empty() {
            parts.push(MacroPart::Lit(std::mem::take(&mut lit)));
        }
        let (name, key) = match inner.find(['.', ':']) {
            Some(d) => (inner.get(..d).unwrap_or(""), Some(inner.get(d + 1..).unwrap_or("").to_string())),
            None => (inner, None),
        };
        parts.push(MacroPart::Var { name: name.to_string(), key });
        rest = after.get(end + 1..).unwrap_or("");
    }
    lit.push_str(rest);
    if !lit.is_empty() {
        parts.push(MacroPart::Lit(lit));
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_with_selectors_exclusions_and_counts() {
        let v = parse_variables("REQUEST_HEADERS:User-Agent|!ARGS:foo|&ARGS|ARGS:/^(a|b)$/|TX:'x y'|XML:/*").unwrap();
        assert_eq!(v.len(), 6);
        assert_eq!(v[0].selector, Selector::Key("User-Agent".into()));
        assert!(v[1].negated);
        assert!(v[2].count && v[2].selector == Selector::None);
        assert_eq!(v[3].selector, Selector::Regex("^(a|b)$".into()));
        assert_eq!(v[4].selector, Selector::Key("x y".into()));
        assert_eq!(v[5].selector, Selector::Key("/*".into()));
    }

    #[test]
    fn operator_forms() {
        let o = parse_operator("!@pm a b c");
        assert!(o.negated);
        assert_eq!((o.name.as_str(), o.param.as_str()), ("pm", "a b c"));
        let o = parse_operator("^foo$");
        assert_eq!((o.name.as_str(), o.param.as_str()), ("rx", "^foo$"));
        let o = parse_operator("@unconditionalMatch");
        assert_eq!(o.param, "");
    }

    #[test]
    fn actions_with_quotes() {
        let a = parse_actions("id:1, phase:2,msg:'a, b',t:none,setvar:'tx.x=+%{tx.y}',deny").unwrap();
        let names: Vec<_> = a.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["id", "phase", "msg", "t", "setvar", "deny"]);
        assert_eq!(a[2].value.as_deref(), Some("a, b"));
        assert_eq!(a[4].value.as_deref(), Some("tx.x=+%{tx.y}"));
        assert_eq!(a[5].value, None);
        assert!(parse_actions("id:1,msg:'oops").is_err());
    }

    #[test]
    fn macros() {
        let m = parse_macro("Matched %{TX.0} in %{MATCHED_VAR_NAME}!");
        assert_eq!(m.len(), 5);
        assert_eq!(m[1], MacroPart::Var { name: "TX".into(), key: Some("0".into()) });
        assert_eq!(m[3], MacroPart::Var { name: "MATCHED_VAR_NAME".into(), key: None });
    }
}
