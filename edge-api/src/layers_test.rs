//! The layering rule, checked: every `crate::`, `super::` and `self::` path in every source file
//! is resolved to the module file it names, and (1) no file uses a module of a higher layer, and
//! (2) the files' use graph has no cycle. And the storage rule: (3) only `db/` writes SQL, and
//! every table is written (`INSERT`, `UPDATE`, `DELETE`) by exactly one of its modules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use quote::ToTokens;
use syn::visit::Visit;

/// Top-level modules by layer, lowest first. A module may use its own layer's and lower ones.
const LAYERS: &[&[&str]] = &[
    &[
        "ctx",
        "error",
        "sql",
        "objects",
        "http",
        "html",
        "locale",
        "query",
        "crypto",
        "webhook_url",
        "wallet_address",
        "route",
    ],
    &["db"],
    &["notify", "chain"],
    &[
        "auth", "throttle", "payments", "checkout", "webhooks", "money", "shard",
    ],
    &["routes", "portal", "cron"],
    &["lib"],
];

fn layer_of(module: &[String]) -> usize {
    let top = module.first().map_or("lib", String::as_str);
    LAYERS
        .iter()
        .position(|layer| layer.contains(&top))
        .unwrap_or_else(|| panic!("module {top} is in no layer: add it to LAYERS"))
}

/// Every `.rs` file under `src`, by module path (`lib.rs` is the empty path).
fn modules(src: &Path) -> BTreeMap<Vec<String>, PathBuf> {
    let mut found = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let relative = path.strip_prefix(src).unwrap().with_extension("");
            let mut module: Vec<String> = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if module.last().is_some_and(|m| m == "mod" || m == "lib") {
                module.pop();
            }
            found.insert(module, path);
        }
    }
    found
}

/// Paths used in a file, as written (`crate::db::x`, `super::Portal`, `chain::quote(..)`), and
/// the names its `use` lines bring in, each with the path it stands for (`chain` for
/// `crate::chain`, `Deriver` for `crate::chain::Deriver`), so that a path starting with such a
/// name (`money::ledger::credit(..)`, a call by path) is read as the full path it is.
#[derive(Default)]
struct Uses {
    paths: Vec<Vec<String>>,
    aliases: BTreeMap<String, Vec<String>>,
}

impl Uses {
    fn tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut path = prefix.clone();
                if n.ident != "self" {
                    path.push(n.ident.to_string());
                }
                if let Some(name) = path.last() {
                    self.aliases.insert(name.clone(), path.clone());
                }
                self.paths.push(path);
            }
            syn::UseTree::Rename(r) => {
                let mut path = prefix.clone();
                if r.ident != "self" {
                    path.push(r.ident.to_string());
                }
                self.aliases.insert(r.rename.to_string(), path.clone());
                self.paths.push(path);
            }
            syn::UseTree::Glob(_) => self.paths.push(prefix.clone()),
            syn::UseTree::Group(g) => g.items.iter().for_each(|t| self.tree(prefix, t)),
        }
    }

    /// Every path used, each starting with a name a `use` line brought in read as the path it
    /// stands for.
    fn expanded(&self) -> Vec<Vec<String>> {
        self.paths
            .iter()
            .map(|path| match path.split_first() {
                Some((first, rest)) if !rest.is_empty() => match self.aliases.get(first) {
                    Some(full) if full.len() > 1 || full.first() != Some(first) => {
                        [full.as_slice(), rest].concat()
                    }
                    _ => path.clone(),
                },
                _ => path.clone(),
            })
            .collect()
    }
}

impl<'ast> Visit<'ast> for Uses {
    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.tree(&mut Vec::new(), &item.tree);
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        // An inline `#[cfg(test)] mod tests` uses its own file (`super::*`): no edge.
        let test_only = item.attrs.iter().any(|a| {
            a.path().is_ident("cfg") && a.meta.to_token_stream().to_string().contains("test")
        });
        if !test_only {
            syn::visit::visit_item_mod(self, item);
        }
    }

    // `pub(super)` names who may see an item, not a use.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    fn visit_path(&mut self, path: &'ast syn::Path) {
        self.paths
            .push(path.segments.iter().map(|s| s.ident.to_string()).collect());
        syn::visit::visit_path(self, path);
    }
}

