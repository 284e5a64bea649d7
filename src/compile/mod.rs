//! Compiler: SecLang directives -> an immutable [`Ruleset`].
//!
//! The ruleset is built once per VM (in `on_configure`) and shared by every
//! transaction (`Arc<Ruleset>`, `Send + Sync`). Everything that can be decided
//! before a request arrives is decided here: operators are compiled, default
//! actions merged, `block` resolved, `skipAfter` markers turned into indexes.

pub mod inputs;
pub use crate::operators::rx_literals as literals;
pub mod prefilter;
pub mod quick;

use std::sync::Arc;

use crate::actions::{Ctl, Disruptive, RuleActions, SetVar};
use crate::embedded;
use crate::error::Error;
use crate::operators::Operator;
use crate::seclang::{self, parse_actions, parse_operator, parse_variables, MacroPart, Selector};
use crate::transforms::Transform;
use crate::vars::{KeySel, Target, Var};

pub use crate::actions::EngineMode;

/// `SecRequestBodyLimitAction` / `SecResponseBodyLimitAction`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitAction {
    Reject,
    ProcessPartial,
}

/// Engine settings set by directives.
#[derive(Debug, Clone)]
pub struct Settings {
    pub engine: EngineMode,
    pub request_body_access: bool,
    pub request_body_limit: usize,
    pub request_body_no_files_limit: usize,
    pub request_body_limit_action: LimitAction,
    pub request_body_json_depth_limit: usize,
    pub arguments_limit: usize,
    pub response_body_access: bool,
    pub response_body_limit: usize,
    pub response_body_limit_action: LimitAction,
    pub response_body_mime_types: Vec<String>,
    pub component_signatures: Vec<String>,
    /// What the transactions in flight on one thread may hold (see `tx::budget`): the
    /// plugin configuration's `memory_budget_bytes`.
    pub memory_budget: usize,
    /// Whether transactions use what earlier transactions left (see [`Speed`]): the plugin
    /// configuration's `speed`.
    pub speed: Speed,
}

/// How a rule set's transactions run: the same verdicts and matched rules either way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Speed {
    /// With every mechanism that reuses what earlier transactions on the thread left: the
    /// replay of the last request's trace, the value memo kept across transactions, spare
    /// buffers, per-rule quick records and the pre-applied phase-1 prefix.
    #[default]
    Fast,
    /// The plain SecLang loop: every rule a phase reaches is evaluated, nothing is kept from
    /// one transaction to the next. For tests that compare it with [`Speed::Fast`].
    Reference,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            engine: EngineMode::Off,
            request_body_access: false,
            request_body_limit: 13_107_200,
            request_body_no_files_limit: 1_048_576,
            request_body_limit_action: LimitAction::Reject,
            request_body_json_depth_limit: 512,
            arguments_limit: 1000,
            response_body_access: false,
            response_body_limit: 524_288,
            response_body_limit_action: LimitAction::ProcessPartial,
            response_body_mime_types: vec!["text/plain".into(), "text/html".into()],
            component_signatures: Vec::new(),
            memory_budget: DEFAULT_MEMORY_BUDGET,
            speed: Speed::Fast,
        }
    }
}

/// The memory budget when the configuration sets none (`tx::budget`): 64 MiB per VM (worker
/// thread). A VM's linear memory then peaks at about twice that under the worst requests
/// (what one rule makes before the phase stops, transient copies, the allocator's
/// fragmentation), and Envoy holds its own copy of the bodies held: a worker grows by under
/// 200 MiB whatever its requests (docs/limits.md has the measurements).
pub const DEFAULT_MEMORY_BUDGET: usize = 64 << 20;

/// One rule (or one link of a chain).
#[derive(Debug)]
pub struct Rule {
    /// 0 for chain links after the head.
    pub id: u64,
    pub phase: u8,
    pub file: Arc<str>,
    pub line: usize,
    pub targets: Vec<Target>,
    pub operator: Operator,
    pub negated: bool,
    /// `@rx`, `@pm`... as written, and its parameter, for logs.
    pub op_name: String,
    pub op_param: String,
    pub transforms: Vec<Transform>,
    pub multi_match: bool,
    pub capture: bool,
    /// Resolved disruptive action (head: never `Block`; links: `Pass`).
    pub disruptive: Disruptive,
    pub status: u16,
    pub log: bool,
    pub auditlog: bool,
    pub msg: Option<Vec<MacroPart>>,
    pub logdata: Option<Vec<MacroPart>>,
    pub tags: Vec<String>,
    pub severity: Option<u8>,
    pub ver: Option<String>,
    pub rev: Option<String>,
    pub maturity: Option<String>,
    pub accuracy: Option<String>,
    pub setvars: Vec<SetVar>,
    pub ctls: Vec<Ctl>,
    /// Index in the phase list to continue at (after the marker) on a match.
    pub skip_after: Option<String>,
    pub skip: u32,
    pub chain: Option<Box<Rule>>,
    /// For `@rx`: strings one of which every match contains (see prefilter).
    pub prefilter: Option<prefilter::Requirement>,
    /// The interned id of `transforms` (equal chains share an id, so their
    /// results are memoized once per value).
    pub chain_id: u32,
    /// The union of the transformations' trigger bytes (None: some step may
    /// change any value): a value with none of them passes the chain unchanged.
    pub chain_trigger: Option<[u64; 4]>,
    /// Each step's trigger bytes (None: it may change any value).
    pub step_triggers: Vec<Option<[u64; 4]>>,
    /// `chain_trigger` without the `t:lowercase` steps, and whether the chain has one (see
    /// `tx::link::slot_union`: lowercasing changes no literal the prefilter finds).
    pub cased_trigger: (Option<[u64; 4]>, bool),
    /// When every target reads request/response data that is fixed during a
    /// phase: the interned id of the target list, so rules with the same
    /// targets and chain share one prepared list of values per phase.
    pub target_sig: Option<u32>,
    /// Per target, an id for its (variable, selector, exclusions) when `target_sig` is set:
    /// rules whose lists share a target share its collected values.
    pub target_sigs: Vec<u32>,
    /// When every target is of the request line, cookies or body ([`crate::vars::Var::source`]):
    /// the widest of their sources (`LineAndBody` when any is), which the link's values are a
    /// function of; `None` otherwise.
    pub sources: Option<crate::vars::Source>,
    /// `tags` by their ids in [`Ruleset::tag_id`] (runtime removals by tag compare ids).
    pub tag_ids: Vec<u32>,
    /// When `target_sig` is set: a dense index of (target list, chain, multiMatch), the slot
    /// of the transaction's prepared values for this link (see `tx::cache::Cache::slots`).
    pub group_slot: Option<u32>,
    /// Chain heads: the rule's number, dense over all phases in order (see [`quick::Index`]).
    pub index: u32,
    /// For a link with shared values (`group_slot`) whose operator is a function of the value
    /// alone (no macro): the number of its operator (equal operators share one), under which a
    /// value remembers across transactions that the operator was false on it (see
    /// `tx::cache::Memo`).
    pub memo_bit: Option<u32>,
}

