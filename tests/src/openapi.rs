//! Validates Kubernetes custom resources against their CRD's OpenAPI v3 schema, the way the
//! API server does for `kubectl apply` (strict field validation):
//!
//! - `type` (with `nullable`, `x-kubernetes-int-or-string`), `enum`, `pattern`,
//!   `minLength`/`maxLength` (in characters), `minimum`/`maximum`, `format: int32`,
//!   `minItems`/`maxItems`, `maxProperties`, `required`, `items`, `properties`,
//!   `additionalProperties`, `anyOf`;
//! - unknown fields are errors unless `x-kubernetes-preserve-unknown-fields` (the API server
//!   drops them or, with strict validation, refuses them: either way a typo never applies);
//! - `x-kubernetes-list-type: map`: the `x-kubernetes-list-map-keys` are unique;
//! - `x-kubernetes-validations` (CEL): the rules of the Istio WasmPlugin CRD are implemented
//!   one by one, matched by their exact text. A rule not known here is an error, so a new CRD
//!   never passes with a rule silently skipped.
//!
//! Only what `/work/shared/istio/wasmplugin-crd.yaml`-style CRDs use; enough to catch the
//! mistakes a hand-written manifest makes (a misspelt key, an enum value from another
//! version, a bad checksum).

use serde_json::{Map, Value};

/// A CRD: its group, kind and the schema of each served version.
pub struct Crd {
    pub group: String,
    pub kind: String,
    versions: Vec<(String, Value)>,
}

impl Crd {
    /// Parses a CustomResourceDefinition (YAML).
    pub fn parse(yaml: &str) -> Result<Crd, String> {
        let doc: Value = serde_yaml::from_str(yaml).map_err(|e| format!("CRD: {e}"))?;
        let spec = &doc["spec"];
        let group = spec["group"].as_str().ok_or("CRD: no spec.group")?.to_string();
        let kind = spec["names"]["kind"].as_str().ok_or("CRD: no spec.names.kind")?.to_string();
        let mut versions = Vec::new();
        for v in spec["versions"].as_array().ok_or("CRD: no spec.versions")? {
            if v["served"] != Value::Bool(true) {
                continue;
            }
            let name = v["name"].as_str().ok_or("CRD: version without name")?;
            let schema = v["schema"]["openAPIV3Schema"].clone();
            if schema.is_null() {
                return Err(format!("CRD: version {name} has no openAPIV3Schema"));
            }
            versions.push((name.to_string(), schema));
        }
        Ok(Crd { group, kind, versions })
    }

    /// All errors of one resource (empty: valid).
    pub fn validate(&self, doc: &Value) -> Vec<String> {
        let mut errors = Vec::new();
        let Some(obj) = doc.as_object() else {
            return vec!["the document is not a mapping".into()];
        };
        if doc["kind"].as_str() != Some(&self.kind) {
            errors.push(format!("kind: {:?}, want {:?}", doc["kind"], self.kind));
        }
        let api = doc["apiVersion"].as_str().unwrap_or_default();
        let version = api.strip_prefix(&format!("{}/", self.group));
        let Some((_, schema)) = self.versions.iter().find(|(v, _)| Some(v.as_str()) == version)
        else {
            let served: Vec<String> =
                self.versions.iter().map(|(v, _)| format!("{}/{v}", self.group)).collect();
            errors.push(format!("apiVersion: {api:?} is not served (served: {})", served.join(", ")));
            return errors;
        };
        check_metadata(&doc["metadata"], &mut errors);
        // apiVersion, kind and metadata are the API server's, not the schema's.
        let mut rest = obj.clone();
        for k in ["apiVersion", "kind", "metadata"] {
            rest.remove(k);
        }
        check(schema, &Value::Object(rest), "", &mut errors);
        errors
    }
}

