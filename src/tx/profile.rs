//! Statistics for `wafer profile`: per rule, per (targets, chain) group, and of the
//! per-transaction memo tables. Collected only when a profile is attached to a
//! transaction ([`Transaction::enable_profile`](super::Transaction::enable_profile)),
//! except the cache counters, which are plain additions always kept.

use std::collections::HashMap;
use std::fmt::Write;

use crate::compile::{Entry, Rule, Ruleset};
use crate::transforms::Transform;

/// One rule (with its chain), summed over the profiled transactions.
#[derive(Debug, Default, Clone)]
pub struct RuleStat {
    pub phase: u8,
    /// Times the rule was evaluated.
    pub evals: u64,
    /// Values offered to its operators (after targets and transformations).
    pub values: u64,
    /// Values the prefilter proved could not match (operator not run).
    pub skipped: u64,
    /// Operator runs.
    pub ran: u64,
    /// Evaluations that matched (the whole chain).
    pub matched: u64,
    /// Links evaluated on their own value list instead of a shared (targets, chain) group.
    pub unshared: u64,
    pub nanos: u64,
}

/// Counters of the memo tables (see `cache.rs`).
#[derive(Debug, Default, Clone, Copy)]
pub struct CacheStats {
    pub chains_computed: u64,
    pub chains_reused: u64,
    /// Values no step of the chain could change (trigger bytes absent): no work, no entry.
    pub chains_untouched: u64,
    pub scans_computed: u64,
    pub scans_reused: u64,
    pub libinjection_computed: u64,
    pub libinjection_reused: u64,
    pub groups_built: u64,
    /// Of the groups built: from the memo's record of the same values (see `Memo::group_record`).
    pub groups_recorded: u64,
    /// Of those: the record's own group, given whole (the very same list of values).
    pub groups_whole: u64,
    /// Of those, found by their sources' generation (their lists not collected).
    pub groups_by_gen: u64,
    /// Of the groups built: from the record of values that differ at a few places only (see
    /// `Group::seed`).
    pub groups_near: u64,
    pub groups_reused: u64,
    /// Values (request values and transformation results) found in the memo of earlier
    /// transactions, and not found.
    pub memo_hits: u64,
    pub memo_misses: u64,
}

impl RuleStat {
    pub fn add(&mut self, o: &RuleStat) {
        self.phase = o.phase;
        self.evals += o.evals;
        self.values += o.values;
        self.skipped += o.skipped;
        self.ran += o.ran;
        self.matched += o.matched;
        self.unshared += o.unshared;
        self.nanos += o.nanos;
    }
}

impl CacheStats {
    pub fn add(&mut self, o: &CacheStats) {
        self.chains_computed += o.chains_computed;
        self.chains_reused += o.chains_reused;
        self.chains_untouched += o.chains_untouched;
        self.scans_computed += o.scans_computed;
        self.scans_reused += o.scans_reused;
        self.libinjection_computed += o.libinjection_computed;
        self.libinjection_reused += o.libinjection_reused;
        self.groups_built += o.groups_built;
        self.groups_recorded += o.groups_recorded;
        self.groups_whole += o.groups_whole;
        self.groups_by_gen += o.groups_by_gen;
        self.groups_near += o.groups_near;
        self.groups_reused += o.groups_reused;
        self.memo_hits += o.memo_hits;
        self.memo_misses += o.memo_misses;
    }
}

/// A shared list of prepared values: rules with the same targets and chain.
#[derive(Debug, Default, Clone)]
pub struct GroupStat {
    /// `ARGS|REQUEST_HEADERS t:urlDecodeUni,t:lowercase`
    pub name: String,
    pub built: u64,
    pub reused: u64,
    pub values: u64,
}

#[derive(Debug, Default, Clone)]
pub struct Profile {
    pub transactions: u64,
    pub rules: HashMap<u64, RuleStat>,
    pub cache: CacheStats,
    pub groups: HashMap<(u32, u32), GroupStat>,
    /// The caller's monotonic clock in nanoseconds, for the per-rule times (the engine reads
    /// no clock); None: times are 0.
    pub clock: Option<fn() -> u64>,
}

