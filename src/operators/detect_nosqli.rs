//! `@detectNoSQLi` (wafer extension): MongoDB-style operator injection.
//!
//! Checked on names and values alike. A name is an injection when one of its segments (split
//! at `.`, `[`, `]`) is a query operator (`$ne`, `$gt`, `$where`, `$regex`, ...): JSON keys
//! (`{"user": {"$ne": null}}` gives the name `json.user.$ne`) and form brackets
//! (`user[$ne]=x`). A value is an injection when it holds an operator used as a key
//! (`{ $ne: 1 }`, `$where: '...'`, `"$gt":""`), or server-side JavaScript reaching the
//! query (`this.password`, `db.x.find(`, `; return true`, `sleep(` after a quote, `|| 1==1`
//! style always-true comparisons after a quote).

const OPERATORS: &[&str] = &["$ne", "$eq", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$or", "$and", "$not", "$nor", "$exists", "$type", "$where", "$regex", "$options", "$expr", "$elemmatch", "$size", "$all", "$mod", "$text", "$search", "$function", "$accumulator", "$jsonschema", "$comment", "$lookup", "$match", "$set", "$unset", "$push", "$inc"];

fn is_operator(seg: &str) -> bool {
    let l = seg.trim().trim_matches(|c| c == '"' || c == '\'').to_ascii_lowercase();
    OPERATORS.contains(&l.as_str())
}

/// Whether the value holds what [`detect_nosqli`] needs: `$` (operators), `|` or a quote (the
/// JavaScript forms), or a `.` after an `s` or `b` (`this.`, `db.`; blanks between them
/// aside, and any non-ASCII byte taken as a possible blank).
pub fn may_match(value: &[u8]) -> bool {
    let mut prev = 0u8;
    for &c in value {
        match c {
            b'$' | b'|' | b'\'' | b'"' => return true,
            b'.' if matches!(prev, b's' | b'S' | b'b' | b'B') || prev >= 0x80 => return true,
            _ => {}
        }
        if !c.is_ascii_whitespace() {
            prev = c;
        }
    }
    false
}

/// A name or value holding a query operator or query JavaScript.
pub fn detect_nosqli(value: &[u8]) -> Option<&'static str> {
    let s = String::from_utf8_lossy(value);
    if s.contains('$') {
        // A segment of a name.
        if s.split(['.', '[', ']']).any(is_operator) {
            return Some("operator-name");
        }
        // An operator used as a key inside a value: `$ne:` / `"$ne":`.
        let b = s.as_bytes();
        let mut i = 0;
        while let Some(p) = s.get(i..).and_then(|r| r.find('$')) {
            let at = i + p;
            let word: String = s.get(at + 1..).unwrap_or_default().chars().take_while(|c| c.is_ascii_alphabetic()).collect();
            let after = s.get(at + 1 + word.len()..).unwrap_or_default().trim_start_matches(['"', '\'', ' ']);
            if is_operator(&format!("${word}")) && (after.starts_with(':') || after.starts_with(']')) && (at == 0 || !b.get(at - 1).is_some_and(u8::is_ascii_alphanumeric)) {
                return Some("operator-key");
            }
            i = at + 1;
        }
    }
    let l = s.to_ascii_lowercase();
    let compact: String = l.chars().filter(|c| !c.is_whitespace()).collect();
    if compact.contains("this.") && (compact.contains("match(") || compact.contains("==") || compact.contains("!=") || compact.starts_with('\'') || compact.starts_with('"')) {
        return Some("javascript");
    }
    if compact.contains("db.") && ["find(", "insert(", "mapreduce(", "drop(", "remove(", "update(", "getcollection", "eval("].iter().any(|k| compact.contains(k)) {
        return Some("javascript");
    }
    let quoted = compact.starts_with(['\'', '"']) || compact.contains("';") || compact.contains("\";") || compact.contains("'||") || compact.contains("\"||") || compact.contains("'&&");
    if quoted && (compact.contains("returntrue") || compact.contains("return1") || compact.contains("sleep(") || compact.contains("1==1") || compact.contains("'a'=='a") || compact.contains("varx")) {
        return Some("javascript");
    }
    if compact.starts_with("||1==1") || compact.starts_with("';returntrue") || compact.contains("||'1'=='1") {
        return Some("javascript");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::detect_nosqli as d;

    #[test]
    fn operators_and_javascript() {
        for s in ["json.user.$ne", "user[$ne]", "password[$regex]", "{ $ne: 1 }", "{\"$gt\": \"\"}", "$where: '1 == 1'", "', $where: '1 == 1'", "' && this.password.match(/.*/)//", "db.injection.insert({success:1});", "'; return true; var x='", "|| 1==1", "';sleep(5000);'", "{\"username\": {\"$regex\": \"^adm\"}}", "', $or: [ {}, { 'a':'a"] {
            assert!(d(s.as_bytes()).is_some(), "{s}");
        }
    }

    #[test]
    fn money_and_text_pass() {
        for s in ["$5.00", "costs $ne", "price[$]", "json.user.name", "this.is fine", "US$ 100: ok", "$HOME/bin", "a == b", "return true", "{\"total\": \"$12\"}"] {
            assert!(d(s.as_bytes()).is_none(), "{s}");
        }
    }
}
