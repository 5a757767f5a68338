//! [`Shared<T>`]: the reference-counted pointer behind storages and views.
//!
//! It is `Rc` without weak references and with recycled boxes: when the last reference
//! dies, the value is dropped and its box goes onto a per-thread free list, from which the
//! next [`Shared::new`] of the same type takes it. A steady-state `alloc_storage` +
//! `alloc_tensor` + `kill` round then makes no call to the system allocator; `malloc` and
//! `free` of the two boxes were a sixth of the round's instructions.
//!
//! Like `Rc`, a `Shared` is neither `Send` nor `Sync` (it holds a raw pointer), so a box
//! is only ever touched by the thread that made it, and the free lists need no locking.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::cell::{Cell, RefCell};
use std::marker::PhantomData;
use std::ptr::{self, NonNull};
use std::thread::LocalKey;

/// Boxes kept per type and thread. Beyond this, boxes go back to the system: a program that
/// once held many views does not keep their memory forever.
const MAX_FREE: usize = 1024;

struct SharedBox<T> {
    strong: Cell<usize>,
    value: T,
}

/// Free boxes of one type: allocated, with no value in them.
pub struct FreeList<T: 'static> {
    boxes: Vec<NonNull<SharedBox<T>>>,
}

impl<T> FreeList<T> {
    pub const fn new() -> FreeList<T> {
        FreeList { boxes: Vec::new() }
    }
}

impl<T> Default for FreeList<T> {
    fn default() -> Self {
        FreeList::new()
    }
}

impl<T> Drop for FreeList<T> {
    fn drop(&mut self) {
        for b in self.boxes.drain(..) {
            // SAFETY: every box in the list came from `alloc` with this layout and holds no
            // value.
            unsafe { dealloc(b.as_ptr().cast(), Layout::new::<SharedBox<T>>()) }
        }
    }
}

/// A type whose [`Shared`] boxes are recycled: it names its per-thread free list.
pub trait Recycled: Sized + 'static {
    fn free_list() -> &'static LocalKey<RefCell<FreeList<Self>>>;

    /// Offered the value when its last reference dies, before it is dropped: return it to
    /// have it dropped, or keep it whole in its box for a later [`Parked::revive`].
    #[inline(always)]
    fn park(value: Parked<Self>) -> Option<Parked<Self>> {
        Some(value)
    }
}

/// Declares the free list of a type: `recycled!(View);`, or with a [`Recycled::park`]:
/// `recycled!(Storage, park = Storage::park);`.
#[macro_export]
macro_rules! recycled {
    ($t:ty) => {
        impl $crate::runtime::shared::Recycled for $t {
            $crate::recycled!(@free_list $t);
        }
    };
    ($t:ty, park = $park:path) => {
        impl $crate::runtime::shared::Recycled for $t {
            $crate::recycled!(@free_list $t);

            #[inline(always)]
            fn park(value: $crate::runtime::shared::Parked<$t>) -> Option<$crate::runtime::shared::Parked<$t>> {
                $park(value)
            }
        }
    };
    (@free_list $t:ty) => {
        fn free_list() -> &'static ::std::thread::LocalKey<::std::cell::RefCell<$crate::runtime::shared::FreeList<$t>>> {
            ::std::thread_local! {
                static FREE: ::std::cell::RefCell<$crate::runtime::shared::FreeList<$t>> =
                    const { ::std::cell::RefCell::new($crate::runtime::shared::FreeList::new()) };
            }
            &FREE
        }
    };
}

/// A single-threaded reference-counted pointer with recycled boxes (see the module docs).
pub struct Shared<T: Recycled> {
    ptr: NonNull<SharedBox<T>>,
    /// Owns a `T`, for drop check; the raw pointer makes it `!Send` and `!Sync`.
    _owns: PhantomData<SharedBox<T>>,
}

impl<T: Recycled> Shared<T> {
    /// A new pointer to `value`.
    #[inline]
    pub fn new(value: T) -> Shared<T> {
        Shared::new_at(|_| value)
    }

    /// A new pointer to the value `make` returns, given the address the value will have
    /// (the ledger's tables record it). The box is taken first, so an inlined `make` builds
    /// the value in place: a value built before the call that takes the box had to be
    /// copied into it (`memcpy` of a 160-byte view, a twentieth of a triple).
    #[inline(always)]
    pub fn new_at(make: impl FnOnce(NonNull<T>) -> T) -> Shared<T> {
        let ptr = Self::take_box();
        // SAFETY: `ptr` is an allocated box without a value; writing one makes it live.
        unsafe {
            let b = ptr.as_ptr();
            ptr::addr_of_mut!((*b).strong).write(Cell::new(1));
            let at = NonNull::new_unchecked(ptr::addr_of_mut!((*b).value));
            at.as_ptr().write(make(at));
        }
        Shared { ptr, _owns: PhantomData }
    }

    #[inline]
    fn take_box() -> NonNull<SharedBox<T>> {
        // `try_with`: during thread teardown the list may be gone; allocate then.
        let reused = T::free_list().try_with(|l| l.try_borrow_mut().ok().and_then(|mut l| l.boxes.pop()));
        match reused {
            Ok(Some(b)) => b,
            _ => Self::alloc_box(),
        }
    }

    #[cold]
    fn alloc_box() -> NonNull<SharedBox<T>> {
        let layout = Layout::new::<SharedBox<T>>();
        // SAFETY: `SharedBox` has a non-zero size (it holds a counter).
        let p = unsafe { alloc(layout) };
        match NonNull::new(p.cast()) {
            Some(p) => p,
            None => handle_alloc_error(layout),
        }
    }

