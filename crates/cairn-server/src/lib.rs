//! # cairn-server
//!
//! `cairn serve`: a JSON document server over one Cairn environment (docs/server.md). A
//! collection is a `cairn_doc` collection (docs/doc.md): documents under ids, secondary
//! indexes and a change feed, written in the same transaction; a document is a JSON object
//! stored under its id with a version (its ETag: the feed sequence number of its last write). axum routes on hyper's HTTP/1.1 (keep-alive) over tokio.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let cfg = cairn_server::Config::new("/tmp/docs");
//! let server = cairn_server::Server::bind(cfg).await?;
//! println!("listening on {}", server.local_addr());
//! server.run(std::future::pending()).await?;
//! # Ok(()) }
//! ```
//!
//! One middleware, the guard (module `guard`), around every route: 503 once `max_in_flight`
//! requests are being served, 413 for a declared body over the limit, a timeout per request
//! (408; it covers reading the body, so slow clients are cut off), a panicking handler
//! answered 500, and JSON error bodies ([`error::json_errors`]). hyper's header-read timeout
//! closes connections that send no complete request head in time, idle keep-alive
//! connections included.
//!
//! Invariants:
//! - Durability: a write is answered 2xx only after its group commit returned; in durable
//!   mode (the default) that commit is flushed, so an acknowledged write survives a crash or
//!   a power loss. In lazy mode (`Config::lazy`) a power loss may take about the last second
//!   of acknowledged writes (the engine's `sync_every`), never the file's consistency; a
//!   process crash alone loses nothing committed.
//! - The event loop never waits on the engine: every transaction runs on the blocking pool
//!   (module `routes`).
//! - Every error response is JSON (module `error`).

pub mod cluster;
mod conn;
pub mod decode;
pub mod error;
mod fast;
mod guard;
mod readers;
mod routes;
pub mod store;
mod writer;

use axum::routing::{get, post};
use axum::Router;
use cairn::{Durability, Env};
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// A boxed error for the server's setup and run.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What to serve and how.
#[derive(Debug, Clone)]
pub struct Config {
    /// The environment (a directory, or the data file with `no_subdir`).
    pub path: PathBuf,
    /// The path is the data file itself.
    pub no_subdir: bool,
    /// Where to listen (port 0: any free port; see [`Server::local_addr`]).
    pub listen: SocketAddr,
    /// Serve from the engine's lazy mode (see the crate's invariants).
    pub lazy: bool,
    /// Serve from the engine's logged mode (the default): writes are durable when answered,
    /// through the commit log (one record and one log flush per group commit) instead of the
    /// pages. Off (and not lazy), every commit flushes its pages: the server's default until
    /// the measurements in docs/server.md "Durability" moved it.
    pub logged: bool,
    /// Largest request body, bytes (413 beyond).
    pub max_body: usize,
    /// Requests served at once; more are answered 503 at once rather than queued without bound.
    pub max_in_flight: usize,
    /// Longest time for one request, body included (408 beyond).
    pub request_timeout: Duration,
    /// Longest time to wait for a request's head, idle keep-alive connections included.
    pub header_timeout: Duration,
    /// Where `GET /_backup` writes its temporary copy (the system's temporary directory if
    /// none).
    pub backup_dir: Option<PathBuf>,
    /// Most collections. Each is 3 + (its indexes) named databases (cairn-doc's layout); the
    /// engine's `max_dbs` is set to 8 per collection (room for 5 indexes each on average).
    pub max_collections: u32,
    /// Reads (and backups) running on the blocking pool at once; more wait as tasks. Reads
    /// are short and CPU-bound: a few per core keep the cores busy without thrashing.
    pub read_threads: usize,
    /// Threads of the server's own that run reads of a document by id (module `readers`):
    /// two, so that one read waiting on the disk does not hold up the others.
    pub reader_threads: usize,
    /// Writes in one group commit at most (the writer thread takes the writes queued while
    /// the previous commit flushed, up to this many); more wait as tasks. Without group
    /// commit: the writes running at once on blocking threads.
    pub write_threads: usize,
    /// Writes share commits through the engine's group commit (the default). Off, each
    /// request commits (and in durable mode flushes) alone: the baseline it is measured
    /// against (docs/bench/serve).
    pub group_commit: bool,
    /// Documents per step of a background index build (each step one write transaction).
    pub build_batch: usize,
    /// Connections the kernel holds accepted-but-not-yet-taken (the listen backlog; the
    /// kernel caps it at `net.core.somaxconn`). Past it, a client's handshake is dropped and
    /// retried after a second: 4,000 clients connecting at once overflowed the 1,024 that
    /// tokio's `TcpListener::bind` asks for (docs/bench/serve, 4,000 connections).
    pub backlog: u32,
    /// Address space the environment's map reserves (`EnvOptions::map_reserve`; `None`: the
    /// engine's default, 1 TiB). The file can never grow past it; a smaller one suits a
    /// process with little address space (a valgrind run, `ulimit -v`).
    pub map_reserve: Option<u64>,
}

