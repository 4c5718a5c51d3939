//! Dirty-page buffers: where a write transaction's copy of a page lives until commit.

use crate::os::MapPages;

/// The bytes of a dirty page (or overflow run): a heap buffer, written into the file with
/// pwrite at commit; or, in a lazy environment that writes in place (`EnvOptions::
/// map_writes`), the page itself in the writable map, sealed where it lies at commit.
pub(crate) enum PageBuf {
    Heap(Box<[u8]>),
    Map(MapPages),
}

impl std::ops::Deref for PageBuf {
    type Target = [u8];
    #[inline(always)]
    fn deref(&self) -> &[u8] {
        match self {
            PageBuf::Heap(b) => b,
            PageBuf::Map(m) => m,
        }
    }
}

impl std::ops::DerefMut for PageBuf {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [u8] {
        match self {
            PageBuf::Heap(b) => b,
            PageBuf::Map(m) => m,
        }
    }
}