/// What phase 1's request-independent prefix leaves in TX, computed once per rule set.
#[derive(Debug, Default)]
pub(crate) struct Init {
    /// The prefix's rules before this entry are applied by `tx`; those after it (a rule that
    /// would deny or log stops the prefix) run as usual.
    pub upto: usize,
    pub tx: TxVars,
    /// (entry, TX before it) for each rule of the prefix that may interrupt (deny, allow): when
    /// it does, the `Pre` rules after it must not have run.
    pub before: Vec<(usize, TxVars)>,
}

/// TX variables (name, value).
pub(crate) type TxVars = Vec<(String, Vec<u8>)>;

/// An entry of a phase list.
#[derive(Debug)]
pub enum Entry {
    /// Boxed: a rule is ~2 KB, and the lists are built by moving rules from the compiler's
    /// list (a pointer each; inline, both lists' copies of every rule lived at once at the
    /// end of a compile, which set each VM's memory size).
    Rule(Box<Rule>),
    Marker(String),
}

/// The compiled rule set: settings and per-phase rule lists.
#[derive(Debug)]
pub struct Ruleset {
    pub settings: Settings,
    /// Index 0 = phase 1 ... index 4 = phase 5.
    pub phases: [Vec<Entry>; 5],
    /// Non-fatal remarks made while loading (e.g. `@rbl` can't reach the network).
    pub warnings: Vec<String>,
    /// For `skipAfter`: (phase index, entry index of the rule) -> entry index to jump to,
    /// sorted by (phase index, entry index).
    skip_targets: Vec<((usize, usize), usize)>,
    /// The automaton of all `@rx` required literals.
    pub prefilter: prefilter::Prefilter,
    /// Some rule has `initcol` (the host then gives transactions a collection store).
    persistent: bool,
    /// What the rule text mentions at all (see [`Mentions`]): data no rule can read is not
    /// parsed per request.
    pub mentions: Mentions,
    /// How many `Rule::group_slot`s there are.
    pub group_slots: usize,
    /// How many `Rule::memo_bit`s there are.
    pub memo_bits: usize,
    /// Per group slot, the words of memo bits (first, last) its rules' operators have.
    pub slot_words: Vec<(u32, u32)>,
    /// By target id (`Rule::target_sigs`): what its list is a function of ([`Var::source`]).
    pub target_sources: Vec<crate::vars::Source>,
    /// Distinct for every rule set this process builds (the cross-transaction memo of one
    /// rule set is never read with another's rules).
    pub uid: u64,
    /// Phase 1's request-independent prefix (see [`quick::Quick::Pre`]), computed by the
    /// first transaction that runs phase 1.
    pub(crate) init: std::sync::OnceLock<Init>,
    /// The keys of the SipHash that the memo hashes request values with (see
    /// [`Ruleset::set_hash_keys`]).
    pub(crate) hash_keys: std::sync::OnceLock<(u64, u64)>,
    /// Every rule tag, numbered (see `Rule::tag_ids`).
    tags: std::collections::HashMap<String, u32>,
    /// Per phase list, what can be decided about each rule without reading it; the rules'
    /// numbers by id and tag (see [`quick`]).
    pub quick: quick::Index,
}

/// Request data a rule set may read, decided conservatively from its text: a rule set whose
/// text never says `ARGS` (nor `URLENCODED_ERROR`) cannot read the query arguments, one that
/// never says `COOKIE` cannot read the parsed cookies. Anything mentioning them, in a target,
/// a macro, a `ctl`, a comment, parses them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Mentions {
    pub args: bool,
    pub cookies: bool,
    /// `REMOTE_*`, `SERVER_ADDR`, `SERVER_PORT`: the host need not look up the addresses.
    pub connection: bool,
    /// `SERVER_ADDR`, `SERVER_PORT` (within `connection`): the host need not look up the
    /// server address (the CRS reads only `REMOTE_ADDR`).
    pub server: bool,
    /// `REQUEST_PROTOCOL`, `REQUEST_LINE`, `RESPONSE_PROTOCOL`, `STATUS_LINE`, `FULL_REQUEST*`:
    /// the host need not look up the protocol.
    pub protocol: bool,
}

impl Mentions {
    fn of(text: &str) -> Mentions {
        // One case-insensitive scan for all the words (a scan per word was 8% of compiling the CRS).
        const WORDS: [&str; 10] = [
            "ARGS", "URLENCODED_ERROR", "COOKIE", "REMOTE_", "SERVER_ADDR", "SERVER_PORT", "PROTOCOL", "REQUEST_LINE", "STATUS_LINE", "FULL_REQUEST",
        ];
        let mut seen = [false; WORDS.len()];
        match aho_corasick::AhoCorasick::builder().ascii_case_insensitive(true).build(WORDS) {
            Ok(ac) => {
                for m in ac.find_overlapping_iter(text) {
                    if let Some(s) = seen.get_mut(m.pattern().as_usize()) {
                        *s = true;
                    }
                }
            }
            Err(_) => seen = [true; WORDS.len()], // cannot happen; mentioning everything is safe
        }
        let [args, urlencoded_error, cookie, remote, server_addr, server_port, protocol, request_line, status_line, full_request] = seen;
        Mentions {
            args: args || urlencoded_error,
            cookies: cookie,
            connection: remote || server_addr || server_port,
            server: server_addr || server_port,
            protocol: protocol || request_line || status_line || full_request,
        }
    }
}

const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Ruleset>();
};

impl Ruleset {
    /// Sets the keys request values are hashed with in the memo (keyed SipHash-1-3, so an
    /// attacker who cannot read them cannot choose values that collide). The engine draws no
    /// randomness: a host gives random keys before the first transaction; the first call wins.
    /// Without it the keys are fixed, which suits tests and the command line.
    pub fn set_hash_keys(&self, k0: u64, k1: u64) {
        let _ = self.hash_keys.set((k0, k1));
    }