fn ratio(hit: u64, miss: u64) -> String {
    let all = hit + miss;
    if all == 0 {
        return "-".into();
    }
    format!("{:.1}%", hit as f64 * 100.0 / all as f64)
}

pub(crate) fn chain_name(ts: &[Transform]) -> String {
    if ts.is_empty() {
        return "t:none".into();
    }
    ts.iter().map(|t| format!("t:{}", t.name())).collect::<Vec<_>>().join(",")
}

fn target_name(t: &crate::vars::Target) -> String {
    let mut s = String::new();
    if t.count {
        s.push('&');
    }
    s.push_str(t.var.name());
    match &t.sel {
        crate::vars::KeySel::All => {}
        crate::vars::KeySel::Key(k) => {
            s.push(':');
            s.push_str(k);
        }
        crate::vars::KeySel::Regex(r) => {
            let _ = write!(s, ":/{}/", r.as_str());
        }
    }
    if !t.exclude.is_empty() {
        let _ = write!(s, " (minus {})", t.exclude.len());
    }
    s
}

pub(crate) fn group_name(rule: &Rule) -> String {
    let targets: Vec<String> = rule.targets.iter().map(target_name).collect();
    format!("{} {}", targets.join("|"), chain_name(&rule.transforms))
}

impl Profile {
    pub fn merge(&mut self, o: &Profile) {
        self.transactions += o.transactions;
        for (id, s) in &o.rules {
            self.rules.entry(*id).or_default().add(s);
        }
        self.cache.add(&o.cache);
        for (k, g) in &o.groups {
            let e = self.groups.entry(*k).or_default();
            if e.name.is_empty() {
                e.name = g.name.clone();
            }
            e.built += g.built;
            e.reused += g.reused;
            e.values += g.values;
        }
    }

    /// The report `wafer profile` prints: `top` rows per table.
    pub fn report(&self, rs: &Ruleset, top: usize) -> String {
        let n = self.transactions.max(1) as f64;
        let mut out = String::new();
        let total: u64 = self.rules.values().map(|r| r.nanos).sum();
        let _ = writeln!(out, "{} transactions; rule evaluation {:.1} us per transaction\n", self.transactions, total as f64 / n / 1000.0);

        let _ = writeln!(out, "## Rules by time (per transaction)\n");
        let _ = writeln!(out, "| rule | phase | operator | us | evals | values | prefilter skipped | operator runs | matched | own list |");
        let _ = writeln!(out, "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|");
        let ops = operators(rs);
        let mut rules: Vec<(&u64, &RuleStat)> = self.rules.iter().collect();
        rules.sort_by(|a, b| b.1.nanos.cmp(&a.1.nanos).then(a.0.cmp(b.0)));
        for (id, r) in rules.iter().take(top) {
            let _ = writeln!(
                out,
                "| {id} | {} | {} | {:.2} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2} | {:.1} |",
                r.phase,
                ops.get(id).map(String::as_str).unwrap_or(""),
                r.nanos as f64 / n / 1000.0,
                r.evals as f64 / n,
                r.values as f64 / n,
                r.skipped as f64 / n,
                r.ran as f64 / n,
                r.matched as f64 / n,
                r.unshared as f64 / n
            );
        }

        let c = &self.cache;
        let _ = writeln!(out, "\n## Memoization (per transaction)\n");
        let _ = writeln!(out, "| table | computed | reused | hit ratio |");
        let _ = writeln!(out, "|---|---:|---:|---:|");
        let row = |out: &mut String, name: &str, computed: u64, reused: u64| {
            let _ = writeln!(out, "| {name} | {:.1} | {:.1} | {} |", computed as f64 / n, reused as f64 / n, ratio(reused, computed));
        };
        row(&mut out, "transformation chains (value, chain)", c.chains_computed, c.chains_reused + c.chains_untouched);
        let _ = writeln!(out, "| (of the reused: chain provably a no-op) | | {:.1} | |", c.chains_untouched as f64 / n);
        row(&mut out, "prefilter scans (value)", c.scans_computed, c.scans_reused);
        row(&mut out, "libinjection verdicts (value)", c.libinjection_computed, c.libinjection_reused);
        row(&mut out, "prepared groups (targets, chain)", c.groups_built, c.groups_reused);
        let _ = writeln!(out, "| (of the computed: from the memo's record of the same values) | {:.1} | | |", c.groups_recorded as f64 / n);
        let _ = writeln!(out, "| (of those: the record's group itself, same list) | {:.1} | | |", c.groups_whole as f64 / n);
        let _ = writeln!(out, "| (of those: by the generation of their sources, lists not collected) | {:.1} | | |", c.groups_by_gen as f64 / n);
        let _ = writeln!(out, "| (of the computed: from the record of values differing at a few places) | {:.1} | | |", c.groups_near as f64 / n);
        row(&mut out, "values known from earlier transactions (memo)", c.memo_misses, c.memo_hits);

        let _ = writeln!(out, "\n## Hot (targets, chain) groups (per transaction)\n");
        let _ = writeln!(out, "| targets and chain | rules using it | values |");
        let _ = writeln!(out, "|---|---:|---:|");
        let mut groups: Vec<&GroupStat> = self.groups.values().collect();
        groups.sort_by(|a, b| (b.built + b.reused).cmp(&(a.built + a.reused)).then(a.name.cmp(&b.name)));
        for g in groups.iter().take(top) {
            let name: String = g.name.chars().take(120).collect();
            let _ = writeln!(out, "| `{}` | {:.1} | {:.1} |", name.replace('|', "\\|"), (g.built + g.reused) as f64 / n, g.values as f64 / n.max(1.0) / (g.built.max(1) as f64 / n));
        }

        let cands = rewrite_candidates(rs);
        let _ = writeln!(out, "\n## Rewrite candidates\n");
        if cands.is_empty() {
            let _ = writeln!(out, "none");
        }
        for c in cands.iter().take(top) {
            let _ = writeln!(out, "- {c}");
        }
        out
    }
}