fn check_metadata(meta: &Value, errors: &mut Vec<String>) {
    let dns_subdomain = |s: &str| {
        !s.is_empty()
            && s.len() <= 253
            && s.split('.').all(|l| {
                !l.is_empty()
                    && l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !l.starts_with('-')
                    && !l.ends_with('-')
            })
    };
    match meta["name"].as_str() {
        Some(name) if dns_subdomain(name) => {}
        other => errors.push(format!("metadata.name: {other:?} is not a DNS subdomain")),
    }
    if let Some(ns) = meta.get("namespace") {
        match ns.as_str() {
            Some(ns) if dns_subdomain(ns) && ns.len() <= 63 && !ns.contains('.') => {}
            _ => errors.push(format!("metadata.namespace: {ns} is not a DNS label")),
        }
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn check(schema: &Value, v: &Value, path: &str, errors: &mut Vec<String>) {
    let at = if path.is_empty() { "<root>" } else { path };
    if v.is_null() && schema["nullable"] == Value::Bool(true) {
        return;
    }
    if schema["x-kubernetes-int-or-string"] == Value::Bool(true) {
        if !matches!(type_name(v), "integer" | "string") {
            errors.push(format!("{at}: want an integer or a string, got {}", type_name(v)));
        }
        return;
    }
    if let Some(any) = schema["anyOf"].as_array() {
        let ok = any.iter().any(|s| {
            let mut e = Vec::new();
            check(s, v, path, &mut e);
            e.is_empty()
        });
        if !ok {
            errors.push(format!("{at}: matches none of anyOf"));
        }
    }
    if let Some(want) = schema["type"].as_str() {
        let got = type_name(v);
        if got != want && !(want == "number" && got == "integer") {
            errors.push(format!("{at}: want {want}, got {got}"));
            return;
        }
    }
    if let Some(values) = schema["enum"].as_array() {
        if !values.contains(v) {
            errors.push(format!("{at}: {v} is not one of {}", Value::Array(values.clone())));
        }
    }
    match v {
        Value::String(s) => check_string(schema, s, at, errors),
        Value::Number(n) => {
            if let (Some(min), Some(x)) = (schema["minimum"].as_f64(), n.as_f64()) {
                if x < min {
                    errors.push(format!("{at}: {x} < minimum {min}"));
                }
            }
            if let (Some(max), Some(x)) = (schema["maximum"].as_f64(), n.as_f64()) {
                if x > max {
                    errors.push(format!("{at}: {x} > maximum {max}"));
                }
            }
            if schema["format"] == "int32" && n.as_i64().and_then(|x| i32::try_from(x).ok()).is_none() {
                errors.push(format!("{at}: {n} is not an int32"));
            }
        }
        Value::Array(items) => check_array(schema, items, path, errors),
        Value::Object(map) => check_object(schema, map, path, errors),
        _ => {}
    }
    check_cel(schema, v, at, errors);
}

fn check_string(schema: &Value, s: &str, at: &str, errors: &mut Vec<String>) {
    let chars = s.chars().count() as u64;
    if let Some(min) = schema["minLength"].as_u64() {
        if chars < min {
            errors.push(format!("{at}: shorter than {min} characters"));
        }
    }
    if let Some(max) = schema["maxLength"].as_u64() {
        if chars > max {
            errors.push(format!("{at}: longer than {max} characters"));
        }
    }
    if let Some(pattern) = schema["pattern"].as_str() {
        match regex::Regex::new(pattern) {
            Ok(re) if re.is_match(s) => {}
            Ok(_) => errors.push(format!("{at}: {s:?} does not match {pattern:?}")),
            Err(e) => errors.push(format!("{at}: schema pattern {pattern:?}: {e}")),
        }
    }
}

fn check_array(schema: &Value, items: &[Value], path: &str, errors: &mut Vec<String>) {
    let at = if path.is_empty() { "<root>" } else { path };
    if let Some(max) = schema["maxItems"].as_u64() {
        if items.len() as u64 > max {
            errors.push(format!("{at}: more than {max} items"));
        }
    }
    if let Some(min) = schema["minItems"].as_u64() {
        if (items.len() as u64) < min {
            errors.push(format!("{at}: fewer than {min} items"));
        }
    }
    for (i, item) in items.iter().enumerate() {
        check(&schema["items"], item, &format!("{path}[{i}]"), errors);
    }
    if schema["x-kubernetes-list-type"] == "map" {
        let keys: Vec<&str> = schema["x-kubernetes-list-map-keys"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut seen = Vec::new();
        for item in items {
            let key: Vec<&Value> = keys.iter().map(|k| &item[*k]).collect();
            if seen.contains(&key) {
                errors.push(format!("{at}: duplicate entry for keys {keys:?}: {key:?}"));
            }
            seen.push(key);
        }
    }
}

fn check_object(schema: &Value, map: &Map<String, Value>, path: &str, errors: &mut Vec<String>) {
    let at = if path.is_empty() { "<root>" } else { path };
    if let Some(required) = schema["required"].as_array() {
        for r in required.iter().filter_map(Value::as_str) {
            if !map.contains_key(r) {
                errors.push(format!("{at}: missing required field {r:?}"));
            }
        }
    }
    if let Some(max) = schema["maxProperties"].as_u64() {
        if map.len() as u64 > max {
            errors.push(format!("{at}: more than {max} properties"));
        }
    }
    let preserve = schema["x-kubernetes-preserve-unknown-fields"] == Value::Bool(true);
    let props = schema["properties"].as_object();
    for (k, v) in map {
        let sub = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
        if let Some(s) = props.and_then(|p| p.get(k)) {
            check(s, v, &sub, errors);
        } else if schema["additionalProperties"].is_object() {
            check(&schema["additionalProperties"], v, &sub, errors);
        } else if !preserve && schema["additionalProperties"] != Value::Bool(true) {
            errors.push(format!("{sub}: unknown field"));
        }
    }
}

/// The CEL rules of the WasmPlugin CRD, by their text (whitespace-normalized).
fn check_cel(schema: &Value, v: &Value, at: &str, errors: &mut Vec<String>) {
    let Some(rules) = schema["x-kubernetes-validations"].as_array() else {
        return;
    };
    for rule in rules {
        let text: String = rule["rule"].as_str().unwrap_or_default().split_whitespace().collect::<Vec<_>>().join(" ");
        let message = rule["message"].as_str().unwrap_or("CEL rule failed");
        let ok = match text.as_str() {
            r#"!self.contains("*")"# => !v.as_str().unwrap_or_default().contains('*'),
            r#"self.all(key, !key.contains("*"))"# => {
                v.as_object().is_some_and(|m| m.keys().all(|k| !k.contains('*')))
            }
            "self.all(key, key.size() != 0)" => v.as_object().is_some_and(|m| m.keys().all(|k| !k.is_empty())),
            "self.size() == 0" => v.as_str().is_some_and(str::is_empty),
            r#"(has(self.valueFrom) ? self.valueFrom : "") != "HOST" || !has(self.value)"# => {
                v["valueFrom"] != "HOST" || v.get("value").is_none()
            }
            "(has(self.selector) ? 1 : 0) + (has(self.targetRef) ? 1 : 0) + (has(self.targetRefs) ? 1 : 0) <= 1" => {
                ["selector", "targetRef", "targetRefs"].iter().filter(|k| v.get(**k).is_some()).count() <= 1
            }
            t if t.starts_with("isURL(self) ? (url(self).getScheme() in") => {
                url_scheme_allowed(v.as_str().unwrap_or_default())
            }
            _ => {
                errors.push(format!("{at}: CEL rule not implemented by this validator: {text}"));
                continue;
            }
        };
        if !ok {
            errors.push(format!("{at}: {message}"));
        }
    }
}

/// The URL rule of `spec.url`: a scheme among "", http, https, oci, file (a URL without a
/// scheme is read as `http://` + it, i.e. an OCI reference like `ghcr.io/x/y:1`).
fn url_scheme_allowed(url: &str) -> bool {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            matches!(scheme.to_ascii_lowercase().as_str(), "http" | "https" | "oci" | "file") && !rest.is_empty()
        }
        // Read as http://<url>: any host[:port]/path reference.
        None => !url.is_empty() && !url.contains(char::is_whitespace),
    }
}

