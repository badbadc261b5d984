//! The executable's allocator: small blocks from per-thread size classes, carved from
//! chunks in address order and recycled on free; everything else from the system
//! allocator (book/src/performance.md, "A small-block allocator").
//!
//! A `gpustack` process is short and allocation-bound: a cold `lock` makes about 45,000
//! allocations, nine in ten of them under 1 KiB, and a profile put glibc's `malloc` and
//! `free` at about a seventh of its time. Here a small allocation is a free-list pop or a
//! pointer bump, a free is a push, and blocks of one size class sit next to each other, so
//! fewer pages are touched. Freed blocks are reused by their size class and never returned
//! to the system; a long `matrix` stream keeps reusing the same blocks, so memory stays
//! bounded by what is live at once (per class).
//!
//! Only the `gpustack` executable uses it: the library leaves the allocator to its users.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::UnsafeCell;
use std::ptr::null_mut;

/// Size classes are multiples of this; every block is aligned to it.
const GRAIN: usize = 16;
/// The largest size served from the classes; larger blocks go to the system allocator.
const MAX_SMALL: usize = 1024;
const CLASSES: usize = MAX_SMALL / GRAIN + 1;
/// What one chunk holds: below glibc's `mmap` threshold, so chunks come from its heap.
const CHUNK: usize = 64 * 1024;

/// One thread's free lists (a block's first word points to the next free block of its
/// class) and the rest of its current chunk.
struct Local {
    free: [*mut u8; CLASSES],
    next: *mut u8,
    end: *mut u8,
}

thread_local! {
    // Constant-initialized and without a destructor: always accessible, also while a
    // thread's other thread-locals are being destroyed.
    static LOCAL: UnsafeCell<Local> = const {
        UnsafeCell::new(Local { free: [null_mut(); CLASSES], next: null_mut(), end: null_mut() })
    };
}

/// The allocator (see the module documentation).
pub(crate) struct Small;

/// The size class of a small, modestly aligned layout; `None` for the system allocator.
fn class(layout: Layout) -> Option<usize> {
    (layout.size() <= MAX_SMALL && layout.align() <= GRAIN)
        .then(|| layout.size().max(1).div_ceil(GRAIN))
}