/// The module file a path names, if it is one of ours.
fn resolve(
    from: &[String],
    path: &[String],
    known: &BTreeMap<Vec<String>, PathBuf>,
) -> Option<Vec<String>> {
    let mut absolute: Vec<String> = match path.first().map(String::as_str) {
        Some("crate") => Vec::new(),
        Some("super") => from[..from.len().saturating_sub(1)].to_vec(),
        Some("self") => from.to_vec(),
        // A bare path that starts with a child module's name (`use webhook_endpoints::x` in `pages`).
        Some(first) if known.contains_key(&[from, &[first.to_owned()]].concat()) => {
            let mut child = from.to_vec();
            child.extend(path.iter().cloned());
            return resolve(from, &[&["crate".to_owned()][..], &child].concat(), known);
        }
        _ => return None,
    };
    let mut rest = &path[1..];
    while rest.first().is_some_and(|s| s == "super") {
        absolute.pop();
        rest = &rest[1..];
    }
    absolute.extend(rest.iter().cloned());
    (0..=absolute.len())
        .rev()
        .map(|n| absolute[..n].to_vec())
        .find(|candidate| known.contains_key(candidate))
}

#[test]
fn no_upward_use_and_no_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let known = modules(&src);
    let mut graph: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    let mut upward = Vec::new();
    for (module, file) in &known {
        let text = std::fs::read_to_string(file).unwrap();
        let mut uses = Uses::default();
        uses.visit_file(&syn::parse_file(&text).unwrap());
        for path in &uses.expanded() {
            let Some(target) = resolve(module, path, &known) else {
                continue;
            };
            // A file naming itself, or the crate root (which only declares modules), is no edge.
            if target.is_empty() || target == *module {
                continue;
            }
            if layer_of(&target) > layer_of(module) {
                upward.push(format!("{} uses {}", module.join("::"), target.join("::")));
            }
            graph.entry(module.clone()).or_default().insert(target);
        }
    }
    assert!(upward.is_empty(), "upward uses:\n{}", upward.join("\n"));

    if let Some(cycle) = find_cycle(&graph) {
        panic!("import cycle: {cycle}");
    }
}

type Graph = BTreeMap<Vec<String>, BTreeSet<Vec<String>>>;

/// A cycle of the graph, written `a -> b -> a`, if it has one (depth-first search for a back
/// edge).
fn find_cycle(graph: &Graph) -> Option<String> {
    fn visit(
        node: &Vec<String>,
        graph: &Graph,
        done: &mut BTreeMap<Vec<String>, bool>,
        stack: &mut Vec<Vec<String>>,
    ) -> Option<String> {
        match done.get(node) {
            Some(true) => return None,
            Some(false) => {
                let start = stack.iter().position(|n| n == node)?;
                let mut cycle: Vec<String> = stack[start..].iter().map(|m| m.join("::")).collect();
                cycle.push(node.join("::"));
                return Some(cycle.join(" -> "));
            }
            None => {}
        }
        done.insert(node.clone(), false);
        stack.push(node.clone());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, done, stack) {
                return Some(cycle);
            }
        }
        stack.pop();
        done.insert(node.clone(), true);
        None
    }
    let mut done = BTreeMap::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut done, &mut Vec::new()))
}

