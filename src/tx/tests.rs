//! Transaction behaviour on whole requests (native, no proxy).

use std::collections::HashMap;
use std::sync::Arc;

use super::*;

fn rules(text: &str) -> Arc<Ruleset> {
    Arc::new(Ruleset::compile("test", text).unwrap_or_else(|e| panic!("{e}")))
}

/// Runs a request through phases 1-2 and returns the interruption.
fn run(rs: &Arc<Ruleset>, method: &str, uri: &str, headers: &[(&str, &str)], body: &[u8]) -> (Option<Interruption>, Vec<String>) {
    let mut tx = Transaction::new(rs.clone(), "test-1".into());
    tx.process_connection("127.0.0.1", 40000, "127.0.0.1", 8080);
    tx.process_uri(uri, method, "HTTP/1.1");
    for (k, v) in headers {
        tx.add_request_header(k.as_bytes(), v.as_bytes());
    }
    if let Some(i) = tx.process_request_headers() {
        return (Some(i), tx.take_log_lines());
    }
    if tx.request_body_access() && !body.is_empty() {
        for chunk in body.chunks(1000) {
            match tx.append_request_body(chunk) {
                BodyAppend::Continue => {}
                BodyAppend::Full => break,
                BodyAppend::Interrupt(i) => return (Some(i), tx.take_log_lines()),
            }
        }
    }
    let i = tx.process_request_body();
    (i, tx.take_log_lines())
}

fn blocked_by(rs: &Arc<Ruleset>, method: &str, uri: &str, headers: &[(&str, &str)], body: &[u8]) -> Option<u64> {
    run(rs, method, uri, headers, body).0.map(|i| {
        assert_eq!(i.status, 403);
        i.rule_id.unwrap_or(0)
    })
}

const JSON: (&str, &str) = ("Content-Type", "application/json");
const FORM: (&str, &str) = ("Content-Type", "application/x-www-form-urlencoded");