    /// The memo's hash keys (see [`Ruleset::set_hash_keys`]).
    pub(crate) fn hash_keys(&self) -> (u64, u64) {
        self.hash_keys.get().copied().unwrap_or((0x7761_6665_7230_6b30, 0x7761_6665_7230_6b31))
    }

    /// The id of a tag some rule has; None: no rule has it.
    pub fn tag_id(&self, tag: &str) -> Option<u32> {
        self.tags.get(tag).copied()
    }

    /// Compiles SecLang text. `origin` names it in errors (`directives_map[default]`).
    pub fn compile(origin: &str, text: &str) -> Result<Ruleset, Error> {
        let mut c = Compiler::default();
        c.load(origin, text, 0)?;
        c.finish()
    }

    /// Whether a rule uses `initcol` (persistent collections).
    pub fn uses_persistent_collections(&self) -> bool {
        self.persistent
    }

    /// Whether a new transaction is to be given the request body
    /// ([`crate::Transaction::request_body_access`] before any rule ran).
    pub fn reads_request_body(&self) -> bool {
        self.settings.request_body_access && self.settings.engine != EngineMode::Off
    }

    /// Number of rules (chain heads) in all phases.
    pub fn rule_count(&self) -> usize {
        self.quick.rules
    }

    /// How many rules (chain heads) come from embedded files whose name starts with `prefix`
    /// (`@crs-plugins/wordpress-rule-exclusions-`), for the start-up log.
    pub fn rules_from(&self, prefix: &str) -> usize {
        self.phases.iter().flatten().filter(|e| matches!(e, Entry::Rule(r) if r.file.starts_with(prefix))).count()
    }

    /// Builds every `@rx` automaton now (they are otherwise built on first
    /// use) and reports the first that cannot be built. For tools and tests.
    pub fn build_all_regexes(&self) -> Result<usize, String> {
        let mut n = 0;
        for e in self.phases.iter().flatten() {
            let Entry::Rule(r) = e else { continue };
            let mut link: Option<&Rule> = Some(r);
            while let Some(l) = link {
                let built = match &l.operator {
                    Operator::Rx(rx) => Some(rx.build_now()),
                    Operator::Verify(v) => Some(v.build_now()),
                    _ => None,
                };
                if let Some(b) = built {
                    b.map_err(|m| format!("rule {} ({}:{}): {m}", r.id, r.file, r.line))?;
                    n += 1;
                }
                link = l.chain.as_deref();
            }
        }
        Ok(n)
    }

    /// Whether phase `p` (1-5) has any rule: a host can skip feeding data that
    /// no rule reads (e.g. response headers when phases 3 and 4 are empty).
    pub fn has_rules_in_phase(&self, p: u8) -> bool {
        usize::from(p)
            .checked_sub(1)
            .and_then(|i| self.phases.get(i))
            .is_some_and(|list| list.iter().any(|e| matches!(e, Entry::Rule(_))))
    }

    /// Where a rule at (phase, index) continues after a `skipAfter` match.
    pub fn skip_target(&self, phase: usize, index: usize) -> Option<usize> {
        // Built in (phase, index) order: a binary search (a linear one was ~5% of a CRS GET).
        let i = self.skip_targets.binary_search_by_key(&(phase, index), |(k, _)| *k).ok()?;
        self.skip_targets.get(i).map(|(_, v)| *v)
    }
}

/// Defaults of one phase (`SecDefaultAction`).
#[derive(Debug, Clone)]
struct Defaults {
    disruptive: Disruptive,
    status: Option<u16>,
    log: bool,
    auditlog: bool,
    transforms: Vec<Transform>,
    tags: Vec<String>,
    severity: Option<u8>,
}

impl Default for Defaults {
    fn default() -> Defaults {
        Defaults { disruptive: Disruptive::Pass, status: None, log: true, auditlog: true, transforms: Vec::new(), tags: Vec::new(), severity: None }
    }
}

/// An item in load order, before phases are split.
#[derive(Debug)]
enum Item {
    Rule(Box<Rule>),
    Marker(String),
}

#[derive(Default)]
struct Compiler {
    settings: Settings,
    defaults: [Defaults; 5],
    items: Vec<Item>,
    /// A chain in progress: head first, then links.
    pending_chain: Vec<Rule>,
    warnings: Vec<String>,
    removals: Vec<Removal>,
    pf: prefilter::Builder,
    /// (text address, offset, line) of the last line lookup: rules come in file order, so
    /// each lookup counts only the newlines since the previous one.
    line_memo: (usize, usize, usize),
    mentions: Mentions,
    /// `SecUnicodeMapFile ... 20127` seen: every `t:urlDecodeUni` uses the best-fit map
    /// (rule-set wide, whatever the order, as in libmodsecurity).
    unicode_map: bool,
}

enum Removal {
    Ids(Vec<(u64, u64)>),
    Tag(String),
    Msg(String),
}

const MAX_INCLUDE_DEPTH: usize = 8;

fn parse_size(v: &str) -> Result<usize, String> {
    v.trim().parse::<usize>().map_err(|_| format!("expected a number of bytes, got \"{v}\""))
}

fn on_off(v: &str) -> Result<bool, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("expected On or Off, got \"{v}\"")),
    }
}

/// Directives accepted and ignored (logging/storage settings that have no
/// meaning inside a proxy-wasm filter).
const IGNORED_DIRECTIVES: &[&str] = &[
    "secauditengine", "secauditlog", "secauditlog2", "secauditlogparts", "secauditlogrelevantstatus", "secauditlogstorage_dir",
    "secauditlogstoragedir", "secauditlogtype", "secauditlogformat", "secauditlogdirmode", "secauditlogfilemode", "secdebuglog",
    "secdebugloglevel", "sectmpdir", "secdatadir", "secuploaddir", "secuploadkeepfiles", "secuploadfilemode", "secuploadfilelimit",
    "seccollectiontimeout", "secargumentseparator", "seccookieformat", "secstatusengine", "secpcrematchlimit",
    "secpcrematchlimitrecursion", "secrequestbodyinmemorylimit", "sectmpsaveuploadedfiles", "secconnengine", "sechttpblkey",
    "secremoterules", "secremoterulesfailaction", "secgeolookupdb", "secgsblookupdb", "secxmlexternalentity", "secserversignature",
    "secwebappid", "secsensorid", "seccachetransformations", "secresponsebodyinmemorylimit", "secinterceptonerror", "secunicodecodepage",
    "secrulescript", "secresponsebodylimitaction_", "secrequestbodynofileslimit_",
];