    /// True when both point to the same value.
    #[inline]
    pub fn ptr_eq(a: &Shared<T>, b: &Shared<T>) -> bool {
        a.ptr == b.ptr
    }

    /// The number of pointers to this value.
    pub fn strong_count(this: &Shared<T>) -> usize {
        this.inner().strong.get()
    }

    #[inline(always)]
    fn inner(&self) -> &SharedBox<T> {
        // SAFETY: the box holds a live value while any `Shared` points to it.
        unsafe { self.ptr.as_ref() }
    }
}

impl<T: Recycled> Clone for Shared<T> {
    #[inline]
    fn clone(&self) -> Self {
        let c = &self.inner().strong;
        // As `Rc`: the count cannot overflow without leaking pointers, so abort if it does.
        let n = c.get().wrapping_add(1);
        if n == 0 {
            std::process::abort();
        }
        c.set(n);
        Shared { ptr: self.ptr, _owns: PhantomData }
    }
}

impl<T: Recycled> std::ops::Deref for Shared<T> {
    type Target = T;
    #[inline(always)]
    fn deref(&self) -> &T {
        &self.inner().value
    }
}

impl<T: Recycled> Drop for Shared<T> {
    #[inline]
    fn drop(&mut self) {
        let c = &self.inner().strong;
        let n = c.get() - 1;
        c.set(n);
        if n == 0 {
            self.drop_slow();
        }
    }
}

impl<T: Recycled> Shared<T> {
    #[inline(never)]
    fn drop_slow(&mut self) {
        // This was the last pointer: the type may keep the value; else it drops here.
        drop(T::park(Parked { ptr: self.ptr }));
    }
}

/// A value whose last [`Shared`] died, still whole in its box: what [`Recycled::park`]
/// may keep to [`Parked::revive`] later instead of building a new value. Dropping it drops
/// the value and recycles the box.
pub struct Parked<T: Recycled> {
    ptr: NonNull<SharedBox<T>>,
}

impl<T: Recycled> Parked<T> {
    #[inline(always)]
    pub fn get(&self) -> &T {
        // SAFETY: a parked box holds a live value that nothing else points to.
        unsafe { &(*self.ptr.as_ptr()).value }
    }

    #[inline(always)]
    pub fn get_mut(&mut self) -> &mut T {
        // SAFETY: as in `get`, and `self` is the only way to the value.
        unsafe { &mut (*self.ptr.as_ptr()).value }
    }

    /// The value as a new pointer with one reference.
    #[inline(always)]
    pub fn revive(self) -> Shared<T> {
        let ptr = self.ptr;
        std::mem::forget(self);
        // SAFETY: the box holds a live value; its count was 0.
        unsafe { (*ptr.as_ptr()).strong.set(1) };
        Shared { ptr, _owns: PhantomData }
    }
}

impl<T: Recycled> Drop for Parked<T> {
    fn drop(&mut self) {
        let ptr = self.ptr;
        // SAFETY: the value is live and unreferenced: drop it, then the box holds none.
        unsafe { ptr::drop_in_place(ptr::addr_of_mut!((*ptr.as_ptr()).value)) };
        let kept = T::free_list().try_with(|l| match l.try_borrow_mut() {
            Ok(mut l) if l.boxes.len() < MAX_FREE => {
                l.boxes.push(ptr);
                true
            }
            _ => false,
        });
        if kept != Ok(true) {
            // SAFETY: allocated by `alloc_box` with this layout; no value in it.
            unsafe { dealloc(ptr.as_ptr().cast(), Layout::new::<SharedBox<T>>()) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    struct Probe(Rc<Cell<u32>>, #[allow(dead_code)] u64);
    impl Drop for Probe {
        fn drop(&mut self) {
            self.0.set(self.0.get() + 1);
        }
    }
    crate::recycled!(Probe);

    #[test]
    fn drops_once_when_the_last_pointer_dies_and_reuses_the_box() {
        let drops = Rc::new(Cell::new(0));
        let a = Shared::new(Probe(drops.clone(), 1));
        let b = a.clone();
        assert!(Shared::ptr_eq(&a, &b));
        assert_eq!(Shared::strong_count(&a), 2);
        let addr = &*a as *const Probe;
        drop(a);
        assert_eq!(drops.get(), 0);
        drop(b);
        assert_eq!(drops.get(), 1);
        let c = Shared::new(Probe(drops.clone(), 2));
        assert_eq!(&*c as *const Probe, addr, "the freed box is reused");
        assert_eq!(c.1, 2);
        let d = Shared::new(Probe(drops.clone(), 3));
        assert!(!Shared::ptr_eq(&c, &d));
        drop((c, d));
        assert_eq!(drops.get(), 3);
    }

    #[test]
    fn new_at_passes_the_final_address() {
        let drops = Rc::new(Cell::new(0));
        let mut seen = None;
        let a = Shared::new_at(|at| {
            seen = Some(at.as_ptr() as usize);
            Probe(drops.clone(), 7)
        });
        assert_eq!(seen, Some(&*a as *const Probe as usize));
    }

    #[test]
    fn the_free_list_is_bounded() {
        let drops = Rc::new(Cell::new(0));
        let many: Vec<_> = (0..MAX_FREE as u64 + 10).map(|i| Shared::new(Probe(drops.clone(), i))).collect();
        drop(many);
        assert_eq!(drops.get(), MAX_FREE as u32 + 10);
        Probe::free_list().with(|l| assert!(l.borrow().boxes.len() <= MAX_FREE));
    }
}