/// The Istio WasmPlugin CRD: `ISTIO_CRD`, else `../shared/istio/wasmplugin-crd.yaml` beside
/// the repository (where `make test` finds it; it is not copied into the repository).
pub fn crd_path() -> std::path::PathBuf {
    std::env::var_os("ISTIO_CRD").map(std::path::PathBuf::from).unwrap_or_else(|| {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/istio/wasmplugin-crd.yaml")
    })
}

/// Parses every YAML document of a file (`---` separated), skipping empty ones.
pub fn documents(yaml: &str) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(yaml) {
        let v: Value = serde::Deserialize::deserialize(doc).map_err(|e| e.to_string())?;
        if !v.is_null() {
            out.push(v);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;


    const GOOD: &str = r#"
apiVersion: extensions.istio.io/v1alpha1
kind: WasmPlugin
metadata: { name: wafer, namespace: istio-system }
spec:
  selector: { matchLabels: { istio: ingressgateway } }
  url: oci://registry.example.com/wafer:0.1.0
  sha256: "0000000000000000000000000000000000000000000000000000000000000000"
  imagePullPolicy: IfNotPresent
  failStrategy: FAIL_CLOSE
  phase: AUTHN
  priority: 10
  match: [{ mode: SERVER, ports: [{ number: 8080 }] }]
  pluginConfig: { crs: { paranoia_level: 1 }, anything: [1, 2] }
"#;

    fn errors(yaml: &str) -> Vec<String> {
        let crd = Crd::parse(&std::fs::read_to_string(crd_path()).unwrap()).unwrap();
        crd.validate(&documents(yaml).unwrap()[0])
    }

    #[test]
    fn valid_manifest_passes() {
        assert_eq!(errors(GOOD), Vec::<String>::new());
    }

    #[test]
    fn each_mistake_is_caught() {
        let cases = [
            ("failStrategy: FAIL_CLOSE", "failStrategy: FAIL_CLOSED", "spec.failStrategy"),
            ("phase: AUTHN", "phase: AUTHENTICATION", "spec.phase"),
            ("imagePullPolicy: IfNotPresent", "imagePullPolicy: Never", "spec.imagePullPolicy"),
            ("sha256: \"0000", "sha256: \"000Z", "spec.sha256"),
            ("priority: 10", "priority: 4294967296", "spec.priority"),
            ("priority: 10", "priorty: 10", "spec.priorty: unknown field"),
            ("number: 8080", "number: 70000", "spec.match[0].ports[0].number"),
            ("ports: [{ number: 8080 }]", "ports: [{ number: 80 }, { number: 80 }]", "duplicate entry"),
            ("mode: SERVER", "mode: INBOUND", "spec.match[0].mode"),
            ("url: oci://", "url: ftp://", "url must have schema"),
            ("istio: ingressgateway", "istio: \"*\"", "wildcard not allowed"),
            ("imagePullPolicy: IfNotPresent", "targetRef: { kind: Gateway, name: gw }", "only one of targetRefs or selector"),
            ("name: wafer,", "name: Wafer_1,", "metadata.name"),
            ("apiVersion: extensions.istio.io/v1alpha1", "apiVersion: extensions.istio.io/v9", "apiVersion"),
            ("  url: oci://registry.example.com/wafer:0.1.0\n", "", "missing required field \"url\""),
        ];
        for (from, to, want) in cases {
            assert!(GOOD.contains(from), "{from}");
            let errs = errors(&GOOD.replacen(from, to, 1));
            assert!(errs.iter().any(|e| e.contains(want)), "{to:?}: want an error with {want:?}, got {errs:?}");
        }
    }

    #[test]
    fn url_schemes() {
        assert!(url_scheme_allowed("oci://ghcr.io/a/b:1"));
        assert!(url_scheme_allowed("https://example.com/x.wasm"));
        assert!(url_scheme_allowed("file:///opt/x.wasm"));
        assert!(url_scheme_allowed("ghcr.io/a/b"));
        assert!(!url_scheme_allowed("ftp://example.com/x.wasm"));
    }
}
