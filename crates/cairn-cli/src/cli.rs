//! Command-line grammar. Each subcommand takes the short options of its LMDB counterpart with
//! the same meanings (`cairn dump -a -p db` is `mdb_dump -a -p db`), long spellings beside
//! them, and `-V` for the version. Paths are positional, as in LMDB's tools.

use clap::{ArgAction, Args, Parser, Subcommand};
use std::path::PathBuf;

/// Operate on Cairn environments: the jobs of LMDB's mdb_stat, mdb_dump, mdb_load, mdb_copy,
/// plus a checker, the reader table and dropping databases.
#[derive(Parser, Debug)]
#[command(name = "cairn")]
pub struct Cli {
    /// Print the version and exit.
    #[arg(short = 'V', long = "version", action = ArgAction::SetTrue)]
    pub version: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Environment info, per-database statistics, free pages and readers (mdb_stat).
    Stat(StatArgs),
    /// Write databases in mdb_dump's text format (mdb_dump).
    Dump(DumpArgs),
    /// Read mdb_dump's text format into an environment, all or nothing (mdb_load).
    Load(LoadArgs),
    /// Hot backup, raw or compacted, while writers go on (mdb_copy).
    Copy(CopyArgs),
    /// Walk every page and verify every invariant; exits 1 on any problem.
    Check(CheckArgs),
    /// List the reader table; --check clears slots of dead processes.
    Readers(ReadersArgs),
    /// Empty a database, or delete it with -d (mdb_drop).
    Drop(DropArgs),
    /// Convert an LMDB environment into Cairn's format in place, verified, keeping LMDB's
    /// data file as a backup.
    Migrate(MigrateArgs),
    /// Serve the environment as a JSON document store over HTTP (docs/server.md).
    Serve(ServeArgs),
    /// Run a replicated (Raft) node, or operate a running cluster: init, add-learner,
    /// promote, remove, status, put, get (docs/replication.md).
    Cluster(cairn_raft::cluster::ClusterArgs),
}

/// The options of a subcommand that takes no environment path.
static NO_PATH: Common = Common {
    no_subdir: false,
    version: false,
    path: None,
};

/// Options every subcommand shares, and the environment's path.
#[derive(Args, Debug, Clone)]
pub struct Common {
    /// The path is the data file itself, not a directory holding data.cairn (MDB_NOSUBDIR).
    #[arg(short = 'n', long = "no-subdir")]
    pub no_subdir: bool,
    /// Print the version and exit.
    #[arg(short = 'V', long = "version")]
    pub version: bool,
    /// The environment (the source, for copy).
    pub path: Option<PathBuf>,
}

/// `cairn stat`.
#[derive(Args, Debug)]
pub struct StatArgs {
    /// Environment info (map, pages, last transaction, readers).
    #[arg(short = 'e', long = "env")]
    pub env: bool,
    /// Free pages; -ff lists every free run, -fff every run's pages.
    #[arg(short = 'f', long = "freelist", action = ArgAction::Count)]
    pub freelist: u8,
    /// The reader table; -rr first clears slots of dead processes.
    #[arg(short = 'r', long = "readers", action = ArgAction::Count)]
    pub readers: u8,
    /// Statistics of the main database and every named database.
    #[arg(short = 'a', long = "all", conflicts_with = "subdb")]
    pub all: bool,
    /// Statistics of this named database (instead of the main database).
    #[arg(short = 's', long = "db", value_name = "NAME")]
    pub subdb: Option<String>,
    /// One JSON object on stdout instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub common: Common,
}