impl Config {
    /// Defaults: 127.0.0.1:8080, durable through the commit log (logged), 8 MiB bodies, 1,024 requests in flight, 30 s
    /// per request and per request head, 1,024 collections.
    pub fn new(path: impl Into<PathBuf>) -> Config {
        Config {
            path: path.into(),
            no_subdir: false,
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            lazy: false,
            logged: true,
            max_body: 8 << 20,
            max_in_flight: 1024,
            request_timeout: Duration::from_secs(30),
            header_timeout: Duration::from_secs(30),
            backup_dir: None,
            max_collections: 1024,
            read_threads: 16,
            reader_threads: 2,
            write_threads: 256,
            group_commit: true,
            build_batch: cairn_doc::DEFAULT_BUILD_BATCH,
            backlog: 8192,
            map_reserve: None,
        }
    }

    /// Opens the environment as configured.
    pub fn open_env(&self) -> cairn::Result<Env> {
        let durability = match (self.lazy, self.logged) {
            (true, _) => Durability::Lazy,
            (false, true) => Durability::Logged,
            _ => Durability::Durable,
        };
        let mut opts = Env::options();
        if let Some(bytes) = self.map_reserve {
            opts = opts.map_reserve(bytes);
        }
        opts.durability(durability)
            .no_subdir(self.no_subdir)
            .max_dbs(self.max_collections.saturating_mul(DBS_PER_COLLECTION))
            // One reader per read thread at most (reads run behind the read gate) and per
            // reader thread, and room for other processes' readers.
            .max_readers(
                (self.read_threads as u32)
                    .saturating_add(self.reader_threads as u32)
                    .saturating_add(110),
            )
            .open(&self.path)
    }
}

/// Named databases reserved per collection in `max_dbs` (docs, feed, catalog, 5 indexes).
const DBS_PER_COLLECTION: u32 = 8;

/// Limits the handlers read.
#[derive(Debug, Clone)]
pub struct Limits {
    /// See [`Config::max_body`].
    pub max_body: usize,
    /// See [`Config::max_in_flight`].
    pub max_in_flight: usize,
    /// See [`Config::backup_dir`].
    pub backup_dir: Option<PathBuf>,
}

/// What every handler shares.
pub struct AppState {
    /// The environment.
    pub env: Arc<Env>,
    colls: store::Colls,
    ids: store::IdGen,
    max_id: usize,
    limits: Limits,
    read_gate: tokio::sync::Semaphore,
    /// Threads of the server's own for reads by id (module `readers`).
    readers: readers::Readers,
    /// Without group commit: bounds the blocking threads writing at once.
    write_gate: tokio::sync::Semaphore,
    /// With group commit: the thread that runs the writes (module `writer`).
    writer: writer::Writer,
    group_commit: bool,
    build_batch: usize,
    request_timeout: Duration,
    /// Bumped after every committed write request: wakes the feed's long polls and streams.
    changed: tokio::sync::watch::Sender<u64>,
    /// Set when the server stops: ends the feed's streams.
    shutdown: tokio::sync::watch::Sender<bool>,
}

