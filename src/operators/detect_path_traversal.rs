//! `@detectPathTraversal` (wafer extension): path traversal and file inclusion.
//!
//! The value is normalized as a file system would see it: `%2e`/`%2f`/`%5c` and the
//! overlong UTF-8 forms (`%c0%ae`, `%c0%af`, `%e0%80%ae`) decoded, `\` read as `/`, `..;/`
//! (Tomcat path parameters) read as `../`, and NUL and what follows it dropped. Then the
//! path's segments are walked from its start: `..` pops a segment, and popping past the
//! start escapes the root. The value is an inclusion when:
//! - it escapes the root twice or more (`../../x`), or once towards a sensitive target;
//! - it names a sensitive target absolutely (`/etc/passwd`, `C:\Windows\win.ini`,
//!   `/proc/self/environ`, an absolute path under a system directory);
//! - it starts with a stream wrapper (`php://`, `file://`, `phar://`, `zip://`, `expect://`,
//!   `data:...;base64,`, `glob://`, `jar:`).
//! - it is a remote file inclusion: a URL (`scheme://host...`) whose host is an IP address
//!   (`http://66.240.183.75/shell.php`, `https://[2001:db8::1]/x`), or that ends with `?`
//!   (not `/?`) or a NUL, which turn the suffix an application appends (`.php`) into the URL's query.
//!   A URL to a named host (`https://example.com/page`) is an ordinary value and passes.

const SENSITIVE: &[&str] = &[
    "etc/passwd", "etc/shadow", "etc/hosts", "etc/group", "etc/issue", "etc/motd", "etc/fstab", "etc/crontab", "etc/sudoers", "proc/self", "proc/version", "proc/cpuinfo", "win.ini", "boot.ini", "system.ini", "windows/system32", "winnt/", "inetpub", ".htaccess", ".htpasswd", "wp-config", "web.config", ".env", "id_rsa", "id_dsa", ".ssh/", "authorized_keys", ".bash_history", ".bashrc", "/var/log", "httpd.conf", "nginx.conf", "php.ini", "my.cnf", "web-inf", "meta-inf", "/etc/", ".git/", "config.php", "settings.py", "database.yml", "applicationhost.config", "sam", "repair/",
];

/// First segments of absolute paths that belong to the system, not to a web app.
const SYSTEM_ROOTS: &[&str] = &["etc", "proc", "var", "usr", "opt", "root", "sys", "dev", "boot", "bin", "sbin", "lib", "lib64", "srv", "private", "windows", "winnt", "system32", "inetpub", "xampp", "wamp", "program files", "programdata", "apache", "apache2", "nginx", "home"];

/// First directories of Windows drive paths (`C:/xampp/...`, `C:\php\sessions\`) where
/// the stacks' servers keep their configuration, logs and sessions, besides [`SYSTEM_ROOTS`].
const DRIVE_ROOTS: &[&str] = &["php", "mysql", "lampp", "tomcat", "apache-tomcat", "xampplite", "appserv", "wamp64", "nginx", "perl"];

/// Hidden directories that are public by design (RFC 8615).
const PUBLIC_HIDDEN_DIRS: &[&str] = &[".well-known"];

/// A path (no blanks, two segments or more) that names a file no web page links to:
/// - a file under a hidden directory (`.claude/settings.json`, `app/.aider/chat.aider`,
///   `/path/to/.docker/secrets`): tools' and stacks' configuration and credentials;
/// - a log file (`wp-content/debug.log`, `\log\access_log`, `logs/error_log`);
/// - a path under a dev server's file-system prefix (Vite's `@fs/`, `@id/`).
fn file_target(t: &str) -> Option<&'static str> {
    let t = t.trim_end();
    if t.is_empty() || t.contains(char::is_whitespace) || t.contains("://") {
        return None;
    }
    let body = t.strip_prefix('/').unwrap_or(t);
    if body.starts_with("@fs/") || body.starts_with("@id/") {
        return Some("sensitive-file");
    }
    let path: Vec<&str> = body.split(['?', '#']).next().unwrap_or_default().split('/').filter(|x| !x.is_empty()).collect();
    let (Some(last), true) = (path.last(), path.len() >= 2) else { return None };
    let hidden = path.iter().take(path.len() - 1).any(|d| {
        d.len() >= 3 && d.starts_with('.') && d.as_bytes().get(1).is_some_and(u8::is_ascii_alphabetic) && !PUBLIC_HIDDEN_DIRS.contains(d)
    });
    if hidden && last.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')) {
        return Some("sensitive-file");
    }
    let log = last.ends_with(".log") || last.ends_with("_log") && last.len() > 4;
    if log && last.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')) {
        return Some("sensitive-file");
    }
    None
}

