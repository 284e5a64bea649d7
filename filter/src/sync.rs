//! Locks that outlive a panic.

use std::sync::{Mutex, MutexGuard};

/// Locks a mutex whatever a panic left in it: every value behind one here stays valid at every
/// step (a panic cannot leave half an update), and a stream must not fail because another one
/// panicked (the dynamic module catches panics).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