impl Compiler {
    fn load(&mut self, origin: &str, text: &str, depth: usize) -> Result<(), Error> {
        let file: Arc<str> = Arc::from(origin);
        let m = Mentions::of(text);
        self.mentions.args |= m.args;
        self.mentions.cookies |= m.cookies;
        self.mentions.connection |= m.connection;
        self.mentions.server |= m.server;
        self.mentions.protocol |= m.protocol;
        for d in seclang::lex(origin, text)? {
            let at = |offset: usize, msg: String| Error::at(origin, text, offset, msg);
            let arg = |i: usize| d.args.get(i).map(|a| a.text.as_str()).unwrap_or("");
            let need_args = |n: usize| -> Result<(), Error> {
                if d.args.len() < n {
                    Err(at(d.offset, format!("{} expects {} argument(s), got {}", d.name, n, d.args.len())))
                } else {
                    Ok(())
                }
            };
            let arg_at = |i: usize| d.args.get(i).map(|a| a.offset).unwrap_or(d.offset);
            let name = d.name.to_ascii_lowercase();
            if !self.pending_chain.is_empty() && name != "secrule" {
                return Err(at(d.offset, "a chained rule must be followed by a SecRule".into()));
            }
            let setting = |r: Result<(), String>| r.map_err(|m| at(arg_at(0), format!("{}: {m}", d.name)));
            match name.as_str() {
                "include" => {
                    need_args(1)?;
                    let target = arg(0);
                    if depth >= MAX_INCLUDE_DEPTH {
                        return Err(at(d.offset, format!("Include nested more than {MAX_INCLUDE_DEPTH} levels")));
                    }
                    if !target.starts_with('@') {
                        return Err(at(arg_at(0), format!("Include \"{target}\": only embedded files (@name) can be included; known: {}", embedded::names().collect::<Vec<_>>().join(", "))));
                    }
                    let mut files = embedded::lookup(target).peekable();
                    if files.peek().is_none() {
                        let hint = if target.starts_with("@owasp_crs") || target == "@crs-setup-conf" {
                            " (this build has no OWASP CRS: build with CRS_DIR set)"
                        } else {
                            ""
                        };
                        return Err(at(arg_at(0), format!("Include \"{target}\": no such embedded file{hint}")));
                    }
                    for (n, t) in files {
                        self.load(n, &t, depth + 1)?;
                    }
                }
                "secruleengine" => {
                    need_args(1)?;
                    setting(EngineMode::parse(arg(0)).map(|m| self.settings.engine = m))?;
                }
                "secrequestbodyaccess" => {
                    need_args(1)?;
                    setting(on_off(arg(0)).map(|v| self.settings.request_body_access = v))?;
                }
                "secresponsebodyaccess" => {
                    need_args(1)?;
                    setting(on_off(arg(0)).map(|v| self.settings.response_body_access = v))?;
                }
                "secrequestbodylimit" => {
                    need_args(1)?;
                    setting(parse_size(arg(0)).map(|v| self.settings.request_body_limit = v))?;
                }
                "secrequestbodynofileslimit" => {
                    need_args(1)?;
                    setting(parse_size(arg(0)).map(|v| self.settings.request_body_no_files_limit = v))?;
                }
                "secresponsebodylimit" => {
                    need_args(1)?;
                    setting(parse_size(arg(0)).map(|v| self.settings.response_body_limit = v))?;
                }
                "secrequestbodyjsondepthlimit" => {
                    need_args(1)?;
                    setting(parse_size(arg(0)).map(|v| self.settings.request_body_json_depth_limit = v))?;
                }
                "secunicodemapfile" => {
                    // The file is not read: the map of code page 20127 is embedded
                    // (src/transforms/unicode_map_file.rs).
                    need_args(2)?;
                    let cp = crate::transforms::unicode_map_file::CODE_PAGE;
                    if arg(1).trim().parse::<u32>().ok() != Some(cp) {
                        return Err(at(arg_at(1), format!("{}: code page \"{}\" is not embedded: only {cp} (US-ASCII) is, as in ModSecurity's recommended configuration", d.name, arg(1))));
                    }
                    self.unicode_map = true;
                }
                "secargumentslimit" => {
                    need_args(1)?;
                    setting(parse_size(arg(0)).map(|v| self.settings.arguments_limit = v))?;
                }
                "secrequestbodylimitaction" | "secresponsebodylimitaction" => {
                    need_args(1)?;
                    let a = match arg(0).to_ascii_lowercase().as_str() {
                        "reject" => LimitAction::Reject,
                        "processpartial" => LimitAction::ProcessPartial,
                        _ => return Err(at(arg_at(0), format!("{}: expected Reject or ProcessPartial, got \"{}\"", d.name, arg(0)))),
                    };
                    if name == "secrequestbodylimitaction" {
                        self.settings.request_body_limit_action = a;
                    } else {
                        self.settings.response_body_limit_action = a;
                    }
                }
                "secresponsebodymimetype" => {
                    self.settings.response_body_mime_types = d.args.iter().flat_map(|a| a.text.split_ascii_whitespace().map(|s| s.to_ascii_lowercase())).collect();
                }
                "secresponsebodymimetypesclear" => self.settings.response_body_mime_types.clear(),
                "seccomponentsignature" => {
                    need_args(1)?;
                    self.settings.component_signatures.push(arg(0).to_string());
                }
                "secmarker" => {
                    need_args(1)?;
                    self.items.push(Item::Marker(arg(0).trim().to_string()));
                }
                "secdefaultaction" => {
                    need_args(1)?;
                    let list = parse_actions(arg(0)).map_err(|(o, m)| at(arg_at(0) + o, m))?;
                    let a = RuleActions::parse(&list).map_err(|(o, m)| at(arg_at(0) + o, m))?;
                    let phase = a.phase.ok_or_else(|| at(arg_at(0), "SecDefaultAction must name a phase".into()))?;
                    let disruptive = a.disruptive.clone().ok_or_else(|| at(arg_at(0), "SecDefaultAction must name a disruptive action".into()))?;
                    let slot = self.defaults.get_mut(usize::from(phase - 1)).ok_or_else(|| at(arg_at(0), "bad phase".into()))?;
                    *slot = Defaults {
                        disruptive,
                        status: a.status,
                        log: a.log.unwrap_or(true),
                        auditlog: a.auditlog.unwrap_or(true),
                        transforms: a.transforms,
                        tags: a.tags,
                        severity: a.severity,
                    };
                }
                "secrule" => {
                    need_args(2)?;
                    let actions = d.args.get(2).map(|a| (a.text.as_str(), a.offset));
                    self.rule(&file, origin, text, d.offset, Some((arg(0), arg_at(0))), Some((arg(1), arg_at(1))), actions)?;
                }
                "secaction" => {
                    need_args(1)?;
                    self.rule(&file, origin, text, d.offset, None, None, Some((arg(0), arg_at(0))))?;
                }
                "secruleremovebyid" => {
                    let joined = d.args.iter().map(|a| a.text.as_str()).collect::<Vec<_>>().join(" ");
                    let ids = crate::actions::id_ranges(&joined).map_err(|m| at(arg_at(0), format!("SecRuleRemoveById: {m}")))?;
                    self.removals.push(Removal::Ids(ids));
                }
                "secruleremovebytag" => {
                    need_args(1)?;
                    self.removals.push(Removal::Tag(arg(0).to_string()));
                }
                "secruleremovebymsg" => {
                    need_args(1)?;
                    self.removals.push(Removal::Msg(arg(0).to_string()));
                }
                "secruleupdatetargetbyid" | "secruleupdatetargetbytag" | "secruleupdatetargetbymsg" => {
                    need_args(2)?;
                    let list = parse_variables(arg(1)).map_err(|(o, m)| at(arg_at(1) + o, m))?;
                    let mut adds = Vec::new();
                    let mut excludes = Vec::new();
                    for v in &list {
                        let (var, sel) = compile_target(v).map_err(|m| at(arg_at(1) + v.offset, m))?;
                        if v.negated {
                            excludes.push((var, sel));
                        } else {
                            adds.push(Target { var, sel, count: v.count, exclude: Vec::new() });
                        }
                    }
                    let ids = if name == "secruleupdatetargetbyid" {
                        Some(crate::actions::id_ranges(arg(0)).map_err(|m| at(arg_at(0), format!("{}: {m}", d.name)))?)
                    } else {
                        None
                    };
                    for item in self.items.iter_mut() {
                        let Item::Rule(r) = item else { continue };
                        let hit = match &ids {
                            Some(ids) => ids.iter().any(|&(a, b)| (a..=b).contains(&r.id)),
                            None if name == "secruleupdatetargetbytag" => r.tags.iter().any(|t| t == arg(0)),
                            None => r.msg.as_ref().is_some_and(|parts| matches!(parts.as_slice(), [MacroPart::Lit(l)] if l == arg(0))),
                        };
                        if !hit {
                            continue;
                        }
                        for (var, sel) in &excludes {
                            for t in r.targets.iter_mut().filter(|t| t.var == *var) {
                                t.exclude.push(sel.clone());
                            }
                        }
                        r.targets.extend(adds.iter().cloned());
                    }
                }
                "secruleupdateactionbyid" => {
                    need_args(2)?;
                    let ids = crate::actions::id_ranges(arg(0).split(':').next().unwrap_or("")).map_err(|m| at(arg_at(0), format!("{}: {m}", d.name)))?;
                    let list = parse_actions(arg(1)).map_err(|(o, m)| at(arg_at(1) + o, m))?;
                    let upd = RuleActions::parse(&list).map_err(|(o, m)| at(arg_at(1) + o, m))?;
                    if upd.id.is_some() || upd.phase.is_some() || upd.chain {
                        return Err(at(arg_at(1), "SecRuleUpdateActionById cannot change id, phase or chain".into()));
                    }
                    let defaults = self.defaults.clone();
                    for item in self.items.iter_mut() {
                        let Item::Rule(r) = item else { continue };
                        if ids.iter().any(|&(a, b)| (a..=b).contains(&r.id)) {
                            let dflt = defaults.get(usize::from(r.phase - 1)).cloned().unwrap_or_default();
                            update_actions(r, &upd, &dflt);
                        }
                    }
                }
                other if IGNORED_DIRECTIVES.contains(&other) => {
                    let line = Error::at(origin, text, d.offset, "").line;
                    self.warnings.push(format!("{origin}:{line}: {} has no effect inside the proxy-wasm filter (accepted, ignored)", d.name));
                }
                _ => return Err(at(d.offset, format!("unknown directive \"{}\"", d.name))),
            }
        }
        if !self.pending_chain.is_empty() && depth == 0 {
            let off = text.len();
            return Err(Error::at(origin, text, off, "the last rule has `chain` but no rule follows"));
        }
        Ok(())
    }