/// Every rule (and chain link) of a rule set, with its phase.
fn all_rules(rs: &Ruleset) -> Vec<&Rule> {
    let mut out = Vec::new();
    for list in &rs.phases {
        for e in list {
            if let Entry::Rule(r) = e {
                let mut link: Option<&Rule> = Some(r);
                while let Some(l) = link {
                    out.push(l);
                    link = l.chain.as_deref();
                }
            }
        }
    }
    out
}

fn operators(rs: &Ruleset) -> HashMap<u64, String> {
    let mut m = HashMap::new();
    for list in &rs.phases {
        for e in list {
            if let Entry::Rule(r) = e {
                let mut ops = vec![format!("@{}", r.op_name)];
                let mut link = r.chain.as_deref();
                while let Some(l) = link {
                    ops.push(format!("@{}", l.op_name));
                    link = l.chain.as_deref();
                }
                m.insert(r.id, ops.join(" > "));
            }
        }
    }
    m
}

/// Rules whose `t:lowercase` only serves a regex: with `(?i)` in the pattern instead, the
/// rule would share the value list (and memoized chain) of rules without the step.
fn rewrite_candidates(rs: &Ruleset) -> Vec<String> {
    let rules = all_rules(rs);
    let mut out = Vec::new();
    for r in &rules {
        if !r.op_name.eq_ignore_ascii_case("rx") || !r.transforms.contains(&Transform::Lowercase) {
            continue;
        }
        let without: Vec<Transform> = r.transforms.iter().copied().filter(|t| *t != Transform::Lowercase).collect();
        let sharing = rules.iter().filter(|o| o.target_sig.is_some() && o.target_sig == r.target_sig && o.transforms == without).count();
        let id = if r.id == 0 { "a chained rule".to_string() } else { format!("rule {}", r.id) };
        out.push(format!(
            "{id}: `t:lowercase` before `@rx`; use `(?i)` in the pattern and drop the step: chain {} -> {}{}",
            chain_name(&r.transforms),
            chain_name(&without),
            if sharing > 0 { format!(" (shared with {sharing} rules on the same targets)") } else { String::new() }
        ));
    }
    out
}
