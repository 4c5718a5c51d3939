//! `cairn drop`: empties a database, or deletes a named one with -d (LMDB's `mdb_drop`), in one
//! committed write transaction.

use crate::cli::DropArgs;
use crate::{CliError, CliResult, Context, EnvPath};

/// Runs `cairn drop`.
pub fn run(a: &DropArgs, path: EnvPath) -> CliResult {
    if a.delete && a.subdb.is_none() {
        return Err(CliError::Usage(
            "the main database cannot be deleted, only emptied (leave out -d, or name a database with -s)"
                .into(),
        ));
    }
    let env = path.open_write()?;
    let name = a.subdb.as_deref();
    let label = || format!("database {}", name.unwrap_or("(main)"));
    let mut w = env
        .write_txn()
        .ctx(|| "beginning a write transaction".into())?;
    let db = w.open_db(name).ctx(label)?;
    if a.delete {
        w.drop_db(db).ctx(label)?;
    } else {
        w.clear_db(db).ctx(label)?;
    }
    w.commit().ctx(|| "committing".into())
}
