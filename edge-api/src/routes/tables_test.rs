//! The route tables, checked: for each surface (the partner API, the portal's JSON API, the
//! portal's pages), every declared route answers exactly its declared methods through the
//! worker's router, and every other method, one the platform does not know included, is a 405
//! whose `Allow` lists exactly the declared ones. The routes are read from the tables' source
//! (each `match` arm whose value is built from `Route::new()`), so a route added to a table is
//! checked without being listed here.

use std::path::Path;

use quote::ToTokens;
use shared_types::ErrorCode;
use syn::visit::Visit;

/// Every method the platform knows, and one it does not.
const METHODS: &[&str] = &[
    "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE", "REPORT",
    "QUERY",
];

/// What a path parameter reads as in the examples.
const PARAMETER: &str = "id1";

/// One route as its table's source declares it.
struct Declared {
    /// The arm's pattern, to name it.
    pattern: String,
    /// Paths its pattern matches: one per alternative.
    examples: Vec<Vec<String>>,
    /// The methods, in the order declared.
    methods: Vec<String>,
    /// Answered only in sandbox mode (the arm has a guard).
    sandbox_only: bool,
}

/// The routes a table's source file declares.
fn declared(file: &str) -> Vec<Declared> {
    #[derive(Default)]
    struct Arms(Vec<Declared>);
    impl<'ast> Visit<'ast> for Arms {
        fn visit_arm(&mut self, arm: &'ast syn::Arm) {
            if let Some(methods) = methods(&arm.body) {
                self.0.push(Declared {
                    pattern: arm.pat.to_token_stream().to_string(),
                    examples: examples(&arm.pat),
                    methods,
                    sandbox_only: arm.guard.is_some(),
                });
            }
            syn::visit::visit_arm(self, arm);
        }
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut arms = Arms::default();
    arms.visit_file(&syn::parse_file(&text).unwrap());
    arms.0
}

/// The methods a route expression declares, in order: `Route::new().get(a).post(b)` is
/// `[GET, POST]`, also inside `Some(…)` or a block. `None` when it is not built from
/// `Route::new()`.
fn methods(expr: &syn::Expr) -> Option<Vec<String>> {
    match expr {
        syn::Expr::MethodCall(call) => {
            let name = call.method.to_string();
            if !["get", "post", "put", "patch", "delete", "options"].contains(&name.as_str()) {
                return None;
            }
            let mut methods = self::methods(&call.receiver)?;
            methods.push(name.to_ascii_uppercase());
            Some(methods)
        }
        syn::Expr::Call(call) => match &*call.func {
            syn::Expr::Path(path) if path.path.to_token_stream().to_string() == "Route :: new" => {
                Some(Vec::new())
            }
            syn::Expr::Path(path) if path.path.is_ident("Some") => {
                call.args.first().and_then(self::methods)
            }
            _ => None,
        },
        syn::Expr::Block(block) => match block.block.stmts.as_slice() {
            [syn::Stmt::Expr(expr, None)] => self::methods(expr),
            _ => None,
        },
        _ => None,
    }
}

/// A path each alternative of a slice pattern matches (a binding or `_` reads [`PARAMETER`]).
fn examples(pat: &syn::Pat) -> Vec<Vec<String>> {
    match pat {
        syn::Pat::Or(or) => or.cases.iter().flat_map(examples).collect(),
        syn::Pat::Slice(slice) => {
            let mut paths = vec![Vec::new()];
            for element in &slice.elems {
                let choices: Vec<String> = match element {
                    syn::Pat::Lit(syn::PatLit {
                        lit: syn::Lit::Str(text),
                        ..
                    }) => vec![text.value()],
                    syn::Pat::Or(or) => or.cases.iter().flat_map(examples_of_segment).collect(),
                    syn::Pat::Ident(ident) if ident.subpat.is_none() => vec![PARAMETER.into()],
                    syn::Pat::Wild(_) => vec![PARAMETER.into()],
                    other => panic!("unexpected segment pattern {}", other.to_token_stream()),
                };
                paths = paths
                    .iter()
                    .flat_map(|path| {
                        choices.iter().map(move |choice| {
                            let mut longer = path.clone();
                            longer.push(choice.clone());
                            longer
                        })
                    })
                    .collect();
            }
            paths
        }
        other => panic!("unexpected route pattern {}", other.to_token_stream()),
    }
}

fn examples_of_segment(pat: &syn::Pat) -> Vec<String> {
    match pat {
        syn::Pat::Lit(syn::PatLit {
            lit: syn::Lit::Str(text),
            ..
        }) => vec![text.value()],
        other => panic!("unexpected segment pattern {}", other.to_token_stream()),
    }
}

/// Checks every route `file` declares, each path under `prefix`, through the worker's router;
/// returns how many paths were checked.
fn check(file: &str, prefix: &[&str]) -> usize {
    let routes = declared(file);
    assert!(
        routes.len() >= 5,
        "{file}: found only {} routes",
        routes.len()
    );
    let mut checked = 0;
    for route in routes {
        let allow = route.methods.join(", ");
        for example in &route.examples {
            let segments: Vec<&str> = prefix
                .iter()
                .copied()
                .chain(example.iter().map(String::as_str))
                .collect();
            let path = format!("/{}", segments.join("/"));
            let name = format!("{file}: {} ({path})", route.pattern);
            let answer = || super::route(&segments, true);
            let found = answer().unwrap_or_else(|| panic!("{name}: declared, but not routed"));
            let methods: Vec<String> = found.methods().iter().map(|m| m.to_string()).collect();
            assert_eq!(
                methods, route.methods,
                "{name}: routed to other methods than declared (another arm first?)"
            );
            for method in METHODS {
                let declared = route.methods.iter().any(|m| m == method);
                match answer().unwrap().handler(method, &path) {
                    Ok(_) => assert!(declared, "{name}: {method} answered, not declared"),
                    Err(err) => {
                        assert!(!declared, "{name}: {method} declared, not answered");
                        assert_eq!(err.code, ErrorCode::MethodNotAllowed, "{name}: {method}");
                        assert_eq!(err.code.http_status(), 405, "{name}: {method}");
                        assert_eq!(err.allow.as_deref(), Some(allow.as_str()), "{name}");
                    }
                }
            }
            if route.sandbox_only {
                assert!(
                    super::route(&segments, false).is_none(),
                    "{name}: answered outside sandbox mode"
                );
            }
            checked += 1;
        }
    }
    checked
}

#[test]
fn every_partner_api_route_answers_its_methods_and_405_lists_them() {
    assert!(check("routes/mod.rs", &[]) >= 10);
}

#[test]
fn every_portal_api_route_answers_its_methods_and_405_lists_them() {
    assert!(check("portal/api.rs", &["portal", "api"]) >= 25);
}

#[test]
fn every_portal_page_answers_its_methods_and_405_lists_them() {
    assert!(check("portal/pages.rs", &["portal"]) >= 25);
}

#[test]
fn the_source_reading_sees_methods_alternatives_and_parameters() {
    let arm: syn::Arm = syn::parse_quote! {
        ["a", id, "b" | "c"] | [] => Route::new().get(x).post(move |c| y(c, id))
    };
    assert_eq!(methods(&arm.body).unwrap(), ["GET", "POST"]);
    assert_eq!(
        examples(&arm.pat),
        [
            vec!["a", PARAMETER, "b"],
            vec!["a", PARAMETER, "c"],
            Vec::<&str>::new()
        ]
    );
    let not_a_route: syn::Expr = syn::parse_quote! { form.get("csrf_token") };
    assert_eq!(methods(&not_a_route), None);
}