impl AppState {
    /// State over an open environment; starts the reader threads (an error if the system
    /// refuses a thread).
    pub fn new(env: Env, cfg: &Config) -> std::io::Result<Arc<AppState>> {
        let env = Arc::new(env);
        Ok(Arc::new(AppState {
            // cairn-doc's ids are 1 to 255 bytes.
            max_id: env.max_key_size().min(255),
            writer: writer::Writer::start(env.clone(), cfg.write_threads.max(1))?,
            env,
            colls: Default::default(),
            ids: Default::default(),
            limits: Limits {
                max_body: cfg.max_body,
                max_in_flight: cfg.max_in_flight,
                backup_dir: cfg.backup_dir.clone(),
            },
            read_gate: tokio::sync::Semaphore::new(cfg.read_threads.max(1)),
            readers: readers::Readers::start(cfg.reader_threads)?,
            write_gate: tokio::sync::Semaphore::new(cfg.write_threads.max(1)),
            group_commit: cfg.group_commit,
            build_batch: cfg.build_batch.max(1),
            request_timeout: cfg.request_timeout,
            changed: tokio::sync::watch::channel(0).0,
            shutdown: tokio::sync::watch::channel(false).0,
        }))
    }

    /// Opens every collection and restarts the builds of the indexes left Building (by a
    /// restart or a crash). Blocking.
    pub fn resume_builds(self: &Arc<Self>) -> Result<(), error::ApiError> {
        for name in store::collection_names(&self.env)? {
            if let Some(h) = self.colls.existing(&self.env, &name)? {
                for i in h.indexes().map_err(store::doc_error)? {
                    if let cairn_doc::IndexState::Building { .. } = i.state {
                        self.spawn_builder(h.clone(), i.name);
                    }
                }
            }
        }
        Ok(())
    }

    /// Builds an index on a thread of its own, one committed step of `build_batch` documents
    /// at a time (each a grouped write: writers queued meanwhile go between steps), until it
    /// is Ready or Failed, it is dropped, or the server stops (the next start resumes it).
    pub(crate) fn spawn_builder(self: &Arc<Self>, h: Arc<cairn_doc::Handle>, index: String) {
        let st = self.clone();
        std::thread::spawn(move || {
            while !*st.shutdown.borrow() {
                match h.build_step(&index, st.build_batch) {
                    Ok(cairn_doc::IndexState::Building { .. }) => std::thread::yield_now(),
                    // Ready, Failed (the state says why), dropped, or an engine error: the
                    // state stays readable through GET, and a restart resumes a Building one.
                    _ => return,
                }
            }
        });
    }
}

/// The routes alone, without the layers (see [`with_layers`]).
pub fn routes(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/_health", get(routes::health))
        .route("/_stats", get(routes::stats))
        .route("/_backup", get(routes::backup))
        .route("/{collection}", get(routes::list).post(routes::post_doc))
        .route("/{collection}/_bulk", post(routes::bulk))
        .route("/{collection}/_changes", get(routes::changes))
        .route(
            "/{collection}/_index/{name}",
            get(routes::get_index)
                .put(routes::put_index)
                .delete(routes::delete_index),
        )
        .route(
            "/{collection}/",
            get(routes::empty_id)
                .put(routes::empty_id)
                .delete(routes::empty_id),
        )
        .route(
            "/{collection}/{id}",
            get(routes::get_doc)
                .put(routes::put_doc)
                .delete(routes::delete_doc),
        )
        .fallback(routes::not_found)
        .with_state(state)
}

/// The server's guard (module `guard`: the in-flight bound, the declared body limit, the
/// request timeout, panics as 500 and errors as JSON) with `cfg`'s limits.
fn guard_layer(cfg: &Config) -> guard::GuardLayer {
    guard::GuardLayer::new(cfg.max_in_flight, cfg.max_body, cfg.request_timeout)
}

/// Wraps each route of a router in the server's guard, for a router served by other means
/// than [`Server`] (merged with other routes: `serve --cluster`). [`Server`] puts one guard
/// around its whole application instead, which costs less per request.
pub fn with_layers(router: Router, cfg: &Config) -> Router {
    router.layer(guard_layer(cfg))
}

/// The application with each route guarded ([`with_layers`]), to serve by other means than
/// [`Server`].
pub fn router(state: Arc<AppState>, cfg: &Config) -> Router {
    with_layers(routes(state), cfg)
}

/// A listening socket on `addr` with a listen backlog of `backlog` (as std's and tokio's
/// `bind`, with `SO_REUSEADDR`, so a restarted server can take its port back at once).
pub(crate) fn listen(addr: SocketAddr, backlog: u32) -> std::io::Result<tokio::net::TcpListener> {
    let sock = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    sock.set_reuseaddr(true)?;
    sock.bind(addr)?;
    sock.listen(backlog)
}

/// A bound server, not yet serving.
pub struct Server {
    listener: tokio::net::TcpListener,
    router: Router,
    guard: guard::GuardLayer,
    header_timeout: Duration,
    state: Arc<AppState>,
}

