//! Envoy counters: defined once per plugin configuration, per-rule counters on first use.
//!
//! Names are `wafer[.<label>.<value>...].<counter>`, with the labels of
//! [`wafer::Waf::metric_labels`] in order (label keys and values sanitized to
//! `[A-Za-z0-9_-]`). Envoy shows them under its namespace for the build: `wasmcustom.` for the
//! wasm module, `dynamicmodulescustom.` for the dynamic module (e.g.
//! `wasmcustom.wafer.transactions` in `/stats`); Prometheus output drops either namespace. To
//! turn the label segments into Prometheus tags, add a `stats_config.stats_tags` regex in the
//! Envoy bootstrap (`envoy-wasm/examples/remote-fetch/envoy.yaml` has them for `rule_id`,
//! `phase` and the build gauge).
//!
//! Per-rule counters are `wafer[...].rule_interruptions.phase.<1-4>.rule_id.<id>`: a family
//! with the labels `phase` and `rule_id` ([`Host::define_family`]), its own name rather than
//! `interruptions.*`, so that once the tags are extracted they do not share a Prometheus metric
//! with the `interruptions` total.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::host::{metric_segment, Host};
use crate::sync::lock;

/// Per-rule counters by (rule id, phase); `None` when the host refused one (not retried).
type PerRule<C> = Mutex<HashMap<(u64, u8), Option<C>>>;

pub(crate) struct Metrics<H: Host> {
    transactions: Option<H::Counter>,
    interruptions: Option<H::Counter>,
    errors: Option<H::Counter>,
    /// Transactions over the memory budget (`wafer::tx::budget`: refused with 413, or
    /// inspected in part).
    over_budget: Option<H::Counter>,
    per_rule_family: Option<H::Family>,
    per_rule: PerRule<H::Counter>,
    /// Transactions not yet added to the host's counter (see [`Metrics::transaction`]).
    pending: AtomicU64,
}

/// How often the tick adds the pending transaction count to the host's counter.
pub const FLUSH_MS: u64 = 1000;

/// The labels of the per-rule family.
const RULE_LABELS: &[&str] = &["phase", "rule_id"];

impl<H: Host> Metrics<H> {
    pub(crate) fn define(host: &H, labels: &[(String, String)]) -> Metrics<H> {
        let prefix = metric_prefix(labels);
        let counter = |name: &str| host.define_counter(&format!("{prefix}.{name}"));
        Metrics {
            transactions: counter("transactions"),
            interruptions: counter("interruptions"),
            errors: counter("errors"),
            over_budget: counter("over_budget"),
            per_rule_family: host.define_family(&format!("{prefix}.rule_interruptions"), RULE_LABELS),
            per_rule: Mutex::new(HashMap::new()),
            pending: AtomicU64::new(0),
        }
    }

    /// Counts a transaction. A proxy-wasm host call costs Envoy about 0.7 us (measured with 10
    /// increments per request instead of 1: +6.5 us of CPU per GET), so the count is kept here
    /// and added to the host's counter by [`Metrics::flush`]: every [`FLUSH_MS`] (the tick) and
    /// before any other counter of this configuration moves, so that `transactions` never lags
    /// behind `interruptions` or `errors`.
    pub(crate) fn transaction(&self) {
        self.pending.fetch_add(1, Ordering::Relaxed);
    }

    /// Adds the pending transactions to the host's counter.
    pub(crate) fn flush(&self, host: &H) {
        let n = self.pending.swap(0, Ordering::Relaxed);
        if let (Some(c), true) = (&self.transactions, n > 0) {
            host.increment(c, n);
        }
    }

    pub(crate) fn error(&self, host: &H) {
        self.flush(host);
        increment(host, &self.errors);
    }

    /// Counts a transaction that passed the memory budget.
    pub(crate) fn over_budget(&self, host: &H) {
        self.flush(host);
        increment(host, &self.over_budget);
    }

    pub(crate) fn interruption(&self, host: &H, rule_id: Option<u64>, phase: u8) {
        self.flush(host);
        increment(host, &self.interruptions);
        let (Some(rule_id), Some(family)) = (rule_id, &self.per_rule_family) else { return };
        let counter = lock(&self.per_rule)
            .entry((rule_id, phase))
            .or_insert_with(|| host.family_counter(family, &[&phase.to_string(), &rule_id.to_string()]))
            .clone();
        increment(host, &counter);
    }
}

/// `wafer` and the configuration's labels, as metric name segments.
pub(crate) fn metric_prefix(labels: &[(String, String)]) -> String {
    let mut prefix = String::from("wafer");
    for (key, value) in labels {
        prefix.push('.');
        prefix.push_str(&metric_segment(key));
        prefix.push('.');
        prefix.push_str(&metric_segment(value));
    }
    prefix
}

/// A member's name in a family (see [`Host::define_family`]): the name Envoy gives a counter
/// with tags, for hosts that have no labels.
pub fn family_member_name(family: &str, labels: &[&str], values: &[&str]) -> String {
    let mut name = family.to_string();
    for (label, value) in labels.iter().zip(values) {
        name.push('.');
        name.push_str(label);
        name.push('.');
        name.push_str(value);
    }
    name
}

fn increment<H: Host>(host: &H, counter: &Option<H::Counter>) {
    if let Some(c) = counter {
        host.increment(c, 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_with_labels() {
        assert_eq!(metric_prefix(&[]), "wafer");
        let labels = vec![("owner".to_string(), "team a".to_string()), ("env".to_string(), "prod".to_string())];
        assert_eq!(metric_prefix(&labels), "wafer.owner.team_a.env.prod");
    }

    #[test]
    fn per_rule_counter_names() {
        assert_eq!(
            family_member_name("wafer.rule_interruptions", RULE_LABELS, &["2", "949110"]),
            "wafer.rule_interruptions.phase.2.rule_id.949110"
        );
    }
}
