//! The connection table's storage: a slab (a vector of entries whose vacant ones are
//! chained into a free list, so keys stay stable and are reused), as the `slab` crate
//! lays it out, plus the one operation that crate lacks: [`Table::discard_with`] drops
//! an entry where it lies. A connection block is hundreds of bytes, and taking it out
//! by value to drop it would copy it twice per closed connection.

use std::ops::{Index, IndexMut};

enum Entry<T> {
    /// Free; the next free key (`entries.len()` ends the list).
    Vacant(usize),
    Occupied(T),
}

pub(crate) struct Table<T> {
    entries: Vec<Entry<T>>,
    /// The first free key: a vacant entry's, or `entries.len()`.
    next_free: usize,
    len: usize,
}

impl<T> Table<T> {
    pub(crate) fn with_capacity(capacity: usize) -> Table<T> {
        Table {
            entries: Vec::with_capacity(capacity),
            next_free: 0,
            len: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The key the next [`insert_with`](Self::insert_with) returns.
    pub(crate) fn vacant_key(&self) -> usize {
        self.next_free
    }

    /// Store `value`; its key. (The engine builds its blocks in place through
    /// [`insert_with`](Self::insert_with).)
    #[cfg(test)]
    pub(crate) fn insert(&mut self, value: T) -> usize {
        self.insert_with(|| value).0
    }

    /// Store the value `make` builds, called once its entry is found, so that a large
    /// value can be built where it goes; its key, and the value where it lies (no second
    /// look-up to finish it there).
    #[inline]
    pub(crate) fn insert_with(&mut self, make: impl FnOnce() -> T) -> (usize, &mut T) {
        let key = self.next_free;
        if key == self.entries.len() {
            // No vacant entry: add one, so that `make` has one call site below (a large
            // value is then built straight into its entry, not built twice over).
            self.entries.push(Entry::Vacant(key + 1));
        }
        let entry = &mut self.entries[key];
        let Entry::Vacant(next) = *entry else {
            unreachable!("the free list holds vacant entries only");
        };
        self.next_free = next;
        *entry = Entry::Occupied(make());
        self.len += 1;
        let Entry::Occupied(value) = entry else {
            unreachable!("just filled");
        };
        (key, value)
    }

    pub(crate) fn get(&self, key: usize) -> Option<&T> {
        match self.entries.get(key) {
            Some(Entry::Occupied(v)) => Some(v),
            _ => None,
        }
    }

    pub(crate) fn get_mut(&mut self, key: usize) -> Option<&mut T> {
        match self.entries.get_mut(key) {
            Some(Entry::Occupied(v)) => Some(v),
            _ => None,
        }
    }

    /// Takes the value at `key` out (moving it), or `None` when `key` is vacant.
    pub(crate) fn remove(&mut self, key: usize) -> Option<T> {
        let entry = self.entries.get_mut(key)?;
        if !matches!(entry, Entry::Occupied(_)) {
            return None;
        }
        let old = std::mem::replace(entry, Entry::Vacant(self.next_free));
        self.next_free = key;
        self.len -= 1;
        match old {
            Entry::Occupied(v) => Some(v),
            Entry::Vacant(_) => None,
        }
    }

    /// Lets `last` see the value at `key`, then drops it in place; false when `key` is
    /// vacant. One look-up for both.
    pub(crate) fn discard_with(&mut self, key: usize, last: impl FnOnce(&mut T)) -> bool {
        match self.entries.get_mut(key) {
            Some(entry) => {
                let Entry::Occupied(value) = entry else {
                    return false;
                };
                last(value);
                // The assignment drops the value where it lies: no copy.
                *entry = Entry::Vacant(self.next_free);
                self.next_free = key;
                self.len -= 1;
                true
            }
            None => false,
        }
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (usize, &T)> {
        self.entries
            .iter()
            .enumerate()
            .filter_map(|(k, e)| match e {
                Entry::Occupied(v) => Some((k, v)),
                Entry::Vacant(_) => None,
            })
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (usize, &mut T)> {
        self.entries
            .iter_mut()
            .enumerate()
            .filter_map(|(k, e)| match e {
                Entry::Occupied(v) => Some((k, v)),
                Entry::Vacant(_) => None,
            })
    }
}

impl<T> Index<usize> for Table<T> {
    type Output = T;
    fn index(&self, key: usize) -> &T {
        self.get(key).expect("no entry at this key")
    }
}

impl<T> IndexMut<usize> for Table<T> {
    fn index_mut(&mut self, key: usize) -> &mut T {
        self.get_mut(key).expect("no entry at this key")
    }
}

/// Bytes one entry of a `Table<T>` takes.
pub(crate) fn entry_bytes<T>() -> usize {
    std::mem::size_of::<Entry<T>>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    use std::rc::Rc;

    #[test]
    fn keys_are_reused_last_freed_first() {
        let mut t = Table::with_capacity(4);
        assert_eq!((t.insert('a'), t.insert('b'), t.insert('c')), (0, 1, 2));
        assert_eq!(t.remove(1), Some('b'));
        assert!(t.discard_with(0, |_| {}));
        assert_eq!(t.vacant_key(), 0);
        assert_eq!(t.insert('d'), 0);
        assert_eq!(t.insert('e'), 1);
        assert_eq!(t.insert('f'), 3);
        assert_eq!(t.len(), 4);
        assert_eq!(t.remove(7), None);
        assert!(!t.discard_with(9, |_| {}));
        assert_eq!(
            t.iter().map(|(k, v)| (k, *v)).collect::<Vec<_>>(),
            [(0, 'd'), (1, 'e'), (2, 'c'), (3, 'f')]
        );
    }

    #[test]
    fn discard_drops_the_value_once() {
        let token = Rc::new(());
        let mut t = Table::with_capacity(1);
        let k = t.insert(Rc::clone(&token));
        assert_eq!(Rc::strong_count(&token), 2);
        assert!(t.discard_with(k, |_| {}));
        assert_eq!(Rc::strong_count(&token), 1);
        assert!(!t.discard_with(k, |_| {}));
        assert!(t.is_empty());
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u32),
        Remove(usize),
        Discard(usize),
    }

    proptest! {
        /// Against a map of live keys: same contents, keys handed out are the
        /// `vacant_key` announced, and freed keys are reused before the table grows.
        #[test]
        fn behaves_like_a_map(ops in proptest::collection::vec(prop_oneof![
            3 => any::<u32>().prop_map(Op::Insert),
            1 => (0usize..40).prop_map(Op::Remove),
            1 => (0usize..40).prop_map(Op::Discard),
        ], 0..300)) {
            let mut t = Table::with_capacity(0);
            let mut model: BTreeMap<usize, u32> = BTreeMap::new();
            let mut peak = 0;
            for op in ops {
                match op {
                    Op::Insert(v) => {
                        let want = t.vacant_key();
                        let k = t.insert(v);
                        prop_assert_eq!(k, want);
                        prop_assert!(model.insert(k, v).is_none());
                        peak = peak.max(model.len());
                    }
                    Op::Remove(k) => prop_assert_eq!(t.remove(k), model.remove(&k)),
                    Op::Discard(k) => {
                        prop_assert_eq!(t.discard_with(k, |_| {}), model.remove(&k).is_some())
                    }
                }
                prop_assert_eq!(t.len(), model.len());
                let live: Vec<(usize, u32)> = t.iter().map(|(k, v)| (k, *v)).collect();
                let want: Vec<(usize, u32)> = model.iter().map(|(k, v)| (*k, *v)).collect();
                prop_assert_eq!(live, want);
                // Freed keys are reused before the table grows: it never holds more
                // entries than were live at once.
                prop_assert!(t.entries.len() <= peak);
            }
        }
    }
}
