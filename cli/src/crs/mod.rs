//! The OWASP CRS regression runner.
//!
//! [`ftw`] reads the go-ftw YAML tests and turns each stage into the raw bytes
//! go-ftw would send; [`check`] decides pass/fail from the rule ids logged for
//! the stage; [`native`] runs stages in-process (fast, for development);
//! the Envoy mode sends them through a real Envoy with wafer.

pub mod check;
pub mod ftw;
pub mod native;

/// The SecLang the official CRS test setup uses (see CRS tests/TESTS.md):
/// DetectionOnly, blocking paranoia level 4, the X-CRS-Test marker rule,
/// response bodies inspected.
pub const TEST_SETUP: &[&str] = &[
    "Include @recommended-conf",
    "SecRuleEngine DetectionOnly",
    "SecResponseBodyAccess On",
    "SecResponseBodyMimeType text/plain text/html text/xml application/json",
    "SecDefaultAction \"phase:3,log,auditlog,pass\"",
    "SecDefaultAction \"phase:4,log,auditlog,pass\"",
    "SecDefaultAction \"phase:5,log,auditlog,pass\"",
    "SecAction \"id:900005,phase:1,nolog,pass,ctl:ruleEngine=DetectionOnly,ctl:ruleRemoveById=910000,setvar:tx.blocking_paranoia_level=4,setvar:tx.crs_validate_utf8_encoding=1,setvar:tx.arg_name_length=100,setvar:tx.arg_length=400,setvar:tx.total_arg_length=64000,setvar:tx.max_num_args=255,setvar:tx.max_file_size=64100,setvar:tx.combined_file_sizes=65535\"",
    "SecRule REQUEST_HEADERS:X-CRS-Test \"@rx ^.*$\" \"id:999999,phase:1,pass,t:none,log,msg:'X-CRS-Test %{MATCHED_VAR}',ctl:ruleRemoveById=1-999999\"",
    "Include @crs-setup-conf",
    "Include @owasp_crs/*.conf",
];

/// The plugin configuration JSON for [`TEST_SETUP`].
pub fn test_setup_json() -> String {
    serde_json::json!({"directives_map": {"crs-test": TEST_SETUP}, "default_directives": "crs-test"}).to_string()
}
