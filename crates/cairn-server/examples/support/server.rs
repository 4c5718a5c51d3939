//! A `cairn serve` on a loopback port in a thread of its own (one runtime worker), for the
//! measuring examples (included by path).

use std::net::SocketAddr;

/// A running server; `stop` ends it and waits for its thread.
pub struct Running {
    pub addr: SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

/// Starts a server over a new environment in `dir`.
pub fn start(dir: &std::path::Path) -> Running {
    let mut cfg = cairn_server::Config::new(dir);
    cfg.listen = "127.0.0.1:0".parse().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let s = cairn_server::Server::bind(cfg).await.unwrap();
            tx.send(s.local_addr()).unwrap();
            s.run(async move {
                let _ = stop_rx.await;
            })
            .await
            .unwrap();
        });
    });
    Running {
        addr: rx.recv().unwrap(),
        stop,
        thread,
    }
}

impl Running {
    pub fn stop(self) {
        let _ = self.stop.send(());
        self.thread.join().unwrap();
    }
}