const WRAPPERS: &[&str] = &["php://", "file://", "phar://", "zip://", "expect://", "glob://", "data://", "ogg://", "rar://", "zlib://", "compress.zlib://", "compress.bzip2://", "ssh2.", "jar:file:", "jar:http", "netdoc://", "gopher://", "dict://", "local_file://", "url:file:"];

fn normalize(v: &[u8]) -> String {
    // Nested `%25` first (`%252e` -> `%2e`), at most three times.
    let mut cur = v.to_vec();
    for _ in 0..3 {
        if !cur.windows(3).any(|w| w.eq_ignore_ascii_case(b"%25")) {
            break;
        }
        cur = replace_all(&cur, b"%25", b"%");
    }
    normalize_once(&cur)
}

fn replace_all(v: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len());
    let mut i = 0;
    while i < v.len() {
        if v.get(i..i + from.len()).is_some_and(|w| w.eq_ignore_ascii_case(from)) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.extend_from_slice(v.get(i..=i).unwrap_or_default());
            i += 1;
        }
    }
    out
}

/// The skeleton of a value: runs of characters other than letters, digits and `.` become one
/// `/` (`windows%c0%9vsystem32` and `etc\\hosts` read as paths), and so do the escapes left
/// undecoded with what they hold: `%` with up to two letters or digits (`%qf`, `%bg`), `%u` with
/// four (`%uEFC8`), the separators of fuzzers that no decoder turns into a character.
fn skeleton(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let b = s.as_bytes();
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        if c == b'%' {
            let n = if b.get(i + 1) == Some(&b'u') && b.get(i + 2..i + 6).is_some_and(|r| r.iter().all(u8::is_ascii_alphanumeric)) {
                5
            } else {
                b.get(i + 1..).unwrap_or_default().iter().take(2).take_while(|x| x.is_ascii_alphanumeric()).count()
            };
            i += 1 + n;
            if !out.ends_with('/') {
                out.push('/');
            }
            continue;
        }
        let Some(ch) = s.get(i..).and_then(|r| r.chars().next()) else { break };
        if ch.is_ascii_alphanumeric() || ch == '.' || ch == '_' || ch == '-' {
            out.push(ch);
        } else if !out.ends_with('/') {
            out.push('/');
        }
        i += ch.len_utf8();
    }
    out
}

/// Targets no benign parameter names with separators around them.
const STRONG: &[&str] = &["etc/passwd", "etc/shadow", "etc/hosts", "etc/issue", "etc/group", "windows/system32", "/win.ini", "/boot.ini", "/system.ini", "proc/self/", "/winnt/", "repair/sam", "etc/motd"];

