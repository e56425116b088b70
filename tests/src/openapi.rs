//! Checks real responses against `edge-api/openapi.json`: the documented status, content type
//! and schema of every response the tests see, the partner API's and the portal JSON API's.
//! The document is the contract their users code against, so a response that drifts from it
//! fails a test rather than a client.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use serde_json::Value;

use crate::Reply;

/// The OpenAPI document.
pub fn document() -> &'static Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(|| {
        let text = std::fs::read_to_string(crate::root().join("edge-api/openapi.json"))
            .expect("read openapi.json");
        serde_json::from_str(&text).expect("openapi.json is JSON")
    })
}

/// The path template of `openapi.json` that the request path `path` (query ignored) falls
/// under, if any: `/portal/api/deliveries/dlv_1/resend` is `/portal/api/deliveries/{id}/resend`.
/// Literal segments win over parameters, segment by segment.
pub fn template_of(path: &str) -> Option<&'static str> {
    let path = path.split(['?', '#']).next().unwrap_or_default();
    let segments: Vec<&str> = path.split('/').collect();
    let templates = document()["paths"].as_object()?;
    templates
        .keys()
        .filter_map(|template| {
            let parts: Vec<&str> = template.split('/').collect();
            if parts.len() != segments.len() {
                return None;
            }
            // One entry per segment: whether it matched as a literal.
            let literal: Option<Vec<bool>> = parts
                .iter()
                .zip(&segments)
                .map(|(part, segment)| {
                    if part.starts_with('{') && part.ends_with('}') {
                        (!segment.is_empty()).then_some(false)
                    } else {
                        (part == segment).then_some(true)
                    }
                })
                .collect();
            Some((literal?, template.as_str()))
        })
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, template)| template)
}

fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// Asserts that `reply` is a documented response of `method path` and matches its schema.
pub fn assert_conforms(path: &str, method: &str, reply: &Reply) {
    let doc = document();
    let operation = &doc["paths"][path][method];
    assert!(
        operation.is_object(),
        "{method} {path} is not in openapi.json"
    );
    let status = reply.status.to_string();
    assert!(
        operation["responses"][&status].is_object(),
        "{method} {path} answered {status}, which openapi.json does not document: {}",
        reply.text
    );
    let pointer = format!(
        "#/paths/{}/{method}/responses/{status}/content/application~1json/schema",
        escape(path)
    );
    let documented = doc
        .pointer(&pointer[1..])
        .or_else(|| {
            // The response may be a $ref to components/responses.
            let reference = operation["responses"][&status]["$ref"].as_str()?;
            doc.pointer(&format!(
                "{}/content/application~1json/schema",
                &reference[1..]
            ))
        })
        .is_some();
    if !documented {
        assert!(
            reply.text.is_empty(),
            "{method} {path} {status} has a body but no documented schema"
        );
        return;
    }
    let content_type = reply.header("content-type").unwrap_or_default();
    assert!(
        content_type.starts_with("application/json"),
        "{method} {path} {status}: content-type {content_type}"
    );
    let schema_ref = match operation["responses"][&status]["$ref"].as_str() {
        Some(reference) => format!("{reference}/content/application~1json/schema"),
        // A URI fragment: braces of path templates must be percent-encoded.
        None => pointer.replace('{', "%7B").replace('}', "%7D"),
    };
    let errors = schema_errors(&schema_ref, &reply.json());
    assert!(
        errors.is_empty(),
        "{method} {path} {status} does not match openapi.json:\n{}\n{}",
        errors.join("\n"),
        reply.text
    );
}

/// Errors of `instance` against the schema at `schema_ref` (a `#/…` reference into the document).
fn schema_errors(schema_ref: &str, instance: &Value) -> Vec<String> {
    let doc = document();
    static VALIDATORS: OnceLock<Mutex<HashMap<String, jsonschema::Validator>>> = OnceLock::new();
    let validators = VALIDATORS.get_or_init(Default::default);
    // A failed assertion elsewhere must not poison the cache for every later test.
    let mut validators = validators.lock().unwrap_or_else(|e| e.into_inner());
    let validator = validators.entry(schema_ref.to_owned()).or_insert_with(|| {
        let mut root = doc.clone();
        root["$ref"] = Value::String(schema_ref.to_owned());
        root["$schema"] = Value::String("https://json-schema.org/draft/2020-12/schema".into());
        jsonschema::draft202012::new(&root)
            .unwrap_or_else(|e| panic!("schema {schema_ref} does not compile: {e}"))
    });
    validator
        .iter_errors(instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

/// Asserts that `instance` matches the component schema `name` (for example `Event`).
pub fn assert_matches_component(name: &str, instance: &Value) {
    let errors = schema_errors(&format!("#/components/schemas/{name}"), instance);
    assert!(
        errors.is_empty(),
        "does not match components/schemas/{name}:\n{}\n{instance}",
        errors.join("\n")
    );
}
