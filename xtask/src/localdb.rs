//! The local D1 database that `wrangler dev` uses: a SQLite file under the persist directory.

use std::path::{Path, PathBuf};

/// The SQLite file of the worker's one D1 database under `persist_to` (wrangler's
/// `--persist-to`, by default `.wrangler/state`), once wrangler has created it by applying the
/// migrations.
pub fn database_file(persist_to: &Path) -> Result<PathBuf, String> {
    let dir = persist_to.join("v3/d1/miniflare-D1DatabaseObject");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e} (apply the migrations first)", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "sqlite"))
        // Miniflare keeps its own bookkeeping beside the database.
        .filter(|p| p.file_stem().is_some_and(|s| s != "metadata"))
        .collect();
    match files.len() {
        1 => Ok(files.remove(0)),
        0 => Err(format!("no local D1 database in {}", dir.display())),
        _ => Err(format!(
            "more than one local D1 database in {}; remove the stale ones",
            dir.display()
        )),
    }
}

/// The local SQLite files of the institutions' objects (class `Institution` of the worker
/// `payrail`), in name order: none before an institution is held in its object.
pub fn object_files(persist_to: &Path) -> Result<Vec<PathBuf>, String> {
    let dir = persist_to.join("v3/do/payrail-Institution");
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "sqlite"))
        .filter(|p| p.file_stem().is_some_and(|s| s != "metadata"))
        .collect();
    files.sort();
    Ok(files)
}

/// Applies every migration of the worker (`edge-api/migrations/*.sql`, in file-name order, as
/// wrangler does) to `conn`: for tests that need the real schema in a SQLite of their own.
pub fn apply_migrations(conn: &rusqlite::Connection) -> Result<(), String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../edge-api/migrations");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "sql"))
        .collect();
    files.sort();
    for file in files {
        let sql = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        conn.execute_batch(&sql)
            .map_err(|e| format!("{}: {e}", file.display()))?;
    }
    Ok(())
}