fn normalize_once(v: &[u8]) -> String {
    let mut out = Vec::with_capacity(v.len());
    let mut i = 0;
    let hx = |b: u8| (b as char).to_digit(16);
    while let Some(&b) = v.get(i) {
        if b == 0 {
            i += 1;
            continue;
        }
        if b == b'%' {
            let rest = v.get(i + 1..).unwrap_or_default();
            let lower: Vec<u8> = rest.iter().take(8).map(u8::to_ascii_lowercase).collect();
            let overlong: &[(&[u8], u8)] = &[(b"c0%ae", b'.'), (b"c0%af", b'/'), (b"c1%9c", b'/'), (b"c0%2e", b'.'), (b"c0%2f", b'/'), (b"e0%80%ae", b'.'), (b"e0%80%af", b'/'), (b"c0%5c", b'/'), (b"u002e", b'.'), (b"u2215", b'/'), (b"u2216", b'/'), (b"uff0e", b'.')];
            if let Some(&(pat, c)) = overlong.iter().find(|(p, _)| lower.starts_with(p)) {
                out.push(c);
                i += 1 + pat.len();
                continue;
            }
            if let (Some(h), Some(l)) = (rest.first().and_then(|&c| hx(c)), rest.get(1).and_then(|&c| hx(c))) {
                let c = (h * 16 + l) as u8;
                if c == 0 {
                    i += 3;
                    continue;
                }
                // A decoded `%5c` separates as a raw `\` does.
                out.push(if c == b'\\' { b'/' } else { c });
                i += 3;
                continue;
            }
            // A broken escape (`%c1%8s`: an overlong form cut short) separates like `/`.
            if rest.first().is_some_and(u8::is_ascii_hexdigit) && rest.get(1).is_some_and(|c| c.is_ascii_alphanumeric()) {
                out.push(b'/');
                i += 3;
                continue;
            }
        }
        // UTF-8 overlong bytes given raw.
        if (b == 0xc0 || b == 0xc1) && v.get(i + 1).is_some() {
            let c = *v.get(i + 1).unwrap_or(&0);
            out.push(if c == 0xae { b'.' } else { b'/' });
            i += 2;
            continue;
        }
        out.push(if b == b'\\' { b'/' } else { b });
        i += 1;
    }
    let mut s = String::from_utf8_lossy(&out).to_ascii_lowercase();
    // Hex spellings and the Unicode look-alikes of `.` and `/` that decoders fold; each
    // replacement only when the value holds what it replaces (most values hold none).
    if s.contains("0x") {
        s = s.replace("0x2e", ".").replace("0x2f", "/").replace("0x5c", "/");
    }
    if !s.is_ascii() {
        s = s.replace(['\u{ff0e}', '\u{2024}'], ".").replace(['\u{2215}', '\u{2216}', '\u{ff0f}', '\u{ff3c}'], "/");
    }
    // Escapes that lost their `%` (`..2f..2fetc2fpasswd`): only next to a dot-segment.
    if s.contains("..2f") || s.contains("..5c") {
        s = s.replace("2f", "/").replace("5c", "/");
    }
    if s.contains("..") {
        s = s.replace("..;/", "../").replace("....//", "../").replace("...//", "../");
    }
    s
}

fn sensitive(s: &str) -> bool {
    SENSITIVE.iter().any(|t| {
        if *t == "sam" {
            s.ends_with("config/sam")
        } else {
            s.contains(t)
        }
    })
}