    /// The 1-based line of `offset` in `text` (incremental for increasing offsets).
    fn line_of(&mut self, text: &str, offset: usize) -> usize {
        let offset = offset.min(text.len());
        let (addr, from, line) = match self.line_memo {
            (a, o, l) if a == text.as_ptr() as usize && o <= offset => (a, o, l),
            _ => (text.as_ptr() as usize, 0, 1),
        };
        let line = line + text.as_bytes().get(from..offset).map_or(0, |b| b.iter().filter(|&&c| c == b'\n').count());
        self.line_memo = (addr, offset, line);
        line
    }

    #[allow(clippy::too_many_arguments)]
    fn rule(&mut self, file: &Arc<str>, origin: &str, text: &str, offset: usize, vars: Option<(&str, usize)>, op: Option<(&str, usize)>, actions: Option<(&str, usize)>) -> Result<(), Error> {
        let line = self.line_of(text, offset);
        let at = |o: usize, msg: String| Error::at(origin, text, o, msg);
        let in_chain = !self.pending_chain.is_empty();
        let parsed = match actions {
            Some((t, o)) => {
                let list = parse_actions(t).map_err(|(e, m)| at(o + e, m))?;
                RuleActions::parse(&list).map_err(|(e, m)| at(o + e, m))?
            }
            None => RuleActions::default(),
        };
        let head = self.pending_chain.first();
        let phase = match head {
            Some(h) => h.phase,
            None => parsed.phase.unwrap_or(2),
        };
        if in_chain {
            if parsed.id.is_some() {
                return Err(at(actions.map(|a| a.1).unwrap_or(offset), "a chained rule cannot have an id".into()));
            }
        } else if parsed.id.is_none() {
            return Err(at(actions.map(|a| a.1).unwrap_or(offset), "rule has no id".into()));
        }
        if let Some(id) = parsed.id {
            if self.id_exists(id) {
                return Err(at(actions.map(|a| a.1).unwrap_or(offset), format!("duplicate rule id {id}")));
            }
        }
        let defaults = self.defaults.get(usize::from(phase - 1)).cloned().unwrap_or_default();

        // Targets.
        let mut targets: Vec<Target> = Vec::new();
        if let Some((vtext, voff)) = vars {
            let list = parse_variables(vtext).map_err(|(o, m)| at(voff + o, m))?;
            let mut exclusions: Vec<(Var, KeySel)> = Vec::new();
            for v in list {
                let (var, sel) = compile_target(&v).map_err(|m| at(voff + v.offset, m))?;
                if v.negated {
                    exclusions.push((var, sel));
                } else {
                    targets.push(Target { var, sel, count: v.count, exclude: Vec::new() });
                }
            }
            for (var, sel) in exclusions {
                for t in targets.iter_mut().filter(|t| t.var == var) {
                    t.exclude.push(sel.clone());
                }
            }
        }

        // Operator.
        let mut pf = None;
        let (operator, negated, op_name, op_param) = match op {
            Some((otext, ooff)) => {
                let o = parse_operator(otext);
                let (compiled, lits) = if o.name.eq_ignore_ascii_case("rx") {
                    let (rx, lits) = crate::operators::rx::Rx::analyzed(&o.param).map_err(|m| at(ooff + o.param_offset, m))?;
                    (Operator::Rx(rx), Some(lits))
                } else {
                    let op = Operator::compile(&o.name, &o.param, &embedded::data_file)
                        .map_err(|m| at(ooff + if m.starts_with("unknown operator") { o.offset } else { o.param_offset }, m))?;
                    (op, None)
                };
                match lits {
                    Some(lits) => pf = lits.and_then(|l| self.pf.literals(l)),
                    None => {
                        if let Operator::Pm(p) = &compiled {
                            pf = self.pf.words(p.words().iter().cloned());
                        }
                    }
                }
                if matches!(o.name.to_ascii_lowercase().as_str(), "rbl" | "geolookup") {
                    self.warnings.push(format!("{origin}:{line}: @{} never matches inside the proxy-wasm VM (no network)", o.name));
                }
                (compiled, o.negated, o.name, o.param)
            }
            None => (Operator::UnconditionalMatch, false, "unconditionalMatch".to_string(), String::new()),
        };

        // Transformations: defaults first unless t:none.
        let mut transforms = if parsed.t_none { Vec::new() } else { defaults.transforms.clone() };
        transforms.extend(parsed.transforms.iter().copied());

        let disruptive = if in_chain {
            Disruptive::Pass
        } else {
            match parsed.disruptive.clone() {
                Some(Disruptive::Block) | None if parsed.disruptive.is_some() => defaults.disruptive.clone(),
                Some(d) => d,
                None => defaults.disruptive.clone(),
            }
        };
        let status = parsed.status.or(defaults.status).unwrap_or(403);
        let mut tags = defaults.tags.clone();
        tags.extend(parsed.tags.iter().cloned());

        let rule = Rule {
            id: parsed.id.unwrap_or(0),
            phase,
            file: file.clone(),
            line,
            targets,
            operator,
            negated,
            op_name,
            op_param,
            transforms,
            multi_match: parsed.multi_match,
            capture: parsed.capture,
            disruptive,
            status,
            log: parsed.log.unwrap_or(defaults.log),
            auditlog: parsed.auditlog.unwrap_or(defaults.auditlog),
            msg: parsed.msg,
            logdata: parsed.logdata,
            tags,
            severity: parsed.severity.or(defaults.severity),
            ver: parsed.ver,
            rev: parsed.rev,
            maturity: parsed.maturity,
            accuracy: parsed.accuracy,
            setvars: parsed.setvars,
            ctls: parsed.ctls,
            skip_after: parsed.skip_after,
            skip: parsed.skip,
            chain: None,
            prefilter: pf,
            chain_id: 0,
            chain_trigger: None,
            cased_trigger: (None, false),
            step_triggers: Vec::new(),
            target_sig: None,
            target_sigs: Vec::new(),
            sources: None,
            group_slot: None,
            tag_ids: Vec::new(),
            index: 0,
            memo_bit: None,
        };
        self.pending_chain.push(rule);
        if !parsed.chain {
            // Close the chain: fold links into the head.
            let mut links = std::mem::take(&mut self.pending_chain);
            let mut tail: Option<Box<Rule>> = None;
            while let Some(mut r) = links.pop() {
                r.chain = tail.take();
                tail = Some(Box::new(r));
            }
            if let Some(head) = tail {
                self.items.push(Item::Rule(head));
            }
        }
        Ok(())
    }

