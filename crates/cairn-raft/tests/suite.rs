//! openraft's own storage test suite (`openraft::testing::Suite`) run on Cairn-Raft's log
//! store and state machine, each store in a fresh node directory.

use cairn_raft::raft::testing::{StoreBuilder, Suite};
use cairn_raft::raft::{StorageError, TypeConfig};
use cairn_raft::{LogStore, StateMachine, Storage};
use tempfile::TempDir;

struct Builder;

impl StoreBuilder<TypeConfig, LogStore, StateMachine, TempDir> for Builder {
    async fn build(&self) -> Result<(TempDir, LogStore, StateMachine), StorageError> {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let storage = Storage::open(&dir.path().join("node")).expect("opening the node");
        Ok((dir, storage.log_store(), storage.state_machine()))
    }
}

#[test]
fn openraft_storage_suite() {
    let t = std::time::Instant::now();
    Suite::test_all(Builder).expect("openraft's storage suite");
    eprintln!("openraft storage suite: {:.1} s", t.elapsed().as_secs_f64());
}