/// Whether the value can be what [`detect_path_traversal`] finds once normalized. Without `%`,
/// NUL, non-ASCII bytes or `0x` (what `normalize` decodes), a finding needs: `..` or `. .`
/// (dot-segments), `./` (fuzzers' separators before a target), `/.` (a hidden directory), an end
/// with `.log` or `_log`, a start (blanks aside) with `/`, `\\`, `@`, `.`, a drive (`c:\\`), a
/// stream wrapper or `data:` / `file:`, or a start with `etc`, `proc` or `windows`.
pub fn may_match(value: &[u8]) -> bool {
    let (mut prev, mut prev2) = (0u8, 0u8);
    for &c in value {
        if c == b'%' || c == 0 || c >= 0x80 || (c == b'.' && (prev == b'.' || prev == b' ' && prev2 == b'.' || matches!(prev, b'/' | b'\\'))) || (matches!(c, b'/' | b'\\') && prev == b'.') || (matches!(c, b'x' | b'X') && prev == b'0') {
            return true;
        }
        (prev2, prev) = (prev, c);
    }
    if value.windows(3).any(|w| w == b"://") {
        return true;
    }
    let t = value.iter().position(|c| !matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')).and_then(|p| value.get(p..)).unwrap_or_default();
    let starts = |v: &[u8], pat: &str| v.len() >= pat.len() && v.iter().zip(pat.bytes()).all(|(&a, b)| (if a == b'\\' { b'/' } else { a.to_ascii_lowercase() }) == b);
    let drive = t.first().is_some_and(u8::is_ascii_alphabetic) && t.get(1) == Some(&b':') && matches!(t.get(2), Some(b'/' | b'\\'));
    let end = value.trim_ascii_end();
    let log = end.len() > 4 && end.get(end.len() - 4..).is_some_and(|e| e.eq_ignore_ascii_case(b".log") || e.eq_ignore_ascii_case(b"_log"));
    matches!(t.first(), Some(b'/' | b'\\' | b'@')) || matches!(value.first(), Some(b'.'))
        || log
        || drive
        || WRAPPERS.iter().any(|w| starts(t, w))
        || ["data:", "file:"].iter().any(|w| starts(t, w))
        || ["etc", "proc", "windows"].iter().any(|w| starts(value, w))
}

/// What was found: `traversal`, `sensitive-file` or `wrapper`.
pub fn detect_path_traversal(value: &[u8]) -> Option<&'static str> {
    if value.len() < 3 {
        return None;
    }
    let s = normalize(value);
    let t = s.trim_start();
    if WRAPPERS.iter().any(|w| t.starts_with(w)) || (t.starts_with("data:") && t.contains(";base64,")) {
        return Some("wrapper");
    }
    if remote_inclusion(value) {
        return Some("remote-inclusion");
    }
    // Walk the segments.
    let mut depth: i32 = 0;
    let mut escapes = 0;
    let mut dotdots = 0;
    for seg in s.split('/') {
        let seg = seg.trim();
        match seg {
            ".." | "..." | ". ." => {
                dotdots += 1;
                if depth == 0 {
                    escapes += 1;
                } else {
                    depth -= 1;
                }
            }
            "" | "." => {}
            _ => depth += 1,
        }
    }
    // Computed once, and only when a branch needs it.
    let sens_cell = std::cell::OnceCell::new();
    let sens = || *sens_cell.get_or_init(|| sensitive(&s));
    // Separators of any kind before a strong target (`..%c0%9vwindows%c0%9vsystem32`).
    let junk = s.contains("..") || s.contains("./") || s.contains('%') || s.contains("0x2e") || s.contains('\u{fffd}') || s.starts_with('/') || s.starts_with('.');
    if junk {
        let sk = skeleton(&s);
        let sk = if sk.starts_with('/') { sk } else { format!("/{sk}") };
        if STRONG.iter().any(|t| sk.contains(t)) {
            return Some("sensitive-file");
        }
        // Three dot-segments or more once the junk around them is a separator (`%\..%\..%`).
        if sk.split('/').filter(|x| *x == "..").count() >= 3 {
            return Some("traversal");
        }
    }
    // Doubled percent signs (`%%32%%66`, `%%35%%63`): no decoder reads them, so the value's
    // own skeleton (before decoding) shows its separators.
    if value.windows(2).any(|w| w == b"%%") {
        let sk = skeleton(&String::from_utf8_lossy(value).to_ascii_lowercase());
        let sk = if sk.starts_with('/') { sk } else { format!("/{sk}") };
        if STRONG.iter().any(|t| sk.contains(t)) {
            return Some("sensitive-file");
        }
    }
    if let Some(hit) = file_target(t) {
        return Some(hit);
    }
    let config_like = s.ends_with(".conf") || s.ends_with(".log") || s.ends_with(".ini") || s.ends_with(".xml");
    if escapes >= 2 || dotdots >= 3 || (escapes >= 1 && (config_like || sens())) {
        return Some("traversal");
    }
    // Absolute paths to system files.
    let abs = t.strip_prefix("file:").unwrap_or(t);
    let drive = abs.len() > 2 && abs.as_bytes().get(1) == Some(&b':') && abs.as_bytes().first().is_some_and(u8::is_ascii_alphabetic) && abs.as_bytes().get(2) == Some(&b'/');
    if abs.starts_with('/') || drive {
        let body = if drive { abs.get(3..).unwrap_or_default() } else { abs.trim_start_matches('/') };
        let mut segs = body.split('/').filter(|x| !x.is_empty());
        let first = segs.next().unwrap_or_default();
        let more = segs.count();
        if more >= 1 && sens() {
            return Some("sensitive-file");
        }
        let drive_root = drive && DRIVE_ROOTS.contains(&first);
        if (SYSTEM_ROOTS.contains(&first) || drive_root) && more >= 1 && !abs.contains(' ') && (first != "home" || body.contains("/.")) && (first != "var" || !body.starts_with("var/www/html/") || sens()) {
            // `/usr/...` in a URL path of a web app is rare; an absolute system path in a
            // parameter is an inclusion.
            if body.split('/').rfind(|x| !x.is_empty()).is_some_and(|l| l.contains('.') || l.len() > 1) {
                return Some("sensitive-file");
            }
        }
    }
    if (s.starts_with("etc/passwd") || s.starts_with("etc/shadow") || s.starts_with("proc/self") || s.starts_with("windows/")) && sens() {
        return Some("sensitive-file");
    }
    None
}