impl Server {
    /// Opens the environment and binds the listening socket.
    pub async fn bind(cfg: Config) -> Result<Server, BoxError> {
        Server::bind_with(cfg, |state, _| routes(state)).await
    }

    /// As [`Server::bind`], with the application built by `app` ([`routes`]; tests add
    /// routes of their own). The server's guard goes around the whole application, once
    /// (`app` adds none).
    pub async fn bind_with(
        cfg: Config,
        app: impl FnOnce(Arc<AppState>, &Config) -> Router,
    ) -> Result<Server, BoxError> {
        let c = cfg.clone();
        let env = tokio::task::spawn_blocking(move || c.open_env()).await??;
        let listener = listen(cfg.listen, cfg.backlog)?;
        let state = AppState::new(env, &cfg)?;
        let st = state.clone();
        tokio::task::spawn_blocking(move || st.resume_builds())
            .await?
            .map_err(|e| e.to_string())?;
        Ok(Server {
            listener,
            router: app(state.clone(), &cfg),
            guard: guard_layer(&cfg),
            header_timeout: cfg.header_timeout,
            state,
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)))
    }

    /// The environment served.
    pub fn env(&self) -> &Env {
        &self.state.env
    }

    /// Serves until `shutdown` completes, then stops accepting, lets the connections finish
    /// their requests (at most 10 s) and returns.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), BoxError> {
        use hyper_util::rt::{TokioIo, TokioTimer};
        let mut http = hyper::server::conn::http1::Builder::new();
        http.timer(TokioTimer::new())
            .header_read_timeout(self.header_timeout)
            .keep_alive(true);
        let graceful = hyper_util::server::graceful::GracefulShutdown::new();
        tokio::pin!(shutdown);
        loop {
            let conn = tokio::select! {
                r = self.listener.accept() => r,
                () = &mut shutdown => break,
            };
            let stream = match conn {
                Ok((s, _)) => s,
                Err(_) => {
                    // Out of file descriptors and the like: pause rather than spin; the
                    // connections already open go on.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            };
            // Small JSON responses: no Nagle delay behind the client's delayed ACK.
            let _ = stream.set_nodelay(true);
            // One guard around the router, not one per route: a request then passes through
            // one boxed service fewer (module `guard`); GETs by id skip the router (module
            // `fast`).
            let svc = hyper_util::service::TowerToHyperService::new(tower::Layer::layer(
                &self.guard,
                fast::FastGet::new(self.state.clone(), self.router.clone()),
            ));
            let conn =
                graceful.watch(http.serve_connection(TokioIo::new(conn::Conn::new(stream)), svc));
            tokio::spawn(async move {
                let _ = conn.await;
            });
        }
        drop(self.listener);
        // Ends the feed's streams, which would otherwise hold their connections open.
        self.state.shutdown.send_replace(true);
        tokio::select! {
            () = graceful.shutdown() => {}
            () = tokio::time::sleep(Duration::from_secs(10)) => {}
        }
        Ok(())
    }
}

/// `cairn serve`: runs a server on a runtime of its own until SIGINT or SIGTERM; prints
/// `listening on ADDR` on stdout once bound.
pub fn serve(cfg: Config) -> Result<(), BoxError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        // The gates (Config::read_threads, write_threads) bound the blocking threads in use;
        // a few more for the runtime's own file I/O (a backup's stream).
        .max_blocking_threads(cfg.read_threads + cfg.write_threads + 8)
        .build()?;
    let mut stopped = None;
    let slot = &mut stopped;
    let r = rt.block_on(async move {
        let server = Server::bind(cfg).await?;
        *slot = Some(server.state.writer.stopped());
        {
            use std::io::Write;
            let mut out = std::io::stdout();
            writeln!(out, "listening on {}", server.local_addr())?;
            out.flush()?;
        }
        server.run(shutdown_signal()).await
    });
    // Dropping the runtime drops the tasks that still hold the state; the writer thread then
    // finds its queue closed, ends and drops its handle of the environment, the last one,
    // which closes it (a lazy environment's last flush). Wait for that, bounded: a commit in
    // flight behind another process's writer must not hold the exit forever.
    drop(rt);
    if let Some(s) = stopped {
        s.wait(Duration::from_secs(30));
    }
    r
}

pub(crate) async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