    fn id_exists(&self, id: u64) -> bool {
        self.items.iter().any(|i| matches!(i, Item::Rule(r) if r.id == id))
    }

    fn finish(mut self) -> Result<Ruleset, Error> {
        let removals = std::mem::take(&mut self.removals);
        let pf = std::mem::take(&mut self.pf);
        let removed = |r: &Rule| {
            removals.iter().any(|rm| match rm {
                Removal::Ids(ranges) => ranges.iter().any(|&(a, b)| (a..=b).contains(&r.id)),
                Removal::Tag(t) => r.tags.iter().any(|x| x == t),
                Removal::Msg(m) => r.msg.as_ref().is_some_and(|parts| matches!(parts.as_slice(), [MacroPart::Lit(l)] if l == m)),
            })
        };
        let mut phases: [Vec<Entry>; 5] = Default::default();
        let mut chains: std::collections::HashMap<Vec<Transform>, u32> = std::collections::HashMap::new();
        let mut sigs: std::collections::HashMap<String, u32> = std::collections::HashMap::new();
        let mut tsigs: std::collections::HashMap<String, u32> = std::collections::HashMap::new();
        let mut slots: std::collections::HashMap<(u32, u32, bool), u32> = std::collections::HashMap::new();
        let mut target_sources: Vec<crate::vars::Source> = Vec::new();
        let mut tags: std::collections::HashMap<String, u32> = std::collections::HashMap::new();
        let mut ops: std::collections::HashMap<(String, String), u32> = std::collections::HashMap::new();
        let unicode_map = self.unicode_map;
        let mut intern = |r: &mut Rule| {
            if unicode_map {
                for t in r.transforms.iter_mut().filter(|t| **t == Transform::UrlDecodeUni) {
                    *t = Transform::UrlDecodeUniMap;
                }
            }
            r.tag_ids = r.tags.iter().map(|t| number(&mut tags, t.clone())).collect();
            r.chain_id = number(&mut chains, r.transforms.clone());
            r.step_triggers = r.transforms.iter().map(|t| t.trigger()).collect();
            r.chain_trigger = trigger_union(r.step_triggers.iter());
            let cased = r.transforms.iter().zip(&r.step_triggers).filter(|(t, _)| **t != Transform::Lowercase).map(|(_, trig)| trig);
            r.cased_trigger = (trigger_union(cased), r.transforms.contains(&Transform::Lowercase));
            r.target_sig = target_signature(&r.targets).map(|key| number(&mut sigs, key));
            r.target_sigs = if r.target_sig.is_some() {
                let mut ids = Vec::with_capacity(r.targets.len());
                for t in &r.targets {
                    if let Some(key) = target_signature(std::slice::from_ref(t)) {
                        let id = number(&mut tsigs, key);
                        // Ids are numbered here only, in order (the key names the variable).
                        if id as usize == target_sources.len() {
                            target_sources.push(t.var.source());
                        }
                        ids.push(id);
                    }
                }
                ids
            } else {
                Vec::new()
            };
            r.sources = if r.target_sigs.is_empty() || r.target_sigs.len() != r.targets.len() {
                None
            } else {
                r.targets.iter().try_fold(crate::vars::Source::Line, |acc, t| match t.var.source() {
                    crate::vars::Source::Other => None,
                    crate::vars::Source::LineAndBody => Some(crate::vars::Source::LineAndBody),
                    crate::vars::Source::Line => Some(acc),
                })
            };
            r.group_slot = r.target_sig.map(|sig| number(&mut slots, (sig, r.chain_id, r.multi_match)));
            r.memo_bit = (r.group_slot.is_some() && r.operator.pure()).then(|| number(&mut ops, (r.op_name.to_ascii_lowercase(), r.op_param.clone())));
        };
        each_link(&mut self.items, &mut intern);
        let group_slots = slots.len();
        let memo_bits = ops.len();
        let slot_words = number_bits_by_slot(&mut self.items, group_slots, memo_bits);
        for item in self.items {
            match item {
                Item::Rule(r) => {
                    if removed(&r) {
                        continue;
                    }
                    if let Some(list) = phases.get_mut(usize::from(r.phase - 1)) {
                        list.push(Entry::Rule(r));
                    }
                }
                Item::Marker(m) => {
                    // A marker is a point in every phase's list.
                    for list in phases.iter_mut() {
                        list.push(Entry::Marker(m.clone()));
                    }
                }
            }
        }
        let mut skip_targets = Vec::new();
        for (p, list) in phases.iter().enumerate() {
            for (i, e) in list.iter().enumerate() {
                if let Some(name) = match e {
                    Entry::Rule(r) => r.skip_after.as_ref(),
                    Entry::Marker(_) => None,
                } {
                    let target = list.iter().enumerate().skip(i + 1).find(|(_, e)| matches!(e, Entry::Marker(m) if m == name)).map(|(j, _)| j + 1).unwrap_or(list.len());
                    skip_targets.push(((p, i), target));
                }
            }
        }
        let quick = quick::Index::build(&mut phases, tags.len());
        let persistent = phases.iter().flatten().any(|e| {
            let mut link: Option<&Rule> = match e {
                Entry::Rule(r) => Some(r),
                _ => None,
            };
            while let Some(r) = link {
                if r.setvars.iter().any(|s| matches!(s.op, crate::actions::SetOp::Init(_))) {
                    return true;
                }
                link = r.chain.as_deref();
            }
            false
        });
        Ok(Ruleset { settings: self.settings, phases, warnings: self.warnings, skip_targets, prefilter: pf.build(), persistent, mentions: self.mentions, group_slots, memo_bits, slot_words, target_sources, uid: next_uid(), init: std::sync::OnceLock::new(), hash_keys: std::sync::OnceLock::new(), tags, quick })
    }
}