/// Schemes an application can fetch a remote file with.
const REMOTE_SCHEMES: &[&str] = &["http", "https", "ftp", "ftps", "sftp", "tftp", "ldap", "ldaps", "smb", "rmi", "ssh"];

/// Whether the whole value (blanks aside) is a remote URL that includes a file: `scheme://`,
/// an optional `user@`, a host that is an IPv4 or IPv6 address; or any host, with the URL
/// ending in `?`, `%00` or a NUL (the appended suffix made a query or cut off).
fn remote_inclusion(value: &[u8]) -> bool {
    let v = String::from_utf8_lossy(value);
    let v = v.trim();
    let Some((scheme, rest)) = v.split_once("://") else { return false };
    if !REMOTE_SCHEMES.iter().any(|s| s.eq_ignore_ascii_case(scheme)) || rest.is_empty() || rest.contains(char::is_whitespace) {
        return false;
    }
    // `?` right after a host or a file name (not `/?`: a page's empty query).
    if (rest.ends_with('?') && !rest.ends_with("/?")) || rest.ends_with('\0') || rest.to_ascii_lowercase().ends_with("%00") {
        return true;
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if let Some(h) = host.strip_prefix('[') {
        // `[v6]` or `[v6]:port`.
        return h.split_once(']').is_some_and(|(a, _)| ipv6(a));
    }
    // An IPv6 address without brackets (`2001:41d0::29c8/x`): more than one `:`.
    if host.matches(':').count() >= 2 {
        return ipv6(host);
    }
    let name = host.split(':').next().unwrap_or_default();
    let octets: Vec<&str> = name.split('.').collect();
    octets.len() == 4 && octets.iter().all(|o| !o.is_empty() && o.len() <= 3 && o.bytes().all(|b| b.is_ascii_digit()) && o.parse::<u16>().is_ok_and(|n| n <= 255))
}

/// An IPv6 address: hex groups of at most 4 digits separated by `:`, at least two `:`.
fn ipv6(a: &str) -> bool {
    a.matches(':').count() >= 2 && a.split(':').all(|g| g.len() <= 4 && g.bytes().all(|b| b.is_ascii_hexdigit())) && a.bytes().any(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::detect_path_traversal as d;

    #[test]
    fn remote_inclusion_urls() {
        for v in ["http://66.240.183.75/crash.php", "https://[2001:41d0:701:1100::29c8]/gecko.php", "https://2001:41d0:701:1100::29c8/gecko.php", "ldap://127.0.0.1/", "https://foo.bar?", "http://evil.example/shell.txt?", "ftp://user@10.0.0.1:21/x", "http://evil.example/s.txt%00", "local_file://something", "url:file://etc/services"] {
            assert!(d(v.as_bytes()).is_some(), "{v}");
            assert!(super::may_match(v.as_bytes()), "{v}");
        }
        for v in ["https://example.com/page", "https://shop.example.com/cart.php?id=1", "http://example.com/?", "see https://example.com/help?", "https://1.2.3.4.example.com/", "http://999.1.1.1/", "mailto:someone@example.com", "https://example.com/a?b=c"] {
            assert!(d(v.as_bytes()).is_none(), "{v}");
        }
    }

    #[test]
    fn escapes_of_the_root() {
        for s in ["../../etc/passwd", "..\\..\\windows\\win.ini", "..%2f..%2fetc%2fpasswd", "%2e%2e%2f%2e%2e%2fx", "..;/..;/WEB-INF/web.xml", "%c0%ae%c0%ae/%c0%ae%c0%ae/etc", "....//....//etc/passwd", "../etc/passwd", "../../../../x%00.png", "a/../../../b"] {
            assert!(d(s.as_bytes()).is_some(), "{s}");
        }
    }

    #[test]
    fn sensitive_targets_and_wrappers() {
        for s in ["/etc/passwd", "/proc/self/environ", "C:\\Windows\\win.ini", "/var/log/apache2/access.log", "/usr/local/etc/apache22/httpd.conf", "php://filter/convert.base64-encode/resource=index.php", "file:///etc/passwd", "data:text/plain;base64,PD9waHA=", "expect://id", "/home/user/.ssh/id_rsa", "etc/passwd", "%252e%252e%c0%af%252e%252e%c0%afwindows%c0%afsystem32%c0%afdrivers%c0%afetc%c0%afhosts", ".?%c1%8s.?%c1%8swindows%c1%8ssystem32%c1%8sdrivers%c1%8setc%c1%8shosts", "0x2e0x2e%c0%9vwindows%c0%9vsystem32", "%5C..0x2fetc0x2fpasswd", ".%00.0x5c.%00.0x5c.%00.0x5cboot.ini", "\u{ff0e}\u{ff0e}/\u{ff0e}\u{ff0e}/etc/issue", "..%bg%qfwindows%bg%qfsystem32%bg%qfdrivers%bg%qfetc%bg%qfhosts", ".?%uF025.?%uF025etc%uF025passwd", "?.0x5c?.0x5c?.0x5cetc0x5cpasswd", ".?%c1%pc.?%c1%pcetc%c1%pcpasswd"] {
            assert!(d(s.as_bytes()).is_some(), "{s}");
        }
    }

    #[test]
    fn files_no_page_links_to() {
        for s in [".claude/settings.json", "app/.aider/chat.aider", "/path/to/.docker/secrets", "wp-content/debug.log", "\\log\\access_log", "logs/error_log", "@fs/etc/passwd", "/@fs/home/x/.env", "@id/__x00__", "C:\\php\\sessions\\", "C:/xampp/mysql/data/mysql.err"] {
            assert!(d(s.as_bytes()).is_some(), "{s}");
            assert!(super::may_match(s.as_bytes()), "{s}");
        }
        for s in ["/.well-known/openid-configuration", "my .net app/config", "see the .log", "catalog", "blog", "/blog/my-trip", "a.b/c.d", "C:/Users/maria/report.pdf", "changelog", "user@host/x"] {
            assert!(d(s.as_bytes()).is_none(), "{s}");
        }
    }

    #[test]
    fn separators_without_their_percent_sign() {
        for s in ["..2f..2f..2f..2fetc2fpasswd%00", "..5c..5c..5cwindows5cwin.ini", "..../%%32%%66..../%%32%%66etc%%32%%66passwd", "?.%%35%%63etc%%35%%63passwd", "%25%5c..%25%5c..%25%5c..%"] {
            assert!(d(s.as_bytes()).is_some(), "{s}");
        }
        for s in ["2f5c", "..2 feet", "100%% sure"] {
            assert!(d(s.as_bytes()).is_none(), "{s}");
        }
    }

    #[test]
    fn ordinary_paths_and_text_pass() {
        for s in ["/images/logo.png", "../style.css", "docs/readme.md", "/home", "/search?q=a", "a.b.c", "Hello... world", "1/2/3", "/api/v1/users/42", "see ./notes", "http://example.com/a/b", "/var/www/html/index.php", "Windows system32 error", "etc hosts", "see ./notes on the hosts", "100% ok"] {
            assert!(d(s.as_bytes()).is_none(), "{s}");
        }
    }
}