unsafe impl GlobalAlloc for Small {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let Some(c) = class(layout) else {
            // SAFETY: the caller's contract for `alloc`, passed on.
            return unsafe { System.alloc(layout) };
        };
        LOCAL.with(|l| {
            // SAFETY: `LOCAL` is this thread's alone, and nothing below re-enters it (the
            // system allocator never calls back into this one).
            let l = unsafe { &mut *l.get() };
            let head = l.free[c];
            if !head.is_null() {
                // SAFETY: a free block of class `c` holds the next free block's address.
                l.free[c] = unsafe { head.cast::<*mut u8>().read() };
                return head;
            }
            let size = c * GRAIN;
            if (l.end as usize) - (l.next as usize) < size {
                // SAFETY: `CHUNK` is non-zero and `GRAIN` a power of two.
                let chunk =
                    unsafe { System.alloc(Layout::from_size_align_unchecked(CHUNK, GRAIN)) };
                if chunk.is_null() {
                    return null_mut();
                }
                l.next = chunk;
                // SAFETY: `chunk` is the start of `CHUNK` bytes.
                l.end = unsafe { chunk.add(CHUNK) };
            }
            let block = l.next;
            // SAFETY: at least `size` bytes are left in the chunk (checked above).
            l.next = unsafe { block.add(size) };
            block
        })
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let Some(c) = class(layout) else {
            // SAFETY: `ptr` came from `System.alloc` with this layout (see `alloc`).
            return unsafe { System.dealloc(ptr, layout) };
        };
        LOCAL.with(|l| {
            // SAFETY: as in `alloc`. A block freed by another thread than the one that
            // carved it joins this thread's list: the memory is the process's.
            let l = unsafe { &mut *l.get() };
            // SAFETY: the block is at least `GRAIN` bytes and aligned to it.
            unsafe { ptr.cast::<*mut u8>().write(l.free[c]) };
            l.free[c] = ptr;
        });
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `new_size` with `layout.align()` is a valid layout.
        let new = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (class(layout), class(new)) {
            // Still the same class: the block already holds the new size.
            (Some(a), Some(b)) if a == b => ptr,
            // Both large: the system allocator may grow the block in place.
            // SAFETY: `ptr` came from `System` with `layout`.
            (None, None) => unsafe { System.realloc(ptr, layout, new_size) },
            _ => {
                // SAFETY: `new` is a valid, non-zero layout (the caller's contract).
                let to = unsafe { self.alloc(new) };
                if !to.is_null() {
                    // SAFETY: both blocks hold at least the smaller of the two sizes, and
                    // they do not overlap (`ptr` is still allocated).
                    unsafe {
                        std::ptr::copy_nonoverlapping(ptr, to, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                }
                to
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks of every class boundary and beyond, odd alignments, growth and shrinking
    /// across classes and to and from the system allocator, frees on another thread: every
    /// block keeps its bytes until freed, and no two live blocks overlap.
    #[test]
    fn blocks_keep_their_bytes() {
        let a = Small;
        let mut live: Vec<(usize, Layout, u8)> = Vec::new();
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut rand = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let fill = |p: *mut u8, l: Layout, b: u8| unsafe { std::ptr::write_bytes(p, b, l.size()) };
        let check = |p: *mut u8, n: usize, b: u8| {
            for i in 0..n {
                assert_eq!(
                    unsafe { p.add(i).read() },
                    b,
                    "byte {i} of a {n}-byte block"
                );
            }
        };
        for round in 0..20_000u32 {
            let r = rand();
            let tag = u8::try_from(round % 251).unwrap();
            match r % 4 {
                0 | 1 => {
                    let size = [1, 15, 16, 17, 1023, 1024, 1025, 4096, 70_000]
                        [(r >> 8) as usize % 9]
                        + (r >> 20) as usize % 40;
                    let align = [1, 8, 16, 32, 4096][(r >> 40) as usize % 5];
                    let l = Layout::from_size_align(size, align).unwrap();
                    let p = unsafe { a.alloc(l) };
                    assert!(!p.is_null());
                    assert_eq!(p as usize % align, 0);
                    fill(p, l, tag);
                    live.push((p as usize, l, tag));
                }
                2 if !live.is_empty() => {
                    let i = (r >> 8) as usize % live.len();
                    let (p, l, b) = live[i];
                    let new_size = 1 + (r >> 16) as usize % 3000;
                    let q = unsafe { a.realloc(p as *mut u8, l, new_size) };
                    assert!(!q.is_null());
                    check(q, l.size().min(new_size), b);
                    let nl = Layout::from_size_align(new_size, l.align()).unwrap();
                    fill(q, nl, tag);
                    live[i] = (q as usize, nl, tag);
                }
                _ if !live.is_empty() => {
                    let (p, l, b) = live.swap_remove((r >> 8) as usize % live.len());
                    check(p as *mut u8, l.size(), b);
                    unsafe { a.dealloc(p as *mut u8, l) };
                }
                _ => {}
            }
        }
        let mut spans: Vec<(usize, usize)> =
            live.iter().map(|(p, l, _)| (*p, *p + l.size())).collect();
        spans.sort_unstable();
        assert!(
            spans.windows(2).all(|w| w[0].1 <= w[1].0),
            "live blocks overlap"
        );
        // Freed on another thread, then reused there.
        std::thread::spawn(move || {
            for (p, l, b) in live {
                check(p as *mut u8, l.size(), b);
                unsafe { Small.dealloc(p as *mut u8, l) };
            }
            let l = Layout::from_size_align(24, 8).unwrap();
            let p = unsafe { Small.alloc(l) };
            fill(p, l, 7);
            check(p, 24, 7);
            unsafe { Small.dealloc(p, l) };
        })
        .join()
        .unwrap();
    }
}