/// Numbers the memo bits again, slot by slot, so that the operators of the rules on one
/// group slot have neighbouring bits (an operator read on several slots keeps its first
/// slot's number); returns each slot's range of 64-bit words (what a group's values have in
/// common is then a word or two: see `Group::known`).
fn number_bits_by_slot(items: &mut [Item], slots: usize, bits: usize) -> Vec<(u32, u32)> {
    let mut pairs = Vec::new();
    each_link(items, &mut |l| {
        if let (Some(s), Some(b)) = (l.group_slot, l.memo_bit) {
            pairs.push((s, b));
        }
    });
    pairs.sort_unstable();
    let mut new = vec![u32::MAX; bits];
    let mut next = 0;
    for &(_, b) in &pairs {
        if let Some(n) = new.get_mut(b as usize).filter(|n| **n == u32::MAX) {
            *n = next;
            next += 1;
        }
    }
    let mut words = vec![(u32::MAX, 0); slots];
    each_link(items, &mut |l| {
        l.memo_bit = l.memo_bit.and_then(|b| new.get(b as usize).copied());
        if let (Some(s), Some(b)) = (l.group_slot, l.memo_bit) {
            if let Some(w) = words.get_mut(s as usize) {
                *w = (w.0.min(b / 64), w.1.max(b / 64));
            }
        }
    });
    words
}

/// Calls `f` on every link of every rule (the head, then each chained rule).
fn each_link(items: &mut [Item], f: &mut impl FnMut(&mut Rule)) {
    for item in items.iter_mut() {
        if let Item::Rule(r) = item {
            let mut link: Option<&mut Rule> = Some(r);
            while let Some(l) = link {
                f(l);
                link = l.chain.as_deref_mut();
            }
        }
    }
}

/// A number no other rule set of this process has.
fn next_uid() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// The number of `key` in `map`, the next free one (the map's size) for a new key.
fn number<K: std::hash::Hash + Eq>(map: &mut std::collections::HashMap<K, u32>, key: K) -> u32 {
    let next = u32::try_from(map.len()).unwrap_or(u32::MAX);
    *map.entry(key).or_insert(next)
}

/// A key naming a target list when all its variables read data fixed for a
/// phase (see `Rule::target_sig`); None otherwise (TX, MATCHED_VAR, counts...).
fn target_signature(targets: &[Target]) -> Option<String> {
    use std::fmt::Write as _;
    if targets.is_empty() {
        return None;
    }
    let sel = |k: &KeySel| match k {
        KeySel::All => String::new(),
        KeySel::Key(k) => format!("k{k}"),
        KeySel::Regex(r) => format!("r{}", r.as_str()),
    };
    let mut key = String::new();
    for t in targets {
        if t.count || !t.var.is_phase_stable() {
            return None;
        }
        let _ = write!(key, "{}|{}|", t.var.name(), sel(&t.sel));
        for e in &t.exclude {
            let _ = write!(key, "!{}|", sel(e));
        }
        key.push(';');
    }
    Some(key)
}