/// `cairn dump`.
#[derive(Args, Debug)]
pub struct DumpArgs {
    /// Write to this file instead of stdout.
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// List the named databases, one per line, instead of dumping.
    #[arg(short = 'l', long = "list", conflicts_with = "subdb")]
    pub list: bool,
    /// Print form: printable characters as they are, others as \hh.
    #[arg(short = 'p', long = "print")]
    pub print: bool,
    /// Every database: the main one (when it holds anything) and every named one.
    #[arg(short = 'a', long = "all", conflicts_with = "subdb")]
    pub all: bool,
    /// Only this named database.
    #[arg(short = 's', long = "db", value_name = "NAME")]
    pub subdb: Option<String>,
    /// No progress bar.
    #[arg(short = 'q', long = "quiet")]
    pub quiet: bool,
    #[command(flatten)]
    pub common: Common,
}

/// `cairn load`.
#[derive(Args, Debug)]
pub struct LoadArgs {
    /// Read from this file instead of stdin.
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Load into this named database when the input names none (and always with -T).
    #[arg(short = 's', long = "db", value_name = "NAME")]
    pub subdb: Option<String>,
    /// Keep existing keys: records whose key exists are skipped.
    #[arg(short = 'N', long = "no-overwrite")]
    pub no_overwrite: bool,
    /// Plain text input: no header, lines are key, value, key, value... in print escapes.
    #[arg(short = 'T', long = "text")]
    pub text: bool,
    /// The input is sorted: append every record, and fail on the first out of order
    /// (without -a, sorted runs are appended anyway and the rest inserted).
    #[arg(short = 'a', long = "append")]
    pub append: bool,
    /// No progress bar.
    #[arg(short = 'q', long = "quiet")]
    pub quiet: bool,
    #[command(flatten)]
    pub common: Common,
}

/// `cairn copy`.
#[derive(Args, Debug)]
pub struct CopyArgs {
    /// Compact while copying: rewrite every database densely, leaving free pages out.
    #[arg(short = 'c', long = "compact")]
    pub compact: bool,
    /// No progress bar.
    #[arg(short = 'q', long = "quiet")]
    pub quiet: bool,
    #[command(flatten)]
    pub common: Common,
    /// Where to write the copy: a directory holding no data file yet, created if missing (a
    /// new data file with -n); stdout when left out. Like mdb_copy, never replaces anything.
    pub dst: Option<PathBuf>,
}

/// `cairn check`.
#[derive(Args, Debug)]
pub struct CheckArgs {
    /// One JSON object on stdout instead of text.
    #[arg(long)]
    pub json: bool,
    /// No progress display.
    #[arg(short = 'q', long = "quiet")]
    pub quiet: bool,
    #[command(flatten)]
    pub common: Common,
}

/// `cairn readers`.
#[derive(Args, Debug)]
pub struct ReadersArgs {
    /// Clear the slots of dead processes first, and say how many.
    #[arg(short = 'c', long = "check")]
    pub check: bool,
    /// One JSON object on stdout instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub common: Common,
}

/// `cairn drop`.
#[derive(Args, Debug)]
pub struct DropArgs {
    /// Delete the database instead of emptying it (the main database can only be emptied).
    #[arg(short = 'd', long = "delete")]
    pub delete: bool,
    /// The named database (the main database when left out).
    #[arg(short = 's', long = "db", value_name = "NAME")]
    pub subdb: Option<String>,
    #[command(flatten)]
    pub common: Common,
}

/// `cairn migrate`.
#[derive(Args, Debug)]
pub struct MigrateArgs {
    /// Say what would be done, change nothing.
    #[arg(long = "dry-run")]
    pub dry_run: bool,
    /// Do not keep LMDB's data file (by default it stays as data.mdb.lmdb-backup).
    #[arg(long = "no-backup")]
    pub no_backup: bool,
    /// No progress bar.
    #[arg(short = 'q', long = "quiet")]
    pub quiet: bool,
    #[command(flatten)]
    pub common: Common,
}

