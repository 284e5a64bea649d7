//! Actions: what a rule does when it matches, and its metadata.
//!
//! Parsing an action list fills a [`RuleActions`]; the compiler merges it with
//! the phase's `SecDefaultAction` and attaches it to the rule.

use crate::seclang::{parse_macro, ActionAst, MacroPart};
use crate::transforms::Transform;

/// The disruptive action of a rule (chain heads only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Disruptive {
    Pass,
    Deny,
    Drop,
    /// `block`: whatever the phase's `SecDefaultAction` says.
    Block,
    Allow(AllowScope),
    Redirect(Vec<MacroPart>),
}

/// `allow` (whole transaction), `allow:phase`, `allow:request`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllowScope {
    All,
    Phase,
    Request,
}

/// `setvar` operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetOp {
    Set(Vec<MacroPart>),
    Add(Vec<MacroPart>),
    Sub(Vec<MacroPart>),
    Delete,
    /// `initcol:<collection>=<key>`: load a persistent collection (key = the macro).
    Init(Vec<MacroPart>),
    /// `expirevar:<collection>.<name>=<seconds>`.
    Expire(Vec<MacroPart>),
}

/// `setvar:[!]coll.key[=[+|-]value]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetVar {
    /// Lowercased collection name (`tx`).
    pub collection: String,
    pub key: Vec<MacroPart>,
    pub op: SetOp,
}

impl SetVar {
    pub fn parse(v: &str) -> Result<SetVar, String> {
        let v = v.trim();
        let (delete, v) = match v.strip_prefix('!') {
            Some(r) => (true, r),
            None => (false, v),
        };
        let (name, value) = match v.split_once('=') {
            Some((n, val)) => (n.trim(), Some(val)),
            None => (v, None),
        };
        let Some((coll, key)) = name.split_once('.') else {
            return Err(format!("setvar: expected collection.name, got \"{name}\""));
        };
        if key.is_empty() {
            return Err(format!("setvar: empty variable name in \"{v}\""));
        }
        let op = if delete {
            SetOp::Delete
        } else {
            match value {
                None => SetOp::Set(vec![MacroPart::Lit("1".into())]),
                Some(val) => {
                    if let Some(r) = val.strip_prefix('+') {
                        SetOp::Add(parse_macro(r))
                    } else if let Some(r) = val.strip_prefix('-') {
                        SetOp::Sub(parse_macro(r))
                    } else {
                        SetOp::Set(parse_macro(val))
                    }
                }
            }
        };
        Ok(SetVar { collection: coll.to_ascii_lowercase(), key: parse_macro(key), op })
    }
}

/// The actions of one rule (or one chain link), as written.
#[derive(Debug, Clone, Default)]
pub struct RuleActions {
    pub id: Option<u64>,
    pub phase: Option<u8>,
    pub disruptive: Option<Disruptive>,
    pub status: Option<u16>,
    pub log: Option<bool>,
    pub auditlog: Option<bool>,
    pub msg: Option<Vec<MacroPart>>,
    pub logdata: Option<Vec<MacroPart>>,
    pub tags: Vec<String>,
    pub severity: Option<u8>,
    pub ver: Option<String>,
    pub rev: Option<String>,
    pub maturity: Option<String>,
    pub accuracy: Option<String>,
    /// `t:none` seen: drop inherited transformations.
    pub t_none: bool,
    pub transforms: Vec<Transform>,
    pub chain: bool,
    pub multi_match: bool,
    pub capture: bool,
    pub setvars: Vec<SetVar>,
    pub skip_after: Option<String>,
    pub skip: u32,
    pub ctls: Vec<Ctl>,
}

/// `ctl:name=value`: changes engine settings for the current transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ctl {
    RuleEngine(EngineMode),
    RequestBodyAccess(bool),
    RequestBodyProcessor(String),
    ForceRequestBodyVariable(bool),
    RuleRemoveById(Vec<(u64, u64)>),
    RuleRemoveByTag(String),
    /// (id ranges, target like `ARGS:foo`)
    RuleRemoveTargetById(Vec<(u64, u64)>, CtlTarget),
    RuleRemoveTargetByTag(String, CtlTarget),
    /// Accepted, no effect in wafer (audit log settings, ...).
    Ignored(String),
}