#[test]
fn targeted_tier_blocks_the_benchmark_attacks() {
    let rs = rules("Include @targeted");
    assert_eq!(blocked_by(&rs, "GET", "/Admin/users", &[], b""), Some(101));
    assert_eq!(blocked_by(&rs, "GET", "/", &[("User-Agent", "sqlmap/1.7")], b""), Some(9131));
    assert_eq!(blocked_by(&rs, "GET", "/?id=1%27%20or%201=1--", &[], b""), Some(9421));
    assert_eq!(blocked_by(&rs, "POST", "/api", &[JSON], br#"{"user":{"id":"1' or 1=1--"}}"#), Some(9421));
    assert_eq!(blocked_by(&rs, "POST", "/form", &[FORM], b"q=%3Cscript%3Ealert(1)%3C%2Fscript%3E"), Some(9411));
    assert_eq!(blocked_by(&rs, "POST", "/form", &[FORM], b"payload=MaliciousPayload"), Some(102));
    assert_eq!(blocked_by(&rs, "GET", "/?payload=maliciouspayload", &[], b""), Some(102));
}

/// `MODSEC_BUILD` is what libmodsecurity 3.0.15 gives (checked with it: "030015100"), so a
/// rule set's version checks pass as under ModSecurity v3; it was an unknown variable (the
/// whole rule set failed to load).
#[test]
fn modsec_build_is_modsecurity_v3s() {
    let rs = rules(
        r#"SecRuleEngine On
SecRule MODSEC_BUILD "!@ge 020901100" "id:1,phase:1,deny,status:403"
SecRule MODSEC_BUILD "@streq 030015100" "id:2,phase:1,pass,nolog,setvar:tx.build=1"
SecRule &TX:build "@eq 0" "id:3,phase:1,deny,status:403"
"#,
    );
    assert_eq!(blocked_by(&rs, "GET", "/", &[], b""), None);
    let old = rules("SecRuleEngine On\nSecRule MODSEC_BUILD \"@lt 030100000\" \"id:4,phase:1,deny,status:403\"");
    assert_eq!(blocked_by(&old, "GET", "/", &[], b""), Some(4));
}

#[test]
fn targeted_tier_passes_benign_traffic() {
    let rs = rules("Include @targeted");
    assert_eq!(blocked_by(&rs, "GET", "/products?page=2&sort=price", &[("User-Agent", "Mozilla/5.0"), ("Cookie", "session=abc123")], b""), None);
    let body = br#"{"order":{"id":12345,"items":[{"sku":"A-1","qty":2,"note":"leave at the door"}],"total":19.99}}"#;
    assert_eq!(blocked_by(&rs, "POST", "/api/orders", &[JSON], body), None);
}

#[test]
fn headers_only_tier_ignores_bodies() {
    let rs = rules("Include @headers-only");
    assert_eq!(blocked_by(&rs, "GET", "/admin", &[], b""), Some(101));
    assert_eq!(blocked_by(&rs, "POST", "/form", &[FORM], b"payload=maliciouspayload"), None);
}

#[test]
fn log_lines_carry_modsecurity_fields() {
    let rs = rules("SecRuleEngine On\nSecRule ARGS \"@rx (?i)union\\s+select\" \"id:7,phase:2,deny,status:403,log,msg:'SQLi in %{MATCHED_VAR_NAME}',logdata:'Matched Data: %{MATCHED_VAR}',severity:CRITICAL,tag:'attack-sqli'\"");
    let (i, logs) = run(&rs, "GET", "/p?q=1%20UNION%20SELECT%20x", &[], b"");
    assert_eq!(i.map(|i| i.rule_id), Some(Some(7)));
    assert_eq!(logs.len(), 1);
    let l = &logs[0];
    assert!(l.starts_with("ModSecurity: Access denied with code 403 (phase 2)."), "{l}");
    for want in ["[id \"7\"]", "[msg \"SQLi in ARGS:q\"]", "[data \"Matched Data: 1 UNION SELECT x\"]", "[severity \"2\"]", "[tag \"attack-sqli\"]", "[uri \"/p?q=1%20UNION%20SELECT%20x\"]", "[unique_id \"test-1\"]"] {
        assert!(l.contains(want), "missing {want} in {l}");
    }
}

#[test]
fn each_transaction_logs_its_own_unique_id_when_ids_are_recycled() {
    // `with_id` copies the id into an ended transaction's buffer: a longer id before a
    // shorter one must not leave its tail, nor the earlier id stay.
    let rs = rules("SecRuleEngine On\nSecRule REQUEST_URI \"@contains /admin\" \"id:1,phase:1,deny,log,msg:'id %{UNIQUE_ID}'\"");
    for id in ["a-very-long-request-id-0123456789abcdef", "short", "", "short-2"] {
        let mut tx = Transaction::with_id(rs.clone(), id);
        assert_eq!(tx.unique_id(), id);
        tx.process_uri("/admin", "GET", "HTTP/1.1");
        assert!(tx.process_request_headers().is_some());
        let logs = tx.take_log_lines();
        assert_eq!(logs.len(), 1);
        assert!(logs[0].contains(&format!("[msg \"id {id}\"]")) && logs[0].contains(&format!("[unique_id \"{id}\"]")), "{id}: {}", logs[0]);
    }
}

#[test]
fn detection_only_logs_but_does_not_interrupt() {
    let rs = rules("SecRuleEngine DetectionOnly\nSecRule REQUEST_URI \"@contains /admin\" \"id:1,phase:1,deny,log\"");
    let (i, logs) = run(&rs, "GET", "/admin", &[], b"");
    assert!(i.is_none());
    assert_eq!(logs.len(), 1);
    assert!(logs[0].starts_with("ModSecurity: Warning."));
}

#[test]
fn anomaly_scoring_with_setvar_chain_and_macros() {
    let rs = rules(concat!(
        "SecRuleEngine On\n",
        "SecDefaultAction \"phase:2,log,auditlog,pass\"\n",
        "SecAction \"id:1,phase:1,nolog,pass,setvar:tx.threshold=5,setvar:tx.score=0\"\n",
        "SecRule ARGS \"@contains evil\" \"id:2,phase:2,block,t:lowercase,setvar:'tx.score=+3'\"\n",
        "SecRule REQUEST_METHOD \"@streq POST\" \"id:3,phase:2,block,chain\"\n",
        "  SecRule ARGS:x \"@streq 1\" \"setvar:tx.score=+3\"\n",
        "SecRule TX:score \"@ge %{tx.threshold}\" \"id:4,phase:2,deny,status:406,msg:'score %{tx.score}'\"\n",
    ));
    assert_eq!(run(&rs, "GET", "/?a=EVIL", &[], b"").0, None);
    let (i, logs) = run(&rs, "POST", "/?a=EVIL&x=1", &[], b"");
    assert_eq!(i.map(|i| (i.status, i.rule_id)), Some((406, Some(4))));
    assert!(logs.iter().any(|l| l.contains("[msg \"score 6\"]")), "{logs:?}");
    assert_eq!(run(&rs, "GET", "/?a=EVIL&x=1", &[], b"").0, None);
}

#[test]
fn skip_after_markers_and_ctl() {
    let rs = rules(concat!(
        "SecRuleEngine On\n",
        "SecRule REQUEST_URI \"@beginsWith /public\" \"id:1,phase:1,pass,nolog,skipAfter:END\"\n",
        "SecRule REQUEST_URI \"@contains x\" \"id:2,phase:1,deny\"\n",
        "SecMarker END\n",
        "SecRule REQUEST_URI \"@beginsWith /health\" \"id:3,phase:1,pass,nolog,ctl:ruleRemoveById=4\"\n",
        "SecRule REQUEST_URI \"@contains y\" \"id:4,phase:1,deny\"\n",
    ));
    assert_eq!(blocked_by(&rs, "GET", "/a/x", &[], b""), Some(2));
    assert_eq!(blocked_by(&rs, "GET", "/public/x", &[], b""), None);
    assert_eq!(blocked_by(&rs, "GET", "/a/y", &[], b""), Some(4));
    assert_eq!(blocked_by(&rs, "GET", "/health/y", &[], b""), None);
}

#[test]
fn body_limit_reject_answers_413() {
    let rs = rules("SecRuleEngine On\nSecRequestBodyAccess On\nSecRequestBodyLimit 100\nSecRequestBodyLimitAction Reject");
    let (i, logs) = run(&rs, "POST", "/", &[FORM], &[b'a'; 150]);
    assert_eq!(i.map(|i| (i.status, i.rule_id)), Some((413, None)));
    assert_eq!(logs.len(), 1);
}

#[test]
fn body_limit_process_partial_inspects_the_prefix() {
    let rs = rules("SecRuleEngine On\nSecRequestBodyAccess On\nSecRequestBodyLimit 100\nSecRequestBodyLimitAction ProcessPartial\nSecRule ARGS:a \"@contains evil\" \"id:1,phase:2,deny\"");
    let mut early = b"a=evil&b=".to_vec();
    early.extend_from_slice(&[b'x'; 200]);
    assert_eq!(blocked_by(&rs, "POST", "/", &[FORM], &early), Some(1));
    let mut late = vec![b'x'; 120];
    late.extend_from_slice(b"&a=evil");
    assert_eq!(blocked_by(&rs, "POST", "/", &[FORM], &late), None);
}

#[test]
fn malformed_json_sets_reqbody_error() {
    let rs = rules("Include @recommended-conf\nSecRuleEngine On");
    let (i, logs) = run(&rs, "POST", "/", &[JSON], b"{\"a\": [1, 2");
    assert_eq!(i.map(|i| (i.status, i.rule_id)), Some((400, Some(200002))));
    assert!(logs.iter().any(|l| l.contains("JSON parsing error")), "{logs:?}");
    assert_eq!(run(&rs, "POST", "/", &[JSON], b"{\"a\": [1, 2]}").0, None);
}

/// `SecRequestBodyNoFilesLimit 131072` (@recommended-conf), as libmodsecurity 3.0.15 answers:
/// over it a form, JSON or XML body sets REQBODY_ERROR (rule 200002: 400), at it passes; a
/// multipart body counts without its file parts; a body without a processor is not measured.
#[test]
fn body_over_no_files_limit_is_a_body_error() {
    let rs = rules("Include @recommended-conf\nSecRuleEngine On");
    let form = |n: usize| format!("a={}", "b".repeat(n - 2)).into_bytes();
    let (i, logs) = run(&rs, "POST", "/", &[FORM], &form(131_073));
    assert_eq!(i.map(|i| (i.status, i.rule_id)), Some((400, Some(200002))));
    assert!(logs.iter().any(|l| l.contains("Request body excluding files is bigger than the maximum expected.")), "{logs:?}");
    assert_eq!(run(&rs, "POST", "/", &[FORM], &form(131_072)).0, None);
    let json = format!("{{\"a\":\"{}\"}}", "b".repeat(200_000));
    assert_eq!(run(&rs, "POST", "/", &[JSON], json.as_bytes()).0.map(|i| i.status), Some(400));
    let xml = format!("<r>{}</r>", "b".repeat(200_000));
    assert_eq!(run(&rs, "POST", "/", &[("Content-Type", "text/xml")], xml.as_bytes()).0.map(|i| i.status), Some(400));
    assert_eq!(run(&rs, "POST", "/", &[("Content-Type", "text/plain")], &[b'b'; 200_000]).0, None);
    let mp = ("Content-Type", "multipart/form-data; boundary=b");
    let part = |file: &str, n: usize| {
        let mut b = format!("--b\r\nContent-Disposition: form-data; name=\"a\"{file}\r\n\r\n").into_bytes();
        b.extend(std::iter::repeat_n(b'z', n));
        b.extend_from_slice(b"\r\n--b--\r\n");
        b
    };
    assert_eq!(run(&rs, "POST", "/", &[mp], &part("; filename=\"x.txt\"", 200_000)).0, None);
    assert_eq!(run(&rs, "POST", "/", &[mp], &part("", 131_000)).0, None);
    assert_eq!(run(&rs, "POST", "/", &[mp], &part("", 131_100)).0.map(|i| (i.status, i.rule_id)), Some((400, Some(200002))));
    // A raised limit lets the form through.
    let raised = rules("Include @recommended-conf\nSecRequestBodyNoFilesLimit 1048576\nSecRuleEngine On");
    assert_eq!(run(&raised, "POST", "/", &[FORM], &form(200_000)).0, None);
}

/// `SecUnicodeMapFile unicode.mapping 20127`: `t:urlDecodeUni` decodes `%u2018` (a smart
/// quote) to `'` and `%u00ab` to `<` as libmodsecurity 3.0.15 with the map (without: 0x18, 0xab),
/// in every rule of the set, whether the directive comes before or after the rule.
#[test]
fn unicode_map_file_changes_url_decode_uni() {
    let rule = "SecRuleEngine On\nSecRule ARGS:q \"@rx ^'<i$\" \"id:1,phase:1,deny,t:none,t:urlDecodeUni\"";
    let uri = "/?q=%25u2018%25u00ab%25u0131";
    assert_eq!(blocked_by(&rules(rule), "GET", uri, &[], b""), None);
    for text in [format!("SecUnicodeMapFile unicode.mapping 20127\n{rule}"), format!("{rule}\nSecUnicodeMapFile /etc/modsecurity/unicode.mapping 20127")] {
        let rs = rules(&text);
        assert!(rs.warnings.iter().all(|w| !w.contains("SecUnicodeMapFile")), "{:?}", rs.warnings);
        assert_eq!(blocked_by(&rs, "GET", uri, &[], b""), Some(1), "{text}");
        // Other transformations do not use the map.
        let js = format!("{text}\nSecRule ARGS:j \"@rx '\" \"id:2,phase:1,deny,t:none,t:jsDecode,t:utf8toUnicode\"");
        assert_eq!(blocked_by(&rules(&js), "GET", "/?j=%5Cu2018", &[], b""), None);
    }
    for bad in ["SecUnicodeMapFile unicode.mapping 1252", "SecUnicodeMapFile unicode.mapping", "SecUnicodeMapFile unicode.mapping x"] {
        let e = Ruleset::compile("test", bad).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("SecUnicodeMapFile"), "{bad}: {e}");
    }
}

/// Rules 200003 (MULTIPART_STRICT_ERROR) and 200004 of @recommended-conf, as
/// modsecurity.conf-recommended: a bare-LF multipart body gets 400 as in libmodsecurity 3.0.15.
#[test]
fn multipart_strict_errors_are_refused_by_recommended_conf() {
    let rs = rules("Include @recommended-conf\nSecRuleEngine On");
    let mp = ("Content-Type", "multipart/form-data; boundary=b");
    let (i, logs) = run(&rs, "POST", "/", &[mp], b"--b\nContent-Disposition: form-data; name=\"a\"\n\n1\n--b--\n");
    assert_eq!(i.map(|i| (i.status, i.rule_id)), Some((400, Some(200003))));
    assert!(logs.iter().any(|l| l.contains("LF 1")), "{logs:?}");
    let junk_after = b"--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n--b--\r\njunk";
    assert_eq!(run(&rs, "POST", "/", &[mp], junk_after).0.map(|i| (i.status, i.rule_id)), Some((400, Some(200003))));
    let ok = b"--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n--b--\r\n";
    assert_eq!(run(&rs, "POST", "/", &[mp], ok).0, None);
}

#[test]
fn engine_off_does_nothing() {
    let rs = rules("SecRuleEngine Off\nSecRule REQUEST_URI \"@contains /admin\" \"id:1,phase:1,deny\"");
    assert_eq!(run(&rs, "GET", "/admin", &[], b""), (None, vec![]));
}

#[test]
fn exclusions_and_counts() {
    let rs = rules(concat!(
        "SecRuleEngine On\n",
        "SecRule ARGS|!ARGS:safe \"@contains bad\" \"id:1,phase:2,deny\"\n",
        "SecRule &ARGS \"@gt 3\" \"id:2,phase:2,deny\"\n",
        "SecRule REQUEST_COOKIES:/^sess/ \"@rx ^x\" \"id:3,phase:1,deny\"\n",
    ));
    assert_eq!(blocked_by(&rs, "GET", "/?safe=bad", &[], b""), None);
    assert_eq!(blocked_by(&rs, "GET", "/?other=bad", &[], b""), Some(1));
    assert_eq!(blocked_by(&rs, "GET", "/?a&b&c&d", &[], b""), Some(2));
    assert_eq!(blocked_by(&rs, "GET", "/", &[("Cookie", "SESSID=xyz")], b""), Some(3));
}

/// The profile counts what the prefilter skipped, what ran, what matched, and the memo tables.
#[test]
fn profile_counts_prefilter_skips_runs_and_matches() {
    let rs = rules(
        r#"SecRuleEngine DetectionOnly
SecRule ARGS "@rx (?i)union\s+select" "id:10,phase:1,pass,t:none,t:lowercase"
SecRule ARGS "@rx sel" "id:11,phase:1,pass,t:none,t:lowercase"
SecRule ARGS "@pm nikto sqlmap" "id:12,phase:1,pass,t:none"
"#,
    );
    let mut tx = Transaction::new(rs.clone(), "p".into());
    tx.enable_profile();
    tx.process_uri("/?a=hello&b=UNION%20SELECT%201&c=x", "GET", "HTTP/1.1");
    let _ = tx.process_request_headers();
    let p = tx.take_profile().unwrap();
    let r10 = &p.rules[&10];
    assert_eq!((r10.evals, r10.values, r10.matched), (1, 3, 1));
    // Only the value with "select" in it reaches the regex.
    assert_eq!((r10.skipped, r10.ran), (2, 1));
    // Same targets and chain: rule 11 reuses rule 10's prepared list and scans.
    assert_eq!(p.rules[&11].ran, 1);
    assert_eq!(p.cache.groups_reused, 1);
    // One scan per distinct value: "hello", "x" and "1' union..." lowercased, plus the raw
    // "UNION SELECT 1" for the @pm (t:none). "hello" and "x" pass both chains unchanged: their
    // scans live with the list's items, shared by both groups without a table lookup.
    assert_eq!((p.cache.scans_computed, p.cache.scans_reused), (4, 0), "{:?}", p.cache);
    // No scanner name anywhere: the @pm never runs.
    assert_eq!((p.rules[&12].skipped, p.rules[&12].ran), (3, 0));
    let report = p.report(&rs, 10);
    assert!(report.contains("| 10 | 1 | @rx |"), "{report}");
    assert!(report.contains("rule 10: `t:lowercase` before `@rx`"), "{report}");
}

/// A collection store in memory, as the host's shared data would be.
#[derive(Default)]
struct MemStore(std::sync::Mutex<HashMap<String, Vec<u8>>>);

impl persist::CollectionStore for MemStore {
    fn load(&self, collection: &str, key: &str) -> Option<Vec<u8>> {
        self.0.lock().unwrap().get(&format!("{collection}/{key}")).cloned()
    }
    fn update(&self, collection: &str, key: &str, f: &mut dyn FnMut(Option<&[u8]>) -> Vec<u8>) -> bool {
        let mut m = self.0.lock().unwrap();
        let k = format!("{collection}/{key}");
        let new = f(m.get(&k).map(Vec::as_slice));
        m.insert(k, new);
        true
    }
}

const BRUTE_FORCE: &str = concat!(
    "SecRuleEngine On\n",
    "SecAction \"id:1,phase:1,nolog,pass,initcol:ip=%{remote_addr},initcol:global=global\"\n",
    "SecRule IP:hits \"@gt 2\" \"id:2,phase:1,deny,status:429,log,msg:'too many: %{ip.hits}'\"\n",
    "SecAction \"id:3,phase:1,nolog,pass,setvar:ip.hits=+1,expirevar:ip.hits=60,setvar:global.total=+1\"\n",
    "SecRule &GLOBAL:total \"@eq 0\" \"id:4,phase:1,deny,status:500\"\n",
);

/// The clock the persistence tests give their transactions (2026-12-07, in ms).
const CLOCK_MS: u64 = 1_796_601_600_000;

/// TIME* variables show the time the caller gave the transaction.
#[test]
fn time_variables_come_from_the_caller() {
    let rs = rules(r#"SecRuleEngine On
SecRule TIME_HOUR "@streq 09" "id:1,phase:1,deny,status:403"
SecRule TIME_EPOCH "@streq 1796639400" "id:2,phase:1,deny,status:402"
SecRule TIME_WDAY "@streq 1" "id:3,phase:1,pass,setvar:tx.monday=1"
SecRule TX:monday "@eq 1" "id:4,phase:1,deny,status:401""#);
    let run = |ms: u64| {
        let mut tx = Transaction::new(rs.clone(), "t".into());
        tx.set_time_ms(ms);
        tx.process_uri("/", "GET", "HTTP/1.1");
        tx.process_request_headers().map(|i| i.status)
    };
    assert_eq!(run(1_796_639_400_000), Some(402));
    assert_eq!(run(1_796_639_400_000 - 3_600_000), Some(403), "an hour earlier: 09:30");
    assert_eq!(run(1_796_639_401_000), Some(401), "a second later: only the weekday rule (a Monday)");
    assert_eq!(run(1_796_601_600_000 - 86_400_000), None, "a Sunday");
}

fn from_ip(rs: &Arc<Ruleset>, store: &Arc<MemStore>, ip: &str) -> (Option<u16>, Vec<String>) {
    let mut tx = Transaction::new(rs.clone(), "t".into());
    tx.set_time_ms(CLOCK_MS);
    tx.set_collection_store(store.clone());
    tx.process_connection(ip, 1, "127.0.0.1", 80);
    tx.process_uri("/login", "POST", "HTTP/1.1");
    let i = tx.process_request_headers();
    tx.process_logging();
    (i.map(|i| i.status), tx.take_log_lines())
}

#[test]
fn persistent_ip_collection_counts_across_transactions() {
    use persist::CollectionStore as _;
    let rs = rules(BRUTE_FORCE);
    assert!(rs.uses_persistent_collections());
    let store = Arc::new(MemStore::default());
    assert_eq!(from_ip(&rs, &store, "10.0.0.1").0, None);
    assert_eq!(from_ip(&rs, &store, "10.0.0.1").0, None);
    assert_eq!(from_ip(&rs, &store, "10.0.0.1").0, None);
    let (status, logs) = from_ip(&rs, &store, "10.0.0.1");
    assert_eq!(status, Some(429));
    assert!(logs[0].contains("too many: 3"), "{}", logs[0]);
    // Another address has its own collection; GLOBAL counts everyone.
    assert_eq!(from_ip(&rs, &store, "10.0.0.2").0, None);
    let global = store.load("global", "global").unwrap();
    assert_eq!(persist::decode(&global, "global", 0).unwrap()["total"].value, b"4");
    // The counter expires 60 s after its last write.
    let ip = persist::decode(&store.load("ip", "10.0.0.1").unwrap(), "10.0.0.1", 0).unwrap();
    let expires = ip["hits"].expires.unwrap();
    assert_eq!(expires, CLOCK_MS + 60_000, "the caller's clock, not the host's");
    assert!(persist::decode(&store.load("ip", "10.0.0.1").unwrap(), "10.0.0.1", expires).unwrap().is_empty());
}

#[test]
fn collections_without_a_store_last_one_transaction() {
    let rs = rules(BRUTE_FORCE);
    for _ in 0..5 {
        let mut tx = Transaction::new(rs.clone(), "t".into());
        tx.process_connection("10.0.0.1", 1, "127.0.0.1", 80);
        tx.process_uri("/", "GET", "HTTP/1.1");
        assert_eq!(tx.process_request_headers(), None);
    }
    assert!(!rules("SecAction \"id:1,phase:1,pass,setvar:tx.a=1\"").uses_persistent_collections());
    let bad = Ruleset::compile("t", "SecAction \"id:1,phase:1,pass,initcol:foo=bar\"").err().unwrap();
    assert!(bad.to_string().contains("unknown collection"), "{bad}");
    let bad = Ruleset::compile("t", "SecAction \"id:1,phase:1,pass,expirevar:ip.x\"").err().unwrap();
    assert!(bad.to_string().contains("expirevar"), "{bad}");
}

#[test]
fn persistent_collection_in_a_chain() {
    let rs = rules(concat!(
        "SecRuleEngine On\n",
        "SecAction \"id:1,phase:1,nolog,pass,initcol:ip=%{remote_addr},initcol:global=global\"\n",
        "SecRule REQUEST_FILENAME \"@streq /login\" \"id:2,phase:1,deny,status:429,log,msg:'brute force: %{ip.login_attempts} attempts',chain\"\n",
        "  SecRule IP:login_attempts \"@ge 3\" \"t:none\"\n",
        "SecRule REQUEST_FILENAME \"@streq /login\" \"id:3,phase:1,nolog,pass,setvar:ip.login_attempts=+1,expirevar:ip.login_attempts=600\"\n",
    ));
    let store = Arc::new(MemStore::default());
    let statuses: Vec<Option<u16>> = (0..5).map(|_| from_ip(&rs, &store, "10.0.0.1").0).collect();
    assert_eq!(statuses, [None, None, None, Some(429), Some(429)]);
}


/// Query arguments and cookies are parsed only for rule sets that can read them; what the
/// rules see is the same.
#[test]
fn args_and_cookies_parsed_only_when_mentioned() {
    let plain = rules("SecRuleEngine On\nSecRule QUERY_STRING \"@contains x=1\" \"id:1,phase:1,deny\"\nSecRule REQUEST_HEADERS \"@contains evil\" \"id:2,phase:1,deny\"");
    assert_eq!(plain.mentions, crate::compile::Mentions { args: false, cookies: false, connection: false, server: false, protocol: false });
    let mut tx = Transaction::new(plain.clone(), "m".into());
    tx.process_uri("/?x=1&y=2", "GET", "HTTP/1.1");
    tx.add_request_header(b"Cookie", b"a=evil");
    assert!(tx.req.args_get.is_empty() && tx.req.cookies.is_empty());
    assert_eq!(tx.process_request_headers().map(|i| i.rule_id), Some(Some(1)));
    assert_eq!(blocked_by(&plain, "GET", "/?y=2", &[("Cookie", "a=evil")], b""), Some(2));

    let args = rules("SecRuleEngine On\nSecRule ARGS:x \"@streq 1\" \"id:3,phase:1,deny\"\nSecRule REQUEST_COOKIES:a \"@streq evil\" \"id:4,phase:1,deny\"");
    assert_eq!(args.mentions, crate::compile::Mentions { args: true, cookies: true, connection: false, server: false, protocol: false });
    assert_eq!(blocked_by(&args, "GET", "/?x=1", &[], b""), Some(3));
    assert_eq!(blocked_by(&args, "GET", "/", &[("Cookie", "a=evil")], b""), Some(4));

    let rs = rules("SecRule REMOTE_ADDR \"@ipMatch 10.0.0.1\" \"id:6,phase:1,deny\"");
    assert!(rs.mentions.connection && !rs.mentions.server);
    let rs = rules("SecRule SERVER_PORT \"@eq 1\" \"id:6,phase:1,deny\"");
    assert!(rs.mentions.connection && rs.mentions.server);

    // The protocol is looked up by the host only for rule sets that can read it.
    for (var, wants) in [("REQUEST_PROTOCOL", true), ("REQUEST_LINE", true), ("RESPONSE_PROTOCOL", true), ("STATUS_LINE", true), ("FULL_REQUEST", true), ("REQUEST_URI", false)] {
        let rs = rules(&format!("SecRule {var} \"@contains x\" \"id:5,phase:1,deny\""));
        assert_eq!(rs.mentions.protocol, wants, "{var}");
    }
}

/// `multiMatch`: the operator sees the raw value and each step's result that differs from
/// the step before (not the unchanged ones); each sighting is a match of its own. Two rules
/// with the same targets and chain share one prepared list of those values.
#[test]
fn multi_match_sees_each_changed_step() {
    let rs = rules(
        "SecRuleEngine On\n\
         SecRule ARGS \"@rx (?i)a\" \"id:20,phase:1,pass,t:none,t:urlDecode,t:lowercase,t:removeNulls,multiMatch,setvar:tx.n20=+1\"\n\
         SecRule ARGS \"@rx a\" \"id:21,phase:1,pass,t:none,t:urlDecode,t:lowercase,t:removeNulls,multiMatch,setvar:tx.n21=+1\"\n\
         SecRule ARGS \"@rx A\" \"id:22,phase:1,pass,t:none,t:urlDecode,t:lowercase,t:removeNulls,multiMatch,setvar:tx.n22=+1\"\n\
         SecRule ARGS \"@rx a\" \"id:23,phase:1,pass,t:none,t:urlDecode,t:lowercase,t:removeNulls,setvar:tx.n23=+1\"",
    );
    let mut tx = Transaction::new(rs.clone(), "m".into());
    tx.enable_profile();
    // x: "%41" -> "A" -> "a" (3 distinct values); y: "A" -> (urlDecode: same) -> "a";
    // z: "b" never changes; w: "a" never changes.
    tx.process_uri("/?x=%2541&y=A&z=b&w=a", "GET", "HTTP/1.1");
    let _ = tx.process_request_headers();
    let n = |k: &str| tx.tx.get(k).map(|v| String::from_utf8_lossy(v).into_owned());
    // (?i)a: x as "%41"? no; "A" yes, "a" yes; y: "A", "a"; w: "a".
    assert_eq!(n("n20").as_deref(), Some("5"));
    // a: x "a"; y "a"; w "a".
    assert_eq!(n("n21").as_deref(), Some("3"));
    // A: x "A" (after urlDecode); y "A" (raw).
    assert_eq!(n("n22").as_deref(), Some("2"));
    // Without multiMatch only the final values: x "a", y "a", w "a".
    assert_eq!(n("n23").as_deref(), Some("3"));
    let p = tx.take_profile().unwrap();
    // Rules 21 and 22 reuse rule 20's multiMatch list (rule 23's list is a different one).
    assert_eq!(p.cache.groups_reused, 2, "{:?}", p.cache);
    // Values seen by 20: x three times, y twice, z and w once.
    assert_eq!(p.rules[&20].values, 7);
}

/// `ctl:ruleRemoveTargetByTag` and `ctl:ruleRemoveByTag` act on the rules with that tag
/// only (tags compared by id), from the next rule on; a tag no rule has removes nothing.
/// The rules before and after the ctl share one prepared ARGS list where no removal applies.
#[test]
fn removals_by_tag() {
    let rs = rules(
        r#"SecRuleEngine On
SecRule ARGS "@streq never" "id:1,phase:1,pass,nolog,tag:'t1'"
SecRule ARGS:a "@streq x" "id:2,phase:1,pass,nolog,ctl:ruleRemoveTargetByTag=t1;ARGS:b"
SecRule ARGS:a "@streq z" "id:3,phase:1,pass,nolog,ctl:ruleRemoveByTag=t2"
SecRule ARGS:a "@streq n" "id:4,phase:1,pass,nolog,ctl:ruleRemoveByTag=nosuch,ctl:ruleRemoveTargetByTag=nosuch;ARGS:b"
SecRule ARGS "@streq evil" "id:10,phase:1,deny,status:403,tag:'t1'"
SecRule ARGS:b "@streq bad" "id:11,phase:1,deny,status:403,tag:'t2'"
SecRule ARGS "@streq worse" "id:12,phase:1,deny,status:403,tag:'t3'"
"#,
    );
    // ARGS:b removed from the t1 rule only.
    assert_eq!(blocked_by(&rs, "GET", "/?a=x&b=evil", &[], b""), None);
    assert_eq!(blocked_by(&rs, "GET", "/?a=y&b=evil", &[], b""), Some(10));
    assert_eq!(blocked_by(&rs, "GET", "/?a=x&b=worse", &[], b""), Some(12));
    // The t2 rule removed.
    assert_eq!(blocked_by(&rs, "GET", "/?a=z&b=bad", &[], b""), None);
    assert_eq!(blocked_by(&rs, "GET", "/?a=y&b=bad", &[], b""), Some(11));
    // Unknown tags: nothing removed.
    assert_eq!(blocked_by(&rs, "GET", "/?a=n&b=evil", &[], b""), Some(10));
    assert_eq!(blocked_by(&rs, "GET", "/?a=n&b=bad", &[], b""), Some(11));
}

/// Rules passed from their quick records (see `compile::quick`) give the verdicts of a full
/// evaluation: TX number checks and rules whose prepared group cannot satisfy their prefilter.
#[test]
fn quick_records_pass_only_rules_that_cannot_match() {
    use crate::compile::quick::Quick;
    let rs = rules(
        r#"SecRuleEngine On
SecRule REQUEST_METHOD "@streq PUT" "id:9,phase:1,pass,nolog,setvar:tx.put=1"
SecAction "id:1,phase:1,pass,nolog,setvar:tx.level=2"
SecRule TX:level "@lt 2" "id:2,phase:1,deny,status:403"
SecRule TX:absent "@lt 1" "id:3,phase:1,deny,status:403"
SecRule TX:level "@ge 2" "id:4,phase:1,pass,nolog,setvar:tx.seen=1"
SecRule TX:seen "@eq 1" "id:5,phase:1,pass,nolog,ctl:ruleRemoveTargetById=21;ARGS:x"
SecRule ARGS "@rx needle[0-9]" "id:20,phase:1,pass,nolog"
SecRule ARGS "@rx other[0-9]" "id:21,phase:1,deny,status:403"
SecRule ARGS "@rx third[0-9]" "id:22,phase:1,deny,status:403"
"#,
    );
    let kinds: Vec<&str> = rs.quick.phases[0]
        .iter()
        .map(|q| match q {
            Quick::Eval => "eval",
            Quick::Pre => "pre",
            Quick::TxNum { .. } => "tx",
            Quick::TxSkip { .. } => "tx-skip",
            Quick::Group { req: Some(_), .. } => "group",
            Quick::Group { req: None, .. } => "group-no-req",
        })
        .collect();
    // (Rule 9 reads the request and writes TX: no request-independent prefix here.)
    assert_eq!(kinds, ["group-no-req", "eval", "tx", "tx", "tx", "tx", "group", "group", "group"]);
    let nine = "a=1&b=2&c=3&d=4&e=5&f=6&g=7&h=8";
    // Rule 4 matched (TX:level is 2): TX:seen set, so rule 5 removed ARGS:x from rule 21.
    assert_eq!(blocked_by(&rs, "GET", &format!("/?{nine}&i=other7"), &[], b""), Some(21));
    assert_eq!(blocked_by(&rs, "GET", &format!("/?{nine}&x=other7"), &[], b""), None);
    assert_eq!(blocked_by(&rs, "GET", &format!("/?{nine}&x=third7"), &[], b""), Some(22));
    assert_eq!(blocked_by(&rs, "GET", &format!("/?{nine}&i=needle7"), &[], b""), None);
}

/// A rule whose values cannot satisfy its prefilter is passed before its group is built
/// (`link::slot_cannot_match`): the verdicts stay those of a full evaluation, with the forms
/// its chain makes (decoded, lowercased: a capital lowered to a one-byte requirement), with
/// runtime target removals, and a benign request builds no group of theirs.
#[test]
fn rules_are_passed_from_their_values_without_building_groups() {
    let text = r#"SecRuleEngine On
SecRule REQUEST_HEADERS:x-remove "@streq 1" "id:1,phase:1,pass,nolog,ctl:ruleRemoveTargetById=13;ARGS:r"
SecRule ARGS "@rx needle7" "id:10,phase:1,t:none,t:urlDecodeUni,deny,status:403"
SecRule ARGS "@rx ^q$" "id:11,phase:1,t:none,t:lowercase,deny,status:403"
SecRule ARGS|REQUEST_HEADERS:x-h "@rx other[0-9]" "id:12,phase:1,t:none,t:lowercase,t:urlDecodeUni,deny,status:403"
SecRule ARGS "@rx third[0-9]" "id:13,phase:1,t:none,t:lowercase,deny,status:403"
SecRule ARGS "@rx fourth[0-9]" "id:14,phase:1,multiMatch,t:none,t:urlDecodeUni,t:lowercase,deny,status:403"
"#;
    let rs = rules(text);
    let cases: &[(&str, &[(&str, &str)], Option<u64>)] = &[
        ("/?a=benign&b=quiet", &[], None),
        ("/?a=NEEDLE7", &[], None),
        ("/?a=need%6ce7", &[], Some(10)),
        ("/?a=Q", &[], Some(11)),
        ("/?a=%2551", &[], None),
        ("/?a=OTHER%35", &[], Some(12)),
        ("/?a=x", &[("x-h", "Other%39")], Some(12)),
        ("/?r=THIRD1", &[], Some(13)),
        ("/?r=THIRD1", &[("x-remove", "1")], None),
        ("/?s=THIRD1", &[("x-remove", "1")], Some(13)),
        ("/?a=FOURTH%35", &[], Some(14)),
    ];
    for &(uri, headers, want) in cases {
        assert_eq!(blocked_by(&rs, "GET", uri, headers, b""), want, "{uri} {headers:?}");
    }
    // A new rule set: no trace of an earlier request for the replay to follow (while it
    // follows one, groups are built as before).
    let mut tx = Transaction::new(rules(text), "test-1".into());
    tx.process_uri("/?a=benign&b=Quiet%20Value", "GET", "HTTP/1.1");
    tx.add_request_header(b"x-h", b"Nothing%20Here");
    assert!(tx.process_request_headers().is_none());
    // Only rule 1's (`@streq` has no prefilter requirement); 5 when rules 10-14 build theirs.
    assert_eq!(tx.cache.get_mut().stats.groups_built, 1);
}

#[test]
fn request_memo_tables_are_handed_on_after_phase_2() {
    // Phase 2 memoizes the ARGS' transformations and scans; the response phases read the
    // same request values (recomputed after the hand-over) and must still decide on them.
    let rs = rules(
        r#"SecRuleEngine On
SecRequestBodyAccess On
SecRule ARGS "@rx benign[0-9]" "id:1,phase:2,t:lowercase,t:urlDecodeUni,pass,nolog"
SecRule ARGS "@detectSQLi" "id:2,phase:2,t:urlDecodeUni,pass,nolog"
SecRule ARGS "@rx attack[0-9]" "id:3,phase:3,t:lowercase,t:urlDecodeUni,deny,status:403"
"#,
    );
    let mut held = Vec::new();
    for value in ["ATTACK7", "quiet"] {
        let body = (0..200).map(|i| format!("f{i}=v{i}+{value}")).collect::<Vec<_>>().join("&");
        let mut tx = Transaction::new(rs.clone(), "test-1".into());
        tx.process_uri("/form", "POST", "HTTP/1.1");
        tx.add_request_header(b"Content-Type", b"application/x-www-form-urlencoded");
        assert!(tx.process_request_headers().is_none());
        assert!(matches!(tx.append_request_body(body.as_bytes()), BodyAppend::Continue));
        assert!(tx.process_request_body().is_none());
        // Waiting for the upstream, the transaction holds no request-phase memo entries.
        assert_eq!(tx.cache.get_mut().memo_entries(), 0, "{value}");
        held.push(tx);
    }
    let verdicts: Vec<Option<u16>> = held.iter_mut().map(|tx| tx.process_response_headers(200, "HTTP/1.1").map(|i| i.status)).collect();
    assert_eq!(verdicts, [Some(403), None]);
}

/// Transactions waiting between phases (for the upstream, with a proxy's concurrent
/// requests) hold no memo tables and no value lists or hits: those are lent to each phase,
/// so a thread keeps one set of them, not one per transaction in flight; the response phases
/// still decide on request values, their hits and the MATCHED_VAR of phase 2.
#[test]
fn transactions_in_flight_hold_no_phase_scratch() {
    let rs = rules(
        r#"SecRuleEngine On
SecRequestBodyAccess On
SecResponseBodyAccess On
SecResponseBodyMimeType text/html
SecRule ARGS "@rx needle[0-9]" "id:1,phase:2,t:lowercase,pass,nolog"
SecRule ARGS "@rx attack[0-9]" "id:2,phase:3,t:lowercase,deny,status:403"
SecRule MATCHED_VAR "@rx needle7" "id:3,phase:3,deny,status:401"
SecRule RESPONSE_BODY "@contains leaked" "id:4,phase:4,deny,status:502"
"#,
    );
    let n = 64;
    let mut in_flight = Vec::new();
    for i in 0..n {
        let mut tx = Transaction::new(rs.clone(), format!("t-{i}"));
        let q = match i % 4 {
            0 => "/?a=ATTACK1&b=quiet",
            1 => "/?a=NEEDLE7",
            _ => "/?a=quiet&b=fine",
        };
        tx.process_uri(q, "GET", "HTTP/1.1");
        assert!(tx.process_request_headers().is_none());
        assert!(tx.process_request_body().is_none());
        assert_eq!(tx.cache_side, IDLE_SIDE, "request {i}");
        assert_eq!(tx.cache.get_mut().memo_entries(), 0, "request {i}");
        assert_eq!(tx.values_scratch.get_mut().capacity(), 0, "request {i}");
        assert!(tx.hit_pool.hits.is_empty(), "request {i}");
        in_flight.push(tx);
    }
    let mut verdicts = Vec::new();
    for (i, tx) in in_flight.iter_mut().enumerate() {
        tx.add_response_header(b"content-type", b"text/html");
        let v = tx.process_response_headers(200, "HTTP/1.1").map(|i| i.status);
        let v = v.or_else(|| {
            let body: &[u8] = if i % 4 == 2 { b"<p>leaked</p>" } else { b"<p>fine</p>" };
            let _ = tx.append_response_body(body);
            tx.process_response_body().map(|i| i.status)
        });
        assert_eq!(tx.cache_side, IDLE_SIDE, "response {i}");
        tx.process_logging();
        verdicts.push(v);
    }
    let want: Vec<Option<u16>> = (0..n).map(|i| [Some(403), Some(401), Some(502), None][i % 4]).collect();
    assert_eq!(verdicts, want);
    drop(in_flight);
    // One set of scratch and one of response tables served all 64 (not 64 of each).
    assert_eq!(SCRATCH.with(|p| p.borrow().len()), 1);
    assert_eq!(SPARE_CACHES.with(|p| p.borrow()[RESPONSE_SIDE].len()), 1);
    assert_eq!(SPARE_CACHES.with(|p| p.borrow()[REQUEST_SIDE].len()), 1);
}

#[test]
fn each_hit_of_a_capturing_link_has_its_own_captures() {
    // The head's setvars see each matched value's captures in turn; without setvars only the
    // last value's captures reach the next link (TX:1 of the last argument here).
    let rs = rules(concat!(
        "SecRuleEngine On\n",
        "SecRule ARGS \"@rx ^v(\\d)$\" \"id:1,phase:2,pass,nolog,capture,setvar:'tx.seen=%{tx.seen}%{TX.1}'\"\n",
        "SecRule ARGS \"@rx ^v(\\d)$\" \"id:2,phase:2,pass,nolog,capture,chain\"\n",
        "  SecRule TX:1 \"@streq 3\" \"setvar:tx.last_is_three=1\"\n",
        "SecRule TX:last_is_three \"@eq 1\" \"id:3,phase:2,deny,status:403\"\n",
        "SecRule TX:seen \"@streq 132\" \"id:4,phase:2,deny,status:403\"\n",
    ));
    assert_eq!(blocked_by(&rs, "GET", "/?a=v1&b=v2&c=v3", &[], b""), Some(3));
    assert_eq!(blocked_by(&rs, "GET", "/?a=v1&b=v3&c=v2", &[], b""), Some(4));
}

#[test]
fn a_capture_clears_the_slots_it_does_not_fill_however_they_were_written() {
    // TX:3 written by a setvar, TX:2 by a two-group capture: the one-group capture of rule 3
    // (TX:0 and TX:1) must remove both. Run several times so that later transactions follow
    // the first ones' traces (their effects redone).
    let rs = rules(concat!(
        "SecRuleEngine On\n",
        "SecAction \"id:1,phase:1,pass,nolog,setvar:tx.3=stale\"\n",
        "SecRule ARGS:a \"@rx ^(x)(y)$\" \"id:2,phase:2,pass,nolog,capture\"\n",
        "SecRule ARGS:b \"@rx ^(z)$\" \"id:3,phase:2,pass,nolog,capture\"\n",
        "SecRule TX:2|TX:3 \"@rx .\" \"id:4,phase:2,deny,status:403\"\n",
        "SecRule TX:1 \"@streq z\" \"id:5,phase:2,deny,status:403\"\n",
    ));
    for round in 0..4 {
        for (uri, want) in [("/?a=xy&b=z", 5), ("/?a=xy&b=q", 4), ("/?a=no&b=z", 5), ("/?a=no&b=q", 4)] {
            assert_eq!(blocked_by(&rs, "GET", uri, &[], b""), Some(want), "{uri}, round {round}");
        }
    }
}

/// Runs phase 1 (and 2 when phase 1 passes) of a GET with `headers`; returns the transaction.
fn tx_after(rs: &Arc<Ruleset>, headers: &[(&str, &str)]) -> (Option<Interruption>, Transaction) {
    let mut tx = Transaction::new(rs.clone(), "test-pre".into());
    tx.process_connection("127.0.0.1", 40000, "127.0.0.1", 8080);
    tx.process_uri("/", "GET", "HTTP/1.1");
    for (k, v) in headers {
        tx.add_request_header(k.as_bytes(), v.as_bytes());
    }
    let i = tx.process_request_headers().or_else(|| tx.process_request_body());
    (i, tx)
}

#[test]
fn request_independent_start_of_phase_1_is_applied_once_per_rule_set() {
    use crate::compile::quick::Quick;
    let rs = rules(
        r#"SecRuleEngine On
SecRule REQUEST_HEADERS:Content-Type "@rx ^application/json" "id:5,phase:1,pass,nolog,t:lowercase,ctl:requestBodyProcessor=JSON"
SecAction "id:10,phase:1,pass,nolog,setvar:tx.before=1"
SecRule REQUEST_HEADERS:X-Block "@streq yes" "id:11,phase:1,deny,status:403,log,msg:'blocked'"
SecRule &TX:threshold "@eq 0" "id:12,phase:1,pass,nolog,setvar:tx.threshold=5"
SecAction "id:13,phase:1,pass,nolog,setvar:tx.runs=+1,setvar:'tx.copy=%{tx.threshold}'"
SecRule TX:threshold "@lt 5" "id:14,phase:1,deny,status:500,log,msg:'never'"
SecRule REQUEST_HEADERS:A "@streq x" "id:15,phase:1,pass,nolog,setvar:tx.a=1"
SecRule &TX:a "@eq 1" "id:16,phase:1,pass,nolog,setvar:tx.b=1"
SecRule TX:runs "!@eq 1" "id:17,phase:1,deny,status:403"
SecRule TX:copy "!@streq 5" "id:18,phase:1,deny,status:403"
"#,
    );
    let kinds: Vec<bool> = rs.quick.phases[0].iter().map(|q| matches!(q, Quick::Pre)).collect();
    // 10, 12, 13 and 14 read and write only TX; 5 and 11 touch no TX; 15 reads the request
    // and writes TX: the prefix ends there, and 16-18 run as usual.
    assert_eq!(kinds, [false, true, false, true, true, true, false, false, false, false]);
    for _ in 0..3 {
        // Same TX for every request (the `+1` is not added again), rules after the prefix
        // see it, and those that depend on the request still do.
        let (i, tx) = tx_after(&rs, &[("A", "x")]);
        assert!(i.is_none(), "{i:?}");
        assert_eq!(tx.tx_var("runs"), Some(&b"1"[..]));
        assert_eq!(tx.tx_var("copy"), Some(&b"5"[..]));
        assert_eq!(tx.tx_var("b"), Some(&b"1"[..]));
        let (_, tx) = tx_after(&rs, &[]);
        assert_eq!(tx.tx_var("b"), None);
        assert_eq!(tx.tx_var("before"), Some(&b"1"[..]));
    }
    // Rule 11 denies: the prefix's rules after it never ran, those before it did.
    let (i, tx) = tx_after(&rs, &[("X-Block", "yes")]);
    assert_eq!(i.map(|i| i.rule_id), Some(Some(11)));
    assert_eq!(tx.tx_var("before"), Some(&b"1"[..]));
    assert_eq!(tx.tx_var("threshold"), None);
    assert_eq!(tx.tx_var("runs"), None);
    // Engine off: no rule runs, TX stays empty.
    let off = rules("SecRuleEngine Off\nSecAction \"id:1,phase:1,pass,nolog,setvar:tx.x=1\"\n");
    assert_eq!(tx_after(&off, &[]).1.tx_var("x"), None);
}

#[test]
fn the_next_transaction_starts_from_the_initial_tx_whatever_the_last_changed() {
    // A finished transaction undoes its TX changes and leaves the map to the next one of its
    // rule set (`fast::tx_restore`): changed, removed, re-added and new variables all go back.
    let rs = rules(
        r#"SecRuleEngine On
SecAction "id:1,phase:1,pass,nolog,setvar:tx.a=1,setvar:tx.b=2,setvar:tx.c=3"
SecRule REQUEST_HEADERS:X "@streq change" "id:2,phase:1,pass,nolog,setvar:tx.a=5,setvar:tx.a=6,setvar:!tx.b,setvar:tx.new=7,setvar:tx.b=8,setvar:!tx.c,setvar:tx.c=3"
SecRule REQUEST_HEADERS:X "@streq same" "id:3,phase:1,pass,nolog,setvar:tx.a=1"
SecRule REQUEST_HEADERS:X "@streq big" "id:4,phase:1,pass,nolog,setvar:tx.a=+1,setvar:tx.a=+1,setvar:tx.a=+1"
"#,
    );
    let initial = |tx: &Transaction| tx.tx_vars().into_iter().map(|(k, v)| (k, String::from_utf8(v).unwrap())).collect::<Vec<_>>();
    let want: Vec<(String, String)> = [("a", "1"), ("b", "2"), ("c", "3")].iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    for x in ["change", "same", "big", "change", "", "big"] {
        let (i, tx) = tx_after(&rs, &[("X", x)]);
        assert!(i.is_none());
        match x {
            "change" => assert_eq!(initial(&tx), [("a", "6"), ("b", "8"), ("c", "3"), ("new", "7")].map(|(k, v)| (k.to_string(), v.to_string()))),
            "big" => assert_eq!(tx.tx_var("a"), Some(&b"4"[..])),
            _ => assert_eq!(initial(&tx), want),
        }
        drop(tx);
        // The next transaction takes the map put back, and it holds the initial values only.
        let next = Transaction::new(rs.clone(), "next".into());
        assert!(next.tx_kept.as_ref().is_some_and(|m| m.len() == want.len()), "after {x:?}");
        drop(next);
        let (_, tx) = tx_after(&rs, &[]);
        assert_eq!(initial(&tx), want, "after {x:?}");
    }
}

#[test]
fn a_request_independent_rule_that_always_denies_still_denies() {
    // Rule 2 matches for every request: the prefix stops before it, so it denies (and logs)
    // each request, and rule 3 after it never runs.
    let rs = rules(
        r#"SecRuleEngine On
SecAction "id:1,phase:1,pass,nolog,setvar:tx.a=1"
SecRule &TX:setup "@eq 0" "id:2,phase:1,deny,status:500,log,msg:'no setup'"
SecAction "id:3,phase:1,pass,nolog,setvar:tx.b=1"
"#,
    );
    for _ in 0..2 {
        let (i, tx) = tx_after(&rs, &[]);
        assert_eq!(i.map(|i| (i.rule_id, i.status)), Some((Some(2), 500)));
        assert_eq!(tx.tx_var("a"), Some(&b"1"[..]));
        assert_eq!(tx.tx_var("b"), None);
    }
}

#[test]
fn paranoia_level_checks_skip_from_their_quick_records() {
    use crate::compile::quick::Quick;
    let rs = rules(
        r#"SecRuleEngine On
SecRule REQUEST_HEADERS:R "@streq yes" "id:1,phase:1,pass,nolog,ctl:ruleRemoveById=3"
SecAction "id:2,phase:1,pass,nolog,setvar:tx.level=1"
SecRule TX:level "@lt 2" "id:3,phase:1,pass,nolog,skipAfter:END-A"
SecRule REQUEST_URI "@contains /" "id:4,phase:1,deny,status:403"
SecMarker END-A
SecRule TX:level "@lt 1" "id:5,phase:1,pass,nolog,skip:1"
SecRule REQUEST_URI "@contains /" "id:6,phase:1,pass,nolog,setvar:tx.six=1"
SecRule TX:level "@eq 1" "id:7,phase:1,pass,nolog,skip:1"
SecRule REQUEST_URI "@contains /" "id:8,phase:1,deny,status:403"
SecRule TX:six "@eq 1" "id:9,phase:1,deny,status:401"
"#,
    );
    let kinds: Vec<bool> = rs.quick.phases[0].iter().map(|q| matches!(q, Quick::TxSkip { .. })).collect();
    assert_eq!(kinds, [false, false, true, false, false, true, false, true, false, false]);
    // 3 holds: 4 skipped; 5 fails: 6 runs; 7 holds: 8 skipped; 9 sees 6's setvar.
    let (i, _) = tx_after(&rs, &[]);
    assert_eq!(i.map(|i| i.rule_id), Some(Some(9)));
    // Rule 3 removed at runtime: no skip, 4 denies.
    let (i, _) = tx_after(&rs, &[("R", "yes")]);
    assert_eq!(i.map(|i| i.rule_id), Some(Some(4)));
}

#[test]
fn quick_tx_checks_see_every_change_to_tx() {
    // Rule 5's quick check reads TX:level (1); rule 2 then changes it for a GET: rule 3's
    // quick check must read the new value (no skip, so rule 4 denies).
    let rs = rules(
        r#"SecRuleEngine On
SecRule REQUEST_HEADERS:X "@streq y" "id:10,phase:1,pass,nolog,setvar:tx.x=1"
SecAction "id:1,phase:1,pass,nolog,setvar:tx.level=1"
SecRule TX:level "@gt 5" "id:5,phase:1,deny,status:401"
SecRule REQUEST_METHOD "@streq GET" "id:2,phase:1,pass,nolog,setvar:tx.level=3"
SecRule TX:level "@lt 2" "id:3,phase:1,pass,nolog,skipAfter:END"
SecRule REQUEST_URI "@contains /" "id:4,phase:1,deny,status:403"
SecMarker END
"#,
    );
    assert_eq!(blocked_by(&rs, "GET", "/", &[], b""), Some(4));
    assert_eq!(blocked_by(&rs, "POST", "/", &[], b""), None);
}

/// What a thread's transactions learn about values (`cache::Memo`: scans, chain results,
/// operators found false) changes no verdict: values seen before skip the work, and a rule
/// still matches a value other rules found benign.
#[test]
fn values_seen_before_decide_as_the_first_time() {
    let rs = rules(
        r#"SecRuleEngine On
SecRule ARGS "@rx (?i)evil.*[0-9]{3}" "id:1,phase:1,deny,status:403,t:none,t:urlDecodeUni,t:lowercase"
SecRule ARGS "@rx worse.*[0-9]{3}" "id:2,phase:1,deny,status:403,t:none,t:urlDecodeUni,multiMatch"
SecRule REQUEST_HEADERS:User-Agent "@pm nikto" "id:3,phase:1,deny,status:403,t:lowercase"
"#,
    );
    let ua = [("User-Agent", "Mozilla/5.0 (X11)")];
    let runs = |uri: &str| {
        let mut tx = Transaction::new(rs.clone(), "m".into());
        tx.enable_profile();
        tx.process_uri(uri, "GET", "HTTP/1.1");
        tx.add_request_header(b"User-Agent", ua[0].1.as_bytes());
        let blocked = tx.process_request_headers().and_then(|i| i.rule_id);
        let p = tx.take_profile().unwrap();
        (blocked, p.rules.values().map(|r| r.ran).sum::<u64>())
    };
    // First time the operators run; "WoRsE" has "worse" nowhere, "w%6Frse-123" decodes to "worse-123".
    assert_eq!(runs("/?a=hello&b=WoRsE").0, None);
    // A value enters the memo the second time it comes; the third time no operator runs.
    assert_eq!(runs("/?a=hello&b=WoRsE").0, None);
    assert_eq!(runs("/?a=hello&b=WoRsE"), (None, 0));
    assert_eq!(blocked_by(&rs, "GET", "/?b=WoRsE&c=wo+rse", &ua, b""), None);
    for _ in 0..2 {
        assert_eq!(blocked_by(&rs, "GET", "/?a=hello&b=w%6Frse-123", &ua, b""), Some(2));
        assert_eq!(blocked_by(&rs, "GET", "/?a=hello&b=E%56il-123", &ua, b""), Some(1));
        assert_eq!(blocked_by(&rs, "GET", "/?a=hello", &[("User-Agent", "Nikto/2.5")], b""), Some(3));
    }
    // A known value in a new request, next to an unknown one that both regexes must read.
    assert_eq!(runs("/?a=hello&z=5-evil-worse-5"), (None, 2));
    assert_eq!(runs("/?a=hello&z=5-evil-worse-5"), (None, 2));
    assert_eq!(runs("/?a=hello&z=5-evil-worse-5"), (None, 0));
    assert_eq!(blocked_by(&rs, "GET", "/?a=5-evil-worse-5&b=EVIL-000", &ua, b""), Some(1));
}

/// Two rule sets on one thread number their operators alike: what one learned about a value
/// is never read with the other's rules.
#[test]
fn rule_sets_do_not_share_what_they_learned() {
    let foo = rules("SecRuleEngine On\nSecRule ARGS \"@rx foo\" \"id:1,phase:1,deny,status:403\"");
    let bar = rules("SecRuleEngine On\nSecRule ARGS \"@rx bar\" \"id:1,phase:1,deny,status:403\"");
    for _ in 0..3 {
        assert_eq!(blocked_by(&foo, "GET", "/?a=bar", &[], b""), None);
        assert_eq!(blocked_by(&bar, "GET", "/?a=bar", &[], b""), Some(1));
        assert_eq!(blocked_by(&bar, "GET", "/?a=foo", &[], b""), None);
        assert_eq!(blocked_by(&foo, "GET", "/?a=foo", &[], b""), Some(1));
    }
}

/// Unique values by the thousand: the memo stays within its bound and still decides.
#[test]
fn the_memo_of_values_is_bounded() {
    let rs = rules("SecRuleEngine On\nSecRule ARGS \"@rx ^attack\" \"id:1,phase:1,deny,status:403,t:lowercase\"");
    for r in 0..120 {
        let uri = format!("/?{}", (0..100).map(|i| format!("k{i}=Value{r}x{i}")).collect::<Vec<_>>().join("&"));
        assert_eq!(blocked_by(&rs, "GET", &uri, &[], b""), None);
    }
    let tx = Transaction::new(rs.clone(), "b".into());
    let held = tx.memo.borrow().len();
    assert!(held > 0 && held <= 2 * cache::MEMO_ENTRIES, "{held}");
    assert!(tx.memo.borrow().records_within_memo());
    drop(tx);
    assert_eq!(blocked_by(&rs, "GET", "/?k0=Value1x0&k1=ATTACK", &[], b""), Some(1));
}

/// A large body's groups (here 901 arguments) are remembered as a GET's are: the same body
/// again builds them from the memo's records (or takes the records' groups whole), runs no operator (neither on its arguments nor
/// on the ~9 KB body itself), and still decides; the records hold only entries of the memo,
/// also while bodies of new values push old ones out.
#[test]
fn large_bodies_seen_before_come_from_records() {
    let rs = rules(
        r#"SecRuleEngine On
SecRequestBodyAccess On
SecRule ARGS "@rx (?i)evil" "id:1,phase:2,deny,status:403,t:none,t:urlDecodeUni"
SecRule ARGS "@rx ^attack$" "id:2,phase:2,deny,status:403,t:none,t:lowercase"
SecRule REQUEST_BODY "@rx k5=va5[a-z]" "id:3,phase:2,deny,status:403"
"#,
    );
    let body = |tag: &str, extra: &str| [extra.to_string()].into_iter().chain((0..900).map(|i| format!("k{i}=v{tag}{i}"))).collect::<Vec<_>>().join("&");
    let runs = |b: &str| {
        let mut tx = Transaction::new(rs.clone(), "r".into());
        tx.enable_profile();
        tx.process_uri("/form", "POST", "HTTP/1.1");
        tx.add_request_header(b"Content-Type", FORM.1.as_bytes());
        assert_eq!(tx.process_request_headers(), None);
        let _ = tx.append_request_body(b.as_bytes());
        let blocked = tx.process_request_body().and_then(|i| i.rule_id);
        let p = tx.take_profile().unwrap();
        (blocked, (p.cache.groups_recorded, p.cache.groups_whole), p.rules.values().map(|r| r.ran).sum::<u64>())
    };
    let known = body("a", "z=quiet");
    for _ in 0..2 {
        assert_eq!(runs(&known).0, None);
    }
    let (blocked, (recorded, whole), ran) = runs(&known);
    assert_eq!((blocked, ran), (None, 0));
    assert!(recorded >= 2, "{recorded}");
    // The same body again: the same lists, so the records give their groups whole.
    assert!(runs(&known).1 .1 >= 2, "{whole}");
    assert_eq!(runs(&body("a", "z=ATTACK")).0, Some(2));
    assert_eq!(runs(&body("a", "z=%45vil")).0, Some(1));
    assert_eq!(runs(&body("a", "z=k5=va5q")).0, Some(3));
    assert_eq!(runs(&known).0, None);
    // Values that enter the memo (seen twice) in groups never recorded (each has a value seen
    // once): the memo's generations turn over while the records of `known` are not replaced.
    for r in 0..12 {
        for once in ["a", "b"] {
            assert_eq!(runs(&body(&format!("n{r}x"), &format!("z=once{r}{once}"))).0, None);
        }
        assert!(rs_memo_ok(&rs));
    }
    assert_eq!(runs(&body("n11x", "z=attack")).0, Some(2));
}

fn rs_memo_ok(rs: &Arc<Ruleset>) -> bool {
    Transaction::new(rs.clone(), "m".into()).memo.borrow().records_within_memo()
}

/// A group of 64 values or more that the memo knows: a rule runs only on the values it does
/// not know (see `Group::known`), and these still match, as do known values that matched
/// before.
#[test]
fn large_groups_of_known_values_still_find_the_new_one() {
    let rs = rules(
        r#"SecRuleEngine On
SecRule ARGS "@rx evil" "id:1,phase:1,deny,status:403,t:none,t:lowercase"
SecRule ARGS "@rx ^attack$" "id:2,phase:1,deny,status:403,t:none"
"#,
    );
    let uri = |extra: &[&str]| {
        let base = (0..100).map(|i| format!("k{i}=Value{i}"));
        format!("/?{}", base.chain(extra.iter().map(|s| s.to_string())).collect::<Vec<_>>().join("&"))
    };
    for _ in 0..3 {
        assert_eq!(blocked_by(&rs, "GET", &uri(&[]), &[], b""), None);
    }
    assert_eq!(blocked_by(&rs, "GET", &uri(&["new=EVIL"]), &[], b""), Some(1));
    assert_eq!(blocked_by(&rs, "GET", &uri(&["new=attack"]), &[], b""), Some(2));
    for _ in 0..3 {
        assert_eq!(blocked_by(&rs, "GET", &uri(&["z=attack"]), &[], b""), Some(2));
    }
    // `z=attack` is known (rule 1 false on it, rule 2 not) and `w` is new.
    assert_eq!(blocked_by(&rs, "GET", &uri(&["z=attack", "w=fresh"]), &[], b""), Some(2));
    assert_eq!(blocked_by(&rs, "GET", &uri(&["w=fresh", "v=evil"]), &[], b""), Some(1));
}

/// A group with a runtime removal (`ctl:ruleRemoveTargetByTag`) uses its slot's record in the
/// memo too: a record describes exactly the values it was made from, so the same values with
/// the removal reuse it and a list the removal did not shorten does not.
#[test]
fn records_of_groups_with_removals_follow_their_values() {
    let rs = rules(
        r#"SecRuleEngine On
SecRule REQUEST_FILENAME "@rx ^/safe/" "id:1,phase:1,pass,nolog,ctl:ruleRemoveTargetByTag=t1;REQUEST_FILENAME"
SecRule ARGS|REQUEST_FILENAME "@rx evil" "id:2,phase:2,deny,status:403,tag:t1,t:none,t:lowercase"
"#,
    );
    for _ in 0..3 {
        assert_eq!(blocked_by(&rs, "GET", "/safe/evil?a=1&b=two", &[], b""), None);
    }
    assert_eq!(blocked_by(&rs, "GET", "/other/evil?a=1&b=two", &[], b""), Some(2));
    assert_eq!(blocked_by(&rs, "GET", "/safe/evil?a=1&b=two", &[], b""), None);
    assert_eq!(blocked_by(&rs, "GET", "/safe/evil?a=1&b=EVIL", &[], b""), Some(2));
    assert_eq!(blocked_by(&rs, "GET", "/other/evil?a=1&b=two", &[], b""), Some(2));
}

#[test]
fn a_request_sees_nothing_of_the_one_before() {
    // Transactions reuse the buffers of the request before (`Request::recycle`): none of its
    // values may show in the next one.
    let rs = rules(
        r#"SecRuleEngine On
SecRequestBodyAccess On
SecRule &REQUEST_HEADERS:X-Probe "@gt 0" "id:1,phase:1,deny"
SecRule &ARGS_GET "@gt 0" "id:2,phase:1,deny"
SecRule &REQUEST_COOKIES "@gt 0" "id:3,phase:1,deny"
SecRule REQUEST_FILENAME "@contains probe" "id:4,phase:1,deny"
SecRule REMOTE_ADDR "@streq 10.9.9.9" "id:5,phase:1,deny"
SecRule SERVER_NAME "@streq probe.example" "id:6,phase:1,deny"
SecRule ARGS_POST "@contains probe" "id:7,phase:2,deny"
SecRule REQUEST_BODY "@contains probe" "id:8,phase:2,deny"
SecRule REQUEST_BASENAME "@streq probe.php" "id:9,phase:1,deny"
SecRule REQUEST_LINE "@contains probe" "id:10,phase:1,deny""#,
    );
    let clean = |rs: &Arc<Ruleset>| blocked_by(rs, "GET", "/", &[("Host", "a.example")], b"");
    assert_eq!(clean(&rs), None);
    let cases: [(&str, &str, &[(&str, &str)], &[u8], u64); 8] = [
        ("GET", "/", &[("X-Probe", "1")], b"", 1),
        ("GET", "/?a=1", &[], b"", 2),
        ("GET", "/", &[("Cookie", "s=1")], b"", 3),
        ("GET", "/dir%2fprobe/x", &[], b"", 4),
        ("GET", "/", &[("Host", "probe.example:8080")], b"", 6),
        ("POST", "/", &[FORM], b"x=probe", 7),
        ("POST", "/", &[("Content-Type", "text/plain")], b"probe", 8),
        ("GET", "/a/probe.php", &[], b"", 4),
    ];
    for (method, uri, headers, body, id) in cases {
        assert_eq!(blocked_by(&rs, method, uri, headers, body), Some(id), "{method} {uri}");
        assert_eq!(clean(&rs), None, "after {method} {uri}");
    }
    let mut tx = Transaction::new(rs.clone(), "t".into());
    tx.process_connection("10.9.9.9", 1, "127.0.0.1", 80);
    tx.process_uri("/", "GET", "HTTP/1.1");
    assert_eq!(tx.process_request_headers().and_then(|i| i.rule_id), Some(5));
    drop(tx);
    assert_eq!(clean(&rs), None, "after REMOTE_ADDR");
}

#[test]
fn percent_decoding_keeps_invalid_escapes() {
    for (input, out) in [
        (&b"/a%41b"[..], &b"/aAb"[..]),
        (b"%", b"%"),
        (b"%4", b"%4"),
        (b"%zz%41", b"%zzA"),
        (b"%%41", b"%A"),
        (b"a+b%2", b"a+b%2"),
        (b"%e2%82%ac", "\u{20ac}".as_bytes()),
        (b"", b""),
    ] {
        assert_eq!(percent_decode(input), out, "{}", String::from_utf8_lossy(input));
    }
}

/// A target's list takes the last request's items where the bytes are the same at the same
/// place (`Memo::last_list`): a value, a name or a prefix that differs there, a list longer
/// or shorter, are each seen as they are.
#[test]
fn lists_like_the_last_one_still_see_what_differs() {
    let rs = rules(
        r#"SecRuleEngine On
SecRule ARGS "@rx ^attack$" "id:1,phase:1,deny,status:403"
SecRule ARGS "@streq 2" "id:2,phase:1,deny,status:403,chain"
    SecRule MATCHED_VAR_NAME "@streq ARGS:admin"
SecRule REQUEST_HEADERS:X-Evil "@rx ." "id:3,phase:1,deny,status:403"
SecRule REQUEST_COOKIES_NAMES "@rx ^attack$" "id:4,phase:1,deny,status:403"
"#,
    );
    let h = |name: &'static str| [("User-Agent", "Mozilla/5.0"), (name, "1"), ("Cookie", "a=1; b=attack")];
    for _ in 0..4 {
        assert_eq!(blocked_by(&rs, "GET", "/?a=1&b=2&c=3", &h("X-Good"), b""), None);
    }
    // One value differs, in the middle.
    assert_eq!(blocked_by(&rs, "GET", "/?a=1&b=attack&c=3", &h("X-Good"), b""), Some(1));
    // The same values under another name.
    assert_eq!(blocked_by(&rs, "GET", "/?a=1&admin=2&c=3", &h("X-Good"), b""), Some(2));
    assert_eq!(blocked_by(&rs, "GET", "/?a=1&b=2&c=3", &h("X-Evil"), b""), Some(3));
    // A cookie whose name is the value the last request had.
    assert_eq!(blocked_by(&rs, "GET", "/?a=1&b=2&c=3", &[("User-Agent", "Mozilla/5.0"), ("X-Good", "1"), ("Cookie", "a=1; attack=b")], b""), Some(4));
    // Longer and shorter lists.
    assert_eq!(blocked_by(&rs, "GET", "/?a=1&b=2&c=3&d=attack", &h("X-Good"), b""), Some(1));
    assert_eq!(blocked_by(&rs, "GET", "/?a=attack", &h("X-Good"), b""), Some(1));
    assert_eq!(blocked_by(&rs, "GET", "/?a=1&b=2", &h("X-Good"), b""), None);
    assert_eq!(blocked_by(&rs, "GET", "/?a=1&b=2&c=3", &h("X-Good"), b""), None);
}

/// Envoy adds a new `x-request-id` to every request, and bodies change in a value or two: a
/// group whose values differ from its slot's record at a few places is built from the record
/// (its changed values and what it knows for the places it shares), and only the new values
/// run. Whatever changes, the verdicts are those of a first request: the new value is seen
/// (raw, after the chain, each multiMatch step), and what a changed place held before is not.
#[test]
fn groups_differing_from_their_record_at_a_few_places_still_decide() {
    let rs = rules(
        r#"SecRuleEngine On
SecRequestBodyAccess On
SecRule REQUEST_HEADERS "@rx attack" "id:1,phase:1,deny,status:403,t:none,t:urlDecodeUni"
SecRule ARGS|REQUEST_HEADERS "@rx ^evil$" "id:2,phase:2,deny,status:403,t:none,t:lowercase"
SecRule ARGS "@rx ^Worse$" "id:3,phase:2,deny,status:403,t:none,t:lowercase,multiMatch"
SecRule ARGS "@rx ^bad$" "id:4,phase:2,deny,status:403,t:none,t:urlDecodeUni"
"#,
    );
    let body = |v: &str| (0..40).map(|i| if i == 7 { format!("k7={v}") } else { format!("k{i}=v{i}") }).collect::<Vec<_>>().join("&");
    let near = std::cell::Cell::new(0);
    let runs = |rid: &str, v: &str| {
        let mut tx = Transaction::new(rs.clone(), "n".into());
        tx.enable_profile();
        tx.process_uri("/form", "POST", "HTTP/1.1");
        tx.add_request_header(b"Content-Type", FORM.1.as_bytes());
        tx.add_request_header(b"Accept", b"text/html");
        tx.add_request_header(b"x-request-id", rid.as_bytes());
        let mut blocked = tx.process_request_headers();
        if blocked.is_none() {
            let _ = tx.append_request_body(body(v).as_bytes());
            blocked = tx.process_request_body();
        }
        near.set(near.get() + tx.take_profile().map_or(0, |p| p.cache.groups_near));
        blocked.and_then(|i| i.rule_id)
    };
    for r in 0..4 {
        assert_eq!(runs(&format!("id-{r}"), "plain"), None);
    }
    for r in 0..3 {
        // A new request id each time, the body the same: then one body value new.
        assert_eq!(runs(&format!("rid-{r}"), "plain"), None);
        assert_eq!(runs(&format!("rid-{r}x"), &format!("new{r}")), None);
        assert_eq!(runs(&format!("rid-{r}-%61ttack"), "plain"), Some(1));
        assert_eq!(runs(&format!("rid-{r}y"), "EVIL"), Some(2));
        assert_eq!(runs("EVIL", &format!("new{r}")), Some(2));
        assert_eq!(runs(&format!("rid-{r}z"), "Worse"), Some(3));
        assert_eq!(runs(&format!("rid-{r}w"), "%62ad"), Some(4));
        assert_eq!(runs(&format!("rid-{r}v"), "plain"), None);
    }
    assert!(near.get() >= 10, "groups built from a near record: {}", near.get());
    assert!(rs_memo_ok(&rs));
}

/// A record leaves a place empty where the value is a memo entry but what the chain made of
/// it is not yet (a hole): the next group with the very same values must still run the chain
/// there, not take the raw value for its result.
#[test]
fn a_record_with_a_hole_still_runs_the_chain_there() {
    let rs = rules(
        r#"SecRuleEngine On
SecRequestBodyAccess On
SecRule REQUEST_HEADERS "@rx ^nothing-here$" "id:9,phase:1,pass,nolog,t:none"
SecRule ARGS "@rx ^evil$" "id:2,phase:2,deny,status:403,t:none,t:lowercase"
"#,
    );
    let body = |v: &str| (0..40).map(|i| if i == 7 { format!("k7={v}") } else { format!("k{i}=v{i}") }).collect::<Vec<_>>().join("&");
    let runs = |rid: &str, header: &str, v: &str| {
        let mut tx = Transaction::new(rs.clone(), "h".into());
        tx.process_uri("/form", "POST", "HTTP/1.1");
        tx.add_request_header(b"Content-Type", FORM.1.as_bytes());
        tx.add_request_header(b"x-v", header.as_bytes());
        tx.add_request_header(b"x-request-id", rid.as_bytes());
        let mut blocked = tx.process_request_headers();
        if blocked.is_none() {
            let _ = tx.append_request_body(body(v).as_bytes());
            blocked = tx.process_request_body();
        }
        blocked.and_then(|i| i.rule_id)
    };
    for r in 0..4 {
        assert_eq!(runs(&format!("w{r}"), "x", "plain"), None);
    }
    // EVIL seen once (a header), then as the argument: an entry now, its lowercase form not.
    assert_eq!(runs("a", "EVIL", "plain"), None);
    assert_eq!(runs("b", "x", "EVIL"), Some(2));
    // The same values again: the record of the last group has a hole at k7.
    assert_eq!(runs("c", "x", "EVIL"), Some(2));
    assert_eq!(runs("d", "x", "EVIL"), Some(2));
    assert!(rs_memo_ok(&rs));
}

/// An ARGS list collected from the very same query string, body (and body processor) and
/// runtime removals as a request before is that request's list, not collected again: the
/// verdicts follow whatever of these changed, including which ctl made each removal (the
/// removal masks number removals in the order they were made).
#[test]
fn args_lists_of_the_same_sources_decide_as_the_first_time() {
    let rs = rules(
        r#"SecRuleEngine On
SecRequestBodyAccess On
SecRule REQUEST_HEADERS:x-h1 "@streq 1" "id:10,phase:1,pass,nolog,ctl:ruleRemoveTargetById=2;ARGS:a"
SecRule REQUEST_HEADERS:x-h2 "@streq 1" "id:11,phase:1,pass,nolog,ctl:ruleRemoveTargetById=2;ARGS:b"
SecRule ARGS "@rx ^evil$" "id:2,phase:2,deny,status:403,t:none"
SecRule ARGS_NAMES "@rx ^attack" "id:3,phase:2,deny,status:403,t:none"
"#,
    );
    let post = |body: &str, ct: (&str, &str), h: &[(&str, &str)]| {
        let mut headers = vec![ct];
        headers.extend_from_slice(h);
        blocked_by(&rs, "POST", "/form", &headers, body.as_bytes())
    };
    let (h1, h2) = (("x-h1", "1"), ("x-h2", "1"));
    for _ in 0..3 {
        assert_eq!(post("a=evil&b=fine", FORM, &[h1]), None);
        assert_eq!(post("a=evil&b=fine", FORM, &[h2]), Some(2));
        assert_eq!(post("a=evil&b=fine", FORM, &[]), Some(2));
        assert_eq!(post("a=evil&b=fine", FORM, &[h2, h1]), None);
        assert_eq!(post("a=fine&b=evil", FORM, &[h2]), None);
        assert_eq!(post("a=fine&b=evil", FORM, &[h1]), Some(2));
        // The same bytes as JSON are no arguments at all (a parse error).
        assert_eq!(post("a=evil", JSON, &[]), None);
        assert_eq!(post("a=evil", FORM, &[]), Some(2));
        assert_eq!(post(r#"{"a":"evil"}"#, JSON, &[]), Some(2));
        assert_eq!(post("attack1=x", FORM, &[]), Some(3));
        assert_eq!(blocked_by(&rs, "GET", "/?a=evil", &[h1], b""), None);
        assert_eq!(blocked_by(&rs, "GET", "/?a=evil", &[h2], b""), Some(2));
        assert_eq!(blocked_by(&rs, "GET", "/?b=evil", &[h1], b""), Some(2));
        assert_eq!(blocked_by(&rs, "POST", "/?b=evil", &[FORM, h1], b"a=evil"), Some(2));
        assert_eq!(blocked_by(&rs, "POST", "/?b=fine", &[FORM, h1], b"a=evil"), None);
    }
}

/// Lists of cookies and of the request line's parts come from the memo when the request line,
/// the `Cookie` headers (and the removals) are the very same; any change there collects again.
#[test]
fn cookie_and_request_line_lists_follow_their_sources() {
    let rs = rules(
        r#"SecRuleEngine On
SecRule REQUEST_HEADERS:x-h1 "@streq 1" "id:10,phase:1,pass,nolog,ctl:ruleRemoveTargetById=4;REQUEST_COOKIES:c"
SecRule REQUEST_COOKIES "@rx ^evil$" "id:4,phase:1,deny,status:403,t:none"
SecRule REQUEST_COOKIES_NAMES "@rx ^attack" "id:5,phase:1,deny,status:403,t:none"
SecRule REQUEST_FILENAME "@endsWith /admin" "id:6,phase:1,deny,status:403,t:none"
SecRule REQUEST_METHOD "@streq DELETE" "id:7,phase:1,deny,status:403,t:none"
SecRule REQUEST_BASENAME "@streq x.php" "id:8,phase:2,deny,status:403,t:none"
"#,
    );
    let h1 = ("x-h1", "1");
    for _ in 0..3 {
        assert_eq!(blocked_by(&rs, "GET", "/a", &[("Cookie", "c=evil")], b""), Some(4));
        assert_eq!(blocked_by(&rs, "GET", "/a", &[("Cookie", "c=fine")], b""), None);
        assert_eq!(blocked_by(&rs, "GET", "/a", &[("Cookie", "c=fine"), ("Cookie", "d=evil")], b""), Some(4));
        assert_eq!(blocked_by(&rs, "GET", "/a", &[("Cookie", "c=evil"), h1], b""), None);
        assert_eq!(blocked_by(&rs, "GET", "/a", &[("Cookie", "d=evil"), h1], b""), Some(4));
        assert_eq!(blocked_by(&rs, "GET", "/a", &[("Cookie", "attack=1")], b""), Some(5));
        assert_eq!(blocked_by(&rs, "GET", "/a", &[], b""), None);
        assert_eq!(blocked_by(&rs, "GET", "/admin", &[], b""), Some(6));
        assert_eq!(blocked_by(&rs, "GET", "/admin?x=1", &[], b""), Some(6));
        assert_eq!(blocked_by(&rs, "GET", "/a?x=/admin", &[], b""), None);
        assert_eq!(blocked_by(&rs, "GET", "/a", &[], b""), None);
        assert_eq!(blocked_by(&rs, "DELETE", "/a", &[], b""), Some(7));
        assert_eq!(blocked_by(&rs, "GET", "/a/x.php", &[], b""), Some(8));
        assert_eq!(blocked_by(&rs, "GET", "/x.php/a", &[], b""), None);
    }
}

/// A group over the request line's, cookies' and body's values only (ARGS, cookies, XML) is
/// given by its record when its sources are the very same as the record's (their lists are
/// then not collected): the verdicts follow every change of the query, cookies, body, its
/// processor and the runtime removals, phase by phase, and the shortcut is taken.
#[test]
fn groups_of_the_same_sources_decide_as_the_first_time() {
    let rs = rules(
        r#"SecRuleEngine On
SecRequestBodyAccess On
SecRule REQUEST_HEADERS:x-h1 "@streq 1" "id:10,phase:1,pass,nolog,ctl:ruleRemoveTargetById=2;ARGS:a"
SecRule REQUEST_HEADERS:Content-Type "@rx ^text/xml" "id:11,phase:1,pass,nolog,ctl:requestBodyProcessor=XML"
SecRule REQUEST_COOKIES|ARGS_NAMES|ARGS|XML:/* "@rx ^evil$" "id:1,phase:1,deny,status:403,t:none,t:urlDecodeUni,t:lowercase"
SecRule REQUEST_COOKIES|ARGS_NAMES|ARGS|XML:/* "@rx ^attack$" "id:2,phase:2,deny,status:403,t:none,t:lowercase"
SecRule REQUEST_COOKIES|ARGS_NAMES|ARGS|XML:/* "@rx ^bad$" "id:3,phase:2,deny,status:403,t:none,t:lowercase"
"#,
    );
    let by_gen = std::cell::Cell::new(0u64);
    let run = |method: &str, uri: &str, headers: &[(&str, &str)], body: &str| {
        let mut tx = Transaction::new(rs.clone(), "g".into());
        tx.enable_profile();
        tx.process_uri(uri, method, "HTTP/1.1");
        for (k, v) in headers {
            tx.add_request_header(k.as_bytes(), v.as_bytes());
        }
        let mut blocked = tx.process_request_headers();
        if blocked.is_none() {
            let _ = tx.append_request_body(body.as_bytes());
            blocked = tx.process_request_body();
        }
        if let Some(p) = tx.take_profile() {
            by_gen.set(by_gen.get() + p.cache.groups_by_gen);
        }
        blocked.and_then(|i| i.rule_id)
    };
    // Each request twice in a row (the second finds the first's records), then the next.
    let run = |method: &str, uri: &str, headers: &[(&str, &str)], body: &str| {
        let first = run(method, uri, headers, body);
        assert_eq!(run(method, uri, headers, body), first, "{method} {uri} {body} again");
        first
    };
    let xml = ("Content-Type", "text/xml");
    let h1 = ("x-h1", "1");
    for _ in 0..3 {
        assert_eq!(run("GET", "/?a=Fine", &[], ""), None);
        assert_eq!(run("GET", "/?a=EVIL", &[], ""), Some(1));
        assert_eq!(run("GET", "/?a=Attack", &[], ""), Some(2));
        assert_eq!(run("GET", "/?a=Attack", &[h1], ""), None);
        assert_eq!(run("GET", "/?a=fine", &[("Cookie", "c=BAD")], ""), Some(3));
        assert_eq!(run("GET", "/?a=fine", &[("Cookie", "c=good")], ""), None);
        assert_eq!(run("POST", "/?a=fine", &[FORM], "b=attack"), Some(2));
        assert_eq!(run("POST", "/?a=fine", &[FORM], "b=fine"), None);
        assert_eq!(run("POST", "/?a=fine", &[JSON], r#"{"b":"bad"}"#), Some(3));
        assert_eq!(run("POST", "/?a=fine", &[JSON], r#"{"b":"fine"}"#), None);
        assert_eq!(run("POST", "/?a=fine", &[xml], "<r><b>attack</b></r>"), Some(2));
        assert_eq!(run("POST", "/?a=fine", &[xml], "<r><b>fine</b></r>"), None);
        assert_eq!(run("POST", "/?a=fine", &[FORM], "<r><b>attack</b></r>"), None);
        assert_eq!(run("POST", "/?attack=1", &[FORM], "b=fine"), Some(2));
        assert_eq!(run("GET", "/?a=Attack", &[], ""), Some(2));
    }
    assert!(by_gen.get() >= 20, "groups given by their sources' generation: {}", by_gen.get());
    assert!(rs_memo_ok(&rs));
}

/// `same_bytes` (8 bytes at a time) agrees with slice equality at every length and place.
#[test]
fn same_bytes_is_slice_equality() {
    let a: Vec<u8> = (0u8..40).collect();
    for len in 0..a.len() {
        let x = a.get(..len).unwrap_or_default();
        let copy = x.to_vec();
        assert!(cache::same_bytes(x, &copy));
        assert!(!cache::same_bytes(x, a.get(..len + 1).unwrap_or_default()));
        for at in 0..len {
            let mut y = copy.clone();
            if let Some(b) = y.get_mut(at) {
                *b ^= 0x80;
            }
            assert!(!cache::same_bytes(x, &y), "len {len}, differing at {at}");
        }
    }
}

/// A transaction starts with no MATCHED_VAR or MATCHED_VAR_NAME, whatever the last one matched
/// (their buffers are reused).
#[test]
fn matched_vars_start_empty_in_every_transaction() {
    let rs = rules(
        r#"SecRuleEngine On
SecRule MATCHED_VAR "@rx ." "id:1,phase:1,deny,status:403"
SecRule MATCHED_VAR_NAME "@rx ." "id:2,phase:1,deny,status:403"
SecRule ARGS "@rx evil" "id:4,phase:1,pass,nolog"
SecRule MATCHED_VAR_NAME "@streq ARGS:c" "id:5,phase:1,deny,status:403"
"#,
    );
    for _ in 0..3 {
        assert_eq!(blocked_by(&rs, "GET", "/?a=evil&b=evil&c=evil", &[], b""), Some(5));
        assert_eq!(blocked_by(&rs, "GET", "/?a=fine", &[], b""), None);
    }
}

/// The shape of CRS 920450: a variable per header name, named and valued from the capture,
/// then a chained test over those variables; setvar keys with macros are lowercased.
#[test]
fn setvars_named_by_captures_make_one_variable_per_value() {
    let rs = rules(
        r#"SecRuleEngine On
SecRule REQUEST_HEADERS_NAMES "@rx ^.*$" "id:1,phase:1,capture,t:none,t:lowercase,setvar:'tx.hn_%{tx.0}=/%{tx.0}/',setvar:'tx.m_%{REQUEST_METHOD}=%{tx.0}',chain,deny,status:403"
    SecRule TX:/^hn_/ "@within /proxy/ /x-bad/" "t:none"
SecRule REQUEST_HEADERS_NAMES "@rx ^(.)(.)" "id:2,phase:1,capture,t:lowercase,setvar:'tx.two_%{tx.1}%{tx.2}=%{tx.0}',pass"
SecRule REQUEST_HEADERS_NAMES "@rx ^.$" "id:3,phase:1,capture,t:lowercase,pass""#,
    );
    let mut tx = Transaction::new(rs.clone(), "t".into());
    tx.process_uri("/", "GET", "HTTP/1.1");
    for (k, v) in [("Host", "a"), ("Accept", "b"), ("User-Agent", "c"), ("Z", "d")] {
        tx.add_request_header(k.as_bytes(), v.as_bytes());
    }
    assert!(tx.process_request_headers().is_none());
    let n = |k: &str| tx.tx.get(k).map(|v| String::from_utf8_lossy(v).into_owned());
    assert_eq!(n("hn_host").as_deref(), Some("/host/"));
    assert_eq!(n("hn_accept").as_deref(), Some("/accept/"));
    assert_eq!(n("hn_user-agent").as_deref(), Some("/user-agent/"));
    // The key's macro expanded to "GET" and was lowercased; the last header name set it.
    assert_eq!(n("m_get").as_deref(), Some("z"));
    assert_eq!(n("m_GET"), None);
    // Later rules' captures reuse the hits' buffers: each value whole, none left over.
    assert_eq!(n("two_ho").as_deref(), Some("ho"));
    assert_eq!(n("two_us").as_deref(), Some("us"));
    assert_eq!(n("0").as_deref(), Some("z"));
    assert_eq!((n("1"), n("2")), (None, None));
    assert_eq!(blocked_by(&rs, "GET", "/", &[("Host", "a"), ("X-Bad", "1")], b""), Some(1));
    assert_eq!(blocked_by(&rs, "GET", "/", &[("Host", "a"), ("X-Good", "1")], b""), None);
}

/// The transaction replay (`replay`): a request like the last one passes the rules that had
/// no hits on the same data, and every change is still answered: a new header value (tested
/// alone), a header a later chain link reads, the query, a cookie counted into TX.
#[test]
fn replay_passes_repeated_data_and_answers_every_change() {
    let rs = rules(
        r#"SecRuleEngine On
SecRule REQUEST_HEADERS "@contains evil" "id:1,phase:1,deny,status:403,t:lowercase"
SecRule ARGS "@contains attack" "id:2,phase:2,deny,status:403"
SecRule ARGS_NAMES "@streq a" "id:3,phase:1,deny,status:403,chain"
    SecRule REQUEST_HEADERS:Referer "@contains bad" ""
SecRule REQUEST_COOKIES "@rx ^x{5}$" "id:4,phase:1,pass,nolog,setvar:tx.score=+5"
SecRule TX:score "@ge 5" "id:5,phase:2,deny,status:403"
SecRule REQUEST_HEADERS:Referer "@rx ^https://(\w+)/" "id:6,phase:1,pass,nolog,capture,setvar:tx.site=%{tx.1}"
SecRule TX:site "@streq worse" "id:7,phase:2,deny,status:403"
"#,
    );
    // (blocking rule, rules the replay passed)
    let go = |uri: &str, id: &str, referer: &str, cookie: &str| -> (Option<u64>, u64) {
        let mut tx = Transaction::new(rs.clone(), "t".into());
        tx.process_connection("127.0.0.1", 40000, "127.0.0.1", 8080);
        tx.process_uri(uri, "GET", "HTTP/1.1");
        for (k, v) in [("Host", "a"), ("X-Request-Id", id), ("Referer", referer), ("Cookie", cookie)] {
            tx.add_request_header(k.as_bytes(), v.as_bytes());
        }
        let i = tx.process_request_headers().or_else(|| tx.process_request_body());
        (i.and_then(|i| i.rule_id), tx.replay_passed())
    };
    assert_eq!(go("/?a=1", "r1", "https://ok/", "c=abc").0, None);
    let (verdict, passed) = go("/?a=1", "r2", "https://ok/", "c=abc");
    assert_eq!(verdict, None);
    // Rules 1 (only the new X-Request-Id tested), 2, 4, 5 and 7 (no hits); rules 3 and 6
    // (hits, only TX written) done again from what they did.
    assert_eq!(passed, 7, "the repeated request passes the rules it can");
    assert_eq!(go("/?a=1", "r2b", "https://worse/", "c=abc").0, Some(7), "a header value a rule with hits writes into TX");
    assert_eq!(go("/?a=1", "EviL", "https://ok/", "c=abc").0, Some(1), "a changed header value");
    assert_eq!(go("/?a=1", "r3", "https://bad/", "c=abc").0, Some(3), "a header a later link reads");
    assert_eq!(go("/?a=attack", "r4", "https://ok/", "c=abc").0, Some(2), "the query");
    assert_eq!(go("/?a=1", "r5", "https://ok/", "c=xxxxx").0, Some(5), "a cookie counted into TX");
    // The last request completed phase 1 (its trace has it), where rule 4 had hits.
    assert_eq!(go("/?a=1", "r6", "https://ok/", "c=abc").0, None);
    // A request that departs from the trace keeps no effects past that point: the next one
    // evaluates those rules again, and the one after passes as many as before.
    assert_eq!(go("/?a=1", "r7", "https://ok/", "c=abc").0, None);
    assert_eq!(go("/?a=1", "r8", "https://ok/", "c=abc"), (None, 7));
}

/// The replay keeps a trace per request target (method and path, the last
/// `replay::TRACES` of them): requests of a few kinds in turn each follow one of their own
/// kind, passing as many rules as when repeated back to back, and decide as without the
/// replay; a kind beyond those kept, or a changed value, is evaluated.
#[test]
fn requests_in_turn_each_follow_the_trace_of_their_target() {
    let rs = rules(
        r#"SecRuleEngine On
SecRule REQUEST_HEADERS "@contains evil" "id:1,phase:1,deny,status:403"
SecRule ARGS "@contains attack" "id:2,phase:2,deny,status:403"
SecRule REQUEST_FILENAME "@streq /admin" "id:3,phase:1,deny,status:403"
SecRule ARGS:n "@gt 10" "id:4,phase:1,pass,nolog,setvar:tx.big=1"
SecRule TX:big "@eq 1" "id:5,phase:2,pass,nolog,setvar:tx.noted=1"
SecRule REQUEST_METHOD "@streq DELETE" "id:6,phase:1,deny,status:405"
"#,
    );
    // (blocking rule, rules the replay passed)
    let go = |method: &str, uri: &str, id: &str, replay: bool| -> (Option<u64>, u64) {
        let mut tx = Transaction::new(rs.clone(), "t".into());
        if !replay {
            tx.without_replay();
        }
        tx.process_uri(uri, method, "HTTP/1.1");
        for (k, v) in [("Host", "a"), ("X-Request-Id", id)] {
            tx.add_request_header(k.as_bytes(), v.as_bytes());
        }
        let i = tx.process_request_headers().or_else(|| tx.process_request_body());
        (i.and_then(|i| i.rule_id), tx.replay_passed())
    };
    let kinds = [("GET", "/a?n=1"), ("GET", "/b?n=20"), ("POST", "/b?n=20"), ("GET", "/c/d?q=x")];
    assert_eq!(kinds.len(), super::replay::TRACES);
    // What each passes repeated back to back (a request after one that departed from its
    // trace passes fewer: the third is the steady state).
    let alone: Vec<u64> = kinds.iter().map(|(m, u)| {
        go(m, u, "r0", true);
        go(m, u, "r1", true);
        go(m, u, "r2", true).1
    }).collect();
    assert!(alone.iter().all(|&n| n >= 5), "{alone:?}");
    for round in 0..3 {
        for ((m, u), &want) in kinds.iter().zip(&alone) {
            assert_eq!(go(m, u, &format!("t{round}"), true), (None, want), "{m} {u} in turn, round {round}");
        }
    }
    // Attacks and other kinds among them decide as without the replay.
    let others = [
        ("GET", "/b?n=20&x=attack", "r"),
        ("GET", "/a?n=1", "evil"),
        ("GET", "/admin?n=1", "r"),
        ("DELETE", "/a?n=1", "r"),
        ("GET", "/a?n=11", "r"),
        ("GET", "/e", "r"),
        ("GET", "/f?x=attack", "r"),
        ("POST", "/b?n=20", "r"),
        ("GET", "/c/d?q=attack", "r"),
    ];
    let mixed: Vec<(&str, &str, &str)> = others.iter().copied().chain(kinds.iter().map(|&(m, u)| (m, u, "r"))).collect();
    for &(m, u, id) in mixed.iter().cycle().take(60) {
        assert_eq!(go(m, u, id, true).0, go(m, u, id, false).0, "{m} {u} {id}");
    }
}

/// A rule with hits in the trace is evaluated again where what it reads changed: when it does
/// what it did then (the same TX writes, its chain completing or not as then), the replay
/// goes on past it; when it does less (here passed by its group's prefilter, so its setvar is
/// missing), the transaction departs, and a later rule reading only that TX variable, which
/// had no hits in the trace, is evaluated and blocks.
#[test]
fn replay_goes_on_past_a_rule_doing_what_it_did_and_departs_where_it_does_less() {
    let rs = rules(
        r#"SecRuleEngine On
SecRule ARGS "@rx quux[0-9]" "id:10,phase:1,pass,nolog"
SecRule ARGS "@rx needle[0-9]" "id:11,phase:1,pass,nolog,setvar:tx.s=+1"
SecRule REMOTE_ADDR "@ipMatch 127.0.0.1" "id:12,phase:1,pass,nolog,setvar:tx.local=1,chain"
    SecRule REQUEST_LINE "@contains /admin" ""
SecRule REQUEST_HEADERS:X-Flag "@streq 1" "id:13,phase:1,deny,status:403"
SecRule &TX:s "@eq 0" "id:14,phase:1,deny,status:401"
"#,
    );
    // (blocking rule, rules the replay passed); eight arguments, all new in every request, so
    // the group's values have a union of their own scans (the quick test of rule 11).
    let go = |a: &str| -> (Option<u64>, u64) {
        let mut tx = Transaction::new(rs.clone(), "t".into());
        tx.process_connection("127.0.0.1", 40000, "127.0.0.1", 8080);
        let query: Vec<String> = (0..8).map(|k| format!("{k}={a}-{k}")).collect();
        tx.process_uri(&format!("/?{}", query.join("&")), "GET", "HTTP/1.1");
        tx.add_request_header(b"Host", b"a");
        let i = tx.process_request_headers();
        (i.and_then(|i| i.rule_id), tx.replay_passed())
    };
    assert_eq!(go("needle1"), (None, 0));
    // Rule 12's first link has hits and its chain reads the request line, which changed;
    // evaluated, it does what it did (its chain does not complete): rules 13 (its header
    // unchanged) and 14 (reading TX only), which had no hits, are passed.
    assert_eq!(go("needle2"), (None, 2));
    assert_eq!(go("needle3"), (None, 2));
    // Rule 11 (hits in the trace) cannot match "bar": tx.s is missing and rule 14 blocks.
    assert_eq!(go("bar").0, Some(14));
    assert_eq!(go("needle4").0, None);
}

/// A rule whose hits differ from the trace's where neither run has an effect (no TX
/// written, its chain not completing) leaves the trace's state: the replay goes on past it.
/// Where one of them has an effect, the transaction departs and the rules after it run.
#[test]
fn replay_goes_on_past_hits_that_leave_no_effect() {
    let rs = rules(
        r#"SecRuleEngine On
SecRule REMOTE_ADDR "@ipMatch 127.0.0.1" "id:12,phase:1,pass,nolog,chain"
    SecRule REQUEST_LINE "@contains /admin" "setvar:tx.local=1"
SecRule REQUEST_HEADERS:X-Flag "@streq 1" "id:13,phase:1,deny,status:403"
SecRule &TX:local "@eq 1" "id:14,phase:1,deny,status:401"
"#,
    );
    // (blocking rule, rules the replay passed)
    let go = |client: &str, path: &str| -> (Option<u64>, u64) {
        let mut tx = Transaction::new(rs.clone(), "t".into());
        tx.process_connection(client, 40000, "127.0.0.1", 8080);
        tx.process_uri(path, "GET", "HTTP/1.1");
        tx.add_request_header(b"Host", b"a");
        let i = tx.process_request_headers();
        (i.and_then(|i| i.rule_id), tx.replay_passed())
    };
    assert_eq!(go("10.0.0.1", "/a"), (None, 0));
    // Rule 12 has hits now and had none: its chain does not complete, nothing written.
    assert_eq!(go("127.0.0.1", "/a"), (None, 2));
    // And the reverse.
    assert_eq!(go("10.0.0.1", "/a"), (None, 2));
    assert_eq!(go("127.0.0.1", "/a"), (None, 2));
    // Its chain completes: tx.local is written, the transaction departs, rule 14 blocks.
    assert_eq!(go("127.0.0.1", "/admin").0, Some(14));
    // (Blocked, that request completed no phase: the trace is still the one before, where
    // rule 12 had hits and no effect.) No hits and no effect: the same state.
    assert_eq!(go("10.0.0.1", "/admin"), (None, 2));
}

/// The replay compares the response too: the rules of phases 3 and 4 that had no hits on
/// the same response are passed, and a change of the status, of a header a rule reads by
/// key, or of the body is answered (while other header values, such as a date, may change).
#[test]
fn replay_passes_a_repeated_response_and_answers_its_changes() {
    let rs = rules(
        r#"SecRuleEngine On
SecResponseBodyAccess On
SecResponseBodyMimeType text/html
SecRule RESPONSE_STATUS "@streq 500" "id:1,phase:3,deny,status:502"
SecRule RESPONSE_HEADERS:Content-Encoding "@streq gzip" "id:2,phase:3,deny,status:503"
SecRule RESPONSE_BODY "@contains secret" "id:3,phase:4,deny,status:504"
SecRule RESPONSE_HEADERS_NAMES "@streq x-leak" "id:4,phase:3,deny,status:505,t:lowercase"
"#,
    );
    // (blocking rule, rules the replay passed)
    let go = |status: u16, date: &str, encoding: &str, extra: bool, body: &str| -> (Option<u64>, u64) {
        let mut tx = Transaction::new(rs.clone(), "t".into());
        tx.process_uri("/", "GET", "HTTP/1.1");
        tx.add_request_header(b"Host", b"a");
        assert!(tx.process_request_headers().or_else(|| tx.process_request_body()).is_none());
        for (k, v) in [("Content-Type", "text/html"), ("Date", date), ("Content-Encoding", encoding)] {
            tx.add_response_header(k.as_bytes(), v.as_bytes());
        }
        if extra {
            tx.add_response_header(b"X-Leak", b"1");
        }
        let i = tx.process_response_headers(status, "HTTP/1.1").or_else(|| {
            let _ = tx.append_response_body(body.as_bytes());
            tx.process_response_body()
        });
        (i.and_then(|i| i.rule_id), tx.replay_passed())
    };
    // After an interruption (a trace without phases 3-4) one response makes the trace again,
    // the next passes rules 1, 2, 3, 4: same status, encoding, names and body; only the
    // date changed.
    let settle = |n: u32| {
        assert_eq!(go(200, &format!("d{n}"), "identity", false, "hello").0, None);
        assert_eq!(go(200, &format!("e{n}"), "identity", false, "hello"), (None, 4), "the repeated response passes its rules");
    };
    settle(1);
    assert_eq!(go(500, "f", "identity", false, "hello").0, Some(1), "the status");
    settle(2);
    assert_eq!(go(200, "f", "gzip", false, "hello").0, Some(2), "a header value read by key");
    settle(3);
    assert_eq!(go(200, "f", "identity", true, "hello").0, Some(4), "a header more");
    settle(4);
    assert_eq!(go(200, "f", "identity", false, "hello secret").0, Some(3), "the body");
}

/// A rule reading all request header values with `multiMatch` is tested on a changed value
/// alone, at every transformation step: the repeated request passes it, a value with a hit
/// before or only after a transformation is caught.
#[test]
fn replay_tests_a_changed_header_value_alone_under_multimatch() {
    let rs = rules(
        r#"SecRuleEngine On
SecRule REQUEST_URI|REQUEST_HEADERS "@rx /\.\./\w" "id:1,phase:2,deny,status:403,multiMatch,t:urlDecodeUni,t:lowercase"
"#,
    );
    // (The Host value has the rule's required literal without matching: its values cannot
    // pass it without evaluating, see `link::slot_cannot_match`.)
    // (blocking rule, rules the replay passed)
    let go = |id: &str| -> (Option<u64>, u64) {
        let mut tx = Transaction::new(rs.clone(), "t".into());
        tx.process_uri("/a", "GET", "HTTP/1.1");
        for (k, v) in [("Host", "h/../-"), ("X-Request-Id", id)] {
            tx.add_request_header(k.as_bytes(), v.as_bytes());
        }
        let i = tx.process_request_headers().or_else(|| tx.process_request_body());
        (i.and_then(|i| i.rule_id), tx.replay_passed())
    };
    assert_eq!(go("r1"), (None, 0));
    assert_eq!(go("r2"), (None, 1), "only the new value tested");
    assert_eq!(go("r3/../1").0, Some(1), "a hit before any transformation");
    assert_eq!(go("r4"), (None, 0));
    assert_eq!(go("r5"), (None, 1));
    assert_eq!(go("r6%2F..%2F1").0, Some(1), "a hit after a transformation only");
}

/// A phase that went as the trace's did (no rule evaluated, only a new header value) is not
/// walked again: the next request with a new value of the same header gets the trace's
/// effects (TX writes, a completed chain's ctl, seen by a later phase that is walked) and
/// its new value is tested, each time.
#[test]
fn a_phase_walked_as_the_traces_does_its_effects_and_tests_the_new_value() {
    let rs = rules(
        r#"SecRuleEngine On
SecRequestBodyAccess On
SecRule REQUEST_HEADERS "@contains evil" "id:1,phase:1,deny,status:403,t:lowercase"
SecRule REQUEST_METHOD "@streq POST" "id:2,phase:1,pass,nolog,setvar:tx.n=+1,chain"
    SecRule REQUEST_URI "@beginsWith /" "ctl:ruleRemoveById=4"
SecRule TX:n "@eq 1" "id:3,phase:1,pass,nolog,setvar:tx.seen=1"
SecRule ARGS "@contains x" "id:4,phase:2,deny,status:403"
SecRule TX:seen "!@eq 1" "id:5,phase:2,deny,status:403"
"#,
    );
    let go = |id: &str, body: &[u8]| -> Option<u64> {
        let mut tx = Transaction::new(rs.clone(), "t".into());
        tx.process_uri("/", "POST", "HTTP/1.1");
        for (k, v) in [("Host", "a"), FORM, ("X-Request-Id", id)] {
            tx.add_request_header(k.as_bytes(), v.as_bytes());
        }
        tx.process_request_headers()
            .or_else(|| {
                let _ = tx.append_request_body(body);
                tx.process_request_body()
            })
            .and_then(|i| i.rule_id)
    };
    // Rule 5 would block without rule 3's write; rule 4, which a new body makes walk phase
    // 2, without rule 2's ctl.
    for n in 0..6 {
        assert_eq!(go(&format!("r{n}"), b"a=y"), None, "request {n}");
    }
    assert_eq!(go("r6", b"a=x"), None, "rule 4 removed");
    assert_eq!(go("EVIL", b"a=y"), Some(1), "the new value is tested");
    for n in 7..10 {
        assert_eq!(go(&format!("r{n}"), b"a=y"), None, "request {n}");
    }
    assert_eq!(go("r10-evil", b"a=y"), Some(1), "the new value is tested");
    assert_eq!(go("r11", b"a=x"), None, "rule 4 removed");
}

/// The values prepared for a group of rules (same targets and transformations) belong to
/// one phase: phase 2 sees the body's arguments that phase 1 could not, and a ctl that
/// removes a target is seen by the next rule of the same phase.
#[test]
fn prepared_groups_do_not_outlive_their_phase_or_a_ctl() {
    let rs = rules(
        r#"SecRuleEngine On
SecRequestBodyAccess On
SecRule ARGS "@contains evil" "id:1,phase:1,pass,nolog,t:lowercase"
SecRule ARGS "@contains zzz" "id:2,phase:1,pass,nolog,t:lowercase"
SecRule ARGS "@contains evil" "id:3,phase:2,deny,status:403,t:lowercase"
SecRule ARGS "@contains worse" "id:4,phase:2,pass,nolog,t:lowercase,ctl:ruleRemoveTargetById=5;ARGS:b"
SecRule ARGS "@contains worse" "id:5,phase:2,deny,status:403,t:lowercase"
"#,
    );
    assert_eq!(blocked_by(&rs, "POST", "/?q=1", &[FORM], b"a=EVIL"), Some(3), "the body's arguments in phase 2");
    assert_eq!(blocked_by(&rs, "POST", "/?q=1", &[FORM], b"b=worse"), None, "the target removed by the ctl");
    assert_eq!(blocked_by(&rs, "POST", "/?q=1", &[FORM], b"c=worse"), Some(5));
}

/// A JSON body the last request had is not parsed again (its arguments and error are
/// copied): the same verdicts for a repeated body, and a different body is parsed.
#[test]
fn a_repeated_json_body_gives_the_same_arguments_and_errors() {
    let rs = rules(
        r#"Include @recommended-conf
SecRuleEngine On
SecRule ARGS:json.user.name "@streq evil" "id:1,phase:2,deny,status:403"
SecRule ARGS_NAMES "@streq json.a.b" "id:2,phase:2,deny,status:403"
"#,
    );
    let go = |body: &[u8]| run(&rs, "POST", "/?q=1", &[JSON], body).0.map(|i| (i.status, i.rule_id.unwrap_or(0)));
    for _ in 0..3 {
        assert_eq!(go(br#"{"user":{"name":"evil"}}"#), Some((403, 1)));
    }
    for _ in 0..3 {
        assert_eq!(go(br#"{"user":{"name":"good"}}"#), None);
    }
    for _ in 0..3 {
        assert_eq!(go(br#"{"a":{"b":1}}"#), Some((403, 2)));
    }
    for _ in 0..3 {
        assert_eq!(go(br#"{"user":"#), Some((400, 200002)), "the parse error again");
    }
}

/// Transactions in flight at once (a proxy's concurrent requests) leave their emptied parts
/// for the next ones, a bounded number of them, the requests past the first few without
/// large buffers; the verdicts of transactions that reuse them are unchanged.
#[test]
fn spares_of_many_transactions_in_flight_are_bounded_and_reused() {
    let rs = rules(
        r#"SecRuleEngine On
SecRequestBodyAccess On
SecRule ARGS "@contains evil" "id:1,phase:2,deny,status:403,t:lowercase"
"#,
    );
    let big = vec![b'a'; 20_000];
    let mut in_flight = Vec::new();
    for i in 0..SPARES_MAX + 20 {
        let mut tx = Transaction::new(rs.clone(), format!("t-{i}"));
        tx.process_uri("/?q=fine", "POST", "HTTP/1.1");
        tx.add_request_header(b"content-type", b"application/x-www-form-urlencoded");
        let _ = tx.append_request_body(&big);
        assert_eq!(tx.process_request_body(), None);
        in_flight.push(tx);
    }
    drop(in_flight);
    let requests = SPARE_REQUEST.with(|p| p.borrow().iter().map(|r| r.body.capacity()).collect::<Vec<_>>());
    assert_eq!(requests.len(), SPARES_MAX, "kept up to the bound");
    assert!(requests.iter().skip(SPARES_LARGE).all(|&c| c <= SPARE_BUFFER_MAX), "large buffers only in the first few: {requests:?}");
    assert_eq!(SPARE.with(|p| p.borrow().len()), SPARES_MAX);
    // Reused by as many transactions again, with the same verdicts.
    for i in 0..SPARES_MAX + 5 {
        let uri = if i % 2 == 0 { "/?q=EVIL" } else { "/?q=fine" };
        let (verdict, _) = run(&rs, "GET", uri, &[], b"");
        assert_eq!(verdict.map(|v| v.rule_id), (i % 2 == 0).then_some(Some(1)), "request {i}");
    }
}

/// A query string the last request had is not parsed again (its arguments and its invalid
/// escape are copied): the same verdicts for a repeated query, and a different one is parsed.
#[test]
fn a_repeated_query_gives_the_same_arguments_and_errors() {
    let rs = rules(
        r#"SecRuleEngine On
SecRule ARGS:q "@streq evil" "id:1,phase:1,deny,status:403"
SecRule URLENCODED_ERROR "@eq 1" "id:2,phase:1,deny,status:400"
SecRule ARGS_NAMES "@streq bad" "id:3,phase:1,deny,status:403"
SecRule &ARGS "@gt 2" "id:4,phase:1,deny,status:403"
"#,
    );
    let go = |uri: &str| run(&rs, "GET", uri, &[], b"").0.map(|i| (i.status, i.rule_id.unwrap_or(0)));
    for _ in 0..3 {
        assert_eq!(go("/?q=evil&x=1"), Some((403, 1)));
        assert_eq!(go("/?q=evil&x=1"), Some((403, 1)), "repeated");
        assert_eq!(go("/?q=fine&x=1"), None);
        assert_eq!(go("/?q=fine&x=1"), None, "repeated");
        assert_eq!(go("/?q=fine&x=%zz"), Some((400, 2)));
        assert_eq!(go("/?q=fine&x=%zz"), Some((400, 2)), "repeated: the invalid escape is kept");
        assert_eq!(go("/?q=fine&bad=1"), Some((403, 3)));
        assert_eq!(go("/?q=fine&bad=1"), Some((403, 3)), "repeated");
        assert_eq!(go("/?a=1&b=2&c=3"), Some((403, 4)));
        assert_eq!(go("/?a=1&b=2&c=3"), Some((403, 4)), "repeated: all the arguments");
        assert_eq!(go("/?a=1&b=2"), None);
    }
}

// ---------------------------------------------------------------------------
// The memory budget (see `budget`): what the transactions in flight on a thread hold.
// ---------------------------------------------------------------------------

fn with_budget(text: &str, bytes: usize) -> Arc<Ruleset> {
    let mut rs = Ruleset::compile("test", text).unwrap_or_else(|e| panic!("{e}"));
    rs.settings.memory_budget = bytes;
    Arc::new(rs)
}

/// A transaction of `rs` given the headers of a form POST and `body` in 64 KiB slices (as
/// Envoy gives them), held in flight; the last answer of `append_request_body`.
fn open_post(rs: &Arc<Ruleset>, body: &[u8]) -> (Transaction, BodyAppend) {
    let mut tx = Transaction::new(rs.clone(), "budget".into());
    tx.process_uri("/", "POST", "HTTP/1.1");
    tx.add_request_header(b"Content-Type", b"application/x-www-form-urlencoded");
    assert!(tx.process_request_headers().is_none());
    let mut last = BodyAppend::Continue;
    for chunk in body.chunks(64 * 1024) {
        last = tx.append_request_body(chunk);
        assert!(budget::held() <= rs.settings.memory_budget, "held {} over the budget", budget::held());
        if last != BodyAppend::Continue {
            break;
        }
    }
    (tx, last)
}

fn form_body(value: &[u8], len: usize) -> Vec<u8> {
    let mut b = b"q=".to_vec();
    while b.len() < len {
        b.extend_from_slice(value);
    }
    b.truncate(len);
    b
}

const BUDGET_RULES: &str = "SecRuleEngine On\nSecRequestBodyAccess On\nSecRule ARGS \"@contains attack\" \"id:1,phase:2,deny,status:403\"";

#[test]
fn bodies_in_flight_past_the_memory_budget_are_refused_with_413_and_the_budget_comes_back() {
    let base = budget::held();
    let rs = with_budget(BUDGET_RULES, 4 << 20);
    let body = form_body(b"benign", 512 << 10);
    // Bodies take three quarters of the budget, each form body twice its size (its bytes
    // and the room for its parse): three 512 KiB bodies fit in 3 MiB, the fourth does not.
    let mut open: Vec<Transaction> = (0..3).map(|_| {
        let (tx, last) = open_post(&rs, &body);
        assert_eq!(last, BodyAppend::Continue);
        tx
    }).collect();
    let (mut fourth, last) = open_post(&rs, &body);
    let BodyAppend::Interrupt(i) = last else { panic!("the fourth body was not refused: {last:?}") };
    assert_eq!((i.status, i.rule_id, i.phase), (413, None, 2));
    assert!(fourth.over_budget());
    let lines = fourth.take_log_lines();
    assert!(lines.len() == 1 && lines[0].contains("Access denied with code 413") && lines[0].contains("memory_budget_bytes"), "{lines:?}");
    drop(fourth);
    // One in flight ends: its share of the budget serves the next request.
    drop(open.pop());
    let (mut next, last) = open_post(&rs, &form_body(b"attack", 512 << 10));
    assert_eq!(last, BodyAppend::Continue);
    assert_eq!(next.process_request_body().map(|i| i.status), Some(403), "inspected as usual");
    for tx in &mut open {
        assert_eq!(tx.process_request_body(), None);
        assert!(!tx.over_budget());
    }
    drop(next);
    drop(open);
    assert_eq!(budget::held(), base, "every transaction gave back what it held");
}

#[test]
fn with_process_partial_a_body_past_the_memory_budget_is_inspected_as_far_as_it_fits() {
    let base = budget::held();
    let text = format!("{BUDGET_RULES}\nSecRequestBodyLimitAction ProcessPartial");
    let rs = with_budget(&text, 4 << 20);
    let (held, last) = open_post(&rs, &form_body(b"x", 1 << 20));
    assert_eq!(last, BodyAppend::Continue);
    let mut body = b"a=attack&".to_vec();
    body.extend_from_slice(&form_body(b"y", 2 << 20));
    let (mut tx, last) = open_post(&rs, &body);
    assert_eq!(last, BodyAppend::Full, "the body stops where the budget does");
    assert!(tx.req.body.len() >= 256 << 10 && tx.req.body.len() <= 512 << 10, "{}", tx.req.body.len());
    assert_eq!(tx.process_request_body().map(|i| (i.status, i.rule_id)), Some((403, Some(1))), "the part kept is inspected");
    assert!(tx.over_budget());
    assert!(tx.take_log_lines().iter().any(|l| l.contains("inspected only in part")));
    drop((held, tx));
    assert_eq!(budget::held(), base);
}

/// Eight rules with eight different chains on a 1 MiB encoded value: each chain's result is
/// another copy of about its size, more than a 4 MiB budget holds besides the body.
const CHAINS: &str = "SecRuleEngine On
SecRequestBodyAccess On
SecRequestBodyNoFilesLimit 13107200
SecRule ARGS \"@contains attack\" \"id:1,phase:2,deny,status:403,t:urlDecodeUni\"
SecRule ARGS \"@contains attack\" \"id:2,phase:2,deny,status:403,t:lowercase\"
SecRule ARGS \"@contains attack\" \"id:3,phase:2,deny,status:403,t:htmlEntityDecode\"
SecRule ARGS \"@contains attack\" \"id:4,phase:2,deny,status:403,t:urlDecodeUni,t:lowercase\"
SecRule ARGS \"@contains attack\" \"id:5,phase:2,deny,status:403,t:htmlEntityDecode,t:lowercase\"
SecRule ARGS \"@contains attack\" \"id:6,phase:2,deny,status:403,t:replaceComments\"
SecRule ARGS \"@contains attack\" \"id:7,phase:2,deny,status:403,t:removeWhitespace\"
SecRule ARGS \"@contains attack\" \"id:8,phase:2,deny,status:403,t:cssDecode\"
SecRule ARGS \"@contains zzz\" \"id:9,phase:2,deny,status:403\"";

#[test]
fn a_phase_whose_transformations_would_pass_the_memory_budget_stops_with_413() {
    let base = budget::held();
    let body = form_body(b"AbC%2541%26lt;/*x*/+\\x41 ", 1 << 20);
    let tight = with_budget(CHAINS, 4 << 20);
    let (mut tx, last) = open_post(&tight, &body);
    assert_eq!(last, BodyAppend::Continue, "the body itself fits");
    let i = tx.process_request_body();
    assert_eq!(i.map(|i| (i.status, i.rule_id, i.phase)), Some((413, None, 2)));
    assert!(tx.over_budget());
    assert!(budget::held() <= (4 << 20) + (1 << 20), "it stopped within one rule's results of the budget: {}", budget::held());
    assert!(budget::held() - base <= tx.held.bytes(), "after phase 2 only the bodies stay charged");
    drop(tx);
    assert_eq!(budget::held(), base);
    // With room for them, the same request is inspected to its end.
    let roomy = with_budget(CHAINS, 64 << 20);
    let (mut tx, _) = open_post(&roomy, &body);
    assert_eq!(tx.process_request_body(), None);
    assert!(!tx.over_budget());
    let mut attack = body.clone();
    attack.extend_from_slice(b"zzz");
    drop(tx);
    let (mut tx, _) = open_post(&roomy, &attack);
    assert_eq!(tx.process_request_body().map(|i| i.rule_id), Some(Some(9)));
}

#[test]
fn json_names_past_the_memory_budget_are_refused_before_they_are_made() {
    let base = budget::held();
    let rs = with_budget("SecRuleEngine On\nSecRequestBodyAccess On\nSecArgumentsLimit 100000\nSecRule ARGS_NAMES \"@contains zzz\" \"id:1,phase:2,deny\"", 8 << 20);
    // A 64 KiB key over 2,000 array elements: 128 MiB of argument names from 68 KiB.
    let body = format!("{{\"{}\":[{}1]}}", "k".repeat(64 * 1024), "1,".repeat(1999));
    let mut tx = Transaction::new(rs.clone(), "json".into());
    tx.process_uri("/", "POST", "HTTP/1.1");
    tx.add_request_header(b"Content-Type", b"application/json");
    assert!(tx.process_request_headers().is_none());
    assert_eq!(tx.append_request_body(body.as_bytes()), BodyAppend::Continue);
    assert_eq!(tx.process_request_body().map(|i| i.status), Some(413));
    assert!(tx.req.retained_bytes() <= 16 << 20, "the parse stopped at the budget: {}", tx.req.retained_bytes());
    drop(tx);
    assert_eq!(budget::held(), base);
}

#[test]
fn a_response_body_past_the_memory_budget_is_inspected_in_part() {
    let base = budget::held();
    let rs = with_budget("SecRuleEngine On\nSecResponseBodyAccess On\nSecResponseBodyLimit 10000000\nSecRule RESPONSE_BODY \"@contains secret\" \"id:1,phase:4,deny,status:403\"", 4 << 20);
    let mut tx = Transaction::new(rs.clone(), "resp".into());
    tx.process_uri("/", "GET", "HTTP/1.1");
    assert_eq!(tx.process_request_body(), None);
    tx.add_response_header(b"Content-Type", b"text/html");
    assert_eq!(tx.process_response_headers(200, "HTTP/1.1"), None);
    let mut page = b"secret ".to_vec();
    page.extend_from_slice(&vec![b'p'; 3 << 20]);
    let mut last = BodyAppend::Continue;
    for chunk in page.chunks(64 * 1024) {
        last = tx.append_response_body(chunk);
        if last != BodyAppend::Continue {
            break;
        }
    }
    assert_eq!(last, BodyAppend::Full);
    assert!(budget::held() <= 3 << 20, "the body stops at the bodies' three quarters of the budget");
    assert_eq!(tx.process_response_body().map(|i| i.status), Some(403), "the part kept is inspected");
    assert!(tx.over_budget());
    drop(tx);
    assert_eq!(budget::held(), base);
}

/// As libmodsecurity 3.0.15 (checked in process): `ctl:ruleRemoveTargetById=ID;XML:/*` removes
/// the rule's `XML:/*` target, while `XML` alone or another XPath does not (full names compared);
/// the Nextcloud plugin's exclusions rely on it.
#[test]
fn ctl_removes_an_xml_target_by_its_full_name() {
    let rs = rules(r#"SecRuleEngine On
SecRequestBodyAccess On
SecRule REQUEST_HEADERS:Content-Type "text/xml" "id:100,phase:1,pass,nolog,ctl:requestBodyProcessor=XML"
SecRule REQUEST_URI "@beginsWith /a" "id:1,phase:1,pass,nolog,ctl:ruleRemoveTargetById=2;XML:/*"
SecRule REQUEST_URI "@beginsWith /b" "id:3,phase:1,pass,nolog,ctl:ruleRemoveTargetById=2;XML"
SecRule REQUEST_URI "@beginsWith /e" "id:4,phase:1,pass,nolog,ctl:ruleRemoveTargetById=2;XML:/r"
SecRule XML:/* "@contains evil" "id:2,phase:2,deny,status:403,log""#);
    let xml = ("Content-Type", "text/xml");
    assert_eq!(blocked_by(&rs, "POST", "/a", &[xml], b"<r>evil</r>"), None);
    assert_eq!(blocked_by(&rs, "POST", "/b", &[xml], b"<r>evil</r>"), Some(2), "XML alone is another name");
    assert_eq!(blocked_by(&rs, "POST", "/e", &[xml], b"<r>evil</r>"), Some(2), "another XPath");
    assert_eq!(blocked_by(&rs, "POST", "/c", &[xml], b"<r>evil</r>"), Some(2));
}

/// As libmodsecurity 3.0.15: REQUEST_BODY_LENGTH is always there, empty until a non-empty body
/// was processed (so `@eq 0` holds in phase 1, and in phase 2 without a body).
#[test]
fn request_body_length_is_empty_until_a_body_is_processed() {
    let rs = rules(r#"SecRuleEngine On
SecRequestBodyAccess On
SecRule REQUEST_BODY_LENGTH "@rx ^$" "id:1,phase:1,pass,setvar:tx.p1_empty=1"
SecRule REQUEST_BODY_LENGTH "@eq 0" "id:2,phase:1,pass,setvar:tx.p1_zero=1"
SecRule &REQUEST_BODY_LENGTH "@eq 1" "id:3,phase:2,pass,setvar:tx.p2_one=1"
SecRule REQUEST_BODY_LENGTH "@rx ^(\d*)$" "id:4,phase:2,pass,capture,setvar:tx.p2_len=x%{TX.1}"
SecRule TX:p1_empty "@eq 1" "id:5,phase:2,chain,deny,status:403"
SecRule TX:p1_zero "@eq 1" "chain"
SecRule TX:p2_one "@eq 1" "chain"
SecRule TX:p2_len "@streq x""#);
    assert_eq!(blocked_by(&rs, "GET", "/", &[], b""), Some(5), "no body: empty in both phases");
    assert_eq!(blocked_by(&rs, "POST", "/", &[FORM], b"a=1"), None, "a body: its length in phase 2");
}

/// `%{rule.msg}` expands the rule's `msg`, which may read request data: a
/// rule whose operator reads `%{rule.msg}` decides on the request's headers, so a request
/// after one with another header value decides as it does alone (the replay must not pass it).
#[test]
fn a_rule_reading_its_own_msg_reads_the_request_data_the_msg_expands() {
    let rs = rules(
        r#"SecRuleEngine On
SecRule REQUEST_METHOD "@streq %{rule.msg}" "id:1,phase:1,deny,status:403,msg:'%{REQUEST_HEADERS.x-foo}'"
"#,
    );
    let go = |foo: &str| -> Option<u16> {
        let (i, _) = run(&rs, "GET", "/x", &[("Host", "a"), ("X-Foo", foo)], b"");
        i.map(|i| i.status)
    };
    // Alone (first on a fresh trace) and after the benign request, in turn.
    assert_eq!(go("GET"), Some(403));
    for _ in 0..3 {
        assert_eq!(go("benign"), None);
        assert_eq!(go("GET"), Some(403), "after a request with X-Foo: benign");
    }
}

/// The reference engine evaluates every rule it reaches: the replay passes none, however often
/// the same request comes, and it decides as the fast engine does.
#[test]
fn the_reference_passes_no_rule_and_decides_as_the_fast_engine() {
    let text = "SecRuleEngine On\nSecRule REQUEST_HEADERS \"@contains evil\" \"id:1,phase:1,deny,status:403\"\nSecRule ARGS:n \"@gt 10\" \"id:2,phase:1,pass,nolog,setvar:tx.big=1\"\nSecRule TX:big \"@eq 1\" \"id:3,phase:1,deny,status:406\"";
    let fast = rules(text);
    let mut r = Ruleset::compile("test", text).unwrap_or_else(|e| panic!("{e}"));
    r.settings.speed = crate::compile::Speed::Reference;
    let reference = Arc::new(r);
    let go = |rs: &Arc<Ruleset>, uri: &str, ua: &str| -> (Option<u16>, u64) {
        let mut tx = Transaction::new(rs.clone(), "t".into());
        tx.process_uri(uri, "GET", "HTTP/1.1");
        tx.add_request_header(b"User-Agent", ua.as_bytes());
        let i = tx.process_request_headers();
        (i.map(|i| i.status), tx.replay_passed())
    };
    let mut fast_passed = 0;
    for _ in 0..4 {
        for (uri, ua) in [("/a?n=1", "ok"), ("/a?n=1", "evil"), ("/a?n=11", "ok"), ("/a?n=1", "ok")] {
            let (want, passed) = go(&reference, uri, ua);
            assert_eq!(passed, 0, "the reference passed a rule");
            let (got, n) = go(&fast, uri, ua);
            fast_passed += n;
            assert_eq!(got, want, "{uri} {ua}");
        }
    }
    assert!(fast_passed > 0, "the fast engine's replay passed rules (else the comparison shows nothing)");
}

/// `RULE:id`, `RULE:msg` (its macros expanded) read the rule being evaluated, as in
/// libmodsecurity 3.0.15 (which matches all of these; they once read nothing unless a
/// runtime removal concerned the rule).
#[test]
fn rule_variables_read_the_rule_itself() {
    let rs = rules(
        r#"SecRuleEngine On
SecRule RULE:id "@streq 1" "id:1,phase:1,pass,nolog,setvar:tx.a=1"
SecRule RULE:msg "@streq evil" "id:2,phase:1,deny,status:403,msg:'%{REQUEST_HEADERS.x-foo}'"
"#,
    );
    assert_eq!(blocked_by(&rs, "GET", "/x", &[("X-Foo", "evil")], b""), Some(2));
    assert_eq!(blocked_by(&rs, "GET", "/x", &[("X-Foo", "benign")], b""), None);
    let id = rules("SecRuleEngine On\nSecRule RULE:id \"@streq 7\" \"id:7,phase:1,deny,status:403\"");
    assert_eq!(blocked_by(&id, "GET", "/x", &[], b""), Some(7));
}