/// `cairn serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// The address to listen on (port 0: any free port, printed on stdout).
    #[arg(
        short = 'l',
        long = "listen",
        value_name = "ADDR",
        default_value = "127.0.0.1:8080"
    )]
    pub listen: std::net::SocketAddr,
    /// Lazy durability: writes are acknowledged before they are flushed; a power loss may
    /// take about the last second of them (never the file's consistency).
    #[arg(long)]
    pub lazy: bool,
    /// Logged durability (the default; the flag is kept for scripts that name it): writes
    /// are durable when answered, made so by a record of their changes appended to the commit
    /// log and flushed, not by flushing their pages (docs/design.md, "Logged commits").
    #[arg(long, conflicts_with = "lazy")]
    pub logged: bool,
    /// Page durability: every commit flushes the pages it changed before its writes are
    /// answered, and no commit log is kept (the default before logged; docs/server.md,
    /// "Durability").
    #[arg(long, conflicts_with_all = ["lazy", "logged"])]
    pub flush_pages: bool,
    /// Requests served at once; a burst beyond gets 503.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub max_in_flight: usize,
    /// Largest request body in bytes (413 beyond).
    #[arg(long, value_name = "BYTES", default_value_t = 8 << 20)]
    pub max_body: usize,
    /// Commit each write alone instead of through the group commit (a baseline for
    /// measurements: slower under concurrent writers).
    #[arg(long)]
    pub no_group: bool,
    /// Directory for GET /_backup's temporary copy (default: the system's temporary one).
    #[arg(long, value_name = "DIR")]
    pub backup_dir: Option<PathBuf>,
    /// Documents per step of an index build (each step one write transaction; in a
    /// cluster, one log entry).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub build_batch: usize,
    /// Address space the map reserves, bytes (default 1 TiB); the file can never grow past
    /// it. Smaller for a process with little address space (valgrind, `ulimit -v`).
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1 << 20..))]
    pub map_reserve: Option<u64>,
    #[command(flatten)]
    pub cluster: ClusterServeArgs,
    #[command(flatten)]
    pub common: Common,
}

/// `cairn serve --cluster`: the document server as one node of a Raft cluster
/// (docs/serve-cluster.md). Its environment is a cairn-raft node directory (--dir), not the
/// positional path.
#[derive(Args, Debug)]
pub struct ClusterServeArgs {
    /// Serve as a node of a replicated cluster: writes go through the Raft log.
    #[arg(long, requires_all = ["id", "dir"], conflicts_with_all = ["lazy", "logged", "flush_pages", "no_group"])]
    pub cluster: bool,
    /// This node's id (not 0), unique in the cluster.
    #[arg(long, value_name = "N", requires = "cluster")]
    pub id: Option<u64>,
    /// The node's directory (created if missing).
    #[arg(long, value_name = "DIR", requires = "cluster")]
    pub dir: Option<PathBuf>,
    /// A member, as ID=ADDR (repeat; this node's own entry, at its --listen address, is
    /// skipped). A node never part of a cluster forms one of itself and its peers; every
    /// member is started with the same set.
    #[arg(long = "peer", value_name = "ID=ADDR", requires = "cluster")]
    pub peers: Vec<String>,
    /// Leader heartbeat (and one append-entries RPC's timeout), milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 250, requires = "cluster")]
    pub heartbeat_ms: u64,
    /// Lower bound of the election timeout, milliseconds (the upper one is twice it).
    #[arg(long, value_name = "MS", default_value_t = 1500, requires = "cluster")]
    pub election_ms: u64,
    /// Take a snapshot (and purge the log behind it) every this many applied entries.
    #[arg(long, value_name = "N", default_value_t = 20000, requires = "cluster")]
    pub snapshot_every: u64,
}

impl Command {
    /// The options every subcommand has.
    pub fn common(&self) -> &Common {
        match self {
            Command::Stat(a) => &a.common,
            Command::Dump(a) => &a.common,
            Command::Load(a) => &a.common,
            Command::Copy(a) => &a.common,
            Command::Check(a) => &a.common,
            Command::Readers(a) => &a.common,
            Command::Drop(a) => &a.common,
            Command::Migrate(a) => &a.common,
            Command::Serve(a) => &a.common,
            // No environment path: a node's directory is its --dir.
            Command::Cluster(_) => &NO_PATH,
        }
    }
}