/// The target of a `ctl:ruleRemoveTarget*` (`ARGS:foo`, `ARGS`,
/// `REQUEST_COOKIES:/^utm/`), resolved when the rule loads so the request
/// path never parses it or compiles its regex.
#[derive(Debug, Clone)]
pub struct CtlTarget {
    pub text: String,
    pub var: crate::vars::Var,
    pub sel: crate::vars::KeySel,
}

impl PartialEq for CtlTarget {
    fn eq(&self, other: &CtlTarget) -> bool {
        self.text == other.text
    }
}

impl Eq for CtlTarget {}

impl CtlTarget {
    pub fn parse(s: &str) -> Result<CtlTarget, String> {
        use crate::vars::{KeySel, Var};
        let s = s.trim();
        let (name, key) = match s.split_once(':') {
            Some((n, k)) => (n, Some(k)),
            None => (s, None),
        };
        let var = Var::from_name(name.trim()).ok_or_else(|| format!("ctl: unknown variable \"{}\" in target \"{s}\"", name.trim()))?;
        let sel = match key {
            None => KeySel::All,
            Some(k) if k.len() >= 2 && k.starts_with('/') && k.ends_with('/') => {
                let pattern = k.get(1..k.len() - 1).unwrap_or("");
                KeySel::Regex(crate::vars::KeyRegex::new(pattern).map_err(|e| format!("ctl: bad target regex /{pattern}/: {e}"))?)
            }
            Some(k) => KeySel::Key(k.trim().to_ascii_lowercase()),
        };
        Ok(CtlTarget { text: s.to_string(), var, sel })
    }
}

/// Parses `1`, `1-5`, `1,3,10-20` into id ranges.
pub fn id_ranges(v: &str) -> Result<Vec<(u64, u64)>, String> {
    let mut out = Vec::new();
    for part in v.split([',', ' ']).map(str::trim).filter(|s| !s.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let a: u64 = a.trim().parse().map_err(|_| format!("bad rule id \"{part}\""))?;
        let b: u64 = b.trim().parse().map_err(|_| format!("bad rule id \"{part}\""))?;
        out.push((a.min(b), a.max(b)));
    }
    Ok(out)
}

fn on_off(v: &str) -> Result<bool, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "on" | "true" | "1" => Ok(true),
        "off" | "false" | "0" => Ok(false),
        _ => Err(format!("expected On or Off, got \"{v}\"")),
    }
}

impl Ctl {
    pub fn parse(v: &str) -> Result<Ctl, String> {
        let (name, value) = v.split_once('=').ok_or_else(|| format!("ctl: expected name=value, got \"{v}\""))?;
        let value = value.trim();
        Ok(match name.trim().to_ascii_lowercase().as_str() {
            "ruleengine" => Ctl::RuleEngine(EngineMode::parse(value)?),
            "requestbodyaccess" => Ctl::RequestBodyAccess(on_off(value)?),
            "requestbodyprocessor" => Ctl::RequestBodyProcessor(value.to_ascii_uppercase()),
            "forcerequestbodyvariable" => Ctl::ForceRequestBodyVariable(on_off(value)?),
            "ruleremovebyid" => Ctl::RuleRemoveById(id_ranges(value)?),
            "ruleremovebytag" => Ctl::RuleRemoveByTag(value.to_string()),
            "ruleremovetargetbyid" => {
                let (ids, target) = value.split_once(';').ok_or_else(|| format!("ctl:ruleRemoveTargetById: expected id;TARGET, got \"{value}\""))?;
                Ctl::RuleRemoveTargetById(id_ranges(ids)?, CtlTarget::parse(target)?)
            }
            "ruleremovetargetbytag" => {
                let (tag, target) = value.split_once(';').ok_or_else(|| format!("ctl:ruleRemoveTargetByTag: expected tag;TARGET, got \"{value}\""))?;
                Ctl::RuleRemoveTargetByTag(tag.trim().to_string(), CtlTarget::parse(target)?)
            }
            "auditengine" | "auditlogparts" | "debugloglevel" | "responsebodyaccess" | "hashengine" | "hashenforcement" | "parsexmlintoargs" => Ctl::Ignored(name.to_string()),
            other => return Err(format!("ctl: unknown option \"{other}\"")),
        })
    }
}