/// Resolves a parsed variable into (variable, key selector).
fn compile_target(v: &seclang::VarAst) -> Result<(Var, KeySel), String> {
    let var = Var::from_name(&v.name).ok_or_else(|| format!("unknown variable \"{}\"", v.name))?;
    let sel = match &v.selector {
        Selector::None => KeySel::All,
        Selector::Key(k) => {
            if !var.is_collection() {
                return Err(format!("variable {} takes no selector", var.name()));
            }
            KeySel::Key(k.to_ascii_lowercase())
        }
        Selector::Regex(r) => {
            KeySel::Regex(crate::vars::KeyRegex::new(r).map_err(|e| format!("bad selector regex /{r}/: {e}"))?)
        }
    };
    Ok((var, sel))
}

/// `SecRuleUpdateActionById`: actions given replace the rule's.
fn update_actions(r: &mut Rule, u: &RuleActions, dflt: &Defaults) {
    if let Some(d) = &u.disruptive {
        r.disruptive = if *d == Disruptive::Block { dflt.disruptive.clone() } else { d.clone() };
    }
    if let Some(s) = u.status {
        r.status = s;
    }
    if let Some(l) = u.log {
        r.log = l;
    }
    if let Some(a) = u.auditlog {
        r.auditlog = a;
    }
    if u.msg.is_some() {
        r.msg = u.msg.clone();
    }
    if u.logdata.is_some() {
        r.logdata = u.logdata.clone();
    }
    if u.severity.is_some() {
        r.severity = u.severity;
    }
    if !u.tags.is_empty() {
        r.tags = u.tags.clone();
    }
    if u.t_none {
        r.transforms.clear();
    }
    r.transforms.extend(u.transforms.iter().copied());
    r.setvars.extend(u.setvars.iter().cloned());
    r.ctls.extend(u.ctls.iter().cloned());
    if u.skip_after.is_some() {
        r.skip_after = u.skip_after.clone();
    }
}

#[cfg(all(test, wafer_crs))]
mod crs_regexes {
    /// Regexes are built lazily; every CRS regex must build within the limits.
    #[test]
    fn every_crs_regex_builds() {
        let rs = super::Ruleset::compile("t", "Include @crs-setup-conf\nInclude @owasp_crs/*.conf").unwrap();
        let n = rs.build_all_regexes().unwrap_or_else(|e| panic!("{e}"));
        assert!(n > 300, "only {n} @rx operators");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiles_the_targeted_tier() {
        let rs = Ruleset::compile("t", "Include @targeted").unwrap();
        assert_eq!(rs.rule_count(), 5);
        assert_eq!(rs.settings.engine, EngineMode::On);
        assert!(rs.settings.request_body_access);
        assert_eq!(rs.settings.request_body_limit_action, LimitAction::ProcessPartial);
    }

    #[test]
    fn reads_request_body_is_a_new_transactions_body_access() {
        for (text, want) in [
            ("Include @targeted", true),
            ("Include @headers-only", false),
            ("SecRuleEngine DetectionOnly\nSecRequestBodyAccess On", true),
            ("SecRuleEngine Off\nSecRequestBodyAccess On", false),
            ("SecRequestBodyAccess On", false),
        ] {
            let rs = Arc::new(Ruleset::compile("t", text).unwrap());
            assert_eq!(rs.reads_request_body(), want, "{text}");
            assert_eq!(crate::Transaction::new(rs.clone(), "id".into()).request_body_access(), want, "{text}");
        }
    }

    #[test]
    fn errors_name_file_line_and_column() {
        let e = Ruleset::compile("directives_map[default]", "SecRuleEngine On\nSecRule ARGS \"@rxx a\" \"id:1\"").unwrap_err();
        assert_eq!((e.line, e.col, e.msg.as_str()), (2, 15, "unknown operator \"@rxx\""));
        let e = Ruleset::compile("f", "SecFoo bar").unwrap_err();
        assert_eq!(e.msg, "unknown directive \"SecFoo\"");
        let e = Ruleset::compile("f", "SecRule ARGS \"@rx (\" \"id:1\"").unwrap_err();
        assert!(e.msg.contains("invalid regular expression"), "{e}");
        assert_eq!(e.col, 19);
        let e = Ruleset::compile("f", "SecRule ARGS \"@rx a\" \"phase:2\"").unwrap_err();
        assert_eq!(e.msg, "rule has no id");
        let e = Ruleset::compile("f", "SecRule NOPE \"@rx a\" \"id:1\"").unwrap_err();
        assert_eq!(e.msg, "unknown variable \"NOPE\"");
        let rs = Ruleset::compile("f", "SecAuditEngine RelevantOnly").unwrap();
        assert_eq!(rs.warnings, ["f:1: SecAuditEngine has no effect inside the proxy-wasm filter (accepted, ignored)"]);
        let rs = Ruleset::compile("f", "SecRule REMOTE_ADDR \"@rbl bl.example\" \"id:1,deny\"").unwrap();
        assert!(rs.warnings.iter().any(|w| w.contains("@rbl never matches")), "{:?}", rs.warnings);
        let e = Ruleset::compile("f", "Include @nope").unwrap_err();
        assert!(e.msg.contains("no such embedded file"));
    }

    #[test]
    fn block_resolves_to_the_default_action() {
        let rs = Ruleset::compile("f", "SecDefaultAction \"phase:2,log,auditlog,deny,status:406\"\nSecRule ARGS \"@rx a\" \"id:1,block\"").unwrap();
        let Some(Entry::Rule(r)) = rs.phases[1].first() else { panic!("no rule") };
        assert_eq!((r.disruptive.clone(), r.status), (Disruptive::Deny, 406));
    }

    #[test]
    fn removal_and_markers() {
        let rs = Ruleset::compile("f", "SecRule ARGS \"@rx a\" \"id:1,phase:1,skipAfter:END\"\nSecRule ARGS \"@rx b\" \"id:2,phase:1\"\nSecMarker END\nSecRule ARGS \"@rx c\" \"id:3,phase:1\"\nSecRuleRemoveById 2").unwrap();
        assert_eq!(rs.rule_count(), 2);
        assert_eq!(rs.skip_target(0, 0), Some(2));
    }
}

/// The union of transformation steps' trigger bytes (None when a step may change any value).
fn trigger_union<'a>(mut steps: impl Iterator<Item = &'a Option<[u64; 4]>>) -> Option<[u64; 4]> {
    steps.try_fold([0u64; 4], |mut acc, trig| {
        let trig = (*trig)?;
        for (a, b) in acc.iter_mut().zip(trig.iter()) {
            *a |= b;
        }
        Some(acc)
    })
}
