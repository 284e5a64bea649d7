//! Envoy counters: defined once per plugin configuration, per-rule counters on first use.
//!
//! Names are `wafer[.<label>.<value>...].<counter>`, with the labels of
//! [`wafer::Waf::metric_labels`] in order (label keys and values sanitized to
//! `[A-Za-z0-9_-]`). Envoy shows them with its `wasmcustom.` prefix, e.g.
//! `wasmcustom.wafer.transactions` in `/stats`. To turn the label segments into Prometheus
//! tags, add a `stats_config.stats_tags` regex in the Envoy bootstrap.

use std::cell::RefCell;
use std::collections::HashMap;

use proxy_wasm::hostcalls;
use proxy_wasm::types::MetricType;

use crate::host::metric_segment;

pub(crate) struct Metrics {
    prefix: String,
    transactions: Option<u32>,
    interruptions: Option<u32>,
    errors: Option<u32>,
    /// Rule id -> counter id (`None` when the host refused to define it; not retried).
    per_rule: RefCell<HashMap<u64, Option<u32>>>,
}

impl Metrics {
    pub(crate) fn define(labels: &[(String, String)]) -> Metrics {
        let prefix = metric_prefix(labels);
        let counter = |name: &str| define_counter(&format!("{prefix}.{name}"));
        Metrics {
            transactions: counter("transactions"),
            interruptions: counter("interruptions"),
            errors: counter("errors"),
            prefix,
            per_rule: RefCell::new(HashMap::new()),
        }
    }

    pub(crate) fn transaction(&self) {
        increment(self.transactions);
    }

    pub(crate) fn error(&self) {
        increment(self.errors);
    }

    pub(crate) fn interruption(&self, rule_id: Option<u64>) {
        increment(self.interruptions);
        let Some(rule_id) = rule_id else { return };
        let Ok(mut per_rule) = self.per_rule.try_borrow_mut() else {
            return;
        };
        let id = *per_rule.entry(rule_id).or_insert_with(|| {
            define_counter(&format!("{}.interruptions.rule_id.{rule_id}", self.prefix))
        });
        increment(id);
    }
}

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

fn define_counter(name: &str) -> Option<u32> {
    hostcalls::define_metric(MetricType::Counter, name).ok()
}

fn increment(id: Option<u32>) {
    if let Some(id) = id {
        let _ = hostcalls::increment_metric(id, 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_with_labels() {
        assert_eq!(metric_prefix(&[]), "wafer");
        let labels = vec![
            ("owner".to_string(), "team a".to_string()),
            ("env".to_string(), "prod".to_string()),
        ];
        assert_eq!(metric_prefix(&labels), "wafer.owner.team_a.env.prod");
    }
}