fn severity_number(v: &str) -> Option<u8> {
    let v = v.trim();
    if let Ok(n) = v.parse::<u8>() {
        return (n <= 7).then_some(n);
    }
    let names = ["EMERGENCY", "ALERT", "CRITICAL", "ERROR", "WARNING", "NOTICE", "INFO", "DEBUG"];
    names.iter().position(|n| n.eq_ignore_ascii_case(v)).and_then(|p| u8::try_from(p).ok())
}

/// Parses `phase:2`, `phase:request`, ...
pub fn phase_number(v: &str) -> Option<u8> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" => Some(1),
        "2" | "request" => Some(2),
        "3" => Some(3),
        "4" | "response" => Some(4),
        "5" | "logging" => Some(5),
        _ => None,
    }
}

/// Actions accepted for compatibility that change nothing in wafer (yet).
const ACCEPTED_NOOPS: &[&str] = &["sanitisearg", "sanitisematched", "sanitiserequestheader", "sanitiseresponseheader", "sanitisematchedbytes", "append", "prepend", "deprecatevar", "exec", "pause", "proxy", "xmlns", "setuid", "setsid", "setenv", "setrsc"];

impl RuleActions {
    /// Parses an action list. Err = (offset inside the text, message).
    pub fn parse(list: &[ActionAst]) -> Result<RuleActions, (usize, String)> {
        let mut a = RuleActions::default();
        for act in list {
            let err = |m: String| (act.offset, m);
            let val = || act.value.clone().unwrap_or_default();
            let need = || act.value.clone().ok_or_else(|| (act.offset, format!("action \"{}\" needs a value", act.name)));
            match act.name.to_ascii_lowercase().as_str() {
                "id" => {
                    let v = need()?;
                    let id: u64 = v.trim().parse().map_err(|_| err(format!("id: \"{v}\" is not a positive number")))?;
                    if id == 0 {
                        return Err(err("id: 0 is not allowed".into()));
                    }
                    a.id = Some(id);
                }
                "phase" => {
                    let v = need()?;
                    a.phase = Some(phase_number(&v).ok_or_else(|| err(format!("phase: \"{v}\" is not 1-5, request, response or logging")))?);
                }
                "deny" => a.disruptive = Some(Disruptive::Deny),
                "drop" => a.disruptive = Some(Disruptive::Drop),
                "block" => a.disruptive = Some(Disruptive::Block),
                "pass" => a.disruptive = Some(Disruptive::Pass),
                "allow" => {
                    let scope = match act.value.as_deref().map(|s| s.trim().to_ascii_lowercase()) {
                        None => AllowScope::All,
                        Some(s) if s == "phase" => AllowScope::Phase,
                        Some(s) if s == "request" => AllowScope::Request,
                        Some(s) => return Err(err(format!("allow: unknown scope \"{s}\""))),
                    };
                    a.disruptive = Some(Disruptive::Allow(scope));
                }
                "redirect" => a.disruptive = Some(Disruptive::Redirect(parse_macro(&need()?))),
                "status" => {
                    let v = need()?;
                    let s: u16 = v.trim().parse().ok().filter(|s| (100..=599).contains(s)).ok_or_else(|| err(format!("status: \"{v}\" is not an HTTP status")))?;
                    a.status = Some(s);
                }
                "log" => a.log = Some(true),
                "nolog" => {
                    a.log = Some(false);
                    a.auditlog = Some(false);
                }
                "auditlog" => a.auditlog = Some(true),
                "noauditlog" => a.auditlog = Some(false),
                "msg" => a.msg = Some(parse_macro(&val())),
                "logdata" => a.logdata = Some(parse_macro(&val())),
                "tag" => a.tags.push(val()),
                "severity" => {
                    let v = need()?;
                    a.severity = Some(severity_number(&v).ok_or_else(|| err(format!("severity: unknown \"{v}\"")))?);
                }
                "ver" => a.ver = Some(val()),
                "rev" => a.rev = Some(val()),
                "maturity" => a.maturity = Some(val()),
                "accuracy" => a.accuracy = Some(val()),
                "t" => {
                    let v = need()?;
                    if v.trim().eq_ignore_ascii_case("none") {
                        a.t_none = true;
                        a.transforms.clear();
                    } else {
                        let t = Transform::from_name(v.trim()).ok_or_else(|| err(format!("unknown transformation \"t:{}\"", v.trim())))?;
                        a.transforms.push(t);
                    }
                }
                "chain" => a.chain = true,
                "multimatch" => a.multi_match = true,
                "capture" => a.capture = true,
                "setvar" => a.setvars.push(SetVar::parse(&need()?).map_err(err)?),
                "skipafter" => a.skip_after = Some(need()?.trim().to_string()),
                "skip" => {
                    let v = need()?;
                    a.skip = v.trim().parse().map_err(|_| err(format!("skip: \"{v}\" is not a number")))?;
                }
                "ctl" => a.ctls.push(Ctl::parse(&need()?).map_err(err)?),
                "expirevar" => {
                    let v = need()?;
                    let (name, secs) = v.split_once('=').ok_or_else(|| err(format!("expirevar: expected collection.name=seconds, got \"{v}\"")))?;
                    let mut sv = SetVar::parse(name).map_err(|e| err(e.replace("setvar", "expirevar")))?;
                    sv.op = SetOp::Expire(parse_macro(secs.trim()));
                    // TX lives for one transaction: expiring it changes nothing.
                    if sv.collection != "tx" {
                        a.setvars.push(sv);
                    }
                }
                "initcol" => {
                    let v = need()?;
                    let (coll, key) = v.split_once('=').ok_or_else(|| err(format!("initcol: expected collection=key, got \"{v}\"")))?;
                    let coll = coll.trim().to_ascii_lowercase();
                    if !["ip", "global", "resource", "user", "session"].contains(&coll.as_str()) {
                        return Err(err(format!("initcol: unknown collection \"{coll}\" (ip, global, resource, user, session)")));
                    }
                    a.setvars.push(SetVar { collection: coll, key: Vec::new(), op: SetOp::Init(parse_macro(key.trim())) });
                }
                other if ACCEPTED_NOOPS.contains(&other) => {}
                other => return Err(err(format!("unknown action \"{other}\""))),
            }
        }
        Ok(a)
    }
}