#[test]
fn the_check_sees_a_cycle_and_an_upward_use() {
    let known: BTreeMap<Vec<String>, PathBuf> = [vec![], vec!["db".into()], vec!["routes".into()]]
        .into_iter()
        .map(|m| (m, PathBuf::new()))
        .collect();
    let path = |p: &str| p.split("::").map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(
        resolve(&path("db"), &path("crate::routes::handle"), &known),
        Some(path("routes"))
    );
    assert!(layer_of(&path("routes")) > layer_of(&path("db")));
    assert_eq!(
        resolve(&path("db"), &path("serde::Deserialize"), &known),
        None
    );
    // A call by path through a name a `use` line brought in is a use of the module it names.
    let mut uses = Uses::default();
    uses.visit_file(
        &syn::parse_file(
            "use crate::money;\nfn f() { money::ledger::credit(); }\n\
             use crate::db::parts as p;\nfn g() { p::Part::new(); }",
        )
        .unwrap(),
    );
    let expanded = uses.expanded();
    assert!(
        expanded.contains(&path("crate::money::ledger::credit")),
        "{expanded:?}"
    );
    assert!(
        expanded.contains(&path("crate::db::parts::Part::new")),
        "{expanded:?}"
    );
    let mut graph = Graph::new();
    graph.entry(path("a")).or_default().insert(path("b"));
    graph.entry(path("b")).or_default().insert(path("c"));
    assert_eq!(find_cycle(&graph), None);
    graph.entry(path("c")).or_default().insert(path("a"));
    assert_eq!(find_cycle(&graph).as_deref(), Some("a -> b -> c -> a"));
}

/// The tables a source text writes: the word after `INSERT [OR x] INTO`, `REPLACE INTO`,
/// `UPDATE` and `DELETE FROM`, in its code (comments and an inline test module left out), when
/// it is one of `tables`.
fn written_tables(text: &str, tables: &BTreeSet<String>) -> BTreeSet<String> {
    let code: String = text
        .split("#[cfg(test)]\nmod tests")
        .next()
        .unwrap_or_default()
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let words: Vec<&str> = code
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect();
    let mut found = BTreeSet::new();
    for (i, word) in words.iter().enumerate() {
        let target = match *word {
            "UPDATE" => words.get(i + 1),
            "DELETE" if words.get(i + 1) == Some(&"FROM") => words.get(i + 2),
            "INTO"
                if i > 0 && matches!(words[i - 1], "INSERT" | "REPLACE")
                    || i > 2 && words[i - 3] == "INSERT" && words[i - 2] == "OR" =>
            {
                words.get(i + 1)
            }
            _ => None,
        };
        if let Some(table) = target.filter(|t| tables.contains(**t)) {
            found.insert((*table).to_owned());
        }
    }
    found
}

/// Every table the migrations create.
fn tables() -> BTreeSet<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    let mut tables = BTreeSet::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        let words: Vec<&str> = text.split_whitespace().collect();
        for pair in words.windows(3) {
            if pair[0] == "CREATE" && pair[1] == "TABLE" {
                tables.insert(pair[2].trim_matches('(').to_owned());
            }
        }
    }
    tables
}

#[test]
fn only_db_writes_and_each_table_has_one_writer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let tables = tables();
    assert!(
        tables.contains("chain_sends") && tables.len() > 20,
        "{tables:?}"
    );
    let mut writers: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut outside = Vec::new();
    for (module, file) in modules(&src) {
        if file.ends_with("layers_test.rs")
            || file.ends_with("plan_tests.rs")
            || file.ends_with("scope_tests.rs")
            || file.ends_with("store_tests.rs")
        {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for table in written_tables(&text, &tables) {
            if module.first().map(String::as_str) != Some("db") || module.len() != 2 {
                outside.push(format!("{} writes {table}", module.join("::")));
            }
            writers.entry(table).or_default().insert(module.join("::"));
        }
    }
    assert!(
        outside.is_empty(),
        "SQL writes outside db/:\n{}",
        outside.join("\n")
    );
    let shared: Vec<String> = writers
        .iter()
        .filter(|(_, modules)| modules.len() > 1)
        .map(|(table, modules)| format!("{table}: {modules:?}"))
        .collect();
    assert!(
        shared.is_empty(),
        "tables written by more than one module:\n{}",
        shared.join("\n")
    );
}

#[test]
fn the_write_check_reads_every_kind_of_write() {
    let tables: BTreeSet<String> = ["a", "b", "c", "d", "e"].map(str::to_owned).into();
    let text = "// UPDATE e SET x = 1\n\
        \"INSERT INTO a (x) VALUES (?1)\", \"UPDATE b SET\", \"DELETE FROM c WHERE\", \
        \"INSERT OR IGNORE INTO d\", \"UPDATE nothing\"";
    assert_eq!(
        written_tables(text, &tables),
        ["a", "b", "c", "d"].map(str::to_owned).into()
    );
}
