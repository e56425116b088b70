//! Compiles in the hosted page's message catalogues: every `locales/<language>.json` becomes an
//! entry of `LOCALE_FILES`, so adding a language is adding a file.

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("locales");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
        .expect("edge-api/locales")
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let language = path.file_stem()?.to_str()?.to_owned();
            (path.extension()? == "json").then(|| (language, path.display().to_string()))
        })
        .collect();
    files.sort();
    let mut code = String::from("/// Each catalogue's language and its JSON text.\n");
    code.push_str("pub const LOCALE_FILES: &[(&str, &str)] = &[\n");
    for (language, path) in &files {
        println!("cargo:rerun-if-changed={path}");
        writeln!(code, "    ({language:?}, include_str!({path:?})),").expect("write");
    }
    code.push_str("];\n");
    let out = Path::new(&std::env::var("OUT_DIR").expect("OUT_DIR")).join("locales.rs");
    std::fs::write(out, code).expect("write locales.rs");
}