/// `SecRuleEngine`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineMode {
    On,
    Off,
    DetectionOnly,
}

impl EngineMode {
    pub fn parse(v: &str) -> Result<EngineMode, String> {
        match v.trim().to_ascii_lowercase().as_str() {
            "on" => Ok(EngineMode::On),
            "off" => Ok(EngineMode::Off),
            "detectiononly" => Ok(EngineMode::DetectionOnly),
            _ => Err(format!("expected On, Off or DetectionOnly, got \"{v}\"")),
        }
    }
}


#[cfg(test)]
mod tests {
    use super::*;
    use crate::seclang::parse_actions;

    #[test]
    fn parses_common_actions() {
        let l = parse_actions("id:942100,phase:2,block,t:none,t:urlDecodeUni,msg:'SQLi',severity:'CRITICAL',tag:'a',tag:'b',setvar:'tx.score=+%{tx.critical_anomaly_score}',setvar:!tx.x,chain").unwrap();
        let a = RuleActions::parse(&l).unwrap();
        assert_eq!((a.id, a.phase, a.severity), (Some(942100), Some(2), Some(2)));
        assert_eq!(a.disruptive, Some(Disruptive::Block));
        assert!(a.t_none && a.chain);
        assert_eq!(a.tags, ["a", "b"]);
        assert_eq!(a.setvars.len(), 2);
        assert_eq!(a.setvars[1].op, SetOp::Delete);
    }

    #[test]
    fn unknown_action_and_transform_are_errors() {
        let l = parse_actions("id:1,frobnicate").unwrap();
        assert!(RuleActions::parse(&l).unwrap_err().1.contains("frobnicate"));
        let l = parse_actions("id:1,t:nosuch").unwrap();
        assert!(RuleActions::parse(&l).unwrap_err().1.contains("t:nosuch"));
    }
}
